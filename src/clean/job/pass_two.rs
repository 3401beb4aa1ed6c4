//! Pass 2 of `clean`: each spill partition of an entity deduplicated and written, sorted by
//! key, as one Parquet part file.
//!
//! Invariants:
//! - One row per natural key survives: the newest crawl, then the latest input position.
//! - A part's rows are in the entity's key order (follows in the canonical pair order that
//!   friends joins on), and the same rows give the same bytes from run to run.
//! - The work per partition is proportional to its rows, not to the number of batches the
//!   spill left it in (docs/design/clean.md).

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampMillisecondType, UInt64Type};
use rayon::prelude::*;

use super::arrow_err;
use super::pass_one::partition_of;
use crate::clean::columns::SEQ_COLUMN;
use crate::clean::Entity;
use crate::dataset::partition;
use crate::dataset::{follows, schema};
use crate::error::Result;
use crate::hdfs::{FileSystems, Location};

/// Output rows gathered from the spilled batches at a time: a few megabytes that the Parquet
/// encoder reads back while they are still in cache, instead of a whole partition's copy in
/// freshly faulted memory.
const GATHER_ROWS: usize = 4096;
/// Gathers per partition, at most: one gather looks at every spilled batch of the partition
/// (its type and nulls), so a few large gathers keep that look a small share of the work
/// however many batches the partition has (docs/design/clean.md). By rows, not by batches,
/// so the output's pages are the same from run to run.
const GATHERS_PER_PARTITION: usize = 16;

/// Rows a gather takes from a partition of `rows` output rows.
fn gather_rows(rows: usize) -> usize {
    GATHER_ROWS.max(rows.div_ceil(GATHERS_PER_PARTITION))
}

/// What writing one partition of an entity gave.
#[derive(Default)]
struct PartOutcome {
    kept: u64,
    duplicates: u64,
    dangling: u64,
    without_author: u64,
    /// The partition's kept uids (users only).
    keys: Vec<i64>,
}

pub(in crate::clean) struct EntityOutcome {
    pub rows_out: u64,
    pub duplicates: u64,
    pub dangling: u64,
    pub without_author: u64,
    /// The kept keys (filled for users only: the known-user set).
    pub keys: KnownUsers,
}

/// The uids kept by this run, as each users partition left them: sorted, and found again
/// through the partition their key hashes to. Nothing to build once the users are written
/// (no set of every uid built on one thread at the end; docs/design/clean.md).
#[derive(Default)]
pub(in crate::clean) struct KnownUsers {
    pub(in crate::clean) by_partition: Vec<Vec<i64>>,
}

impl KnownUsers {
    fn contains(&self, uid: i64) -> bool {
        let p = partition_of((uid, 0), self.by_partition.len().max(1));
        self.by_partition
            .get(p)
            .is_some_and(|uids| uids.binary_search(&uid).is_ok())
    }
}

/// Dedupes every spill partition of an entity and writes one Parquet part file per partition
/// into `dir` (at least one, possibly empty, so the schema is always there).
pub(in crate::clean) fn write_entity(
    fs: &FileSystems,
    entity: Entity,
    parts: Partitions<'_>,
    dir: &Location,
    known_users: &KnownUsers,
    data_page_version: u8,
) -> Result<EntityOutcome> {
    let written: Vec<PartOutcome> = parts
        .written
        .par_iter()
        .map(|&p| -> Result<PartOutcome> {
            // An entity with no rows still gets part 0 (empty, so the schema is there).
            let batches = match (parts.load)(entity, p)? {
                Some(batches) => batches,
                None if p == 0 => Vec::new(),
                None => return Ok(PartOutcome::default()),
            };
            let total: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
            let winners = dedupe(entity, &batches)?;
            let kept = winners.len() as u64;
            let part = dir.join(&format!("part-{p:05}.parquet"));
            let mut props = schema::parquet_properties(entity, data_page_version);
            if entity == Entity::Follows {
                props = props
                    .into_builder()
                    .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
                        follows::PAIR_PARTITION_KEY.to_string(),
                        follows::footer_value(p, parts.total),
                    )]))
                    .build();
            }
            let mut writer =
                partition::ParquetWriter::create_staged(fs, &part, schema::schema(entity), props)?;
            let (mut dangling, mut without_author) = (0, 0);
            let mut keys = Vec::new();
            for rows in winners.chunks(gather_rows(winners.len())) {
                let out = gather(entity, &batches, rows)?;
                dangling += count_dangling(entity, &out, known_users);
                without_author += count_without_author(entity, &out);
                if entity == Entity::Users {
                    if let Some(uids) = out.column_by_name("uid") {
                        keys.extend_from_slice(uids.as_primitive::<Int64Type>().values());
                    }
                }
                writer.write(&out)?;
            }
            writer.finish()?;
            Ok(PartOutcome {
                kept,
                duplicates: total - kept,
                dangling,
                without_author,
                keys,
            })
        })
        .collect::<Result<_>>()?;
    let mut outcome = EntityOutcome {
        rows_out: 0,
        duplicates: 0,
        dangling: 0,
        without_author: 0,
        keys: KnownUsers {
            by_partition: vec![Vec::new(); parts.total],
        },
    };
    // Partition p's keys at index p: users' keys are (uid, 0), hashed as `contains` does.
    for (&p, part) in parts.written.iter().zip(written) {
        outcome.rows_out += part.kept;
        outcome.duplicates += part.duplicates;
        outcome.dangling += part.dangling;
        outcome.without_author += part.without_author;
        outcome.keys.by_partition[p] = part.keys;
    }
    Ok(outcome)
}

/// Which key partitions of an entity a pass 2 writes, and where their rows come from.
#[derive(Clone, Copy)]
pub(in crate::clean) struct Partitions<'a> {
    /// The partitions to write (all of them, or a reduce task's share).
    pub written: &'a [usize],
    /// Key partitions in all.
    pub total: usize,
    /// All rows of one partition, `None` when it has none.
    pub load: &'a (dyn Fn(Entity, usize) -> Result<Option<Vec<RecordBatch>>> + Sync),
}

/// Picks one row per natural key: the newest crawl, then the latest input position. Returns
/// the winners as (batch, row) positions sorted by key. Works across the spilled batches
/// without concatenating them.
fn dedupe(entity: Entity, batches: &[RecordBatch]) -> Result<Vec<(usize, usize)>> {
    let keys = schema::key_columns(entity);
    struct Cols {
        k0: arrow::array::Int64Array,
        k1: Option<arrow::array::Int64Array>,
        crawl: arrow::array::TimestampMillisecondArray,
        seq: arrow::array::UInt64Array,
    }
    let cols: Vec<Cols> = batches
        .iter()
        .map(|b| {
            let int = |name: &str| {
                b.column_by_name(name)
                    .map(|c| c.as_primitive::<Int64Type>().clone())
            };
            Cols {
                k0: int(keys[0]).expect("key column"),
                k1: keys.get(1).and_then(|k| int(k)),
                crawl: b
                    .column_by_name("crawl_time")
                    .expect("crawl_time")
                    .as_primitive::<TimestampMillisecondType>()
                    .clone(),
                seq: b
                    .column_by_name(SEQ_COLUMN)
                    .expect("seq")
                    .as_primitive::<UInt64Type>()
                    .clone(),
            }
        })
        .collect();
    let key = |(b, i): (usize, usize)| {
        let c = &cols[b];
        (c.k0.value(i), c.k1.as_ref().map_or(0, |a| a.value(i)))
    };
    let at = batches
        .iter()
        .enumerate()
        .flat_map(|(b, batch)| (0..batch.num_rows()).map(move |i| (b, i)));
    let order: Vec<(usize, usize)> = if entity == Entity::Follows {
        // Follows are laid out by canonical pair, `(min, max, follower)`: the two directions
        // of a pair become neighbouring rows, and friends finds the mutual ones in one pass
        // over a part, without sorting (see [`follows`]). Crawlers list follows by
        // follower, so this order is far from the input's: the sort keys are gathered first
        // and sorted in place, faster than comparing through the batches
        // (docs/design/clean.md).
        use std::cmp::Reverse;
        let mut keyed: Vec<_> = at
            .map(|(b, i)| {
                let (a, e) = key((b, i));
                let c = &cols[b];
                (
                    follows::sort_key(a, e),
                    Reverse(c.crawl.value(i)),
                    Reverse(c.seq.value(i)),
                    (b as u32, i as u32),
                )
            })
            .collect();
        keyed.par_sort_unstable();
        keyed
            .into_iter()
            .map(|(.., (b, i))| (b as usize, i as usize))
            .collect()
    } else {
        let mut order: Vec<(usize, usize)> = at.collect();
        order.par_sort_unstable_by(|&a, &b| {
            key(a)
                .cmp(&key(b))
                .then(cols[b.0].crawl.value(b.1).cmp(&cols[a.0].crawl.value(a.1)))
                .then(cols[b.0].seq.value(b.1).cmp(&cols[a.0].seq.value(a.1)))
        });
        order
    };
    let mut winners = Vec::with_capacity(order.len());
    let mut last = None;
    for idx in order {
        let k = key(idx);
        if last != Some(k) {
            winners.push(idx);
            last = Some(k);
        }
    }
    Ok(winners)
}

/// The output rows at `rows` (positions into the spilled batches), in the output schema (the
/// spill's sequence column left behind).
fn gather(entity: Entity, batches: &[RecordBatch], rows: &[(usize, usize)]) -> Result<RecordBatch> {
    let schema = schema::schema(entity);
    let columns = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            arrow::compute::interleave(&arrays, rows).map_err(arrow_err("interleave"))
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(schema, columns).map_err(arrow_err("batch"))
}

/// Kept posts and comments whose author is unknown (a null uid).
fn count_without_author(entity: Entity, batch: &RecordBatch) -> u64 {
    match entity {
        Entity::Posts | Entity::Comments => batch
            .column_by_name("uid")
            .map_or(0, |uid| uid.null_count() as u64),
        _ => 0,
    }
}

fn count_dangling(entity: Entity, batch: &RecordBatch, known: &KnownUsers) -> u64 {
    let cols: &[&str] = match entity {
        Entity::Users => return 0,
        Entity::Follows => &["follower", "followee"],
        Entity::Posts | Entity::Comments | Entity::Reposts => &["uid"],
    };
    let arrays: Vec<_> = cols
        .iter()
        .filter_map(|c| batch.column_by_name(c))
        .map(|c| c.as_primitive::<Int64Type>().clone())
        .collect();
    (0..batch.num_rows())
        .filter(|&i| {
            arrays
                .iter()
                .any(|a| a.is_null(i) || !known.contains(a.value(i)))
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Laid out as `write_entity` leaves it (each users partition's uids, sorted, at the
    /// partition's index), the known users answer exactly as a set of the same uids would.
    #[test]
    fn known_users_match_a_set_of_the_same_uids() {
        let partitions = 7;
        let kept: Vec<i64> = (0..5_000i64).map(|i| 1_000_000_000 + i * 3).collect();
        let mut known = KnownUsers {
            by_partition: vec![Vec::new(); partitions],
        };
        for &uid in kept.iter().rev() {
            known.by_partition[partition_of((uid, 0), partitions)].push(uid);
        }
        for uids in &mut known.by_partition {
            uids.sort_unstable();
        }
        assert!(known.by_partition.iter().all(|uids| !uids.is_empty()));
        let set: std::collections::HashSet<i64> = kept.iter().copied().collect();
        for uid in 999_999_990..1_000_015_010i64 {
            assert_eq!(known.contains(uid), set.contains(&uid), "{uid}");
        }
        assert!(!KnownUsers::default().contains(1_000_000_000));
    }
}

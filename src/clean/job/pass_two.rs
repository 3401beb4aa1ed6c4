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
use crate::clean::columns::{self, SEQ_COLUMN};
use crate::clean::Entity;
use crate::dataset::parquet_io;
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
    /// Rows kept, by input file index.
    kept_by_file: Vec<u64>,
    duplicates: u64,
    dangling: u64,
    without_author: u64,
    without_post: u64,
    /// The partition's kept uids (users only).
    keys: Vec<i64>,
}

pub(in crate::clean) struct EntityOutcome {
    pub rows_out: u64,
    /// Rows kept, by input file index (the files' share of `rows_out`).
    pub kept_by_file: Vec<u64>,
    pub duplicates: u64,
    pub dangling: u64,
    pub without_author: u64,
    pub without_post: u64,
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
            let winners = Winners::of(entity, batches)?;
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
                parquet_io::ParquetWriter::create_staged(fs, &part, schema::schema(entity), props)?;
            let (mut dangling, mut without_author, mut without_post) = (0, 0, 0);
            let mut keys = Vec::new();
            let step = gather_rows(winners.len());
            for start in (0..winners.len()).step_by(step) {
                let out = winners.slice(entity, start..winners.len().min(start + step))?;
                dangling += count_dangling(entity, &out, known_users);
                let authored = [Entity::Posts, Entity::Comments];
                without_author += count_nulls(entity, &authored, &out, "uid");
                without_post += count_nulls(entity, &[Entity::Comments], &out, "mid");
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
                kept_by_file: winners.kept_by_file(),
                duplicates: total - kept,
                dangling,
                without_author,
                without_post,
                keys,
            })
        })
        .collect::<Result<_>>()?;
    let mut outcome = EntityOutcome {
        rows_out: 0,
        kept_by_file: Vec::new(),
        duplicates: 0,
        dangling: 0,
        without_author: 0,
        without_post: 0,
        keys: KnownUsers {
            by_partition: vec![Vec::new(); parts.total],
        },
    };
    // Partition p's keys at index p: users' keys are (uid, 0), hashed as `contains` does.
    for (&p, part) in parts.written.iter().zip(written) {
        outcome.rows_out += part.kept;
        add_by_file(&mut outcome.kept_by_file, &part.kept_by_file);
        outcome.duplicates += part.duplicates;
        outcome.dangling += part.dangling;
        outcome.without_author += part.without_author;
        outcome.without_post += part.without_post;
        outcome.keys.by_partition[p] = part.keys;
    }
    Ok(outcome)
}

/// Adds counts by file index into `into`, growing it as needed.
pub(in crate::clean) fn add_by_file(into: &mut Vec<u64>, more: &[u64]) {
    if into.len() < more.len() {
        into.resize(more.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(more) {
        *a += b;
    }
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

/// The rows of a partition that survive dedupe, in output order.
enum Winners {
    /// Positions (batch, row) into the spilled batches, gathered from them slice by slice.
    Gathered {
        batches: Vec<RecordBatch>,
        rows: Vec<(usize, usize)>,
    },
    /// Follows, whose columns are all fixed-width: the rows themselves, sorted, from which
    /// each slice's columns are written in order, with no gather (the batches are dropped
    /// once read).
    Follows(Vec<FollowRow>),
}

impl Winners {
    fn of(entity: Entity, batches: Vec<RecordBatch>) -> Result<Winners> {
        if entity == Entity::Follows {
            return Ok(Winners::Follows(dedupe_follows(&batches)));
        }
        let rows = dedupe(entity, &batches)?;
        Ok(Winners::Gathered { batches, rows })
    }

    fn len(&self) -> usize {
        match self {
            Winners::Gathered { rows, .. } => rows.len(),
            Winners::Follows(rows) => rows.len(),
        }
    }

    /// How many of the winners each input file gave, by file index (their sequence numbers
    /// say which).
    fn kept_by_file(&self) -> Vec<u64> {
        let mut by_file: Vec<u64> = Vec::new();
        let mut add = |seq: u64| {
            let file = columns::file_of(seq);
            if by_file.len() <= file {
                by_file.resize(file + 1, 0);
            }
            by_file[file] += 1;
        };
        match self {
            Winners::Follows(rows) => rows.iter().for_each(|r| add(r.seq.0)),
            Winners::Gathered { batches, rows } => {
                let seqs: Vec<&arrow::array::UInt64Array> = batches
                    .iter()
                    .map(|b| {
                        b.column_by_name(SEQ_COLUMN)
                            .expect("spilled batches have their sequence")
                            .as_primitive::<UInt64Type>()
                    })
                    .collect();
                rows.iter().for_each(|&(b, i)| add(seqs[b].value(i)));
            }
        }
        by_file
    }

    /// The winners at `range`, in the output schema (the spill's sequence column left behind).
    fn slice(&self, entity: Entity, range: std::ops::Range<usize>) -> Result<RecordBatch> {
        match self {
            Winners::Gathered { batches, rows } => gather(entity, batches, &rows[range]),
            Winners::Follows(rows) => follows_batch(&rows[range]),
        }
    }
}

/// A follow edge as pass 2 sorts it: ordered by its place in the part (the canonical pair,
/// then the follower), then newest crawl and latest input position first, so the first row
/// of each edge is the one kept (with the earliest follow time of its duplicates).
///
/// The place is packed into two words, `min` and `max << 1 | (follower is max)`: ids are
/// positive `i64`s ([`crate::field_rules::parse_id`]), so this orders exactly as
/// [`follows::sort_key`] does, and a row is 40 bytes instead of 56, which the sort moves and
/// compares less of. A missing follow time is [`NO_TIME`].
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct FollowRow {
    key: [u64; 2],
    crawl: std::cmp::Reverse<i64>,
    seq: std::cmp::Reverse<u64>,
    followed_at: i64,
}

/// A follow row's missing follow time: a kept time is never before Weibo's launch
/// ([`crate::field_rules::parse_time`]).
const NO_TIME: i64 = i64::MIN;

impl FollowRow {
    fn key(follower: i64, followee: i64) -> [u64; 2] {
        debug_assert!(follower >= 0 && followee >= 0, "ids are positive");
        let (a, b) = follows::canonical_pair(follower, followee);
        [a as u64, (b as u64) << 1 | u64::from(follower != a)]
    }

    fn follower(&self) -> i64 {
        let [a, packed] = self.key;
        if packed & 1 == 1 {
            (packed >> 1) as i64
        } else {
            a as i64
        }
    }

    fn followee(&self) -> i64 {
        let [a, packed] = self.key;
        if packed & 1 == 1 {
            a as i64
        } else {
            (packed >> 1) as i64
        }
    }
}

/// Follows are laid out by canonical pair, `(min, max, follower)`: the two directions of a
/// pair become neighbouring rows, and friends finds the mutual ones in one pass over a part,
/// without sorting (see [`follows`]). Crawlers list follows by follower, so this order is far
/// from the input's. The rows are read out of the batches in order and sorted whole: cheaper
/// than sorting positions and gathering every column through them (docs/design/clean.md).
fn dedupe_follows(batches: &[RecordBatch]) -> Vec<FollowRow> {
    use std::cmp::Reverse;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut sorted = Vec::with_capacity(rows);
    for b in batches {
        let column = |name: &str| b.column_by_name(name).expect("follows column");
        let follower = column("follower").as_primitive::<Int64Type>();
        let followee = column("followee").as_primitive::<Int64Type>();
        let at = column("followed_at").as_primitive::<TimestampMillisecondType>();
        let crawl = column("crawl_time").as_primitive::<TimestampMillisecondType>();
        let seq = column(SEQ_COLUMN).as_primitive::<UInt64Type>();
        sorted.extend((0..b.num_rows()).map(|i| FollowRow {
            key: FollowRow::key(follower.value(i), followee.value(i)),
            crawl: Reverse(crawl.value(i)),
            seq: Reverse(seq.value(i)),
            followed_at: if at.is_valid(i) { at.value(i) } else { NO_TIME },
        }));
    }
    sorted.par_sort_unstable();
    // The kept row takes the earliest follow time any record of the edge knows, as the
    // history's fold does across nights (docs/formats.md, Duplicates).
    sorted.dedup_by(|later, first| {
        let same = later.key == first.key;
        let known = later.followed_at != NO_TIME;
        if same && known && (first.followed_at == NO_TIME || later.followed_at < first.followed_at)
        {
            first.followed_at = later.followed_at;
        }
        same
    });
    sorted
}

/// Follows rows in the output schema.
fn follows_batch(rows: &[FollowRow]) -> Result<RecordBatch> {
    use arrow::array::{ArrayRef, Int64Array, TimestampMillisecondArray};
    use std::sync::Arc;
    let ids = |id: fn(&FollowRow) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(rows.iter().map(id)))
    };
    let columns: Vec<ArrayRef> = vec![
        ids(FollowRow::follower),
        ids(FollowRow::followee),
        Arc::new(
            rows.iter()
                .map(|r| (r.followed_at != NO_TIME).then_some(r.followed_at))
                .collect::<TimestampMillisecondArray>()
                .with_timezone("UTC"),
        ),
        Arc::new(
            TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.crawl.0))
                .with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(schema::schema(Entity::Follows), columns).map_err(arrow_err("batch"))
}

/// Picks one row per natural key: the newest crawl, then the latest input position. Returns
/// the winners as (batch, row) positions sorted by key. Works across the spilled batches
/// without concatenating them. (Follows go through [`dedupe_follows`].)
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
    let mut order: Vec<(usize, usize)> = at.collect();
    order.par_sort_unstable_by(|&a, &b| {
        key(a)
            .cmp(&key(b))
            .then(cols[b.0].crawl.value(b.1).cmp(&cols[a.0].crawl.value(a.1)))
            .then(cols[b.0].seq.value(b.1).cmp(&cols[a.0].seq.value(a.1)))
    });
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

/// Kept rows with a null `column`, counted for the entities `of` only: posts and comments
/// without an author (`uid`), comments whose post the crawl did not record (`mid`).
fn count_nulls(entity: Entity, of: &[Entity], batch: &RecordBatch, column: &str) -> u64 {
    if !of.contains(&entity) {
        return 0;
    }
    batch
        .column_by_name(column)
        .map_or(0, |c| c.null_count() as u64)
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
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::clean::columns::{numbered, SpillBuilder};
    use crate::clean::{Follow, Row};

    /// Spilled batches of follows as pass 1 leaves them: the edges in input order, cut into
    /// batches of `cut` rows, each edge's input position its sequence number.
    fn spilled(edges: &[(i64, i64, Option<i64>, i64)], cut: usize) -> Vec<RecordBatch> {
        let rows: Vec<Row> = edges
            .iter()
            .map(|&(follower, followee, followed_at, crawl_time)| {
                Row::Follow(Follow {
                    follower,
                    followee,
                    followed_at,
                    crawl_time,
                })
            })
            .collect();
        let seq = numbered(&rows);
        let mut builder = SpillBuilder::new(Entity::Follows);
        seq.chunks(cut.max(1))
            .map(|chunk| {
                builder.append(chunk);
                builder.finish().unwrap()
            })
            .collect()
    }

    /// Ids for the follows dedupe: few, so edges repeat, and some as large as an id gets, so
    /// the packed sort key's top bits are exercised.
    fn id() -> impl Strategy<Value = i64> {
        prop_oneof![1i64..12, Just(i64::MAX), Just(i64::MAX - 1), Just(1 << 62)]
    }

    proptest! {
        /// Pass 2's follows equal a naive dedupe: per edge, the newest crawl, then the latest
        /// input position, wins, with the earliest follow time any of its records knows; the
        /// winners in canonical pair order.
        #[test]
        fn follows_dedupe_equals_a_naive_one(
            edges in prop::collection::vec(
                (id(), id(), prop::option::of(0i64..5), 0i64..4), 0..300),
            cut in 1usize..64,
        ) {
            // Per edge: (crawl time, input position) of the winner so far, and its follow time.
            type Winner = ((i64, usize), Option<i64>);
            let mut naive: BTreeMap<(i64, i64), Winner> = BTreeMap::new();
            let mut earliest: BTreeMap<(i64, i64), i64> = BTreeMap::new();
            for (i, &(follower, followee, at, crawl)) in edges.iter().enumerate() {
                let entry = naive.entry((follower, followee)).or_insert(((crawl, i), at));
                if (crawl, i) > entry.0 {
                    *entry = ((crawl, i), at);
                }
                if let Some(t) = at {
                    let e = earliest.entry((follower, followee)).or_insert(t);
                    *e = (*e).min(t);
                }
            }
            let mut expected: Vec<(i64, i64, Option<i64>, i64)> = naive
                .into_iter()
                .map(|(edge, ((crawl, _), _))| (edge.0, edge.1, earliest.get(&edge).copied(), crawl))
                .collect();
            expected.sort_by_key(|&(follower, followee, ..)| follows::sort_key(follower, followee));

            let winners = Winners::of(Entity::Follows, spilled(&edges, cut)).unwrap();
            prop_assert_eq!(winners.len(), expected.len());
            let mut got = Vec::new();
            if !expected.is_empty() {
                let batch = winners.slice(Entity::Follows, 0..winners.len()).unwrap();
                prop_assert_eq!(batch.schema(), schema::schema(Entity::Follows));
                let ids = |c: usize| batch.column(c).as_primitive::<Int64Type>().clone();
                let times =
                    |c: usize| batch.column(c).as_primitive::<TimestampMillisecondType>().clone();
                let (follower, followee, at, crawl) = (ids(0), ids(1), times(2), times(3));
                for i in 0..batch.num_rows() {
                    got.push((
                        follower.value(i),
                        followee.value(i),
                        at.is_valid(i).then(|| at.value(i)),
                        crawl.value(i),
                    ));
                }
            }
            prop_assert_eq!(got, expected);
        }
    }

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

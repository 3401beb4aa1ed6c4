//! `clean` split over machines: its two passes as two stages, each cut into slices, joined by
//! a shuffle on HDFS (docs/design/yarn.md).
//!
//! - **Map** slice `i/N` ([`run_map`]) runs pass 1 over the input files whose index in the
//!   whole sorted input is `i` mod N. Each record keeps its place in the whole input (file
//!   index, line), so ties between duplicates go the same way as in one run. It writes its
//!   spill as the shuffle, `shuffle/<entity>/p=<p>/map-<i>.arrows` (Arrow IPC), and its
//!   files' rejects as `rejects/rejects-<file index>.jsonl`. Its report counts what it read
//!   and rejected.
//! - **Reduce** slice `j/N` ([`run_reduce`]) runs pass 2 over the key partitions `p` with
//!   `p mod N == j`. It reads every map's shuffle of each partition, dedupes, and writes
//!   `<entity>/dt=<date>/part-<p>.parquet` as one run does, so the union of the reduces is
//!   one run's output. Dangling rows are counted against every users partition's uids, read
//!   from the shuffle: a user's natural key is its uid, so the uids there are the users kept.
//!
//! The dedupe by natural key is global: every row of a key lands in one partition, whichever
//! map read it. Both stages need the same key partitions, so [`run_map`] and [`run_reduce`]
//! take them from `options.key_partitions`, which the caller fixes for the whole job.

use std::collections::BTreeMap;
use std::io::Write as _;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use arrow::ipc::writer::FileWriter;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::columns;
use super::job::{
    add_by_file, pass_one, write_entity, CleanOptions, CleanReport, EntityCounts, KnownUsers,
    Partitions, SpillSet,
};
use super::Entity;
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

/// The shuffle's folder in a map's output.
pub const SHUFFLE: &str = "shuffle";
/// The maps' rejects' folder in a map's output.
pub const REJECTS: &str = "rejects";

fn partitions_of(options: &CleanOptions) -> Result<usize> {
    options
        .key_partitions
        .filter(|&p| p > 0)
        .ok_or_else(|| Error::Usage("a sliced clean needs its --key-partitions".into()))
}

/// One map slice: pass 1 over this slice's files, its spill written under
/// `options.output` as the shuffle. The report's entities count records in and rejected.
pub fn run_map(
    fs: &FileSystems,
    options: &CleanOptions,
    slice: Slice,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<CleanReport> {
    let started = std::time::Instant::now();
    let partitions = partitions_of(options)?;
    let output = fs.parse(&options.output)?;
    let files = fs.expand_inputs(&options.inputs)?;
    let mine: Vec<(usize, &crate::hdfs::FileEntry)> = files
        .iter()
        .enumerate()
        .filter(|(index, _)| *index as u32 % slice.count == slice.index)
        .collect();
    let (spill, mut report) = pass_one(fs, &mine, options, partitions, progress)?;
    let cells: Vec<(Entity, usize)> = Entity::ALL
        .into_iter()
        .flat_map(|e| (0..partitions).map(move |p| (e, p)))
        .collect();
    cells
        .par_iter()
        .try_for_each(|&(entity, p)| -> Result<()> {
            let Some(batches) = spill.load(entity, p)? else {
                return Ok(());
            };
            let file = output
                .join(SHUFFLE)
                .join(entity.name())
                .join(&format!("p={p:05}"))
                .join(&format!("map-{:05}.arrows", slice.index));
            let mut sink = fs.create_atomic(&file)?;
            {
                let ipc = |e: arrow::error::ArrowError| Error::Io {
                    op: "write shuffle",
                    path: file.to_string(),
                    source: std::io::Error::other(e.to_string()),
                };
                let mut writer =
                    FileWriter::try_new(&mut sink, &columns::spill_schema(entity)).map_err(ipc)?;
                for batch in &batches {
                    writer.write(batch).map_err(ipc)?;
                }
                writer.finish().map_err(ipc)?;
            }
            sink.flush().map_err(|e| Error::Io {
                op: "write shuffle",
                path: file.to_string(),
                source: e,
            })?;
            sink.commit()
        })?;
    for &(index, _) in &mine {
        let name = SpillSet::rejects_name(index);
        let Some(mut local) = spill.dir.open(&name)? else {
            continue;
        };
        if local.metadata().map(|m| m.len()).unwrap_or(0) == 0 {
            continue;
        }
        let target = output.join(REJECTS).join(&name);
        let mut sink = fs.create_atomic(&target)?;
        std::io::copy(&mut local, &mut sink)
            .map_err(|e| spill.dir.error("copy rejects", &name, e))?;
        sink.commit()?;
    }
    report.output = output.to_string();
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// One reduce slice: pass 2 over this slice's key partitions, reading the shuffle of every
/// map under `shuffle`, written under `options.output` as one run writes its parts. The
/// report's entities count rows out, duplicates, dangling rows and rows without author.
pub fn run_reduce(
    fs: &FileSystems,
    options: &CleanOptions,
    slice: Slice,
    shuffle: &Location,
) -> Result<CleanReport> {
    let started = std::time::Instant::now();
    let partitions = partitions_of(options)?;
    let output = fs.parse(&options.output)?;
    let load = |entity: Entity, p: usize| load_partition(fs, shuffle, entity, p);
    let known = KnownUsers {
        by_partition: (0..partitions)
            .into_par_iter()
            .map(|p| -> Result<Vec<i64>> {
                let mut uids = Vec::new();
                for batch in load(Entity::Users, p)?.unwrap_or_default() {
                    if let Some(column) = batch.column_by_name("uid") {
                        uids.extend_from_slice(column.as_primitive::<Int64Type>().values());
                    }
                }
                uids.sort_unstable();
                uids.dedup();
                Ok(uids)
            })
            .collect::<Result<_>>()?,
    };
    let written: Vec<usize> = (0..partitions)
        .filter(|p| *p as u32 % slice.count == slice.index)
        .collect();
    let dt = format!("dt={}", options.date);
    let mut entities = BTreeMap::new();
    let mut kept_by_file = Vec::new();
    for entity in Entity::ALL {
        let parts = Partitions {
            written: &written,
            total: partitions,
            load: &load,
        };
        let dir = output.join(entity.name()).join(&dt);
        let outcome = write_entity(fs, entity, parts, &dir, &known, options.data_page_version)?;
        add_by_file(&mut kept_by_file, &outcome.kept_by_file);
        entities.insert(
            entity.name().to_string(),
            EntityCounts {
                records_out: outcome.rows_out,
                duplicates: outcome.duplicates,
                dangling: outcome.dangling,
                without_author: outcome.without_author,
                without_post: outcome.without_post,
                ..EntityCounts::default()
            },
        );
    }
    Ok(CleanReport {
        date: options.date.clone(),
        output: output.to_string(),
        entities,
        unattributed: EntityCounts::default(),
        files: Vec::new(),
        kept_by_file,
        bytes_in: 0,
        seconds: started.elapsed().as_secs_f64(),
        mb_per_s: 0.0,
        committed: false,
        history: None,
    })
}

/// Every map's shuffle of one partition (`None` when no map had a row of it).
fn load_partition(
    fs: &FileSystems,
    shuffle: &Location,
    entity: Entity,
    p: usize,
) -> Result<Option<Vec<RecordBatch>>> {
    let dir = shuffle
        .join(SHUFFLE)
        .join(entity.name())
        .join(&format!("p={p:05}"));
    if !fs.exists(&dir)? {
        return Ok(None);
    }
    let mut batches = Vec::new();
    for entry in fs.list(&dir, false)? {
        let name = entry.location.file_name().unwrap_or_default();
        if entry.is_dir || !name.ends_with(".arrows") {
            continue;
        }
        let bytes = fs.read_to_vec(&entry.location)?;
        let bad = |e: arrow::error::ArrowError| Error::BadInput {
            path: entry.location.to_string(),
            line: 0,
            reason: format!("not a shuffle file: {e}"),
        };
        let reader = arrow::ipc::reader::FileReader::try_new(std::io::Cursor::new(bytes), None)
            .map_err(bad)?;
        for batch in reader {
            batches.push(batch.map_err(bad)?);
        }
    }
    Ok((!batches.is_empty()).then_some(batches))
}

/// What a slice's report counts, as read back from its JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceCounts {
    pub entities: BTreeMap<String, EntityCounts>,
    pub unattributed: EntityCounts,
    #[serde(default)]
    pub bytes_in: u64,
    /// The reduces' rows kept, by input file index.
    #[serde(default)]
    pub kept_by_file: Vec<u64>,
}

/// The counts of the whole job from its maps' and reduces' reports: what was read and
/// rejected from the maps, what was kept and dropped as duplicate from the reduces (repeated
/// headers, counted among duplicates by the maps, too).
pub fn merge(maps: &[SliceCounts], reduces: &[SliceCounts]) -> SliceCounts {
    let mut merged = SliceCounts::default();
    let add = |into: &mut EntityCounts, from: &EntityCounts| {
        into.records_in += from.records_in;
        into.records_out += from.records_out;
        into.rejected += from.rejected;
        into.duplicates += from.duplicates;
        into.dangling += from.dangling;
        into.without_author += from.without_author;
        into.without_post += from.without_post;
        into.crawl_time_defaulted += from.crawl_time_defaulted;
        for (reason, n) in &from.rejected_by_reason {
            *into.rejected_by_reason.entry(reason.clone()).or_default() += n;
        }
    };
    for slice in maps.iter().chain(reduces) {
        for (name, counts) in &slice.entities {
            add(merged.entities.entry(name.clone()).or_default(), counts);
        }
        add(&mut merged.unattributed, &slice.unattributed);
        merged.bytes_in += slice.bytes_in;
        add_by_file(&mut merged.kept_by_file, &slice.kept_by_file);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_counts_take_reads_from_maps_and_rows_from_reduces() {
        let counts = |records_in, rejected, records_out, duplicates| EntityCounts {
            records_in,
            rejected,
            rejected_by_reason: if rejected > 0 {
                [("bad_id".to_string(), rejected)].into()
            } else {
                BTreeMap::new()
            },
            records_out,
            duplicates,
            ..EntityCounts::default()
        };
        let slice = |c: EntityCounts| SliceCounts {
            entities: [("users".to_string(), c)].into(),
            unattributed: EntityCounts::default(),
            bytes_in: 0,
            kept_by_file: Vec::new(),
        };
        let maps = [slice(counts(10, 1, 0, 1)), slice(counts(5, 2, 0, 0))];
        let reduces = [slice(counts(0, 0, 7, 2)), slice(counts(0, 0, 2, 0))];
        let merged = merge(&maps, &reduces);
        let users = &merged.entities["users"];
        assert_eq!(
            (
                users.records_in,
                users.rejected,
                users.records_out,
                users.duplicates
            ),
            (15, 3, 9, 3)
        );
        assert_eq!(users.rejected_by_reason["bad_id"], 3);
        assert_eq!(
            users.records_in,
            users.records_out + users.rejected + users.duplicates
        );
    }
}

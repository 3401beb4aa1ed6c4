//! Pass 1 of `clean`: every input file read on a thread of its own, its records cleaned in
//! parallel chunks, each cleaned row appended to the spill partition its key hashes to, each
//! reject written in line order to the file's reject log.
//!
//! Invariants:
//! - Every record read is counted once, as a spilled row, a reject or a repeated header.
//! - A row's spill partition is the part it is written to in pass 2: follows go by their
//!   canonical pair ([`crate::dataset::follows`]), everything else by its natural key.
//! - A row's sequence number (input file index, line) orders ties between duplicates, so the
//!   winner does not depend on which thread got there first.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use super::spill_set::SpillSet;
use super::{CleanOptions, CleanReport, EntityCounts};
use crate::clean::{clean_record, raw_excerpt, Cleaned, Entity, Reject, Row};
use crate::dataset::follows;
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems};
use crate::raw::{self, FileCounts, FileSummary, Item};

/// Records cleaned and spilled together: enough to spread over both cores and to give each
/// spill partition a run of rows per lock; much larger chunks make the reader and the
/// cleaners take turns instead of overlapping. (A spill batch's size is the slot's, not the
/// chunk's: [`SpillSet`].)
const CHUNK_ROWS: usize = 16384;
/// Raw bytes per spill partition: what one partition's dedupe holds in memory, roughly.
const PARTITION_BYTES: u64 = 64 << 20;
#[derive(Default)]
struct Counters {
    records_in: AtomicU64,
    rejected: Mutex<BTreeMap<Reject, u64>>,
    repeated_headers: AtomicU64,
    crawl_time_defaulted: AtomicU64,
}

impl Counters {
    fn reject(&self, reason: Reject) {
        *self
            .rejected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(reason)
            .or_default() += 1;
    }
}

fn key_of(row: &Row) -> (i64, i64) {
    match row {
        Row::User(u) => (u.uid, 0),
        Row::Post(p) => (p.mid, 0),
        Row::Follow(f) => (f.follower, f.followee),
        Row::Comment(c) => (c.cid, 0),
        Row::Repost(r) => (r.mid, 0),
    }
}

/// The key a row is partitioned by: its natural key, except that a follow edge goes by its
/// canonical pair, so both directions of a pair land in the same part (the layout friends
/// joins on: [`follows`]).
fn partition_key(row: &Row) -> (i64, i64) {
    match row {
        Row::Follow(f) => follows::canonical_pair(f.follower, f.followee),
        _ => key_of(row),
    }
}

/// Which spill partition (and output part) a partition key belongs to.
pub(super) fn partition_of(key: (i64, i64), partitions: usize) -> usize {
    follows::pair_part(key, partitions)
}

#[derive(Serialize)]
struct RejectLine<'a> {
    entity: Option<&'a str>,
    reason: &'a str,
    file: &'a str,
    line: u64,
    raw: &'a str,
}

/// Key partitions of a run over `bytes_in` of input: `--key-partitions`, else one per
/// [`PARTITION_BYTES`].
pub(in crate::clean) fn key_partitions(options: &CleanOptions, bytes_in: u64) -> usize {
    options
        .key_partitions
        .unwrap_or_else(|| default_key_partitions(bytes_in))
        .max(1)
}

/// The key partitions a run over `bytes_in` of input takes without `--key-partitions`.
pub fn default_key_partitions(bytes_in: u64) -> usize {
    (bytes_in / PARTITION_BYTES + 1).clamp(1, 512) as usize
}

/// Pass 1 over `files` (each with its index in the whole input, which orders ties between
/// records): read, clean, spill. Returns the spill and a report of what was read (no rows
/// out yet).
pub(in crate::clean) fn pass_one(
    fs: &FileSystems,
    files: &[(usize, &FileEntry)],
    options: &CleanOptions,
    partitions: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(SpillSet, CleanReport)> {
    let started = Instant::now();
    let bytes_in: u64 = files.iter().map(|(_, f)| f.len).sum();
    log::info!(
        "clean {} files, {:.1} MB, {partitions} key partitions",
        files.len(),
        bytes_in as f64 / 1e6
    );
    let spill = SpillSet::new(
        options.spill_dir.as_deref(),
        partitions,
        options.spill_memory,
    )?;
    let counters: HashMap<Option<Entity>, Counters> = Entity::ALL
        .into_iter()
        .map(Some)
        .chain([None])
        .map(|e| (e, Counters::default()))
        .collect();
    let summaries: Vec<FileSummary> = files
        .par_iter()
        .map(|&(index, file)| {
            let summary = read_one(fs, file, index, options, &spill, &counters)?;
            progress(file.len);
            Ok(summary)
        })
        .collect::<Result<_>>()?;
    spill.finish()?;
    log::info!(
        "pass 1 (read, clean, spill) took {:.2}s; spill: {} bytes held in memory, {} bytes \
         written to files",
        started.elapsed().as_secs_f64(),
        spill.held.load(Ordering::Relaxed),
        spill.spilled.load(Ordering::Relaxed)
    );
    let mut report = CleanReport {
        date: options.date.clone(),
        output: String::new(),
        entities: BTreeMap::new(),
        unattributed: EntityCounts::default(),
        files: summaries,
        kept_by_file: Vec::new(),
        bytes_in,
        seconds: 0.0,
        mb_per_s: 0.0,
        committed: false,
        history: None,
    };
    for (entity, c) in &counters {
        let rejected = c.rejected.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let counts = EntityCounts {
            records_in: c.records_in.load(Ordering::Relaxed),
            rejected: rejected.values().sum(),
            rejected_by_reason: rejected
                .iter()
                .map(|(r, n)| (r.code().to_string(), *n))
                .collect(),
            duplicates: c.repeated_headers.load(Ordering::Relaxed),
            crawl_time_defaulted: c.crawl_time_defaulted.load(Ordering::Relaxed),
            ..EntityCounts::default()
        };
        match entity {
            Some(e) => {
                report.entities.insert(e.name().to_string(), counts);
            }
            None => report.unattributed = counts,
        }
    }
    Ok((spill, report))
}

/// Reads one file on a thread of its own while the calling thread cleans and spills the
/// chunks it sends (a bounded channel keeps at most a few chunks in flight). Items keep
/// their file order, so the file's rejects are written in line order whatever the timing.
fn read_one(
    fs: &FileSystems,
    file: &FileEntry,
    index: usize,
    options: &CleanOptions,
    spill: &SpillSet,
    counters: &HashMap<Option<Entity>, Counters>,
) -> Result<FileSummary> {
    let path = file.location.to_string();
    let rejects_name = SpillSet::rejects_name(index);
    let mut rejects = spill.dir.create_file(&rejects_name, 8 << 10)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Item>>(2);
    // Cleaned chunks come back to the reader to be emptied and refilled: their records were
    // allocated on the reader's thread, and freeing them there is cheap, where freeing them on
    // the cleaning side goes through the allocator's slower cross-thread path.
    let (used_tx, used_rx) = std::sync::mpsc::channel::<Vec<Item>>();
    std::thread::scope(|scope| -> Result<FileSummary> {
        let reader = scope.spawn(move || {
            let mut pending: Vec<Item> = Vec::with_capacity(CHUNK_ROWS);
            let mut receiver_gone = false;
            let read = raw::ReadOptions {
                layouts: Some(&options.layouts),
                format: options.format,
                skip_corrupt_files: options.skip_corrupt_files,
                head_bytes: None,
            };
            let summary = raw::read_file(fs, file, read, &mut |item| {
                if receiver_gone {
                    return;
                }
                pending.push(item);
                if pending.len() >= CHUNK_ROWS {
                    let next = match used_rx.try_recv() {
                        Ok(mut used) => {
                            used.clear();
                            used
                        }
                        Err(_) => Vec::with_capacity(CHUNK_ROWS),
                    };
                    let chunk = std::mem::replace(&mut pending, next);
                    receiver_gone = tx.send(chunk).is_err();
                }
            });
            if !receiver_gone && !pending.is_empty() {
                let _ = tx.send(pending);
            }
            summary
        });
        let mut failure = None;
        let mut tally = FileCounts::default();
        for chunk in rx {
            if failure.is_none() {
                let file = FileTally {
                    index,
                    path: &path,
                    rejects: &mut rejects,
                    counts: &mut tally,
                };
                if let Err(e) = process_chunk(&chunk, file, options, spill, counters) {
                    failure = Some(e);
                }
            }
            // Once the reader is done, the last chunks are freed here.
            let _ = used_tx.send(chunk);
        }
        let mut summary = reader
            .join()
            .map_err(|_| Error::Cluster(format!("reader thread of {path} panicked")))??;
        summary.counts = tally;
        if let Some(e) = failure {
            return Err(e);
        }
        rejects
            .flush()
            .map_err(|e| spill.dir.error("write", &rejects_name, e))?;
        Ok(summary)
    })
}

/// The file a chunk is of: its place in the input, its path, its reject log, and its counts
/// so far (its rows kept are counted in pass 2).
struct FileTally<'a> {
    index: usize,
    path: &'a str,
    rejects: &'a mut BufWriter<File>,
    counts: &'a mut FileCounts,
}

impl FileTally<'_> {
    fn reject(&mut self, reason: Reject) {
        self.counts.rejected += 1;
        *self
            .counts
            .rejected_by_reason
            .entry(reason.code().to_string())
            .or_default() += 1;
    }
}

/// Counts, cleans (in parallel) and spills one chunk of a file's items.
fn process_chunk(
    chunk: &[Item],
    file: FileTally<'_>,
    options: &CleanOptions,
    spill: &SpillSet,
    counters: &HashMap<Option<Entity>, Counters>,
) -> Result<()> {
    let mut file = file;
    let (index, path) = (file.index, file.path);
    type Outcome<'a> = Option<(
        u64,
        Entity,
        std::result::Result<(usize, Cleaned<'a>), Reject>,
    )>;
    let cleaned: Vec<Outcome> = chunk
        .par_iter()
        .map(|item| match item {
            Item::Record {
                line,
                entity,
                record,
            } => Some((
                *line,
                *entity,
                clean_record(*entity, record, options.default_crawl_ms).map(|cleaned| {
                    let p = partition_of(partition_key(&cleaned.row), spill.partitions);
                    (p, cleaned)
                }),
            )),
            _ => None,
        })
        .collect();
    // Only the bookkeeping that needs input order happens here, on one thread: counts (kept
    // per chunk, added once), rejects in line order, and each spill partition's row indices.
    let slot = |e: Option<Entity>| e.map_or(Entity::ALL.len(), Entity::index);
    let mut records_in = [0u64; Entity::ALL.len() + 1];
    let mut repeated_headers = [0u64; Entity::ALL.len() + 1];
    let mut crawl_time_defaulted = [0u64; Entity::ALL.len() + 1];
    // Row indices per entity and spill partition, at `entity index * partitions + partition`.
    let partitions = spill.partitions;
    let mut groups: Vec<Vec<u32>> = vec![Vec::new(); Entity::ALL.len() * partitions];
    file.counts.records_in += chunk.len() as u64;
    for (i, (item, outcome)) in chunk.iter().zip(&cleaned).enumerate() {
        match (item, outcome) {
            (Item::Record { record, .. }, Some((line, entity, result))) => {
                records_in[slot(Some(*entity))] += 1;
                match result {
                    Ok((p, cleaned)) => {
                        groups[entity.index() * partitions + p].push(i as u32);
                        crawl_time_defaulted[slot(Some(*entity))] +=
                            u64::from(cleaned.crawl_defaulted);
                    }
                    Err(reason) => {
                        counters[&Some(*entity)].reject(*reason);
                        file.reject(*reason);
                        write_reject(
                            file.rejects,
                            Some(*entity),
                            *reason,
                            path,
                            *line,
                            &raw_excerpt(*entity, record),
                        )?;
                    }
                }
            }
            (
                Item::Rejected {
                    line,
                    entity,
                    reason,
                    excerpt,
                },
                _,
            ) => {
                records_in[slot(*entity)] += 1;
                counters[entity].reject(*reason);
                file.reject(*reason);
                write_reject(file.rejects, *entity, *reason, path, *line, excerpt)?;
            }
            (Item::RepeatedHeader { entity, .. }, _) => {
                records_in[slot(Some(*entity))] += 1;
                repeated_headers[slot(Some(*entity))] += 1;
                file.counts.duplicates += 1;
            }
            (Item::Record { .. }, None) => unreachable!("every record was cleaned"),
        }
    }
    for (entity, c) in counters {
        c.records_in
            .fetch_add(records_in[slot(*entity)], Ordering::Relaxed);
        c.repeated_headers
            .fetch_add(repeated_headers[slot(*entity)], Ordering::Relaxed);
        c.crawl_time_defaulted
            .fetch_add(crawl_time_defaulted[slot(*entity)], Ordering::Relaxed);
    }
    // Partitions have their own spill files (and locks): building and writing their batches
    // in parallel keeps both cores busy while the reader thread parses the next chunk.
    groups
        .into_par_iter()
        .enumerate()
        .filter(|(_, indices)| !indices.is_empty())
        .try_for_each(|(group, indices)| {
            let (entity, p) = (Entity::ALL[group / partitions], group % partitions);
            let rows: Vec<(u64, &Row)> = indices
                .iter()
                .map(|&i| match &cleaned[i as usize] {
                    Some((line, _, Ok((_, cleaned)))) => {
                        (crate::clean::columns::seq(index, *line), &cleaned.row)
                    }
                    _ => unreachable!("only cleaned rows are grouped"),
                })
                .collect();
            spill.append(entity, p, &rows)
        })
}

fn write_reject(
    w: &mut BufWriter<File>,
    entity: Option<Entity>,
    reason: Reject,
    file: &str,
    line: u64,
    raw: &str,
) -> Result<()> {
    let rec = RejectLine {
        entity: entity.map(Entity::name),
        reason: reason.code(),
        file,
        line,
        raw,
    };
    let mut text = serde_json::to_string(&rec).unwrap_or_default();
    text.push('\n');
    w.write_all(text.as_bytes()).map_err(|e| Error::Io {
        op: "write rejects",
        path: file.to_string(),
        source: e,
    })
}

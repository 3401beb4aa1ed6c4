//! The `clean` job: raw files in, deduplicated Parquet partitions, rejects and a report out.
//!
//! Two passes keep memory bounded whatever the input size:
//! 1. Every file is read (in parallel across files, cleaning in parallel within a file) and
//!    each cleaned row is appended to a local spill file chosen by the hash of its natural
//!    key (Arrow IPC, one per entity and key partition). Rejects stream to a local file.
//! 2. Each spill partition, small enough to fit in memory, is deduplicated (newest crawl
//!    wins; ties go to the later input record) and written, sorted by key, as one Parquet
//!    part file.
//!
//! Invariants:
//! - Per entity, `records_in == records_out + rejected + duplicates`; records whose entity
//!   no reader could tell are reported apart as `unattributed` (all rejected).
//! - Nothing is committed when the reject budget is exceeded. Otherwise each partition is
//!   written under a hidden `_tmp.*` folder, gets its `_SUCCESS` marker there, and replaces
//!   `<output>/<entity>/dt=<date>` by rename; a rerun of the same input yields the same bytes.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::buffer::Buffer;
use arrow::datatypes::{Int64Type, TimestampMillisecondType, UInt64Type};
use arrow::ipc::reader::{read_footer_length, FileDecoder};
use arrow::ipc::writer::FileWriter;
use rayon::prelude::*;
use serde::Serialize;

use super::columns::{self, SEQ_COLUMN};
use super::{clean_record, Entity, RawRecord, Reject, Row};
use crate::dataset::partition::{self, Staged};
use crate::dataset::{follows, schema};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};
use crate::raw::{self, FileSummary, Format, Item};
use crate::spill::SpillDir;

/// Rows cleaned and spilled together: enough that each spill partition gets batches of about
/// a thousand rows (smaller chunks make small Arrow IPC batches; much larger ones make the
/// reader and the cleaners take turns instead of overlapping).
const CHUNK_ROWS: usize = 16384;
/// Raw bytes per spill partition: what one partition's dedupe holds in memory, roughly.
const PARTITION_BYTES: u64 = 64 << 20;
/// Write buffers of all spill files together. The number of files grows with the input (one
/// per entity and partition), so each file's buffer shrinks instead: a fixed buffer per file
/// would grow with the input (docs/design/clean.md).
const SPILL_BUFFER_BYTES: usize = 64 << 20;
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

/// What to clean and where to put it.
#[derive(Clone, Debug)]
pub struct CleanOptions {
    pub inputs: Vec<String>,
    pub output: String,
    /// The logical date, `YYYY-MM-DD`: names the partitions.
    pub date: String,
    /// Force one format for every file instead of detecting it per file.
    pub format: Option<Format>,
    /// Read a truncated or corrupt compressed file up to where it breaks, and reject the
    /// rest as `corrupt_file`, instead of failing the run.
    pub skip_corrupt_files: bool,
    /// Crawl time for records that carry none (UTC ms).
    pub default_crawl_ms: i64,
    /// Largest tolerated `rejected / records_in` per entity.
    pub max_reject_ratio: f64,
    /// Local folder for spill files (default: the system temp folder).
    pub spill_dir: Option<PathBuf>,
    /// Bytes of cleaned rows held in memory between the passes instead of spilled to files.
    pub spill_memory: u64,
    /// Parts each entity is split into by key; `None`: one per 64 MiB of input.
    pub key_partitions: Option<usize>,
    /// Parquet data page version of the output: 2 (values compressed on their own, with no
    /// copy into a page buffer first) or 1 (for readers that predate version 2 pages).
    pub data_page_version: u8,
}

/// Counts for one entity.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct EntityCounts {
    pub records_in: u64,
    pub records_out: u64,
    pub rejected: u64,
    pub rejected_by_reason: BTreeMap<String, u64>,
    pub duplicates: u64,
    /// Kept rows that point at a user absent from this run's cleaned users.
    pub dangling: u64,
    /// Kept posts and comments that name no author: MediaCrawler's anonymised notes (a
    /// `creator_hash`, no uid), comment exports that name commenters by screen name only.
    /// They are counted among `dangling` too.
    pub without_author: u64,
}

/// The job's report.
#[derive(Clone, Debug, Serialize)]
pub struct CleanReport {
    pub date: String,
    pub output: String,
    pub entities: BTreeMap<String, EntityCounts>,
    /// Records whose entity could not be told (unknown formats or records): all rejected.
    pub unattributed: EntityCounts,
    pub files: Vec<FileSummary>,
    pub bytes_in: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub committed: bool,
}

impl CleanReport {
    /// True when every entity satisfies `records_in == records_out + rejected + duplicates`.
    pub fn balances(&self) -> bool {
        self.entities
            .values()
            .chain(std::iter::once(&self.unattributed))
            .all(|c| c.records_in == c.records_out + c.rejected + c.duplicates)
    }
}

/// Errors that end a clean run.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    #[error(
        "reject budget exceeded for {entity}: {rejected} of {records_in} records rejected \
         ({ratio:.1}% > {budget:.1}%), mostly {dominant} ({dominant_count}); nothing committed"
    )]
    RejectBudget {
        entity: String,
        rejected: u64,
        records_in: u64,
        ratio: f64,
        budget: f64,
        dominant: String,
        dominant_count: u64,
        report: Box<CleanReport>,
    },
    #[error(transparent)]
    Other(#[from] Error),
}

#[derive(Default)]
struct Counters {
    records_in: AtomicU64,
    rejected: Mutex<BTreeMap<Reject, u64>>,
    repeated_headers: AtomicU64,
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

/// One partition of one entity between the passes: the batches held in memory (while the
/// set's budget allows) and the spill file the rest went to (opened at its first batch).
/// Each chunk of pass 1 gives a partition a few rows only (a chunk spreads over every
/// partition): they wait in `pending` until there are enough to make one batch, so a
/// partition's batches stay few and large however many chunks the input has.
#[derive(Default)]
struct SpillSlot {
    held: Vec<RecordBatch>,
    file: Option<FileWriter<BufWriter<File>>>,
    pending: Vec<RecordBatch>,
    pending_bytes: u64,
}

pub(super) struct SpillSet {
    pub(super) dir: SpillDir,
    pub(super) partitions: usize,
    /// Write buffer of each spill file.
    buffer: usize,
    /// Bytes of rows a slot gathers before they become one batch.
    coalesce: u64,
    slots: HashMap<(Entity, usize), Mutex<SpillSlot>>,
    /// Bytes (Arrow's measure of the batches) slots may hold in memory, and hold now.
    memory_budget: u64,
    held: AtomicU64,
    /// Bytes (Arrow's measure of the batches) sent to files.
    spilled: AtomicU64,
}

impl SpillSet {
    fn new(base: Option<&Path>, partitions: usize, memory_budget: u64) -> Result<SpillSet> {
        let dir = SpillDir::create(base, "weibo-clean-")?;
        let mut slots = HashMap::new();
        for entity in Entity::ALL {
            for p in 0..partitions {
                slots.insert((entity, p), Mutex::default());
            }
        }
        let files = partitions * Entity::ALL.len();
        Ok(SpillSet {
            memory_budget,
            held: AtomicU64::new(0),
            spilled: AtomicU64::new(0),
            dir,
            partitions,
            buffer: (SPILL_BUFFER_BYTES / files.max(1)).clamp(16 << 10, 1 << 20),
            // The pending rows of all slots share as much again as the write buffers.
            coalesce: (SPILL_BUFFER_BYTES / files.max(1)).clamp(64 << 10, 4 << 20) as u64,
            slots,
        })
    }

    /// The scratch file holding input file `file_index`'s rejects.
    pub(super) fn rejects_name(file_index: usize) -> String {
        format!("rejects-{file_index:06}.jsonl")
    }

    fn name(entity: Entity, partition: usize) -> String {
        format!("{}-{partition:05}.arrows", entity.name())
    }

    fn append(&self, entity: Entity, partition: usize, rows: &[(u64, &Row<'_>)]) -> Result<()> {
        let batch = columns::spill_batch(entity, rows).map_err(arrow_err("build batch"))?;
        let size = batch.get_array_memory_size() as u64;
        let mut slot = self.slots[&(entity, partition)]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        slot.pending.push(batch);
        slot.pending_bytes += size;
        if slot.pending_bytes < self.coalesce {
            return Ok(());
        }
        self.place(entity, partition, &mut slot)
    }

    /// Makes a slot's pending rows one batch, held while the budget allows, else written to
    /// the partition's file. Which batches are held changes nothing downstream: a partition
    /// is all its batches, wherever they are, and dedupe orders rows by key, crawl time and
    /// input position, not by batch.
    fn place(&self, entity: Entity, partition: usize, slot: &mut SpillSlot) -> Result<()> {
        let pending = std::mem::take(&mut slot.pending);
        slot.pending_bytes = 0;
        let batch = match pending.len() {
            0 => return Ok(()),
            1 => pending.into_iter().next().expect("one batch"),
            _ => arrow::compute::concat_batches(&pending[0].schema(), &pending)
                .map_err(arrow_err("coalesce spill"))?,
        };
        let size = batch.get_array_memory_size() as u64;
        if self.held.fetch_add(size, Ordering::Relaxed) + size <= self.memory_budget {
            slot.held.push(batch);
            return Ok(());
        }
        self.held.fetch_sub(size, Ordering::Relaxed);
        self.spilled.fetch_add(size, Ordering::Relaxed);
        if slot.file.is_none() {
            let file = self
                .dir
                .create_file(&Self::name(entity, partition), self.buffer)?;
            let writer = FileWriter::try_new(file, &columns::spill_schema(entity))
                .map_err(arrow_err("spill"))?;
            slot.file = Some(writer);
        }
        slot.file
            .as_mut()
            .expect("created above")
            .write(&batch)
            .map_err(arrow_err("spill"))
    }

    fn finish(&self) -> Result<()> {
        for (&(entity, partition), slot) in &self.slots {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            self.place(entity, partition, &mut slot)?;
            if let Some(mut writer) = slot.file.take() {
                writer.finish().map_err(arrow_err("spill"))?;
                writer
                    .into_inner()
                    .map_err(arrow_err("spill"))?
                    .flush()
                    .map_err(|e| self.dir.error("flush spill", "", e))?;
            }
        }
        Ok(())
    }

    /// All batches of one partition, held and spilled (`None` if there were none); they are
    /// gone from the set afterwards (the held ones handed over, the file removed).
    pub(super) fn load(
        &self,
        entity: Entity,
        partition: usize,
    ) -> Result<Option<Vec<RecordBatch>>> {
        let held = std::mem::take(
            &mut self.slots[&(entity, partition)]
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .held,
        );
        let name = Self::name(entity, partition);
        let Some(file) = self.dir.open(&name)? else {
            return Ok((!held.is_empty()).then_some(held));
        };
        let mut batches = held;
        batches.extend(read_spill_file(&file).map_err(|e| {
            self.dir
                .error("read spill", &name, std::io::Error::other(e.to_string()))
        })?);
        // Read once: deleted now, on the thread that read it, so dropping its pages from the
        // cache is spread over pass 2 rather than left to one thread at the end.
        self.dir.remove(&name)?;
        Ok(Some(batches))
    }
}

/// The batches of a finished spill file, decoded in place from a memory map of it: the
/// arrays point into the file's pages in the page cache, so nothing is copied out of the
/// kernel or into freshly faulted memory (they stay valid after the file is removed).
pub(super) fn read_spill_file(
    file: &File,
) -> std::result::Result<Vec<RecordBatch>, arrow::error::ArrowError> {
    let bad = |what: &str| arrow::error::ArrowError::IpcError(format!("spill file: {what}"));
    // SAFETY: the file is this run's own, in its private temporary folder; its writer has
    // finished and nothing writes it again (it is only removed, which keeps the mapping).
    let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| bad(&e.to_string()))?;
    let data = Buffer::from(bytes::Bytes::from_owner(map));
    let end = data.len().checked_sub(10).ok_or_else(|| bad("too short"))?;
    let tail: [u8; 10] = data[end..].try_into().expect("ten bytes");
    let footer_start = end
        .checked_sub(read_footer_length(tail)?)
        .ok_or_else(|| bad("footer longer than the file"))?;
    let footer =
        arrow::ipc::root_as_footer(&data[footer_start..end]).map_err(|e| bad(&e.to_string()))?;
    let schema =
        arrow::ipc::convert::try_fb_to_schema(footer.schema().ok_or_else(|| bad("no schema"))?)?;
    // SAFETY: written by this run from batches arrow built and validated; re-validating
    // every string on the way back would cost time for nothing.
    let decoder =
        unsafe { FileDecoder::new(Arc::new(schema), footer.version()).with_skip_validation(true) };
    let mut batches = Vec::new();
    for block in footer.recordBatches().into_iter().flatten() {
        let len = block.metaDataLength() as usize + block.bodyLength() as usize;
        let start = block.offset() as usize;
        if start.checked_add(len).is_none_or(|e| e > footer_start) {
            return Err(bad("block past the footer"));
        }
        if let Some(batch) =
            decoder.read_record_batch(block, &data.slice_with_length(start, len))?
        {
            batches.push(batch);
        }
    }
    Ok(batches)
}

fn arrow_err<E: std::fmt::Display>(op: &'static str) -> impl Fn(E) -> Error {
    move |e| Error::Io {
        op,
        path: "arrow".into(),
        source: std::io::Error::other(e.to_string()),
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

fn raw_excerpt(entity: Entity, raw: &RawRecord) -> String {
    let parts: Vec<String> = entity
        .fields()
        .iter()
        .enumerate()
        .filter_map(|(i, name)| raw.field(i).map(|v| format!("{name}={v}")))
        .collect();
    raw::excerpt(&parts.join(" "))
}

/// Key partitions of a run over `bytes_in` of input: `--key-partitions`, else one per
/// [`PARTITION_BYTES`].
pub(super) fn key_partitions(options: &CleanOptions, bytes_in: u64) -> usize {
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
pub(super) fn pass_one(
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
        bytes_in,
        seconds: 0.0,
        mb_per_s: 0.0,
        committed: false,
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

/// Runs the job. `progress` is called with the bytes of each file read.
pub fn run(
    fs: &FileSystems,
    options: &CleanOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> std::result::Result<CleanReport, CleanError> {
    let started = Instant::now();
    let output = fs.parse(&options.output)?;
    let files = fs.expand_inputs(&options.inputs)?;
    let bytes_in: u64 = files.iter().map(|f| f.len).sum();
    let partitions = key_partitions(options, bytes_in);
    let indexed: Vec<(usize, &FileEntry)> = files.iter().enumerate().collect();
    let (spill, mut report) = pass_one(fs, &indexed, options, partitions, progress)?;
    report.output = output.to_string();

    // The budget is checked before anything is written, so a failed run leaves no output.
    report.seconds = started.elapsed().as_secs_f64();
    if let Some(err) = budget_error(&report, options.max_reject_ratio) {
        return Err(err);
    }

    // Pass 2: dedupe and write each entity's partition; users first, for dangling counts.
    let mut known_users = KnownUsers::default();
    let mut staged: Vec<Staged> = Vec::new();
    let all: Vec<usize> = (0..spill.partitions).collect();
    let tag = partition::run_tag();
    let dt = format!("dt={}", options.date);
    let result = (|| -> Result<()> {
        for entity in Entity::ALL {
            let stage = Staged::new(&output.join(entity.name()), &dt, &tag);
            staged.push(stage.clone());
            let parts = Partitions {
                written: &all,
                total: spill.partitions,
                load: &|entity, p| spill.load(entity, p),
            };
            let outcome = write_entity(
                fs,
                entity,
                parts,
                &stage.tmp,
                &known_users,
                options.data_page_version,
            )?;
            if entity == Entity::Users {
                known_users = outcome.keys;
            }
            let counts = report
                .entities
                .get_mut(entity.name())
                .expect("all entities");
            counts.records_out = outcome.rows_out;
            counts.duplicates += outcome.duplicates;
            counts.dangling = outcome.dangling;
            counts.without_author = outcome.without_author;
        }
        // Rejects of the run, committed like a partition. Per-file reject logs are
        // concatenated in input order: the same input gives the same file.
        let stage = Staged::new(&output.join("_rejects"), &dt, &tag);
        staged.push(stage.clone());
        let mut target = fs.create_atomic(&stage.tmp.join("rejects.jsonl"))?;
        for index in 0..files.len() {
            let name = SpillSet::rejects_name(index);
            let Some(mut local) = spill.dir.open(&name)? else {
                continue;
            };
            std::io::copy(&mut local, &mut target)
                .map_err(|e| spill.dir.error("copy rejects", &name, e))?;
        }
        target.commit_unsynced()?;
        partition::commit(fs, &staged)
    })();
    if let Err(e) = result {
        partition::abandon(fs, &staged);
        return Err(e.into());
    }
    log::info!(
        "pass 2 (dedupe, write, commit) done at {:.2}s",
        started.elapsed().as_secs_f64()
    );
    report.committed = true;
    report.seconds = started.elapsed().as_secs_f64();
    report.mb_per_s = if report.seconds > 0.0 {
        bytes_in as f64 / 1e6 / report.seconds
    } else {
        0.0
    };
    Ok(report)
}

/// The first entity over the budget, if any. Unattributed records (unknown formats) are
/// measured against all records of the run: a stray file among good data is not a reason to
/// fail, a run that is mostly unreadable is.
pub fn budget_error(report: &CleanReport, budget: f64) -> Option<CleanError> {
    let all_in: u64 = report.entities.values().map(|c| c.records_in).sum::<u64>()
        + report.unattributed.records_in;
    let buckets = report
        .entities
        .iter()
        .map(|(name, c)| (name.as_str(), c, c.records_in))
        .chain(std::iter::once((
            "unattributed records",
            &report.unattributed,
            all_in,
        )));
    for (name, c, denominator) in buckets {
        if denominator == 0 {
            continue;
        }
        let ratio = c.rejected as f64 / denominator as f64;
        if ratio > budget {
            let (dominant, dominant_count) = c
                .rejected_by_reason
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(r, n)| (r.clone(), *n))
                .unwrap_or_default();
            return Some(CleanError::RejectBudget {
                entity: name.to_string(),
                rejected: c.rejected,
                records_in: denominator,
                ratio: ratio * 100.0,
                budget: budget * 100.0,
                dominant,
                dominant_count,
                report: Box::new(report.clone()),
            });
        }
    }
    None
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
                format: options.format,
                skip_corrupt_files: options.skip_corrupt_files,
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
        for chunk in rx {
            if failure.is_none() {
                if let Err(e) =
                    process_chunk(&chunk, index, &path, options, spill, counters, &mut rejects)
                {
                    failure = Some(e);
                }
            }
            // Once the reader is done, the last chunks are freed here.
            let _ = used_tx.send(chunk);
        }
        let summary = reader
            .join()
            .map_err(|_| Error::Cluster(format!("reader thread of {path} panicked")))??;
        if let Some(e) = failure {
            return Err(e);
        }
        rejects
            .flush()
            .map_err(|e| spill.dir.error("write", &rejects_name, e))?;
        Ok(summary)
    })
}

/// Counts, cleans (in parallel) and spills one chunk of a file's items.
fn process_chunk(
    chunk: &[Item],
    index: usize,
    path: &str,
    options: &CleanOptions,
    spill: &SpillSet,
    counters: &HashMap<Option<Entity>, Counters>,
    rejects: &mut BufWriter<File>,
) -> Result<()> {
    type Outcome<'a> = Option<(u64, Entity, std::result::Result<(usize, Row<'a>), Reject>)>;
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
                clean_record(*entity, record, options.default_crawl_ms)
                    .map(|row| (partition_of(partition_key(&row), spill.partitions), row)),
            )),
            _ => None,
        })
        .collect();
    // Only the bookkeeping that needs input order happens here, on one thread: counts (kept
    // per chunk, added once), rejects in line order, and each spill partition's row indices.
    let slot = |e: Option<Entity>| e.map_or(Entity::ALL.len(), Entity::index);
    let mut records_in = [0u64; Entity::ALL.len() + 1];
    let mut repeated_headers = [0u64; Entity::ALL.len() + 1];
    let mut groups: HashMap<(Entity, usize), Vec<u32>> = HashMap::new();
    for (i, (item, outcome)) in chunk.iter().zip(&cleaned).enumerate() {
        match (item, outcome) {
            (Item::Record { record, .. }, Some((line, entity, result))) => {
                records_in[slot(Some(*entity))] += 1;
                match result {
                    Ok((p, _)) => groups.entry((*entity, *p)).or_default().push(i as u32),
                    Err(reason) => {
                        counters[&Some(*entity)].reject(*reason);
                        write_reject(
                            rejects,
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
                write_reject(rejects, *entity, *reason, path, *line, excerpt)?;
            }
            (Item::RepeatedHeader { entity, .. }, _) => {
                records_in[slot(Some(*entity))] += 1;
                repeated_headers[slot(Some(*entity))] += 1;
            }
            (Item::Record { .. }, None) => unreachable!("every record was cleaned"),
        }
    }
    for (entity, c) in counters {
        c.records_in
            .fetch_add(records_in[slot(*entity)], Ordering::Relaxed);
        c.repeated_headers
            .fetch_add(repeated_headers[slot(*entity)], Ordering::Relaxed);
    }
    // Partitions have their own spill files (and locks): building and writing their batches
    // in parallel keeps both cores busy while the reader thread parses the next chunk.
    groups
        .into_par_iter()
        .try_for_each(|((entity, p), indices)| {
            let rows: Vec<(u64, &Row)> = indices
                .iter()
                .map(|&i| match &cleaned[i as usize] {
                    Some((line, _, Ok((_, row)))) => (((index as u64) << 40) | line, row),
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

pub(super) struct EntityOutcome {
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
pub(super) struct KnownUsers {
    pub(super) by_partition: Vec<Vec<i64>>,
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
pub(super) fn write_entity(
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
pub(super) struct Partitions<'a> {
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

//! Dated output partitions, committed the way every job commits them: part files staged
//! under a hidden `_tmp.*` folder, a `_SUCCESS` marker, then a rename into place; and the
//! committed nights a job reads back.
//!
//! Invariants: a reader listing `<table>/dt=<date>/` sees either the previous complete
//! partition, nothing (for the instant between delete and rename), or the new complete one
//! with its `_SUCCESS`; never half of one. `_SUCCESS` is written only once every file of the
//! staged folder is durable. Staged folders of a failed run are removed, and are hidden (`_`
//! prefix) in any case. Parquet itself is [`super::parquet_io`]'s.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::basic::{Compression, ZstdLevel};

use crate::dataset::parquet_io::{typed_properties, with_data_page_version, ParquetWriter};
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

/// A partition being written: its staging folder and where it will live.
#[derive(Clone, Debug)]
pub struct Staged {
    pub tmp: Location,
    pub target: Location,
}

impl Staged {
    /// Stages `<parent>/<name>` under `<parent>/_tmp.<name>.<tag>`.
    pub fn new(parent: &Location, name: &str, tag: &str) -> Staged {
        Staged {
            tmp: parent.join(&format!("_tmp.{name}.{tag}")),
            target: parent.join(name),
        }
    }

    /// Stages partition `<table>/<name>` of a job's `slice`: the partition itself for the
    /// whole job, else its `slice=i-of-N/` sub-folder (dataset::slice).
    pub fn of_slice(table: &Location, name: &str, slice: Slice, tag: &str) -> Staged {
        if slice == Slice::ALL {
            Staged::new(table, name, tag)
        } else {
            Staged::new(&table.join(name), &slice.folder(), tag)
        }
    }

    /// Writes `batch` as part `p` (`part-NNNNN.parquet`) of this staged partition, typed
    /// encodings and the given data page version: one part per hash partition of a job.
    pub fn write_part(
        &self,
        fs: &FileSystems,
        p: u32,
        batch: &RecordBatch,
        data_page_version: u8,
    ) -> Result<()> {
        let mut writer = self.part_writer(fs, p, batch.schema(), data_page_version)?;
        writer.write(batch)?;
        writer.finish()
    }

    /// The writer of part `p`, for a part written batch by batch (one too large to build as
    /// one batch); [`ParquetWriter::finish`] closes it.
    pub fn part_writer(
        &self,
        fs: &FileSystems,
        p: u32,
        schema: SchemaRef,
        data_page_version: u8,
    ) -> Result<ParquetWriter> {
        // zstd's fastest level: a job's parts are written once a night and read by few.
        let props = typed_properties(&schema).set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("valid level"),
        ));
        let props = with_data_page_version(props, data_page_version).build();
        let location = self.tmp.join(&format!("part-{p:05}.parquet"));
        ParquetWriter::create_staged(fs, &location, schema, props)
    }
}

/// Hash partitions for `bytes` of work when `threads` partitions are held at once in
/// `budget`: at least `min`, and past one a multiple of `threads`, so every round of them
/// is full (a job's round reads every input row, so a half-empty last round costs a whole
/// read for a fraction of the work).
pub fn partitions_in_rounds(bytes: u64, budget: u64, threads: usize, min: u64) -> u32 {
    let threads = threads.max(1) as u64;
    let per_pass = (budget / threads).max(1);
    let n = bytes.div_ceil(per_pass).max(min).max(1);
    let n = if n > 1 {
        n.div_ceil(threads) * threads
    } else {
        n
    };
    n.clamp(1, 4096) as u32
}

/// A tag unique to this run, for staging folder names.
pub fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}.{nanos}", std::process::id())
}

/// Marks every staged folder complete, then moves each into place (replacing what was there).
pub fn commit(fs: &FileSystems, staged: &[Staged]) -> Result<()> {
    for s in staged {
        // Written with [`ParquetWriter::create_staged`] or committed unsynced: durable now,
        // all at once, before anything says they are complete.
        fs.sync_folder(&s.tmp)?;
        fs.write_atomic(&s.tmp.join("_SUCCESS"), b"")?;
    }
    for s in staged {
        fs.delete(&s.target)?;
        fs.rename(&s.tmp, &s.target)?;
    }
    Ok(())
}

/// Removes staged folders after a failure (best effort: they are hidden anyway).
pub fn abandon(fs: &FileSystems, staged: &[Staged]) {
    for s in staged {
        let _ = fs.delete(&s.tmp);
    }
}

/// The `dt=<date>` folders right under `dir`, oldest first, with their dates (none when `dir`
/// is missing). Committed or not: callers that need `_SUCCESS` check it.
pub fn dated_folders(fs: &FileSystems, dir: &Location) -> Result<Vec<(String, Location)>> {
    if !fs.exists(dir)? {
        return Ok(Vec::new());
    }
    let mut dated: Vec<(String, Location)> = fs
        .list(dir, false)?
        .into_iter()
        .filter_map(|e| {
            let date = e.location.file_name()?.strip_prefix("dt=")?.to_string();
            Some((date, e.location))
        })
        .collect();
    dated.sort();
    Ok(dated)
}

/// The Parquet part files of a committed partition folder; none when it has no `_SUCCESS`
/// (a partition that is not done is not read).
pub fn committed_parts(fs: &FileSystems, dir: &Location) -> Result<Vec<FileEntry>> {
    if !fs.exists(&dir.join("_SUCCESS"))? {
        return Ok(Vec::new());
    }
    Ok(fs
        .list(dir, false)?
        .into_iter()
        .filter(|e| {
            e.location
                .file_name()
                .is_some_and(|n| n.ends_with(".parquet"))
        })
        .collect())
}

/// The inputs a job dated `upto` reads, from what it was given: a table root (a folder of
/// `dt=` folders) stands for its committed nights up to `upto`, oldest first, so a night
/// after `upto` or one not committed is never read; a night, a file or a glob is read as
/// given. A root with no committed night up to `upto` is an error.
pub fn nights_upto(fs: &FileSystems, inputs: &[String], upto: &str) -> Result<Vec<String>> {
    let mut taken = Vec::new();
    for input in inputs {
        let location = fs.parse(input)?;
        let folder =
            !crate::hdfs::has_glob(input) && fs.status(&location)?.is_some_and(|e| e.is_dir);
        if !folder || dated_folders(fs, &location)?.is_empty() {
            taken.push(input.clone());
            continue;
        }
        let committed = committed_nights(fs, &location, upto)?;
        if committed.is_empty() {
            return Err(Error::BadInput {
                path: input.clone(),
                line: 0,
                reason: format!("no committed dt= night up to {upto} here"),
            });
        }
        taken.extend(committed.iter().map(|dir| dir.to_string()));
    }
    Ok(taken)
}

/// The committed `dt=` nights of the table at `dir` up to `upto`, oldest first.
pub fn committed_nights(fs: &FileSystems, dir: &Location, upto: &str) -> Result<Vec<Location>> {
    let mut nights = Vec::new();
    for (date, night) in dated_folders(fs, dir)? {
        let is_date = chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").is_ok();
        if is_date && date.as_str() <= upto && fs.exists(&night.join("_SUCCESS"))? {
            nights.push(night);
        }
    }
    Ok(nights)
}

/// An entity's committed nights up to `upto` (inclusive), oldest first, each with its date
/// and part files: "every night so far", as the jobs that read the history see it. Folders
/// whose name is not a date are not nights; a night with no committed part is left out.
pub fn history_nights(
    fs: &FileSystems,
    root: &Location,
    entity: &str,
    upto: &str,
) -> Result<Vec<(String, Vec<FileEntry>)>> {
    let mut nights = Vec::new();
    for (date, dir) in dated_folders(fs, &root.join(entity))? {
        let is_date = chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").is_ok();
        if is_date && date.as_str() <= upto {
            let files = committed_parts(fs, &dir)?;
            if !files.is_empty() {
                nights.push((date, files));
            }
        }
    }
    Ok(nights)
}

/// The part files of [`history_nights`], oldest night first.
pub fn history(
    fs: &FileSystems,
    root: &Location,
    entity: &str,
    upto: &str,
) -> Result<Vec<FileEntry>> {
    Ok(history_nights(fs, root, entity, upto)?
        .into_iter()
        .flat_map(|(_, files)| files)
        .collect())
}

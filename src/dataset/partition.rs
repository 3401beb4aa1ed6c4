//! Dated output partitions, committed the way every job commits them: part files staged
//! under a hidden `_tmp.*` folder, a `_SUCCESS` marker, then a journalled swap into place;
//! and the committed nights a job reads back.
//!
//! Invariants: `_SUCCESS` is written only once every file of the staged folder is durable. A
//! job's partitions (a night's entities, or both tables of a graph job) are swapped together:
//! a journal naming every move is written beside each table before the first move, and the
//! moves (the old partition aside, the staged one into place, the old one deleted) can each
//! be redone. A run killed mid-swap leaves its journal, and the next job that commits into or
//! lists any of those tables finishes the swap before it reads, so no job sees one entity of
//! a night new and another old. A reader listing `<table>/dt=<date>/` sees the previous
//! complete partition, nothing (between two moves), or the new complete one with its
//! `_SUCCESS`; never half of one. Staged folders of a failed run are removed, and are hidden
//! (`_` prefix) in any case. docs/nightly.md, "A night commits whole". Parquet itself is
//! [`super::parquet_io`]'s.

use std::collections::BTreeSet;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::basic::{Compression, ZstdLevel};
use serde::{Deserialize, Serialize};

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

/// Marks every staged folder complete, then swaps them all into place (replacing what was
/// there) under one journal: a failure part-way leaves the journal, and the next commit into
/// or listing of these tables finishes the swap ([`finish_pending`]).
pub fn commit(fs: &FileSystems, staged: &[Staged]) -> Result<()> {
    for s in staged {
        // Written with [`ParquetWriter::create_staged`] or committed unsynced: durable now,
        // all at once, before anything says they are complete.
        fs.sync_folder(&s.tmp)?;
        fs.write_atomic(&s.tmp.join("_SUCCESS"), b"")?;
    }
    let tag = run_tag();
    let journal = Journal {
        moves: staged
            .iter()
            .map(|s| {
                let name = s.target.file_name().unwrap_or_default();
                let parent = s.target.parent().unwrap_or_else(|| s.target.clone());
                Move {
                    staged: s.tmp.to_string(),
                    target: s.target.to_string(),
                    aside: parent.join(&format!("_old.{name}.{tag}")).to_string(),
                }
            })
            .collect(),
    };
    let tables = journal.tables(fs)?;
    for table in &tables {
        finish_pending(fs, table)?;
    }
    let name = format!("{JOURNAL}{tag}.json");
    let bytes = serde_json::to_vec(&journal).map_err(|e| Error::Io {
        op: "encode",
        path: name.clone(),
        source: e.into(),
    })?;
    for table in &tables {
        fs.write_atomic(&table.join(&name), &bytes)?;
    }
    journal.finish(fs, &name)
}

/// How a journal's name begins, in each table folder its moves touch.
const JOURNAL: &str = "_commit.";

/// A swap of staged partitions into place, as written before its first move.
#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    moves: Vec<Move>,
}

/// One partition's swap: the old partition goes `aside`, `staged` becomes `target`, and the
/// old one is deleted.
#[derive(Debug, Serialize, Deserialize)]
struct Move {
    staged: String,
    target: String,
    aside: String,
}

impl Journal {
    /// The folders that hold the moves' targets: where the journal is written.
    fn tables(&self, fs: &FileSystems) -> Result<Vec<Location>> {
        let mut tables = BTreeSet::new();
        for m in &self.moves {
            if let Some(parent) = fs.parse(&m.target)?.parent() {
                tables.insert(parent.to_string());
            }
        }
        tables.iter().map(|t| fs.parse(t)).collect()
    }

    /// Does every move that is not done yet, then removes the old partitions and the journal
    /// (named `name` in every table). Each step looks at what is there, so a swap stopped at
    /// any point is finished by running this again.
    fn finish(&self, fs: &FileSystems, name: &str) -> Result<()> {
        for m in &self.moves {
            let (staged, target) = (fs.parse(&m.staged)?, fs.parse(&m.target)?);
            if fs.exists(&staged)? {
                if fs.exists(&target)? {
                    fs.rename(&target, &fs.parse(&m.aside)?)?;
                }
                fs.rename(&staged, &target)?;
            }
        }
        for m in &self.moves {
            fs.delete(&fs.parse(&m.aside)?)?;
        }
        for table in self.tables(fs)? {
            fs.delete(&table.join(name))?;
        }
        Ok(())
    }
}

/// Finishes every swap a killed run left journalled in the table folder `table`.
pub fn finish_pending(fs: &FileSystems, table: &Location) -> Result<()> {
    if !fs.exists(table)? {
        return Ok(());
    }
    for e in fs.list(table, false)? {
        let Some(name) = e.location.file_name() else {
            continue;
        };
        if name.starts_with(JOURNAL) && name.ends_with(".json") {
            finish_journal(fs, &e.location, &name)?;
        }
    }
    Ok(())
}

fn finish_journal(fs: &FileSystems, at: &Location, name: &str) -> Result<()> {
    let bytes = match fs.read_to_vec(at) {
        Ok(b) => b,
        // Finished and removed by another run since the listing.
        Err(_) if !fs.exists(at)? => return Ok(()),
        Err(e) => return Err(e),
    };
    let journal: Journal = serde_json::from_slice(&bytes).map_err(|e| Error::BadInput {
        path: at.to_string(),
        line: 0,
        reason: format!("an unreadable commit journal: {e}"),
    })?;
    log::warn!("{at}: finishing the commit a stopped run left half done");
    journal.finish(fs, name)
}

/// Removes staged folders after a failure (best effort: they are hidden anyway).
pub fn abandon(fs: &FileSystems, staged: &[Staged]) {
    for s in staged {
        let _ = fs.delete(&s.tmp);
    }
}

/// The `dt=<date>` folders right under `dir`, oldest first, with their dates (none when `dir`
/// is missing), once any swap left half done there is finished. Committed or not: callers
/// that need `_SUCCESS` check it.
pub fn dated_folders(fs: &FileSystems, dir: &Location) -> Result<Vec<(String, Location)>> {
    if !fs.exists(dir)? {
        return Ok(Vec::new());
    }
    finish_pending(fs, dir)?;
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

/// The newest `dt=` folder of `table` dated before `before` that holds the file `record`
/// (what a graph job that continues from an earlier night wrote beside its parts), with its
/// date.
pub fn newest_recorded(
    fs: &FileSystems,
    table: &Location,
    before: &str,
    record: &str,
) -> Result<Option<(String, Location)>> {
    Ok(dated_folders(fs, table)?
        .into_iter()
        .rev()
        .filter(|(d, _)| d.as_str() < before)
        .find(|(_, dir)| fs.exists(&dir.join(record)).unwrap_or(false)))
}

/// The night a file or folder belongs to: the date of the innermost `dt=<date>` component of
/// its path, if any.
pub fn night_of(location: &Location) -> Option<String> {
    location
        .to_string()
        .rsplit('/')
        .find_map(|c| c.strip_prefix("dt=").map(String::from))
}

/// The Parquet part files of a committed partition folder; none when it has no `_SUCCESS`
/// (a partition that is not done is not read), after finishing a swap left half done.
pub fn committed_parts(fs: &FileSystems, dir: &Location) -> Result<Vec<FileEntry>> {
    if !fs.exists(&dir.join("_SUCCESS"))? {
        // Between two moves of a stopped swap: finish it, and look again.
        match dir.parent() {
            Some(table) => finish_pending(fs, &table)?,
            None => return Ok(Vec::new()),
        }
        if !fs.exists(&dir.join("_SUCCESS"))? {
            return Ok(Vec::new());
        }
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
        let committed = history_folders(fs, &location, upto)?;
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

/// The folders a job dated `upto` reads of the table at `dir`, oldest first: its committed
/// `dt=` nights up to `upto`, a run of the compacted history standing for several of them
/// where one does ([`super::history`]).
pub fn history_folders(fs: &FileSystems, dir: &Location, upto: &str) -> Result<Vec<Location>> {
    Ok(super::history::take_history(fs, dir, upto)?
        .into_iter()
        .map(|t| t.folder)
        .collect())
}

/// An entity's history up to `upto` (inclusive), oldest first, each step with its date and
/// part files: "every night so far", as the jobs that read the history see it. A step is a
/// committed night, or a run of the compacted history labelled with its last night and
/// standing for all of its nights ([`super::history`]); a night with no committed part is
/// left out.
pub fn history_nights(
    fs: &FileSystems,
    root: &Location,
    entity: &str,
    upto: &str,
) -> Result<Vec<(String, Vec<FileEntry>)>> {
    Ok(super::history::take_history(fs, &root.join(entity), upto)?
        .into_iter()
        .map(|t| (t.date, t.files))
        .collect())
}

/// The part files of [`history_nights`], oldest first.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// `<root>/<table>/dt=2026-11-29/` holding one file that says `what`, committed.
    fn local(l: &Location) -> &Path {
        match l {
            Location::Local(p) => p,
            other => panic!("{other} is not local"),
        }
    }

    fn night(root: &Path, table: &str, what: &str) {
        let dir = root.join(table).join("dt=2026-11-29");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("part-00000.parquet"), what).unwrap();
        std::fs::write(dir.join("_SUCCESS"), "").unwrap();
    }

    /// A staged copy of `<table>/dt=2026-11-29` that says `what`.
    fn staged(fs: &FileSystems, root: &Path, table: &str, what: &str) -> Staged {
        let table = fs.parse(root.join(table).to_str().unwrap()).unwrap();
        let s = Staged::new(&table, "dt=2026-11-29", "t1");
        let dir = local(&s.tmp);
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("part-00000.parquet"), what).unwrap();
        s
    }

    /// What each table's night says, and whatever else is left beside the nights.
    fn seen(root: &Path) -> (Vec<String>, Vec<String>) {
        let mut says = Vec::new();
        let mut left = Vec::new();
        for table in ["a", "b"] {
            let dir = root.join(table);
            let part = dir.join("dt=2026-11-29").join("part-00000.parquet");
            says.push(std::fs::read_to_string(part).unwrap_or_default());
            for e in std::fs::read_dir(dir).unwrap() {
                let name = e.unwrap().file_name().into_string().unwrap();
                if name != "dt=2026-11-29" {
                    left.push(format!("{table}/{name}"));
                }
            }
        }
        (says, left)
    }

    #[test]
    fn a_commit_swaps_every_partition_and_leaves_nothing_beside_them() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        night(dir.path(), "a", "old a");
        let s = [
            staged(&fs, dir.path(), "a", "new a"),
            staged(&fs, dir.path(), "b", "new b"),
        ];
        commit(&fs, &s).unwrap();
        assert_eq!(
            seen(dir.path()),
            (vec!["new a".into(), "new b".into()], vec![])
        );
    }

    /// A swap stopped after any move is finished by the next listing or read of either
    /// table: both nights new, nothing left aside, no journal.
    #[test]
    fn a_swap_stopped_part_way_is_finished_by_the_next_reader() {
        for stop in 0..4 {
            let dir = tempfile::tempdir().unwrap();
            let fs = FileSystems::new("file:///");
            night(dir.path(), "a", "old a");
            night(dir.path(), "b", "old b");
            let s = [
                staged(&fs, dir.path(), "a", "new a"),
                staged(&fs, dir.path(), "b", "new b"),
            ];
            for x in &s {
                std::fs::write(local(&x.tmp).join("_SUCCESS"), "").unwrap();
            }
            let journal = Journal {
                moves: s
                    .iter()
                    .map(|x| Move {
                        staged: x.tmp.to_string(),
                        target: x.target.to_string(),
                        aside: x.target.parent().unwrap().join("_old.n.t1").to_string(),
                    })
                    .collect(),
            };
            let name = "_commit.t1.json";
            for table in journal.tables(&fs).unwrap() {
                let bytes = serde_json::to_vec(&journal).unwrap();
                fs.write_atomic(&table.join(name), &bytes).unwrap();
            }
            // The moves in order, stopped after `stop` of them.
            let steps: Vec<(String, String)> = journal
                .moves
                .iter()
                .flat_map(|m| {
                    [
                        (m.target.clone(), m.aside.clone()),
                        (m.staged.clone(), m.target.clone()),
                    ]
                })
                .collect();
            for (from, to) in steps.iter().take(stop) {
                let (from, to) = (fs.parse(from).unwrap(), fs.parse(to).unwrap());
                fs.rename(&from, &to).unwrap();
            }
            // A reader of table b: a history read for stop 0 and 1 (b still old), a
            // partition read when b's night is aside.
            let b = fs.parse(dir.path().join("b").to_str().unwrap()).unwrap();
            if stop == 3 {
                let parts = committed_parts(&fs, &b.join("dt=2026-11-29")).unwrap();
                assert_eq!(parts.len(), 1, "stop {stop}");
            } else {
                let root = fs.parse(dir.path().to_str().unwrap()).unwrap();
                let nights = history_nights(&fs, &root, "b", "2026-11-30").unwrap();
                assert_eq!(nights.len(), 1, "stop {stop}");
            }
            assert_eq!(
                seen(dir.path()),
                (vec!["new a".into(), "new b".into()], vec![]),
                "stop {stop}"
            );
        }
    }
}

//! The `clean` job: raw files in, deduplicated Parquet partitions, rejects and a report out.
//!
//! Two passes keep memory bounded whatever the input size:
//! 1. Every file is read (in parallel across files, cleaning in parallel within a file) and
//!    each cleaned row is appended to a local spill file chosen by the hash of its natural
//!    key (Arrow IPC, one per entity and key partition). Rejects stream to a local file
//!    ([`pass_one`], into the [`SpillSet`] of `spill_set`).
//! 2. Each spill partition, small enough to fit in memory, is deduplicated (newest crawl
//!    wins; ties go to the later input record) and written, sorted by key, as one Parquet
//!    part file ([`write_entity`] in `pass_two`).
//!
//! This module holds what a run is asked and what it answers (options, counts, report,
//! errors) and the run itself: the passes, the reject budget between them, and the commit.
//!
//! Invariants:
//! - Per entity, `records_in == records_out + rejected + duplicates`; records whose entity
//!   no reader could tell are reported apart as `unattributed` (all rejected).
//! - Nothing is committed when the reject budget is exceeded. Otherwise each partition is
//!   written under a hidden `_tmp.*` folder, gets its `_SUCCESS` marker there, and replaces
//!   `<output>/<entity>/dt=<date>` by rename; a rerun of the same input yields the same bytes.

mod pass_one;
mod pass_two;
mod spill_set;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

pub use pass_one::default_key_partitions;
pub(super) use pass_one::{key_partitions, pass_one};
pub(super) use pass_two::{add_by_file, write_entity, KnownUsers, Partitions};
pub(super) use spill_set::SpillSet;

use super::Entity;
use crate::dataset::partition::{self, Staged};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems};
use crate::raw::{FileSummary, Format, MappingFile};

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
    /// Layouts we do not ship, from `--mapping` (docs/formats.md, "Your own layout").
    pub layouts: MappingFile,
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
    /// Kept comments that name no post: nghuyong's comment spider records the post only in
    /// its request. Every job that reads comments skips them and counts them.
    #[serde(default)]
    pub without_post: u64,
    /// Records kept with the run's crawl time because their own crawl stamp did not read as
    /// a time.
    #[serde(default)]
    pub crawl_time_defaulted: u64,
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
    /// A reduce slice's rows kept, by input file index (one run counts them into `files`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept_by_file: Vec<u64>,
    pub bytes_in: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub committed: bool,
    /// What folding the older nights into the compacted history wrote, once committed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::dataset::history::Compacted>,
}

impl CleanReport {
    /// True when every entity, and every file, satisfies `records_in == records_out +
    /// rejected + duplicates`.
    pub fn balances(&self) -> bool {
        self.entities
            .values()
            .chain(std::iter::once(&self.unattributed))
            .all(|c| c.records_in == c.records_out + c.rejected + c.duplicates)
            && self.files.iter().all(|f| f.counts.balances())
    }

    /// Once each file's rows kept are counted, its duplicates are the rest: its records
    /// neither rejected nor kept lost to a newer record of their key, or were repeated
    /// headers (counted as they were read).
    pub fn settle_files(&mut self) {
        for f in &mut self.files {
            let c = &mut f.counts;
            c.duplicates = c.records_in.saturating_sub(c.rejected + c.records_out);
        }
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

fn arrow_err<E: std::fmt::Display>(op: &'static str) -> impl Fn(E) -> Error {
    move |e| Error::Io {
        op,
        path: "arrow".into(),
        source: std::io::Error::other(e.to_string()),
    }
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
            counts.without_post = outcome.without_post;
            // One run reads file `i` as input `i`: its summary is the `i`-th.
            for (file, kept) in report.files.iter_mut().zip(&outcome.kept_by_file) {
                file.counts.records_out += kept;
            }
        }
        report.settle_files();
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
    // The night is committed; the nights before the newest fold into the history that later
    // jobs read (docs/nightly.md, "The history, compacted").
    let history = crate::dataset::history::compact(fs, &output, options.data_page_version)?;
    log::info!(
        "history: {} runs written ({} nights, {} rows), {} superseded runs deleted, at {:.2}s",
        history.runs_written,
        history.nights,
        history.rows,
        history.runs_deleted,
        started.elapsed().as_secs_f64()
    );
    report.history = Some(history);
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

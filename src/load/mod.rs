//! The `load` job: cleaned Parquet → hashed rowkeys, batch counters → pre-split HBase tables,
//! written by N parallel Thrift writers, resumable from a checkpoint manifest.
//!
//! Layout (docs/hbase-layout.md has a worked example): every rowkey starts with
//! [`crate::hbase::layout::keys::hash_prefix`] of its leading id; ids, times and counters are 8-byte big-endian;
//! text is UTF-8. Counters are absolute values computed here over every night loaded so far
//! (never per-record increments), and only those that changed are written
//! ([`state`]; docs/nightly.md), so a rerun writes the same numbers.
//!
//! Invariants:
//! - Every row cell of a run carries the timestamp of `--date` (midnight, Asia/Shanghai), so
//!   rewriting a cell replaces it instead of adding a version; counters carry that of the
//!   newest night loaded (`--date` or later, [`state`]).
//! - Work is split into units: one Parquet part file × its rows' tables, and one unit per
//!   counter partition ([`counters`]) writing its counters and mention edges. When the
//!   counters fit one partition, its unit also writes the `user` and `post` rows, profile and
//!   counters in one put; with several, the part units write the profiles and the counter
//!   units put the counters apart (the same cells). A unit is recorded in the manifest, under
//!   the run's table set, only after every writer has flushed all its rows, so `--resume` may
//!   redo a unit but never skips an unfinished one. Through HFiles ([`bulk`]) the units run
//!   side by side and are recorded after the hand-over ([`units`]).
//! - A writer that loses its connection reconnects and retries the same batch with jittered
//!   backoff, a bounded number of times; puts are idempotent, so a retried batch is harmless.
//! - A night loaded in slices (YARN tasks, [`slices`]) writes the same cells as one run.
//!
//! Rooms: [`job`] (the units and their order), [`rows`] (cleaned rows → puts), [`counters`],
//! [`state`], [`units`], [`slices`]. The tables and the writers are HBase's
//! ([`crate::hbase::layout`], [`crate::hbase::write`]).

use serde::{Deserialize, Serialize};

use crate::hbase::write::{WriteOptions, WriteReport};

mod job;
mod rows;
mod units;

pub mod counters;
pub mod delta;
pub mod slices;
pub mod state;

pub use job::run;
pub use state::{check as check_state, SnapshotCheck};

/// What to load and how.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Root of the clean job's output (`<root>/<entity>/dt=<date>/`).
    pub input: String,
    pub resume: bool,
    /// Where the checkpoint manifest lives (default `<input>/_load/dt=<date>/<ns>.json`).
    pub checkpoint: Option<String>,
    /// Write every counter, not only those that differ from the counter snapshot (after the
    /// tables were truncated behind the loader's back).
    pub rewrite_counters: bool,
    /// The night, the tables and how they are written; its `memory_budget` also sizes the
    /// counters' maps (more data means more, cheap, id-only passes), and its `slice` is one
    /// slice of the night's units (a YARN task, [`slices`]).
    pub write: WriteOptions,
}

impl LoadOptions {
    /// Options with every default, loading the clean root `input` through `write`.
    pub fn new(input: String, write: WriteOptions) -> LoadOptions {
        LoadOptions {
            input,
            resume: false,
            checkpoint: None,
            rewrite_counters: false,
            write,
        }
    }
}

/// The job's report: what was written, and how the night's units and counters went.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LoadReport {
    #[serde(flatten)]
    pub write: WriteReport,
    pub units_done: usize,
    pub units_skipped: usize,
    pub unresolved_mentions: u64,
    /// The night's comments that name no post (the crawl did not record it): skipped.
    #[serde(default)]
    pub comments_without_post: u64,
    /// Key partitions the counters were computed in (one pass over the id columns each).
    pub counter_partitions: u32,
    /// The newest night the counters cover (this night, or a newer one already loaded).
    pub counters_as_of: String,
    /// The night of the counter snapshot the changes were taken against, if any.
    pub counters_base: Option<String>,
    /// Nights of cleaned data the counters were computed over.
    /// Whether the counters were carried forward from the snapshot and the nights since,
    /// rather than computed over every night.
    pub counters_carried: bool,
    pub history_nights: usize,
    /// Users and posts whose counters this run wrote.
    pub users_changed: u64,
    pub posts_changed: u64,
    /// The slice this report is of (`i/N`), when the night was loaded in slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<String>,
}

//! The `load` job: cleaned Parquet → hashed rowkeys, batch counters → pre-split HBase tables,
//! written by N parallel Thrift writers, resumable from a checkpoint manifest.
//!
//! Layout (docs/hbase-layout.md has a worked example): every rowkey starts with
//! [`keys::hash_prefix`] of its leading id; ids, times and counters are 8-byte big-endian;
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
//! Rooms: [`job`] (the units and their order), [`writers`] (the router and writer threads,
//! shared with the graph jobs' `--load`), [`rows`] (cleaned rows → puts), [`route`]
//! (`--via`), [`layout`], [`counters`], [`state`], [`bulk`], [`units`], [`slices`].

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::dataset::slice::Slice;

use crate::error::{Error, Result};
use crate::hbase::admin::{Admin, Compression};
use crate::hbase::{Put, Timeouts};
use crate::hdfs::{FileSystems, Location};
use layout::keys;

pub mod bulk;
pub mod counters;
mod job;
pub mod layout;
mod route;
mod rows;
pub mod slices;
pub mod state;
mod units;
mod writers;

pub use job::run;
pub use layout::Table;
use route::{bulk_target, choose};
use writers::with_writers;

/// What to load and how.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Root of the clean job's output (`<root>/<entity>/dt=<date>/`).
    pub input: String,
    pub date: String,
    pub namespace: String,
    pub tables: Vec<Table>,
    pub regions: u32,
    pub writers: usize,
    pub batch_bytes: usize,
    pub resume: bool,
    pub thrift: String,
    pub admin: String,
    pub timeouts: Timeouts,
    pub compression: Compression,
    /// Where the checkpoint manifest lives (default `<input>/_load/dt=<date>/<ns>.json`).
    pub checkpoint: Option<String>,
    /// Give up on a batch after this many failed attempts.
    pub max_attempts: u32,
    /// Memory for the counters' maps; more data means more (cheap, id-only) passes.
    pub memory_budget: u64,
    /// Write every counter, not only those that differ from the counter snapshot (after the
    /// tables were truncated behind the loader's back).
    pub rewrite_counters: bool,
    /// Puts through Thrift, or HFiles handed to HBase ([`bulk`]).
    pub via: Via,
    /// The hand-over command of `--via hfile`, run as `<cmd…> <dir> <namespace:table>`.
    pub bulkload_cmd: Vec<String>,
    /// Where `--via hfile` writes its HFiles (default `<input>/_hfiles`); must be on the
    /// HBase cluster's HDFS, since the region servers move the files in.
    pub staging: Option<String>,
    /// How `--via hfile` compresses the HFiles' blocks.
    pub hfile_compression: HfileCompression,
    /// The night size (cleaned rows) from which `--via auto` bulk-loads.
    pub auto_threshold: u64,
    /// One slice of the night's units (a YARN task, [`slices`]); `None` for the whole night.
    pub slice: Option<Slice>,
}

/// The block compression of the HFiles `--via hfile` writes. A region server reads a
/// bulk-loaded file with the codec its trailer names, whatever the family says; compactions
/// rewrite it with the family's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum HfileCompression {
    /// Uncompressed: every HBase reads it.
    #[default]
    None,
    /// zstd, framed as HBase's own `ZstdCodec` (hbase-compression-zstd) frames it: the region
    /// servers must use that codec for ZSTD, not Hadoop's native one (docs/hfile.md).
    Zstd,
}

impl HfileCompression {
    fn codec(self) -> crate::hbase::hfile::Codec {
        match self {
            HfileCompression::None => crate::hbase::hfile::Codec::None,
            // The fastest level that still pays: the bulk load is bound by bytes moved.
            HfileCompression::Zstd => crate::hbase::hfile::Codec::Zstd { level: 1 },
        }
    }
}

/// How `load` writes into HBase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// Batched puts through the Thrift gateway (the region servers' WAL and memstore).
    #[default]
    Thrift,
    /// HFiles written to HDFS and adopted by the region servers (HBase's bulk load).
    Hfile,
    /// HFiles from --auto-threshold rows (a night's cleaned rows for load, the input rows for
    /// the graph jobs) when the staging folder is on HDFS, Thrift otherwise; the report says
    /// which was taken, and why.
    Auto,
}

/// The night size (cleaned rows of every entity, from the Parquet footers) from which
/// `--via auto` bulk-loads: where the bulk load overtakes the Thrift route on the local
/// cluster, tables created by the load included (BENCHMARKS.md, `benches/routes.py`).
pub const AUTO_HFILE_ROWS: u64 = 100_000;

/// How `--via auto` chose.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AutoChoice {
    pub input_rows: u64,
    pub threshold: u64,
    pub chose: Via,
    pub because: String,
}

impl LoadOptions {
    /// The defaults: the CLI shows these, and every job that loads takes them.
    pub const REGIONS: u32 = 8;
    pub const WRITERS: usize = 4;
    pub const BATCH_BYTES: usize = 1 << 20;
    pub const MAX_ATTEMPTS: u32 = 6;
    pub const MEMORY_BUDGET: u64 = 256 << 20;

    /// Options with every default, for `tables` of `namespace` from the clean root `input`.
    pub fn new(
        input: String,
        date: String,
        namespace: String,
        tables: Vec<Table>,
        thrift: String,
        admin: String,
        timeouts: Timeouts,
    ) -> LoadOptions {
        LoadOptions {
            input,
            date,
            namespace,
            tables,
            regions: Self::REGIONS,
            writers: Self::WRITERS,
            batch_bytes: Self::BATCH_BYTES,
            resume: false,
            thrift,
            admin,
            timeouts,
            compression: Compression::None,
            checkpoint: None,
            max_attempts: Self::MAX_ATTEMPTS,
            memory_budget: Self::MEMORY_BUDGET,
            rewrite_counters: false,
            via: Via::Thrift,
            bulkload_cmd: bulk::DEFAULT_BULKLOAD_CMD
                .split_whitespace()
                .map(String::from)
                .collect(),
            staging: None,
            hfile_compression: HfileCompression::None,
            auto_threshold: AUTO_HFILE_ROWS,
            slice: None,
        }
    }
}

/// The job's report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LoadReport {
    pub rows_by_table: BTreeMap<String, u64>,
    pub rows: u64,
    pub bytes: u64,
    pub batches: u64,
    pub retries: u64,
    pub units_done: usize,
    pub units_skipped: usize,
    pub unresolved_mentions: u64,
    /// Key partitions the counters were computed in (one pass over the id columns each).
    pub counter_partitions: u32,
    pub seconds: f64,
    pub rows_per_s: f64,
    pub mb_per_s: f64,
    pub cell_timestamp: i64,
    /// The newest night the counters cover (this night, or a newer one already loaded).
    pub counters_as_of: String,
    /// The night of the counter snapshot the changes were taken against, if any.
    pub counters_base: Option<String>,
    /// Nights of cleaned data the counters were computed over.
    pub history_nights: usize,
    /// Users and posts whose counters this run wrote.
    pub users_changed: u64,
    pub posts_changed: u64,
    /// The route the cells took.
    pub via: Via,
    /// How `--via auto` picked it.
    pub auto: Option<AutoChoice>,
    /// What `--via hfile` handed to HBase.
    pub hfiles: Option<bulk::HandOver>,
    /// The slice this report is of (`i/N`), when the night was loaded in slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<String>,
}

impl LoadReport {
    /// The time since `started`, and the throughput it gives.
    fn set_time(&mut self, started: Instant) {
        self.seconds = started.elapsed().as_secs_f64();
        self.rows_per_s = self.rows as f64 / self.seconds.max(1e-9);
        self.mb_per_s = self.bytes as f64 / 1e6 / self.seconds.max(1e-9);
    }
}

/// Cell timestamp of a run: midnight of `date` in Asia/Shanghai, epoch ms.
pub fn cell_timestamp(date: &str) -> Result<i64> {
    let d = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d")
        .map_err(|e| Error::Usage(format!("--date {date:?}: {e}")))?;
    Ok(d.and_hms_opt(0, 0, 0)
        .expect("valid")
        .and_utc()
        .timestamp_millis()
        - 8 * 3_600_000)
}

/// Creates the namespace and any missing table of `options.tables`, pre-split; returns the
/// tables it created.
pub fn ensure_tables(options: &LoadOptions) -> Result<Vec<Table>> {
    let mut admin = Admin::connect(&options.admin, options.timeouts)?;
    admin.ensure_namespace(&options.namespace)?;
    let missing = missing_tables(options)?;
    // The master creates tables side by side: one connection per table, and the first
    // error wins once every call has returned.
    let splits = keys::split_points(options.regions);
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let calls: Vec<_> = missing
            .iter()
            .map(|t| {
                let splits = &splits;
                scope.spawn(move || {
                    let mut admin = Admin::connect(&options.admin, options.timeouts)?;
                    admin.create_table(&t.spec(&options.namespace, options.compression), splits)
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|c| {
                c.join().unwrap_or_else(|_| {
                    Err(Error::Hbase {
                        op: "createTable",
                        table: options.namespace.clone(),
                        reason: "a creating thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(missing)
}

/// The tables of `options.tables` that do not exist yet.
fn missing_tables(options: &LoadOptions) -> Result<Vec<Table>> {
    let mut admin = Admin::connect(&options.admin, options.timeouts)?;
    let mut missing = Vec::new();
    for t in &options.tables {
        if !admin.table_exists(&options.namespace, t.name())? {
            missing.push(*t);
        }
    }
    Ok(missing)
}

/// Where a producer hands its puts: `(table, put)`.
pub type PutSink<'a> = dyn FnMut(Table, Put) -> Result<()> + Send + 'a;

/// Writes the puts `produce` emits through the same parallel, region-batched, retrying
/// writers `load` uses, into `options.tables` (created pre-split when missing). Used by jobs
/// other than `load` (friends) so every HBase write shares one mechanism.
pub fn write_with(
    options: &LoadOptions,
    produce: &mut dyn FnMut(&mut PutSink<'_>) -> Result<()>,
) -> Result<LoadReport> {
    let ts = cell_timestamp(&options.date)?;
    write_timed_with(options, &mut |sink| produce(&mut |t, p| sink(t, p, ts)))
}

/// Where a producer hands puts whose cells carry a timestamp of their own: `(table, put, ts)`.
pub type TimedPutSink<'a> = dyn FnMut(Table, Put, i64) -> Result<()> + Send + 'a;

/// [`write_with`] for cells that carry their own timestamps (the inbox's versions): the
/// writers batch the puts of one timestamp together, so a producer that emits them grouped
/// by timestamp gets full batches. Through Thrift only; [`write_routed_with`] takes
/// `options.via`.
pub fn write_timed_with(
    options: &LoadOptions,
    produce: &mut dyn FnMut(&mut TimedPutSink<'_>) -> Result<()>,
) -> Result<LoadReport> {
    write_routed(None, options, produce)
}

/// Where a job other than `load` may bulk-load: its file systems, the folder whose
/// `_hfiles/` stages the HFiles unless `--staging` says otherwise, and the size `--via auto`
/// weighs (rows in, as the job counts them; counted only for `--via auto`).
pub struct Route<'a> {
    pub fs: &'a FileSystems,
    pub root: Location,
    pub rows: &'a dyn Fn() -> Result<u64>,
}

/// [`write_timed_with`] by `options.via`: through Thrift, or as HFiles handed to HBase once
/// `produce` has emitted every put (nothing reaches the tables before, and a failure
/// leaves no staged file). A rerun writes the same cells again, at the same timestamps.
pub fn write_routed_with(
    route: &Route<'_>,
    options: &LoadOptions,
    produce: &mut dyn FnMut(&mut TimedPutSink<'_>) -> Result<()>,
) -> Result<LoadReport> {
    write_routed(Some(route), options, produce)
}

/// Without a `route`, through Thrift whatever `options.via` says.
fn write_routed(
    route: Option<&Route<'_>>,
    options: &LoadOptions,
    produce: &mut dyn FnMut(&mut TimedPutSink<'_>) -> Result<()>,
) -> Result<LoadReport> {
    let started = Instant::now();
    let ts = cell_timestamp(&options.date)?;
    let auto = match (options.via, route) {
        (Via::Auto, Some(r)) => Some(choose(r.fs, &r.root, options, (r.rows)()?)?),
        _ => None,
    };
    let via = match (&auto, options.via) {
        (Some(choice), _) => {
            log::info!("--via auto: {}", choice.because);
            choice.chose
        }
        (None, Via::Hfile) if route.is_some() => Via::Hfile,
        _ => Via::Thrift,
    };
    let options = &LoadOptions {
        via,
        ..options.clone()
    };
    ensure_tables(options)?;
    let mut report = LoadReport {
        cell_timestamp: ts,
        units_done: 1,
        via,
        auto,
        ..LoadReport::default()
    };
    let target = match (via, route) {
        (Via::Hfile, Some(r)) => Some(bulk_target(r.fs, &r.root, options, ts)?),
        _ => None,
    };
    let written = with_writers(
        options,
        target.as_ref(),
        ts,
        started,
        &mut report,
        &mut |router| produce(&mut |t, p, at| router.put_at(t, p, at)),
    );
    let Some(target) = target else {
        return written.map(|_| report);
    };
    report.hfiles = Some(target.hand_over(options, written)?);
    // The hand-over is part of the write's time.
    report.set_time(started);
    Ok(report)
}

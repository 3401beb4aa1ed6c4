//! The one way into HBase: every job's puts go through here, whatever the job.
//!
//! A producer hands `(table, put[, ts])` to a sink; a [`writers::Router`] sends each put to
//! the writer of its region, and `--writers` threads either batch the puts into Thrift
//! `mutateRows` calls (retried with jittered backoff) or collect them into HFiles
//! ([`bulk`]) that are handed to HBase once every put is in ([`route`] picks which,
//! `--via`). The tables are created pre-split on first use ([`ensure_tables`]).
//!
//! Invariants: one region's puts reach one writer in the order they were produced
//! ([`emission`] numbers carry that order into the HFiles); a failed write leaves no staged
//! file; a rerun writes the same cells at the same timestamps. docs/hbase-routes.md.

pub mod bulk;
pub mod emission;
pub mod route;
pub mod writers;

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::admin::{Admin, Compression};
use super::layout::{keys, Table};
use super::{Put, Timeouts};
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};
pub use bulk::DEFAULT_BULKLOAD_CMD;
use route::{bulk_target, choose};
use writers::with_writers;

/// Where and how a job writes HBase: the tables, the gateway, the writers and the route.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// The night the cells are of: their timestamp ([`cell_timestamp`]) and the staging
    /// folder's name.
    pub date: String,
    pub namespace: String,
    pub tables: Vec<Table>,
    /// Regions a missing table is pre-split into.
    pub regions: u32,
    pub writers: usize,
    pub batch_bytes: usize,
    pub thrift: String,
    pub admin: String,
    pub timeouts: Timeouts,
    /// The families' compression of a table created here.
    pub compression: Compression,
    /// Give up on a batch after this many failed attempts.
    pub max_attempts: u32,
    /// Memory of the run: the HFile collectors and the writers' queues take their share.
    pub memory_budget: u64,
    /// Puts through Thrift, or HFiles handed to HBase ([`bulk`]).
    pub via: Via,
    /// The hand-over command of `--via hfile`, run as `<cmd…> <dir> <namespace:table>`.
    pub bulkload_cmd: Vec<String>,
    /// Where `--via hfile` writes its HFiles (default `<root>/_hfiles`); must be on the
    /// HBase cluster's HDFS, since the region servers move the files in.
    pub staging: Option<String>,
    /// How `--via hfile` compresses the HFiles' blocks.
    pub hfile_compression: HfileCompression,
    /// The size (rows) from which `--via auto` bulk-loads.
    pub auto_threshold: u64,
    /// One slice of a job's work (a YARN task): it stages its HFiles apart.
    pub slice: Option<Slice>,
}

impl WriteOptions {
    /// The defaults: the CLI shows these, and every job that writes HBase takes them.
    pub const REGIONS: u32 = 8;
    pub const WRITERS: usize = 4;
    pub const BATCH_BYTES: usize = 1 << 20;
    pub const MAX_ATTEMPTS: u32 = 6;
    pub const MEMORY_BUDGET: u64 = 256 << 20;

    /// Options with every default, for `tables` of `namespace` at the night `date`.
    pub fn new(
        date: String,
        namespace: String,
        tables: Vec<Table>,
        thrift: String,
        admin: String,
        timeouts: Timeouts,
    ) -> WriteOptions {
        WriteOptions {
            date,
            namespace,
            tables,
            regions: Self::REGIONS,
            writers: Self::WRITERS,
            batch_bytes: Self::BATCH_BYTES,
            thrift,
            admin,
            timeouts,
            compression: Compression::None,
            max_attempts: Self::MAX_ATTEMPTS,
            memory_budget: Self::MEMORY_BUDGET,
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

/// What a write did: its puts, its route and its pace.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WriteReport {
    pub rows_by_table: BTreeMap<String, u64>,
    pub rows: u64,
    pub bytes: u64,
    pub batches: u64,
    pub retries: u64,
    pub seconds: f64,
    pub rows_per_s: f64,
    pub mb_per_s: f64,
    pub cell_timestamp: i64,
    /// The route the cells took.
    pub via: Via,
    /// How `--via auto` picked it.
    pub auto: Option<AutoChoice>,
    /// What `--via hfile` handed to HBase.
    pub hfiles: Option<bulk::HandOver>,
}

impl WriteReport {
    /// The time since `started`, and the throughput it gives.
    pub fn set_time(&mut self, started: Instant) {
        self.seconds = started.elapsed().as_secs_f64();
        self.rows_per_s = self.rows as f64 / self.seconds.max(1e-9);
        self.mb_per_s = self.bytes as f64 / 1e6 / self.seconds.max(1e-9);
    }
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
pub fn ensure_tables(options: &WriteOptions) -> Result<Vec<Table>> {
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
pub fn missing_tables(options: &WriteOptions) -> Result<Vec<Table>> {
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
    options: &WriteOptions,
    produce: &mut dyn FnMut(&mut PutSink<'_>) -> Result<()>,
) -> Result<WriteReport> {
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
    options: &WriteOptions,
    produce: &mut dyn FnMut(&mut TimedPutSink<'_>) -> Result<()>,
) -> Result<WriteReport> {
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
    options: &WriteOptions,
    produce: &mut dyn FnMut(&mut TimedPutSink<'_>) -> Result<()>,
) -> Result<WriteReport> {
    write_routed(Some(route), options, produce)
}

/// Without a `route`, through Thrift whatever `options.via` says.
fn write_routed(
    route: Option<&Route<'_>>,
    options: &WriteOptions,
    produce: &mut dyn FnMut(&mut TimedPutSink<'_>) -> Result<()>,
) -> Result<WriteReport> {
    let started = Instant::now();
    let ts = cell_timestamp(&options.date)?;
    let auto = match (options.via, route) {
        (Via::Auto, Some(r)) => Some(choose(r.fs, &r.root, options, (r.rows)()?)?),
        _ => None,
    };
    let via = match (&auto, options.via) {
        (Some(choice), _) => choice.chose,
        (None, Via::Hfile) if route.is_some() => Via::Hfile,
        _ => Via::Thrift,
    };
    let options = &WriteOptions {
        via,
        ..options.clone()
    };
    ensure_tables(options)?;
    let mut report = WriteReport {
        cell_timestamp: ts,
        via,
        auto,
        ..WriteReport::default()
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

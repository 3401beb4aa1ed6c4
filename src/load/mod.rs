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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::TimestampMillisecondType;
use serde::Serialize;

use crate::dataset::{columns, partition};
use crate::error::{Error, Result};
use crate::hbase::admin::{Admin, Compression};
use crate::hbase::{Connection, Put, Timeouts};
use crate::hdfs::{FileEntry, FileSystems, Location};
use layout::keys::{self, Relation};
use layout::{be, cell};

pub mod bulk;
pub mod counters;
pub mod layout;
pub mod state;
mod units;

pub use layout::Table;

use counters::PostCounts;

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
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
#[derive(Clone, Debug, Serialize)]
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
        }
    }
}

/// The job's report.
#[derive(Clone, Debug, Default, Serialize)]
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

enum Msg {
    /// Puts into regions of tables, each with its cell timestamp (sent in groups: one
    /// channel hand-off per put costs more than the put).
    Rows(Vec<RoutedPut>),
    Flush(SyncSender<Result<()>>),
    /// Every unit succeeded: a bulk collector may write its HFiles.
    Finish,
}

#[derive(Default)]
struct WriterStats {
    rows: u64,
    bytes: u64,
    batches: u64,
    retries: u64,
}

/// A put, the region it goes to, its cell timestamp, and its emission number
/// ([`units::emission`]): the order of the run's puts, however many threads produced them.
struct RoutedPut {
    table: Table,
    region: u32,
    ts: i64,
    seq: u64,
    put: Put,
}

/// Puts a router gathers for one writer before handing them over.
const ROUTE_GROUP: usize = 256;

/// Batches' worth of bytes a Thrift writer holds across all its buffers before it sends them
/// all.
const HELD_BATCHES: usize = 8;

/// One writer thread: its own Thrift connection, per-(table, region, timestamp) batches.
fn writer_loop(rx: Receiver<Msg>, options: &LoadOptions, stats: &Mutex<WriterStats>) -> Result<()> {
    let mut conn = Connection::connect(&options.thrift, options.timeouts)?;
    type Batch = (Vec<Put>, usize);
    let mut buffers: HashMap<(Table, u32, i64), Batch> = HashMap::new();
    let mut failed: Option<Error> = None;
    let send = |conn: &mut Connection,
                table: Table,
                ts: i64,
                rows: Vec<Put>,
                bytes: usize|
     -> Result<()> {
        let full = table.in_namespace(&options.namespace);
        let n = rows.len() as u64;
        let mut attempt = 0;
        loop {
            match conn.put(&full, &rows, ts) {
                Ok(()) => break,
                Err(e) if e.is_transient() && attempt + 1 < options.max_attempts => {
                    attempt += 1;
                    stats.lock().unwrap_or_else(|p| p.into_inner()).retries += 1;
                    // Jittered, so that writers failed by one outage do not retry in lockstep.
                    let base = 200.0 * f64::from(1u32 << attempt.min(6));
                    let backoff =
                        Duration::from_millis((base * rand::random_range(0.5..1.5)) as u64);
                    log::warn!("{e}; retry {attempt} in {backoff:?}");
                    std::thread::sleep(backoff);
                    if let Ok(fresh) = Connection::connect(&options.thrift, options.timeouts) {
                        *conn = fresh;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
        s.rows += n;
        s.bytes += bytes as u64;
        s.batches += 1;
        Ok(())
    };
    // Sends every buffer, in key order.
    let send_all = |conn: &mut Connection, buffers: &mut HashMap<(Table, u32, i64), Batch>| {
        let mut keys: Vec<(Table, u32, i64)> = buffers.keys().copied().collect();
        keys.sort();
        for key in keys {
            let (rows, bytes) = buffers.remove(&key).unwrap_or_default();
            if !rows.is_empty() {
                send(conn, key.0, key.2, rows, bytes)?;
            }
        }
        Ok(())
    };
    let mut held = 0usize;
    for msg in rx {
        match msg {
            Msg::Rows(puts) => {
                for RoutedPut {
                    table,
                    region,
                    ts,
                    put,
                    ..
                } in puts
                {
                    if failed.is_some() {
                        break;
                    }
                    let size = put.payload_bytes();
                    let entry = buffers.entry((table, region, ts)).or_default();
                    entry.0.push(put);
                    entry.1 += size;
                    held += size;
                    if entry.1 >= options.batch_bytes {
                        let (rows, bytes) = std::mem::take(entry);
                        held -= bytes;
                        if let Err(e) = send(&mut conn, table, ts, rows, bytes) {
                            failed = Some(e);
                        }
                    }
                    // Many timestamps (the inbox's versions) make many small batches: past
                    // a few batches' worth held, send them all rather than hold every one.
                    if held >= HELD_BATCHES * options.batch_bytes && failed.is_none() {
                        if let Err(e) = send_all(&mut conn, &mut buffers) {
                            failed = Some(e);
                        }
                        held = 0;
                    }
                }
            }
            Msg::Flush(ack) => {
                let mut result = match failed.take() {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
                if result.is_ok() {
                    result = send_all(&mut conn, &mut buffers);
                }
                buffers.clear();
                held = 0;
                let _ = ack.send(result);
            }
            Msg::Finish => {}
        }
    }
    Ok(())
}

/// The part of `--memory-budget` the bulk collectors' buffers share; their queues take
/// [`queue_share`], and the counters the rest.
fn bulk_share(budget: u64) -> u64 {
    budget / 2
}

/// The part of `--memory-budget` the bulk collectors' queues share: deep enough that the
/// router keeps going while a collector spills.
fn queue_share(budget: u64) -> u64 {
    budget / 8
}

/// A put in a queue, as the queue's depth counts it (key, cells and their vectors).
const QUEUED_PUT_BYTES: u64 = 256;

/// The puts a writer's queue holds: a Thrift writer needs only a few batches in hand; a
/// collector as many as its share of the budget holds, so a spill does not stall the router.
fn queue_depth(options: &LoadOptions) -> usize {
    match options.via {
        Via::Hfile => {
            let per = queue_share(options.memory_budget) / options.writers.max(1) as u64;
            ((per / QUEUED_PUT_BYTES) as usize).max(4096)
        }
        _ => 4096,
    }
}

/// What the bulk collectors need besides the options.
struct BulkTarget<'a> {
    fs: &'a FileSystems,
    staging: Location,
    boundaries: bulk::Boundaries,
    spill: crate::spill::SpillDir,
    hfile: crate::hbase::hfile::WriterOptions,
    staged: Mutex<Vec<bulk::StagedFile>>,
}

impl BulkTarget<'_> {
    /// Once the writers are done (`written`): hands every staged HFile to HBase and removes
    /// the staging folder. A failed write or hand-over removes it too, so a failed run leaves
    /// no HFile that a later hand-over could adopt.
    fn hand_over(&self, options: &LoadOptions, written: Result<()>) -> Result<bulk::HandOver> {
        let clear_staging = |e: Error| {
            if let Err(cleanup) = self.fs.delete(&self.staging) {
                log::warn!("could not remove {}: {cleanup}", self.staging);
            }
            e
        };
        written.map_err(clear_staging)?;
        let staged = std::mem::take(&mut *self.staged.lock().unwrap_or_else(|p| p.into_inner()));
        let handed = bulk::hand_over(
            self.fs,
            &self.staging,
            &options.namespace,
            &options.bulkload_cmd,
            &staged,
        )
        .map_err(clear_staging)?;
        self.fs.delete(&self.staging)?;
        Ok(handed)
    }
}

/// One bulk collector: takes the puts a writer would send, and writes its HFiles once told
/// every unit succeeded.
fn collector_loop(
    rx: Receiver<Msg>,
    id: usize,
    options: &LoadOptions,
    target: &BulkTarget<'_>,
    stats: &Mutex<WriterStats>,
) -> Result<()> {
    let budget = (bulk_share(options.memory_budget) / options.writers.max(1) as u64) as usize;
    let mut collector = bulk::Collector::new(id, &target.boundaries, &target.spill, budget);
    let mut finish = false;
    let (mut rows, mut bytes) = (0u64, 0u64);
    for msg in rx {
        match msg {
            Msg::Rows(puts) => {
                for RoutedPut {
                    table,
                    ts,
                    seq,
                    put,
                    ..
                } in puts
                {
                    rows += 1;
                    bytes += put.payload_bytes() as u64;
                    collector.add(table, ts, seq, &put)?;
                }
            }
            Msg::Flush(ack) => {
                let _ = ack.send(Ok(()));
            }
            Msg::Finish => finish = true,
        }
    }
    {
        let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
        s.rows += rows;
        s.bytes += bytes;
    }
    if finish {
        let started = Instant::now();
        let cells = collector.cells;
        let files = collector.write_hfiles(target.fs, &target.staging, &target.hfile)?;
        log::info!(
            "collector {id}: {cells} cells into {} HFiles in {:.1}s",
            files.len(),
            started.elapsed().as_secs_f64()
        );
        target
            .staged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(files);
    }
    Ok(())
}

/// A unit of work: produces the puts of one input file (or the counters) into the router.
type Unit<'a> = Box<dyn Fn(&mut Router) -> Result<()> + Send + Sync + 'a>;

/// Routes puts to the writers by region and flushes them at unit boundaries.
struct Router {
    senders: Vec<SyncSender<Msg>>,
    /// Puts not yet handed to each writer.
    pending: Vec<Vec<RoutedPut>>,
    regions: u32,
    /// Through HFiles, the tables' current regions: each region's cells go to one collector,
    /// so a region gets one file per family (HBase takes at most 32).
    boundaries: Option<bulk::Boundaries>,
    rows_by_table: BTreeMap<Table, u64>,
    /// The cell timestamp of the run's rows.
    ts: i64,
    /// The unit running, and the puts it has emitted: the next put's emission number.
    unit: u64,
    emitted: u64,
}

impl Router {
    /// Starts unit number `unit` (its place among the run's units).
    fn start_unit(&mut self, unit: usize) {
        self.unit = unit as u64;
        self.emitted = 0;
    }

    /// A router of its own for another producing thread, sending to the same writers.
    fn fork(&self) -> Router {
        Router {
            senders: self.senders.clone(),
            pending: (0..self.senders.len()).map(|_| Vec::new()).collect(),
            regions: self.regions,
            boundaries: self.boundaries.clone(),
            rows_by_table: BTreeMap::new(),
            ts: self.ts,
            unit: 0,
            emitted: 0,
        }
    }

    /// Takes back a fork: sends what it still holds, and adds its counts to ours.
    fn absorb(&mut self, mut other: Router) -> Result<()> {
        for w in 0..other.senders.len() {
            other.hand_off(w)?;
        }
        for (t, n) in other.rows_by_table {
            *self.rows_by_table.entry(t).or_default() += n;
        }
        Ok(())
    }

    fn put(&mut self, table: Table, put: Put) -> Result<()> {
        self.put_at(table, put, self.ts)
    }

    /// A put whose cells carry timestamp `ts` (counters folded into a newer night's).
    fn put_at(&mut self, table: Table, put: Put, ts: i64) -> Result<()> {
        let prefix = [put.key[0], put.key[1]];
        let region = match &self.boundaries {
            Some(b) => b.region(table, &put.key),
            None => keys::region_of(prefix, self.regions),
        };
        let w = region as usize % self.senders.len();
        *self.rows_by_table.entry(table).or_default() += 1;
        let seq = units::emission(self.unit, self.emitted)?;
        self.emitted += 1;
        self.pending[w].push(RoutedPut {
            table,
            region,
            ts,
            seq,
            put,
        });
        if self.pending[w].len() >= ROUTE_GROUP {
            self.hand_off(w)?;
        }
        Ok(())
    }

    /// Sends writer `w` the puts gathered for it.
    fn hand_off(&mut self, w: usize) -> Result<()> {
        if self.pending[w].is_empty() {
            return Ok(());
        }
        let group = std::mem::replace(&mut self.pending[w], Vec::with_capacity(ROUTE_GROUP));
        self.senders[w]
            .send(Msg::Rows(group))
            .map_err(|_| Error::Hbase {
                op: "load",
                table: "-".into(),
                reason: "a writer stopped".into(),
            })
    }

    /// Waits until every writer has sent everything it holds.
    fn flush(&mut self) -> Result<()> {
        for w in 0..self.senders.len() {
            self.hand_off(w)?;
        }
        let mut acks = Vec::new();
        for s in &self.senders {
            let (tx, rx) = sync_channel(1);
            s.send(Msg::Flush(tx)).map_err(|_| Error::Hbase {
                op: "load",
                table: "-".into(),
                reason: "a writer stopped".into(),
            })?;
            acks.push(rx);
        }
        let mut first_err = None;
        for rx in acks {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(Error::Hbase {
                        op: "load",
                        table: "-".into(),
                        reason: "a writer stopped".into(),
                    });
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

fn ts_col<'a>(
    b: &'a RecordBatch,
    name: &str,
) -> Option<&'a arrow::array::TimestampMillisecondArray> {
    b.column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<TimestampMillisecondType>())
}

fn str_val(b: &RecordBatch, name: &str, i: usize) -> Option<String> {
    let c = b.column_by_name(name)?;
    let s = c.as_string_opt::<i32>()?;
    (!s.is_null(i)).then(|| s.value(i).to_string())
}

fn list_val(b: &RecordBatch, name: &str, i: usize) -> Vec<String> {
    let Some(c) = b.column_by_name(name) else {
        return Vec::new();
    };
    let Some(list) = c.as_list_opt::<i32>() else {
        return Vec::new();
    };
    if list.is_null(i) {
        return Vec::new();
    }
    let values = list.value(i);
    let strings = values.as_string::<i32>();
    (0..strings.len())
        .filter(|&j| !strings.is_null(j))
        .map(|j| strings.value(j).to_string())
        .collect()
}

fn bool_val(b: &RecordBatch, name: &str, i: usize) -> Option<bool> {
    let c = b.column_by_name(name)?.as_boolean_opt()?;
    (!c.is_null(i)).then(|| c.value(i))
}

fn partition_files(
    fs: &FileSystems,
    root: &Location,
    entity: &str,
    date: &str,
) -> Result<Vec<FileEntry>> {
    partition::committed_parts(fs, &root.join(entity).join(&format!("dt={date}")))
}

/// The `user` row of cleaned user row `i`: profile cells and the crawler's reported counts.
fn user_profile_put(b: &RecordBatch, i: usize, uid: i64) -> Put {
    let mut p = Put::new(keys::user_key(uid));
    for (col, q) in [
        ("screen_name", cell::SCREEN_NAME),
        ("gender", cell::GENDER),
        ("province", cell::PROVINCE),
        ("city", cell::CITY),
        ("location", cell::LOCATION),
        ("description", cell::DESCRIPTION),
    ] {
        if let Some(v) = str_val(b, col, i) {
            p = p.cell(q, v);
        }
    }
    if let Some(v) = bool_val(b, "verified", i) {
        p = p.cell(cell::VERIFIED, if v { "1" } else { "0" });
    }
    if let Some(v) = columns::opt(columns::opt_ids(b, "verified_type"), i) {
        p = p.cell(cell::VERIFIED_TYPE, be(v));
    }
    if let Some(v) = ts_col(b, "created_at").filter(|a| !a.is_null(i)) {
        p = p.cell(cell::CREATED_AT, be(v.value(i)));
    }
    for (col, q) in [
        ("followers_count", cell::REPORTED_FOLLOWERS),
        ("follow_count", cell::REPORTED_FOLLOWING),
        ("statuses_count", cell::REPORTED_POSTS),
    ] {
        if let Some(v) = columns::opt(columns::opt_ids(b, col), i) {
            p = p.cell(q, be(v));
        }
    }
    p
}

/// A `user` row holding only the counters (a user seen in follows but not in `users`, or a
/// counter written apart from the profile).
fn user_counts_put(uid: i64, c: &[i64; 5]) -> Put {
    with_user_counts(Put::new(keys::user_key(uid)), c)
}

/// The counters of a post, added to its `post` row.
fn with_post_counts(p: Put, reposts: i64, comments: i64) -> Put {
    p.cell(cell::REPOSTS, be(reposts))
        .cell(cell::COMMENTS, be(comments))
}

/// The counters of a user, added to its `user` row.
fn with_user_counts(p: Put, c: &[i64; 5]) -> Put {
    p.cell(cell::FOLLOWERS, be(c[0]))
        .cell(cell::FOLLOWING, be(c[1]))
        .cell(cell::POSTS, be(c[2]))
        .cell(cell::REPOSTS_RECEIVED, be(c[3]))
        .cell(cell::COMMENTS_RECEIVED, be(c[4]))
}

/// The `post` row of cleaned post row `i`: content cells and the reported counts.
fn post_info_put(b: &RecordBatch, i: usize, key: Vec<u8>, at: i64) -> Put {
    let mut p = Put::new(key)
        .cell(cell::CREATED_AT, be(at))
        .cell(cell::TEXT, str_val(b, "text", i).unwrap_or_default())
        .cell(
            cell::DELETED,
            if bool_val(b, "is_deleted", i) == Some(true) {
                "1"
            } else {
                "0"
            },
        );
    if let Some(v) = str_val(b, "source", i) {
        p = p.cell(cell::SOURCE, v);
    }
    for (col, q) in [
        ("topics", cell::TOPICS),
        ("at_users", cell::AT_USERS),
        ("pics", cell::PICS),
    ] {
        let items = list_val(b, col, i);
        if !items.is_empty() {
            p = p.cell(q, items.join(","));
        }
    }
    if let Some(r) = columns::opt(columns::opt_ids(b, "retweet_mid"), i) {
        p = p.cell(cell::RETWEET_MID, be(r));
    }
    for (col, q) in [
        ("reposts_count", cell::REPORTED_REPOSTS),
        ("comments_count", cell::REPORTED_COMMENTS),
        ("attitudes_count", cell::REPORTED_ATTITUDES),
    ] {
        if let Some(v) = columns::opt(columns::opt_ids(b, col), i) {
            p = p.cell(q, be(v));
        }
    }
    p
}

/// Streams a part's batches: every column when `columns` is empty, else only those.
fn read_rows(
    fs: &FileSystems,
    file: &FileEntry,
    columns: &[&str],
    f: &mut dyn FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    if columns.is_empty() {
        partition::read_parquet(fs, file, f)
    } else {
        partition::read_parquet_columns(fs, file, columns, f)
    }
}

/// Counters of one partition, looked up by key while its rows stream past; what no row
/// claims (a followee who is not in `users`, say) is written count-only afterwards.
struct Claims<K, V> {
    entries: Vec<(K, V)>,
    claimed: Vec<bool>,
}

impl<K: Ord + Copy, V> Claims<K, V> {
    fn new(entries: Vec<(K, V)>) -> Self {
        let claimed = vec![false; entries.len()];
        Claims { entries, claimed }
    }

    /// The entry of `key`, if there is one and `fits` it; it is then no longer unclaimed.
    fn claim(&mut self, key: K, fits: impl Fn(&V) -> bool) -> Option<&V> {
        let i = self.entries.binary_search_by(|(k, _)| k.cmp(&key)).ok()?;
        if !fits(&self.entries[i].1) {
            return None;
        }
        self.claimed[i] = true;
        Some(&self.entries[i].1)
    }

    fn unclaimed(&self) -> impl Iterator<Item = &(K, V)> {
        self.entries
            .iter()
            .zip(&self.claimed)
            .filter(|(_, c)| !**c)
            .map(|(e, _)| e)
    }
}

/// Creates the namespace and any missing table of `options.tables`, pre-split; returns the
/// tables it created.
pub fn ensure_tables(options: &LoadOptions) -> Result<Vec<Table>> {
    let mut admin = Admin::connect(&options.admin, options.timeouts)?;
    admin.ensure_namespace(&options.namespace)?;
    let mut missing = Vec::new();
    for t in &options.tables {
        if !admin.table_exists(&options.namespace, t.name())? {
            missing.push(*t);
        }
    }
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

/// Runs `body` with `options.writers` writer threads behind a [`Router`], then joins them
/// (a writer's own error, say an unreachable gateway, explains a "writer stopped" seen by the
/// router better than that message does) and fills the report's put counts and throughput.
fn with_writers(
    options: &LoadOptions,
    bulk: Option<&BulkTarget<'_>>,
    ts: i64,
    started: Instant,
    report: &mut LoadReport,
    body: &mut dyn FnMut(&mut Router) -> Result<()>,
) -> Result<()> {
    let stats = Mutex::new(WriterStats::default());
    let mut rows_by_table = BTreeMap::new();
    let outcome = std::thread::scope(|scope| -> Result<()> {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for id in 0..options.writers.max(1) {
            let (tx, rx) = sync_channel::<Msg>(queue_depth(options) / ROUTE_GROUP);
            senders.push(tx);
            let stats = &stats;
            handles.push(match bulk {
                None => scope.spawn(move || writer_loop(rx, options, stats)),
                Some(target) => scope.spawn(move || collector_loop(rx, id, options, target, stats)),
            });
        }
        let mut router = Router {
            pending: (0..senders.len()).map(|_| Vec::new()).collect(),
            senders,
            regions: options.regions,
            boundaries: bulk.map(|b| b.boundaries.clone()),
            rows_by_table: BTreeMap::new(),
            ts,
            unit: 0,
            emitted: 0,
        };
        let mut result = body(&mut router);
        if result.is_ok() {
            result = router.flush();
        }
        if result.is_ok() {
            for s in &router.senders {
                let _ = s.send(Msg::Finish);
            }
        }
        rows_by_table = std::mem::take(&mut router.rows_by_table);
        drop(router);
        let mut writer_error = None;
        for h in handles {
            match h.join() {
                Ok(Err(e)) => {
                    writer_error.get_or_insert(e);
                }
                Err(_) => {
                    writer_error.get_or_insert(Error::Hbase {
                        op: "load",
                        table: "-".into(),
                        reason: "a writer panicked".into(),
                    });
                }
                Ok(Ok(())) => {}
            }
        }
        match writer_error {
            Some(e) => Err(e),
            None => result,
        }
    });
    report.rows_by_table = rows_by_table
        .iter()
        .map(|(t, n)| (t.name().to_string(), *n))
        .collect();
    let s = stats.into_inner().unwrap_or_else(|p| p.into_inner());
    report.rows = s.rows;
    report.bytes = s.bytes;
    report.batches = s.batches;
    report.retries = s.retries;
    report.set_time(started);
    outcome
}

/// Runs the load.
pub fn run(fs: &FileSystems, options: &LoadOptions) -> Result<LoadReport> {
    let started = Instant::now();
    let ts = cell_timestamp(&options.date)?;
    let root = fs.parse(&options.input)?;
    let mut files: BTreeMap<&str, Vec<FileEntry>> = BTreeMap::new();
    for entity in ["users", "posts", "follows", "comments", "reposts"] {
        files.insert(entity, partition_files(fs, &root, entity, &options.date)?);
    }
    if files.values().all(Vec::is_empty) {
        return Err(Error::BadInput {
            path: root.to_string(),
            line: 0,
            reason: format!("no committed clean partitions for dt={}", options.date),
        });
    }
    let auto = match options.via {
        Via::Auto => Some(choose_route(fs, &root, options, &files)?),
        _ => None,
    };
    let resolved;
    let options = match &auto {
        Some(choice) => {
            log::info!("--via auto: {}", choice.because);
            resolved = LoadOptions {
                via: choice.chose,
                ..options.clone()
            };
            &resolved
        }
        None => options,
    };

    // Tables first: namespace and any missing table, pre-split.
    let created = ensure_tables(options)?;
    let bulk_target = match options.via {
        Via::Hfile => Some(bulk_target(fs, &root, options, ts)?),
        _ => None,
    };

    let manifest_loc = match &options.checkpoint {
        Some(c) => fs.parse(c)?,
        None => root
            .join("_load")
            .join(&format!("dt={}", options.date))
            .join(&format!("{}.json", options.namespace)),
    };
    let mut done: BTreeSet<String> = if options.resume && fs.exists(&manifest_loc)? {
        serde_json::from_slice(&fs.read_to_vec(&manifest_loc)?).unwrap_or_default()
    } else {
        BTreeSet::new()
    };
    if !options.resume {
        fs.delete(&manifest_loc)?;
    }

    // The counters readers see (the snapshot). Tables created just now hold none: their
    // snapshots are gone for good, before any put, so no later run diffs against them.
    let wants = |t: Table| options.tables.contains(&t);
    let counted = wants(Table::User) || wants(Table::Post) || wants(Table::UserPost);
    let state = state::State::new(&root, &options.namespace);
    if created.contains(&Table::User) || created.contains(&Table::Post) {
        state.clear(fs)?;
    }
    let snapshot = if counted { state.latest(fs)? } else { None };
    // Counters are those of every night up to the newest loaded; a night older than that
    // (a rerun, a late crawl) folds its difference into the newest night's cells.
    let as_of = match &snapshot {
        Some(s) if s.as_of > options.date => s.as_of.clone(),
        _ => options.date.clone(),
    };
    let counter_ts = cell_timestamp(&as_of)?;
    // What the changes are taken against: nothing when every counter is to be written.
    let snapshot = snapshot.filter(|_| !options.rewrite_counters);
    let history: BTreeMap<&str, Vec<FileEntry>> = ["users", "follows", "posts", "comments"]
        .into_iter()
        .map(|e| Ok((e, partition::history(fs, &root, e, &as_of)?)))
        .collect::<Result<_>>()?;
    let counter_inputs = counters::Inputs {
        users: &history["users"],
        follows: &history["follows"],
        posts: &history["posts"],
        comments: &history["comments"],
        mention_posts: &files["posts"],
    };
    let partitions = if counted {
        // Through HFiles the collectors hold half the budget while the counters compute.
        let budget = match options.via {
            Via::Thrift | Via::Auto => options.memory_budget,
            Via::Hfile => {
                let b = options.memory_budget;
                b - bulk_share(b) - queue_share(b)
            }
        };
        counters::partitions_for(fs, &counter_inputs, budget)?
    } else {
        1
    };
    // The snapshot moves on only when this run writes every counter it holds.
    let next = if counted && wants(Table::User) && wants(Table::Post) {
        Some(state.next(fs, &as_of, options.resume)?)
    } else {
        None
    };
    // When the counters fit in one partition (and share the rows' timestamp), `user` and
    // `post` rows are written with their counters in one put; else profiles go with their
    // parts and counters apart (the same cells either way), so no partition re-reads the
    // wide columns.
    let merged = partitions == 1 && counter_ts == ts;
    let mut report = LoadReport {
        cell_timestamp: ts,
        counters_as_of: as_of.clone(),
        counters_base: snapshot.as_ref().map(|s| s.as_of.clone()),
        history_nights: history_nights(&history),
        ..LoadReport::default()
    };
    let unresolved_mentions = AtomicU64::new(0);
    let snapshot_unit: String;
    let (users_changed, posts_changed) = (AtomicU64::new(0), AtomicU64::new(0));
    {
        let mut units: Vec<(String, Unit<'_>)> = Vec::new();
        let counter_inputs = &counter_inputs;
        let (snapshot, next) = (&snapshot, &next);
        let unresolved = &unresolved_mentions;
        let (users_changed, posts_changed) = (&users_changed, &posts_changed);
        let tonight_users = &files["users"];
        let tonight_posts = &files["posts"];
        for f in files["users"].clone() {
            units.push((
                format!("users:{}", f.location),
                Box::new(move |r: &mut Router| {
                    // The profile columns only when this unit writes the profiles.
                    let columns: &[&str] = if wants(Table::User) && !merged {
                        &[]
                    } else {
                        &["uid", "screen_name"]
                    };
                    read_rows(fs, &f, columns, &mut |b| {
                        let uid = columns::ids(&f, b, "uid")?;
                        for i in 0..b.num_rows() {
                            let u = uid.value(i);
                            if wants(Table::User) && !merged {
                                r.put(Table::User, user_profile_put(b, i, u))?;
                            }
                            if wants(Table::UserByName) {
                                if let Some(name) = str_val(b, "screen_name", i) {
                                    r.put(
                                        Table::UserByName,
                                        Put::new(keys::user_by_name_key(&name))
                                            .cell(cell::UID, be(u)),
                                    )?;
                                }
                            }
                        }
                        Ok(())
                    })
                }),
            ));
        }
        for f in files["posts"].clone() {
            units.push((
                format!("posts:{}", f.location),
                Box::new(move |r: &mut Router| {
                    let columns: &[&str] = if wants(Table::Post) && !merged {
                        &[]
                    } else {
                        &["mid", "uid", "created_at", "retweet_mid"]
                    };
                    read_rows(fs, &f, columns, &mut |b| {
                        let mid = columns::ids(&f, b, "mid")?;
                        let created = columns::times(&f, b, "created_at")?;
                        for i in 0..b.num_rows() {
                            let (m, at) = (mid.value(i), created.value(i));
                            let uid = columns::opt(columns::opt_ids(b, "uid"), i).unwrap_or(0);
                            let key = keys::post_key(uid, at, m);
                            let rt = columns::opt(columns::opt_ids(b, "retweet_mid"), i);
                            if wants(Table::Post) && !merged {
                                r.put(Table::Post, post_info_put(b, i, key.clone(), at))?;
                            }
                            if wants(Table::PostByMid) {
                                r.put(
                                    Table::PostByMid,
                                    Put::new(keys::post_by_mid_key(m))
                                        .cell(cell::POST, key.clone())
                                        .cell(cell::UID, be(uid)),
                                )?;
                            }
                            if wants(Table::UserPost) && uid != 0 {
                                let kind = if rt.is_some() {
                                    Relation::Repost
                                } else {
                                    Relation::Post
                                };
                                let mut p = Put::new(keys::user_post_key(uid, kind, at, m))
                                    .cell(cell::POST, key.clone());
                                if let Some(r) = rt {
                                    p = p.cell(cell::REPOST_FROM, be(r));
                                }
                                r.put(Table::UserPost, p)?;
                            }
                        }
                        Ok(())
                    })
                }),
            ));
        }
        for f in files["follows"].clone() {
            units.push((
                format!("follows:{}", f.location),
                Box::new(move |r: &mut Router| {
                    partition::read_parquet(fs, &f, &mut |b| {
                        let a = columns::ids(&f, b, "follower")?;
                        let e = columns::ids(&f, b, "followee")?;
                        let at = ts_col(b, "followed_at");
                        for i in 0..b.num_rows() {
                            let t = at
                                .filter(|c| !c.is_null(i))
                                .map(|c| be(c.value(i)))
                                .unwrap_or_default();
                            if wants(Table::Follow) {
                                r.put(
                                    Table::Follow,
                                    Put::new(keys::follow_key(a.value(i), e.value(i)))
                                        .cell(cell::FOLLOWED_AT, t.clone()),
                                )?;
                            }
                            if wants(Table::Fans) {
                                r.put(
                                    Table::Fans,
                                    Put::new(keys::fans_key(e.value(i), a.value(i)))
                                        .cell(cell::FOLLOWED_AT, t),
                                )?;
                            }
                        }
                        Ok(())
                    })
                }),
            ));
        }
        for f in files["comments"].clone() {
            units.push((
                format!("comments:{}", f.location),
                Box::new(move |r: &mut Router| {
                    if !wants(Table::UserPost) {
                        return Ok(());
                    }
                    partition::read_parquet(fs, &f, &mut |b| {
                        let cid = columns::ids(&f, b, "cid")?;
                        let mid = columns::ids(&f, b, "mid")?;
                        let created = columns::times(&f, b, "created_at")?;
                        for i in 0..b.num_rows() {
                            let Some(uid) = columns::opt(columns::opt_ids(b, "uid"), i) else {
                                continue;
                            };
                            r.put(
                                Table::UserPost,
                                Put::new(keys::user_post_key(
                                    uid,
                                    Relation::Comment,
                                    created.value(i),
                                    cid.value(i),
                                ))
                                .cell(cell::MID, be(mid.value(i)))
                                .cell(
                                    cell::COMMENT_TEXT,
                                    str_val(b, "text", i).unwrap_or_default(),
                                ),
                            )?;
                        }
                        Ok(())
                    })
                }),
            ));
        }
        let base = snapshot.as_ref().map_or("none", |s| s.as_of.as_str());
        for p in (0..partitions).filter(|_| counted) {
            units.push((
                format!("counters:{p}/{partitions} as of {as_of} over {base}"),
                Box::new(move |r: &mut Router| {
                    let c = counters::compute(fs, counter_inputs, p, partitions, &mut |m| {
                        if !wants(Table::UserPost) {
                            return Ok(());
                        }
                        r.put(
                            Table::UserPost,
                            Put::new(keys::user_post_key(
                                m.target,
                                Relation::Mention,
                                m.at,
                                m.mid,
                            ))
                            .cell(cell::POST, keys::post_key(m.by, m.at, m.mid))
                            .cell(cell::BY, be(m.by)),
                        )
                    })?;
                    unresolved.fetch_add(c.unresolved_mentions, Ordering::Relaxed);
                    let changes = match snapshot {
                        Some(s) => state::changes(
                            &c,
                            &s.users(fs, p, partitions)?,
                            &s.posts(fs, p, partitions)?,
                        ),
                        None => state::Changes {
                            users: c.users.clone(),
                            posts: c.posts.clone(),
                        },
                    };
                    if let Some(next) = next {
                        next.write_part(fs, p, partitions, &c)?;
                    }
                    drop(c);
                    if wants(Table::User) {
                        users_changed.fetch_add(changes.users.len() as u64, Ordering::Relaxed);
                    }
                    if wants(Table::Post) {
                        posts_changed.fetch_add(changes.posts.len() as u64, Ordering::Relaxed);
                    }
                    if !merged {
                        // The profiles went out with their parts: counters alone here, so no
                        // partition reads the wide columns again.
                        if wants(Table::User) {
                            for (uid, c) in &changes.users {
                                r.put_at(Table::User, user_counts_put(*uid, c), counter_ts)?;
                            }
                        }
                        if wants(Table::Post) {
                            for (mid, (uid, at, reposts, comments)) in &changes.posts {
                                let key = keys::post_key(*uid, *at, *mid);
                                let put = with_post_counts(Put::new(key), *reposts, *comments);
                                r.put_at(Table::Post, put, counter_ts)?;
                            }
                        }
                        return Ok(());
                    }
                    // One partition (so every row is this unit's): each user and post row goes
                    // out once, profile and changed counters together.
                    if wants(Table::User) {
                        let mut users = Claims::new(changes.users);
                        for f in tonight_users {
                            partition::read_parquet(fs, f, &mut |b| {
                                let uid = columns::ids(f, b, "uid")?;
                                for i in 0..b.num_rows() {
                                    let u = uid.value(i);
                                    let put = user_profile_put(b, i, u);
                                    let put = match users.claim(u, |_| true) {
                                        Some(c) => with_user_counts(put, c),
                                        None => put,
                                    };
                                    r.put(Table::User, put)?;
                                }
                                Ok(())
                            })?;
                        }
                        for (uid, c) in users.unclaimed() {
                            r.put(Table::User, user_counts_put(*uid, c))?;
                        }
                    }
                    if wants(Table::Post) {
                        let mut posts = Claims::new(changes.posts);
                        for f in tonight_posts {
                            partition::read_parquet(fs, f, &mut |b| {
                                let mid = columns::ids(f, b, "mid")?;
                                let created = columns::times(f, b, "created_at")?;
                                for i in 0..b.num_rows() {
                                    let (m, at) = (mid.value(i), created.value(i));
                                    let uid =
                                        columns::opt(columns::opt_ids(b, "uid"), i).unwrap_or(0);
                                    let put = post_info_put(b, i, keys::post_key(uid, at, m), at);
                                    // Counters go with the row only if it has their rowkey.
                                    let same_key = |c: &PostCounts| (c.0, c.1) == (uid, at);
                                    let put = match posts.claim(m, same_key) {
                                        Some((_, _, reposts, comments)) => {
                                            with_post_counts(put, *reposts, *comments)
                                        }
                                        None => put,
                                    };
                                    r.put(Table::Post, put)?;
                                }
                                Ok(())
                            })?;
                        }
                        for (mid, (uid, at, reposts, comments)) in posts.unclaimed() {
                            let key = keys::post_key(*uid, *at, *mid);
                            r.put(
                                Table::Post,
                                with_post_counts(Put::new(key), *reposts, *comments),
                            )?;
                        }
                    }
                    Ok(())
                }),
            ));
        }

        // A unit is "done" only for the tables it was run with: a resume with other --tables
        // redoes it.
        // Nor for another way of splitting the work (merged rows carry no profile in their
        // part units).
        let tables: Vec<&str> = options.tables.iter().map(|t| t.name()).collect();
        let tables = tables.join(",");
        let mode = if merged {
            "merged".to_string()
        } else {
            format!("split in {partitions}")
        };
        for (name, _) in units.iter_mut() {
            *name = format!("{tables}|{mode}|{name}");
        }
        // A run that committed its snapshot is done; one that did not redoes any counter unit
        // whose staged partition is gone, so the snapshot it commits is whole.
        snapshot_unit = format!("{tables}|{mode}|snapshot as of {as_of} over {base}");
        if let (Some(next), false) = (&next, done.contains(&snapshot_unit)) {
            for p in 0..partitions {
                let name = units.iter().map(|(n, _)| n).find(|n| {
                    n.ends_with(&format!(
                        "|counters:{p}/{partitions} as of {as_of} over {base}"
                    ))
                });
                if let Some(name) = name {
                    if done.contains(name) && !next.has_part(fs, p, partitions)? {
                        done.remove(name);
                    }
                }
            }
        }
        let (mut units_done, mut units_skipped) = (0usize, 0usize);
        // Through HFiles a unit's cells reach HBase only at the hand-over: the manifest
        // records the units after it.
        let record_units = options.via == Via::Thrift;
        let written = with_writers(
            options,
            bulk_target.as_ref(),
            ts,
            started,
            &mut report,
            &mut |router| {
                let todo: Vec<units::Todo<'_, '_>> = units
                    .iter()
                    .enumerate()
                    .filter(|(_, (name, _))| !done.contains(name))
                    .map(|(index, (name, unit))| units::Todo {
                        index,
                        name,
                        unit,
                        counters: units::is_counter_unit(name),
                    })
                    .collect();
                units_skipped = units.len() - todo.len();
                if !record_units {
                    // Through HFiles nothing is durable before the hand-over, and the emission
                    // numbers order the cells: the units run side by side, without barriers.
                    for name in units::run_side_by_side(router, &todo)? {
                        done.insert(name);
                        units_done += 1;
                    }
                    return Ok(());
                }
                for t in &todo {
                    router.start_unit(t.index);
                    (t.unit)(router)?;
                    router.flush()?;
                    done.insert(t.name.to_string());
                    units_done += 1;
                    let text = serde_json::to_vec_pretty(&done).unwrap_or_default();
                    fs.write_atomic(&manifest_loc, &text)?;
                }
                Ok(())
            },
        );
        match &bulk_target {
            None => written?,
            Some(target) => {
                report.hfiles = Some(target.hand_over(options, written)?);
                let text = serde_json::to_vec_pretty(&done).unwrap_or_default();
                fs.write_atomic(&manifest_loc, &text)?;
            }
        }
        report.units_done = units_done;
        report.units_skipped = units_skipped;
    }
    // Every counter put is flushed: the snapshot may say so (once).
    if let Some(next) = next {
        if done.contains(&snapshot_unit) {
            next.abandon(fs);
        } else {
            next.commit(fs, &state, partitions)?;
            done.insert(snapshot_unit);
            let text = serde_json::to_vec_pretty(&done).unwrap_or_default();
            fs.write_atomic(&manifest_loc, &text)?;
        }
    }
    report.unresolved_mentions = unresolved_mentions.into_inner();
    report.counter_partitions = partitions;
    report.users_changed = users_changed.into_inner();
    report.posts_changed = posts_changed.into_inner();
    report.via = options.via;
    report.auto = auto;
    if options.via == Via::Hfile {
        // The hand-over is part of the load's time.
        report.set_time(started);
    }
    Ok(report)
}

/// Where `--via hfile` stages its files: `--staging`, or `<input>/_hfiles`.
fn staging_base(fs: &FileSystems, root: &Location, options: &LoadOptions) -> Result<Location> {
    match &options.staging {
        Some(url) => fs.parse(url),
        None => Ok(root.join("_hfiles")),
    }
}

/// `--via auto`: the bulk load for a night of at least `auto_threshold` cleaned rows, when
/// its staging folder is on HDFS (the region servers move the files in).
fn choose_route(
    fs: &FileSystems,
    root: &Location,
    options: &LoadOptions,
    files: &BTreeMap<&str, Vec<FileEntry>>,
) -> Result<AutoChoice> {
    let input_rows = partition::parquet_rows(fs, files.values().flatten())?;
    choose(fs, root, options, input_rows)
}

/// `--via auto` for `input_rows`, staging under `root` (or `--staging`).
fn choose(
    fs: &FileSystems,
    root: &Location,
    options: &LoadOptions,
    input_rows: u64,
) -> Result<AutoChoice> {
    let base = staging_base(fs, root, options)?;
    let threshold = options.auto_threshold;
    let (chose, because) = if input_rows < threshold {
        (
            Via::Thrift,
            format!("{input_rows} rows, below {threshold}: through Thrift"),
        )
    } else if !base.is_hdfs() {
        (
            Via::Thrift,
            format!("{input_rows} rows, but {base} is not on HDFS for the HFiles: through Thrift"),
        )
    } else {
        (
            Via::Hfile,
            format!("{input_rows} rows, at least {threshold}: as HFiles"),
        )
    };
    Ok(AutoChoice {
        input_rows,
        threshold,
        chose,
        because,
    })
}

/// Prepares `--via hfile`: an empty staging folder (a failed run's files must never be
/// handed over), the tables' current region boundaries, and a scratch folder.
fn bulk_target<'a>(
    fs: &'a FileSystems,
    root: &Location,
    options: &LoadOptions,
    ts: i64,
) -> Result<BulkTarget<'a>> {
    let base = staging_base(fs, root, options)?;
    if !base.is_hdfs() {
        return Err(Error::Usage(format!(
            "--via hfile stages HFiles on the cluster's HDFS, and {base} is not on HDFS: \
             pass --staging hdfs://…"
        )));
    }
    let staging = bulk::staging_root(&base, &options.date, &options.namespace);
    fs.delete(&staging)?;
    let mut conn = Connection::connect(&options.thrift, options.timeouts)?;
    let mut boundaries = bulk::Boundaries::default();
    for t in &options.tables {
        let regions = conn.regions(&t.in_namespace(&options.namespace))?;
        let mut starts: Vec<Vec<u8>> = regions.into_iter().map(|r| r.start_key).collect();
        starts.sort();
        boundaries.0.insert(*t, starts);
    }
    Ok(BulkTarget {
        fs,
        staging,
        boundaries,
        spill: crate::spill::SpillDir::create(None, "weibo-etl-load-")?,
        hfile: crate::hbase::hfile::WriterOptions {
            created_ms: chrono::Utc::now().timestamp_millis(),
            source_task: format!("weibo-etl load dt={} ts={ts}", options.date),
            codec: options.hfile_compression.codec(),
            ..Default::default()
        },
        staged: Mutex::new(Vec::new()),
    })
}

/// How many nights the history spans (the distinct `dt=` folders of its files).
fn history_nights(history: &BTreeMap<&str, Vec<FileEntry>>) -> usize {
    history
        .values()
        .flatten()
        .filter_map(|f| f.location.parent()?.file_name())
        .collect::<BTreeSet<String>>()
        .len()
}

//! The writers behind every HBase write of the toolkit: a [`Router`] that sends each put to
//! the writer of its region, and `--writers` threads that either batch the puts into Thrift
//! `mutateRows` calls (retried with jittered backoff) or collect them for HFiles
//! ([`super::bulk`]).
//!
//! Invariants: one region's puts go to one writer, in the order they were produced, so a
//! later put of the same cell wins as it would on one connection; every put carries its
//! emission number ([`super::emission::emission`]), which orders the cells of an HFile the same
//! way; a writer's own error is the one reported, not the router's "writer stopped".

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{bulk, emission, Via, WriteOptions, WriteReport};
use crate::error::{Error, Result};
use crate::hbase::layout::keys;
use crate::hbase::layout::Table;
use crate::hbase::{Connection, Put};
use crate::hdfs::{FileSystems, Location};

pub enum Msg {
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
/// ([`emission::emission`]): the order of the run's puts, however many threads produced them.
pub struct RoutedPut {
    pub table: Table,
    pub region: u32,
    pub ts: i64,
    pub seq: u64,
    pub put: Put,
}

/// Puts a router gathers for one writer before handing them over.
const ROUTE_GROUP: usize = 256;

/// Batches' worth of bytes a Thrift writer holds across all its buffers before it sends them
/// all.
const HELD_BATCHES: usize = 8;

/// One writer thread: its own Thrift connection, per-(table, region, timestamp) batches.
fn writer_loop(
    rx: Receiver<Msg>,
    options: &WriteOptions,
    stats: &Mutex<WriterStats>,
) -> Result<()> {
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
pub fn bulk_share(budget: u64) -> u64 {
    budget / 2
}

/// The part of `--memory-budget` the bulk collectors' queues share: deep enough that the
/// router keeps going while a collector spills.
pub fn queue_share(budget: u64) -> u64 {
    budget / 8
}

/// A put in a queue, as the queue's depth counts it (key, cells and their vectors).
const QUEUED_PUT_BYTES: u64 = 256;

/// The puts a writer's queue holds: a Thrift writer needs only a few batches in hand; a
/// collector as many as its share of the budget holds, so a spill does not stall the router.
fn queue_depth(options: &WriteOptions) -> usize {
    match options.via {
        Via::Hfile => {
            let per = queue_share(options.memory_budget) / options.writers.max(1) as u64;
            ((per / QUEUED_PUT_BYTES) as usize).max(4096)
        }
        _ => 4096,
    }
}

/// What the bulk collectors need besides the options.
pub struct BulkTarget<'a> {
    pub fs: &'a FileSystems,
    pub staging: Location,
    pub boundaries: bulk::Boundaries,
    pub spill: crate::spill::SpillDir,
    pub hfile: crate::hbase::hfile::WriterOptions,
    pub staged: Mutex<Vec<bulk::StagedFile>>,
}

impl BulkTarget<'_> {
    /// Once the writers are done (`written`): hands every staged HFile to HBase and removes
    /// the staging folder. A failed write or hand-over removes it too, so a failed run leaves
    /// no HFile that a later hand-over could adopt.
    pub fn hand_over(&self, options: &WriteOptions, written: Result<()>) -> Result<bulk::HandOver> {
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
    options: &WriteOptions,
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
pub type Unit<'a> = Box<dyn Fn(&mut Router) -> Result<()> + Send + Sync + 'a>;

/// Routes puts to the writers by region and flushes them at unit boundaries.
pub struct Router {
    pub senders: Vec<SyncSender<Msg>>,
    /// Puts not yet handed to each writer.
    pub pending: Vec<Vec<RoutedPut>>,
    pub regions: u32,
    /// Through HFiles, the tables' current regions: each region's cells go to one collector,
    /// so a region gets one file per family (HBase takes at most 32).
    pub boundaries: Option<bulk::Boundaries>,
    pub rows_by_table: BTreeMap<Table, u64>,
    /// The cell timestamp of the run's rows.
    pub ts: i64,
    /// The unit running, and the puts it has emitted: the next put's emission number.
    pub unit: u64,
    pub emitted: u64,
}

impl Router {
    /// Starts unit number `unit` (its place among the run's units).
    pub fn start_unit(&mut self, unit: usize) {
        self.unit = unit as u64;
        self.emitted = 0;
    }

    /// A router of its own for another producing thread, sending to the same writers.
    pub fn fork(&self) -> Router {
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
    pub fn absorb(&mut self, mut other: Router) -> Result<()> {
        for w in 0..other.senders.len() {
            other.hand_off(w)?;
        }
        for (t, n) in other.rows_by_table {
            *self.rows_by_table.entry(t).or_default() += n;
        }
        Ok(())
    }

    pub fn put(&mut self, table: Table, put: Put) -> Result<()> {
        self.put_at(table, put, self.ts)
    }

    /// A put whose cells carry timestamp `ts` (counters folded into a newer night's).
    pub fn put_at(&mut self, table: Table, put: Put, ts: i64) -> Result<()> {
        let prefix = [put.key[0], put.key[1]];
        let region = match &self.boundaries {
            Some(b) => b.region(table, &put.key),
            None => keys::region_of(prefix, self.regions),
        };
        let w = region as usize % self.senders.len();
        *self.rows_by_table.entry(table).or_default() += 1;
        let seq = emission::emission(self.unit, self.emitted)?;
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
    pub fn flush(&mut self) -> Result<()> {
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

/// Runs `body` with `options.writers` writer threads behind a [`Router`], then joins them
/// (a writer's own error, say an unreachable gateway, explains a "writer stopped" seen by the
/// router better than that message does) and fills the report's put counts and throughput.
pub fn with_writers(
    options: &WriteOptions,
    bulk: Option<&BulkTarget<'_>>,
    ts: i64,
    started: Instant,
    report: &mut WriteReport,
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

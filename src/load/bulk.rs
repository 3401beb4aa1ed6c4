//! The bulk-load route of `load` (`--via hfile`): the same cells as the Thrift route, written
//! as HFiles and handed to HBase, which adopts them without a write-ahead log or memstore.
//!
//! Each of the `--writers` collectors receives the puts the router sends it (the same units,
//! in the same order, as the Thrift writers would), encodes every cell with its table,
//! family, region (by the table's current region boundaries, read through Thrift) and
//! emission number, and sorts them in memory; past its share of `--memory-budget` it spills
//! the sorted run to the local scratch folder. When every unit has run, each collector merges
//! its runs into one HFile per table, family and region (rolled at [`MAX_HFILE_BYTES`])
//! under `<input>/_hfiles/dt=<date>/<namespace>/<table>/<family>/`. Then [`hand_over`] runs
//! the bulk-load command per table and checks that HBase took every file.
//!
//! Invariants:
//! - A cell written twice in one run (same row, column and timestamp) appears once, with the
//!   value emitted last, as the Thrift route's later put overwrites the earlier.
//! - HFiles are written only after every unit succeeded, under hidden names until complete,
//!   and the staging folder is emptied before a run writes into it, so a failed run leaves
//!   nothing that a hand-over could adopt. docs/design/bulk-load.md has the rest.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::{BufReader, Read, Write};
use std::process::Command;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hbase::hfile::{Cell, HFileWriter, WriterOptions};
use crate::hbase::Put;
use crate::hdfs::{FileSystems, Location};
use crate::spill::SpillDir;

use super::layout::Table;

/// A file past this size is closed and the next begins (HBase splits regions at 10 GB).
pub const MAX_HFILE_BYTES: u64 = 2 << 30;

/// The default hand-over command, as on a cluster node: `<cmd> <dir> <table>`.
pub const DEFAULT_BULKLOAD_CMD: &str = "hbase completebulkload";

/// The region start keys of every table loaded, the first one empty.
#[derive(Clone, Debug, Default)]
pub struct Boundaries(pub BTreeMap<Table, Vec<Vec<u8>>>);

impl Boundaries {
    /// The region of `table` that holds `row`.
    pub fn region(&self, table: Table, row: &[u8]) -> u32 {
        let starts = self.0.get(&table).map(Vec::as_slice).unwrap_or(&[]);
        starts
            .partition_point(|s| s.as_slice() <= row)
            .saturating_sub(1) as u32
    }
}

/// Where a run's HFiles go: `<base>/dt=<date>/<namespace>` (`base` is `<input>/_hfiles`
/// unless `--staging` says otherwise).
pub fn staging_root(base: &Location, date: &str, namespace: &str) -> Location {
    base.join(&format!("dt={date}")).join(namespace)
}

/// HBase's default `hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily`.
pub const MAX_FILES_PER_REGION: usize = 32;

/// One HFile written and waiting for its hand-over.
#[derive(Clone, Debug, Serialize)]
pub struct StagedFile {
    pub table: Table,
    pub family: String,
    pub region: u32,
    pub location: String,
    pub cells: u64,
    pub bytes: u64,
}

/// One cell on its way into a collector.
#[derive(Clone, Copy, Debug)]
struct Record<'a> {
    table: u8,
    region: u32,
    family: &'a [u8],
    row: &'a [u8],
    qualifier: &'a [u8],
    ts: i64,
    /// `u64::MAX -` the emission number, so the latest emission sorts first.
    seq_inv: u64,
    value: &'a [u8],
}

/// Appends `bytes` so that byte order is kept and the end is marked: 0x00 becomes
/// 0x00 0xff and the field ends with 0x00 0x00.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Reads a field written by [`escape`] into `out`; returns the bytes consumed.
fn unescape(bytes: &[u8], out: &mut Vec<u8>) -> usize {
    out.clear();
    let mut i = 0;
    loop {
        let b = bytes[i];
        if b == 0 {
            if bytes[i + 1] == 0 {
                return i + 2;
            }
            out.push(0);
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
}

impl Record<'_> {
    /// Appends `u32 key length, key, u32 value length, value`. The key is
    /// `table, family, 0x00, region (BE), escaped row, escaped qualifier, inverted timestamp,
    /// inverted emission number`: its unsigned byte order is the file order (table, family,
    /// region), then HBase's cell order, then the latest emission first, so sorting and
    /// merging compare bytes only.
    fn encode(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        out.push(self.table);
        out.extend_from_slice(self.family);
        out.push(0);
        out.extend_from_slice(&self.region.to_be_bytes());
        escape(self.row, out);
        escape(self.qualifier, out);
        out.extend_from_slice(&(!((self.ts as u64) ^ (1 << 63))).to_be_bytes());
        out.extend_from_slice(&self.seq_inv.to_be_bytes());
        let key_len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&key_len.to_be_bytes());
        out.extend_from_slice(&(self.value.len() as u32).to_be_bytes());
        out.extend_from_slice(self.value);
    }
}

/// A record's key and value.
fn split(record: &[u8]) -> (&[u8], &[u8]) {
    let key_len = u32::from_be_bytes(record[..4].try_into().unwrap()) as usize;
    let key = &record[4..4 + key_len];
    (key, &record[8 + key_len..])
}

/// The length of a key's (table, family, region) prefix: the HFile it belongs to.
fn group_len(key: &[u8]) -> usize {
    let family_end = 1 + key[1..]
        .iter()
        .position(|&b| b == 0)
        .expect("terminated family");
    family_end + 1 + 4
}

/// The key without the emission number: equal for two emissions of one HBase cell.
fn cell_part(key: &[u8]) -> &[u8] {
    &key[..key.len() - 8]
}

/// A key's parts, decoded into reused buffers.
#[derive(Default)]
struct Decoded {
    table: u8,
    family: Vec<u8>,
    region: u32,
    row: Vec<u8>,
    qualifier: Vec<u8>,
    ts: i64,
}

impl Decoded {
    fn read(&mut self, key: &[u8]) {
        self.table = key[0];
        let g = group_len(key);
        self.family.clear();
        self.family.extend_from_slice(&key[1..g - 5]);
        self.region = u32::from_be_bytes(key[g - 4..g].try_into().unwrap());
        let mut at = g;
        at += unescape(&key[at..], &mut self.row);
        at += unescape(&key[at..], &mut self.qualifier);
        let ts_desc = u64::from_be_bytes(key[at..at + 8].try_into().unwrap());
        self.ts = (!ts_desc ^ (1 << 63)) as i64;
    }
}

fn table_code(t: Table) -> u8 {
    t as u8
}

fn table_of(code: u8) -> Table {
    Table::ALL
        .into_iter()
        .chain([Table::Friend])
        .find(|t| *t as u8 == code)
        .expect("our code")
}

/// One collector: the cells of the regions routed to one writer slot.
pub struct Collector<'a> {
    id: usize,
    boundaries: &'a Boundaries,
    spill: &'a SpillDir,
    budget: usize,
    arena: Vec<u8>,
    entries: Vec<(u32, u32)>,
    /// Spilled runs and the records each holds.
    runs: Vec<(String, u64)>,
    merged: u32,
    seq: u64,
    pub cells: u64,
}

impl<'a> Collector<'a> {
    pub fn new(id: usize, boundaries: &'a Boundaries, spill: &'a SpillDir, budget: usize) -> Self {
        Collector {
            id,
            boundaries,
            spill,
            budget: budget.max(1 << 20),
            arena: Vec::new(),
            entries: Vec::new(),
            runs: Vec::new(),
            merged: 0,
            seq: 0,
            cells: 0,
        }
    }

    /// Takes the cells of one put, with timestamp `ts`.
    pub fn add(&mut self, table: Table, ts: i64, put: &Put) -> Result<()> {
        let region = self.boundaries.region(table, &put.key);
        for (column, value) in &put.cells {
            let at = column
                .iter()
                .position(|&b| b == b':')
                .unwrap_or(column.len());
            let (family, qualifier) = (&column[..at], column.get(at + 1..).unwrap_or(&[]));
            let start = self.arena.len();
            Record {
                table: table_code(table),
                region,
                family,
                row: &put.key,
                qualifier,
                ts,
                seq_inv: u64::MAX - self.seq,
                value,
            }
            .encode(&mut self.arena);
            self.entries
                .push((start as u32, (self.arena.len() - start) as u32));
            self.seq += 1;
            self.cells += 1;
        }
        // Offsets are u32: spill before the arena could outgrow them, whatever the budget.
        let held = self.arena.capacity() + self.entries.capacity() * 8;
        if held >= self.budget || self.arena.len() >= (u32::MAX as usize) / 2 {
            self.spill_run()?;
        }
        Ok(())
    }

    fn sort(&mut self) {
        let arena = &self.arena;
        let key = |(s, l): (u32, u32)| split(&arena[s as usize..(s + l) as usize]).0;
        self.entries.sort_unstable_by(|a, b| key(*a).cmp(key(*b)));
    }

    fn spill_run(&mut self) -> Result<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        self.sort();
        let name = format!("w{}-run{}", self.id, self.runs.len());
        log::debug!(
            "collector {}: spilling {} cells to {name}",
            self.id,
            self.entries.len()
        );
        let mut out = RunWriter::create(self.spill, &name)?;
        for &(s, l) in &self.entries {
            out.write(&self.arena[s as usize..(s + l) as usize])?;
        }
        let records = out.finish()?;
        self.runs.push((name, records));
        self.arena.clear();
        self.entries.clear();
        Ok(())
    }

    /// Merges everything collected into HFiles under `staging`.
    pub fn write_hfiles(
        mut self,
        fs: &FileSystems,
        staging: &Location,
        options: &WriterOptions,
    ) -> Result<Vec<StagedFile>> {
        let mut sources: Vec<Source> = Vec::new();
        if !self.runs.is_empty() {
            self.spill_run()?;
            // Everything is on disk now: the buffer's memory goes back before the merge.
            self.arena = Vec::new();
            self.entries = Vec::new();
            // At most MAX_FAN_IN runs are read at once: the oldest are merged into one first.
            while self.runs.len() > MAX_FAN_IN {
                let group: Vec<(String, u64)> = self.runs.drain(..MAX_FAN_IN).collect();
                let name = format!("w{}-merged{}", self.id, self.merged);
                self.merged += 1;
                let inputs = group
                    .iter()
                    .map(|(n, records)| Source::open(self.spill, n, *records))
                    .collect::<Result<Vec<_>>>()?;
                let mut merger = Merger::new(inputs, self.spill)?;
                let mut out = RunWriter::create(self.spill, &name)?;
                while let Some(record) = merger.next_record()? {
                    out.write(&record)?;
                }
                let records = out.finish()?;
                drop(merger);
                for (n, _) in &group {
                    self.spill.remove(n)?;
                }
                self.runs.push((name, records));
            }
            for (name, records) in &self.runs {
                sources.push(Source::open(self.spill, name, *records)?);
            }
        } else {
            self.sort();
            sources.push(Source::Memory {
                arena: &self.arena,
                entries: &self.entries,
                at: 0,
            });
        }
        let mut merger = Merger::new(sources, self.spill)?;
        let mut out = FileRoller::new(fs, staging, self.id, options);
        let mut last: Vec<u8> = Vec::new();
        let mut parts = Decoded::default();
        while let Some(bytes) = merger.next_record()? {
            let (key, value) = split(&bytes);
            if !last.is_empty() && cell_part(key) == cell_part(&last) {
                continue;
            }
            parts.read(key);
            out.append(group_len(key), key, &parts, value)?;
            last.clear();
            last.extend_from_slice(key);
        }
        let staged = out.finish()?;
        for (name, _) in &self.runs {
            self.spill.remove(name)?;
        }
        Ok(staged)
    }
}

/// Runs merged at once; more are merged in groups first, so the readers' buffers and
/// decoders stay bounded however large the load.
const MAX_FAN_IN: usize = 64;

/// A spilled run: length-prefixed records, zstd-compressed (the keys repeat their table,
/// family and row prefixes, so a run shrinks several times for little CPU).
struct RunWriter<'a> {
    out: zstd::stream::write::Encoder<'static, std::io::BufWriter<std::fs::File>>,
    spill: &'a SpillDir,
    name: String,
    records: u64,
}

impl<'a> RunWriter<'a> {
    fn create(spill: &'a SpillDir, name: &str) -> Result<Self> {
        let file = spill.create_file(name, 1 << 20)?;
        let mut out = zstd::stream::write::Encoder::new(file, 1)
            .map_err(|e| spill.error("write spill", name, e))?;
        // A damaged run fails its read instead of yielding other bytes.
        out.include_checksum(true)
            .map_err(|e| spill.error("write spill", name, e))?;
        Ok(RunWriter {
            out,
            spill,
            name: name.to_string(),
            records: 0,
        })
    }

    fn write(&mut self, record: &[u8]) -> Result<()> {
        self.records += 1;
        self.out
            .write_all(&(record.len() as u32).to_be_bytes())
            .and_then(|_| self.out.write_all(record))
            .map_err(|e| self.spill.error("write spill", &self.name, e))
    }

    /// Ends the run; returns the records it holds.
    fn finish(self) -> Result<u64> {
        let (spill, name, records) = (self.spill, self.name, self.records);
        self.out
            .finish()
            .and_then(|mut f| f.flush())
            .map_err(|e| spill.error("write spill", &name, e))?;
        Ok(records)
    }
}

type RunReader = BufReader<zstd::stream::read::Decoder<'static, BufReader<std::fs::File>>>;

/// A sorted source of records: the in-memory buffer or a spilled run.
enum Source<'a> {
    Memory {
        arena: &'a [u8],
        entries: &'a [(u32, u32)],
        at: usize,
    },
    File {
        reader: RunReader,
        buf: Vec<u8>,
        name: String,
        /// Records written to the run, and read so far: a run that ends early is an error.
        expected: u64,
        seen: u64,
    },
}

impl Source<'_> {
    fn open<'a>(spill: &SpillDir, name: &str, expected: u64) -> Result<Source<'a>> {
        let file = spill
            .open(name)?
            .ok_or_else(|| spill.error("open spill", name, std::io::ErrorKind::NotFound.into()))?;
        let decoder = zstd::stream::read::Decoder::new(file)
            .map_err(|e| spill.error("read spill", name, e))?;
        Ok(Source::File {
            reader: BufReader::with_capacity(64 << 10, decoder),
            buf: Vec::new(),
            name: name.to_string(),
            expected,
            seen: 0,
        })
    }

    /// The next record, copied into `out`; false at the end.
    fn next_into(&mut self, out: &mut Vec<u8>, spill: &SpillDir) -> Result<bool> {
        out.clear();
        match self {
            Source::Memory { arena, entries, at } => {
                let Some(&(s, l)) = entries.get(*at) else {
                    return Ok(false);
                };
                *at += 1;
                out.extend_from_slice(&arena[s as usize..(s + l) as usize]);
                Ok(true)
            }
            Source::File {
                reader,
                buf,
                name,
                expected,
                seen,
            } => {
                let mut len = [0u8; 4];
                // Only a read of nothing where a record would start is the run's end; a
                // truncated frame is an error (zstd reports it as an early end of file).
                let first = loop {
                    match reader.read(&mut len[..1]) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        other => break other,
                    }
                };
                match first.map_err(|e| spill.error("read spill", name, e))? {
                    0 if *seen == *expected => return Ok(false),
                    0 => {
                        return Err(spill.error(
                            "read spill",
                            name,
                            std::io::Error::other(format!(
                                "the run ends after {seen} of its {expected} records"
                            )),
                        ))
                    }
                    _ => {}
                }
                reader
                    .read_exact(&mut len[1..])
                    .map_err(|e| spill.error("read spill", name, e))?;
                *seen += 1;
                buf.resize(u32::from_be_bytes(len) as usize, 0);
                reader
                    .read_exact(buf)
                    .map_err(|e| spill.error("read spill", name, e))?;
                out.extend_from_slice(buf);
                Ok(true)
            }
        }
    }
}

/// The head record of one source, ordered for a min-heap.
struct Head {
    bytes: Vec<u8>,
    source: usize,
}

impl PartialEq for Head {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap pops the greatest, the merge wants the least.
        split(&o.bytes).0.cmp(split(&self.bytes).0)
    }
}

struct Merger<'a> {
    sources: Vec<Source<'a>>,
    heap: BinaryHeap<Head>,
    spill: &'a SpillDir,
}

impl<'a> Merger<'a> {
    fn new(mut sources: Vec<Source<'a>>, spill: &'a SpillDir) -> Result<Self> {
        let mut heap = BinaryHeap::new();
        for (i, s) in sources.iter_mut().enumerate() {
            let mut bytes = Vec::new();
            if s.next_into(&mut bytes, spill)? {
                heap.push(Head { bytes, source: i });
            }
        }
        Ok(Merger {
            sources,
            heap,
            spill,
        })
    }

    fn next_record(&mut self) -> Result<Option<Vec<u8>>> {
        let Some(head) = self.heap.pop() else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        if self.sources[head.source].next_into(&mut bytes, self.spill)? {
            self.heap.push(Head {
                bytes,
                source: head.source,
            });
        }
        Ok(Some(head.bytes))
    }
}

/// Writes one HFile per (table, family, region), starting a new one past the size limit.
struct FileRoller<'a> {
    fs: &'a FileSystems,
    staging: &'a Location,
    collector: usize,
    options: &'a WriterOptions,
    open: Option<OpenFile>,
    /// Files written and closing: an HDFS close waits for the NameNode to see the last
    /// block (hundreds of ms), so files close on threads of their own, all at once.
    closing: Vec<std::thread::JoinHandle<Result<StagedFile>>>,
    staged: Vec<StagedFile>,
    seq: u32,
}

struct OpenFile {
    group: Vec<u8>,
    table: Table,
    family: String,
    region: u32,
    location: Location,
    writer: HFileWriter<crate::hdfs::AtomicFile>,
}

impl<'a> FileRoller<'a> {
    fn new(
        fs: &'a FileSystems,
        staging: &'a Location,
        collector: usize,
        options: &'a WriterOptions,
    ) -> Self {
        FileRoller {
            fs,
            staging,
            collector,
            options,
            open: None,
            closing: Vec::new(),
            staged: Vec::new(),
            seq: 0,
        }
    }

    /// Appends one cell; `key[..group]` names its file's table, family and region.
    fn append(&mut self, group: usize, key: &[u8], r: &Decoded, value: &[u8]) -> Result<()> {
        let same_group = self.open.as_ref().is_some_and(|f| f.group == key[..group]);
        let full = self
            .open
            .as_ref()
            .is_some_and(|f| f.writer.approx_len() >= MAX_HFILE_BYTES);
        if !same_group || full {
            self.close()?;
            let table = table_of(r.table);
            let family = String::from_utf8_lossy(&r.family).into_owned();
            let name = format!("w{}-r{}-{}", self.collector, r.region, self.seq);
            self.seq += 1;
            let location = self.staging.join(table.name()).join(&family).join(&name);
            let out = self.fs.create_atomic(&location)?;
            let options = WriterOptions {
                source_task: format!("{}/{name}", self.options.source_task),
                ..self.options.clone()
            };
            self.open = Some(OpenFile {
                group: key[..group].to_vec(),
                table,
                family: family.clone(),
                region: r.region,
                location,
                writer: HFileWriter::new(out, options),
            });
        }
        let f = self.open.as_mut().expect("opened above");
        let cell = Cell {
            row: &r.row,
            family: &r.family,
            qualifier: &r.qualifier,
            timestamp: r.ts,
            value,
        };
        f.writer
            .append(&cell)
            .map_err(|e| hfile_error(&f.location, e))
    }

    fn close(&mut self) -> Result<()> {
        let Some(f) = self.open.take() else {
            return Ok(());
        };
        let (out, summary) = f.writer.finish().map_err(|e| hfile_error(&f.location, e))?;
        let staged = StagedFile {
            table: f.table,
            family: f.family.clone(),
            region: f.region,
            location: f.location.to_string(),
            cells: summary.cells,
            bytes: summary.bytes,
        };
        if self.closing.len() >= MAX_CLOSING {
            let oldest = self.closing.remove(0);
            self.staged.push(join_closing(oldest, self.staging)?);
        }
        self.closing
            .push(std::thread::spawn(move || out.commit().map(|_| staged)));
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<StagedFile>> {
        let mut first_err = self.close().err();
        for handle in std::mem::take(&mut self.closing) {
            match join_closing(handle, self.staging) {
                Ok(f) => self.staged.push(f),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or_else(|| Ok(std::mem::take(&mut self.staged)), Err)
    }
}

impl Drop for FileRoller<'_> {
    /// On an error halfway, the files still closing finish before the run goes on to remove
    /// the staging folder, so none is renamed into place after that.
    fn drop(&mut self) {
        for handle in self.closing.drain(..) {
            let _ = handle.join();
        }
    }
}

/// Files closing at once per collector.
const MAX_CLOSING: usize = 16;

fn join_closing(
    handle: std::thread::JoinHandle<Result<StagedFile>>,
    staging: &Location,
) -> Result<StagedFile> {
    handle.join().unwrap_or_else(|_| {
        Err(Error::Hbase {
            op: "write HFile",
            table: staging.to_string(),
            reason: "a closing thread panicked".into(),
        })
    })
}

fn hfile_error(location: &Location, e: crate::hbase::hfile::HFileError) -> Error {
    Error::Hbase {
        op: "write HFile",
        table: location.to_string(),
        reason: e.to_string(),
    }
}

/// What the hand-over did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HandOver {
    pub tables: usize,
    pub files: usize,
    pub cells: u64,
    pub bytes: u64,
    pub seconds: f64,
}

/// Hands each table's staged files to HBase with `command <dir> <namespace:table>`, and checks
/// that HBase took every one: the command must succeed, print no checksum failure, and leave
/// none of the files behind (a region server moves the files it adopts).
pub fn hand_over(
    fs: &FileSystems,
    staging: &Location,
    namespace: &str,
    command: &[String],
    staged: &[StagedFile],
) -> Result<HandOver> {
    let started = std::time::Instant::now();
    let mut by_table: BTreeMap<Table, Vec<&StagedFile>> = BTreeMap::new();
    for f in staged {
        by_table.entry(f.table).or_default().push(f);
    }
    if command.is_empty() {
        return Err(Error::Usage("--bulkload-cmd is empty".into()));
    }
    // HBase refuses more than 32 files per region and family
    // (`hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily`): say so before handing over.
    let mut per_group: BTreeMap<(Table, &str, u32), usize> = BTreeMap::new();
    for f in staged {
        *per_group.entry((f.table, &f.family, f.region)).or_default() += 1;
    }
    if let Some(((table, family, region), n)) =
        per_group.iter().find(|(_, n)| **n > MAX_FILES_PER_REGION)
    {
        return Err(Error::Hbase {
            op: "bulk load",
            table: table.in_namespace(namespace),
            reason: format!(
                "{n} files for region {region}, family {family}: HBase takes at most \
                 {MAX_FILES_PER_REGION} (hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily); \
                 split the table into more regions"
            ),
        });
    }
    // Tables go over at once: each hand-over waits mostly on its command's start and on the
    // region servers, not on this machine.
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = by_table
            .iter()
            .map(|(table, files)| {
                scope.spawn(move || hand_over_table(fs, staging, namespace, command, *table, files))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Hbase {
                        op: "bulk load",
                        table: namespace.to_string(),
                        reason: "a hand-over thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    let mut done = HandOver {
        tables: by_table.len(),
        ..HandOver::default()
    };
    for files in by_table.values() {
        done.files += files.len();
        done.cells += files.iter().map(|f| f.cells).sum::<u64>();
        done.bytes += files.iter().map(|f| f.bytes).sum::<u64>();
    }
    done.seconds = started.elapsed().as_secs_f64();
    Ok(done)
}

/// Hands one table's folder over and checks that HBase took every file.
fn hand_over_table(
    fs: &FileSystems,
    staging: &Location,
    namespace: &str,
    command: &[String],
    table: Table,
    files: &[&StagedFile],
) -> Result<()> {
    let dir = staging.join(table.name());
    let full = table.in_namespace(namespace);
    log::info!("bulk load: {} files into {full}", files.len());
    let (program, fixed) = command.split_first().expect("checked non-empty");
    let out = Command::new(program)
        .args(fixed)
        .arg(dir.to_string())
        .arg(&full)
        .output()
        .map_err(|e| Error::Hbase {
            op: "bulk load",
            table: full.clone(),
            reason: format!("cannot run {program}: {e}"),
        })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(15)..].join("\n");
    if !out.status.success() {
        return Err(Error::Hbase {
            op: "bulk load",
            table: full,
            reason: format!("{} exited with {}:\n{tail}", command.join(" "), out.status),
        });
    }
    if text.contains("checksum verification failed") {
        return Err(Error::Hbase {
            op: "bulk load",
            table: full,
            reason: format!("HBase reported a checksum failure:\n{tail}"),
        });
    }
    let mut left = Vec::new();
    for f in files {
        if fs.exists(&fs.parse(&f.location)?)? {
            left.push(f.location.clone());
        }
    }
    if let Some(first) = left.first() {
        return Err(Error::Hbase {
            op: "bulk load",
            table: full,
            reason: format!(
                "HBase did not adopt {} of {} files (first: {first}); a region may have split \
                 during the load: run it again",
                left.len(),
                files.len(),
            ),
        });
    }
    fs.delete(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Parts = (u8, Vec<u8>, u32, Vec<u8>, Vec<u8>, i64, u64);

    fn encoded(p: &Parts) -> Vec<u8> {
        let mut out = Vec::new();
        Record {
            table: p.0,
            family: &p.1,
            region: p.2,
            row: &p.3,
            qualifier: &p.4,
            ts: p.5,
            seq_inv: p.6,
            value: b"v",
        }
        .encode(&mut out);
        out
    }

    proptest! {
        /// Byte order of the encoded keys is the naive order of the parts (timestamp and
        /// emission descending), and every part reads back.
        #[test]
        fn keys_sort_as_their_parts_and_read_back(
            parts in proptest::collection::vec(
                (0u8..3, prop_oneof![Just(b"count".to_vec()), Just(b"info".to_vec()), Just(b"r".to_vec())],
                 0u32..3, proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(0xff), any::<u8>()], 1..6),
                 proptest::collection::vec(prop_oneof![Just(0u8), Just(0xff), any::<u8>()], 0..4),
                 prop_oneof![Just(i64::MIN), Just(-1i64), Just(0), Just(i64::MAX), any::<i64>()],
                 any::<u64>()),
                1..40),
        ) {
            let mut naive = parts.clone();
            naive.sort_by(|a, b| {
                (a.0, &a.1, a.2, &a.3, &a.4).cmp(&(b.0, &b.1, b.2, &b.3, &b.4))
                    .then(b.5.cmp(&a.5))
                    .then(a.6.cmp(&b.6))
            });
            let mut bytes: Vec<Vec<u8>> = parts.iter().map(encoded).collect();
            bytes.sort_by(|a, b| split(a).0.cmp(split(b).0));
            let mut d = Decoded::default();
            for (p, b) in naive.iter().zip(&bytes) {
                let (key, value) = split(b);
                d.read(key);
                prop_assert_eq!((d.table, &d.family, d.region, &d.row, &d.qualifier, d.ts), (p.0, &p.1, p.2, &p.3, &p.4, p.5));
                prop_assert_eq!(value, b"v");
            }
        }
    }

    fn boundaries() -> Boundaries {
        let mut b = Boundaries::default();
        b.0.insert(Table::User, vec![vec![], vec![0x80]]);
        b.0.insert(Table::Follow, vec![vec![]]);
        b
    }

    /// (row, qualifier, timestamp, value) as read back.
    type ReadCell = (Vec<u8>, Vec<u8>, i64, Vec<u8>);

    /// Collects puts, writes the HFiles to a local folder, and reads back (table, family,
    /// region, row, qualifier, ts, value) per file with the test reader.
    fn run(puts: &[(Table, i64, Put)], budget: usize) -> Vec<(String, Vec<ReadCell>)> {
        let b = boundaries();
        let spill = SpillDir::create(None, "bulk-test").unwrap();
        let out = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("hdfs://127.0.0.1:9");
        let staging = fs.parse(out.path().to_str().unwrap()).unwrap();
        let mut c = Collector::new(0, &b, &spill, budget);
        c.budget = budget;
        for (t, ts, p) in puts {
            c.add(*t, *ts, p).unwrap();
        }
        let staged = c
            .write_hfiles(&fs, &staging, &WriterOptions::default())
            .unwrap();
        staged
            .iter()
            .map(|f| {
                let bytes = fs.read_to_vec(&fs.parse(&f.location).unwrap()).unwrap();
                let parsed = crate::hbase::hfile::reader::parse(&bytes)
                    .unwrap()
                    .cells
                    .into_iter()
                    .map(|c| (c.row, c.qualifier, c.timestamp, c.value))
                    .collect();
                let rel = f.location.rsplit('/').take(3).collect::<Vec<_>>();
                (
                    format!(
                        "{}/{}/{}",
                        rel[2],
                        rel[1],
                        rel[0].split('-').nth(1).unwrap()
                    ),
                    parsed,
                )
            })
            .collect()
    }

    #[test]
    fn a_spilled_run_cut_short_fails_the_merge() {
        let b = boundaries();
        let spill = SpillDir::create(None, "bulk-test").unwrap();
        let out = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("hdfs://127.0.0.1:9");
        let staging = fs.parse(out.path().to_str().unwrap()).unwrap();
        let mut c = Collector::new(0, &b, &spill, 1);
        c.budget = 1;
        for i in 0..50u32 {
            let put = Put::new(i.to_be_bytes().to_vec()).cell("info:n", vec![b'x'; 300]);
            c.add(Table::User, 1, &put).unwrap();
        }
        c.spill_run().unwrap();
        let (name, _) = c.runs[0].clone();
        let path = spill.path(&name);
        let len = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len / 2).unwrap();
        let err = c
            .write_hfiles(&fs, &staging, &WriterOptions::default())
            .unwrap_err();
        assert!(err.to_string().contains(&name), "{err}");
    }

    #[test]
    fn many_runs_merge_in_groups_to_the_same_files() {
        // 300 puts spilled one run each: more than MAX_FAN_IN runs, so groups merge first.
        let puts: Vec<(Table, i64, Put)> = (0..300u32)
            .map(|i| {
                let row = (i.wrapping_mul(2_654_435_761)).to_be_bytes().to_vec();
                let put = Put::new(row).cell("info:n", format!("v{i}"));
                (Table::User, i64::from(i % 3), put)
            })
            .collect();
        let spilled = run(&puts, 1);
        assert_eq!(spilled, run(&puts, 1 << 30));
        let cells: usize = spilled.iter().map(|f| f.1.len()).sum();
        assert_eq!(cells, 300);
    }

    #[test]
    fn files_follow_table_family_and_region_and_the_last_put_wins() {
        let puts = vec![
            (
                Table::User,
                5,
                Put::new(vec![0x90, 1])
                    .cell("info:n", "late")
                    .cell("count:f", vec![1]),
            ),
            (
                Table::User,
                5,
                Put::new(vec![0x10, 1]).cell("info:n", "early"),
            ),
            (Table::Follow, 5, Put::new(vec![0x10, 2]).cell("r:t", "x")),
            // The same cell again: the later emission wins.
            (
                Table::User,
                5,
                Put::new(vec![0x90, 1]).cell("info:n", "later"),
            ),
            // An older version of the same cell stays.
            (
                Table::User,
                4,
                Put::new(vec![0x90, 1]).cell("info:n", "older"),
            ),
        ];
        for budget in [1, 1 << 30] {
            let files = run(&puts, budget);
            let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
            assert_eq!(
                names,
                [
                    "user/count/r1",
                    "user/info/r0",
                    "user/info/r1",
                    "follow/r/r0"
                ]
            );
            let get = |name: &str| files.iter().find(|f| f.0 == name).unwrap().1.clone();
            assert_eq!(
                get("user/info/r0"),
                vec![(vec![0x10, 1], b"n".to_vec(), 5, b"early".to_vec())]
            );
            assert_eq!(
                get("user/info/r1"),
                vec![
                    (vec![0x90, 1], b"n".to_vec(), 5, b"later".to_vec()),
                    (vec![0x90, 1], b"n".to_vec(), 4, b"older".to_vec()),
                ],
                "budget {budget}"
            );
            assert_eq!(
                get("user/count/r1"),
                vec![(vec![0x90, 1], b"f".to_vec(), 5, vec![1])]
            );
            assert_eq!(
                get("follow/r/r0"),
                vec![(vec![0x10, 2], b"t".to_vec(), 5, b"x".to_vec())]
            );
        }
    }
}

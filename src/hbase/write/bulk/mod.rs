//! The bulk-load route of `load` (`--via hfile`): the same cells as the Thrift route, written
//! as HFiles and handed to HBase, which adopts them without a write-ahead log or memstore.
//!
//! Each of the `--writers` collectors receives the puts the routers send it (the same units
//! as the Thrift writers would get, run side by side), encodes every cell with its table,
//! family, region (by the table's current region boundaries, read through Thrift) and
//! emission number, and sorts them in memory; past its share of `--memory-budget` it spills
//! the sorted run to the local scratch folder. When every unit has run, each collector merges
//! its runs into one HFile per table, family and region (rolled at [`MAX_HFILE_BYTES`])
//! under `<input>/_hfiles/dt=<date>/<namespace>/<table>/<family>/`. Then [`hand_over`] runs
//! the bulk-load command per table and checks that HBase took every file.
//!
//! - `record`: a cell's record and its byte-ordered key;
//! - `runs`: spilled runs and the merge;
//! - `files`: the HFiles, one per table, family and region;
//! - [`hand_over`]: the bulk-load command per table, and the check that HBase took every file.
//!
//! Invariants:
//! - A cell written twice in one run (same row, column and timestamp) appears once, with the
//!   value of the higher emission number (`super::emission`: the later put of the sequential
//!   order), as the Thrift route's later put overwrites the earlier.
//! - HFiles are written only after every unit succeeded, under hidden names until complete,
//!   and the staging folder is emptied before a run writes into it, so a failed run leaves
//!   nothing that a hand-over could adopt. docs/design/bulk-load.md has the rest.

mod files;
mod hand_over;
mod record;
mod runs;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hbase::hfile::WriterOptions;
use crate::hbase::Put;
use crate::hdfs::{FileSystems, Location};
use crate::spill::SpillDir;

use crate::hbase::layout::Table;
use files::FileRoller;
pub use hand_over::{hand_over, HandOver, MAX_FILES_PER_REGION};
use record::{cell_part, cmp_groups, cmp_keys, group_len, row_prefix, split, Decoded, Record};
use runs::{Merger, Run, RunFile, Source};

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

fn table_code(t: Table) -> u8 {
    t as u8
}

fn table_of(code: u8) -> Table {
    Table::ALL
        .into_iter()
        .chain([Table::Friend, Table::Rank, Table::Inbox])
        .find(|t| *t as u8 == code)
        .expect("our code")
}

/// The cells of one put are numbered within the room its emission number leaves
/// ([`super::emission`]).
pub const MAX_CELL_BITS: u32 = 12;

/// Rows longer than this cannot be a cell (HBase's row length is a signed short).
const MAX_ROW: usize = i16::MAX as usize;

/// One record held in memory: where it is in the arena, and its sort prefix (the rank of
/// its file in the top 16 bits, its row's first 6 bytes below), so most comparisons of a
/// sort are one integer's.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    prefix: u64,
    start: u32,
    len: u32,
}

/// A column's family end and qualifier start (`family:qualifier`).
fn split_column(column: &[u8]) -> (usize, usize) {
    let at = column
        .iter()
        .position(|&b| b == b':')
        .unwrap_or(column.len());
    (at, (at + 1).min(column.len()))
}

/// The number of the file `group` names, in the order first met (the last one is kept
/// aside: a put's cells mostly share it).
fn group_of(
    groups: &mut HashMap<Vec<u8>, u16>,
    last: &mut Option<(Vec<u8>, u16)>,
    group: &[u8],
) -> u16 {
    if let Some((g, n)) = last {
        if g.as_slice() == group {
            return *n;
        }
    }
    let next = groups.len().min(u16::MAX as usize) as u16;
    let n = *groups.entry(group.to_vec()).or_insert(next);
    *last = Some((group.to_vec(), n));
    n
}

/// One collector: the cells of the regions routed to one writer slot.
pub struct Collector<'a> {
    id: usize,
    boundaries: &'a Boundaries,
    spill: &'a SpillDir,
    budget: usize,
    arena: Vec<u8>,
    entries: Vec<Entry>,
    /// The files (table, family, region prefixes) met so far, and their numbers.
    groups: HashMap<Vec<u8>, u16>,
    last_group: Option<(Vec<u8>, u16)>,
    /// The scratch file of the spilled runs, made at the first spill.
    file: Option<RunFile<'a>>,
    runs: Vec<Run>,
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
            groups: HashMap::new(),
            last_group: None,
            file: None,
            runs: Vec::new(),
            cells: 0,
        }
    }

    /// Takes the cells of one put, with timestamp `ts` and emission number `seq`: its
    /// cells are numbered `seq`, `seq + 1`, … (at most `2^cell_bits` of them), and of two
    /// emissions of one cell the higher number wins.
    pub fn add(&mut self, table: Table, ts: i64, seq: u64, put: &Put) -> Result<()> {
        let n = put.cells.len() + put.deletes.len();
        if n >= 1 << MAX_CELL_BITS {
            return Err(Error::Hbase {
                op: "write HFile",
                table: table.name().into(),
                reason: format!(
                    "a put of {n} cells: at most {} are numbered",
                    (1u64 << MAX_CELL_BITS) - 1
                ),
            });
        }
        if put.key.is_empty() || put.key.len() > MAX_ROW {
            return Err(Error::Hbase {
                op: "write HFile",
                table: table.name().into(),
                reason: format!(
                    "a row of {} bytes: HBase takes 1 to {MAX_ROW}",
                    put.key.len()
                ),
            });
        }
        // The buffers are reserved once at the budget and never grow past it: a put that
        // does not fit spills what is held first (a `Vec` that grew would double).
        if self.arena.capacity() == 0 {
            let arena = self.budget / 6 * 5;
            self.arena.reserve_exact(arena);
            let entries = (self.budget - arena) / std::mem::size_of::<Entry>();
            self.entries.reserve_exact(entries);
        }
        let region = self.boundaries.region(table, &put.key);
        let bytes: usize = put
            .written()
            .map(|(c, v, _)| {
                let (fe, qs) = split_column(c);
                Record::len_of(fe, put.key.len(), c.len() - qs, v.len())
            })
            .sum();
        let full = self.arena.len() + bytes > self.arena.capacity()
            || self.entries.len() + n > self.entries.capacity()
            // Offsets are u32: spill before the arena could outgrow them, whatever the budget.
            || self.arena.len() + bytes >= u32::MAX as usize;
        if full {
            self.spill_run()?;
        }
        for (i, (column, value, kind)) in put.written().enumerate() {
            let (fe, qs) = split_column(column);
            let start = self.arena.len();
            Record {
                table: table_code(table),
                region,
                family: &column[..fe],
                row: &put.key,
                qualifier: &column[qs..],
                ts,
                seq_inv: u64::MAX - (seq + i as u64),
                value,
                kind,
            }
            .encode(&mut self.arena);
            let key = split(&self.arena[start..]).0;
            let group = group_of(
                &mut self.groups,
                &mut self.last_group,
                &key[..group_len(key)],
            );
            let prefix = (u64::from(group) << 48) | (row_prefix(key) >> 16);
            self.entries.push(Entry {
                prefix,
                start: start as u32,
                len: (self.arena.len() - start) as u32,
            });
            self.cells += 1;
        }
        Ok(())
    }

    fn sort(&mut self) {
        // Group numbers become ranks in key order; past u16 groups the prefixes say nothing
        // and whole keys decide.
        let exact = self.groups.len() < u16::MAX as usize;
        if exact {
            let mut order: Vec<(&Vec<u8>, u16)> =
                self.groups.iter().map(|(g, n)| (g, *n)).collect();
            order.sort_by(|a, b| cmp_groups(a.0, b.0));
            let mut rank = vec![0u64; order.len()];
            for (r, (_, n)) in order.iter().enumerate() {
                rank[*n as usize] = r as u64;
            }
            for e in &mut self.entries {
                e.prefix = (rank[(e.prefix >> 48) as usize] << 48) | (e.prefix & ((1 << 48) - 1));
            }
        } else {
            for e in &mut self.entries {
                e.prefix = 0;
            }
        }
        let arena = &self.arena;
        let key = |e: &Entry| split(&arena[e.start as usize..(e.start + e.len) as usize]).0;
        self.entries.sort_unstable_by(|a, b| {
            a.prefix
                .cmp(&b.prefix)
                .then_with(|| cmp_keys(key(a), key(b)))
        });
        // The ranks hold for this sort only: the next batch may meet new files.
        self.groups.clear();
        self.last_group = None;
    }

    fn spill_run(&mut self) -> Result<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        self.sort();
        if self.file.is_none() {
            self.file = Some(RunFile::create(self.spill, &format!("w{}-runs", self.id))?);
        }
        let file = self.file.as_ref().expect("created above");
        log::debug!(
            "collector {}: spilling {} cells to {} (run {})",
            self.id,
            self.entries.len(),
            file.name,
            self.runs.len()
        );
        let mut out = file.writer()?;
        for e in &self.entries {
            out.write(&self.arena[e.start as usize..(e.start + e.len) as usize])?;
        }
        self.runs.push(out.finish()?);
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
            let file = self.file.as_ref().expect("runs were spilled");
            // At most `fan_in` runs are read at once. Past that, the smallest runs are merged
            // first, at the end of the same file, just enough of them that the final merge
            // reads `fan_in` (as Hadoop's merger does): one run too many costs a small merge,
            // not a pass over everything. Emission numbers order the cells, not the runs.
            let fan_in = runs::fan_in(self.budget);
            while self.runs.len() > fan_in {
                let n = (self.runs.len() - fan_in + 1).min(fan_in);
                self.runs.sort_by_key(|r| std::cmp::Reverse(r.records));
                let group: Vec<Run> = self.runs.split_off(self.runs.len() - n);
                let inputs = group.iter().map(|r| file.source(*r)).collect();
                let mut merger = Merger::new(inputs, self.spill, &file.name)?;
                let mut out = file.writer()?;
                let mut record = Vec::new();
                while merger.next_record(&mut record)? {
                    out.write(&record)?;
                }
                self.runs.push(out.finish()?);
            }
            sources.extend(self.runs.iter().map(|r| file.source(*r)));
        } else {
            self.sort();
            sources.push(Source::Memory {
                arena: &self.arena,
                entries: &self.entries,
                at: 0,
            });
        }
        let name = format!("w{}-runs", self.id);
        let mut merger = Merger::new(sources, self.spill, &name)?;
        let mut out = FileRoller::new(fs, staging, self.id, options);
        // The last record written: a record of the same cell after it is an older emission.
        let (mut bytes, mut last) = (Vec::new(), Vec::new());
        let mut parts = Decoded::default();
        while merger.next_record(&mut bytes)? {
            let (key, value) = split(&bytes);
            if !last.is_empty() && cell_part(key) == cell_part(split(&last).0) {
                continue;
            }
            parts.read(key);
            out.append(group_len(key), key, &parts, value)?;
            std::mem::swap(&mut bytes, &mut last);
        }
        let staged = out.finish()?;
        drop(merger);
        if let Some(file) = &self.file {
            file.clear()?;
        }
        Ok(staged)
    }
}

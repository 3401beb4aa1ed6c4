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
//! - `record`: a cell's record and its byte-ordered key;
//! - `runs`: spilled runs and the merge;
//! - `files`: the HFiles, one per table, family and region;
//! - [`hand_over`]: the bulk-load command per table, and the check that HBase took every file.
//!
//! Invariants:
//! - A cell written twice in one run (same row, column and timestamp) appears once, with the
//!   value emitted last, as the Thrift route's later put overwrites the earlier.
//! - HFiles are written only after every unit succeeded, under hidden names until complete,
//!   and the staging folder is emptied before a run writes into it, so a failed run leaves
//!   nothing that a hand-over could adopt. docs/design/bulk-load.md has the rest.

mod files;
mod hand_over;
mod record;
mod runs;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::Result;
use crate::hbase::hfile::WriterOptions;
use crate::hbase::Put;
use crate::hdfs::{FileSystems, Location};
use crate::spill::SpillDir;

use super::layout::Table;
use files::FileRoller;
pub use hand_over::{hand_over, HandOver, MAX_FILES_PER_REGION};
use record::{cell_part, group_len, split, Decoded, Record};
use runs::{Merger, RunWriter, Source, MAX_FAN_IN};

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
        .chain([Table::Friend])
        .find(|t| *t as u8 == code)
        .expect("our code")
}

/// A record's bytes beyond twice its row and column (escaping at most doubles them) and its
/// value: lengths, table, family end, region, field ends, timestamp and emission number.
const RECORD_OVERHEAD: usize = 4 + 1 + 1 + 4 + 2 + 2 + 8 + 8 + 4;

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
        // The buffers are reserved once at the budget and never grow past it: a put that
        // might not fit spills what is held first (a `Vec` that grew would double).
        if self.arena.capacity() == 0 {
            let arena = self.budget / 8 * 7;
            self.arena.reserve_exact(arena);
            self.entries.reserve_exact((self.budget - arena) / 8);
        }
        let bound: usize = put
            .cells
            .iter()
            .map(|(c, v)| RECORD_OVERHEAD + 2 * (put.key.len() + c.len()) + v.len())
            .sum();
        let full = self.arena.len() + bound > self.arena.capacity()
            || self.entries.len() + put.cells.len() > self.entries.capacity()
            // Offsets are u32: spill before the arena could outgrow them, whatever the budget.
            || self.arena.len() + bound >= (u32::MAX as usize) / 2;
        if full {
            self.spill_run()?;
        }
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
                let mut record = Vec::new();
                while merger.next_record(&mut record)? {
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
        for (name, _) in &self.runs {
            self.spill.remove(name)?;
        }
        Ok(staged)
    }
}

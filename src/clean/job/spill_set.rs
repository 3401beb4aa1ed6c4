//! The rows between `clean`'s passes: one slot per entity and key partition, its rows held
//! in memory while the run's budget allows and appended to an Arrow IPC spill file after.
//!
//! Invariants:
//! - A partition is all its batches, held and spilled; where a batch went changes nothing
//!   downstream (dedupe orders rows by key, crawl time and input position, not by batch).
//! - A partition's batches stay few and large however many chunks the input has: each chunk's
//!   few rows wait in the slot until they make one batch (docs/design/clean.md).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::buffer::Buffer;
use arrow::ipc::reader::{read_footer_length, FileDecoder};
use arrow::ipc::writer::FileWriter;

use super::arrow_err;
use crate::clean::columns::{self, SpillBuilder};
use crate::clean::{Entity, Row};
use crate::error::Result;
use crate::spill::SpillDir;

/// Write buffers of all spill files together. The number of files grows with the input (one
/// per entity and partition), so each file's buffer shrinks instead: a fixed buffer per file
/// would grow with the input (docs/design/clean.md).
const SPILL_BUFFER_BYTES: usize = 64 << 20;
/// One partition of one entity between the passes: the batches held in memory (while the
/// set's budget allows) and the spill file the rest went to (opened at its first batch).
/// Each chunk of pass 1 gives a partition a few rows only (a chunk spreads over every
/// partition): they are appended to `pending` until there are enough to make one batch, so
/// a partition's batches stay few and large however many chunks the input has.
#[derive(Default)]
struct SpillSlot {
    held: Vec<RecordBatch>,
    file: Option<FileWriter<BufWriter<File>>>,
    /// Created at the slot's first row: most slots of a run never see one (an input of
    /// follows only leaves the other entities' slots empty).
    pending: Option<SpillBuilder>,
}

pub(in crate::clean) struct SpillSet {
    pub(in crate::clean) dir: SpillDir,
    pub(in crate::clean) partitions: usize,
    /// Write buffer of each spill file.
    buffer: usize,
    /// Bytes of rows a slot gathers before they become one batch.
    coalesce: u64,
    slots: HashMap<(Entity, usize), Mutex<SpillSlot>>,
    /// Bytes of values (as [`SpillBuilder::bytes`] counts them) slots may hold in memory,
    /// and hold now.
    memory_budget: u64,
    pub(super) held: AtomicU64,
    /// Bytes of values sent to files.
    pub(super) spilled: AtomicU64,
}

impl SpillSet {
    pub(super) fn new(
        base: Option<&Path>,
        partitions: usize,
        memory_budget: u64,
    ) -> Result<SpillSet> {
        let dir = SpillDir::create(base, "weibo-clean-")?;
        let mut slots = HashMap::new();
        for entity in Entity::ALL {
            for p in 0..partitions {
                slots.insert((entity, p), Mutex::default());
            }
        }
        let files = partitions * Entity::ALL.len();
        Ok(SpillSet {
            memory_budget,
            held: AtomicU64::new(0),
            spilled: AtomicU64::new(0),
            dir,
            partitions,
            buffer: (SPILL_BUFFER_BYTES / files.max(1)).clamp(16 << 10, 1 << 20),
            // The pending rows of all slots share as much again as the write buffers.
            coalesce: (SPILL_BUFFER_BYTES / files.max(1)).clamp(64 << 10, 4 << 20) as u64,
            slots,
        })
    }

    /// The scratch file holding input file `file_index`'s rejects.
    pub(in crate::clean) fn rejects_name(file_index: usize) -> String {
        format!("rejects-{file_index:06}.jsonl")
    }

    fn name(entity: Entity, partition: usize) -> String {
        format!("{}-{partition:05}.arrows", entity.name())
    }

    pub(super) fn append(
        &self,
        entity: Entity,
        partition: usize,
        rows: &[(u64, &Row<'_>)],
    ) -> Result<()> {
        let mut slot = self.slots[&(entity, partition)]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let pending = slot
            .pending
            .get_or_insert_with(|| SpillBuilder::new(entity));
        pending.append(rows);
        if (pending.bytes() as u64) < self.coalesce {
            return Ok(());
        }
        self.place(entity, partition, &mut slot)
    }

    /// Makes a slot's pending rows one batch, held while the budget allows, else written to
    /// the partition's file. Which batches are held changes nothing downstream: a partition
    /// is all its batches, wherever they are, and dedupe orders rows by key, crawl time and
    /// input position, not by batch.
    fn place(&self, entity: Entity, partition: usize, slot: &mut SpillSlot) -> Result<()> {
        // Sized by its values rather than by Arrow's measure, which counts the builders'
        // spare capacity too (never touched, so never resident).
        let (batch, size) = match slot.pending.as_mut() {
            Some(pending) if !pending.is_empty() => {
                let size = pending.bytes() as u64;
                (pending.finish().map_err(arrow_err("build batch"))?, size)
            }
            _ => return Ok(()),
        };
        if self.held.fetch_add(size, Ordering::Relaxed) + size <= self.memory_budget {
            slot.held.push(batch);
            return Ok(());
        }
        self.held.fetch_sub(size, Ordering::Relaxed);
        self.spilled.fetch_add(size, Ordering::Relaxed);
        if slot.file.is_none() {
            let file = self
                .dir
                .create_file(&Self::name(entity, partition), self.buffer)?;
            let writer = FileWriter::try_new(file, &columns::spill_schema(entity))
                .map_err(arrow_err("spill"))?;
            slot.file = Some(writer);
        }
        slot.file
            .as_mut()
            .expect("created above")
            .write(&batch)
            .map_err(arrow_err("spill"))
    }

    pub(super) fn finish(&self) -> Result<()> {
        for (&(entity, partition), slot) in &self.slots {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            self.place(entity, partition, &mut slot)?;
            slot.pending = None;
            if let Some(mut writer) = slot.file.take() {
                writer.finish().map_err(arrow_err("spill"))?;
                writer
                    .into_inner()
                    .map_err(arrow_err("spill"))?
                    .flush()
                    .map_err(|e| self.dir.error("flush spill", "", e))?;
            }
        }
        Ok(())
    }

    /// All batches of one partition, held and spilled (`None` if there were none); they are
    /// gone from the set afterwards (the held ones handed over, the file removed).
    pub(in crate::clean) fn load(
        &self,
        entity: Entity,
        partition: usize,
    ) -> Result<Option<Vec<RecordBatch>>> {
        let held = std::mem::take(
            &mut self.slots[&(entity, partition)]
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .held,
        );
        let name = Self::name(entity, partition);
        let Some(file) = self.dir.open(&name)? else {
            return Ok((!held.is_empty()).then_some(held));
        };
        let mut batches = held;
        batches.extend(read_spill_file(&file).map_err(|e| {
            self.dir
                .error("read spill", &name, std::io::Error::other(e.to_string()))
        })?);
        // Read once: deleted now, on the thread that read it, so dropping its pages from the
        // cache is spread over pass 2 rather than left to one thread at the end.
        self.dir.remove(&name)?;
        Ok(Some(batches))
    }
}

/// The batches of a finished spill file, decoded in place from a memory map of it: the
/// arrays point into the file's pages in the page cache, so nothing is copied out of the
/// kernel or into freshly faulted memory (they stay valid after the file is removed).
fn read_spill_file(file: &File) -> std::result::Result<Vec<RecordBatch>, arrow::error::ArrowError> {
    let bad = |what: &str| arrow::error::ArrowError::IpcError(format!("spill file: {what}"));
    // SAFETY: the file is this run's own, in its private temporary folder; its writer has
    // finished and nothing writes it again (it is only removed, which keeps the mapping).
    let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| bad(&e.to_string()))?;
    let data = Buffer::from(bytes::Bytes::from_owner(map));
    let end = data.len().checked_sub(10).ok_or_else(|| bad("too short"))?;
    let tail: [u8; 10] = data[end..].try_into().expect("ten bytes");
    let footer_start = end
        .checked_sub(read_footer_length(tail)?)
        .ok_or_else(|| bad("footer longer than the file"))?;
    let footer =
        arrow::ipc::root_as_footer(&data[footer_start..end]).map_err(|e| bad(&e.to_string()))?;
    let schema =
        arrow::ipc::convert::try_fb_to_schema(footer.schema().ok_or_else(|| bad("no schema"))?)?;
    // SAFETY: written by this run from batches arrow built and validated; re-validating
    // every string on the way back would cost time for nothing.
    let decoder =
        unsafe { FileDecoder::new(Arc::new(schema), footer.version()).with_skip_validation(true) };
    let mut batches = Vec::new();
    for block in footer.recordBatches().into_iter().flatten() {
        let len = block.metaDataLength() as usize + block.bodyLength() as usize;
        let start = block.offset() as usize;
        if start.checked_add(len).is_none_or(|e| e > footer_start) {
            return Err(bad("block past the footer"));
        }
        if let Some(batch) =
            decoder.read_record_batch(block, &data.slice_with_length(start, len))?
        {
            batches.push(batch);
        }
    }
    Ok(batches)
}

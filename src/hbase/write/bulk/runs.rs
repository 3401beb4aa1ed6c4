//! Spilled runs of sorted records, and the k-way merge over them and the in-memory buffer.
//!
//! All the runs of one collector go into one scratch file, one after the other, so a merge
//! holds one descriptor however many runs it reads. A run is a sequence of blocks, each
//! `raw length, stored length, CRC32C of the stored bytes` (u32 BE) and a zstd frame of
//! whole records; records are self-delimiting (`split`). Blocks are read with positioned
//! reads, so the runs of one file are read side by side.
//!
//! Invariants: a block that fails its checksum, a run that ends early or holds a record cut
//! short is an error naming the scratch file, never a shorter merge.

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};
use crate::spill::SpillDir;

use super::record::{cmp_keys, split};

/// Raw bytes per block: large enough for zstd to find the keys' repeats, small enough that
/// hundreds of runs can be read at once.
const BLOCK_BYTES: usize = 64 << 10;

const HEADER: usize = 12;

/// The zstd level of the runs: the fastest that still shrinks the repeated key prefixes.
const LEVEL: i32 = 1;

/// What one run being merged holds in memory: its stored and raw block, and its head.
const SOURCE_BYTES: usize = 2 * BLOCK_BYTES + (4 << 10);

/// Runs merged at once within `budget` bytes; more are merged in groups first.
pub(super) fn fan_in(budget: usize) -> usize {
    (budget / SOURCE_BYTES).clamp(16, 512)
}

/// A run's place in its collector's scratch file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) records: u64,
}

/// One collector's scratch file: its runs, appended one after another.
pub(super) struct RunFile<'a> {
    file: File,
    spill: &'a SpillDir,
    pub(super) name: String,
    /// The end of the last finished run: the next one starts there.
    len: Cell<u64>,
    /// One run is written at a time.
    writing: Cell<bool>,
}

impl<'a> RunFile<'a> {
    pub(super) fn create(spill: &'a SpillDir, name: &str) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(spill.path(name))
            .map_err(|e| spill.error("create spill", name, e))?;
        Ok(RunFile {
            file,
            spill,
            name: name.to_string(),
            len: Cell::new(0),
            writing: Cell::new(false),
        })
    }

    fn error(&self, op: &'static str, source: std::io::Error) -> Error {
        self.spill.error(op, &self.name, source)
    }

    fn corrupt(&self, at: u64, what: &str) -> Error {
        self.error(
            "read spill",
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("block at byte {at}: {what}"),
            ),
        )
    }

    /// Starts a run at the end of the file (while runs before it are being read); the next
    /// run may start once it is finished.
    pub(super) fn writer(&self) -> Result<RunWriter<'_, 'a>> {
        assert!(!self.writing.replace(true), "one run at a time");
        let compressor =
            zstd::bulk::Compressor::new(LEVEL).map_err(|e| self.error("write spill", e))?;
        let start = self.len.get();
        Ok(RunWriter {
            file: self,
            at: start,
            compressor,
            raw: Vec::with_capacity(BLOCK_BYTES),
            stored: Vec::new(),
            start,
            records: 0,
        })
    }

    /// A source reading `run` back.
    pub(super) fn source(&self, run: Run) -> Source<'_> {
        Source::File(FileSource {
            file: self,
            run,
            next: run.start,
            raw: Vec::new(),
            stored: Vec::new(),
            at: 0,
            seen: 0,
        })
    }

    /// Frees the space of every run (the file stays until the spill folder goes).
    pub(super) fn clear(&self) -> Result<()> {
        self.file
            .set_len(0)
            .map_err(|e| self.error("remove spill", e))?;
        self.len.set(0);
        Ok(())
    }
}

/// Writes one run at the end of its file.
pub(super) struct RunWriter<'f, 'a> {
    file: &'f RunFile<'a>,
    /// Where the next block goes.
    at: u64,
    compressor: zstd::bulk::Compressor<'static>,
    raw: Vec<u8>,
    stored: Vec<u8>,
    start: u64,
    records: u64,
}

impl RunWriter<'_, '_> {
    /// Appends one record (as `Record::encode` wrote it).
    pub(super) fn write(&mut self, record: &[u8]) -> Result<()> {
        if !self.raw.is_empty() && self.raw.len() + record.len() > BLOCK_BYTES {
            self.flush_block()?;
        }
        self.raw.extend_from_slice(record);
        self.records += 1;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        let bound = zstd::zstd_safe::compress_bound(self.raw.len());
        if self.stored.len() < HEADER + bound {
            self.stored.resize(HEADER + bound, 0);
        }
        let n = self
            .compressor
            .compress_to_buffer(&self.raw, &mut self.stored[HEADER..])
            .map_err(|e| self.file.error("write spill", e))?;
        let crc = crc32c::crc32c(&self.stored[HEADER..HEADER + n]);
        self.stored[..4].copy_from_slice(&(self.raw.len() as u32).to_be_bytes());
        self.stored[4..8].copy_from_slice(&(n as u32).to_be_bytes());
        self.stored[8..12].copy_from_slice(&crc.to_be_bytes());
        let block = &self.stored[..HEADER + n];
        self.file
            .file
            .write_all_at(block, self.at)
            .map_err(|e| self.file.error("write spill", e))?;
        self.at += block.len() as u64;
        self.raw.clear();
        Ok(())
    }

    /// Ends the run.
    pub(super) fn finish(mut self) -> Result<Run> {
        if !self.raw.is_empty() {
            self.flush_block()?;
        }
        self.file.len.set(self.at);
        self.file.writing.set(false);
        Ok(Run {
            start: self.start,
            end: self.at,
            records: self.records,
        })
    }
}

/// A sorted source of records: the in-memory buffer or a spilled run.
pub(super) enum Source<'a> {
    Memory {
        arena: &'a [u8],
        entries: &'a [super::Entry],
        at: usize,
    },
    File(FileSource<'a>),
}

pub(super) struct FileSource<'a> {
    file: &'a RunFile<'a>,
    run: Run,
    /// Where the next block starts.
    next: u64,
    raw: Vec<u8>,
    stored: Vec<u8>,
    /// The next record's place in `raw`.
    at: usize,
    seen: u64,
}

impl FileSource<'_> {
    /// Reads the next block into `raw`; false at the run's end.
    fn next_block(&mut self, zstd: &mut zstd::bulk::Decompressor<'static>) -> Result<bool> {
        let f = self.file;
        let at = self.next;
        if at == self.run.end {
            if self.seen != self.run.records {
                return Err(f.corrupt(
                    at,
                    &format!(
                        "the run ends after {} of its {} records",
                        self.seen, self.run.records
                    ),
                ));
            }
            return Ok(false);
        }
        let mut header = [0u8; HEADER];
        f.file
            .read_exact_at(&mut header, at)
            .map_err(|e| f.error("read spill", e))?;
        let raw_len = u32::from_be_bytes(header[..4].try_into().unwrap()) as usize;
        let stored_len = u32::from_be_bytes(header[4..8].try_into().unwrap()) as u64;
        let crc = u32::from_be_bytes(header[8..].try_into().unwrap());
        if at + HEADER as u64 + stored_len > self.run.end {
            return Err(f.corrupt(at, "it runs past its run's end"));
        }
        self.stored.resize(stored_len as usize, 0);
        f.file
            .read_exact_at(&mut self.stored, at + HEADER as u64)
            .map_err(|e| f.error("read spill", e))?;
        if crc32c::crc32c(&self.stored) != crc {
            return Err(f.corrupt(at, "it fails its checksum"));
        }
        self.raw.resize(raw_len, 0);
        let n = zstd
            .decompress_to_buffer(&self.stored, &mut self.raw[..])
            .map_err(|e| f.error("read spill", e))?;
        if n != raw_len {
            return Err(f.corrupt(at, "it holds fewer bytes than it says"));
        }
        self.next = at + HEADER as u64 + stored_len;
        self.at = 0;
        Ok(true)
    }

    fn next_into(
        &mut self,
        out: &mut Vec<u8>,
        zstd: &mut zstd::bulk::Decompressor<'static>,
    ) -> Result<bool> {
        while self.at == self.raw.len() {
            if !self.next_block(zstd)? {
                return Ok(false);
            }
        }
        let rest = &self.raw[self.at..];
        let len = record_len(rest)
            .ok_or_else(|| self.file.corrupt(self.next, "a record is cut short"))?;
        out.extend_from_slice(&rest[..len]);
        self.at += len;
        self.seen += 1;
        Ok(true)
    }
}

/// The length of the record at the start of `bytes`, if it is whole.
fn record_len(bytes: &[u8]) -> Option<usize> {
    let key = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let at = 4 + key;
    let value = u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
    let len = at + 4 + value;
    (len <= bytes.len()).then_some(len)
}

impl Source<'_> {
    /// The next record, copied into `out`; false at the end.
    fn next_into(
        &mut self,
        out: &mut Vec<u8>,
        zstd: &mut zstd::bulk::Decompressor<'static>,
    ) -> Result<bool> {
        out.clear();
        match self {
            Source::Memory { arena, entries, at } => {
                let Some(e) = entries.get(*at) else {
                    return Ok(false);
                };
                *at += 1;
                out.extend_from_slice(&arena[e.start as usize..(e.start + e.len) as usize]);
                Ok(true)
            }
            Source::File(f) => f.next_into(out, zstd),
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
        cmp_keys(split(&o.bytes).0, split(&self.bytes).0)
    }
}

pub(super) struct Merger<'a> {
    sources: Vec<Source<'a>>,
    heap: BinaryHeap<Head>,
    /// One decompression context for every run: they are read one block at a time.
    zstd: zstd::bulk::Decompressor<'static>,
}

impl<'a> Merger<'a> {
    pub(super) fn new(mut sources: Vec<Source<'a>>, spill: &SpillDir, name: &str) -> Result<Self> {
        let mut zstd =
            zstd::bulk::Decompressor::new().map_err(|e| spill.error("read spill", name, e))?;
        let mut heap = BinaryHeap::new();
        for (i, s) in sources.iter_mut().enumerate() {
            let mut bytes = Vec::new();
            if s.next_into(&mut bytes, &mut zstd)? {
                heap.push(Head { bytes, source: i });
            }
        }
        Ok(Merger {
            sources,
            heap,
            zstd,
        })
    }

    /// Moves the least record into `out` (whose old buffer takes the source's next record,
    /// so the merge allocates nothing per record); false when every source is done.
    pub(super) fn next_record(&mut self, out: &mut Vec<u8>) -> Result<bool> {
        let Some(mut head) = self.heap.pop() else {
            return Ok(false);
        };
        std::mem::swap(out, &mut head.bytes);
        if self.sources[head.source].next_into(&mut head.bytes, &mut self.zstd)? {
            self.heap.push(head);
        }
        Ok(true)
    }
}

//! Spilled runs of sorted records (zstd, checksummed, counted) and the k-way merge over them
//! and the in-memory buffer.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::{BufReader, Read, Write};

use crate::error::Result;
use crate::spill::SpillDir;

use super::record::split;

/// Runs merged at once; more are merged in groups first, so the readers' buffers and
/// decoders stay bounded however large the load.
pub(super) const MAX_FAN_IN: usize = 64;

/// A spilled run: length-prefixed records, zstd-compressed (the keys repeat their table,
/// family and row prefixes, so a run shrinks several times for little CPU).
pub(super) struct RunWriter<'a> {
    out: zstd::stream::write::Encoder<'static, std::io::BufWriter<std::fs::File>>,
    spill: &'a SpillDir,
    name: String,
    records: u64,
}

impl<'a> RunWriter<'a> {
    pub(super) fn create(spill: &'a SpillDir, name: &str) -> Result<Self> {
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

    pub(super) fn write(&mut self, record: &[u8]) -> Result<()> {
        self.records += 1;
        self.out
            .write_all(&(record.len() as u32).to_be_bytes())
            .and_then(|_| self.out.write_all(record))
            .map_err(|e| self.spill.error("write spill", &self.name, e))
    }

    /// Ends the run; returns the records it holds.
    pub(super) fn finish(self) -> Result<u64> {
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
pub(super) enum Source<'a> {
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
    pub(super) fn open<'a>(spill: &SpillDir, name: &str, expected: u64) -> Result<Source<'a>> {
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
    pub(super) fn next_into(&mut self, out: &mut Vec<u8>, spill: &SpillDir) -> Result<bool> {
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

pub(super) struct Merger<'a> {
    sources: Vec<Source<'a>>,
    heap: BinaryHeap<Head>,
    spill: &'a SpillDir,
}

impl<'a> Merger<'a> {
    pub(super) fn new(mut sources: Vec<Source<'a>>, spill: &'a SpillDir) -> Result<Self> {
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

    /// Moves the least record into `out` (whose old buffer takes the source's next record,
    /// so the merge allocates nothing per record); false when every source is done.
    pub(super) fn next_record(&mut self, out: &mut Vec<u8>) -> Result<bool> {
        let Some(mut head) = self.heap.pop() else {
            return Ok(false);
        };
        std::mem::swap(out, &mut head.bytes);
        if self.sources[head.source].next_into(&mut head.bytes, self.spill)? {
            self.heap.push(head);
        }
        Ok(true)
    }
}

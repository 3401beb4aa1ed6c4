//! Spill: scratch files on the local disk for work larger than its memory budget.
//!
//! `clean` spills Arrow batches per (entity, key partition) and its rejects per input file;
//! `friends` spills packed edges per hash partition. Both take their scratch folder from
//! here, and `friends` its partition files too, so one mechanism owns the folder's life and
//! the errors that name its files.
//!
//! Invariants: every spill lives in a fresh folder of its own under `--spill-dir` (created
//! if missing: a fresh node may not have it) or the system temp folder, and the folder goes
//! when the [`SpillDir`] is dropped, whether the run succeeded or not. Nothing in it is ever
//! read by another run.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// A run's private scratch folder.
pub struct SpillDir {
    dir: tempfile::TempDir,
}

impl SpillDir {
    /// A new folder named `<prefix>…` under `base` (or the system temp folder).
    pub fn create(base: Option<&Path>, prefix: &str) -> Result<SpillDir> {
        let dir = match base {
            Some(b) => std::fs::create_dir_all(b)
                .and_then(|_| tempfile::Builder::new().prefix(prefix).tempdir_in(b)),
            None => tempfile::Builder::new().prefix(prefix).tempdir(),
        }
        .map_err(|e| Error::Io {
            op: "create spill",
            path: base.map_or("temp".into(), |p| p.display().to_string()),
            source: e,
        })?;
        Ok(SpillDir { dir })
    }

    /// Where the scratch file `name` lives.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Creates (or truncates) the scratch file `name`, buffered by `buffer` bytes.
    pub fn create_file(&self, name: &str, buffer: usize) -> Result<BufWriter<File>> {
        File::create(self.path(name))
            .map(|f| BufWriter::with_capacity(buffer, f))
            .map_err(|e| self.error("create spill", name, e))
    }

    /// Opens the scratch file `name`; `None` when it was never written.
    pub fn open(&self, name: &str) -> Result<Option<File>> {
        match File::open(self.path(name)) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.error("open spill", name, e)),
        }
    }

    /// Frees the scratch file `name` once it has been read.
    pub fn remove(&self, name: &str) -> Result<()> {
        std::fs::remove_file(self.path(name)).map_err(|e| self.error("remove spill", name, e))
    }

    /// An I/O error on the scratch file `name`.
    pub fn error(&self, op: &'static str, name: &str, source: std::io::Error) -> Error {
        Error::Io {
            op,
            path: self.path(name).display().to_string(),
            source,
        }
    }
}

/// `n` partitions of fixed-size byte records, appended from any thread and read back one
/// partition at a time (the callers encode and decode the records).
pub struct Partitions {
    dir: SpillDir,
    writers: Vec<Mutex<BufWriter<File>>>,
}

impl Partitions {
    /// `partitions` files in a new [`SpillDir`]; their write buffers share `buffer_bytes`
    /// (many partitions get small buffers, never under 4 KiB or over 256 KiB each).
    pub fn create(
        base: Option<&Path>,
        prefix: &str,
        partitions: u32,
        buffer_bytes: u64,
    ) -> Result<Partitions> {
        let dir = SpillDir::create(base, prefix)?;
        let buffer = (buffer_bytes / partitions.max(1) as u64).clamp(4 << 10, 256 << 10) as usize;
        let writers = (0..partitions)
            .map(|p| dir.create_file(&Self::name(p), buffer).map(Mutex::new))
            .collect::<Result<_>>()?;
        Ok(Partitions { dir, writers })
    }

    fn name(p: u32) -> String {
        format!("p{p:05}.bin")
    }

    /// How many partitions there are.
    pub fn count(&self) -> u32 {
        self.writers.len() as u32
    }

    /// The partition a hash falls in.
    pub fn partition_of(&self, hash: u64) -> u32 {
        crate::hash::bucket(hash, self.writers.len() as u64) as u32
    }

    /// Appends whole records to partition `p`.
    pub fn write(&self, p: u32, bytes: &[u8]) -> Result<()> {
        let mut w = self.writers[p as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        w.write_all(bytes)
            .map_err(|e| self.dir.error("spill", &Self::name(p), e))
    }

    /// Flushes every partition; reading starts after this.
    pub fn finish(&self) -> Result<()> {
        for (p, w) in self.writers.iter().enumerate() {
            w.lock()
                .unwrap_or_else(|e| e.into_inner())
                .flush()
                .map_err(|e| self.dir.error("spill", &Self::name(p as u32), e))?;
        }
        Ok(())
    }

    /// Bytes spilled into partition `p` (after [`Partitions::finish`]).
    pub fn bytes(&self, p: u32) -> Result<u64> {
        std::fs::metadata(self.dir.path(&Self::name(p)))
            .map(|m| m.len())
            .map_err(|e| self.dir.error("spill", &Self::name(p), e))
    }

    /// Partition `p` read back in pieces of about 1 MB, each a whole number of `record`-byte
    /// records, so it never sits in memory whole.
    pub fn for_each_chunk(&self, p: u32, record: usize, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        let name = Self::name(p);
        let err = |e| self.dir.error("spill", &name, e);
        let mut file = File::open(self.dir.path(&name)).map_err(err)?;
        let mut buf = vec![0u8; record * ((1 << 20) / record).max(1)];
        loop {
            let mut filled = 0;
            while filled < buf.len() {
                match file.read(&mut buf[filled..]).map_err(err)? {
                    0 => break,
                    n => filled += n,
                }
            }
            if filled % record != 0 {
                return Err(err(std::io::Error::other("ends in a partial record")));
            }
            f(&buf[..filled]);
            if filled < buf.len() {
                return Ok(());
            }
        }
    }

    /// How many `record`-byte records partition `p` holds; an error if it ends in a part of one.
    pub fn records(&self, p: u32, record: usize) -> Result<usize> {
        let len = self.bytes(p)? as usize;
        if len % record != 0 {
            let e = std::io::Error::other(format!("{len} bytes, not whole records"));
            return Err(self.dir.error("spill", &Self::name(p), e));
        }
        Ok(len / record)
    }

    /// Partition `p` read whole into `buf`, sized by [`Partitions::records`] (a buffer the
    /// caller may reuse from one partition to the next).
    pub fn read_exact(&self, p: u32, buf: &mut [u8]) -> Result<()> {
        let name = Self::name(p);
        let err = |e| self.dir.error("spill", &name, e);
        File::open(self.dir.path(&name))
            .and_then(|mut f| f.read_exact(buf))
            .map_err(err)
    }

    /// Frees partition `p`'s disk once it has been read.
    pub fn remove(&self, p: u32) -> Result<()> {
        self.dir.remove(&Self::name(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_give_back_what_went_in_and_go_on_drop() {
        let base = tempfile::tempdir().unwrap();
        let nested = base.path().join("not/yet");
        let parts = Partitions::create(Some(&nested), "t-", 3, 1 << 20).unwrap();
        for i in 0u32..3000 {
            parts.write(i % 3, &i.to_le_bytes()).unwrap();
        }
        parts.finish().unwrap();
        let mut seen = Vec::new();
        parts
            .for_each_chunk(1, 4, &mut |b| {
                seen.extend(
                    b.chunks(4)
                        .map(|c| u32::from_le_bytes(c.try_into().unwrap())),
                )
            })
            .unwrap();
        assert_eq!(seen, (0..3000).filter(|i| i % 3 == 1).collect::<Vec<_>>());
        assert_eq!(parts.bytes(2).unwrap(), 4000);
        let mut buf = vec![0u8; parts.records(2, 4).unwrap() * 4];
        parts.read_exact(2, &mut buf).unwrap();
        assert_eq!(&buf[..4], &2u32.to_le_bytes());
        parts.remove(0).unwrap();
        assert!(parts.bytes(0).is_err());
        let folder = parts.dir.dir.path().to_path_buf();
        assert!(folder.starts_with(&nested));
        drop(parts);
        assert!(!folder.exists());
    }

    #[test]
    fn a_partial_record_is_an_error_naming_the_file() {
        let parts = Partitions::create(None, "t-", 1, 0).unwrap();
        parts.write(0, &[1, 2, 3]).unwrap();
        parts.finish().unwrap();
        let e = parts.for_each_chunk(0, 2, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("p00000.bin"), "{e}");
    }
}

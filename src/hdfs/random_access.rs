//! [`RandomAccessFile`]: positioned reads of one file, on HDFS or local disk, for readers
//! that fetch byte ranges (Parquet footers and column chunks) rather than stream.

use std::fs;
use std::io;

use super::Location;

/// A file opened for positioned reads, on HDFS or local disk; see [`FileSystems::open_random`].
pub struct RandomAccessFile {
    pub(super) inner: RandomAccess,
    pub(super) len: u64,
    pub(super) location: Location,
}

pub(super) enum RandomAccess {
    Hdfs(Box<hdfs_native::sync::FileReader>),
    Local(fs::File),
}

impl RandomAccessFile {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// On HDFS, where every read is a call to a DataNode.
    pub fn is_hdfs(&self) -> bool {
        matches!(self.inner, RandomAccess::Hdfs(_))
    }

    /// Fills `buf` from `offset`; reading past the end is an error.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match &self.inner {
            RandomAccess::Hdfs(r) => r
                .read_range_buf(buf, offset as usize)
                .map_err(|e| io::Error::other(e.to_string())),
            RandomAccess::Local(f) => std::os::unix::fs::FileExt::read_exact_at(f, buf, offset),
        }
    }
}

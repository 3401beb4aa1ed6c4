//! [`AtomicFile`]: a file written under a hidden temporary name and renamed into place once
//! its bytes are durable, or deleted when dropped uncommitted (the module's first invariant).

use std::fs;
use std::io::{self, BufWriter, Write};

use super::{hdfs_error, io_error, FileSystems, Location, PendingSync, SYNCING};
use crate::error::Result;

pub(super) enum Sink {
    Hdfs(Box<BufWriter<hdfs_native::sync::FileWriter>>),
    Local(BufWriter<fs::File>),
}

/// A file being written under a temporary name. [`commit`](AtomicFile::commit) makes it
/// durable and renames it into place (replacing an older file of that name); dropping it
/// uncommitted deletes the temporary file.
pub struct AtomicFile {
    pub(super) fs: FileSystems,
    pub(super) target: Location,
    pub(super) tmp: Location,
    pub(super) sink: Option<Sink>,
}

impl AtomicFile {
    pub fn location(&self) -> &Location {
        &self.target
    }

    pub fn commit(self) -> Result<()> {
        self.close_and_rename(true)
    }

    /// Closes the file and renames it into place, and makes it durable on a thread of its
    /// own: for the files of a staged folder, which is published only once
    /// [`FileSystems::sync_folder`] has seen them all durable (the partition commit). An
    /// `fsync` per file as each closed held the thread that wrote it waiting on the disk;
    /// after the last one, the folder's files synced at once wait about as long as one
    /// journal commit of them all (docs/design/clean.md).
    pub fn commit_unsynced(self) -> Result<()> {
        self.close_and_rename(false)
    }

    fn close_and_rename(mut self, sync: bool) -> Result<()> {
        match self.sink.take() {
            Some(Sink::Hdfs(w)) => {
                let mut w = (*w)
                    .into_inner()
                    .map_err(|e| io_error("write", &self.tmp, e.into_error()))?;
                w.close().map_err(|e| hdfs_error("close", &self.tmp, e))?;
            }
            Some(Sink::Local(w)) => {
                let f = w
                    .into_inner()
                    .map_err(|e| io_error("write", &self.tmp, e.into_error()))?;
                match (sync, self.target.parent()) {
                    (false, Some(Location::Local(folder))) => {
                        // Renamed first: the thread syncs the file, whatever its name.
                        self.fs.rename(&self.tmp, &self.target)?;
                        let thread = std::thread::spawn(move || f.sync_all());
                        let pending = PendingSync {
                            folder,
                            file: self.target.clone(),
                            thread,
                        };
                        let mut syncing = SYNCING.lock().unwrap_or_else(|e| e.into_inner());
                        syncing.push(pending);
                        return Ok(());
                    }
                    _ => f.sync_all().map_err(|e| io_error("sync", &self.tmp, e))?,
                }
            }
            None => {}
        }
        self.fs.rename(&self.tmp, &self.target)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.sink.as_mut() {
            Some(Sink::Hdfs(w)) => w.write(buf),
            Some(Sink::Local(w)) => w.write(buf),
            None => Err(io::Error::other("file already committed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.sink.as_mut() {
            Some(Sink::Hdfs(w)) => w.flush(),
            Some(Sink::Local(w)) => w.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            // Abandoned: close what we can and remove the temporary so no reader finds it.
            if let Sink::Hdfs(w) = sink {
                if let Ok(mut w) = (*w).into_inner() {
                    let _ = w.close();
                }
            }
            let _ = self.fs.delete(&self.tmp);
        }
    }
}

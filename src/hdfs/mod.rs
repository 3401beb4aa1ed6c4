//! Files by URL, on HDFS or on local disk, behind one small API.
//!
//! Every job names its inputs and outputs as URLs: `hdfs://host:port/path`, `hdfs:///path`
//! (the default file system), `file:///path` or a bare local path. This module turns those into
//! [`Location`]s and offers what the jobs need: expand folders and globs into files, stream a
//! file, and write a file *atomically*.
//!
//! Invariants:
//! - A file written through [`AtomicFile`] appears under its final name only after all of its
//!   bytes are durable (closed on HDFS, `fsync`ed locally); until then it sits under a hidden
//!   temporary name (`_tmp.*`) in the same folder, and is deleted if the writer is dropped
//!   without [`AtomicFile::commit`]. A reader never sees half a file under a final name.
//!   [`AtomicFile::commit_unsynced`] is for the files of a hidden staged folder: it renames
//!   at once and syncs on a thread of its own, and [`FileSystems::sync_folder`] waits for
//!   every such file of a folder before the folder may be published.
//! - Names starting with `_` or `.` are hidden, as in Hadoop: folder expansion skips them, so
//!   `_SUCCESS` markers, `_rejects` and temporary files never count as input data.
//! - An HDFS NameNode that refuses or drops the connection is reported as
//!   [`Error::HdfsUnreachable`] naming the URL, never as a panic or a generic I/O error.
//!
//! Rooms: `location` (URLs, paths and names), `atomic` (the atomic writer), `random_access`
//! (positioned reads); this file is the file systems' operations and their errors.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hdfs_native::sync::Client as HdfsClient;
use hdfs_native::{HdfsError, WriteOptions};

use crate::error::{Error, Result};

mod atomic;
mod location;
mod random_access;

pub use atomic::AtomicFile;
use atomic::Sink;
pub use location::has_glob;
use location::normalize_hdfs_path;
pub use location::{
    default_fs_from_core_site, default_fs_from_env, is_hidden_name, Location, LOCAL_NAMENODE,
};
use random_access::RandomAccess;
pub use random_access::RandomAccessFile;

const WRITE_BUFFER: usize = 1 << 20;

const FAST_FAIL_CONFIG: &[(&str, &str)] = &[
    ("dfs.client.failover.max.attempts", "2"),
    ("dfs.client.failover.sleep.base.millis", "200"),
    ("dfs.client.failover.sleep.max.millis", "1000"),
];

/// What a listing or glob on `authority` says of one file or folder.
fn hdfs_entry(authority: &str, status: &hdfs_native::client::FileStatus) -> FileEntry {
    FileEntry {
        location: Location::Hdfs {
            authority: authority.to_string(),
            path: normalize_hdfs_path(&status.path),
        },
        len: status.length as u64,
        is_dir: status.isdir,
        modified: status.modification_time as i64,
    }
}
/// One file or folder found by a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    pub location: Location,
    pub len: u64,
    pub is_dir: bool,
    /// Last modification, epoch ms (0 when unknown). A folder's changes when an entry is
    /// created in or removed from it, not when the folder itself is renamed.
    pub modified: i64,
}

/// Opens files on any number of HDFS clusters and on local disk. Cheap to clone; HDFS clients
/// are created on first use, one per NameNode, and shared.
#[derive(Clone)]
pub struct FileSystems {
    default_fs: String,
    clients: Arc<Mutex<HashMap<String, Arc<HdfsClient>>>>,
}

/// Local files being made durable on threads of their own (see
/// [`AtomicFile::commit_unsynced`]), until [`FileSystems::sync_folder`] waits for them. One
/// list for the process, so that whichever `FileSystems` commits a folder waits for every
/// file written into it.
static SYNCING: Mutex<Vec<PendingSync>> = Mutex::new(Vec::new());

/// An `fsync` running on a thread of its own.
struct PendingSync {
    folder: PathBuf,
    file: Location,
    thread: std::thread::JoinHandle<io::Result<()>>,
}

impl FileSystems {
    pub fn new(default_fs: impl Into<String>) -> Self {
        FileSystems {
            default_fs: default_fs.into(),
            clients: Arc::default(),
        }
    }

    pub fn default_fs(&self) -> &str {
        &self.default_fs
    }

    pub fn parse(&self, url: &str) -> Result<Location> {
        Location::parse(url, &self.default_fs)
    }

    fn client(&self, authority: &str) -> Result<Arc<HdfsClient>> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(authority) {
            return Ok(Arc::clone(c));
        }
        let mut builder = hdfs_native::sync::ClientBuilder::new().with_url(authority);
        if authority
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
        {
            // A single NameNode named by host:port has nobody to fail over to; the client's
            // HA default (15 attempts, backoff to 15 s) would make a down NameNode look like a
            // three-minute hang to cron. Logical nameservices keep their configured policy.
            builder = builder.with_config(FAST_FAIL_CONFIG.iter().copied());
        }
        let client = builder.build().map_err(|e| Error::HdfsUnreachable {
            url: authority.to_string(),
            reason: e.to_string(),
        })?;
        let client = Arc::new(client);
        clients.insert(authority.to_string(), Arc::clone(&client));
        Ok(client)
    }

    /// Answers once the NameNode behind `location` responds to a metadata call.
    pub fn check_reachable(&self, location: &Location) -> Result<()> {
        if let Location::Hdfs { authority, .. } = location {
            let client = self.client(authority)?;
            client
                .get_file_info("/")
                .map_err(|e| hdfs_error("stat", location, e))?;
        }
        Ok(())
    }

    /// The entry at `location`, or `None` if nothing is there.
    pub fn status(&self, location: &Location) -> Result<Option<FileEntry>> {
        match location {
            Location::Hdfs { authority, path } => {
                match self.client(authority)?.get_file_info(path) {
                    Ok(st) => Ok(Some(FileEntry {
                        location: location.clone(),
                        len: st.length as u64,
                        is_dir: st.isdir,
                        modified: st.modification_time as i64,
                    })),
                    Err(HdfsError::FileNotFound(_)) => Ok(None),
                    Err(e) => Err(hdfs_error("stat", location, e)),
                }
            }
            Location::Local(p) => match fs::metadata(p) {
                Ok(m) => Ok(Some(FileEntry {
                    location: location.clone(),
                    len: m.len(),
                    is_dir: m.is_dir(),
                    modified: modified_ms(&m),
                })),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io_error("stat", location, e)),
            },
        }
    }

    pub fn exists(&self, location: &Location) -> Result<bool> {
        Ok(self.status(location)?.is_some())
    }

    /// The entries of a folder (sorted by location), descending into sub-folders when asked.
    pub fn list(&self, location: &Location, recursive: bool) -> Result<Vec<FileEntry>> {
        let mut out = match location {
            Location::Hdfs { authority, path } => self
                .client(authority)?
                .list_status(path, recursive)
                .map_err(|e| hdfs_error("list", location, e))?
                .into_iter()
                .map(|st| hdfs_entry(authority, &st))
                .collect(),
            Location::Local(p) => {
                let mut out = Vec::new();
                list_local(p, recursive, &mut out).map_err(|e| io_error("list", location, e))?;
                out
            }
        };
        out.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(out)
    }

    /// Turns job inputs (files, folders, globs) into the data files they name, sorted and
    /// without duplicates. Folders are walked recursively, skipping hidden names. An input that
    /// matches nothing is an error: a nightly job must not silently read zero files.
    pub fn expand_inputs(&self, inputs: &[String]) -> Result<Vec<FileEntry>> {
        let mut files = Vec::new();
        for input in inputs {
            let location = self.parse(input)?;
            let matched = if has_glob(input) {
                self.glob(&location)?
            } else {
                self.status(&location)?.into_iter().collect()
            };
            if matched.is_empty() {
                return Err(Error::Io {
                    op: "find input",
                    path: input.clone(),
                    source: io::Error::new(io::ErrorKind::NotFound, "no such file or folder"),
                });
            }
            for entry in matched {
                if entry.is_dir {
                    files.extend(self.list(&entry.location, true)?.into_iter().filter(|e| {
                        !e.is_dir
                            && e.location
                                .relative_to(&entry.location)
                                .is_some_and(|rel| !rel.split('/').any(is_hidden_name))
                    }));
                } else {
                    files.push(entry);
                }
            }
        }
        // By the URL's text, as HDFS orders names, so a local run reads the same files in the
        // same order (a path's components would put `a/b` before `a-2/b`).
        files.sort_by_cached_key(|f| f.location.to_string());
        files.dedup_by(|a, b| a.location == b.location);
        Ok(files)
    }

    fn glob(&self, pattern: &Location) -> Result<Vec<FileEntry>> {
        match pattern {
            Location::Hdfs { authority, path } => Ok(self
                .client(authority)?
                .glob_status(path)
                .map_err(|e| hdfs_error("glob", pattern, e))?
                .into_iter()
                .map(|st| hdfs_entry(authority, &st))
                .collect()),
            Location::Local(p) => {
                // The same pattern language as HDFS's globs (`*` and `?` within a name,
                // `[ab]`, `{a,b}`), matched against the tree under the pattern's literal
                // folder, so a command reads the same files on either file system.
                let text = p.to_string_lossy();
                let invalid = |e: globset::Error| Error::InvalidLocation {
                    url: text.to_string(),
                    reason: e.to_string(),
                };
                let matcher = globset::GlobBuilder::new(&text)
                    .literal_separator(true)
                    .build()
                    .map_err(invalid)?
                    .compile_matcher();
                let base: PathBuf = p
                    .components()
                    .take_while(|c| !has_glob(&c.as_os_str().to_string_lossy()))
                    .collect();
                let base = if base.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    base
                };
                let mut all = Vec::new();
                match list_local(&base, true, &mut all) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(io_error("glob", pattern, e)),
                }
                Ok(all
                    .into_iter()
                    .filter(|e| match &e.location {
                        Location::Local(path) => {
                            // `./x` walked from `.` matches the pattern `x`.
                            let path = path.strip_prefix(".").unwrap_or(path);
                            matcher.is_match(path)
                        }
                        Location::Hdfs { .. } => false,
                    })
                    .collect())
            }
        }
    }

    fn hdfs_reader(
        &self,
        authority: &str,
        path: &str,
        location: &Location,
    ) -> Result<hdfs_native::sync::FileReader> {
        self.client(authority)?
            .read(path)
            .map_err(|e| hdfs_error("open", location, e))
    }

    /// A streaming reader over the whole file.
    pub fn open(&self, location: &Location) -> Result<Box<dyn Read + Send>> {
        match location {
            Location::Hdfs { authority, path } => {
                Ok(Box::new(self.hdfs_reader(authority, path, location)?))
            }
            Location::Local(p) => {
                let file = fs::File::open(p).map_err(|e| io_error("open", location, e))?;
                Ok(Box::new(file))
            }
        }
    }

    /// Reads a whole file into memory, in one allocation of its size.
    pub fn read_to_vec(&self, location: &Location) -> Result<Vec<u8>> {
        match location {
            Location::Hdfs { authority, path } => {
                let reader = self.hdfs_reader(authority, path, location)?;
                let mut buf = vec![0u8; reader.file_length()];
                reader
                    .read_range_buf(&mut buf, 0)
                    .map_err(|e| hdfs_error("read", location, e))?;
                Ok(buf)
            }
            Location::Local(p) => fs::read(p).map_err(|e| io_error("read", location, e)),
        }
    }

    /// Opens a file for reads at any offset (Parquet readers fetch only the footer and the
    /// column chunks they need).
    pub fn open_random(&self, location: &Location) -> Result<RandomAccessFile> {
        let inner = match location {
            Location::Hdfs { authority, path } => {
                RandomAccess::Hdfs(Box::new(self.hdfs_reader(authority, path, location)?))
            }
            Location::Local(p) => {
                RandomAccess::Local(fs::File::open(p).map_err(|e| io_error("open", location, e))?)
            }
        };
        let len = match &inner {
            RandomAccess::Hdfs(r) => r.file_length() as u64,
            RandomAccess::Local(f) => f
                .metadata()
                .map_err(|e| io_error("stat", location, e))?
                .len(),
        };
        Ok(RandomAccessFile {
            inner,
            len,
            location: location.clone(),
        })
    }

    /// Starts writing `location` under a hidden temporary name; see [`AtomicFile`].
    pub fn create_atomic(&self, location: &Location) -> Result<AtomicFile> {
        let name = location.file_name().ok_or_else(|| Error::InvalidLocation {
            url: location.to_string(),
            reason: "a file to write needs a name".into(),
        })?;
        let parent = location.parent().ok_or_else(|| Error::InvalidLocation {
            url: location.to_string(),
            reason: "a file to write needs a folder".into(),
        })?;
        self.mkdirs(&parent)?;
        let tmp = parent.join(&format!(
            "_tmp.{name}.{}.{}",
            std::process::id(),
            unique_suffix()
        ));
        let writer = match &tmp {
            Location::Hdfs { authority, path } => {
                let options = WriteOptions {
                    overwrite: true,
                    ..WriteOptions::default()
                };
                let w = self
                    .client(authority)?
                    .create(path, options)
                    .map_err(|e| hdfs_error("create", &tmp, e))?;
                Sink::Hdfs(Box::new(BufWriter::with_capacity(WRITE_BUFFER, w)))
            }
            Location::Local(p) => {
                let f = fs::File::create(p).map_err(|e| io_error("create", &tmp, e))?;
                Sink::Local(BufWriter::with_capacity(WRITE_BUFFER, f))
            }
        };
        Ok(AtomicFile {
            fs: self.clone(),
            target: location.clone(),
            tmp,
            sink: Some(writer),
        })
    }

    /// Creates `location` holding `bytes` only if nothing is there yet; `Ok(false)` when
    /// something is. The create itself is the test (exclusive on local disk, without
    /// overwrite on HDFS, where the NameNode decides), so of two racing processes one wins.
    pub fn create_new(&self, location: &Location, bytes: &[u8]) -> Result<bool> {
        if let Some(parent) = location.parent() {
            self.mkdirs(&parent)?;
        }
        match location {
            Location::Hdfs { authority, path } => {
                let options = WriteOptions {
                    overwrite: false,
                    ..WriteOptions::default()
                };
                let mut w = match self.client(authority)?.create(path, options) {
                    Ok(w) => w,
                    Err(HdfsError::AlreadyExists(_)) => return Ok(false),
                    Err(e) => return Err(hdfs_error("create", location, e)),
                };
                let written = w
                    .write_bytes(bytes::Bytes::copy_from_slice(bytes))
                    .map_err(|e| hdfs_error("write", location, e))
                    .and_then(|_| w.close().map_err(|e| hdfs_error("close", location, e)));
                if let Err(e) = written {
                    // Ours but unreadable: nobody could ever take it.
                    let _ = self.delete(location);
                    return Err(e);
                }
                Ok(true)
            }
            Location::Local(p) => {
                let mut f = match fs::OpenOptions::new().write(true).create_new(true).open(p) {
                    Ok(f) => f,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
                    Err(e) => return Err(io_error("create", location, e)),
                };
                if let Err(e) = f.write_all(bytes).and_then(|_| f.sync_all()) {
                    let _ = fs::remove_file(p);
                    return Err(io_error("write", location, e));
                }
                Ok(true)
            }
        }
    }

    /// Writes a whole file atomically.
    pub fn write_atomic(&self, location: &Location, bytes: &[u8]) -> Result<()> {
        let mut file = self.create_atomic(location)?;
        file.write_all(bytes)
            .map_err(|e| io_error("write", location, e))?;
        file.commit()
    }

    /// Waits until the files committed into a folder with [`AtomicFile::commit_unsynced`]
    /// are durable, and reports the first that could not be made so. On HDFS a closed file
    /// already is.
    pub fn sync_folder(&self, dir: &Location) -> Result<()> {
        let Location::Local(dir) = dir else {
            return Ok(());
        };
        let mine: Vec<PendingSync> = {
            let mut syncing = SYNCING.lock().unwrap_or_else(|e| e.into_inner());
            let (mine, others) = std::mem::take(&mut *syncing)
                .into_iter()
                .partition(|p| p.folder == *dir);
            *syncing = others;
            mine
        };
        let mut first_error = None;
        for pending in mine {
            let done = pending
                .thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the sync thread panicked")));
            if let (Err(e), None) = (done, &first_error) {
                first_error = Some(io_error("sync", &pending.file, e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    pub fn mkdirs(&self, location: &Location) -> Result<()> {
        match location {
            Location::Hdfs { authority, path } => self
                .client(authority)?
                .mkdirs(path, 0o755, true)
                .map_err(|e| hdfs_error("mkdirs", location, e)),
            Location::Local(p) => {
                fs::create_dir_all(p).map_err(|e| io_error("mkdirs", location, e))
            }
        }
    }

    /// Deletes a file or a folder tree. Deleting what is not there is not an error.
    pub fn delete(&self, location: &Location) -> Result<()> {
        match location {
            Location::Hdfs { authority, path } => {
                match self.client(authority)?.delete(path, true) {
                    Ok(_) | Err(HdfsError::FileNotFound(_)) => Ok(()),
                    Err(e) => Err(hdfs_error("delete", location, e)),
                }
            }
            Location::Local(p) => {
                let res = match fs::symlink_metadata(p) {
                    Ok(m) if m.is_dir() => fs::remove_dir_all(p),
                    Ok(_) => fs::remove_file(p),
                    Err(e) => Err(e),
                };
                match res {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        Err(io_error("delete", location, e))
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// Renames within one file system unless something is at `to`: `Ok(false)` when it is
    /// (`from` is left in place). The file system decides, so of two racing processes one
    /// wins and the other's file never replaces the winner's.
    pub fn rename_new(&self, from: &Location, to: &Location) -> Result<bool> {
        match self.rename_with(from, to, false) {
            Ok(()) => Ok(true),
            Err(_) if self.exists(to)? => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Renames within one file system, replacing a *file* already at `to`.
    pub fn rename(&self, from: &Location, to: &Location) -> Result<()> {
        self.rename_with(from, to, true)
    }

    /// A rename within one file system that replaces a file at `to` or fails when one is
    /// there (locally through a hard link, which fails where a rename would replace).
    fn rename_with(&self, from: &Location, to: &Location, replace: bool) -> Result<()> {
        match (from, to) {
            (
                Location::Hdfs { authority, path },
                Location::Hdfs {
                    authority: a2,
                    path: p2,
                },
            ) if authority == a2 => self
                .client(authority)?
                .rename(path, p2, replace)
                .map_err(|e| hdfs_error("rename", from, e)),
            (Location::Local(a), Location::Local(b)) => if replace {
                fs::rename(a, b)
            } else {
                fs::hard_link(a, b).and_then(|_| fs::remove_file(a))
            }
            .map_err(|e| io_error("rename", from, e)),
            _ => Err(Error::InvalidLocation {
                url: to.to_string(),
                reason: format!("cannot rename across file systems from {from}"),
            }),
        }
    }
}

/// Lists a local folder (recursively: its whole tree). Symbolic links are followed, as HDFS
/// has none to stop at: a linked file has its target's length and a linked folder is walked.
/// A folder reached again through a link (a loop) is walked once.
fn list_local(dir: &Path, recursive: bool, out: &mut Vec<FileEntry>) -> io::Result<()> {
    let mut seen = std::collections::HashSet::new();
    if let Ok(real) = fs::canonicalize(dir) {
        seen.insert(real);
    }
    list_local_in(dir, recursive, out, &mut seen)
}

fn list_local_in(
    dir: &Path,
    recursive: bool,
    out: &mut Vec<FileEntry>,
    seen: &mut std::collections::HashSet<PathBuf>,
) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            // A dangling link names nothing to read: its own metadata says so.
            Err(e) if e.kind() == io::ErrorKind::NotFound => entry.metadata()?,
            Err(e) => return Err(e),
        };
        out.push(FileEntry {
            location: Location::Local(path.clone()),
            len: meta.len(),
            is_dir: meta.is_dir(),
            modified: modified_ms(&meta),
        });
        if recursive && meta.is_dir() && seen.insert(fs::canonicalize(&path)?) {
            list_local_in(&path, true, out, seen)?;
        }
    }
    Ok(())
}

/// A local file's modification time, epoch ms (0 when the platform has none).
fn modified_ms(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    (nanos << 16) ^ NEXT.fetch_add(1, Ordering::Relaxed)
}

/// True for I/O failures that mean "nobody answered", as opposed to a server-side error.
pub(crate) fn is_unreachable(kind: io::ErrorKind) -> bool {
    use io::ErrorKind::*;
    matches!(
        kind,
        ConnectionRefused
            | ConnectionReset
            | ConnectionAborted
            | NotConnected
            | TimedOut
            | AddrNotAvailable
            | HostUnreachable
            | NetworkUnreachable
            | BrokenPipe
            | UnexpectedEof
    )
}

fn hdfs_error(op: &'static str, location: &Location, e: HdfsError) -> Error {
    if let (HdfsError::IOError(io), Location::Hdfs { authority, .. }) = (&e, location) {
        if is_unreachable(io.kind()) {
            return Error::HdfsUnreachable {
                url: authority.clone(),
                reason: io.to_string(),
            };
        }
    }
    Error::Hdfs {
        op,
        path: location.to_string(),
        source: e,
    }
}

fn io_error(op: &'static str, location: &Location, e: io::Error) -> Error {
    Error::Io {
        op,
        path: location.to_string(),
        source: e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FS: &str = "hdfs://nn.example:8020";

    #[test]
    fn rename_new_never_replaces_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new(FS);
        let at = |name: &str| Location::Local(dir.path().join(name));
        std::fs::write(dir.path().join("a"), b"first").unwrap();
        std::fs::write(dir.path().join("b"), b"second").unwrap();
        assert!(fs.rename_new(&at("a"), &at("target")).unwrap());
        assert!(!fs.rename_new(&at("b"), &at("target")).unwrap());
        assert_eq!(std::fs::read(dir.path().join("target")).unwrap(), b"first");
        assert!(!dir.path().join("a").exists());
        assert!(dir.path().join("b").exists(), "the loser keeps its file");
    }

    #[test]
    fn parses_every_url_form() {
        assert_eq!(
            Location::parse("hdfs://10.0.0.1:9000/raw//day/", FS).unwrap(),
            Location::Hdfs {
                authority: "hdfs://10.0.0.1:9000".into(),
                path: "/raw/day".into()
            }
        );
        assert_eq!(
            Location::parse("hdfs:///raw/x.csv", FS).unwrap(),
            Location::Hdfs {
                authority: FS.into(),
                path: "/raw/x.csv".into()
            }
        );
        assert_eq!(
            Location::parse("file:///tmp/a", FS).unwrap(),
            Location::Local("/tmp/a".into())
        );
        assert_eq!(
            Location::parse("rel/a.csv", FS).unwrap(),
            Location::Local("rel/a.csv".into())
        );
        assert!(Location::parse("s3://bucket/x", FS).is_err());
        assert!(Location::parse("file://relative", FS).is_err());
        assert!(Location::parse("", FS).is_err());
    }

    #[test]
    fn join_parent_and_relative_paths() {
        let base = Location::parse("hdfs:///out", FS).unwrap();
        let child = base.join("users/dt=2024-01-01");
        assert_eq!(
            child.to_string(),
            "hdfs://nn.example:8020/out/users/dt=2024-01-01"
        );
        assert_eq!(child.file_name().as_deref(), Some("dt=2024-01-01"));
        assert_eq!(child.parent().unwrap(), base.join("users"));
        assert_eq!(
            child.relative_to(&base).as_deref(),
            Some("users/dt=2024-01-01")
        );
        assert_eq!(
            Location::parse("hdfs:///a", FS).unwrap().parent().unwrap(),
            Location::parse("hdfs:///", FS).unwrap()
        );
    }

    #[test]
    fn reads_default_fs_from_core_site() {
        let xml = r#"<?xml version="1.0"?><configuration>
            <property><name>hadoop.tmp.dir</name><value>/tmp</value></property>
            <property><name>fs.defaultFS</name><value> hdfs://nn1:8020 </value></property>
            </configuration>"#;
        assert_eq!(
            default_fs_from_core_site(xml).as_deref(),
            Some("hdfs://nn1:8020")
        );
        let local = r#"<configuration><property><name>fs.defaultFS</name>
            <value>file:///</value></property></configuration>"#;
        assert_eq!(default_fs_from_core_site(local), None);
        assert_eq!(default_fs_from_core_site("not xml"), None);
    }

    #[test]
    fn local_atomic_write_is_invisible_until_commit() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new(LOCAL_NAMENODE);
        let target = Location::Local(dir.path().join("sub/out.txt"));
        let mut file = fs.create_atomic(&target).unwrap();
        file.write_all(b"hello").unwrap();
        assert!(!fs.exists(&target).unwrap());
        file.commit().unwrap();
        assert_eq!(fs.read_to_vec(&target).unwrap(), b"hello");

        let mut abandoned = fs.create_atomic(&target).unwrap();
        abandoned.write_all(b"half").unwrap();
        drop(abandoned);
        assert_eq!(fs.read_to_vec(&target).unwrap(), b"hello");
        let names: Vec<_> = fs
            .list(&Location::Local(dir.path().join("sub")), false)
            .unwrap()
            .into_iter()
            .map(|e| e.location.file_name().unwrap())
            .collect();
        assert_eq!(names, vec!["out.txt"]);
    }

    #[test]
    fn unsynced_commits_are_awaited_folder_by_folder() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new(LOCAL_NAMENODE);
        let (a, b) = (
            Location::Local(dir.path().join("a")),
            Location::Local(dir.path().join("b")),
        );
        for (folder, name) in [(&a, "1"), (&a, "2"), (&b, "1")] {
            let mut file = fs.create_atomic(&folder.join(name)).unwrap();
            file.write_all(name.as_bytes()).unwrap();
            file.commit_unsynced().unwrap();
            // In place at once; only its durability is pending.
            assert_eq!(fs.read_to_vec(&folder.join(name)).unwrap(), name.as_bytes());
        }
        // Other tests may have syncs of their own pending: only this one's folders count.
        let pending = || -> Vec<PathBuf> {
            let syncing = SYNCING.lock().unwrap();
            let folders = syncing.iter().map(|p| p.folder.clone());
            folders.filter(|f| f.starts_with(dir.path())).collect()
        };
        assert_eq!(pending().len(), 3);
        fs.sync_folder(&a).unwrap();
        assert_eq!(pending(), vec![dir.path().join("b")]);
        // Another file system value waits for them just the same.
        FileSystems::new(LOCAL_NAMENODE).sync_folder(&b).unwrap();
        assert!(pending().is_empty());
    }

    #[test]
    fn expand_inputs_walks_folders_skips_hidden_and_globs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "a/1.csv",
            "a/b/2.csv",
            "a/_SUCCESS",
            "a/.crc",
            "a/_tmp/3.csv",
            "c.json",
        ] {
            let p = root.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, b"x").unwrap();
        }
        let fs = FileSystems::new(LOCAL_NAMENODE);
        let inputs = vec![
            root.join("a").to_string_lossy().into_owned(),
            root.join("*.json").to_string_lossy().into_owned(),
            root.join("a/1.csv").to_string_lossy().into_owned(),
        ];
        let files: Vec<_> = fs
            .expand_inputs(&inputs)
            .unwrap()
            .into_iter()
            .map(|e| {
                e.location
                    .relative_to(&Location::Local(root.into()))
                    .unwrap()
            })
            .collect();
        assert_eq!(files, vec!["a/1.csv", "a/b/2.csv", "c.json"]);
        let missing = vec![root.join("nope").to_string_lossy().into_owned()];
        assert!(fs.expand_inputs(&missing).is_err());
    }
}

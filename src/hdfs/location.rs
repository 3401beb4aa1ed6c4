//! Where a file lives: [`Location`], parsed from a URL or bare path, and the naming rules
//! the rest of the module keeps (hidden names, globs, the default file system).
//!
//! Invariants: an HDFS path is absolute and normalised (no empty or `.` parts), so two
//! spellings of one path are one `Location`.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The NameNode used when neither `--hdfs` nor `HADOOP_CONF_DIR` names one: the local cluster.
pub const LOCAL_NAMENODE: &str = "hdfs://127.0.0.1:9000";
/// Where a file or folder lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// `authority` is `hdfs://host:port` (no trailing slash); `path` is absolute.
    Hdfs {
        authority: String,
        path: String,
    },
    Local(PathBuf),
}

impl Location {
    /// Parses a URL or bare path. `hdfs:///p` takes the authority of `default_fs`.
    pub fn parse(url: &str, default_fs: &str) -> Result<Location> {
        let invalid = |reason: &str| Error::InvalidLocation {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        if url.is_empty() {
            return Err(invalid("empty location"));
        }
        if let Some(rest) = url.strip_prefix("hdfs://") {
            let (host, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, "/"),
            };
            let authority = if host.is_empty() {
                if !default_fs.starts_with("hdfs://") {
                    return Err(invalid("hdfs:/// needs an hdfs:// default file system"));
                }
                default_fs.trim_end_matches('/').to_string()
            } else {
                format!("hdfs://{host}")
            };
            return Ok(Location::Hdfs {
                authority,
                path: normalize_hdfs_path(path),
            });
        }
        if let Some(rest) = url.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(invalid("file:// URLs must be absolute (file:///path)"));
            }
            return Ok(Location::Local(PathBuf::from(rest)));
        }
        if let Some((scheme, _)) = url.split_once("://") {
            return Err(invalid(&format!(
                "unsupported scheme {scheme:?} (use hdfs://, file:// or a plain path)"
            )));
        }
        Ok(Location::Local(PathBuf::from(url)))
    }

    /// A child of this folder.
    pub fn join(&self, name: &str) -> Location {
        match self {
            Location::Hdfs { authority, path } => Location::Hdfs {
                authority: authority.clone(),
                path: normalize_hdfs_path(&format!("{}/{}", path.trim_end_matches('/'), name)),
            },
            Location::Local(p) => Location::Local(p.join(name)),
        }
    }

    /// The last path component, if any.
    pub fn file_name(&self) -> Option<String> {
        match self {
            Location::Hdfs { path, .. } => path
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            Location::Local(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
        }
    }

    /// The folder holding this location.
    pub fn parent(&self) -> Option<Location> {
        match self {
            Location::Hdfs { authority, path } => {
                let trimmed = path.trim_end_matches('/');
                let i = trimmed.rfind('/')?;
                Some(Location::Hdfs {
                    authority: authority.clone(),
                    path: if i == 0 {
                        "/".into()
                    } else {
                        trimmed[..i].into()
                    },
                })
            }
            Location::Local(p) => p.parent().map(|p| Location::Local(p.to_path_buf())),
        }
    }

    pub fn is_hdfs(&self) -> bool {
        matches!(self, Location::Hdfs { .. })
    }

    /// The path a relative child has below `base`, used to name files consistently
    /// whichever file system they came from.
    pub fn relative_to(&self, base: &Location) -> Option<String> {
        match (self, base) {
            (Location::Hdfs { path, .. }, Location::Hdfs { path: b, .. }) => path
                .strip_prefix(b.trim_end_matches('/'))
                .map(|r| r.trim_start_matches('/').to_string()),
            (Location::Local(p), Location::Local(b)) => p
                .strip_prefix(b)
                .ok()
                .map(|r| r.to_string_lossy().into_owned()),
            _ => None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Hdfs { authority, path } => write!(f, "{authority}{path}"),
            Location::Local(p) => write!(f, "{}", p.display()),
        }
    }
}

pub(super) fn normalize_hdfs_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Names that Hadoop tools treat as not-data: markers, temporary files, side outputs.
pub fn is_hidden_name(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('.')
}

/// Whether an input names a glob pattern rather than one file or folder.
pub fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

/// The default file system: `fs.defaultFS` from `$HADOOP_CONF_DIR/core-site.xml` when that
/// names an `hdfs://` URL, else the local cluster's NameNode.
pub fn default_fs_from_env() -> String {
    std::env::var_os("HADOOP_CONF_DIR")
        .map(|dir| Path::new(&dir).join("core-site.xml"))
        .and_then(|p| fs::read_to_string(p).ok())
        .and_then(|xml| default_fs_from_core_site(&xml))
        .unwrap_or_else(|| LOCAL_NAMENODE.to_string())
}

/// Reads `fs.defaultFS` out of a core-site.xml document.
pub fn default_fs_from_core_site(xml: &str) -> Option<String> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    doc.descendants()
        .filter(|n| n.has_tag_name("property"))
        .find_map(|prop| {
            let child = |tag: &str| {
                prop.children()
                    .find(|c| c.has_tag_name(tag))
                    .and_then(|c| c.text())
                    .map(str::trim)
            };
            (child("name")? == "fs.defaultFS").then(|| child("value").map(str::to_string))?
        })
        .filter(|v| v.starts_with("hdfs://"))
}

//! The library's error type and the process exit codes cron sees.
//!
//! Every variant carries the context an operator needs to act without re-running under a
//! debugger: the URL or address that did not answer, the file and line of bad input, the
//! table and rowkey of a failed write. The mapping to exit codes lives here, next to the
//! variants, so the documented table in the README and `--help` cannot drift from the code.

use std::io;

/// Process exit codes, documented in the README and in `weibo-etl --help`.
pub mod exit_code {
    /// The job finished and its output is committed.
    pub const OK: i32 = 0;
    /// Any failure not covered below (bad input file, I/O error, server-side error).
    pub const FAILURE: i32 = 1;
    /// Bad usage: unknown flag, missing argument, malformed URL or date (clap also uses 2).
    pub const USAGE: i32 = 2;
    /// More input was rejected than `--max-reject-ratio` allows; nothing was committed.
    pub const REJECT_BUDGET: i32 = 3;
    /// The HDFS NameNode did not answer.
    pub const HDFS_UNREACHABLE: i32 = 4;
    /// The HBase Thrift gateway did not answer.
    pub const HBASE_UNREACHABLE: i32 = 5;
    /// Another run of the same job and namespace holds its lock (or left a stale one).
    pub const LOCKED: i32 = 6;
    /// A lookup (`query name`, `query rank`) found nothing for what it was asked.
    pub const NOT_FOUND: i32 = 7;
}

/// Errors raised by the library. Constructed with enough context to be printed as a
/// single line that names what failed and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("HDFS is unreachable at {url}: {reason}")]
    HdfsUnreachable { url: String, reason: String },

    #[error("HBase Thrift gateway is unreachable at {addr}: {reason}")]
    HbaseUnreachable { addr: String, reason: String },

    #[error("invalid location {url:?}: {reason}")]
    InvalidLocation { url: String, reason: String },

    #[error("{op} {path}: {source}")]
    Hdfs {
        op: &'static str,
        path: String,
        #[source]
        source: hdfs_native::HdfsError,
    },

    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },

    #[error("HBase {op} on {table}: {reason}")]
    Hbase {
        op: &'static str,
        table: String,
        reason: String,
    },

    #[error("{path}:{line}: {reason}")]
    BadInput {
        path: String,
        line: u64,
        reason: String,
    },

    #[error("usage: {0}")]
    Usage(String),

    #[error("{0}")]
    RejectBudget(String),

    #[error("local cluster: {0}")]
    Cluster(String),

    #[error("{lock} is held: {reason}")]
    Locked { lock: String, reason: String },

    /// A lookup found nothing: `what` names what was looked for, and where.
    #[error("not found: {0}")]
    NotFound(String),

    /// A YARN job that did not succeed, or whose output does not add up.
    #[error("YARN: {0}")]
    Yarn(String),

    /// What was being done when `source` happened; the exit code is the source's.
    #[error("{context}: {source}")]
    Context {
        context: String,
        #[source]
        source: Box<Error>,
    },

    /// A stage of `run` (a child process) failed; the run ends with the stage's exit code.
    #[error("stage {stage} of {date} failed with exit code {code}")]
    Stage {
        stage: String,
        date: String,
        code: i32,
    },
}

impl Error {
    /// The exit code a process should end with when this error stops it.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::HdfsUnreachable { .. } => exit_code::HDFS_UNREACHABLE,
            Error::HbaseUnreachable { .. } => exit_code::HBASE_UNREACHABLE,
            Error::InvalidLocation { .. } | Error::Usage(_) => exit_code::USAGE,
            Error::RejectBudget(_) => exit_code::REJECT_BUDGET,
            Error::Locked { .. } => exit_code::LOCKED,
            Error::NotFound(_) => exit_code::NOT_FOUND,
            Error::Stage { code, .. } => *code,
            Error::Context { source, .. } => source.exit_code(),
            _ => exit_code::FAILURE,
        }
    }

    /// This error with what was being done when it happened.
    pub fn context(self, context: impl Into<String>) -> Error {
        Error::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }
}

/// [`Error::context`] on a result.
pub trait ResultExt<T> {
    fn context(self, context: impl Into<String>) -> Result<T>;
    fn with_context<C: Into<String>>(self, context: impl FnOnce() -> C) -> Result<T>;
}

impl<T> ResultExt<T> for Result<T> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.context(context))
    }

    fn with_context<C: Into<String>>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| e.context(context()))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Exit code for an `anyhow` chain: the first library error found in it decides.
pub fn exit_code_of(err: &anyhow::Error) -> i32 {
    err.chain()
        .find_map(|cause| cause.downcast_ref::<Error>())
        .map_or(exit_code::FAILURE, Error::exit_code)
}

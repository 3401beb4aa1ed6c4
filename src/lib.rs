//! weibo-etl: batch ETL for a Weibo social graph kept in Hadoop.
//!
//! Raw crawled data on HDFS is cleaned into Parquet, keyed and counted, bulk-loaded into
//! HBase through its Thrift gateway, and analysed as a graph. This crate is the library the
//! `weibo-etl` binary's jobs are built from; each module owns one concern:
//!
//! - [`raw`]: readers for raw crawled files (formats, compression, encodings);
//! - [`clean`]: the cleaning rules, the Parquet layout, and the `clean` job;
//! - [`gen`]: synthetic data with ground truth, for tests and benchmarks;
//! - [`graph`]: batch graph analytics (mutual follows);
//! - [`hdfs`]: files by URL (HDFS or local), listing, globbing, streaming, atomic writes;
//! - [`hbase`]: Thrift1 data calls, a connection pool, Thrift2 admin (namespaces, pre-split);
//! - [`partition`]: atomic, dated Parquet partitions with `_SUCCESS`;
//! - [`load`]: cleaned Parquet into pre-split HBase tables, counters, resumable;
//! - [`keys`]: hashed rowkey prefixes and region split points;
//! - [`pipeline`]: the nightly job file, its lock and its stages, for `weibo-etl run`;
//! - [`cluster`]: the local HDFS + HBase + Thrift cluster the tests and demo run against;
//! - [`verify`]: sampled read-back of the loaded tables, with latencies;
//! - [`report`] and [`progress`]: what a run tells its operator;
//! - [`error`]: the error type and the exit codes cron sees.

pub mod clean;
pub mod dataset;
pub mod dev;
pub mod error;
pub mod graph;
pub mod hash;
pub mod hbase;
pub mod hdfs;
pub mod load;

pub mod pipeline;
pub mod progress;
pub mod raw;
pub mod report;
pub mod spill;
pub mod values;
pub mod verify;

pub use error::{Error, Result};

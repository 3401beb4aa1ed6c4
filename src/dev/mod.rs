//! Tooling for development, tests, the demo and benchmarks, kept apart from the jobs.
//!
//! - [`cluster`]: the local HDFS + HBase + Thrift cluster the tests, demo and benchmarks run
//!   against, started from Maven artifacts and stopped on drop or on `cluster down`;
//! - [`gen`]: synthetic Weibo data with ground truth, in every raw format `clean` reads.
//!
//! Invariant: this module sits on top of the library. It may use the core (`gen` writes raw
//! files and counts truth the way `clean` and `load` define them), but no core module imports
//! anything from here; a unit test in `lib.rs` holds the line.

pub mod cluster;
pub mod gen;

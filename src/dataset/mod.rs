//! The contract between the stages: what `clean` writes and every later job reads.
//!
//! - [`Entity`] and [`Reject`]: the cleaned tables, their canonical raw fields, and the
//!   reason codes of rejected records;
//! - [`schema`]: each table's columns, natural key and Parquet encoding, and [`columns`]:
//!   typed access to them that names the file when a column is missing;
//! - [`follows`]: the pair-partitioned layout of the follows table that `friends` joins on;
//! - [`friends`]: the friends job's output tables, which `friends --load` and `rank` read;
//! - [`rank`]: the rank job's boards, [`cascades`]: the cascades job's trees, and [`inbox`]:
//!   the home feeds the inbox job materialises;
//! - [`slice`]: one slice `i/N` of a job's work and the `slice=i-of-N/` folder it writes;
//! - [`partition`]: `<table>/dt=<date>/` partitions, written staged and committed with
//!   `_SUCCESS` (the commit protocol), the history of nights a job reads, and the Parquet
//!   readers and writers over them; [`history`]: that history compacted into runs of nights.
//!
//! Invariants: the stages (`raw`/`clean`, `load`, `graph`, `verify`) depend on this module,
//! not on one another; it depends on nothing of theirs. A change here is a change of the
//! on-disk layout (docs/formats.md).

pub mod cascades;
pub mod columns;
mod entity;
pub mod follows;
pub mod friends;
pub mod history;
pub mod inbox;
pub mod parquet_io;
pub mod partition;
pub mod rank;
mod reject;
pub mod schema;
pub mod slice;

pub use entity::Entity;
pub use reject::Reject;

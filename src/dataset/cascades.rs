//! The cascades job's output: the repost trees of every root, as two tables of one date.
//!
//! ```text
//! <output>/cascades/dt=<date>/part-NNNNN.parquet      root_mid, root_uid, size, depth, first_at, last_at
//! <output>/repost_paths/dt=<date>/part-NNNNN.parquet  mid, uid, root_mid, parent_mid, depth, path
//! ```
//!
//! Invariants: a root is in one part of `cascades` and its reposts in the part of the same
//! number of `repost_paths`; rows are sorted by `root_mid` (and a root's reposts by time);
//! `root_uid` is null for a root that was never crawled, and its reposts' paths then stop at
//! the first repost; `path` runs from the repost's author back to the root's. Both tables
//! are committed together, with `_SUCCESS` ([`super::partition`]).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// The tables' folders under the job's output.
pub const CASCADES_TABLE: &str = "cascades";
pub const PATHS_TABLE: &str = "repost_paths";

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// Schema of the cascades table.
pub fn cascades_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("root_mid", DataType::Int64, false),
        Field::new("root_uid", DataType::Int64, true),
        Field::new("size", DataType::Int64, false),
        Field::new("depth", DataType::Int32, false),
        Field::new("first_at", ts(), false),
        Field::new("last_at", ts(), false),
    ]))
}

/// Schema of the repost paths table.
pub fn paths_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("mid", DataType::Int64, false),
        Field::new("uid", DataType::Int64, false),
        Field::new("root_mid", DataType::Int64, false),
        Field::new("parent_mid", DataType::Int64, false),
        Field::new("depth", DataType::Int32, false),
        Field::new(
            "path",
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
            false,
        ),
    ]))
}

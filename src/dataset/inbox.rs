//! The inbox job's output: the home feeds it materialised, as two tables of one date.
//!
//! ```text
//! <output>/inbox/dt=<date>/part-NNNNN.parquet               uid, followee, mid, created_at, version
//! <output>/inbox_celebrities/dt=<date>/part-NNNNN.parquet   uid, fans
//! ```
//!
//! `inbox` has one row per feed entry: follower `uid` gets post `mid` of `followee`, one of
//! the followee's newest K posts, as the cell version `version` (ms). `inbox_celebrities`
//! lists the authors not fanned out, with their fan counts; their posts join a feed at read
//! time.
//!
//! Invariants: a followee's entries are in the part of the followee's hash partition, grouped
//! by followee, newest post first, followers ascending; within a `(uid, followee)` the
//! versions strictly decrease; both tables are committed together, with `_SUCCESS`
//! ([`super::partition`]).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// The tables' folders under the job's output.
pub const INBOX_TABLE: &str = "inbox";
pub const CELEBRITIES_TABLE: &str = "inbox_celebrities";

/// Schema of the inbox table.
pub fn inbox_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Int64, false),
        Field::new("followee", DataType::Int64, false),
        Field::new("mid", DataType::Int64, false),
        Field::new(
            "created_at",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("version", DataType::Int64, false),
    ]))
}

/// Schema of the celebrities table.
pub fn celebrities_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Int64, false),
        Field::new("fans", DataType::Int64, false),
    ]))
}

//! The rank job's output: one partition per date, the boards of every metric in one table.
//!
//! ```text
//! <output>/rank/dt=<date>/part-00000.parquet   metric, rank, id, value
//! ```
//!
//! Invariants: rows are sorted by metric (in the job's metric order), then rank; ranks of a
//! metric run 1, 2, … without a gap; `id` is a uid. Committed with `_SUCCESS`
//! ([`super::partition`]).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The table's folder under the job's output.
pub const TABLE: &str = "rank";

/// Schema of the rank output.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("metric", DataType::Utf8, false),
        Field::new("rank", DataType::Int32, false),
        Field::new("id", DataType::Int64, false),
        Field::new("value", DataType::Int64, false),
    ]))
}

//! The friends job's output tables, which `friends --load` reads back as its base.
//!
//! ```text
//! <output>/friends/dt=<date>/part-NNNNN.parquet        uid_a < uid_b, since
//! <output>/friend_counts/dt=<date>/part-NNNNN.parquet  uid, friends
//! ```
//!
//! Invariants: each file is sorted by its leading columns (`(uid_a, uid_b)`, `uid`); a pair
//! appears once in the table and a uid once in the counts (for a sliced run, once per
//! slice); `since` is null when either follow time is unknown. The partitions are
//! committed together, with `_SUCCESS` ([`super::partition`]).

use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::error::{Error, Result};

/// The folders of the two tables under a friends output.
pub const PAIRS_TABLE: &str = "friends";
pub const COUNTS_TABLE: &str = "friend_counts";

/// Schema of the friends output.
pub fn friends_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("uid_a", DataType::Int64, false),
        Field::new("uid_b", DataType::Int64, false),
        Field::new(
            "since",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]))
}

/// Schema of the per-user friend counts.
pub fn counts_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Int64, false),
        Field::new("friends", DataType::Int64, false),
    ]))
}

/// `uid_a`, `uid_b` and `since` (null when unknown) of a batch of [`friends_schema`].
pub fn pair_columns(batch: &RecordBatch) -> (&Int64Array, &Int64Array, &TimestampMillisecondArray) {
    (
        batch.column(0).as_primitive(),
        batch.column(1).as_primitive(),
        batch.column(2).as_primitive(),
    )
}

/// `uid` and `friends` of a batch of [`counts_schema`].
pub fn count_columns(batch: &RecordBatch) -> (&Int64Array, &Int64Array) {
    (
        batch.column(0).as_primitive(),
        batch.column(1).as_primitive(),
    )
}

/// A row of the friends table: `(uid_a, uid_b)` and since.
pub type PairRow = ((i64, i64), Option<i64>);

/// The rows of a batch of the friends table read from `path` (checked, as [`check`] does).
pub fn decode_pairs(batch: &RecordBatch, path: &str) -> Result<Vec<PairRow>> {
    check(batch, &friends_schema(), path)?;
    let (a, b, since) = pair_columns(batch);
    Ok((0..batch.num_rows())
        .map(|i| {
            let since = arrow::array::Array::is_valid(since, i).then(|| since.value(i));
            ((a.value(i), b.value(i)), since)
        })
        .collect())
}

/// The rows of a batch of the counts table read from `path`: uid → friends.
pub fn decode_counts(batch: &RecordBatch, path: &str) -> Result<Vec<(i64, i64)>> {
    check(batch, &counts_schema(), path)?;
    let (uid, n) = count_columns(batch);
    Ok(uid
        .values()
        .iter()
        .copied()
        .zip(n.values().iter().copied())
        .collect())
}

/// Checks that a batch read from `path` has `schema`'s column types, so that
/// [`pair_columns`] and [`count_columns`] can read it: a file rewritten by another tool is a
/// `BadInput` naming the file and the column, not a panic.
pub fn check(batch: &RecordBatch, schema: &SchemaRef, path: &str) -> Result<()> {
    for (i, field) in schema.fields().iter().enumerate() {
        let found = batch.columns().get(i).map(|c| c.data_type().clone());
        let same = match (&found, field.data_type()) {
            // Any time zone reads the same instants.
            (Some(DataType::Timestamp(TimeUnit::Millisecond, _)), DataType::Timestamp(..)) => true,
            (Some(t), want) => t == want,
            (None, _) => false,
        };
        if !same {
            return Err(Error::BadInput {
                path: path.to_string(),
                line: 0,
                reason: format!(
                    "column {} {:?} is {}, not {}",
                    i,
                    field.name(),
                    found.map_or("missing".to_string(), |t| t.to_string()),
                    field.data_type()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_batch_is_refused_with_its_column() {
        let ours = RecordBatch::try_new(
            counts_schema(),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(Int64Array::from(vec![2])),
            ],
        )
        .unwrap();
        check(&ours, &counts_schema(), "x").unwrap();
        let e = check(&ours, &friends_schema(), "f.parquet").unwrap_err();
        assert!(
            e.to_string().contains("f.parquet") && e.to_string().contains("since"),
            "{e}"
        );
    }
}

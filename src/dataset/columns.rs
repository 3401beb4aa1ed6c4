//! Typed access to the columns of a cleaned table's record batches, for the jobs that read
//! them (load, rank): a required column that is missing, of another type or with a null id
//! is a [`Error::BadInput`] naming the file and the column, not a panic or a silent 0.

use arrow::array::{
    Array, AsArray, Int64Array, PrimitiveArray, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow::datatypes::{ArrowPrimitiveType, Int64Type, TimestampMillisecondType};

use crate::error::{Error, Result};
use crate::hdfs::FileEntry;

/// A column of type `T` a job needs, or a [`Error::BadInput`] naming the file and the column
/// (a part written by another tool may lack it).
fn need<'a, T: ArrowPrimitiveType>(
    file: &FileEntry,
    b: &'a RecordBatch,
    column: &str,
    kind: &str,
) -> Result<&'a PrimitiveArray<T>> {
    let found = b
        .column_by_name(column)
        .and_then(|c| c.as_primitive_opt::<T>());
    found.ok_or_else(|| Error::BadInput {
        path: file.location.to_string(),
        line: 0,
        reason: format!("column {column:?} is missing or not {kind}"),
    })
}

/// A required `Int64` column, without nulls (a null id would read as 0).
pub fn ids<'a>(file: &FileEntry, b: &'a RecordBatch, column: &str) -> Result<&'a Int64Array> {
    let ids = nullable_ids(file, b, column)?;
    if ids.null_count() > 0 {
        return Err(Error::BadInput {
            path: file.location.to_string(),
            line: 0,
            reason: format!("column {column:?} has {} null ids", ids.null_count()),
        });
    }
    Ok(ids)
}

/// A required `Int64` column whose nulls mean "not recorded" (a comment's post): the caller
/// reads each value with [`opt`] and counts the nulls it skips.
pub fn nullable_ids<'a>(
    file: &FileEntry,
    b: &'a RecordBatch,
    column: &str,
) -> Result<&'a Int64Array> {
    need::<Int64Type>(file, b, column, "int64")
}

/// A required millisecond timestamp column (nulls allowed: an unknown time).
pub fn times<'a>(
    file: &FileEntry,
    b: &'a RecordBatch,
    column: &str,
) -> Result<&'a TimestampMillisecondArray> {
    need::<TimestampMillisecondType>(file, b, column, "a millisecond timestamp")
}

/// An optional `Int64` column: `None` when absent or of another type.
pub fn opt_ids<'a>(b: &'a RecordBatch, column: &str) -> Option<&'a Int64Array> {
    b.column_by_name(column)
        .and_then(|c| c.as_primitive_opt::<Int64Type>())
}

/// An optional text column: `None` when absent or of another type.
pub fn opt_texts<'a>(b: &'a RecordBatch, column: &str) -> Option<&'a StringArray> {
    b.column_by_name(column)
        .and_then(|c| c.as_string_opt::<i32>())
}

/// Row `i` of an optional column: `None` when the column is absent or the value null.
pub fn opt(a: Option<&Int64Array>, i: usize) -> Option<i64> {
    a.filter(|a| !a.is_null(i)).map(|a| a.value(i))
}

//! Several Parquet files, each sorted by a key, read as one stream in key order: a k-way
//! merge that holds one batch of each file, whatever their length. It is how a job compares
//! two outputs that are too large to hold (`friends --load` takes the rows that differ from
//! the night the namespace holds).
//!
//! Invariant: a file's keys must rise strictly, as our outputs' contracts say; a file that
//! does not is refused (`BadInput` naming it), never merged out of order. Equal keys in two
//! files come out file by file, in the order the files were given.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use arrow::array::RecordBatch;

use super::read::{open_parquet, Batches};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

/// Rows decoded at once from each file.
const BATCH_ROWS: usize = 8192;

/// Turns a batch read from the file at `path` into its rows, `(key, value)`.
pub type Decode<K, V> = fn(&RecordBatch, &str) -> Result<Vec<(K, V)>>;

/// The rows of several key-sorted files in key order (see the module's doc).
pub struct SortedMerge<K: Ord + Copy, V> {
    cursors: Vec<Cursor<K, V>>,
    /// The head key of every cursor that has one, with its index.
    heap: BinaryHeap<Reverse<(K, usize)>>,
}

/// One file's rows, a batch at a time, checked to rise.
struct Cursor<K, V> {
    batches: Batches,
    location: Location,
    decode: Decode<K, V>,
    rows: std::vec::IntoIter<(K, V)>,
    head: Option<(K, V)>,
    /// The key of the row before the head.
    last: Option<K>,
    /// Rows read so far, for the message when one is out of order.
    read: u64,
}

impl<K: Ord + Copy + std::fmt::Debug, V> Cursor<K, V> {
    /// Reads the next row into `head` (none at the end), checking that its key is above the
    /// one before.
    fn advance(&mut self) -> Result<()> {
        let before = self.last;
        loop {
            if let Some(row) = self.rows.next() {
                if let Some(before) = before {
                    if row.0 <= before {
                        return Err(Error::BadInput {
                            path: self.location.to_string(),
                            line: 0,
                            reason: format!(
                                "row {} is out of key order ({:?} after {before:?}): the file \
                                 is not the sorted output it should be",
                                self.read + 1,
                                row.0
                            ),
                        });
                    }
                }
                self.read += 1;
                self.head = Some(row);
                return Ok(());
            }
            match self.batches.next() {
                Some(batch) => {
                    self.rows = (self.decode)(&batch?, &self.location.to_string())?.into_iter()
                }
                None => return Ok(()),
            }
        }
    }
}

impl<K: Ord + Copy + std::fmt::Debug, V> SortedMerge<K, V> {
    /// Opens `files` (each sorted by the key `decode` gives) for reading in key order.
    pub fn open(fs: &FileSystems, files: &[FileEntry], decode: Decode<K, V>) -> Result<Self> {
        let mut merge = SortedMerge {
            cursors: Vec::with_capacity(files.len()),
            heap: BinaryHeap::with_capacity(files.len()),
        };
        for file in files {
            let builder = open_parquet(fs, file)?.with_batch_size(BATCH_ROWS);
            let mut cursor = Cursor {
                batches: Batches::new(file, builder)?,
                location: file.location.clone(),
                decode,
                rows: Vec::new().into_iter(),
                head: None,
                last: None,
                read: 0,
            };
            cursor.advance()?;
            if let Some((key, _)) = &cursor.head {
                merge.heap.push(Reverse((*key, merge.cursors.len())));
            }
            merge.cursors.push(cursor);
        }
        Ok(merge)
    }

    /// The next row in key order, or `None` when every file is read.
    pub fn next_row(&mut self) -> Result<Option<(K, V)>> {
        let Some(Reverse((_, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let cursor = &mut self.cursors[i];
        let Some(row) = cursor.head.take() else {
            return Ok(None);
        };
        cursor.last = Some(row.0);
        cursor.advance()?;
        if let Some((key, _)) = &cursor.head {
            self.heap.push(Reverse((*key, i)));
        }
        Ok(Some(row))
    }
}

/// Walks `new` beside `old` (both in key order) and hands `changed` every row of `new` whose
/// key `old` lacks or holds with another value; returns how many rows were the same. Rows
/// that only `old` holds are passed over.
pub fn changed_rows<K: Ord + Copy + std::fmt::Debug, V: PartialEq>(
    mut old: Option<&mut SortedMerge<K, V>>,
    new: &mut SortedMerge<K, V>,
    changed: &mut dyn FnMut(K, V) -> Result<()>,
) -> Result<u64> {
    let mut same = 0;
    let mut held: Option<(K, V)> = None;
    while let Some((key, value)) = new.next_row()? {
        if let Some(old) = old.as_deref_mut() {
            while held.as_ref().is_none_or(|(k, _)| *k < key) {
                match old.next_row()? {
                    Some(row) => held = Some(row),
                    None => {
                        held = None;
                        break;
                    }
                }
            }
        }
        if matches!(&held, Some((k, v)) if *k == key && *v == value) {
            same += 1;
        } else {
            changed(key, value)?;
        }
    }
    Ok(same)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use super::*;
    use crate::dataset::parquet_io::{write_parquet, writer_properties};

    fn decode(batch: &RecordBatch, _path: &str) -> Result<Vec<(i64, i64)>> {
        let (k, v) = (batch.column(0), batch.column(1));
        let (k, v) = (k.as_primitive::<Int64Type>(), v.as_primitive::<Int64Type>());
        Ok(k.values()
            .iter()
            .copied()
            .zip(v.values().iter().copied())
            .collect())
    }

    /// Writes each list of rows as a file of (key, value); returns the files.
    fn files(fs: &FileSystems, dir: &std::path::Path, lists: &[&[(i64, i64)]]) -> Vec<FileEntry> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
        ]));
        let n = dir.read_dir().unwrap().count();
        lists
            .iter()
            .enumerate()
            .map(|(i, rows)| {
                let at = fs
                    .parse(&format!("file://{}/f{}.parquet", dir.display(), n + i))
                    .unwrap();
                let batch = RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                    ],
                )
                .unwrap();
                let props = writer_properties(false).build();
                write_parquet(fs, &at, schema.clone(), props, Some(&batch)).unwrap();
                fs.status(&at).unwrap().unwrap()
            })
            .collect()
    }

    fn all(merge: &mut SortedMerge<i64, i64>) -> Vec<(i64, i64)> {
        std::iter::from_fn(|| merge.next_row().unwrap()).collect()
    }

    #[test]
    fn sorted_files_come_out_as_one_sorted_stream() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        // Long enough to cross batches; keys interleave between the files.
        let a: Vec<(i64, i64)> = (0..20_000).map(|k| (3 * k, k)).collect();
        let b: Vec<(i64, i64)> = (0..10_000).map(|k| (3 * k + 1, -k)).collect();
        let c: Vec<(i64, i64)> = vec![];
        let files = files(&fs, dir.path(), &[&a, &b, &c]);
        let got = all(&mut SortedMerge::open(&fs, &files, decode).unwrap());
        let mut want: Vec<(i64, i64)> = a.iter().chain(&b).copied().collect();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn a_file_out_of_order_is_refused_with_its_name_and_row() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let files = files(&fs, dir.path(), &[&[(1, 0), (5, 0), (5, 1)]]);
        let mut merge = SortedMerge::open(&fs, &files, decode).unwrap();
        let e = std::iter::from_fn(|| merge.next_row().transpose())
            .find_map(|r| r.err())
            .unwrap()
            .to_string();
        assert!(e.contains("f0.parquet") && e.contains("row 3"), "{e}");
    }

    #[test]
    fn changed_rows_are_the_new_keys_and_values() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let old = files(&fs, dir.path(), &[&[(1, 1), (4, 4)], &[(2, 2), (9, 9)]]);
        let new = files(
            &fs,
            dir.path(),
            &[&[(1, 1), (2, 20), (3, 3)], &[(4, 4), (10, 10)]],
        );
        let mut changed = Vec::new();
        let same = changed_rows(
            Some(&mut SortedMerge::open(&fs, &old, decode).unwrap()),
            &mut SortedMerge::open(&fs, &new, decode).unwrap(),
            &mut |k, v| {
                changed.push((k, v));
                Ok(())
            },
        )
        .unwrap();
        // 9 is only in the old files: passed over.
        assert_eq!((same, changed), (2, vec![(2, 20), (3, 3), (10, 10)]));
        let mut every = Vec::new();
        let same = changed_rows(
            None,
            &mut SortedMerge::open(&fs, &new, decode).unwrap(),
            &mut |k, v| {
                every.push((k, v));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!((same, every.len()), (0, 5));
    }
}

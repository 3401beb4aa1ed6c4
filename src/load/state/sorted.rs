//! A snapshot's parts read and written row by row, in key order, so a partition carried
//! forward streams through memory instead of being held in it (docs/nightly.md, "Carried
//! forward").
//!
//! Invariants: every part is sorted by its key (uid, mid) and holds each key once, and a key
//! is in one part, so merging the parts gives each key once, ascending. A part is written in
//! batches of [`BATCH_ROWS`] rows whether it comes from a stream or from sorted counters, so
//! the two give the same bytes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;

use super::bad;
use crate::dataset::columns;
use crate::dataset::parquet_io::{self, OpenedParquet, ParquetWriter};
use crate::error::Result;
use crate::hdfs::{FileEntry, FileSystems, Location};

/// A snapshot row: a user's uid and five counters, or a post's mid, author, time, reposts
/// and comments (the last slot unused).
pub type Row = [i64; 6];

/// Rows a part is written in at a time.
pub const BATCH_ROWS: usize = 64 * 1024;

/// One part, row by row.
struct Cursor {
    location: Location,
    batches: ParquetRecordBatchReader,
    columns: Vec<Int64Array>,
    row: usize,
}

impl Cursor {
    /// The part's first batch; `None` when it has no rows.
    fn open(fs: &FileSystems, file: &FileEntry, schema: &SchemaRef) -> Result<Option<Cursor>> {
        let opened = OpenedParquet::open(fs, file)?;
        let batches = opened
            .builder()
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| bad(&file.location, e.to_string()))?;
        let mut cursor = Cursor {
            location: file.location.clone(),
            batches,
            columns: Vec::new(),
            row: 0,
        };
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        Ok(cursor.load(file, &names)?.then_some(cursor))
    }

    /// Reads the next non-empty batch; false at the end of the part.
    fn load(&mut self, file: &FileEntry, names: &[String]) -> Result<bool> {
        for batch in self.batches.by_ref() {
            let batch = batch.map_err(|e| bad(&self.location, e.to_string()))?;
            if batch.num_rows() == 0 {
                continue;
            }
            self.columns = names
                .iter()
                .map(|n| columns::ids(file, &batch, n).cloned())
                .collect::<Result<_>>()?;
            self.row = 0;
            return Ok(true);
        }
        Ok(false)
    }

    fn current(&self) -> Row {
        let mut row = [0; 6];
        for (slot, column) in row.iter_mut().zip(&self.columns) {
            *slot = column.value(self.row);
        }
        row
    }
}

/// The rows of some parts that `keep` accepts, merged in key order.
pub struct SortedRows {
    files: Vec<FileEntry>,
    names: Vec<String>,
    cursors: Vec<Cursor>,
    /// The key of each cursor's current row, smallest first.
    heap: BinaryHeap<Reverse<(i64, usize)>>,
    keep: Box<dyn Fn(&Row) -> bool + Send>,
}

impl SortedRows {
    pub fn open(
        fs: &FileSystems,
        files: &[&FileEntry],
        schema: &SchemaRef,
        keep: Box<dyn Fn(&Row) -> bool + Send>,
    ) -> Result<SortedRows> {
        let mut rows = SortedRows {
            files: Vec::new(),
            names: schema.fields().iter().map(|f| f.name().clone()).collect(),
            cursors: Vec::new(),
            heap: BinaryHeap::new(),
            keep,
        };
        for file in files {
            if let Some(cursor) = Cursor::open(fs, file, schema)? {
                rows.files.push((*file).clone());
                rows.cursors.push(cursor);
                let i = rows.cursors.len() - 1;
                rows.settle(i)?;
            }
        }
        Ok(rows)
    }

    /// Moves cursor `i` to its next row that `keep` accepts (from the current one) and
    /// queues it; a part that runs out leaves the queue.
    fn settle(&mut self, i: usize) -> Result<()> {
        loop {
            let c = &self.cursors[i];
            if c.row < c.columns.first().map_or(0, |k| k.len()) {
                let row = c.current();
                if (self.keep)(&row) {
                    self.heap.push(Reverse((row[0], i)));
                    return Ok(());
                }
                self.cursors[i].row += 1;
            } else if !self.cursors[i].load(&self.files[i], &self.names)? {
                return Ok(());
            }
        }
    }

    /// The next row, smallest key first.
    pub fn next_row(&mut self) -> Result<Option<Row>> {
        let Some(Reverse((_, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let row = self.cursors[i].current();
        self.cursors[i].row += 1;
        self.settle(i)?;
        Ok(Some(row))
    }
}

/// One part being written: rows in, batches of [`BATCH_ROWS`] out.
pub struct PartFile {
    location: Location,
    writer: ParquetWriter,
    schema: SchemaRef,
    width: usize,
    rows: Vec<Row>,
}

impl PartFile {
    pub fn create(fs: &FileSystems, at: &Location, schema: SchemaRef) -> Result<PartFile> {
        let props = parquet_io::typed_properties(&schema).build();
        Ok(PartFile {
            location: at.clone(),
            writer: ParquetWriter::create(fs, at, schema.clone(), props)?,
            width: schema.fields().len(),
            schema,
            rows: Vec::with_capacity(BATCH_ROWS),
        })
    }

    pub fn push(&mut self, row: Row) -> Result<()> {
        self.rows.push(row);
        if self.rows.len() == BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let batch = batch_of(&self.location, &self.schema, self.width, &self.rows)?;
        self.rows.clear();
        self.writer.write(&batch)
    }

    /// Writes what is left and moves the file into place.
    pub fn finish(mut self) -> Result<()> {
        if !self.rows.is_empty() {
            self.flush()?;
        }
        self.writer.finish()
    }
}

/// Rows as a batch of `schema` (their first `width` slots), for the file at `location`.
fn batch_of(
    location: &Location,
    schema: &SchemaRef,
    width: usize,
    rows: &[Row],
) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = (0..width)
        .map(|k| Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r[k]))) as ArrayRef)
        .collect();
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| bad(location, e.to_string()))
}

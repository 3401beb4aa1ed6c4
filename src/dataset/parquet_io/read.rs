//! Reading Parquet by URL: positioned reads of the footer and of the column chunks a
//! projection needs ([`open_parquet`]), so a reader never holds a whole file and on HDFS
//! fetches only the columns it decodes; row counts from the footers alone ([`parquet_rows`]).

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelectionPolicy,
};
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location, RandomAccessFile};

/// Rows per batch read by [`OpenedParquet::read_columns`].
const READ_BATCH_ROWS: usize = 16 * 1024;

/// The rows of Parquet `files`, from their footers.
pub fn parquet_rows<'a>(
    fs: &FileSystems,
    files: impl IntoIterator<Item = &'a FileEntry>,
) -> Result<u64> {
    files.into_iter().try_fold(0u64, |sum, f| {
        let builder = open_parquet(fs, f)?;
        Ok(sum + builder.metadata().file_metadata().num_rows().max(0) as u64)
    })
}

/// A Parquet file on HDFS or local disk, read by position.
#[derive(Clone)]
pub struct ParquetFile {
    file: Arc<RandomAccessFile>,
    /// On HDFS, the stretches read last (see [`HDFS_READ_AHEAD`]).
    stretches: Option<Stretches>,
}

/// Stretches of a file read ahead, by offset, oldest first.
type Stretches = Arc<std::sync::Mutex<Vec<(u64, Bytes)>>>;

/// Bytes an HDFS read of a [`ParquetFile`] fetches at once, and how many such stretches a
/// reader keeps. The Parquet reader asks for a page at a time, and each ask would otherwise
/// be an HDFS read of its own; larger stretches gain little for the memory every reader
/// holds (docs/design/io.md). A row group's column chunks lie side by side, so one stretch
/// serves the pages of all the columns decoded together, and the next is read when a page
/// runs past it. Each reader has stretches of its own ([`ParquetFile::for_reading`]),
/// dropped with it.
const HDFS_READ_AHEAD: usize = 1 << 20;
const HDFS_STRETCHES: usize = 2;

impl ParquetFile {
    fn new(file: RandomAccessFile) -> ParquetFile {
        let file = Arc::new(file);
        ParquetFile {
            stretches: file.is_hdfs().then(Default::default),
            file,
        }
    }

    /// The same file with no stretch read yet: for one reader, which drops them with it.
    fn for_reading(&self) -> ParquetFile {
        ParquetFile {
            file: self.file.clone(),
            stretches: self.file.is_hdfs().then(Default::default),
        }
    }

    /// `length` bytes from `start`: on local disk read as asked (the page cache is the
    /// read-ahead), on HDFS out of a stretch read ahead.
    fn read_at(&self, start: u64, length: usize) -> std::io::Result<Bytes> {
        let Some(stretches) = &self.stretches else {
            let mut buf = vec![0u8; length];
            self.file.read_exact_at(&mut buf, start)?;
            return Ok(Bytes::from(buf));
        };
        let end = start + length as u64;
        let held = |s: &(u64, Bytes)| s.0 <= start && end <= s.0 + s.1.len() as u64;
        {
            let mut stretches = stretches.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = stretches.iter().position(held) {
                let (from, bytes) = stretches.remove(at);
                let slice = bytes.slice((start - from) as usize..(end - from) as usize);
                stretches.push((from, bytes));
                return Ok(slice);
            }
        }
        // Read without the lock: other threads may be reading other row groups of the file.
        let left = self.file.len().saturating_sub(start) as usize;
        let mut buf = vec![0u8; length.max(HDFS_READ_AHEAD.min(left))];
        self.file.read_exact_at(&mut buf, start)?;
        let bytes = Bytes::from(buf);
        let mut stretches = stretches.lock().unwrap_or_else(|e| e.into_inner());
        if stretches.len() == HDFS_STRETCHES {
            stretches.remove(0);
        }
        stretches.push((start, bytes.clone()));
        Ok(bytes.slice(..length))
    }
}

impl Length for ParquetFile {
    fn len(&self) -> u64 {
        self.file.len()
    }
}

/// A sequential reader from an offset of a [`ParquetFile`].
pub struct ParquetFileRead {
    file: ParquetFile,
    position: u64,
}

impl std::io::Read for ParquetFileRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.file.len().saturating_sub(self.position);
        let n = (buf.len() as u64).min(left) as usize;
        buf[..n].copy_from_slice(&self.file.read_at(self.position, n)?);
        self.position += n as u64;
        Ok(n)
    }
}

/// Bytes read ahead for a page header. The Parquet reader decodes each page header (some
/// 30-60 bytes from arrow-rs, a few hundred with statistics from other writers) through
/// `get_read`, a byte or a varint at a time: unbuffered, each was a `pread` (an HDFS read
/// call on HDFS), and the data pages themselves come through `get_bytes`, so a small buffer
/// is all a header needs (docs/design/io.md).
const PAGE_HEADER_READ_AHEAD: usize = 1024;

impl ChunkReader for ParquetFile {
    type T = std::io::BufReader<ParquetFileRead>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::with_capacity(
            PAGE_HEADER_READ_AHEAD,
            ParquetFileRead {
                file: self.clone(),
                position: start,
            },
        ))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.read_at(start, length)
            .map_err(|e| ParquetError::External(Box::new(e)))
    }
}

/// Opens a Parquet file for decoding (its footer is read here; data pages on demand).
pub fn open_parquet(
    fs: &FileSystems,
    file: &FileEntry,
) -> Result<ParquetRecordBatchReaderBuilder<ParquetFile>> {
    Ok(OpenedParquet::open(fs, file)?.builder())
}

/// Streams the record batches of one Parquet file, decoding only the top-level `columns`
/// the file has (the others, a user's kilobyte of description say, are never decompressed).
pub fn read_parquet_columns(
    fs: &FileSystems,
    file: &FileEntry,
    columns: &[&str],
    f: &mut dyn FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    OpenedParquet::open(fs, file)?.read_columns(None, columns, f)
}

/// A Parquet file opened once, its footer kept, so that its row groups can be decoded
/// apart, on as many threads as there are row groups (one large file need not be read by
/// one thread), without reading the footer again for each.
#[derive(Clone)]
pub struct OpenedParquet {
    file: FileEntry,
    source: ParquetFile,
    metadata: ArrowReaderMetadata,
}

impl OpenedParquet {
    pub fn open(fs: &FileSystems, file: &FileEntry) -> Result<OpenedParquet> {
        let source = ParquetFile::new(fs.open_random(&file.location)?);
        let metadata = ArrowReaderMetadata::load(&source, Default::default()).map_err(|e| {
            Error::BadInput {
                path: file.location.to_string(),
                line: 0,
                reason: format!("not a Parquet file: {e}"),
            }
        })?;
        Ok(OpenedParquet {
            file: file.clone(),
            // Without the footer's stretch: a file opened is kept for the whole run.
            source: source.for_reading(),
            metadata,
        })
    }

    pub fn metadata(&self) -> &parquet::file::metadata::ParquetMetaData {
        self.metadata.metadata()
    }

    pub fn location(&self) -> &Location {
        &self.file.location
    }

    /// Rows of each row group, from the footer.
    pub fn row_group_rows(&self) -> Vec<usize> {
        self.metadata()
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows().max(0) as usize)
            .collect()
    }

    /// A reader of the whole file, on the footer read at opening.
    pub fn builder(&self) -> ParquetRecordBatchReaderBuilder<ParquetFile> {
        ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.source.for_reading(),
            self.metadata.clone(),
        )
    }

    /// Streams the top-level `columns` the file has (the others, a user's kilobyte of
    /// description say, are never decompressed) in 16 K-row batches, of one row group or of
    /// the whole file when `None`. Batches that size are read while they are still in cache
    /// (three id columns take 384 KiB); larger ones fall out of it (docs/design/io.md).
    pub fn read_columns(
        &self,
        row_group: Option<usize>,
        columns: &[&str],
        f: &mut dyn FnMut(&RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let builder = self.projected(columns);
        let builder = match row_group {
            Some(i) => builder.with_row_groups(vec![i]),
            None => builder,
        };
        stream_batches(&self.file, builder, f)
    }

    /// [`OpenedParquet::read_columns`] of the whole file, but only the rows `selection` picks
    /// (the others are skipped, not built): a wide column wanted for a few rows.
    pub fn read_selected(
        &self,
        columns: &[&str],
        selection: RowSelection,
        f: &mut dyn FnMut(&RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let builder = self
            .projected(columns)
            .with_row_selection(selection)
            // Skipped, not decoded and filtered: the rows left out are the costly ones.
            .with_row_selection_policy(RowSelectionPolicy::Selectors);
        stream_batches(&self.file, builder, f)
    }

    /// A reader of the top-level `columns` the file has, in [`READ_BATCH_ROWS`] batches.
    fn projected(&self, columns: &[&str]) -> ParquetRecordBatchReaderBuilder<ParquetFile> {
        let builder = self.builder();
        let roots: Vec<usize> = builder
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, field)| columns.contains(&field.name().as_str()))
            .map(|(i, _)| i)
            .collect();
        let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), roots);
        builder
            .with_projection(mask)
            .with_batch_size(READ_BATCH_ROWS)
    }

    /// Whether the file has a top-level column `name`.
    pub fn has_column(&self, name: &str) -> bool {
        self.metadata.schema().field_with_name(name).is_ok()
    }

    /// Rows whose `column` is not null, from the footer's statistics; a row group without
    /// them counts whole (an upper bound, for sizing work).
    pub fn non_null_rows(&self, column: &str) -> u64 {
        let meta = self.metadata();
        let Some(index) = meta
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .position(|c| c.path().string() == column)
        else {
            return 0;
        };
        meta.row_groups()
            .iter()
            .map(|rg| {
                let rows = rg.num_rows().max(0) as u64;
                let nulls = rg
                    .column(index)
                    .statistics()
                    .and_then(|s| s.null_count_opt())
                    .unwrap_or(0);
                rows.saturating_sub(nulls)
            })
            .sum()
    }
}

/// Streams the record batches of one Parquet file.
pub fn read_parquet(
    fs: &FileSystems,
    file: &FileEntry,
    f: &mut dyn FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    stream_batches(file, open_parquet(fs, file)?.with_batch_size(8192), f)
}

fn stream_batches(
    file: &FileEntry,
    builder: ParquetRecordBatchReaderBuilder<ParquetFile>,
    f: &mut dyn FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    for batch in Batches::new(file, builder)? {
        f(&batch?)?;
    }
    Ok(())
}

/// The record batches of one Parquet file, pulled one at a time (for a merge that advances
/// several files side by side); an error names the file.
pub struct Batches {
    location: Location,
    reader: ParquetRecordBatchReader,
}

impl Batches {
    /// The batches `builder` reads from `file`.
    pub fn new(
        file: &FileEntry,
        builder: ParquetRecordBatchReaderBuilder<ParquetFile>,
    ) -> Result<Batches> {
        let reader = builder.build().map_err(|e| unreadable(&file.location, e))?;
        Ok(Batches {
            location: file.location.clone(),
            reader,
        })
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = self.reader.next()?;
        Some(batch.map_err(|e| unreadable(&self.location, e)))
    }
}

fn unreadable(location: &Location, e: impl std::fmt::Display) -> Error {
    Error::BadInput {
        path: location.to_string(),
        line: 0,
        reason: e.to_string(),
    }
}

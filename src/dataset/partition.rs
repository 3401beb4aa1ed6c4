//! Writing dated output partitions the way every job commits them: Parquet (zstd) part files
//! staged under a hidden `_tmp.*` folder, a `_SUCCESS` marker, then a rename into place.
//!
//! Invariants: a reader listing `<table>/dt=<date>/` sees either the previous complete
//! partition, nothing (for the instant between delete and rename), or the new complete one
//! with its `_SUCCESS`; never half of one. `_SUCCESS` is written only once every file of the
//! staged folder is durable. Staged folders of a failed run are removed, and are hidden (`_`
//! prefix) in any case.
//!
//! Reading goes through [`open_parquet`]: positioned reads of the footer and of the column
//! chunks a projection needs, so a reader never holds a whole file and on HDFS fetches only
//! the columns it decodes.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location, RandomAccessFile};

use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReaderBuilder, RowSelection, RowSelectionPolicy,
};
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

/// Rows per batch read by [`OpenedParquet::read_columns`].
const READ_BATCH_ROWS: usize = 16 * 1024;

/// Rows per Parquet row group.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Writes one Parquet file atomically (an empty one, with the schema, when `batch` is `None`).
pub fn write_parquet(
    fs: &FileSystems,
    location: &Location,
    schema: SchemaRef,
    props: WriterProperties,
    batch: Option<&RecordBatch>,
) -> Result<()> {
    let mut writer = ParquetWriter::create(fs, location, schema, props)?;
    if let Some(batch) = batch {
        writer.write(batch)?;
    }
    writer.finish()
}

/// Writer properties chosen per column type: ids, counts and times (int64 and timestamps)
/// delta-encoded, text dictionary-encoded. Our rows are sorted by their leading ids and
/// crawled times cluster, so deltas are small: the files are smaller than with dictionary
/// pages (which overflow on distinct ids and fall back to plain), and faster to decode
/// (docs/design/clean.md).
pub fn typed_properties(schema: &SchemaRef) -> parquet::file::properties::WriterPropertiesBuilder {
    use arrow::datatypes::DataType;
    use parquet::basic::Encoding;
    use parquet::schema::types::ColumnPath;
    let mut props = writer_properties(true);
    for field in schema.fields() {
        if matches!(field.data_type(), DataType::Int64 | DataType::Timestamp(..)) {
            let column = ColumnPath::from(field.name().as_str());
            props = props
                .set_column_dictionary_enabled(column.clone(), false)
                .set_column_encoding(column, Encoding::DELTA_BINARY_PACKED);
        }
    }
    props
}

/// A Parquet file written batch by batch (row groups are flushed as they fill, so memory
/// stays at one row group), committed by [`ParquetWriter::finish`].
pub struct ParquetWriter {
    writer: ArrowWriter<crate::hdfs::AtomicFile>,
    location: Location,
    /// In a staged folder, whose commit makes its files durable (see [`commit`]).
    staged: bool,
}

impl ParquetWriter {
    /// Creates the file (staged: it appears at [`ParquetWriter::finish`]) with properties
    /// built from [`writer_properties`] or [`typed_properties`], so the codec, row groups and
    /// writer name are shared by every output (jobs may tune levels and encodings per column).
    pub fn create(
        fs: &FileSystems,
        location: &Location,
        schema: SchemaRef,
        props: WriterProperties,
    ) -> Result<ParquetWriter> {
        let file = fs.create_atomic(location)?;
        let writer = ArrowWriter::try_new(file, schema, Some(props))
            .map_err(|e| parquet_error(location, e))?;
        Ok(ParquetWriter {
            writer,
            location: location.clone(),
            staged: false,
        })
    }

    /// [`ParquetWriter::create`] for a file of a [`Staged`] folder: [`ParquetWriter::finish`]
    /// then leaves making it durable to the folder's [`commit`], with all its other files.
    pub fn create_staged(
        fs: &FileSystems,
        location: &Location,
        schema: SchemaRef,
        props: WriterProperties,
    ) -> Result<ParquetWriter> {
        Ok(ParquetWriter {
            staged: true,
            ..ParquetWriter::create(fs, location, schema, props)?
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer
            .write(batch)
            .map_err(|e| parquet_error(&self.location, e))
    }

    /// Writes the footer and moves the file into place.
    pub fn finish(self) -> Result<()> {
        let location = self.location;
        let file = self
            .writer
            .into_inner()
            .map_err(|e| parquet_error(&location, e))?;
        if self.staged {
            file.commit_unsynced()
        } else {
            file.commit()
        }
    }

    /// Moves the writer to a thread of its own, so encoding and compressing this file
    /// overlaps with whatever produces the batches (and with other such files).
    pub fn in_background(self) -> BackgroundParquetWriter {
        let location = self.location.clone();
        // Two batches in flight: enough to keep both sides busy, little memory.
        let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(2);
        let thread = std::thread::spawn(move || -> Result<ParquetWriter> {
            let mut writer = self;
            for batch in rx {
                writer.write(&batch)?;
            }
            Ok(writer)
        });
        BackgroundParquetWriter {
            tx: Some(tx),
            thread: Some(thread),
            location,
        }
    }
}

/// The Parquet data page version written unless asked otherwise (`--data-page-version`).
pub const DATA_PAGE_VERSION: u8 = 2;

/// Data pages of `version` (1 or 2), every column's encoding left as the caller set it: a
/// version 2 page compresses its values where the encoder left them, where version 1 first
/// copies them behind the levels into a buffer that grows (and then regrows the compressed
/// one; docs/design/clean.md). Columns without an encoding of their own stay PLAIN
/// (version 2 would pick DELTA_BYTE_ARRAY for text and DELTA_BINARY_PACKED for integers).
/// Readers that predate version 2 pages need 1.
pub fn with_data_page_version(
    props: parquet::file::properties::WriterPropertiesBuilder,
    version: u8,
) -> parquet::file::properties::WriterPropertiesBuilder {
    use parquet::file::properties::WriterVersion;
    if version == 1 {
        props.set_writer_version(WriterVersion::PARQUET_1_0)
    } else {
        props
            .set_writer_version(WriterVersion::PARQUET_2_0)
            .set_encoding(parquet::basic::Encoding::PLAIN)
    }
}

/// The properties every output file starts from: zstd, [`ROW_GROUP_ROWS`] row groups, and
/// dictionary encoding only where asked (worth it for repetitive text, pure hashing cost for
/// columns of distinct ids).
pub fn writer_properties(dictionary: bool) -> parquet::file::properties::WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_dictionary_enabled(dictionary)
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).expect("valid level"),
        ))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by("weibo-etl".into())
}

/// A [`ParquetWriter`] running on its own thread (see [`ParquetWriter::in_background`]).
/// An encoding or I/O error surfaces at the next [`write`](Self::write) or at
/// [`finish`](Self::finish); dropped unfinished, the file is abandoned like any unfinished
/// [`ParquetWriter`].
pub struct BackgroundParquetWriter {
    tx: Option<std::sync::mpsc::SyncSender<RecordBatch>>,
    thread: Option<std::thread::JoinHandle<Result<ParquetWriter>>>,
    location: Location,
}

impl BackgroundParquetWriter {
    pub fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let sent = self.tx.as_ref().map(|tx| tx.send(batch).is_ok());
        match sent {
            Some(true) => Ok(()),
            // The thread hung up: it failed, and its error is the one to report.
            _ => self.join().map(drop),
        }
    }

    /// Waits for the queued batches, then writes the footer and moves the file into place.
    pub fn finish(mut self) -> Result<()> {
        self.join()?.finish()
    }

    fn join(&mut self) -> Result<ParquetWriter> {
        drop(self.tx.take());
        let thread = self.thread.take().ok_or_else(|| Error::Io {
            op: "write parquet",
            path: self.location.to_string(),
            source: std::io::Error::other("writer already failed"),
        })?;
        // A panic in the encoder becomes this file's error: re-raising it here could abort a
        // process already unwinding (a drop after another failure) and would skip the
        // caller's clean-up of its staged folders.
        thread.join().unwrap_or_else(|_| {
            Err(Error::Io {
                op: "write parquet",
                path: self.location.to_string(),
                source: std::io::Error::other("the writer thread panicked"),
            })
        })
    }
}

impl Drop for BackgroundParquetWriter {
    fn drop(&mut self) {
        if self.thread.is_some() {
            // Unfinished: the writer is dropped on its thread, uncommitted.
            drop(self.join());
        }
    }
}

fn parquet_error(location: &Location, e: parquet::errors::ParquetError) -> Error {
    Error::Io {
        op: "write parquet",
        path: location.to_string(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// A partition being written: its staging folder and where it will live.
#[derive(Clone, Debug)]
pub struct Staged {
    pub tmp: Location,
    pub target: Location,
}

impl Staged {
    /// Stages `<parent>/<name>` under `<parent>/_tmp.<name>.<tag>`.
    pub fn new(parent: &Location, name: &str, tag: &str) -> Staged {
        Staged {
            tmp: parent.join(&format!("_tmp.{name}.{tag}")),
            target: parent.join(name),
        }
    }

    /// Stages partition `<table>/<name>` of a job's `slice`: the partition itself for the
    /// whole job, else its `slice=i-of-N/` sub-folder (dataset::slice).
    pub fn of_slice(table: &Location, name: &str, slice: Slice, tag: &str) -> Staged {
        if slice == Slice::ALL {
            Staged::new(table, name, tag)
        } else {
            Staged::new(&table.join(name), &slice.folder(), tag)
        }
    }

    /// Writes `batch` as part `p` (`part-NNNNN.parquet`) of this staged partition, typed
    /// encodings and the given data page version: one part per hash partition of a job.
    pub fn write_part(
        &self,
        fs: &FileSystems,
        p: u32,
        batch: &RecordBatch,
        data_page_version: u8,
    ) -> Result<()> {
        let mut writer = self.part_writer(fs, p, batch.schema(), data_page_version)?;
        writer.write(batch)?;
        writer.finish()
    }

    /// The writer of part `p`, for a part written batch by batch (one too large to build as
    /// one batch); [`ParquetWriter::finish`] closes it.
    pub fn part_writer(
        &self,
        fs: &FileSystems,
        p: u32,
        schema: SchemaRef,
        data_page_version: u8,
    ) -> Result<ParquetWriter> {
        // zstd's fastest level: a job's parts are written once a night and read by few.
        let props = typed_properties(&schema).set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("valid level"),
        ));
        let props = with_data_page_version(props, data_page_version).build();
        let location = self.tmp.join(&format!("part-{p:05}.parquet"));
        ParquetWriter::create_staged(fs, &location, schema, props)
    }
}

/// Hash partitions for `bytes` of work when `threads` partitions are held at once in
/// `budget`: at least `min`, and past one a multiple of `threads`, so every round of them
/// is full (a job's round reads every input row, so a half-empty last round costs a whole
/// read for a fraction of the work).
pub fn partitions_in_rounds(bytes: u64, budget: u64, threads: usize, min: u64) -> u32 {
    let threads = threads.max(1) as u64;
    let per_pass = (budget / threads).max(1);
    let n = bytes.div_ceil(per_pass).max(min).max(1);
    let n = if n > 1 {
        n.div_ceil(threads) * threads
    } else {
        n
    };
    n.clamp(1, 4096) as u32
}

/// A tag unique to this run, for staging folder names.
pub fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}.{nanos}", std::process::id())
}

/// Marks every staged folder complete, then moves each into place (replacing what was there).
pub fn commit(fs: &FileSystems, staged: &[Staged]) -> Result<()> {
    for s in staged {
        // Written with [`ParquetWriter::create_staged`] or committed unsynced: durable now,
        // all at once, before anything says they are complete.
        fs.sync_folder(&s.tmp)?;
        fs.write_atomic(&s.tmp.join("_SUCCESS"), b"")?;
    }
    for s in staged {
        fs.delete(&s.target)?;
        fs.rename(&s.tmp, &s.target)?;
    }
    Ok(())
}

/// Removes staged folders after a failure (best effort: they are hidden anyway).
pub fn abandon(fs: &FileSystems, staged: &[Staged]) {
    for s in staged {
        let _ = fs.delete(&s.tmp);
    }
}

/// The `dt=<date>` folders right under `dir`, oldest first, with their dates (none when `dir`
/// is missing). Committed or not: callers that need `_SUCCESS` check it.
pub fn dated_folders(fs: &FileSystems, dir: &Location) -> Result<Vec<(String, Location)>> {
    if !fs.exists(dir)? {
        return Ok(Vec::new());
    }
    let mut dated: Vec<(String, Location)> = fs
        .list(dir, false)?
        .into_iter()
        .filter_map(|e| {
            let date = e.location.file_name()?.strip_prefix("dt=")?.to_string();
            Some((date, e.location))
        })
        .collect();
    dated.sort();
    Ok(dated)
}

/// The Parquet part files of a committed partition folder; none when it has no `_SUCCESS`
/// (a partition that is not done is not read).
pub fn committed_parts(fs: &FileSystems, dir: &Location) -> Result<Vec<FileEntry>> {
    if !fs.exists(&dir.join("_SUCCESS"))? {
        return Ok(Vec::new());
    }
    Ok(fs
        .list(dir, false)?
        .into_iter()
        .filter(|e| {
            e.location
                .file_name()
                .is_some_and(|n| n.ends_with(".parquet"))
        })
        .collect())
}

/// An entity's committed nights up to `upto` (inclusive), oldest first, each with its date
/// and part files: "every night so far", as the jobs that read the history see it. Folders
/// whose name is not a date are not nights; a night with no committed part is left out.
pub fn history_nights(
    fs: &FileSystems,
    root: &Location,
    entity: &str,
    upto: &str,
) -> Result<Vec<(String, Vec<FileEntry>)>> {
    let mut nights = Vec::new();
    for (date, dir) in dated_folders(fs, &root.join(entity))? {
        let is_date = chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").is_ok();
        if is_date && date.as_str() <= upto {
            let files = committed_parts(fs, &dir)?;
            if !files.is_empty() {
                nights.push((date, files));
            }
        }
    }
    Ok(nights)
}

/// The part files of [`history_nights`], oldest night first.
pub fn history(
    fs: &FileSystems,
    root: &Location,
    entity: &str,
    upto: &str,
) -> Result<Vec<FileEntry>> {
    Ok(history_nights(fs, root, entity, upto)?
        .into_iter()
        .flat_map(|(_, files)| files)
        .collect())
}

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
    let bad = |e: String| Error::BadInput {
        path: file.location.to_string(),
        line: 0,
        reason: e,
    };
    let reader = builder.build().map_err(|e| bad(e.to_string()))?;
    for batch in reader {
        f(&batch.map_err(|e| bad(e.to_string()))?)?;
    }
    Ok(())
}

//! Writing Parquet the way every job does: zstd, fixed row groups, typed statistics, the
//! data page version the user chose; one file atomically ([`write_parquet`]), a staged part
//! file ([`ParquetWriter`]), or a part written on a thread of its own
//! ([`BackgroundParquetWriter`]).
//!
//! Invariant: a file is visible under its name only once it is whole (atomic create, or a
//! staged partition's commit, [`super::super::partition`]).

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

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

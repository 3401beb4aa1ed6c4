//! Writing dated output partitions the way every job commits them: Parquet (zstd) part files
//! staged under a hidden `_tmp.*` folder, a `_SUCCESS` marker, then a rename into place.
//!
//! Invariants: a reader listing `<table>/dt=<date>/` sees either the previous complete
//! partition, nothing (for the instant between delete and rename), or the new complete one
//! with its `_SUCCESS`; never half of one. Staged folders of a failed run are removed, and
//! are hidden (`_` prefix) in any case.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

/// Rows per Parquet row group.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Writes one Parquet file atomically (an empty one, with the schema, when `batch` is `None`).
pub fn write_parquet(
    fs: &FileSystems,
    location: &Location,
    schema: SchemaRef,
    batch: Option<&RecordBatch>,
) -> Result<()> {
    write_parquet_with(fs, location, schema, batch, true)
}

/// [`write_parquet`] with a choice of dictionary encoding: worth it for repetitive text,
/// pure hashing cost for columns of distinct ids.
pub fn write_parquet_with(
    fs: &FileSystems,
    location: &Location,
    schema: SchemaRef,
    batch: Option<&RecordBatch>,
    dictionary: bool,
) -> Result<()> {
    let props = WriterProperties::builder()
        .set_dictionary_enabled(dictionary)
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).expect("valid level"),
        ))
        .set_max_row_group_size(ROW_GROUP_ROWS)
        .set_created_by("weibo-etl".into())
        .build();
    let parquet_err = |e: parquet::errors::ParquetError| Error::Io {
        op: "write parquet",
        path: location.to_string(),
        source: std::io::Error::other(e.to_string()),
    };
    let file = fs.create_atomic(location)?;
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).map_err(parquet_err)?;
    if let Some(batch) = batch {
        writer.write(batch).map_err(parquet_err)?;
    }
    writer.into_inner().map_err(parquet_err)?.commit()
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

/// Streams the record batches of one Parquet file (read whole: part files are bounded).
pub fn read_parquet(
    fs: &FileSystems,
    file: &FileEntry,
    f: &mut dyn FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    let bytes = bytes::Bytes::from(fs.read_to_vec(&file.location)?);
    let bad = |e: String| Error::BadInput {
        path: file.location.to_string(),
        line: 0,
        reason: e,
    };
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| bad(e.to_string()))?
        .with_batch_size(8192)
        .build()
        .map_err(|e| bad(e.to_string()))?;
    for batch in reader {
        f(&batch.map_err(|e| bad(e.to_string()))?)?;
    }
    Ok(())
}

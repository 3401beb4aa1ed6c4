//! `clean --inspect`: what `clean` would make of each input file, before a first night. For
//! every file it says what the file is read as, how a CSV header's columns map onto the
//! canonical fields, and the first few records as they would be cleaned (the row, or the
//! reject and its reason). It writes nothing.
//!
//! Invariants: it reads the files with the same readers and cleans with the same
//! [`clean_record`] as a run, so what it shows is what a run does; it reads only the first
//! [`HEAD_BYTES`] of each file, so a crawl of any size is inspected in seconds (a record cut
//! by that limit is not shown).

use serde::Serialize;

use super::columns::SpillBuilder;
use super::{clean_record, Entity};
use crate::error::{Error, Result};
use crate::hdfs::FileSystems;
use crate::raw::{self, FileSummary, Format, Item, MappingFile, ReadOptions};

/// Bytes of each file read: enough for a header and a few records of any crawler.
pub const HEAD_BYTES: u64 = 1 << 20;

/// One file, as `clean` would read it.
#[derive(Debug, Serialize)]
pub struct Inspection {
    pub file: FileSummary,
    /// A CSV header's columns and the canonical field each fills (`None`: not read), and
    /// the entity; empty for JSON, whose records are mapped one by one by their keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity: Option<Entity>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns: raw::canonical::Columns,
    pub records: Vec<Sample>,
}

/// One record as `clean` would take it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Sample {
    /// Kept, as this row (before deduplication).
    Cleaned {
        line: u64,
        entity: Entity,
        row: serde_json::Value,
    },
    Rejected {
        line: u64,
        entity: Option<Entity>,
        reason: &'static str,
        excerpt: String,
    },
}

/// Inspects every file of `inputs`: `samples` records of each, cleaned with `crawl_ms` as
/// the crawl time of records that carry none.
pub fn inspect(
    fs: &FileSystems,
    inputs: &[String],
    format: Option<Format>,
    layouts: &MappingFile,
    crawl_ms: i64,
    samples: usize,
) -> Result<Vec<Inspection>> {
    let options = ReadOptions {
        layouts: Some(layouts),
        format,
        skip_corrupt_files: true,
        head_bytes: Some(HEAD_BYTES),
    };
    let mut out = Vec::new();
    for file in fs.expand_inputs(inputs)? {
        let mut items = Vec::new();
        let summary = raw::read_file(fs, &file, options, &mut |item| {
            if items.len() < samples + 1 && !matches!(item, Item::RepeatedHeader { .. }) {
                items.push(item);
            }
        })?;
        // The last item kept may be the record the byte limit cut.
        let whole = items.len().min(samples);
        let records = items
            .into_iter()
            .take(whole)
            .map(|item| sample(item, crawl_ms))
            .collect::<Result<_>>()?;
        let header = match summary.format {
            Some(_) if summary.skipped.is_none() => first_csv_row(fs, &file, format)?,
            _ => None,
        };
        let location = file.location.to_string();
        let (entity, columns) = header
            .and_then(|names| raw::canonical::header_columns(&names, &location, layouts))
            .map_or((None, Vec::new()), |(e, c)| (Some(e), c));
        out.push(Inspection {
            file: summary,
            entity,
            columns,
            records,
        });
    }
    Ok(out)
}

/// A read item as `clean` would take it.
fn sample(item: Item, crawl_ms: i64) -> Result<Sample> {
    Ok(match item {
        Item::Record {
            line,
            entity,
            record,
        } => match clean_record(entity, &record, crawl_ms) {
            Ok(cleaned) => Sample::Cleaned {
                line,
                entity,
                row: row_json(entity, &cleaned.row)?,
            },
            Err(reason) => Sample::Rejected {
                line,
                entity: Some(entity),
                reason: reason.code(),
                excerpt: super::raw_excerpt(entity, &record),
            },
        },
        Item::Rejected {
            line,
            entity,
            reason,
            excerpt,
        } => Sample::Rejected {
            line,
            entity,
            reason: reason.code(),
            excerpt,
        },
        Item::RepeatedHeader { line, entity } => Sample::Rejected {
            line,
            entity: Some(entity),
            reason: "repeated_header",
            excerpt: String::new(),
        },
    })
}

/// A cleaned row as the JSON of its output columns.
fn row_json(entity: Entity, row: &super::Row<'_>) -> Result<serde_json::Value> {
    let failed = |e: arrow::error::ArrowError| Error::BadInput {
        path: entity.name().into(),
        line: 0,
        reason: format!("a cleaned row as JSON: {e}"),
    };
    let mut builder = SpillBuilder::new(entity);
    builder.append(&[(0, row)]);
    let batch = builder.finish().map_err(failed)?;
    // The spill's trailing sequence column is not part of the row.
    let batch = batch
        .project(&(0..batch.num_columns() - 1).collect::<Vec<_>>())
        .map_err(failed)?;
    let mut writer = arrow::json::ArrayWriter::new(Vec::new());
    writer.write(&batch).map_err(failed)?;
    writer.finish().map_err(failed)?;
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&writer.into_inner()).map_err(|e| Error::BadInput {
            path: entity.name().into(),
            line: 0,
            reason: format!("a cleaned row as JSON: {e}"),
        })?;
    Ok(rows.into_iter().next().unwrap_or_default())
}

/// The first row of a CSV file, as its header would be read; `None` for a file that is not
/// CSV (as `clean` detects it, or as `format` forces it).
fn first_csv_row(
    fs: &FileSystems,
    file: &crate::hdfs::FileEntry,
    format: Option<Format>,
) -> Result<Option<Vec<String>>> {
    let (mut reader, _, _) = raw::open_text(fs, file)?;
    let name = file.location.file_name().unwrap_or_default();
    let sample = std::io::BufRead::fill_buf(&mut reader).map_err(|e| Error::Io {
        op: "read",
        path: file.location.to_string(),
        source: e,
    })?;
    if format.or_else(|| raw::detect_format(&name, sample)) != Some(Format::CanonicalCsv) {
        return Ok(None);
    }
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(std::io::Read::take(reader, HEAD_BYTES));
    let mut record = csv::StringRecord::new();
    match csv.read_record(&mut record) {
        Ok(true) if record.len() > 1 => Ok(Some(
            record
                .iter()
                .map(|f| f.trim().trim_matches('"').to_string())
                .collect(),
        )),
        _ => Ok(None),
    }
}

//! The followers rank carries from one night to the next: every user's count of distinct
//! followers as of a night, and the follows nights (with their stamps) it was counted from.
//! The next night adds the pairs its own nights bring instead of counting every pair again
//! (docs/design/rank.md, "Across nights").
//!
//! ```text
//! <output>/rank/_followers/dt=<date>/part-00000.parquet   uid, followers (sorted by uid)
//! <output>/rank/_followers/dt=<date>/nights.json          [[date, stamp], ...]
//! ```
//!
//! Invariants: a state is committed together with its night's boards (one journal), so a
//! committed board and its state agree; it is written only by a whole run, never by a slice,
//! and never for a night older than the newest state; the two newest are kept. Its bytes are
//! a function of the counts alone: every route that computes them writes the same file.

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::dataset::parquet_io::sorted::SortedMerge;
use crate::dataset::parquet_io::{self, ParquetWriter};
use crate::dataset::partition::{self, Staged};
use crate::dataset::rank::TABLE;
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

/// The states' folder under the rank table.
const FOLDER: &str = "_followers";
const NIGHTS: &str = "nights.json";
/// Rows a batch of the state's file holds.
const BATCH_ROWS: usize = 64 * 1024;

/// Every user's followers as of `date`, counted from the follows nights `covered`.
#[derive(Clone, Debug, PartialEq)]
pub struct Followers {
    pub date: String,
    pub covered: Vec<(String, i64)>,
    pub counts: Counts,
}

/// `(uid, followers)`, by uid, followers above 0: held, or an earlier state's with the
/// followers the nights since add, merged as they are read (never held).
#[derive(Clone, Debug, PartialEq)]
pub enum Counts {
    Held(Vec<(i64, i64)>),
    Carried {
        base: Vec<FileEntry>,
        /// `(uid, followers added)`, by uid.
        added: Vec<(i64, i64)>,
    },
}

impl Counts {
    /// Hands every `(uid, followers)` to `f`, by uid.
    pub fn for_each(
        &self,
        fs: &FileSystems,
        f: &mut dyn FnMut(i64, i64) -> Result<()>,
    ) -> Result<()> {
        match self {
            Counts::Held(counts) => counts.iter().try_for_each(|&(uid, n)| f(uid, n)),
            Counts::Carried { base, added } => {
                let mut merge = SortedMerge::open(fs, base, decode)?;
                let mut more = added.iter().copied().peekable();
                while let Some((uid, n)) = merge.next_row()? {
                    while let Some((a, k)) = more.next_if(|a| a.0 < uid) {
                        f(a, k)?;
                    }
                    match more.next_if(|a| a.0 == uid) {
                        Some((_, plus)) => f(uid, n + plus)?,
                        None => f(uid, n)?,
                    }
                }
                more.try_for_each(|(a, k)| f(a, k))
            }
        }
    }
}

/// The rows of a batch of a state's file read from `path`.
fn decode(batch: &RecordBatch, path: &str) -> Result<Vec<(i64, i64)>> {
    let column = |name: &str| {
        let found = batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt());
        found
            .filter(|c: &&Int64Array| c.null_count() == 0)
            .ok_or_else(|| Error::BadInput {
                path: path.to_string(),
                line: 0,
                reason: format!("a followers state needs an int64 column {name:?} without nulls"),
            })
    };
    let (uid, followers) = (column("uid")?, column("followers")?);
    Ok(uid
        .values()
        .iter()
        .copied()
        .zip(followers.values().iter().copied())
        .collect())
}

/// A committed state, not yet read.
#[derive(Clone, Debug)]
pub struct Saved {
    pub date: String,
    pub covered: Vec<(String, i64)>,
    pub files: Vec<FileEntry>,
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Int64, false),
        Field::new("followers", DataType::Int64, false),
    ]))
}

fn folder(output: &Location) -> Location {
    output.join(TABLE).join(FOLDER)
}

/// The committed states under `output`, oldest first: `(date, folder)`.
fn committed(fs: &FileSystems, output: &Location) -> Result<Vec<(String, Location)>> {
    let mut found = Vec::new();
    for (date, dir) in partition::dated_folders(fs, &folder(output))? {
        if fs.exists(&dir.join("_SUCCESS"))? {
            found.push((date, dir));
        }
    }
    Ok(found)
}

/// The newest committed state of a night before `date`, if any.
pub fn newest_before(fs: &FileSystems, output: &Location, date: &str) -> Result<Option<Saved>> {
    let Some((found, dir)) = committed(fs, output)?
        .into_iter()
        .rfind(|(d, _)| d.as_str() < date)
    else {
        return Ok(None);
    };
    let at = dir.join(NIGHTS);
    let covered = serde_json::from_slice(&fs.read_to_vec(&at)?).map_err(|e| Error::BadInput {
        path: at.to_string(),
        line: 0,
        reason: format!("not a list of nights: {e}"),
    })?;
    Ok(Some(Saved {
        date: found,
        covered,
        files: partition::committed_parts(fs, &dir)?,
    }))
}

/// Whether a state of `date` would be written: none is newer.
pub fn is_newest(fs: &FileSystems, output: &Location, date: &str) -> Result<bool> {
    Ok(committed(fs, output)?
        .last()
        .is_none_or(|(d, _)| d.as_str() <= date))
}

/// Stages `followers` under `output` for the commit of its night's boards.
pub fn stage(
    fs: &FileSystems,
    output: &Location,
    followers: &Followers,
    tag: &str,
    data_page_version: u8,
) -> Result<Staged> {
    let staged = Staged::new(&folder(output), &format!("dt={}", followers.date), tag);
    // Distinct uids and small counts: a dictionary would only cost time.
    let props =
        parquet_io::with_data_page_version(parquet_io::writer_properties(false), data_page_version)
            .build();
    let location = staged.tmp.join("part-00000.parquet");
    let mut writer = ParquetWriter::create_staged(fs, &location, schema(), props)?;
    let mut chunk: Vec<(i64, i64)> = Vec::with_capacity(BATCH_ROWS);
    let mut write = |chunk: &mut Vec<(i64, i64)>| {
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(chunk.iter().map(|c| c.0))),
                Arc::new(Int64Array::from_iter_values(chunk.iter().map(|c| c.1))),
            ],
        )
        .expect("columns of the schema");
        chunk.clear();
        writer.write(&batch)
    };
    followers.counts.for_each(fs, &mut |uid, n| {
        chunk.push((uid, n));
        match chunk.len() == BATCH_ROWS {
            true => write(&mut chunk),
            false => Ok(()),
        }
    })?;
    if !chunk.is_empty() {
        write(&mut chunk)?;
    }
    writer.finish()?;
    let nights = serde_json::to_vec(&followers.covered).map_err(|e| Error::Io {
        op: "encode",
        path: staged.tmp.to_string(),
        source: e.into(),
    })?;
    fs.write_atomic(&staged.tmp.join(NIGHTS), &nights)?;
    Ok(staged)
}

/// Deletes every committed state but the two newest.
pub fn prune(fs: &FileSystems, output: &Location) -> Result<()> {
    let states = committed(fs, output)?;
    for (_, dir) in states.iter().rev().skip(2) {
        fs.delete(dir)?;
    }
    Ok(())
}

//! The merge of a run's items (nights and runs, oldest first) into the parts of a run,
//! streamed, so a fold holds a batch of each input file and a chunk of output whatever the
//! length of the run: the inputs' rows are never held whole (docs/nightly.md, "The history,
//! compacted").
//!
//! Invariants:
//! - a part holds the newest row of each natural key hashing to it, the later item winning;
//!   follows carry the earliest known `followed_at` of their pair;
//! - its rows are in clean's order (by key, follows by [`follows::sort_key`]), which every
//!   input part already has, so the merge of the sorted inputs is the part; users are in their
//!   reading order instead (night by night, each night or run in its own order), so a screen
//!   name that moved resolves to its newest holder;
//! - the writer gets chunks of exactly [`CHUNK`] rows (the last one shorter), so a part's bytes
//!   do not depend on how its inputs were cut: a run merged from runs has the bytes of the
//!   same run merged from its nights.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::compute::{concat_batches, filter_record_batch, interleave_record_batch};
use arrow::datatypes::{DataType, Int64Type, SchemaRef, TimestampMillisecondType};
use parquet::file::metadata::KeyValue;
use rustc_hash::FxHashMap;

use crate::dataset::{follows, parquet_io, schema, Entity};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems};

/// Rows handed to the Parquet writer at once: a multiple of its mini-batch (1,024 rows) and a
/// divisor of its row group, so the pages fall where one batch of every row would put them.
pub(super) const CHUNK: usize = 8192;
/// Rows decoded at once from each input file of a keyed merge.
const READ_ROWS: usize = 1024;

/// Writes part `p` of `parts` of the merge of `items` (oldest first, each its files) into
/// `writer`; returns its rows.
pub(super) fn write_part(
    fs: &FileSystems,
    entity: Entity,
    items: &[&[FileEntry]],
    p: usize,
    parts: usize,
    writer: &mut parquet_io::ParquetWriter,
) -> Result<u64> {
    let mut out = Chunked::new(writer, schema::schema(entity));
    match entity {
        // Users are one part ([`super::build_run`]).
        Entity::Users => users(fs, items, &mut out)?,
        _ => by_key(fs, entity, items, p, parts, &mut out)?,
    }
    out.finish()
}

/// Batches cut into chunks of exactly [`CHUNK`] rows on their way to the writer.
struct Chunked<'a> {
    writer: &'a mut parquet_io::ParquetWriter,
    schema: SchemaRef,
    pending: Vec<RecordBatch>,
    rows: usize,
    written: u64,
}

impl<'a> Chunked<'a> {
    fn new(writer: &'a mut parquet_io::ParquetWriter, schema: SchemaRef) -> Chunked<'a> {
        Chunked {
            writer,
            schema,
            pending: Vec::new(),
            rows: 0,
            written: 0,
        }
    }

    fn push(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.rows += batch.num_rows();
        self.pending.push(batch);
        while self.rows >= CHUNK {
            self.write(CHUNK)?;
        }
        Ok(())
    }

    /// Writes the first `rows` pending rows.
    fn write(&mut self, rows: usize) -> Result<()> {
        let all = concat_batches(&self.schema, self.pending.iter()).map_err(arrow_error)?;
        self.writer.write(&all.slice(0, rows))?;
        self.pending.clear();
        if all.num_rows() > rows {
            self.pending.push(all.slice(rows, all.num_rows() - rows));
        }
        self.rows -= rows;
        self.written += rows as u64;
        Ok(())
    }

    fn finish(mut self) -> Result<u64> {
        if self.rows > 0 {
            self.write(self.rows)?;
        }
        Ok(self.written)
    }
}

/// The users of `items`, the newest row of each uid, in the order they were read. A first
/// read of the uids finds each one's newest row by its place in the reading order; a second
/// read passes those rows on.
fn users(fs: &FileSystems, items: &[&[FileEntry]], out: &mut Chunked) -> Result<()> {
    let files = || items.iter().flat_map(|files| files.iter());
    let mut newest: FxHashMap<i64, u64> = FxHashMap::default();
    let mut at = 0u64;
    for f in files() {
        parquet_io::read_parquet_columns(fs, f, &["uid"], &mut |b| {
            let (uids, _) = keys(Entity::Users, b)?;
            for uid in uids.values() {
                newest.insert(*uid, at);
                at += 1;
            }
            Ok(())
        })?;
    }
    let mut winners: Vec<u64> = newest.into_values().collect();
    winners.sort_unstable();
    let (mut next, mut at) = (0usize, 0u64);
    for f in files() {
        parquet_io::read_parquet(fs, f, &mut |b| {
            let end = at + b.num_rows() as u64;
            let mask: arrow::array::BooleanArray = (at..end)
                .map(|row| {
                    let won = winners.get(next) == Some(&row);
                    next += won as usize;
                    Some(won)
                })
                .collect();
            at = end;
            out.push(filter_record_batch(b, &mask).map_err(arrow_error)?)
        })?;
    }
    Ok(())
}

/// A row's place in a part: its key in clean's order.
type Order = (i64, i64, i64);

/// One input file of a keyed merge, read [`READ_ROWS`] at a time, its rows of part `p` of
/// `parts` only.
struct Cursor {
    batches: parquet_io::Batches,
    file: FileEntry,
    entity: Entity,
    p: usize,
    parts: usize,
    /// The current batch's place among the merge's held batches, and its rows.
    held: usize,
    batch: RecordBatch,
    first: Int64Array,
    second: Option<Int64Array>,
    followed: Option<TimestampMillisecondArray>,
    row: usize,
    /// Rows passed so far: with the file's place, the row's place in the reading order.
    passed: u64,
}

impl Cursor {
    /// A cursor on the first row of the part in `file`; `None` when the file has none.
    fn open(
        fs: &FileSystems,
        file: &FileEntry,
        (entity, p, parts): (Entity, usize, usize),
        held: &mut Vec<RecordBatch>,
    ) -> Result<Option<Cursor>> {
        let builder = parquet_io::open_parquet(fs, file)?.with_batch_size(READ_ROWS);
        let mut cursor = Cursor {
            batches: parquet_io::Batches::new(file, builder)?,
            file: file.clone(),
            entity,
            p,
            parts,
            held: 0,
            batch: RecordBatch::new_empty(schema::schema(entity)),
            first: Int64Array::from(Vec::<i64>::new()),
            second: None,
            followed: None,
            row: 0,
            passed: 0,
        };
        Ok(cursor.load(held)?.then_some(cursor))
    }

    fn order(&self) -> Order {
        let a = self.first.value(self.row);
        let b = self.second.as_ref().map_or(0, |s| s.value(self.row));
        match self.entity {
            Entity::Follows => follows::sort_key(a, b),
            _ => (a, b, 0),
        }
    }

    fn followed_at(&self) -> Option<i64> {
        let t = self.followed.as_ref()?;
        t.is_valid(self.row).then(|| t.value(self.row))
    }

    /// Moves to the next row of the part, loading batches into `held`; false at the end.
    fn advance(&mut self, held: &mut Vec<RecordBatch>) -> Result<bool> {
        self.row += 1;
        self.passed += 1;
        if self.row < self.batch.num_rows() {
            return Ok(true);
        }
        self.load(held)
    }

    /// Loads the next batch with rows of the part into `held`; false at the end of the file.
    fn load(&mut self, held: &mut Vec<RecordBatch>) -> Result<bool> {
        for next in self.batches.by_ref() {
            let batch = rows_of_part(self.entity, &next?, self.p, self.parts)?;
            if batch.num_rows() == 0 {
                continue;
            }
            (self.first, self.second) = keys(self.entity, &batch)?;
            self.followed = batch
                .column_by_name("followed_at")
                .filter(|_| self.entity == Entity::Follows)
                .and_then(|c| c.as_primitive_opt::<TimestampMillisecondType>().cloned());
            self.held = held.len();
            held.push(batch.clone());
            self.batch = batch;
            self.row = 0;
            return Ok(true);
        }
        Ok(false)
    }
}

/// The rows of part `p` of `parts` of `items`, merged by key: each input part is sorted by
/// it, so a heap of one cursor a file gives the part's rows in order, the equal keys of
/// several items side by side.
fn by_key(
    fs: &FileSystems,
    entity: Entity,
    items: &[&[FileEntry]],
    p: usize,
    parts: usize,
    out: &mut Chunked,
) -> Result<()> {
    let mut held: Vec<RecordBatch> = Vec::new();
    let mut cursors: Vec<Cursor> = Vec::new();
    for f in items.iter().flat_map(|files| files.iter()) {
        cursors.extend(Cursor::open(fs, f, (entity, p, parts), &mut held)?);
    }
    let mut heap: BinaryHeap<Reverse<(Order, usize)>> = cursors
        .iter()
        .enumerate()
        .map(|(c, cursor)| Reverse((cursor.order(), c)))
        .collect();
    let mut picks: Vec<(usize, usize)> = Vec::with_capacity(CHUNK);
    let mut times: Vec<Option<i64>> = Vec::with_capacity(CHUNK);
    while let Some(Reverse((order, first))) = heap.pop() {
        // Every row of this key, cursor by cursor: the last read wins, the earliest time is
        // kept.
        let mut winner: Option<((usize, u64), (usize, usize))> = None;
        let mut earliest: Option<i64> = None;
        let mut next = Some(first);
        while let Some(c) = next {
            let cursor = &mut cursors[c];
            // A file may repeat a key in the rows that follow: they join the group.
            loop {
                let read_at = (c, cursor.passed);
                if winner.is_none_or(|(w, _)| read_at > w) {
                    winner = Some((read_at, (cursor.held, cursor.row)));
                }
                if let Some(t) = cursor.followed_at() {
                    earliest = Some(earliest.map_or(t, |e| e.min(t)));
                }
                if !cursor.advance(&mut held)? {
                    break;
                }
                let then = cursor.order();
                if then < order {
                    return Err(Error::BadInput {
                        path: cursor.file.location.to_string(),
                        line: 0,
                        reason: format!(
                            "{} rows out of clean's order: {then:?} after {order:?}",
                            entity.name()
                        ),
                    });
                }
                if then != order {
                    heap.push(Reverse((then, c)));
                    break;
                }
            }
            next = match heap.peek() {
                Some(&Reverse((o, c))) if o == order => {
                    heap.pop();
                    Some(c)
                }
                _ => None,
            };
        }
        let (_, at) = winner.expect("a group has a row");
        picks.push(at);
        times.push(earliest);
        if picks.len() == CHUNK {
            emit(entity, &mut held, &mut cursors, &mut picks, &mut times, out)?;
        }
    }
    emit(entity, &mut held, &mut cursors, &mut picks, &mut times, out)
}

/// Passes the picked rows on, with follows' earliest times, and keeps only the batches the
/// cursors still read.
fn emit(
    entity: Entity,
    held: &mut Vec<RecordBatch>,
    cursors: &mut [Cursor],
    picks: &mut Vec<(usize, usize)>,
    times: &mut Vec<Option<i64>>,
    out: &mut Chunked,
) -> Result<()> {
    if !picks.is_empty() {
        let refs: Vec<&RecordBatch> = held.iter().collect();
        let mut batch = interleave_record_batch(&refs, picks).map_err(arrow_error)?;
        if entity == Entity::Follows {
            let schema = batch.schema();
            let at = schema.index_of("followed_at").map_err(arrow_error)?;
            let tz = match schema.field(at).data_type() {
                DataType::Timestamp(_, tz) => tz.clone(),
                _ => None,
            };
            let earliest = TimestampMillisecondArray::from(std::mem::take(times));
            let mut columns = batch.columns().to_vec();
            columns[at] = std::sync::Arc::new(earliest.with_timezone_opt(tz));
            batch = RecordBatch::try_new(schema, columns).map_err(arrow_error)?;
        }
        out.push(batch)?;
    }
    picks.clear();
    times.clear();
    held.clear();
    for cursor in cursors.iter_mut() {
        cursor.held = held.len();
        held.push(cursor.batch.clone());
    }
    Ok(())
}

/// Whether two run parts hold the same rows in the same order, with the same footer
/// metadata: a part written by another version of the merge may cut its pages elsewhere.
pub(super) fn same_rows(fs: &FileSystems, a: &FileEntry, b: &FileEntry) -> Result<bool> {
    let open = |f: &FileEntry| -> Result<(Option<Vec<KeyValue>>, parquet_io::Batches)> {
        let builder = parquet_io::open_parquet(fs, f)?.with_batch_size(CHUNK);
        let footer = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .cloned();
        Ok((footer, parquet_io::Batches::new(f, builder)?))
    };
    let ((footer_a, rows_a), (footer_b, mut rows_b)) = (open(a)?, open(b)?);
    if footer_a != footer_b {
        return Ok(false);
    }
    // Both read in batches of one size, so equal rows come in equal batches.
    for batch_a in rows_a {
        let Some(batch_b) = rows_b.next() else {
            return Ok(false);
        };
        if batch_a? != batch_b? {
            return Ok(false);
        }
    }
    Ok(rows_b.next().is_none())
}

/// The natural key of each row, as one or two id columns.
fn keys(entity: Entity, b: &RecordBatch) -> Result<(Int64Array, Option<Int64Array>)> {
    let cols = schema::key_columns(entity);
    let column = |name: &str| -> Result<Int64Array> {
        b.column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .cloned()
            .ok_or_else(|| Error::BadInput {
                path: entity.name().into(),
                line: 0,
                reason: format!("no Int64 column {name}"),
            })
    };
    let first = column(cols[0])?;
    let second = cols.get(1).map(|c| column(c)).transpose()?;
    Ok((first, second))
}

/// The rows of `b` whose key falls in part `p` of `parts` (pair hash, as clean cuts parts).
fn rows_of_part(entity: Entity, b: &RecordBatch, p: usize, parts: usize) -> Result<RecordBatch> {
    if parts == 1 {
        return Ok(b.clone());
    }
    let (first, second) = keys(entity, b)?;
    let mask: arrow::array::BooleanArray = (0..b.num_rows())
        .map(|r| {
            let key = match &second {
                Some(s) => follows::canonical_pair(first.value(r), s.value(r)),
                None => (first.value(r), 0),
            };
            Some(follows::pair_part(key, parts) == p)
        })
        .collect();
    filter_record_batch(b, &mask).map_err(arrow_error)
}

fn arrow_error<E: std::fmt::Display>(e: E) -> Error {
    Error::Io {
        op: "merge a history run",
        path: "arrow".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

//! Cleaned rows into record batches of the cleaned tables' schemas
//! ([`crate::dataset::schema`]), for the spill and the Parquet writers.
//!
//! Invariants: spilled batches carry one extra trailing column, [`SEQ_COLUMN`], the
//! record's position in the input (file order, then line), which breaks ties between
//! duplicates deterministically and is dropped before Parquet is written.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Int64Builder, ListBuilder, StringBuilder,
    TimestampMillisecondBuilder, UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::Row;
use crate::dataset::schema::schema;
use crate::dataset::Entity;

/// Name of the input-order column present only in spilled batches.
pub const SEQ_COLUMN: &str = "_seq";

/// A record's input position as [`SEQ_COLUMN`] holds it: its file's index in the input, then
/// its line (lines below 2^40).
pub fn seq(file_index: usize, line: u64) -> u64 {
    ((file_index as u64) << 40) | line
}

/// The input file index of a [`seq`].
pub fn file_of(seq: u64) -> usize {
    (seq >> 40) as usize
}

/// The spill schema: the output schema plus [`SEQ_COLUMN`].
pub fn spill_schema(entity: Entity) -> SchemaRef {
    let mut fields: Vec<Field> = schema(entity)
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(SEQ_COLUMN, DataType::UInt64, false));
    Arc::new(Schema::new(fields))
}

/// The builders of one batch's columns, and the bytes of values appended to them.
struct Cols {
    cols: Vec<Builder>,
    /// 8 per number, 1 per flag, text by its length plus a 4-byte offset.
    bytes: usize,
}

enum Builder {
    I64(Int64Builder),
    Str(StringBuilder),
    Bool(BooleanBuilder),
    Ts(TimestampMillisecondBuilder),
    List(ListBuilder<StringBuilder>),
}

impl Cols {
    /// `text_bytes` has a slot per spill column; the zip below lines up because
    /// [`SEQ_COLUMN`], the one column without a builder, is the last.
    fn new(schema: &Schema, capacity: usize, text_bytes: &[usize]) -> Self {
        let cols = schema
            .fields()
            .iter()
            .filter(|f| f.name() != SEQ_COLUMN)
            .zip(text_bytes)
            .map(|(f, &bytes)| match f.data_type() {
                DataType::Int64 => Builder::I64(Int64Builder::with_capacity(capacity)),
                DataType::Utf8 => Builder::Str(StringBuilder::with_capacity(capacity, bytes)),
                DataType::Boolean => Builder::Bool(BooleanBuilder::with_capacity(capacity)),
                DataType::Timestamp(..) => Builder::Ts(
                    TimestampMillisecondBuilder::with_capacity(capacity).with_timezone("UTC"),
                ),
                DataType::List(_) => Builder::List(ListBuilder::with_capacity(
                    StringBuilder::with_capacity(capacity, bytes),
                    capacity,
                )),
                other => unreachable!("no builder for {other}"),
            })
            .collect();
        Cols { cols, bytes: 0 }
    }

    fn finish(self) -> Vec<ArrayRef> {
        self.cols
            .into_iter()
            .map(|b| -> ArrayRef {
                match b {
                    Builder::I64(mut b) => Arc::new(b.finish()),
                    Builder::Str(mut b) => Arc::new(b.finish()),
                    Builder::Bool(mut b) => Arc::new(b.finish()),
                    Builder::Ts(mut b) => Arc::new(b.finish()),
                    Builder::List(mut b) => Arc::new(b.finish()),
                }
            })
            .collect()
    }

    // Where [`visit`] puts a row's values, column by column.
    fn i64(&mut self, i: usize, v: Option<i64>) {
        self.bytes += 8;
        if let Builder::I64(b) = &mut self.cols[i] {
            b.append_option(v);
        }
    }
    fn ts(&mut self, i: usize, v: Option<i64>) {
        self.bytes += 8;
        if let Builder::Ts(b) = &mut self.cols[i] {
            b.append_option(v);
        }
    }
    fn str(&mut self, i: usize, v: Option<&str>) {
        self.bytes += 4 + v.map_or(0, str::len);
        if let Builder::Str(b) = &mut self.cols[i] {
            b.append_option(v);
        }
    }
    fn bool(&mut self, i: usize, v: Option<bool>) {
        self.bytes += 1;
        if let Builder::Bool(b) = &mut self.cols[i] {
            b.append_option(v);
        }
    }
    fn list(&mut self, i: usize, v: &[Cow<'_, str>]) {
        self.bytes += 4 + v.iter().map(|item| 4 + item.len()).sum::<usize>();
        if let Builder::List(b) = &mut self.cols[i] {
            for item in v {
                b.values().append_value(item);
            }
            b.append(true);
        }
    }
}

/// A spill batch in the making: rows of one entity appended as they are cleaned, any number
/// of times, then finished into one batch (output columns + [`SEQ_COLUMN`]). Appending to
/// builders that live across chunks, rather than building a batch per chunk and
/// concatenating them, costs per row only, however thin the chunks spread.
pub struct SpillBuilder {
    schema: SchemaRef,
    cols: Cols,
    seq: UInt64Builder,
}

impl SpillBuilder {
    pub fn new(entity: Entity) -> Self {
        let schema = spill_schema(entity);
        let text = vec![0; schema.fields().len()];
        SpillBuilder {
            cols: Cols::new(&schema, 0, &text),
            seq: UInt64Builder::new(),
            schema,
        }
    }

    /// Appends rows, each with its input position.
    pub fn append(&mut self, rows: &[(u64, &Row<'_>)]) {
        for (seq, row) in rows {
            visit(row, &mut self.cols);
            self.seq.append_value(*seq);
        }
    }

    /// Bytes of values appended since the last [`finish`](Self::finish).
    pub fn bytes(&self) -> usize {
        self.cols.bytes + 8 * self.seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seq.is_empty()
    }

    /// The rows appended so far as one batch. The builder starts again empty, its buffers
    /// sized like this batch's and a quarter more, so the next one's (about as large: a
    /// slot finishes at a fixed size) are not doubled their way up.
    pub fn finish(&mut self) -> arrow::error::Result<RecordBatch> {
        let rows = self.seq.len();
        let headroom = |n: usize| n + n / 4;
        let mut text = vec![0; self.schema.fields().len()];
        for (bytes, b) in text.iter_mut().zip(&self.cols.cols) {
            *bytes = headroom(match b {
                Builder::Str(b) => b.values_slice().len(),
                Builder::List(b) => b.values_ref().values_slice().len(),
                _ => 0,
            });
        }
        let next = Cols::new(&self.schema, headroom(rows), &text);
        let mut columns = std::mem::replace(&mut self.cols, next).finish();
        columns.push(Arc::new(self.seq.finish()));
        self.seq = UInt64Builder::with_capacity(headroom(rows));
        RecordBatch::try_new(self.schema.clone(), columns)
    }
}

/// Hands a row's values to `c` in the column order of [`schema`].
fn visit(row: &Row<'_>, c: &mut Cols) {
    match row {
        Row::User(u) => {
            c.i64(0, Some(u.uid));
            c.str(1, u.screen_name.as_deref());
            c.str(2, u.gender);
            c.str(3, u.province.as_deref());
            c.str(4, u.city.as_deref());
            c.str(5, u.location.as_deref());
            c.str(6, u.description.as_deref());
            c.bool(7, u.verified);
            c.i64(8, u.verified_type);
            c.i64(9, u.followers_count);
            c.i64(10, u.follow_count);
            c.i64(11, u.statuses_count);
            c.bool(12, Some(u.counts_capped));
            c.ts(13, u.created_at);
            c.ts(14, Some(u.crawl_time));
        }
        Row::Post(p) => {
            c.i64(0, Some(p.mid));
            c.str(1, p.bid.as_deref());
            c.i64(2, p.uid);
            c.ts(3, Some(p.created_at));
            c.str(4, Some(&p.text));
            c.str(5, p.source.as_deref());
            c.i64(6, p.reposts_count);
            c.i64(7, p.comments_count);
            c.i64(8, p.attitudes_count);
            c.bool(9, Some(p.counts_capped));
            c.list(10, &p.topics);
            c.list(11, &p.at_users);
            c.list(12, &p.pics);
            c.i64(13, p.retweet_mid);
            c.bool(14, Some(p.is_deleted));
            c.ts(15, Some(p.crawl_time));
        }
        Row::Follow(f) => {
            c.i64(0, Some(f.follower));
            c.i64(1, Some(f.followee));
            c.ts(2, f.followed_at);
            c.ts(3, Some(f.crawl_time));
        }
        Row::Comment(m) => {
            c.i64(0, Some(m.cid));
            c.i64(1, m.mid);
            c.i64(2, m.uid);
            c.ts(3, Some(m.created_at));
            c.str(4, Some(&m.text));
            c.i64(5, m.like_count);
            c.i64(6, m.reply_to_cid);
            c.bool(7, Some(m.is_deleted));
            c.ts(8, Some(m.crawl_time));
        }
        Row::Repost(r) => {
            c.i64(0, Some(r.mid));
            c.i64(1, Some(r.uid));
            c.i64(2, Some(r.retweet_mid));
            c.ts(3, Some(r.created_at));
            c.str(4, Some(&r.text));
            c.ts(5, Some(r.crawl_time));
        }
    }
}

/// Rows numbered by their position, as pass 1 numbers the rows it spills.
#[cfg(test)]
pub(crate) fn numbered<'r, 'a>(rows: &'r [Row<'a>]) -> Vec<(u64, &'r Row<'a>)> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| (i as u64, r))
        .collect()
}

#[cfg(test)]
mod tests {
    use arrow::array::AsArray;
    use arrow::datatypes::{Int64Type, TimestampMillisecondType, UInt64Type};

    use super::*;
    use crate::clean::{Follow, Repost};

    fn follows(range: std::ops::Range<i64>) -> Vec<Row<'static>> {
        range
            .map(|i| {
                Row::Follow(Follow {
                    follower: i,
                    followee: 1000 + i,
                    followed_at: (i % 3 != 0).then_some(i * 10),
                    crawl_time: 7,
                })
            })
            .collect()
    }

    #[test]
    fn a_builder_finishes_what_was_appended_since_its_last_finish() {
        let rows = follows(0..10);
        let seq = numbered(&rows);
        let mut b = SpillBuilder::new(Entity::Follows);
        assert!(b.is_empty());
        b.append(&seq[0..3]);
        b.append(&seq[3..4]);
        b.append(&seq[4..7]);
        assert_eq!(b.bytes(), 7 * 5 * 8);
        let first = b.finish().unwrap();
        assert!(b.is_empty());
        assert_eq!(b.bytes(), 0);
        b.append(&seq[7..10]);
        let second = b.finish().unwrap();

        assert_eq!(first.schema(), spill_schema(Entity::Follows));
        assert_eq!(first.num_rows(), 7);
        assert_eq!(second.num_rows(), 3);
        let ids = |batch: &RecordBatch, col: usize| -> Vec<i64> {
            batch
                .column(col)
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        };
        assert_eq!(ids(&first, 0), (0..7).collect::<Vec<_>>());
        assert_eq!(ids(&second, 1), vec![1007, 1008, 1009]);
        let at: Vec<Option<i64>> = first
            .column(2)
            .as_primitive::<TimestampMillisecondType>()
            .iter()
            .collect();
        assert_eq!(
            at,
            vec![None, Some(10), Some(20), None, Some(40), Some(50), None]
        );
        let seqs = second.column(4).as_primitive::<UInt64Type>();
        assert_eq!(seqs.values().to_vec(), vec![7, 8, 9]);
    }

    #[test]
    fn text_columns_survive_a_finish_and_count_their_bytes() {
        let rows: Vec<Row> = ["a", "", "长文本"]
            .iter()
            .enumerate()
            .map(|(i, text)| {
                Row::Repost(Repost {
                    mid: i as i64,
                    uid: 1,
                    retweet_mid: 2,
                    created_at: 3,
                    text: Cow::Borrowed(text),
                    crawl_time: 4,
                })
            })
            .collect();
        let seq = numbered(&rows);
        let mut b = SpillBuilder::new(Entity::Reposts);
        b.append(&seq[..2]);
        // Five numbers of 8 bytes, the text with a 4-byte offset, and the sequence number.
        assert_eq!(b.bytes(), 2 * (5 * 8 + 4 + 8) + 1);
        let first = b.finish().unwrap();
        b.append(&seq[2..]);
        let second = b.finish().unwrap();
        let texts = |batch: &RecordBatch| -> Vec<String> {
            batch
                .column(4)
                .as_string::<i32>()
                .iter()
                .map(|s| s.unwrap().to_string())
                .collect()
        };
        assert_eq!(texts(&first), vec!["a", ""]);
        assert_eq!(texts(&second), vec!["长文本"]);
    }
}

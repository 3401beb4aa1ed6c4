//! Cleaned rows into record batches of the cleaned tables' schemas
//! ([`crate::dataset::schema`]), for the spill and the Parquet writers.
//!
//! Invariants: spilled batches carry one extra trailing column, [`SEQ_COLUMN`], the
//! record's position in the input (file order, then line), which breaks ties between
//! duplicates deterministically and is dropped before Parquet is written.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Int64Builder, ListBuilder, StringBuilder,
    TimestampMillisecondBuilder, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::Row;
use crate::dataset::schema::schema;
use crate::dataset::Entity;

/// Name of the input-order column present only in spilled batches.
pub const SEQ_COLUMN: &str = "_seq";

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

struct Cols {
    cols: Vec<Builder>,
}

enum Builder {
    I64(Int64Builder),
    Str(StringBuilder),
    Bool(BooleanBuilder),
    Ts(TimestampMillisecondBuilder),
    List(ListBuilder<StringBuilder>),
}

/// Where [`visit`] puts a row's values, column by column.
trait ColumnSink {
    fn i64(&mut self, i: usize, v: Option<i64>);
    fn ts(&mut self, i: usize, v: Option<i64>);
    fn str(&mut self, i: usize, v: Option<&str>);
    fn bool(&mut self, i: usize, v: Option<bool>);
    fn list(&mut self, i: usize, v: &[Cow<'_, str>]);
}

/// Bytes of text per column: sizing the builders up front spares the copies of a string
/// buffer doubling its way to a megabyte.
struct TextBytes(Vec<usize>);

impl ColumnSink for TextBytes {
    fn i64(&mut self, _: usize, _: Option<i64>) {}
    fn ts(&mut self, _: usize, _: Option<i64>) {}
    fn bool(&mut self, _: usize, _: Option<bool>) {}
    fn str(&mut self, i: usize, v: Option<&str>) {
        self.0[i] += v.map_or(0, str::len);
    }
    fn list(&mut self, i: usize, v: &[Cow<'_, str>]) {
        self.0[i] += v.iter().map(|item| item.len()).sum::<usize>();
    }
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
        Cols { cols }
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
}

impl ColumnSink for Cols {
    fn i64(&mut self, i: usize, v: Option<i64>) {
        if let Builder::I64(b) = &mut self.cols[i] {
            b.append_option(v);
        }
    }
    fn ts(&mut self, i: usize, v: Option<i64>) {
        if let Builder::Ts(b) = &mut self.cols[i] {
            b.append_option(v);
        }
    }
    fn str(&mut self, i: usize, v: Option<&str>) {
        if let Builder::Str(b) = &mut self.cols[i] {
            b.append_option(v);
        }
    }
    fn bool(&mut self, i: usize, v: Option<bool>) {
        if let Builder::Bool(b) = &mut self.cols[i] {
            b.append_option(v);
        }
    }
    fn list(&mut self, i: usize, v: &[Cow<'_, str>]) {
        if let Builder::List(b) = &mut self.cols[i] {
            for item in v {
                b.values().append_value(item);
            }
            b.append(true);
        }
    }
}

/// Builds a spill batch (output columns + [`SEQ_COLUMN`]) from rows of one entity.
pub fn spill_batch(entity: Entity, rows: &[(u64, &Row<'_>)]) -> arrow::error::Result<RecordBatch> {
    let schema = spill_schema(entity);
    let mut text = TextBytes(vec![0; schema.fields().len()]);
    for (_, row) in rows {
        visit(row, &mut text);
    }
    let mut c = Cols::new(&schema, rows.len(), &text.0);
    for (_, row) in rows {
        visit(row, &mut c);
    }
    let mut columns = c.finish();
    columns.push(Arc::new(UInt64Array::from_iter_values(
        rows.iter().map(|(seq, _)| *seq),
    )));
    RecordBatch::try_new(schema, columns)
}

/// Hands a row's values to `c` in the column order of [`schema`].
fn visit(row: &Row<'_>, c: &mut impl ColumnSink) {
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
            c.i64(1, Some(m.mid));
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

//! Where a run's results go: one interface that every output takes, so `friends`,
//! `friends --load` and the demo run the same path.
//!
//! Pairs come in sorted runs: a run is opened, filled batch by batch in `(uid_a, uid_b)`
//! order and finished by the thread that found it, and several threads fill runs at once
//! (different runs hold different pairs). Friend counts come in parts the same way, each uid
//! in exactly one part, each part sorted by uid. Batches are Arrow record batches of
//! [`friends_schema`] and [`counts_schema`], so a Parquet writer takes them as they are.
//!
//! Invariants: a sink sees every pair and every count exactly once; a run or part that is
//! not finished (an error on the way) must not count as written, which is the sink's own
//! commit to make ([`super::FriendsWriter::commit`]).

use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::SchemaRef;
use rayon::prelude::*;

use super::codes::{Coder, NO_TIME};
use super::join::Pairs;
use super::Friends;
use crate::dataset::friends::{count_columns, friends_schema, pair_columns};
use crate::error::{Error, Result};

/// Receives a run's results as they are found (see the module's doc).
pub trait FriendsSink: Sync {
    /// Opens sorted run `run` of friend pairs.
    fn open_pairs(&self, run: usize) -> Result<Box<dyn BatchWriter + '_>>;
    /// Opens part `part` of the per-user friend counts.
    fn open_counts(&self, part: usize) -> Result<Box<dyn BatchWriter + '_>>;
}

/// One run of pairs, or one part of the counts, being written.
pub trait BatchWriter {
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;
    /// The run is complete.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// Rows per batch handed to a [`FriendsSink`].
pub(crate) const SINK_BATCH: usize = 64 * 1024;

/// Writes `(pair, since)` rows, the lists laid end to end sorted by pair, as run `run`.
pub(crate) fn write_run(
    sink: &dyn FriendsSink,
    run: usize,
    coder: &Coder,
    lists: &[&[(u64, i64)]],
) -> Result<()> {
    let mut writer = sink.open_pairs(run)?;
    let schema = friends_schema();
    for list in lists {
        for chunk in list.chunks(SINK_BATCH) {
            writer.write(&pair_batch(coder, &schema, chunk)?)?;
        }
    }
    writer.finish()
}

/// Runs a sorted result is cut into when it is written from one list of pairs: two files
/// encode at once, and the same input gives the same files on any machine.
pub(crate) const PAIR_RUNS: usize = 2;

/// Writes pairs whose lists laid end to end are sorted as up to [`PAIR_RUNS`] runs of equal
/// rows (cut at the same rows whatever the lists), in parallel, numbered from `first`; a
/// result of one batch is one run. Returns how many runs were written.
pub(crate) fn write_runs(
    sink: &dyn FriendsSink,
    first: usize,
    coder: &Coder,
    pairs: &Pairs,
) -> Result<usize> {
    let total = pairs.len();
    if total == 0 {
        return Ok(0);
    }
    let runs = total.div_ceil(SINK_BATCH).clamp(1, PAIR_RUNS);
    let per_run = total.div_ceil(runs);
    let mut cut: Vec<Vec<&[(u64, i64)]>> = vec![Vec::new(); runs];
    let mut at = 0;
    for list in &pairs.0 {
        let mut rest = &list[..];
        while !rest.is_empty() {
            let run = at / per_run;
            let take = rest.len().min((run + 1) * per_run - at);
            cut[run].push(&rest[..take]);
            rest = &rest[take..];
            at += take;
        }
    }
    cut.par_iter()
        .enumerate()
        .map(|(i, lists)| write_run(sink, first + i, coder, lists))
        .collect::<Result<Vec<()>>>()?;
    Ok(runs)
}

/// Users and their friend counts as a batch of [`counts_schema`].
pub(crate) fn count_batch(
    schema: &SchemaRef,
    uids: Vec<i64>,
    friends: Vec<i64>,
) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(uids)),
        Arc::new(Int64Array::from(friends)),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(batch_error)
}

/// `(pair, since)` rows as a batch of [`friends_schema`]: each column built once, in place
/// (the unknown times marked in a validity bitmap, not through `Option`s).
pub(crate) fn pair_batch(
    coder: &Coder,
    schema: &SchemaRef,
    chunk: &[(u64, i64)],
) -> Result<RecordBatch> {
    let mut a: Vec<i64> = chunk.iter().map(|(p, _)| (p >> 32) as i64).collect();
    let mut b: Vec<i64> = chunk
        .iter()
        .map(|(p, _)| (p & 0xffff_ffff) as i64)
        .collect();
    coder.decode_all(&mut a);
    coder.decode_all(&mut b);
    let known = arrow::buffer::BooleanBuffer::collect_bool(chunk.len(), |i| chunk[i].1 != NO_TIME);
    let since: Vec<i64> = chunk.iter().map(|&(_, t)| t).collect();
    let since = TimestampMillisecondArray::new(
        since.into(),
        Some(arrow::buffer::NullBuffer::new(known)).filter(|n| n.null_count() > 0),
    )
    .with_timezone("UTC");
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(a)),
        Arc::new(Int64Array::from(b)),
        Arc::new(since),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(batch_error)
}

pub(crate) fn batch_error(e: arrow::error::ArrowError) -> Error {
    Error::Io {
        op: "build friends batch",
        path: "-".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Collects a run's results in memory, for [`super::run`].
#[derive(Default)]
pub(crate) struct Collect(pub(crate) Mutex<Friends>);

/// A run or part collected on its thread, added to the result when finished.
struct Collected<'a> {
    into: &'a Mutex<Friends>,
    part: Friends,
    counts: bool,
}

impl BatchWriter for Collected<'_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if !self.counts {
            let (a, b, since) = pair_columns(batch);
            self.part.uid_a.extend_from_slice(a.values());
            self.part.uid_b.extend_from_slice(b.values());
            self.part.since.extend(since.iter());
        } else {
            let (uids, friends) = count_columns(batch);
            self.part.counts.extend(
                uids.values()
                    .iter()
                    .zip(friends.values())
                    .map(|(u, n)| (*u, *n as u64)),
            );
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let mut all = self.into.lock().unwrap_or_else(|e| e.into_inner());
        all.uid_a.extend(self.part.uid_a);
        all.uid_b.extend(self.part.uid_b);
        all.since.extend(self.part.since);
        all.counts.extend(self.part.counts);
        Ok(())
    }
}

impl FriendsSink for Collect {
    fn open_pairs(&self, _run: usize) -> Result<Box<dyn BatchWriter + '_>> {
        Ok(Box::new(Collected {
            into: &self.0,
            part: Friends::default(),
            counts: false,
        }))
    }

    fn open_counts(&self, _part: usize) -> Result<Box<dyn BatchWriter + '_>> {
        Ok(Box::new(Collected {
            into: &self.0,
            part: Friends::default(),
            counts: true,
        }))
    }
}

//! A night's friendships from those of an earlier night and the follows nights since
//! (docs/design/friends.md, "Across nights"), in place of a join over every night.
//!
//! Follows only accumulate, so the pairs of the nights since can only be new pairs, or pairs
//! whose `since` moves: the pairs the new nights' edges touch. Their directions are taken
//! from the new nights (held), then from one pass over the older nights' edges (looked up,
//! not held); the touched pairs that are mutual replace or join the base's rows in one merge
//! of sorted streams, and each user's count moves by the pairs it gained. Memory holds the
//! new nights' pairs and a batch of each file; the history is read, never held.
//!
//! Invariants: the output has the rows a full join over the same nights gives (the nightly
//! tests compare them after every night); a base is taken only when every night it covered
//! is still there with its stamp and no night was cleaned again (a night cleaned again may
//! have lost edges), else the full join runs. Every whole run over a follows root records
//! the nights it covered, `_friends.json` in its friends partition, for the next night.

use arrow::array::{Int64Array, RecordBatch, TimestampMillisecondArray};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::input::Input;
use super::sink::{batch_error, FriendsSink, SINK_BATCH};
use super::{FriendsOptions, FriendsStats, Slice};
use crate::dataset::friends::{
    counts_schema, decode_counts, decode_pairs, friends_schema, PairRow, COUNTS_TABLE, PAIRS_TABLE,
};
use crate::dataset::history::{self, Taken};
use crate::dataset::parquet_io::sorted::SortedMerge;
use crate::dataset::{parquet_io, partition};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

/// The record beside a friends partition's parts.
pub(super) const RECORD: &str = "_friends.json";

/// Bytes a follow row of the new nights may cost in the map of touched pairs.
const BYTES_PER_NEW_ROW: u64 = 64;

/// What a whole run over a follows root records in its partition.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Record {
    /// The follows nights it covered, with their stamps ([`history::covered`]).
    pub follows: Vec<(String, i64)>,
    /// Its distinct directed edges and self-edges (so a run carried from it counts them).
    pub distinct_edges: u64,
    pub self_edges: u64,
}

/// A friends run over a follows root: its history up to the date, and the earlier night it
/// can continue from, if any.
pub(super) struct Plan {
    pub taken: Vec<Taken>,
    pub base: Option<Base>,
}

/// The earlier night a run continues from.
pub(super) struct Base {
    pub date: String,
    record: Record,
    /// Which items of the plan's history it has not seen.
    new: Vec<bool>,
    pairs: Vec<FileEntry>,
    counts: Vec<FileEntry>,
}

impl Plan {
    /// The plan of a whole run of `inputs` dated `date`, when they are one follows root (a
    /// folder of `dt=` nights); `None` for other inputs and slices (they record nothing).
    pub(super) fn of(
        fs: &FileSystems,
        inputs: &[String],
        output: &Location,
        date: &str,
        options: &FriendsOptions,
    ) -> Result<Option<Plan>> {
        let [input] = inputs else { return Ok(None) };
        if options.slice != Slice::ALL || crate::hdfs::has_glob(input) {
            return Ok(None);
        }
        let root = fs.parse(input)?;
        let folder = fs.status(&root)?.is_some_and(|e| e.is_dir);
        if !folder || partition::dated_folders(fs, &root)?.is_empty() {
            return Ok(None);
        }
        let taken = history::take_history(fs, &root, date)?;
        let base = Base::find(fs, &taken, output, date, options.memory_budget)?;
        Ok(Some(Plan { taken, base }))
    }

    /// The record of a run over this plan's nights.
    pub(super) fn record(&self, stats: &FriendsStats) -> Record {
        Record {
            follows: history::covered(&self.taken),
            distinct_edges: stats.distinct_edges,
            self_edges: stats.self_edges,
        }
    }
}

impl Base {
    /// The newest committed friends partition before `date` that recorded its nights, when
    /// the history still holds them all unchanged, no night was cleaned again since, and the
    /// new nights' edges fit `budget`.
    fn find(
        fs: &FileSystems,
        taken: &[Taken],
        output: &Location,
        date: &str,
        budget: u64,
    ) -> Result<Option<Base>> {
        let found = partition::newest_recorded(fs, &output.join(PAIRS_TABLE), date, RECORD)?;
        let Some((then, dir)) = found else {
            log::debug!("friends: no earlier partition recorded its nights: the full join");
            return Ok(None);
        };
        let pairs = partition::committed_parts(fs, &dir)?;
        let counts_dir = output.join(COUNTS_TABLE).join(&format!("dt={then}"));
        let counts = partition::committed_parts(fs, &counts_dir)?;
        if pairs.is_empty() || counts.is_empty() {
            log::debug!("friends: the partition of {then} lacks its parts: the full join");
            return Ok(None);
        }
        let at = dir.join(RECORD);
        let record: Record =
            serde_json::from_slice(&fs.read_to_vec(&at)?).map_err(|e| Error::BadInput {
                path: at.to_string(),
                line: 0,
                reason: format!("not a friends record: {e}"),
            })?;
        let Some(new) = history::new_items(taken, &record.follows) else {
            log::debug!("friends: the history no longer holds {then}'s nights: the full join");
            return Ok(None);
        };
        // A night the base saw, cleaned again since, may have lost edges: the full join.
        let seen: std::collections::BTreeSet<&str> =
            record.follows.iter().map(|(d, _)| d.as_str()).collect();
        let again = taken
            .iter()
            .zip(&new)
            .any(|(t, new)| *new && t.nights.iter().any(|n| seen.contains(n.as_str())));
        let new_rows = parquet_io::parquet_rows(
            fs,
            taken
                .iter()
                .zip(&new)
                .filter(|(_, new)| **new)
                .flat_map(|(t, _)| &t.files),
        )?;
        if again || new_rows.saturating_mul(BYTES_PER_NEW_ROW) > budget {
            log::debug!(
                "friends: a night {then} saw was cleaned again ({again}), or {new_rows} new \
                 rows over the budget: the full join"
            );
            return Ok(None);
        }
        Ok(Some(Base {
            date: then,
            record,
            new,
            pairs,
            counts,
        }))
    }
}

/// One direction of a touched pair: whether the new and the older nights have it, and its
/// earliest known time.
#[derive(Clone, Copy, Default)]
struct Direction {
    new: bool,
    old: bool,
    earliest: Option<i64>,
}

impl Direction {
    fn add(&mut self, time: Option<i64>) {
        self.earliest = match (self.earliest, time) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The pairs the new nights touch, `(small id, large id)` → the direction where the small id
/// follows the large one, and the reverse.
type Touched = FxHashMap<(i64, i64), [Direction; 2]>;

/// Computes the friendships of `plan`'s nights from its base into `sink`.
pub(super) fn run(
    fs: &FileSystems,
    plan: &Plan,
    base: &Base,
    sink: &dyn FriendsSink,
) -> Result<FriendsStats> {
    let files: Vec<FileEntry> = plan.taken.iter().flat_map(|t| t.files.clone()).collect();
    let input = Input::open(fs, &files)?;
    let mut item_of = Vec::new();
    for (i, t) in plan.taken.iter().enumerate() {
        item_of.extend(std::iter::repeat_n(i, t.files.len()));
    }
    let mut stats = FriendsStats {
        edges_read: input.metas.iter().map(|m| m.rows as u64).sum(),
        self_edges: base.record.self_edges,
        partitions: 1,
        carried_from: Some(base.date.clone()),
        ..FriendsStats::default()
    };
    // The new nights' edges, held by pair; then the older nights', looked up.
    let mut touched = Touched::default();
    for old in [false, true] {
        for (file, &item) in item_of.iter().enumerate() {
            if base.new[item] == old {
                continue;
            }
            input.columns(file, None, true, &mut |c| {
                for i in 0..c.len() {
                    let (from, to) = (c.follower.value(i), c.followee.value(i));
                    if from == to {
                        stats.self_edges += !old as u64;
                        continue;
                    }
                    let (key, d) = if from < to {
                        ((from, to), 0)
                    } else {
                        ((to, from), 1)
                    };
                    let dirs = match old {
                        false => touched.entry(key).or_default(),
                        true => match touched.get_mut(&key) {
                            Some(dirs) => dirs,
                            None => continue,
                        },
                    };
                    let dir = &mut dirs[d];
                    if old {
                        dir.old = true;
                    } else {
                        dir.new = true;
                    }
                    dir.add(c.time(i));
                }
                Ok(())
            })?;
        }
    }
    let added_edges: u64 = touched
        .values()
        .flat_map(|dirs| dirs.iter())
        .filter(|d| d.new && !d.old)
        .count() as u64;
    stats.distinct_edges = base.record.distinct_edges + added_edges;
    stats.duplicate_edges =
        (stats.edges_read).saturating_sub(stats.distinct_edges + stats.self_edges);
    let mut rows: Vec<PairRow> = touched
        .into_iter()
        .filter(|(_, [f, r])| (f.new || f.old) && (r.new || r.old))
        .map(|(key, [f, r])| (key, f.earliest.zip(r.earliest).map(|(a, b)| a.max(b))))
        .collect();
    rows.sort_unstable_by_key(|r| r.0);

    let gained = write_pairs(fs, &base.pairs, &rows, sink, &mut stats.mutual_pairs)?;
    stats.users_with_friends = write_counts(fs, &base.counts, gained, sink)?;
    stats.reciprocity = if stats.distinct_edges > 0 {
        2.0 * stats.mutual_pairs as f64 / stats.distinct_edges as f64
    } else {
        0.0
    };
    Ok(stats)
}

/// Writes the base's pairs with `rows` (sorted) in their place or among them, as one sorted
/// run; returns the users of the pairs the base lacked, once per pair end, sorted.
fn write_pairs(
    fs: &FileSystems,
    base: &[FileEntry],
    rows: &[PairRow],
    sink: &dyn FriendsSink,
    written: &mut u64,
) -> Result<Vec<i64>> {
    let mut merge = SortedMerge::open(fs, base, decode_pairs)?;
    let mut out = Batcher::new(sink.open_pairs(0)?, friends_schema());
    let mut gained = Vec::new();
    let mut held = merge.next_row()?;
    for &(key, since) in rows {
        while let Some((k, s)) = held.filter(|(k, _)| *k < key) {
            out.push(k, s)?;
            held = merge.next_row()?;
        }
        match held {
            Some((k, _)) if k == key => held = merge.next_row()?,
            _ => gained.extend([key.0, key.1]),
        }
        out.push(key, since)?;
    }
    while let Some((k, s)) = held {
        out.push(k, s)?;
        held = merge.next_row()?;
    }
    *written = out.finish()?;
    gained.sort_unstable();
    Ok(gained)
}

/// Writes the base's counts, each user's raised by the pairs it `gained` (sorted, a user once
/// per pair), as one sorted part; returns the users written.
fn write_counts(
    fs: &FileSystems,
    base: &[FileEntry],
    gained: Vec<i64>,
    sink: &dyn FriendsSink,
) -> Result<u64> {
    let mut merge = SortedMerge::open(fs, base, decode_counts)?;
    let mut out = Batcher::new(sink.open_counts(0)?, counts_schema());
    let mut gains = gained
        .chunk_by(|a, b| a == b)
        .map(|g| (g[0], g.len() as i64));
    let mut gain = gains.next();
    let mut held = merge.next_row()?;
    loop {
        let next = match (held, gain) {
            (None, None) => break,
            (Some((u, n)), Some((g, k))) if u == g => {
                (held, gain) = (merge.next_row()?, gains.next());
                (u, n + k)
            }
            (Some((u, n)), Some((g, _))) if u < g => {
                held = merge.next_row()?;
                (u, n)
            }
            (Some((u, n)), None) => {
                held = merge.next_row()?;
                (u, n)
            }
            (_, Some((g, k))) => {
                gain = gains.next();
                (g, k)
            }
        };
        out.push_count(next.0, next.1)?;
    }
    out.finish()
}

/// Rows on their way to one output file, a batch of [`SINK_BATCH`] at a time.
struct Batcher<'a> {
    writer: Box<dyn super::BatchWriter + 'a>,
    schema: arrow::datatypes::SchemaRef,
    first: Vec<i64>,
    second: Vec<i64>,
    since: Vec<Option<i64>>,
    written: u64,
}

impl<'a> Batcher<'a> {
    fn new(writer: Box<dyn super::BatchWriter + 'a>, schema: arrow::datatypes::SchemaRef) -> Self {
        Batcher {
            writer,
            schema,
            first: Vec::new(),
            second: Vec::new(),
            since: Vec::new(),
            written: 0,
        }
    }

    fn push(&mut self, (a, b): (i64, i64), since: Option<i64>) -> Result<()> {
        self.first.push(a);
        self.second.push(b);
        self.since.push(since);
        self.flush_if_full()
    }

    fn push_count(&mut self, uid: i64, friends: i64) -> Result<()> {
        self.first.push(uid);
        self.second.push(friends);
        self.flush_if_full()
    }

    fn flush_if_full(&mut self) -> Result<()> {
        if self.first.len() >= SINK_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.first.is_empty() {
            return Ok(());
        }
        self.written += self.first.len() as u64;
        let mut columns: Vec<arrow::array::ArrayRef> = vec![
            std::sync::Arc::new(Int64Array::from(std::mem::take(&mut self.first))),
            std::sync::Arc::new(Int64Array::from(std::mem::take(&mut self.second))),
        ];
        if self.schema.fields().len() == 3 {
            let since = TimestampMillisecondArray::from(std::mem::take(&mut self.since))
                .with_timezone("UTC");
            columns.push(std::sync::Arc::new(since));
        }
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(batch_error)?;
        self.writer.write(&batch)
    }

    /// Writes what is left and closes the file; returns its rows.
    fn finish(mut self) -> Result<u64> {
        self.flush()?;
        self.writer.finish()?;
        Ok(self.written)
    }
}

//! Friendships into HBase (`friends --load`): the `friend` table (both directions, `r:since`),
//! `count:friends` in `user`, and `r:mutual` = 1 on both edges in `follow` and `fans`
//! ([`layout::friendship_puts`], [`layout::friend_count_put`]).
//!
//! Only what changed is written: a namespace remembers, in `<output>/_load/<namespace>.json`
//! (a [`Marker`]), the night of the friends it holds, and the next night writes only the pairs
//! and counts that differ from that night's output (the [`LoadedFriends`]). Writing an older
//! night's state is harmless whatever the base, as its cells carry that night's (older)
//! timestamp; docs/nightly.md.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use arrow::array::{Array, RecordBatch};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::dataset::{self, partition};
use crate::error::{Error, Result};
use crate::graph::loaded::Marker;
use crate::hbase::layout::{self, Table};
use crate::hbase::write::{self, PutSink, Route, WriteOptions, WriteReport};
use crate::hdfs::{FileSystems, Location};

use super::{BatchWriter, FriendsOptions, FriendsSink, FriendsStats, FriendsWriter, Slice, Tee};
use crate::dataset::parquet_io;

/// What a friends run with `--load` wrote into HBase, and against which base.
#[derive(Clone, Debug, Serialize)]
pub struct Loaded {
    pub written: WriteReport,
    pub base: LoadBase,
}

/// The night the changes were taken against, and what was left out as unchanged.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LoadBase {
    pub date: Option<String>,
    pub unchanged_pairs: u64,
    pub unchanged_counts: u64,
}

/// Computes the friendships of `inputs` into `writer` and, at the same time, into HBase
/// through the one way in; returns the stats, what was written, and the marker to record
/// once `writer` is committed ([`LoadRecord::write`]).
pub fn run(
    fs: &FileSystems,
    inputs: &[String],
    options: &FriendsOptions,
    output: &Location,
    writer: &FriendsWriter,
    hbase: &WriteOptions,
) -> Result<(FriendsStats, Loaded, Option<LoadRecord>)> {
    let hbase = &WriteOptions {
        tables: vec![Table::Friend, Table::User, Table::Follow, Table::Fans],
        ..hbase.clone()
    };
    let whole = options.slice == Slice::ALL;
    if !whole {
        log::warn!(
            "--slice: count:friends is not written (a slice sees part of each user's \
             friends); sum friend_counts of all slices"
        );
    }
    let date = hbase.date.clone();
    let marker = marker(output, &hbase.namespace);
    // What this namespace already holds: the friends of the last night loaded into it,
    // unless its tables are new.
    let created = write::ensure_tables(hbase)?;
    let base = match whole && created.is_empty() {
        true => match marker.base(fs)? {
            Some(date) => LoadedFriends::read(fs, output, date)?,
            None => None,
        },
        false => None,
    };
    let mut stats = None;
    let mut skipped = (0u64, 0u64);
    // --via auto weighs the follow rows that can bring a pair (each becomes six puts): every
    // one read, or with a base only those of the nights after it.
    let after = base.as_ref().map(|b| b.date.clone());
    let follow_rows = || -> Result<u64> {
        let files = fs.expand_inputs(inputs)?;
        let parquet = files.iter().filter(|f| {
            let new = match (&after, partition::night_of(&f.location)) {
                (Some(base), Some(night)) => night > *base,
                _ => true,
            };
            new && f.location.to_string().ends_with(".parquet")
        });
        parquet_io::parquet_rows(fs, parquet)
    };
    let route = Route {
        fs,
        root: output.clone(),
        rows: &follow_rows,
    };
    let ts = write::cell_timestamp(&date)?;
    let written = write::write_routed_with(&route, hbase, &mut |timed| {
        let put: &mut PutSink<'_> = &mut |t, p| timed(t, p, ts);
        let sink = HBaseSink {
            put: Mutex::new(put),
            whole,
            base: base.as_ref(),
            unchanged_pairs: AtomicU64::new(0),
            unchanged_counts: AtomicU64::new(0),
        };
        stats = Some(super::run_to(fs, inputs, options, &Tee(writer, &sink))?);
        skipped = (
            sink.unchanged_pairs.into_inner(),
            sink.unchanged_counts.into_inner(),
        );
        Ok(())
    })?;
    let stats = stats.ok_or_else(|| Error::Hbase {
        op: "friends",
        table: hbase.namespace.clone(),
        reason: "friends did not run".into(),
    })?;
    let loaded = Loaded {
        written,
        base: LoadBase {
            date: base.as_ref().map(|b| b.date.clone()),
            unchanged_pairs: skipped.0,
            unchanged_counts: skipped.1,
        },
    };
    // Written once the output is committed too: the next night diffs against the later of
    // the two nights.
    let record = whole.then(|| LoadRecord {
        marker,
        date,
        base: base.map(|b| b.date),
    });
    Ok((stats, loaded, record))
}

/// The friends marker of `namespace` under `output`.
fn marker(output: &Location, namespace: &str) -> Marker {
    Marker::new(
        output,
        &format!("{namespace}.json"),
        &[
            dataset::friends::PAIRS_TABLE,
            dataset::friends::COUNTS_TABLE,
        ],
    )
}

/// Which night's friends a namespace holds, to record once they are committed.
pub struct LoadRecord {
    marker: Marker,
    date: String,
    base: Option<String>,
}

impl LoadRecord {
    /// Records the night (or the base's, when later) and the sizes of its output's files.
    pub fn write(self, fs: &FileSystems) -> Result<()> {
        self.marker.record(fs, &self.date, self.base.as_deref())
    }
}

/// The friends a namespace already holds (the committed output of the night its marker
/// names): only the pairs and counts that differ from them are written.
struct LoadedFriends {
    date: String,
    /// (uid_a, uid_b) → since (ms, or i64::MIN when unknown)
    pairs: FxHashMap<(i64, i64), i64>,
    counts: FxHashMap<i64, i64>,
}

impl LoadedFriends {
    /// The committed output of `date` (the night the marker names).
    fn read(fs: &FileSystems, output: &Location, date: String) -> Result<Option<LoadedFriends>> {
        let dt = format!("dt={date}");
        let pair_parts = partition::committed_parts(fs, &output.join("friends").join(&dt))?;
        let count_parts = partition::committed_parts(fs, &output.join("friend_counts").join(&dt))?;
        if pair_parts.is_empty() || count_parts.is_empty() {
            return Ok(None);
        }
        let mut pairs = FxHashMap::default();
        for f in &pair_parts {
            let path = f.location.to_string();
            parquet_io::read_parquet(fs, f, &mut |b| {
                dataset::friends::check(b, &dataset::friends::friends_schema(), &path)?;
                let (a, bb, since) = dataset::friends::pair_columns(b);
                for i in 0..b.num_rows() {
                    let t = if since.is_valid(i) {
                        since.value(i)
                    } else {
                        i64::MIN
                    };
                    pairs.insert((a.value(i), bb.value(i)), t);
                }
                Ok(())
            })?;
        }
        let mut counts = FxHashMap::default();
        for f in &count_parts {
            let path = f.location.to_string();
            parquet_io::read_parquet(fs, f, &mut |b| {
                dataset::friends::check(b, &dataset::friends::counts_schema(), &path)?;
                let (uid, n) = dataset::friends::count_columns(b);
                counts.extend(uid.values().iter().copied().zip(n.values().iter().copied()));
                Ok(())
            })?;
        }
        Ok(Some(LoadedFriends {
            date,
            pairs,
            counts,
        }))
    }
}

/// Friendships as HBase puts, those unchanged since the base left out. Runs come from
/// several threads: the puts go through the one router, under a lock.
struct HBaseSink<'a, 'b> {
    put: Mutex<&'a mut PutSink<'b>>,
    whole: bool,
    base: Option<&'a LoadedFriends>,
    unchanged_pairs: AtomicU64,
    unchanged_counts: AtomicU64,
}

/// A run of pairs, or a part of the counts, on its way to HBase.
struct HBaseRun<'s, 'a, 'b> {
    sink: &'s HBaseSink<'a, 'b>,
    counts: bool,
}

impl BatchWriter for HBaseRun<'_, '_, '_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let sink = self.sink;
        let mut puts = Vec::new();
        let mut unchanged = 0;
        if self.counts {
            if sink.whole {
                let (uids, friends) = dataset::friends::count_columns(batch);
                for (uid, n) in uids.values().iter().zip(friends.values()) {
                    if sink.base.and_then(|base| base.counts.get(uid)) == Some(n) {
                        unchanged += 1;
                        continue;
                    }
                    puts.push(layout::friend_count_put(*uid, *n));
                }
            }
            sink.unchanged_counts
                .fetch_add(unchanged, Ordering::Relaxed);
        } else {
            let (uid_a, uid_b, since) = dataset::friends::pair_columns(batch);
            for i in 0..uid_a.len() {
                let (a, b) = (uid_a.value(i), uid_b.value(i));
                let since = since.is_valid(i).then(|| since.value(i));
                let t = since.unwrap_or(i64::MIN);
                if sink.base.and_then(|base| base.pairs.get(&(a, b))) == Some(&t) {
                    unchanged += 1;
                    continue;
                }
                puts.extend(layout::friendship_puts(a, b, since));
            }
            sink.unchanged_pairs.fetch_add(unchanged, Ordering::Relaxed);
        }
        // Built outside the lock; handed over under it.
        let mut put = sink.put.lock().unwrap_or_else(|e| e.into_inner());
        for (table, p) in puts {
            (*put)(table, p)?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

impl FriendsSink for HBaseSink<'_, '_> {
    fn open_pairs(&self, _run: usize) -> Result<Box<dyn BatchWriter + '_>> {
        Ok(Box::new(HBaseRun {
            sink: self,
            counts: false,
        }))
    }

    fn open_counts(&self, _part: usize) -> Result<Box<dyn BatchWriter + '_>> {
        Ok(Box::new(HBaseRun {
            sink: self,
            counts: true,
        }))
    }
}

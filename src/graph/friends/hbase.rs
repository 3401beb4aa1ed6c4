//! Friendships into HBase (`friends --load`): the `friend` table (both directions, `r:since`),
//! `count:friends` in `user`, and `r:mutual` = 1 on both edges in `follow` and `fans`
//! ([`layout::friendship_puts`], [`layout::friend_count_put`]).
//!
//! Only what changed is written: a namespace remembers, in `<output>/_load/<namespace>.json`
//! (a [`Marker`]), the night of the friends it holds, and the next night writes only the pairs
//! and counts that differ from that night's output: the two outputs, each sorted, are read
//! side by side ([`SortedMerge`]), so neither is held in memory. Writing an older
//! night's state is harmless whatever the base, as its cells carry that night's (older)
//! timestamp; docs/nightly.md.

use serde::Serialize;

use crate::dataset::friends::{decode_counts, decode_pairs};
use crate::dataset::parquet_io;
use crate::dataset::parquet_io::sorted::{changed_rows, SortedMerge};
use crate::dataset::{self, partition};
use crate::error::Result;
use crate::graph::loaded::Marker;
use crate::hbase::layout::{self, Table};
use crate::hbase::write::{self, Route, WriteOptions, WriteReport};
use crate::hdfs::{FileEntry, FileSystems, Location};

use super::{FriendsWriter, Slice};

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

/// Writes the friendships staged in `writer` (computed from `inputs`) into HBase through
/// the one way in, only what differs from the namespace's base; returns what was written,
/// and the marker to record once `writer` is committed ([`LoadRecord::write`]).
pub fn load(
    fs: &FileSystems,
    inputs: &[String],
    slice: Slice,
    output: &Location,
    writer: &FriendsWriter,
    hbase: &WriteOptions,
) -> Result<(Loaded, Option<LoadRecord>)> {
    let hbase = &WriteOptions {
        tables: vec![Table::Friend, Table::User, Table::Follow, Table::Fans],
        ..hbase.clone()
    };
    let whole = slice == Slice::ALL;
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
            Some(date) => Base::of(fs, output, date)?,
            None => None,
        },
        false => None,
    };
    // What differs from the base, read back from both outputs side by side (neither is held).
    let (new_pairs, new_counts) = writer.staged_files()?;
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
    let mut skipped = (0u64, 0u64);
    let written = write::write_routed_with(&route, hbase, &mut |timed| {
        let mut old = match &base {
            Some(base) => Some(SortedMerge::open(fs, &base.pairs, decode_pairs)?),
            None => None,
        };
        let mut new = SortedMerge::open(fs, &new_pairs, decode_pairs)?;
        skipped.0 = changed_rows(old.as_mut(), &mut new, &mut |(a, b), since| {
            for (table, put) in layout::friendship_puts(a, b, since) {
                timed(table, put, ts)?;
            }
            Ok(())
        })?;
        if whole {
            let mut old = match &base {
                Some(base) => Some(SortedMerge::open(fs, &base.counts, decode_counts)?),
                None => None,
            };
            let mut new = SortedMerge::open(fs, &new_counts, decode_counts)?;
            skipped.1 = changed_rows(old.as_mut(), &mut new, &mut |uid, n| {
                let (table, put) = layout::friend_count_put(uid, n);
                timed(table, put, ts)
            })?;
        }
        Ok(())
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
    Ok((loaded, record))
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
struct Base {
    date: String,
    pairs: Vec<FileEntry>,
    counts: Vec<FileEntry>,
}

impl Base {
    /// The committed output of `date` (the night the marker names).
    fn of(fs: &FileSystems, output: &Location, date: String) -> Result<Option<Base>> {
        let dt = format!("dt={date}");
        let pairs = partition::committed_parts(fs, &output.join("friends").join(&dt))?;
        let counts = partition::committed_parts(fs, &output.join("friend_counts").join(&dt))?;
        if pairs.is_empty() || counts.is_empty() {
            return Ok(None);
        }
        Ok(Some(Base {
            date,
            pairs,
            counts,
        }))
    }
}

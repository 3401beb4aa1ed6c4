//! Repost cascades: every root post's reposts rebuilt as a tree from the `//@` chains of their
//! texts, written as the `cascades` and `repost_paths` tables ([`crate::dataset::cascades`]).
//!
//! The Weibo API's `retweeted_status`, and so the `retweet_mid` of most crawlers, names the
//! root post, not the repost that was reposted; the hops between them are in the text
//! ([`chain`]). [`tree`] hangs each repost under its nearest hop. docs/design/cascades.md has
//! the rules and the choices.
//!
//! The input is every committed night up to the date of the cleaned posts (those with a
//! `retweet_mid`) and reposts, a mid counting once with its newest night's record, and the
//! users, for the screen names the markers give. The roots are cut into hash partitions so a
//! partition's reposts fit the memory budget; each partition is read, built and written on
//! its own (in parallel), into the part files of its number.
//!
//! Invariants: every repost of a root lands in that root's partition, so each cascade is
//! built whole; every repost record read is placed or counted (`reposts_without_author`);
//! both tables are committed together, or neither is.

mod chain;
mod tree;

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Int32Array, Int64Array, Int64Builder, ListBuilder, RecordBatch,
    TimestampMillisecondArray,
};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::dataset::cascades::{cascades_schema, paths_schema, CASCADES_TABLE, PATHS_TABLE};
use crate::dataset::columns;
use crate::dataset::partition::{self, Staged};
use crate::error::Result;
use crate::hdfs::{FileEntry, FileSystems, Location};

pub use chain::first_marker;
pub use tree::{build, Cascade, Placed, Repost, Source};

#[derive(Clone, Debug)]
pub struct CascadesOptions {
    pub date: String,
    /// Memory for the reposts of the partitions held at once.
    pub memory_budget: u64,
    /// Cascades listed in the report, largest first.
    pub top: usize,
    pub data_page_version: u8,
}

/// One of the largest cascades, for the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopCascade {
    pub root_mid: i64,
    pub root_uid: Option<i64>,
    pub size: u64,
    pub depth: u32,
}

/// What a run read and built.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CascadesStats {
    /// Post and repost rows read (every night's, so a mid crawled twice counts twice).
    pub rows_read: u64,
    /// Distinct reposts, each placed in its cascade...
    pub reposts: u64,
    /// ...but these, whose author is unknown (anonymised crawls), which have no place in a
    /// path.
    pub reposts_without_author: u64,
    pub cascades: u64,
    /// Cascades whose root post was never crawled (their paths stop at the first repost).
    pub roots_not_crawled: u64,
    /// Where the parents came from.
    pub parents_from_ids: u64,
    pub parents_from_markers: u64,
    /// Fell back to the root: no marker (a repost of the root itself)...
    pub parents_root_no_marker: u64,
    /// ...or a marker naming a user unknown or without an earlier repost of the root.
    pub parents_root_not_found: u64,
    pub max_depth: u32,
    pub partitions: u32,
    pub top: Vec<TopCascade>,
}

impl CascadesStats {
    fn add(&mut self, o: &CascadesStats) {
        self.rows_read += o.rows_read;
        self.reposts += o.reposts;
        self.reposts_without_author += o.reposts_without_author;
        self.cascades += o.cascades;
        self.roots_not_crawled += o.roots_not_crawled;
        self.parents_from_ids += o.parents_from_ids;
        self.parents_from_markers += o.parents_from_markers;
        self.parents_root_no_marker += o.parents_root_no_marker;
        self.parents_root_not_found += o.parents_root_not_found;
        self.max_depth = self.max_depth.max(o.max_depth);
        self.top.extend(o.top.iter().cloned());
    }
}

/// Keeps the `n` largest cascades: size descending, then depth, then root mid ascending.
fn keep_top(top: &mut Vec<TopCascade>, n: usize) {
    top.sort_by(|a, b| {
        (b.size, b.depth)
            .cmp(&(a.size, a.depth))
            .then(a.root_mid.cmp(&b.root_mid))
    });
    top.truncate(n);
}

/// The nights the job reads, oldest first: per night, its posts then its reposts parts; and
/// the users' parts.
struct Inputs {
    nights: Vec<Vec<FileEntry>>,
    users: Vec<FileEntry>,
}

fn inputs(fs: &FileSystems, clean: &Location, date: &str) -> Result<Inputs> {
    let mut by_night: std::collections::BTreeMap<String, Vec<FileEntry>> = Default::default();
    for entity in ["posts", "reposts"] {
        for (night, files) in partition::history_nights(fs, clean, entity, date)? {
            by_night.entry(night).or_default().extend(files);
        }
    }
    Ok(Inputs {
        nights: by_night.into_values().collect(),
        users: partition::history(fs, clean, "users", date)?,
    })
}

/// Bytes a repost costs in a partition: its record, its marker's name, and its placed row
/// with a path a few hops long.
const BYTES_PER_REPOST: u64 = 160;
/// Bytes a post costs in a partition's map of roots.
const BYTES_PER_POST: u64 = 40;

/// Builds every cascade and writes both tables under `output`; returns what it found.
pub fn run(
    fs: &FileSystems,
    clean: &Location,
    output: &Location,
    options: &CascadesOptions,
) -> Result<CascadesStats> {
    let inputs = inputs(fs, clean, &options.date)?;
    if inputs.nights.is_empty() {
        return Err(crate::error::Error::BadInput {
            path: clean.to_string(),
            line: 0,
            reason: format!("no committed posts or reposts up to dt={}", options.date),
        });
    }
    let rows = partition::parquet_rows(fs, inputs.nights.iter().flatten())?;
    let threads = rayon::current_num_threads().max(1) as u64;
    let per_pass = (options.memory_budget / threads).max(1);
    let bytes = rows.saturating_mul(BYTES_PER_REPOST + BYTES_PER_POST);
    let n = bytes.div_ceil(per_pass).clamp(1, 4096) as u32;
    log::info!("cascades: {rows} post and repost rows in {n} partitions");

    let dt = format!("dt={}", options.date);
    let tag = partition::run_tag();
    let staged = [
        Staged::new(&output.join(CASCADES_TABLE), &dt, &tag),
        Staged::new(&output.join(PATHS_TABLE), &dt, &tag),
    ];
    let result = (|| {
        let bar = crate::progress::count(u64::from(n), "cascades");
        let parts: Vec<CascadesStats> = (0..n)
            .into_par_iter()
            .map(|p| {
                let built = partition_of(fs, &inputs, p, n, options.top)?;
                write_part(fs, &staged, p, &built, options.data_page_version)?;
                bar.inc(1);
                Ok(built.stats)
            })
            .collect::<Result<_>>()?;
        bar.finish_and_clear();
        partition::commit(fs, &staged)?;
        let mut stats = CascadesStats {
            partitions: n,
            ..CascadesStats::default()
        };
        for part in &parts {
            stats.add(part);
        }
        // Every partition reads every row: report the input once.
        stats.rows_read /= u64::from(n);
        keep_top(&mut stats.top, options.top);
        Ok(stats)
    })();
    if result.is_err() {
        partition::abandon(fs, &staged);
    }
    result
}

/// A repost as read: its root, author, time and first marker's name.
struct Read {
    root: i64,
    uid: Option<i64>,
    created: i64,
    /// The first marker's screen name, when the text has a marker.
    name: Option<String>,
}

/// One partition's cascades, in root order.
struct Built {
    cascades: Vec<Cascade>,
    placed: Vec<(i64, Placed)>,
    stats: CascadesStats,
}

fn partition_of(fs: &FileSystems, inputs: &Inputs, p: u32, n: u32, top: usize) -> Result<Built> {
    let mine = |root: i64| crate::hash::id_bucket(root, n) == p;
    let mut stats = CascadesStats::default();
    // Posts whose mid hashes here (the roots among them): mid -> author.
    let mut roots: FxHashMap<i64, Option<i64>> = FxHashMap::default();
    // Reposts of roots here: mid -> the newest record read.
    let mut reposts: FxHashMap<i64, Read> = FxHashMap::default();
    for night in &inputs.nights {
        for f in night {
            let cols = ["mid", "uid", "created_at", "retweet_mid", "text"];
            partition::read_parquet_columns(fs, f, &cols, &mut |b| {
                stats.rows_read += b.num_rows() as u64;
                let mid = columns::ids(f, b, "mid")?;
                let uid = columns::opt_ids(b, "uid");
                let created = columns::times(f, b, "created_at")?;
                let rt = columns::opt_ids(b, "retweet_mid");
                let text = b
                    .column_by_name("text")
                    .and_then(|c| c.as_string_opt::<i32>());
                for i in 0..b.num_rows() {
                    let m = mid.value(i);
                    let author = columns::opt(uid, i);
                    if mine(m) {
                        roots.insert(m, author);
                    }
                    match columns::opt(rt, i).filter(|&r| r != m && mine(r)) {
                        Some(root) => {
                            let words = text.filter(|t| t.is_valid(i)).map(|t| t.value(i));
                            let read = Read {
                                root,
                                uid: author,
                                created: created.value(i),
                                name: words.and_then(first_marker).map(str::to_string),
                            };
                            reposts.insert(m, read);
                        }
                        None if !reposts.is_empty() => {
                            reposts.remove(&m);
                        }
                        None => {}
                    }
                }
                Ok(())
            })?;
        }
    }

    // The uids of the names the markers give, the newest night's holder of each.
    let wanted: FxHashSet<&str> = reposts.values().filter_map(|r| r.name.as_deref()).collect();
    let mut named: FxHashMap<String, i64> = FxHashMap::default();
    if !wanted.is_empty() {
        for f in &inputs.users {
            partition::read_parquet_columns(fs, f, &["uid", "screen_name"], &mut |b| {
                let uid = columns::ids(f, b, "uid")?;
                let Some(names) = b
                    .column_by_name("screen_name")
                    .and_then(|c| c.as_string_opt::<i32>())
                else {
                    return Ok(());
                };
                for i in 0..b.num_rows() {
                    if names.is_valid(i) && wanted.contains(names.value(i)) {
                        named.insert(names.value(i).to_string(), uid.value(i));
                    }
                }
                Ok(())
            })?;
        }
    }

    let mut by_root: Vec<(i64, Repost)> = Vec::with_capacity(reposts.len());
    for (mid, r) in reposts {
        let Some(uid) = r.uid else {
            stats.reposts_without_author += 1;
            continue;
        };
        by_root.push((
            r.root,
            Repost {
                mid,
                uid,
                created: r.created,
                named: r.name.as_deref().and_then(|n| named.get(n).copied()),
                marked: r.name.is_some(),
                direct: None,
            },
        ));
    }
    by_root.sort_unstable_by_key(|(root, r)| (*root, r.created, r.mid));
    let mut built = Built {
        cascades: Vec::new(),
        placed: Vec::with_capacity(by_root.len()),
        stats,
    };
    let mut rest = &by_root[..];
    while let Some(&(root, _)) = rest.first() {
        let len = rest.iter().take_while(|(r, _)| *r == root).count();
        let members: Vec<Repost> = rest[..len].iter().map(|(_, r)| r.clone()).collect();
        rest = &rest[len..];
        let root_uid = roots.get(&root).copied().flatten();
        if !roots.contains_key(&root) {
            built.stats.roots_not_crawled += 1;
        }
        let (cascade, placed) = build(root, root_uid, members);
        let s = &mut built.stats;
        s.cascades += 1;
        s.reposts += cascade.size;
        s.max_depth = s.max_depth.max(cascade.depth);
        for p in &placed {
            match p.source {
                Source::Direct => s.parents_from_ids += 1,
                Source::Marker => s.parents_from_markers += 1,
                Source::NoMarker => s.parents_root_no_marker += 1,
                Source::MarkerNotFound => s.parents_root_not_found += 1,
            }
        }
        s.top.push(TopCascade {
            root_mid: root,
            root_uid,
            size: cascade.size,
            depth: cascade.depth,
        });
        if s.top.len() > 4 * top.max(1) {
            keep_top(&mut s.top, top);
        }
        built.placed.extend(placed.into_iter().map(|p| (root, p)));
        built.cascades.push(cascade);
    }
    keep_top(&mut built.stats.top, top);
    Ok(built)
}

/// Writes partition `p`'s rows as part `p` of both staged tables.
fn write_part(
    fs: &FileSystems,
    staged: &[Staged; 2],
    p: u32,
    built: &Built,
    data_page_version: u8,
) -> Result<()> {
    let ts = |v: Vec<i64>| -> ArrayRef {
        Arc::new(TimestampMillisecondArray::from(v).with_timezone("UTC"))
    };
    let c = &built.cascades;
    let cascades = RecordBatch::try_new(
        cascades_schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(c.iter().map(|c| c.root_mid))),
            Arc::new(Int64Array::from_iter(c.iter().map(|c| c.root_uid))),
            Arc::new(Int64Array::from_iter_values(
                c.iter().map(|c| c.size as i64),
            )),
            Arc::new(Int32Array::from_iter_values(
                c.iter().map(|c| c.depth as i32),
            )),
            ts(c.iter().map(|c| c.first_at).collect()),
            ts(c.iter().map(|c| c.last_at).collect()),
        ],
    )
    .expect("columns of the schema");
    let placed = &built.placed;
    let mut paths = ListBuilder::new(Int64Builder::new());
    for (_, p) in placed {
        paths.values().append_slice(&p.path);
        paths.append(true);
    }
    let repost_paths = RecordBatch::try_new(
        paths_schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(
                placed.iter().map(|(_, p)| p.mid),
            )),
            Arc::new(Int64Array::from_iter_values(
                placed.iter().map(|(_, p)| p.uid),
            )),
            Arc::new(Int64Array::from_iter_values(placed.iter().map(|(r, _)| *r))),
            Arc::new(Int64Array::from_iter_values(
                placed.iter().map(|(_, p)| p.parent_mid),
            )),
            Arc::new(Int32Array::from_iter_values(
                placed.iter().map(|(_, p)| p.depth as i32),
            )),
            Arc::new(paths.finish()),
        ],
    )
    .expect("columns of the schema");
    staged[0].write_part(fs, p, &cascades, data_page_version)?;
    staged[1].write_part(fs, p, &repost_paths, data_page_version)
}

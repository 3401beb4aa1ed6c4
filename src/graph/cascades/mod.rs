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
//! partition's reposts fit the memory budget. A round of partitions (one per thread) reads
//! every file once, the files of a night side by side, each post going to the partition of
//! its mid and each repost to that of its root, then the users once for the names the
//! round's markers give; its partitions are then built and written in parallel, into the
//! part files of their numbers.
//!
//! Invariants: every repost of a root lands in that root's partition, so each cascade is
//! built whole; every repost record read is placed or counted (`reposts_without_author`);
//! both tables are committed together, or neither is.

mod carried;
mod chain;
mod tree;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{
    Array, ArrayRef, BooleanArray, BooleanBufferBuilder, Int32Array, Int64Array, Int64Builder,
    ListBuilder, RecordBatch, TimestampMillisecondArray,
};
use parquet::arrow::arrow_reader::RowSelection;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::dataset::cascades::{cascades_schema, paths_schema, CASCADES_TABLE, PATHS_TABLE};
use crate::dataset::columns;
use crate::dataset::history::{self, Taken};
use crate::dataset::parquet_io;
use crate::dataset::parquet_io::OpenedParquet;
use crate::dataset::partition::{self, Staged};
use crate::dataset::slice::Slice;
use crate::error::Result;
use crate::graph::round::{lock, slot, Newest};
use crate::hdfs::{FileEntry, FileSystems, Location};

pub use chain::first_marker;
pub use tree::{build, Cascade, Placed, Repost, Source};

/// Cascades the report lists unless told otherwise.
pub const TOP: usize = 10;

#[derive(Clone, Debug)]
pub struct CascadesOptions {
    pub date: String,
    /// Memory for the reposts of the partitions held at once.
    pub memory_budget: u64,
    /// Cascades listed in the report, largest first.
    pub top: usize,
    pub data_page_version: u8,
    /// The roots of one slice (`--slice i/N`): every N-th hash partition, written under
    /// `slice=i-of-N/`; [`Slice::ALL`] for the whole job.
    pub slice: Slice,
}

/// One of the largest cascades, for the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopCascade {
    pub root_mid: i64,
    pub root_uid: Option<i64>,
    pub size: u64,
    pub depth: u32,
}

/// What a run read and built.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// The night whose cascades this run continued from, rebuilding only those the nights
    /// since touched (none: a build over every night).
    #[serde(default)]
    pub carried_from: Option<String>,
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

impl CascadesStats {
    /// The whole job's figures from its slices': every slice reads every row and holds
    /// disjoint roots, so the rows read must agree and the rest adds up; the top `top`
    /// cascades are taken over all of the slices' lists. `None` when the slices disagree.
    pub fn of_slices(slices: &[CascadesStats], top: usize) -> Option<CascadesStats> {
        let first = slices.first()?;
        let mut whole = CascadesStats::default();
        for s in slices {
            if (s.rows_read, s.partitions) != (first.rows_read, first.partitions) {
                return None;
            }
            whole.add(s);
        }
        whole.rows_read = first.rows_read;
        whole.partitions = first.partitions;
        keep_top(&mut whole.top, top);
        Some(whole)
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

/// The nights the job reads, oldest first: per night (its date), its posts parts then its
/// reposts parts (two files of one entity and night never hold the same mid); and the users'
/// parts by night.
struct Inputs {
    nights: Vec<(String, Vec<Vec<FileEntry>>)>,
    users: Vec<(String, Vec<FileEntry>)>,
    /// Rows with a `retweet_mid`, from the footers: for sizing a partition's map.
    repost_rows: u64,
}

impl Inputs {
    fn files(&self) -> impl Iterator<Item = &FileEntry> {
        self.nights
            .iter()
            .flat_map(|(_, groups)| groups.iter().flatten())
    }
}

/// The posts, reposts and users history a run dated `date` reads ([`carried::ENTITIES`]).
fn history_of(fs: &FileSystems, clean: &Location, date: &str) -> Result<[Vec<Taken>; 3]> {
    let [posts, reposts, users] = carried::ENTITIES;
    Ok([
        history::take_history(fs, &clean.join(posts), date)?,
        history::take_history(fs, &clean.join(reposts), date)?,
        history::take_history(fs, &clean.join(users), date)?,
    ])
}

/// The nights of `taken` ([`history_of`]) as the passes read them.
fn inputs(taken: &[Vec<Taken>; 3]) -> Inputs {
    let mut by_night: std::collections::BTreeMap<String, Vec<Vec<FileEntry>>> = Default::default();
    for t in taken[..2].iter().flatten() {
        if !t.files.is_empty() {
            by_night
                .entry(t.date.clone())
                .or_default()
                .push(t.files.clone());
        }
    }
    Inputs {
        nights: by_night.into_iter().collect(),
        users: taken[2]
            .iter()
            .map(|t| (t.date.clone(), t.files.clone()))
            .collect(),
        repost_rows: 0,
    }
}

/// Bytes a repost costs in a partition: its record, its marker's name, and its placed row
/// with a path a few hops long (reposts are counted from the footers' null counts).
const BYTES_PER_REPOST: u64 = 160;
/// Bytes a post costs in a partition's map of roots.
const BYTES_PER_POST: u64 = 40;

/// Partitions for `rows` posts and reposts, `reposts` of them with a root: within the budget
/// with `threads` built at once, in full rounds, and at least one per thread, since a
/// partition is built and written on one thread.
fn partitions(rows: u64, reposts: u64, budget: u64, threads: usize) -> u32 {
    let bytes = reposts
        .saturating_mul(BYTES_PER_REPOST)
        .saturating_add(rows.saturating_mul(BYTES_PER_POST));
    partition::partitions_in_rounds(bytes, budget, threads, threads as u64)
}

/// Builds every cascade and writes both tables under `output`; returns what it found. A
/// whole run continues from the cascades of an earlier night when it can ([`carried`]) and
/// records the nights it covered for the next.
pub fn run(
    fs: &FileSystems,
    clean: &Location,
    output: &Location,
    options: &CascadesOptions,
) -> Result<CascadesStats> {
    let taken = history_of(fs, clean, &options.date)?;
    let mut inputs = inputs(&taken);
    if inputs.nights.is_empty() {
        return Err(crate::error::Error::BadInput {
            path: clean.to_string(),
            line: 0,
            reason: format!("no committed posts or reposts up to dt={}", options.date),
        });
    }
    let plan = carried::Plan::of(fs, &taken, output, options)?;
    let (mut rows, mut repost_rows) = (0u64, 0u64);
    for f in inputs.files() {
        let file = OpenedParquet::open(fs, f)?;
        rows += file.row_group_rows().iter().sum::<usize>() as u64;
        repost_rows += file.non_null_rows("retweet_mid");
    }
    let threads = rayon::current_num_threads().max(1);
    let slice = options.slice;
    let (n, mine) = slice.cut(threads, |t| {
        partitions(rows, repost_rows, options.memory_budget, t)
    });
    inputs.repost_rows = repost_rows;
    log::info!("cascades: {rows} post and repost rows ({repost_rows} reposts) in {n} partitions");

    let dt = format!("dt={}", options.date);
    let tag = partition::run_tag();
    let staged = [
        Staged::of_slice(&output.join(CASCADES_TABLE), &dt, slice, &tag),
        Staged::of_slice(&output.join(PATHS_TABLE), &dt, slice, &tag),
    ];
    let result = (|| {
        let base = plan.as_ref().and_then(|p| p.base.as_ref());
        let carried = match base.filter(|b| b.partitions() == n) {
            Some(base) => carried::run(fs, &inputs, base, n, options, &staged)?,
            None => None,
        };
        let stats = match carried {
            Some(stats) => stats,
            None => build_all(fs, &inputs, n, &mine, options, &staged)?,
        };
        if let Some(plan) = &plan {
            plan.write_record(fs, &staged[0], n, &stats)?;
        }
        partition::commit(fs, &staged)?;
        Ok(stats)
    })();
    if result.is_err() {
        partition::abandon(fs, &staged);
    }
    result
}

/// Builds the cascades of partitions `mine` (of `n`) from every night, a round of them at
/// a time, into `staged`.
fn build_all(
    fs: &FileSystems,
    inputs: &Inputs,
    n: u32,
    mine: &[u32],
    options: &CascadesOptions,
    staged: &[Staged; 2],
) -> Result<CascadesStats> {
    let threads = rayon::current_num_threads().max(1);
    let bar = crate::progress::count(mine.len() as u64, "cascades");
    let mut stats = CascadesStats {
        partitions: n,
        ..CascadesStats::default()
    };
    // The hash spreads the reposts evenly.
    let share = (inputs.repost_rows / u64::from(n)) as usize;
    for round in mine.chunks(threads) {
        let pass = read_pass(
            fs,
            inputs,
            &Watch {
                slots: round.len(),
                room: share + share / 16,
                slot: &|id| slot(round, n, id),
                split: None,
                mids: None,
            },
        )?;
        let named = names_of(fs, &inputs.users, &wanted(&pass.reads), None)?.0;
        let parts: Vec<CascadesStats> = round
            .par_iter()
            .zip(pass.reads)
            .map(|(&p, read)| {
                let built = partition_of(read, &named, options.top);
                write_part(fs, staged, p, &built, options.data_page_version)?;
                bar.inc(1);
                Ok(built.stats)
            })
            .collect::<Result<_>>()?;
        for part in &parts {
            stats.add(part);
        }
        // Every round reads every row: report the input once.
        stats.rows_read = pass.rows;
    }
    bar.finish_and_clear();
    keep_top(&mut stats.top, options.top);
    Ok(stats)
}

/// A repost as read: its root, author, time and first marker's name.
#[derive(Clone)]
struct Read {
    root: i64,
    uid: Option<i64>,
    created: i64,
    /// The first marker's screen name, when the text has a marker.
    name: Option<String>,
}

/// What a round's read gives one of its partitions: its posts (the roots among them) and
/// the newest record of each repost of its roots.
#[derive(Clone, Default)]
struct Reading {
    roots: Roots,
    reposts: FxHashMap<i64, Read>,
}

/// What a pass over the history looks for: `slots` partitions, `slot` giving an id's (a
/// post's mid, a repost's root) with room for `room` reposts each; with a `split` (a base's
/// date), also each slot's reading as of that night; with `mids`, those mids' newest record
/// up to the split.
struct Watch<'a> {
    slots: usize,
    room: usize,
    slot: &'a (dyn Fn(i64) -> Option<usize> + Sync),
    split: Option<&'a str>,
    mids: Option<&'a FxHashSet<i64>>,
}

/// What a pass found.
struct Pass {
    reads: Vec<Reading>,
    /// Each slot's reading as of the split's night.
    before: Option<Vec<Reading>>,
    /// Of the watched mids, those whose newest record up to the split is a repost without an
    /// author of a root outside the slots.
    authorless_elsewhere: u64,
    rows: u64,
}

/// Reads every posts and reposts file once for `watch`'s slots, the files of a night's
/// entity side by side, each post going to the slot of its mid and each repost to that of
/// its root; returns each slot's rows, in slot order, and the rows read.
fn read_pass(fs: &FileSystems, inputs: &Inputs, watch: &Watch) -> Result<Pass> {
    let reposts = Newest::with_room(watch.slots, watch.room);
    let roots: Vec<Mutex<Roots>> = (0..watch.slots).map(|_| Mutex::default()).collect();
    let watched: Mutex<FxHashMap<i64, bool>> = Mutex::default();
    let rows = AtomicU64::new(0);
    let mut before = None;
    for (night, groups) in &inputs.nights {
        let after_split = watch.split.is_some_and(|d| night.as_str() > d);
        if after_split && before.is_none() {
            before = Some(readings(
                roots.iter().map(|r| lock(r).clone()).collect(),
                reposts.snapshot(),
            ));
        }
        for group in groups {
            let holding = reposts.holding();
            group.par_iter().try_for_each(|f| {
                let read = read_file(fs, f, watch, &|gone| reposts.retain_held(gone))?;
                rows.fetch_add(read.rows, Ordering::Relaxed);
                for (part, found) in roots.iter().zip(read.roots) {
                    lock(part).0.extend(found);
                }
                if !after_split {
                    lock(&watched).extend(read.watched);
                }
                // By slot, in the order the texts were matched to them.
                let mut found: Vec<Vec<(i64, Read)>> =
                    (0..watch.slots).map(|_| Vec::new()).collect();
                for (s, mid, repost) in read.found {
                    found[s].push((mid, repost));
                }
                reposts.merge(found, &read.gone, &holding);
                Ok::<_, crate::error::Error>(())
            })?;
        }
    }
    if watch.split.is_some() && before.is_none() {
        before = Some(readings(
            roots.iter().map(|r| lock(r).clone()).collect(),
            reposts.snapshot(),
        ));
    }
    let watched = watched.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(Pass {
        reads: readings(
            roots
                .into_iter()
                .map(|r| r.into_inner().unwrap_or_else(|p| p.into_inner()))
                .collect(),
            reposts.into_maps(),
        ),
        before,
        authorless_elsewhere: watched.values().filter(|&&w| w).count() as u64,
        rows: rows.into_inner(),
    })
}

/// Each slot's roots (sorted, a mid's newest record kept) with its reposts.
fn readings(roots: Vec<Roots>, reposts: Vec<FxHashMap<i64, Read>>) -> Vec<Reading> {
    roots
        .into_iter()
        .zip(reposts)
        .map(|(mut roots, reposts)| {
            roots.finish();
            Reading { roots, reposts }
        })
        .collect()
}

/// One file's rows for a pass's slots.
struct FileRead {
    rows: u64,
    /// By slot: the posts whose mid hashes there, with their authors.
    roots: Vec<Vec<(i64, Option<i64>)>>,
    /// The reposts of the slots' roots, with the slot of their root, in row order.
    found: Vec<(usize, i64, Read)>,
    /// Mids held from an earlier group whose record here is no repost of a root in the
    /// slots.
    gone: Vec<i64>,
    /// The watched mids here, and whether their record is a repost without an author of a
    /// root outside the slots.
    watched: Vec<(i64, bool)>,
}

/// Reads one posts or reposts file for `watch`. Its fixed-width columns are read for every
/// row; its text only for the reposts of roots in the slots, the only ones whose markers
/// matter.
///
/// `held` keeps, of a batch's keys that go to no slot, those held from an earlier group:
/// only they are listed in `gone`, so a file lists no more than the pass holds.
fn read_file(
    fs: &FileSystems,
    f: &FileEntry,
    watch: &Watch,
    held: &dyn Fn(&mut Vec<i64>),
) -> Result<FileRead> {
    let file = OpenedParquet::open(fs, f)?;
    let slot = watch.slot;
    let mut read = FileRead {
        rows: 0,
        roots: vec![Vec::new(); watch.slots],
        found: Vec::new(),
        gone: Vec::new(),
        watched: Vec::new(),
    };
    // Which rows of the file the found reposts are.
    let mut picked: Vec<BooleanArray> = Vec::new();
    let cols = ["mid", "uid", "created_at", "retweet_mid"];
    file.read_columns(None, &cols, &mut |b| {
        read.rows += b.num_rows() as u64;
        let mid = columns::ids(f, b, "mid")?;
        let uid = columns::opt_ids(b, "uid");
        let created = columns::times(f, b, "created_at")?;
        let rt = columns::opt_ids(b, "retweet_mid");
        let mut pick = BooleanBufferBuilder::new(b.num_rows());
        let mut gone = Vec::new();
        for i in 0..b.num_rows() {
            let m = mid.value(i);
            let author = columns::opt(uid, i);
            if let Some(s) = slot(m) {
                read.roots[s].push((m, author));
            }
            let root = columns::opt(rt, i).filter(|&r| r != m);
            let placed = root.and_then(|r| slot(r).map(|s| (s, r)));
            if watch.mids.is_some_and(|w| w.contains(&m)) {
                let elsewhere = root.is_some() && placed.is_none() && author.is_none();
                read.watched.push((m, elsewhere));
            }
            match placed {
                Some((s, root)) => {
                    let repost = Read {
                        root,
                        uid: author,
                        created: created.value(i),
                        name: None,
                    };
                    read.found.push((s, m, repost));
                    pick.append(true);
                }
                None => {
                    gone.push(m);
                    pick.append(false);
                }
            }
        }
        held(&mut gone);
        read.gone.extend(gone);
        picked.push(BooleanArray::new(pick.finish(), None));
        Ok(())
    })?;
    if !read.found.is_empty() && file.has_column("text") {
        let mut next = 0usize;
        let selection = RowSelection::from_filters(&picked);
        let found = &mut read.found;
        file.read_selected(&["text"], selection, &mut |b| {
            let Some(text) = columns::opt_texts(b, "text") else {
                return Ok(());
            };
            for i in 0..b.num_rows() {
                if let Some((_, _, repost)) = found.get_mut(next) {
                    if text.is_valid(i) {
                        repost.name = first_marker(text.value(i)).map(str::to_string);
                    }
                }
                next += 1;
            }
            Ok(())
        })?;
        if next != found.len() {
            return Err(crate::error::Error::BadInput {
                path: f.location.to_string(),
                line: 0,
                reason: format!("{next} texts read for {} reposts", found.len()),
            });
        }
    }
    Ok(read)
}

/// The screen names the reposts of `reads` give in their first markers.
fn wanted(reads: &[Reading]) -> FxHashSet<String> {
    reads
        .iter()
        .flat_map(|r| r.reposts.values().filter_map(|r| r.name.clone()))
        .collect()
}

/// A screen name's holder: the user whose newest record has that name, the newest such
/// record when two users' do (docs/design/cascades.md). A user who changed names is found
/// by the new one only, as the compacted history, which keeps each user's newest record,
/// holds them.
type Named = FxHashMap<String, i64>;

/// The users' files in reading order, each with its night.
fn user_files(users: &[(String, Vec<FileEntry>)]) -> Vec<(&str, &FileEntry)> {
    users
        .iter()
        .flat_map(|(night, files)| files.iter().map(move |f| (night.as_str(), f)))
        .collect()
}

/// Reads the users' `uid` and `screen_name` columns, a few files at a time (their finds
/// held no longer), handing each file's rows that `pick` keeps to `take` in file order.
fn scan_users<T: Send>(
    fs: &FileSystems,
    files: &[(&str, &FileEntry)],
    pick: &(dyn Fn(i64, Option<&str>) -> Option<T> + Sync),
    take: &mut dyn FnMut(&str, Vec<T>),
) -> Result<()> {
    let threads = rayon::current_num_threads().max(1);
    for chunk in files.chunks(threads) {
        let found: Vec<Vec<T>> = chunk
            .par_iter()
            .map(|(_, f)| {
                let mut found = Vec::new();
                parquet_io::read_parquet_columns(fs, f, &["uid", "screen_name"], &mut |b| {
                    let uid = columns::ids(f, b, "uid")?;
                    let names = columns::opt_texts(b, "screen_name");
                    for i in 0..b.num_rows() {
                        let name = names.filter(|n| n.is_valid(i)).map(|n| n.value(i));
                        found.extend(pick(uid.value(i), name));
                    }
                    Ok(())
                })?;
                Ok(found)
            })
            .collect::<Result<_>>()?;
        for ((night, _), found) in chunk.iter().zip(found) {
            take(night, found);
        }
    }
    Ok(())
}

/// The holder of each screen name of `wanted` that has one; with a `split` (a base's date),
/// also the holders as of that night. Reads the users twice: for the users who ever had
/// such a name, then for their newest records.
fn names_of(
    fs: &FileSystems,
    users: &[(String, Vec<FileEntry>)],
    wanted: &FxHashSet<String>,
    split: Option<&str>,
) -> Result<(Named, Named)> {
    if wanted.is_empty() {
        return Ok(Default::default());
    }
    let files = user_files(users);
    let mut ever: FxHashSet<i64> = FxHashSet::default();
    scan_users(
        fs,
        &files,
        &|uid, name| name.filter(|n| wanted.contains(*n)).map(|_| uid),
        &mut |_, found| ever.extend(found),
    )?;
    // Each of them's newest record: its name if wanted, and its place in reading order.
    type Newest = FxHashMap<i64, (Option<String>, u64)>;
    let (mut now, mut then): (Newest, Newest) = Default::default();
    let mut seq = 0u64;
    scan_users(
        fs,
        &files,
        &|uid, name| {
            ever.contains(&uid).then(|| {
                let name = name.filter(|n| wanted.contains(*n)).map(str::to_string);
                (uid, name)
            })
        },
        &mut |night, found| {
            let before = split.is_some_and(|d| night <= d);
            for (uid, name) in found {
                seq += 1;
                if before {
                    then.insert(uid, (name.clone(), seq));
                }
                now.insert(uid, (name, seq));
            }
        },
    )?;
    let holders = |newest: Newest| -> Named {
        let mut by_name: FxHashMap<String, (u64, i64)> = FxHashMap::default();
        for (uid, (name, seq)) in newest {
            if let Some(name) = name {
                let held = by_name.entry(name).or_insert((seq, uid));
                if seq > held.0 {
                    *held = (seq, uid);
                }
            }
        }
        by_name.into_iter().map(|(n, (_, uid))| (n, uid)).collect()
    };
    Ok((holders(now), holders(then)))
}

/// The posts of a partition (the roots among them) with their authors: pushed as read, then
/// sorted by mid with each mid's newest record kept (cheaper than a map of every post, of
/// which only the roots are ever looked up).
#[derive(Clone, Default)]
struct Roots(Vec<(i64, Option<i64>)>);

impl Roots {
    fn finish(&mut self) {
        // Stable: a mid's records stay in reading order, the newest night's last.
        self.0.sort_by_key(|&(mid, _)| mid);
        let v = &mut self.0;
        let mut kept = 0;
        for i in 0..v.len() {
            if i + 1 == v.len() || v[i + 1].0 != v[i].0 {
                v[kept] = v[i];
                kept += 1;
            }
        }
        v.truncate(kept);
    }

    /// The author of post `mid` (`Some(None)`: crawled without one), if it was read.
    fn get(&self, mid: i64) -> Option<Option<i64>> {
        let i = self.0.binary_search_by_key(&mid, |&(m, _)| m).ok()?;
        Some(self.0[i].1)
    }
}

/// One partition's cascades, in root order.
struct Built {
    cascades: Vec<Cascade>,
    placed: Vec<(i64, Placed)>,
    stats: CascadesStats,
}

fn partition_of(read: Reading, named: &FxHashMap<String, i64>, top: usize) -> Built {
    let mut stats = CascadesStats::default();
    let Reading { roots, reposts } = read;
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
        let found = roots.get(root);
        let root_uid = found.flatten();
        if found.is_none() {
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
    built
}

/// Writes partition `p`'s rows as part `p` of both staged tables.
fn write_part(
    fs: &FileSystems,
    staged: &[Staged; 2],
    p: u32,
    built: &Built,
    data_page_version: u8,
) -> Result<()> {
    staged[0].write_part(fs, p, &cascades_batch(&built.cascades), data_page_version)?;
    staged[1].write_part(fs, p, &paths_batch(&built.placed), data_page_version)
}

/// Cascades as rows of the cascades table.
fn cascades_batch(c: &[Cascade]) -> RecordBatch {
    let ts = |v: Vec<i64>| -> ArrayRef {
        Arc::new(TimestampMillisecondArray::from(v).with_timezone("UTC"))
    };
    RecordBatch::try_new(
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
    .expect("columns of the schema")
}

/// Placed reposts, each with its root, as rows of the repost paths table.
fn paths_batch(placed: &[(i64, Placed)]) -> RecordBatch {
    let mut paths = ListBuilder::new(Int64Builder::new());
    for (_, p) in placed {
        paths.values().append_slice(&p.path);
        paths.append(true);
    }
    RecordBatch::try_new(
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
    .expect("columns of the schema")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_fit_the_budget_one_per_thread_at_least() {
        assert_eq!(partitions(10, 3, 1 << 30, 1), 1);
        assert_eq!(partitions(10, 3, 1 << 30, 2), 2);
        // 4.1 M posts, 1.2 M of them reposts, at 1 GiB on 2 threads: one each.
        assert_eq!(partitions(4_100_000, 1_200_000, 1 << 30, 2), 2);
        for threads in 1..=8 {
            let (rows, reposts) = (40_000_000, 12_000_000);
            let n = partitions(rows, reposts, 256 << 20, threads);
            assert_eq!(
                n as usize % threads,
                0,
                "{n} partitions on {threads} threads"
            );
            let bytes = reposts * BYTES_PER_REPOST + rows * BYTES_PER_POST;
            assert!(bytes / u64::from(n) * threads as u64 <= 256 << 20);
        }
    }
}

//! Home feeds (the inbox): for every follow edge F → A, the newest K posts of A, written as
//! the `inbox` and `inbox_celebrities` tables ([`crate::dataset::inbox`]) and, through the
//! caller, as K cell versions of F's `inbox` row (docs/design/inbox.md).
//!
//! The work is bounded by edges × K: each author's newest K posts are found once and handed
//! to each of its followers; no post is fanned out beyond them. Authors with more fans than
//! the celebrity threshold are not fanned out at all (their posts join a feed at read time,
//! from their timeline), so one celebrity cannot multiply the table by its millions of fans.
//!
//! The input is every committed night up to the date of the cleaned follows (a pair counts
//! once) and posts (a mid counts once, with its newest night's record; deleted posts and
//! posts without an author never reach a feed). The authors are cut into hash partitions
//! ([`crate::hash::id_bucket`]) so a partition fits the memory budget. A round of partitions
//! reads the posts, keeps each author's newest K, then reads the follows, holding only the
//! edges to authors with a post to serve (one night's others are just counted); its
//! partitions are built in parallel, written as the part files of their numbers, then handed
//! to the caller in partition order.
//!
//! A slice (`--slice i/N`) builds every N-th partition of the authors, cut as if by one
//! thread so every slice cuts alike, into `slice=i-of-N/` of each table: the slices hold
//! disjoint authors, whole, and their union is the single run's rows.
//!
//! Invariants: every edge of a fanned-out author gets exactly min(K, its posts) entries, with
//! strictly decreasing versions ([`feed::versions`]); every edge of a celebrity (an author
//! with a post to serve and more fans than the threshold) is reported once as a celebrity
//! edge, every other edge once as fanned out or without posts; both tables are committed
//! together, or neither is.

pub mod feed;
pub mod hbase;
pub mod read;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, TimestampMillisecondArray};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::dataset::inbox::{celebrities_schema, inbox_schema, CELEBRITIES_TABLE, INBOX_TABLE};
use crate::dataset::partition::{self, Staged};
use crate::dataset::slice::Slice;
use crate::dataset::{columns, history};
use crate::error::{Error, Result};
use crate::graph::round::{lock, share, slot, Newest};
use crate::hdfs::{FileEntry, FileSystems, Location};

use crate::dataset::parquet_io;
use feed::next_version;
pub use feed::{merge, newest_first, versions, Entry};

#[derive(Clone, Debug)]
pub struct InboxOptions {
    pub date: String,
    /// Posts kept per followee (the inbox family's VERSIONS).
    pub k: usize,
    /// Authors with more fans than this are not fanned out.
    pub celebrity_threshold: u64,
    pub memory_budget: u64,
    pub data_page_version: u8,
    /// The authors of one slice (`--slice i/N`): every N-th hash partition, written under
    /// `slice=i-of-N/`; [`Slice::ALL`] for the whole job.
    pub slice: Slice,
}

/// What a run read and wrote.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InboxStats {
    /// Follow and post rows read (every night's, so a record crawled twice counts twice).
    pub follow_rows: u64,
    pub post_rows: u64,
    /// Distinct follow edges, and how they were served...
    pub edges: u64,
    /// ...fanned out (the followee has posts and is not a celebrity)...
    pub edges_fanned_out: u64,
    /// ...left to read time (the followee is a celebrity)...
    pub edges_to_celebrities: u64,
    /// ...or with nothing to serve (the followee has no post).
    pub edges_without_posts: u64,
    /// Distinct posts that may reach a feed, and those left out: deleted, or without author.
    pub posts: u64,
    pub posts_deleted: u64,
    /// Feed entries written (cells of the `inbox` family `f`).
    pub entries: u64,
    /// Authors not fanned out, because they have more fans than the threshold.
    pub celebrities_skipped: u64,
    pub celebrity_threshold: u64,
    pub k: u64,
    pub partitions: u32,
    /// The night whose feeds this run's entries add to; `None`: they are every feed.
    #[serde(default)]
    pub base: Option<String>,
    /// With a base, the authors the later nights touch (the only ones built, read and
    /// counted above); `None` when every author was.
    #[serde(default)]
    pub touched_authors: Option<u64>,
}

impl InboxStats {
    fn add(&mut self, o: &InboxStats) {
        self.edges += o.edges;
        self.edges_fanned_out += o.edges_fanned_out;
        self.edges_to_celebrities += o.edges_to_celebrities;
        self.edges_without_posts += o.edges_without_posts;
        self.posts += o.posts;
        self.posts_deleted += o.posts_deleted;
        self.entries += o.entries;
        self.celebrities_skipped += o.celebrities_skipped;
    }

    /// The whole job's figures from its slices': every slice reads every row and holds
    /// disjoint authors, so the rows read and the settings must agree and the rest adds up.
    /// `None` when the slices disagree.
    pub fn of_slices(slices: &[InboxStats]) -> Option<InboxStats> {
        let first = slices.first()?;
        let same = |s: &InboxStats| {
            (
                s.follow_rows,
                s.post_rows,
                s.partitions,
                s.k,
                s.celebrity_threshold,
            )
        };
        let mut whole = InboxStats {
            follow_rows: first.follow_rows,
            post_rows: first.post_rows,
            partitions: first.partitions,
            k: first.k,
            celebrity_threshold: first.celebrity_threshold,
            ..InboxStats::default()
        };
        for s in slices {
            if same(s) != same(first) {
                return None;
            }
            whole.add(s);
        }
        Some(whole)
    }
}

/// One author's fan-out: where its newest posts and its fans are in its partition
/// ([`Built::posts`], [`Built::fans`]).
#[derive(Clone, Debug)]
pub struct Author {
    pub uid: i64,
    pub fans: Range<usize>,
    /// Empty for a celebrity.
    pub posts: Range<usize>,
    pub celebrity: bool,
}

/// One partition's authors, by uid, each with fans and a post to serve.
pub struct Built {
    pub authors: Vec<Author>,
    /// `(followee, follower)`, sorted and distinct: an author's fans are a range of them.
    edges: Vec<(i64, i64)>,
    /// Of those, the edges no night the base saw gave ([`Plan`]):
    /// sorted; `None` when the run was not split.
    fresh: Option<Vec<(i64, i64)>>,
    /// `(created_at, mid, version)`: each author's newest K, newest first, side by side.
    posts: Vec<(i64, i64, i64)>,
    /// Per post, whether the base's feeds hold it ([`Posted::served`]).
    served: Vec<bool>,
    stats: InboxStats,
}

impl Built {
    /// The fans of `author` (one of [`Built::authors`]), ascending.
    pub fn fans(&self, author: &Author) -> impl ExactSizeIterator<Item = i64> + '_ {
        self.edges[author.fans.clone()].iter().map(|&(_, f)| f)
    }

    /// The fans of `author` that no night up to the base gave, ascending; `None` when the
    /// run was not split at a base.
    pub fn fresh_fans(&self, author: &Author) -> Option<impl Iterator<Item = i64> + '_> {
        Some(self.fresh_edges(author)?.iter().map(|&(_, f)| f))
    }

    /// The edges of [`Built::fresh_fans`].
    fn fresh_edges(&self, author: &Author) -> Option<&[(i64, i64)]> {
        let fresh = self.fresh.as_ref()?;
        let from = fresh.partition_point(|&(a, _)| a < author.uid);
        let to = fresh.partition_point(|&(a, _)| a <= author.uid);
        Some(&fresh[from..to])
    }

    /// The posts `author` fans out: `(created_at, mid, version)`, newest first.
    pub fn posts(&self, author: &Author) -> &[(i64, i64, i64)] {
        &self.posts[author.posts.clone()]
    }

    /// Calls `entry(post, fan)` for the feed entries of `author` (not a celebrity), post by
    /// post, newest first, fans ascending: with `every`, all of them; else those the base's
    /// feeds do not hold (a post it did not serve goes to every fan, one it served to the fans
    /// it did not serve).
    pub fn for_each_entry(
        &self,
        author: &Author,
        every: bool,
        entry: &mut dyn FnMut((i64, i64, i64), i64) -> Result<()>,
    ) -> Result<()> {
        let fresh = self.fresh_edges(author).filter(|_| !every);
        for (i, &post) in self.posts(author).iter().enumerate() {
            match fresh.filter(|_| self.served[author.posts.start + i]) {
                Some(fresh) => fresh.iter().try_for_each(|&(_, f)| entry(post, f))?,
                None => self.fans(author).try_for_each(|f| entry(post, f))?,
            }
        }
        Ok(())
    }

    /// How many entries of `author` the base's feeds do not hold.
    fn added(&self, author: &Author) -> u64 {
        let fresh = self.fresh_edges(author).map(<[_]>::len);
        (author.posts.clone())
            .map(|i| match fresh {
                Some(fresh) if self.served[i] => fresh as u64,
                _ => author.fans.len() as u64,
            })
            .sum()
    }

    /// Whether a celebrity's count of fans is new to the base: it gained a fan since, or
    /// there is no base.
    pub fn celebrity_changed(&self, author: &Author) -> bool {
        self.fresh_edges(author).is_none_or(|f| !f.is_empty())
    }
}

/// What an inbox partition's feeds were computed over, kept beside its parts as
/// `_feeds.json`: the base night whose feeds its entries add to (none: its entries are every
/// feed), and the nights of follows and posts read, with their stamps. The next night's run
/// takes it as its base when its settings match and the nights it read are still there
/// ([`history::new_items`]); docs/design/inbox.md, "Reruns and nights".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeedsRecord {
    pub base: Option<String>,
    pub k: u64,
    pub celebrity_threshold: u64,
    pub follows: Vec<(String, i64)>,
    pub posts: Vec<(String, i64)>,
}

/// The record's file name in an `inbox` partition.
const RECORD: &str = "_feeds.json";

/// The record of the committed `inbox` partition of `date`, if it has one.
pub fn recorded(fs: &FileSystems, output: &Location, date: &str) -> Result<Option<FeedsRecord>> {
    let dir = output.join(INBOX_TABLE).join(&format!("dt={date}"));
    let at = dir.join(RECORD);
    if !fs.exists(&dir.join("_SUCCESS"))? || !fs.exists(&at)? {
        return Ok(None);
    }
    let record = serde_json::from_slice(&fs.read_to_vec(&at)?).map_err(|e| Error::BadInput {
        path: at.to_string(),
        line: 0,
        reason: format!("not an inbox record: {e}"),
    })?;
    Ok(Some(record))
}

/// The base a run continues from: its night, and which items of the history it has not
/// seen (in [`Plan`]'s order).
#[derive(Clone, Debug)]
struct Base {
    date: String,
    follows_new: Vec<bool>,
    posts_new: Vec<bool>,
}

/// What a run reads (the follows and posts as the compacted history hands them out, oldest
/// first) and the base it continues from, if any.
pub struct Plan {
    follows: Vec<history::Taken>,
    posts: Vec<history::Taken>,
    base: Option<Base>,
    record: FeedsRecord,
}

impl Plan {
    /// The history of `clean` up to the date, and as base the newest committed inbox
    /// partition before it when its record matches (a slice never takes one).
    pub fn of(
        fs: &FileSystems,
        clean: &Location,
        output: &Location,
        options: &InboxOptions,
    ) -> Result<Plan> {
        let date = &options.date;
        let follows = history::take_history(fs, &clean.join("follows"), date)?;
        let posts = history::take_history(fs, &clean.join("posts"), date)?;
        let record = FeedsRecord {
            base: None,
            k: options.k as u64,
            celebrity_threshold: options.celebrity_threshold,
            follows: history::covered(&follows),
            posts: history::covered(&posts),
        };
        let mut plan = Plan {
            follows,
            posts,
            base: None,
            record,
        };
        if options.slice != Slice::ALL {
            return Ok(plan);
        }
        let table = output.join(INBOX_TABLE);
        let before = match fs.exists(&table)? {
            true => partition::dated_folders(fs, &table)?,
            false => Vec::new(),
        };
        // The newest committed partition before the date: it continues the feeds, or none do.
        let mut newest = None;
        for (d, dir) in before.into_iter().rev() {
            if d.as_str() < date.as_str() && fs.exists(&dir.join("_SUCCESS"))? {
                newest = Some(d);
                break;
            }
        }
        let Some(base_date) = newest else {
            return Ok(plan);
        };
        let Some(then) = recorded(fs, output, &base_date)? else {
            log::info!("inbox: {base_date} has no {RECORD}: every feed");
            return Ok(plan);
        };
        if (then.k, then.celebrity_threshold) != (plan.record.k, plan.record.celebrity_threshold) {
            log::info!("inbox: {base_date} was built with another K or threshold: every feed");
            return Ok(plan);
        }
        let follows_new = history::new_items(&plan.follows, &then.follows);
        let posts_new = history::new_items(&plan.posts, &then.posts);
        if let (Some(follows_new), Some(posts_new)) = (follows_new, posts_new) {
            plan.record.base = Some(base_date.clone());
            plan.base = Some(Base {
                date: base_date,
                follows_new,
                posts_new,
            });
        } else {
            log::info!("inbox: the history up to {base_date} was compacted across it: every feed");
        }
        Ok(plan)
    }

    /// The night this run's entries add to, if any.
    pub fn base_date(&self) -> Option<&str> {
        self.base.as_ref().map(|b| b.date.as_str())
    }

    /// What this run's partition records.
    pub fn record(&self) -> &FeedsRecord {
        &self.record
    }

    /// The follows' part files, each with whether the base has not seen it.
    pub fn follows(&self) -> impl Iterator<Item = (&FileEntry, bool)> {
        items(&self.follows, self.base.as_ref().map(|b| &b.follows_new))
    }

    /// The posts' part files, each with whether the base has not seen it.
    pub fn posts(&self) -> impl Iterator<Item = (&FileEntry, bool)> {
        items(&self.posts, self.base.as_ref().map(|b| &b.posts_new))
    }
}

/// The files of `items` the base has not seen.
pub fn new_files<'a>(items: impl Iterator<Item = (&'a FileEntry, bool)>) -> Vec<&'a FileEntry> {
    items.filter(|(_, new)| *new).map(|(f, _)| f).collect()
}

fn items<'a>(
    taken: &'a [history::Taken],
    new: Option<&'a Vec<bool>>,
) -> impl Iterator<Item = (&'a FileEntry, bool)> {
    taken.iter().enumerate().flat_map(move |(i, t)| {
        let new = new.is_none_or(|n| n[i]);
        t.files.iter().map(move |f| (f, new))
    })
}

/// Which authors a run builds: every one (the whole feed, for a namespace that does not hold
/// the base's), or only those the nights after the base touch, by a post or a new fan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Every,
    Touched,
}

/// The nights the job reads, oldest first.
struct Inputs {
    follows: Vec<Vec<FileEntry>>,
    /// Per item of `follows`, whether the base has not seen it; `None` without a base.
    follows_new: Option<Vec<bool>>,
    posts: Vec<Vec<FileEntry>>,
    posts_new: Option<Vec<bool>>,
    /// The authors built: `None` for every one ([`Scope`]).
    touched: Option<FxHashSet<i64>>,
    /// Rows of every night (from the footers), and of those the base has not seen.
    follow_rows: u64,
    post_rows: u64,
    new_follow_rows: u64,
    new_post_rows: u64,
}

impl Inputs {
    fn builds(&self, author: i64) -> bool {
        self.touched.as_ref().is_none_or(|t| t.contains(&author))
    }
}

/// Bytes a follow row may cost in a partition: its edge tuple (fans are ranges of the edges,
/// and the entries they become are written batch by batch, not held).
const BYTES_PER_FOLLOW: u64 = 16;
/// Bytes a post row may cost while the posts are read: its map slot (with the map's slack),
/// its place in the author order, and what [`BYTES_PER_POST_KEPT`] counts.
const BYTES_PER_POST_READ: u64 = 128;
/// Bytes a post row may cost once the follows are read: its place among the newest posts,
/// and, were it its author's only post, the author and its place in the author set.
const BYTES_PER_POST_KEPT: u64 = 88;

/// Builds the feeds, writes both tables under `output`, and hands each partition's authors to
/// `emit` (in partition order) before the tables are committed: an `emit` error (an HBase
/// write) leaves nothing committed. With a base ([`Plan`]) only the authors the nights after
/// it touch are built, and the tables hold what those nights add.
pub fn run(
    fs: &FileSystems,
    clean: &Location,
    output: &Location,
    options: &InboxOptions,
    emit: &mut dyn FnMut(&Built) -> Result<()>,
) -> Result<InboxStats> {
    let plan = Plan::of(fs, clean, output, options)?;
    run_planned(fs, output, options, &plan, Scope::Touched, emit)
}

/// [`run`] of `plan`, building the authors of `scope`.
pub fn run_planned(
    fs: &FileSystems,
    output: &Location,
    options: &InboxOptions,
    plan: &Plan,
    scope: Scope,
    emit: &mut dyn FnMut(&Built) -> Result<()>,
) -> Result<InboxStats> {
    if options.k == 0 {
        return Err(Error::Usage("--k must be at least 1".into()));
    }
    let files = |taken: &[history::Taken]| -> Vec<Vec<FileEntry>> {
        taken.iter().map(|t| t.files.clone()).collect()
    };
    let base = plan.base.as_ref();
    let mut inputs = Inputs {
        follows: files(&plan.follows),
        follows_new: base.map(|b| b.follows_new.clone()),
        posts: files(&plan.posts),
        posts_new: base.map(|b| b.posts_new.clone()),
        touched: None,
        follow_rows: 0,
        post_rows: 0,
        new_follow_rows: 0,
        new_post_rows: 0,
    };
    if inputs.follows.is_empty() {
        return Err(Error::BadInput {
            path: plan_root(plan),
            line: 0,
            reason: format!("no committed follows up to dt={}", options.date),
        });
    }
    let follow_rows = parquet_io::parquet_rows(fs, inputs.follows.iter().flatten())?;
    let post_rows = parquet_io::parquet_rows(fs, inputs.posts.iter().flatten())?;
    inputs.new_follow_rows = parquet_io::parquet_rows(fs, new_files(plan.follows()))?;
    inputs.new_post_rows = parquet_io::parquet_rows(fs, new_files(plan.posts()))?;
    if scope == Scope::Touched && base.is_some() {
        inputs.touched = Some(touched_authors(fs, plan)?);
    }
    let threads = rayon::current_num_threads().max(1);
    let slice = options.slice;
    let (n, mine) = slice.cut(threads, |t| {
        partitions(follow_rows, post_rows, options.memory_budget, t)
    });
    (inputs.follow_rows, inputs.post_rows) = (follow_rows, post_rows);
    log::info!(
        "inbox: {follow_rows} follow and {post_rows} post rows in {n} partitions{}",
        match (&base, &inputs.touched) {
            (Some(b), Some(t)) => format!(", {} authors touched since {}", t.len(), b.date),
            (Some(b), None) => format!(", every author (adding to {})", b.date),
            _ => String::new(),
        }
    );

    let dt = format!("dt={}", options.date);
    let tag = partition::run_tag();
    let staged = [
        Staged::of_slice(&output.join(INBOX_TABLE), &dt, slice, &tag),
        Staged::of_slice(&output.join(CELEBRITIES_TABLE), &dt, slice, &tag),
    ];
    let result = (|| {
        let mut stats = InboxStats {
            partitions: n,
            celebrity_threshold: options.celebrity_threshold,
            k: options.k as u64,
            base: plan.base_date().map(String::from),
            touched_authors: inputs.touched.as_ref().map(|t| t.len() as u64),
            ..InboxStats::default()
        };
        let bar = crate::progress::count(mine.len() as u64, "inbox");
        for round in mine.chunks(threads) {
            let (maps, post_rows) = read_posts(fs, &inputs, round, n)?;
            let posted: Vec<Posted> = maps
                .into_par_iter()
                .map(|(all, old)| newest_posts(all, old, options.k))
                .collect();
            let (edges, follow_rows) = read_follows(fs, &inputs, round, n, &posted)?;
            (stats.follow_rows, stats.post_rows) = (follow_rows, post_rows);
            let built: Vec<Built> = round
                .par_iter()
                .zip(edges.into_par_iter().zip(posted))
                .map(|(&p, (edges, posted))| {
                    let built = partition_of(edges, posted, options);
                    write_part(fs, &staged, p, &built, options.data_page_version)?;
                    Ok(built)
                })
                .collect::<Result<_>>()?;
            for b in &built {
                stats.add(&b.stats);
                emit(b)?;
                bar.inc(1);
            }
        }
        bar.finish_and_clear();
        if slice == Slice::ALL {
            let text = serde_json::to_vec_pretty(&plan.record).map_err(|e| Error::Io {
                op: "encode",
                path: staged[0].tmp.join(RECORD).to_string(),
                source: e.into(),
            })?;
            fs.write_atomic(&staged[0].tmp.join(RECORD), &text)?;
        }
        partition::commit(fs, &staged)?;
        Ok(stats)
    })();
    if result.is_err() {
        partition::abandon(fs, &staged);
    }
    result
}

/// Where a plan's follows live, for an error that names them.
fn plan_root(plan: &Plan) -> String {
    plan.follows
        .first()
        .map_or_else(|| "follows".to_string(), |t| t.folder.to_string())
}

/// The authors the nights a base has not seen touch: the authors of their posts, and the
/// followees of their follows.
fn touched_authors(fs: &FileSystems, plan: &Plan) -> Result<FxHashSet<i64>> {
    let touched = Mutex::new(FxHashSet::default());
    let (posts, follows) = (new_files(plan.posts()), new_files(plan.follows()));
    let read = |f: &FileEntry, column: &str| {
        parquet_io::read_parquet_columns(fs, f, &[column], &mut |b| {
            let ids = columns::opt_ids(b, column);
            let mut here = Vec::with_capacity(b.num_rows());
            here.extend((0..b.num_rows()).filter_map(|i| columns::opt(ids, i)));
            lock(&touched).extend(here);
            Ok(())
        })
    };
    posts.par_iter().try_for_each(|f| read(f, "uid"))?;
    follows.par_iter().try_for_each(|f| read(f, "followee"))?;
    Ok(touched.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// Work below which one partition is built alone: it takes moments, and makes one part file.
const SPLIT_BYTES: u64 = 64 << 20;

/// Partitions for rows of follows and posts, `threads` built at once within the budget, in
/// full rounds, and one a thread once the work is worth splitting (a partition is built and
/// written on one thread). A round holds its posts, then its authors' newest posts and its
/// edges.
fn partitions(follow_rows: u64, post_rows: u64, budget: u64, threads: usize) -> u32 {
    let reading_posts = post_rows.saturating_mul(BYTES_PER_POST_READ);
    let holding_edges = follow_rows
        .saturating_mul(BYTES_PER_FOLLOW)
        .saturating_add(post_rows.saturating_mul(BYTES_PER_POST_KEPT));
    let bytes = reading_posts.max(holding_edges);
    let min = if bytes >= SPLIT_BYTES {
        threads as u64
    } else {
        1
    };
    partition::partitions_in_rounds(bytes, budget, threads, min)
}

/// A deleted post's time in a [`Post`]: no post is that old.
const DELETED: i64 = i64::MIN;

/// A post as read: its author, and its time or [`DELETED`].
#[derive(Clone, Copy)]
struct Post {
    author: i64,
    created: i64,
}

/// Each partition's posts by mid: every night's newest record, and with a base that of the
/// nights it saw ([`newest_posts`] compares their newest K).
type PostMaps = (FxHashMap<i64, Post>, Option<FxHashMap<i64, Post>>);

/// Reads every post once for the partitions of `round` (of `n`), each going to the partition
/// of its author (when the run builds that author): the newest night's record of each mid,
/// the files of a night side by side. Returns each partition's posts by mid, in round order,
/// and the post rows read.
fn read_posts(
    fs: &FileSystems,
    inputs: &Inputs,
    round: &[u32],
    n: u32,
) -> Result<(Vec<PostMaps>, u64)> {
    let slot = |id: i64| slot(round, n, id).filter(|_| inputs.builds(id));
    let room = match inputs.touched {
        Some(_) => share(inputs.new_post_rows, n),
        None => share(inputs.post_rows, n),
    };
    // A later record by an author elsewhere, or without author, removes a mid.
    let posts = Newest::with_room(round.len(), room);
    let seen = inputs
        .posts_new
        .as_ref()
        .map(|_| Newest::with_room(round.len(), room));
    let post_rows = AtomicU64::new(0);
    for (item, night) in inputs.posts.iter().enumerate() {
        let holding = posts.holding();
        let old = match (&seen, &inputs.posts_new) {
            (Some(seen), Some(new)) if !new[item] => Some((seen, seen.holding())),
            _ => None,
        };
        night.par_iter().try_for_each(|f| {
            let cols = ["mid", "uid", "created_at", "is_deleted"];
            parquet_io::read_parquet_columns(fs, f, &cols, &mut |b| {
                post_rows.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
                let mid = columns::ids(f, b, "mid")?;
                let uid = columns::opt_ids(b, "uid");
                let created = columns::times(f, b, "created_at")?;
                let deleted = b
                    .column_by_name("is_deleted")
                    .and_then(|c| c.as_boolean_opt());
                let mut found: Vec<Vec<(i64, Post)>> = vec![Vec::new(); round.len()];
                let mut others: Vec<i64> = Vec::new();
                for i in 0..b.num_rows() {
                    let m = mid.value(i);
                    let author = columns::opt(uid, i).filter(|_| created.is_valid(i));
                    let here = author.and_then(|a| slot(a).map(|s| (s, a)));
                    match here {
                        Some((s, author)) => {
                            let deleted = deleted.is_some_and(|d| d.is_valid(i) && d.value(i));
                            let created = if deleted { DELETED } else { created.value(i) };
                            found[s].push((m, Post { author, created }));
                        }
                        None => others.push(m),
                    }
                }
                if let Some((seen, holding)) = &old {
                    seen.merge(found.clone(), &others, holding);
                }
                posts.merge(found, &others, &holding);
                Ok(())
            })
        })?;
    }
    let seen = match seen {
        Some(seen) => seen.into_maps().into_iter().map(Some).collect(),
        None => vec![None; round.len()],
    };
    let maps = posts.into_maps().into_iter().zip(seen).collect();
    Ok((maps, post_rows.into_inner()))
}

/// A partition's authors with a post to serve, by uid (their fans not yet known), their
/// newest K posts side by side, and the filter that routes the follows.
struct Posted {
    authors: Vec<Author>,
    posts: Vec<(i64, i64, i64)>,
    /// Per post of `posts`, whether the base's feeds hold it already (the same post, with the
    /// same version, among its author's newest K over the nights the base saw).
    served: Vec<bool>,
    may_post: MayPost,
    live: u64,
    deleted: u64,
}

/// The newest K posts of each author of a partition's posts (deleted ones left out), and
/// with `seen` (the posts of the nights the base saw) which of them the base served.
fn newest_posts(
    posts: FxHashMap<i64, Post>,
    seen: Option<FxHashMap<i64, Post>>,
    k: usize,
) -> Posted {
    let newest = NewestK::of(posts, k);
    let served = match seen {
        None => vec![false; newest.posts.len()],
        Some(seen) => {
            let then = NewestK::of(seen, k);
            let mut served = Vec::with_capacity(newest.posts.len());
            let mut before = then.authors.iter().peekable();
            for (uid, range) in &newest.authors {
                while before.next_if(|(b, _)| b < uid).is_some() {}
                let theirs = match before.next_if(|(b, _)| b == uid) {
                    Some((_, r)) => &then.posts[r.clone()],
                    None => &[][..],
                };
                served.extend(
                    newest.posts[range.clone()]
                        .iter()
                        .map(|p| theirs.contains(p)),
                );
            }
            served
        }
    };
    let mut may_post = MayPost::with_room(newest.authors.len());
    let authors = newest
        .authors
        .into_iter()
        .map(|(uid, posts)| {
            may_post.insert(uid);
            Author {
                uid,
                fans: 0..0,
                posts,
                celebrity: false,
            }
        })
        .collect();
    Posted {
        authors,
        posts: newest.posts,
        served,
        may_post,
        live: newest.live,
        deleted: newest.deleted,
    }
}

/// Each author's newest K posts, `(created_at, mid, version)` newest first, side by side.
struct NewestK {
    /// By uid, with the range of its posts.
    authors: Vec<(i64, Range<usize>)>,
    posts: Vec<(i64, i64, i64)>,
    live: u64,
    deleted: u64,
}

impl NewestK {
    /// Kept in place of the sorted posts.
    fn of(posts: FxHashMap<i64, Post>, k: usize) -> NewestK {
        let mut by_author: Vec<(i64, i64, i64)> = Vec::with_capacity(posts.len());
        let mut deleted = 0;
        for (mid, post) in posts {
            if post.created == DELETED {
                deleted += 1;
            } else {
                by_author.push((post.author, post.created, mid));
            }
        }
        let live = by_author.len() as u64;
        // By author, newest first (ties by mid ascending: the feed order).
        by_author.sort_unstable_by_key(|&(a, created, mid)| (a, std::cmp::Reverse(created), mid));
        let mut authors = Vec::with_capacity(by_author.chunk_by(|x, y| x.0 == y.0).count());
        // `(author, created, mid)` becomes `(created, mid, version)`, written at or before
        // where it was read.
        let (mut read, mut kept) = (0, 0);
        while read < by_author.len() {
            let uid = by_author[read].0;
            let own = by_author[read..].iter().take_while(|p| p.0 == uid).count();
            let start = kept;
            let mut prev = None;
            for i in read..read + own.min(k) {
                let (_, created, mid) = by_author[i];
                let version = next_version(prev, created);
                by_author[kept] = (created, mid, version);
                prev = Some(version);
                kept += 1;
            }
            read += own;
            authors.push((uid, start..kept));
        }
        by_author.truncate(kept);
        NewestK {
            authors,
            posts: by_author,
            live,
            deleted,
        }
    }
}

/// The authors with a post to serve, as one bit of each one's hash: no author is missed, and
/// a few ids in a hundred that are not authors pass too. An edge let through that way is held
/// and sorted like the others and then counted as without posts, so only the memory and
/// work it costs depend on the filter; a lookup stays in cache, where one in a set of the
/// ids mostly would not.
struct MayPost {
    words: Vec<u64>,
    shift: u32,
}

impl MayPost {
    /// Sixteen bits an author: about 6 % of other ids pass.
    const BITS_PER_AUTHOR: usize = 16;

    fn with_room(authors: usize) -> MayPost {
        let bits = (authors * Self::BITS_PER_AUTHOR)
            .next_power_of_two()
            .max(64);
        MayPost {
            words: vec![0; bits / 64],
            shift: 64 - bits.trailing_zeros(),
        }
    }

    /// The bit of `id`: the top bits of a multiplicative hash.
    fn bit(&self, id: i64) -> usize {
        ((id as u64).wrapping_mul(crate::hash::GOLDEN) >> self.shift) as usize
    }

    fn insert(&mut self, id: i64) {
        let b = self.bit(id);
        self.words[b / 64] |= 1 << (b % 64);
    }

    fn may_hold(&self, id: i64) -> bool {
        let b = self.bit(id);
        self.words[b / 64] & (1 << (b % 64)) != 0
    }
}

/// A partition's follows as read: `(followee, follower)` to authors with a post to serve (or
/// every edge, see [`read_follows`]), and the edges to authors without one that were only
/// counted. When the run is split at a base, `edges` are those of the nights up to it and
/// `fresh` those of the nights after it (a pair may be in both).
struct Edges {
    edges: Vec<(i64, i64)>,
    fresh: Option<Vec<(i64, i64)>>,
    without_posts: u64,
}

/// Reads every follow once for the partitions of `round` (of `n`), each edge going to the
/// partition of its followee, the files of a night side by side; returns each partition's
/// edges, in round order, and the follow rows read.
///
/// An edge to an author with no post to serve is counted, not kept, when the follows are one
/// night: a night holds a pair once ([`crate::dataset::follows`]), so the count is of
/// distinct edges. Over several nights a pair may come again, so every edge is kept and the
/// sort makes them distinct.
fn read_follows(
    fs: &FileSystems,
    inputs: &Inputs,
    round: &[u32],
    n: u32,
    posted: &[Posted],
) -> Result<(Vec<Edges>, u64)> {
    let keep_all = inputs.follows.len() > 1;
    let room = match inputs.touched {
        Some(_) => share(inputs.new_follow_rows, n),
        None => share(inputs.follow_rows, n),
    };
    let edges: Vec<Mutex<Vec<(i64, i64)>>> = round
        .iter()
        .map(|_| Mutex::new(Vec::with_capacity(room)))
        .collect();
    let fresh: Vec<Mutex<Vec<(i64, i64)>>> = round.iter().map(|_| Mutex::new(Vec::new())).collect();
    let without_posts: Vec<AtomicU64> = round.iter().map(|_| AtomicU64::new(0)).collect();
    let follow_rows = AtomicU64::new(0);
    for (i, night) in inputs.follows.iter().enumerate() {
        let to = match &inputs.follows_new {
            Some(new) if new[i] => &fresh,
            _ => &edges,
        };
        night.par_iter().try_for_each(|f| {
            parquet_io::read_parquet_columns(fs, f, &["follower", "followee"], &mut |b| {
                follow_rows.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
                let follower = columns::ids(f, b, "follower")?;
                let followee = columns::ids(f, b, "followee")?;
                let mut mine: Vec<Vec<(i64, i64)>> = vec![Vec::new(); round.len()];
                let mut counted = vec![0u64; round.len()];
                for (&a, &fan) in followee.values().iter().zip(follower.values().iter()) {
                    if let Some(s) = slot(round, n, a).filter(|_| inputs.builds(a)) {
                        if keep_all || posted[s].may_post.may_hold(a) {
                            mine[s].push((a, fan));
                        } else {
                            counted[s] += 1;
                        }
                    }
                }
                for (s, rows) in mine.into_iter().enumerate() {
                    lock(&to[s]).extend(rows);
                    without_posts[s].fetch_add(counted[s], Ordering::Relaxed);
                }
                Ok(())
            })
        })?;
    }
    let split = inputs.follows_new.is_some();
    let read = edges
        .into_iter()
        .zip(fresh)
        .zip(without_posts)
        .map(|((e, fresh), w)| Edges {
            edges: e.into_inner().unwrap_or_else(|p| p.into_inner()),
            fresh: split.then(|| fresh.into_inner().unwrap_or_else(|p| p.into_inner())),
            without_posts: w.into_inner(),
        })
        .collect();
    Ok((read, follow_rows.into_inner()))
}

/// Builds one partition's fan-out from its edges and its authors' newest posts. An author
/// with no post to serve is neither fanned out nor a celebrity: its edges have nothing to
/// carry, and its timeline is empty at read time.
fn partition_of(read: Edges, posted: Posted, options: &InboxOptions) -> Built {
    let Edges {
        mut edges,
        fresh,
        without_posts,
    } = read;
    edges.sort_unstable();
    edges.dedup();
    let fresh = fresh.map(|mut fresh| {
        fresh.sort_unstable();
        fresh.dedup();
        fresh.retain(|e| edges.binary_search(e).is_err());
        merge_disjoint(&mut edges, &fresh);
        fresh
    });
    let Posted {
        mut authors,
        posts,
        served,
        may_post,
        live,
        deleted,
    } = posted;
    drop(may_post);
    let mut stats = InboxStats {
        edges: edges.len() as u64 + without_posts,
        edges_without_posts: without_posts,
        posts: live,
        posts_deleted: deleted,
        ..InboxStats::default()
    };

    // Both are by uid: walk the edges' followees and the authors together.
    let mut next = authors.iter_mut().peekable();
    let mut start = 0;
    while start < edges.len() {
        let a = edges[start].0;
        let fans_n = edges[start..].iter().take_while(|(e, _)| *e == a).count();
        let fans = start..start + fans_n;
        start += fans_n;
        // Authors nobody follows keep no fans, and are left out below.
        while next.next_if(|author| author.uid < a).is_some() {}
        let Some(author) = next.next_if(|author| author.uid == a) else {
            stats.edges_without_posts += fans_n as u64;
            continue;
        };
        author.fans = fans;
        if fans_n as u64 > options.celebrity_threshold {
            author.celebrity = true;
            author.posts = author.posts.start..author.posts.start;
            stats.celebrities_skipped += 1;
            stats.edges_to_celebrities += fans_n as u64;
        } else {
            stats.edges_fanned_out += fans_n as u64;
        }
    }
    authors.retain(|a| !a.fans.is_empty());
    let mut built = Built {
        authors,
        edges,
        fresh,
        posts,
        served,
        stats,
    };
    built.stats.entries = built
        .authors
        .iter()
        .filter(|a| !a.celebrity)
        .map(|a| built.added(a))
        .sum();
    built
}

/// Merges `more` into `into`, both sorted and without a common element, in place: from the
/// back, so each element moves once.
fn merge_disjoint(into: &mut Vec<(i64, i64)>, more: &[(i64, i64)]) {
    let mut a = into.len();
    let mut b = more.len();
    into.resize(a + b, (0, 0));
    let mut to = into.len();
    while b > 0 {
        to -= 1;
        if a > 0 && into[a - 1] > more[b - 1] {
            a -= 1;
            into[to] = into[a];
        } else {
            b -= 1;
            into[to] = more[b];
        }
    }
}

/// Rows of the inbox table built and written at once: a partition's entries (up to K per
/// edge) are never all held as columns.
const WRITE_BATCH: usize = 64 * 1024;

/// Writes partition `p`'s rows as part `p` of both staged tables, the entries batch by batch.
fn write_part(
    fs: &FileSystems,
    staged: &[Staged; 2],
    p: u32,
    built: &Built,
    data_page_version: u8,
) -> Result<()> {
    let mut writer = staged[0].part_writer(fs, p, inbox_schema(), data_page_version)?;
    let mut columns = EntryColumns::default();
    let (mut celebrity, mut fans) = (Vec::new(), Vec::new());
    for a in &built.authors {
        if a.celebrity {
            if built.celebrity_changed(a) {
                celebrity.push(a.uid);
                fans.push(a.fans.len() as i64);
            }
            continue;
        }
        built.for_each_entry(a, false, &mut |(t, m, v), f| {
            columns.push(f, a.uid, m, t, v);
            if columns.uid.len() >= WRITE_BATCH {
                writer.write(&columns.take())?;
            }
            Ok(())
        })?;
    }
    if !columns.uid.is_empty() {
        writer.write(&columns.take())?;
    }
    writer.finish()?;
    let celebrities = RecordBatch::try_new(
        celebrities_schema(),
        vec![
            Arc::new(Int64Array::from(celebrity)),
            Arc::new(Int64Array::from(fans)),
        ],
    )
    .expect("columns of the schema");
    staged[1].write_part(fs, p, &celebrities, data_page_version)
}

/// The inbox table's columns of the entries not yet written.
#[derive(Default)]
struct EntryColumns {
    uid: Vec<i64>,
    followee: Vec<i64>,
    mid: Vec<i64>,
    created: Vec<i64>,
    version: Vec<i64>,
}

impl EntryColumns {
    fn push(&mut self, uid: i64, followee: i64, mid: i64, created: i64, version: i64) {
        self.uid.push(uid);
        self.followee.push(followee);
        self.mid.push(mid);
        self.created.push(created);
        self.version.push(version);
    }

    /// The entries held, as one batch; empties the columns.
    fn take(&mut self) -> RecordBatch {
        let c = std::mem::take(self);
        RecordBatch::try_new(
            inbox_schema(),
            vec![
                Arc::new(Int64Array::from(c.uid)),
                Arc::new(Int64Array::from(c.followee)),
                Arc::new(Int64Array::from(c.mid)),
                Arc::new(TimestampMillisecondArray::from(c.created).with_timezone("UTC")),
                Arc::new(Int64Array::from(c.version)),
            ],
        )
        .expect("columns of the schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_add_up_and_must_agree_on_what_they_read() {
        let slice = |edges, entries| InboxStats {
            follow_rows: 100,
            post_rows: 40,
            edges,
            entries,
            celebrities_skipped: 1,
            k: 3,
            celebrity_threshold: 4,
            partitions: 6,
            ..InboxStats::default()
        };
        let whole = InboxStats::of_slices(&[slice(10, 20), slice(5, 7)]).unwrap();
        assert_eq!(
            (whole.edges, whole.entries, whole.celebrities_skipped),
            (15, 27, 2)
        );
        assert_eq!((whole.follow_rows, whole.post_rows, whole.k), (100, 40, 3));
        assert_eq!(whole.partitions, 6);
        let other = InboxStats {
            post_rows: 41,
            ..slice(1, 1)
        };
        assert_eq!(InboxStats::of_slices(&[slice(1, 1), other]), None);
        assert_eq!(InboxStats::of_slices(&[]), None);
    }

    proptest::proptest! {
        /// Every author passes the filter, and few others do.
        #[test]
        fn the_author_filter_misses_no_author(
            authors in proptest::collection::hash_set(1i64..i64::MAX, 0..3000),
            others in proptest::collection::vec(1i64..i64::MAX, 2000),
        ) {
            let mut filter = MayPost::with_room(authors.len());
            for &a in &authors {
                filter.insert(a);
            }
            for &a in &authors {
                proptest::prop_assert!(filter.may_hold(a));
            }
            let passed = others
                .iter()
                .filter(|o| !authors.contains(o) && filter.may_hold(**o))
                .count();
            proptest::prop_assert!(passed < others.len() / 8, "{} of {} passed", passed, others.len());
        }
    }

    proptest::proptest! {
        /// The in-place merge equals a sort of the union.
        #[test]
        fn merging_disjoint_edges_is_a_sorted_union(
            edges in proptest::collection::btree_set((0i64..50, 0i64..50), 0..200),
            take in proptest::collection::vec(proptest::bool::ANY, 200),
        ) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for (e, t) in edges.iter().zip(take.iter().cycle()) {
                if *t { a.push(*e) } else { b.push(*e) }
            }
            merge_disjoint(&mut a, &b);
            proptest::prop_assert_eq!(a, edges.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn partitions_fit_the_budget_in_full_rounds() {
        // Little work: one partition, however many threads.
        assert_eq!(partitions(1_000, 1_000, 1 << 30, 2), 1);
        assert_eq!(partitions(1_000_000, 100_000, 1 << 30, 2), 1);
        // Work worth splitting: a partition a thread, even when one would fit.
        assert_eq!(partitions(5_000_000, 0, 1 << 30, 2), 2);
        // 21.1 M follows and 4.1 M posts at 1 GiB on 2 threads: the edges and kept posts,
        // 698 MB, over 512 MiB a thread are 2; at 512 MiB, 3 in two full rounds are 4.
        assert_eq!(partitions(21_100_000, 4_100_000, 1 << 30, 2), 2);
        assert_eq!(partitions(21_100_000, 4_100_000, 1 << 29, 2), 4);
        // Reading the posts can be the larger need.
        let n = partitions(0, 3 * (1 << 29) / BYTES_PER_POST_READ, 1 << 30, 2);
        assert_eq!(n, 4);
        for threads in 1..=8 {
            let n = partitions(10_000_000, 2_000_000, 64 << 20, threads);
            assert_eq!(
                n as usize % threads,
                0,
                "{n} partitions on {threads} threads"
            );
            let reading = 2_000_000 * BYTES_PER_POST_READ;
            let holding = 10_000_000 * BYTES_PER_FOLLOW + 2_000_000 * BYTES_PER_POST_KEPT;
            let per = reading.max(holding) / u64::from(n);
            assert!(per * threads as u64 <= 64 << 20, "{per} bytes a partition");
        }
    }
}

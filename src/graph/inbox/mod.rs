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
use rustc_hash::FxHashMap;
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
    /// Of those, the edges no night up to the base gave ([`FollowNights::split_after`]):
    /// sorted; `None` when the run was not split.
    fresh: Option<Vec<(i64, i64)>>,
    /// `(created_at, mid, version)`: each author's newest K, newest first, side by side.
    posts: Vec<(i64, i64, i64)>,
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
        let fresh = self.fresh.as_ref()?;
        let from = fresh.partition_point(|&(a, _)| a < author.uid);
        let to = fresh.partition_point(|&(a, _)| a <= author.uid);
        Some(fresh[from..to].iter().map(|&(_, f)| f))
    }

    /// The posts `author` fans out: `(created_at, mid, version)`, newest first.
    pub fn posts(&self, author: &Author) -> &[(i64, i64, i64)] {
        &self.posts[author.posts.clone()]
    }
}

/// The follows a run reads, as the compacted history hands them out (runs, then nights),
/// oldest first, and where the items after a base night begin. The feeds a base served reach
/// exactly the edges of the nights up to it, so the fans the base did not serve are the edges
/// only later nights give (docs/nightly.md, "Graph outputs across nights").
pub struct FollowNights {
    taken: Vec<history::Taken>,
    /// The first item after the base, when the run is split at one.
    fresh_from: Option<usize>,
}

impl FollowNights {
    /// The committed follows of `clean` up to `date`.
    pub fn take(fs: &FileSystems, clean: &Location, date: &str) -> Result<FollowNights> {
        Ok(FollowNights {
            taken: history::take_history(fs, &clean.join("follows"), date)?,
            fresh_from: None,
        })
    }

    /// Every night read, with its stamp, oldest first.
    pub fn covered(&self) -> Vec<(String, i64)> {
        history::covered(&self.taken)
    }

    /// Splits the items at `base` when the base's nights are unchanged
    /// ([`history::split_after`]); returns whether it did.
    pub fn split_after(&mut self, base: &str, then: &[(String, i64)]) -> bool {
        self.fresh_from = history::split_after(&self.taken, base, then);
        self.fresh_from.is_some()
    }
}

/// The nights the job reads, oldest first.
struct Inputs {
    follows: Vec<Vec<FileEntry>>,
    /// The first follows item after the base, when split ([`FollowNights`]).
    fresh_from: Option<usize>,
    posts: Vec<Vec<FileEntry>>,
    /// Rows of every night (from the footers).
    follow_rows: u64,
    post_rows: u64,
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
/// write) leaves nothing committed.
pub fn run(
    fs: &FileSystems,
    clean: &Location,
    output: &Location,
    options: &InboxOptions,
    emit: &mut dyn FnMut(&Built) -> Result<()>,
) -> Result<InboxStats> {
    let follows = FollowNights::take(fs, clean, &options.date)?;
    run_over(fs, clean, output, options, follows, emit)
}

/// [`run`] over the follows given, split at a base or not.
pub fn run_over(
    fs: &FileSystems,
    clean: &Location,
    output: &Location,
    options: &InboxOptions,
    follows: FollowNights,
    emit: &mut dyn FnMut(&Built) -> Result<()>,
) -> Result<InboxStats> {
    if options.k == 0 {
        return Err(Error::Usage("--k must be at least 1".into()));
    }
    let nights = |entity| -> Result<Vec<Vec<FileEntry>>> {
        Ok(partition::history_nights(fs, clean, entity, &options.date)?
            .into_iter()
            .map(|(_, files)| files)
            .collect())
    };
    let mut inputs = Inputs {
        follows: follows.taken.into_iter().map(|t| t.files).collect(),
        fresh_from: follows.fresh_from,
        posts: nights("posts")?,
        follow_rows: 0,
        post_rows: 0,
    };
    if inputs.follows.is_empty() {
        return Err(Error::BadInput {
            path: clean.to_string(),
            line: 0,
            reason: format!("no committed follows up to dt={}", options.date),
        });
    }
    let follow_rows = parquet_io::parquet_rows(fs, inputs.follows.iter().flatten())?;
    let post_rows = parquet_io::parquet_rows(fs, inputs.posts.iter().flatten())?;
    let threads = rayon::current_num_threads().max(1);
    let slice = options.slice;
    let (n, mine) = slice.cut(threads, |t| {
        partitions(follow_rows, post_rows, options.memory_budget, t)
    });
    (inputs.follow_rows, inputs.post_rows) = (follow_rows, post_rows);
    log::info!("inbox: {follow_rows} follow and {post_rows} post rows in {n} partitions");

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
            ..InboxStats::default()
        };
        let bar = crate::progress::count(mine.len() as u64, "inbox");
        for round in mine.chunks(threads) {
            let (maps, post_rows) = read_posts(fs, &inputs, round, n)?;
            let posted: Vec<Posted> = maps
                .into_par_iter()
                .map(|m| newest_posts(m, options.k))
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
        partition::commit(fs, &staged)?;
        Ok(stats)
    })();
    if result.is_err() {
        partition::abandon(fs, &staged);
    }
    result
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

/// Reads every post once for the partitions of `round` (of `n`), each going to the partition
/// of its author: the newest night's record of each mid, the files of a night side by side.
/// Returns each partition's posts by mid, in round order, and the post rows read.
fn read_posts(
    fs: &FileSystems,
    inputs: &Inputs,
    round: &[u32],
    n: u32,
) -> Result<(Vec<FxHashMap<i64, Post>>, u64)> {
    let slot = |id: i64| slot(round, n, id);
    // A later record by an author elsewhere, or without author, removes a mid.
    let posts = Newest::with_room(round.len(), share(inputs.post_rows, n));
    let post_rows = AtomicU64::new(0);
    for night in &inputs.posts {
        let holding = posts.holding();
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
                posts.merge(found, &others, &holding);
                Ok(())
            })
        })?;
    }
    Ok((posts.into_maps(), post_rows.into_inner()))
}

/// A partition's authors with a post to serve, by uid (their fans not yet known), their
/// newest K posts side by side, and the filter that routes the follows.
struct Posted {
    authors: Vec<Author>,
    posts: Vec<(i64, i64, i64)>,
    may_post: MayPost,
    live: u64,
    deleted: u64,
}

/// The newest K posts of each author of a partition's posts (deleted ones left out), kept in
/// place of the sorted posts.
fn newest_posts(posts: FxHashMap<i64, Post>, k: usize) -> Posted {
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
    let count = by_author.chunk_by(|x, y| x.0 == y.0).count();
    let mut authors = Vec::with_capacity(count);
    let mut may_post = MayPost::with_room(count);
    // `(author, created, mid)` becomes `(created, mid, version)`, written at or before where
    // it was read.
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
        may_post.insert(uid);
        authors.push(Author {
            uid,
            fans: 0..0,
            posts: start..kept,
            celebrity: false,
        });
    }
    by_author.truncate(kept);
    Posted {
        authors,
        posts: by_author,
        may_post,
        live,
        deleted,
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
    let room = share(inputs.follow_rows, n);
    let edges: Vec<Mutex<Vec<(i64, i64)>>> = round
        .iter()
        .map(|_| Mutex::new(Vec::with_capacity(room)))
        .collect();
    let fresh: Vec<Mutex<Vec<(i64, i64)>>> = round.iter().map(|_| Mutex::new(Vec::new())).collect();
    let without_posts: Vec<AtomicU64> = round.iter().map(|_| AtomicU64::new(0)).collect();
    let follow_rows = AtomicU64::new(0);
    for (i, night) in inputs.follows.iter().enumerate() {
        let to = match inputs.fresh_from {
            Some(from) if i >= from => &fresh,
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
                    if let Some(s) = slot(round, n, a) {
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
    let split = inputs.fresh_from.is_some();
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
            stats.entries += (fans_n * author.posts.len()) as u64;
        }
    }
    authors.retain(|a| !a.fans.is_empty());
    Built {
        authors,
        edges,
        fresh,
        posts,
        stats,
    }
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
            celebrity.push(a.uid);
            fans.push(a.fans.len() as i64);
            continue;
        }
        for &(t, m, v) in built.posts(a) {
            for f in built.fans(a) {
                columns.push(f, a.uid, m, t, v);
                if columns.uid.len() >= WRITE_BATCH {
                    writer.write(&columns.take())?;
                }
            }
        }
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

    fn taken(nights: &[(&str, i64)]) -> history::Taken {
        history::Taken {
            date: nights.last().unwrap().0.to_string(),
            folder: Location::Local("/nowhere".into()),
            files: Vec::new(),
            nights: nights.iter().map(|n| n.0.to_string()).collect(),
            stamps: nights.iter().map(|n| n.1).collect(),
        }
    }

    #[test]
    fn follows_split_at_a_base_only_when_its_nights_are_unchanged() {
        let follows = || FollowNights {
            taken: vec![
                taken(&[("2026-11-01", 1), ("2026-11-02", 2)]),
                taken(&[("2026-11-03", 3)]),
                taken(&[("2026-11-04", 4)]),
            ],
            fresh_from: None,
        };
        let then = |n: &[(&str, i64)]| -> Vec<(String, i64)> {
            n.iter().map(|(d, s)| (d.to_string(), *s)).collect()
        };
        let three = then(&[("2026-11-01", 1), ("2026-11-02", 2), ("2026-11-03", 3)]);
        let mut f = follows();
        assert!(f.split_after("2026-11-03", &three));
        assert_eq!(f.fresh_from, Some(2));
        // A rerun of the base's night: nothing after it.
        let mut f = follows();
        let four = then(&[
            ("2026-11-01", 1),
            ("2026-11-02", 2),
            ("2026-11-03", 3),
            ("2026-11-04", 4),
        ]);
        assert!(f.split_after("2026-11-04", &four));
        assert_eq!(f.fresh_from, Some(3));
        // A night up to the base restamped (rerun), or late (not seen by the base).
        let mut f = follows();
        let restamped = then(&[("2026-11-01", 1), ("2026-11-02", 9), ("2026-11-03", 3)]);
        assert!(!f.split_after("2026-11-03", &restamped));
        assert_eq!(f.fresh_from, None);
        let mut f = follows();
        assert!(!f.split_after("2026-11-03", &three[..2]));
        // A run that holds nights on both sides of the base.
        let mut f = follows();
        assert!(!f.split_after("2026-11-01", &three[..1]));
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

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
//! ([`crate::hash::id_bucket`]) so a partition fits the memory budget; a round of partitions
//! is built in parallel, written as the part files of their numbers, then handed to the
//! caller in partition order.
//!
//! Invariants: every edge of a fanned-out author gets exactly min(K, its posts) entries, with
//! strictly decreasing versions ([`feed::versions`]); every edge of a celebrity is reported
//! once as a celebrity edge; both tables are committed together, or neither is.

pub mod feed;

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, TimestampMillisecondArray};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::dataset::columns;
use crate::dataset::inbox::{celebrities_schema, inbox_schema, CELEBRITIES_TABLE, INBOX_TABLE};
use crate::dataset::partition::{self, Staged};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

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
}

/// What a run read and wrote.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
}

/// One author's fan-out: its newest posts (newest first, with their versions) and its fans.
#[derive(Clone, Debug)]
pub struct Author {
    pub uid: i64,
    pub fans: Vec<i64>,
    /// `(created_at, mid, version)`, newest first; empty for a celebrity.
    pub posts: Vec<(i64, i64, i64)>,
    pub celebrity: bool,
}

/// One partition's authors, by uid.
pub struct Built {
    pub authors: Vec<Author>,
    stats: InboxStats,
}

/// The nights the job reads, oldest first.
struct Inputs {
    follows: Vec<Vec<FileEntry>>,
    posts: Vec<Vec<FileEntry>>,
}

/// Bytes an input row may cost in a partition: an edge's sort tuple, a post's map entry, and
/// the entries they become.
const BYTES_PER_ROW: u64 = 48;

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
    if options.k == 0 {
        return Err(Error::Usage("--k must be at least 1".into()));
    }
    let nights = |entity| -> Result<Vec<Vec<FileEntry>>> {
        Ok(partition::history_nights(fs, clean, entity, &options.date)?
            .into_iter()
            .map(|(_, files)| files)
            .collect())
    };
    let inputs = Inputs {
        follows: nights("follows")?,
        posts: nights("posts")?,
    };
    if inputs.follows.is_empty() {
        return Err(Error::BadInput {
            path: clean.to_string(),
            line: 0,
            reason: format!("no committed follows up to dt={}", options.date),
        });
    }
    let rows = partition::parquet_rows(fs, inputs.follows.iter().chain(&inputs.posts).flatten())?;
    let threads = rayon::current_num_threads().max(1);
    let per_pass = (options.memory_budget / threads as u64).max(1);
    let bytes = rows.saturating_mul(BYTES_PER_ROW + 16 * options.k as u64);
    let n = bytes.div_ceil(per_pass).clamp(1, 4096) as u32;
    log::info!("inbox: {rows} follow and post rows in {n} partitions");

    let dt = format!("dt={}", options.date);
    let tag = partition::run_tag();
    let staged = [
        Staged::new(&output.join(INBOX_TABLE), &dt, &tag),
        Staged::new(&output.join(CELEBRITIES_TABLE), &dt, &tag),
    ];
    let result = (|| {
        let mut stats = InboxStats {
            partitions: n,
            celebrity_threshold: options.celebrity_threshold,
            k: options.k as u64,
            ..InboxStats::default()
        };
        let bar = crate::progress::count(u64::from(n), "inbox");
        let all: Vec<u32> = (0..n).collect();
        for round in all.chunks(threads) {
            let built: Vec<Built> = round
                .par_iter()
                .map(|&p| {
                    let built = partition_of(fs, &inputs, p, n, options)?;
                    write_part(fs, &staged, p, &built, options.data_page_version)?;
                    Ok(built)
                })
                .collect::<Result<_>>()?;
            for b in &built {
                stats.add(&b.stats);
                stats.follow_rows = b.stats.follow_rows;
                stats.post_rows = b.stats.post_rows;
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

/// A post as read: its author, time, and whether it is deleted.
#[derive(Clone, Copy)]
struct Post {
    author: i64,
    created: i64,
    deleted: bool,
}

fn partition_of(
    fs: &FileSystems,
    inputs: &Inputs,
    p: u32,
    n: u32,
    options: &InboxOptions,
) -> Result<Built> {
    let mine = |uid: i64| crate::hash::id_bucket(uid, n) == p;
    let mut stats = InboxStats::default();

    // Follows of the followees here, as (followee, follower), deduplicated.
    let mut edges: Vec<(i64, i64)> = Vec::new();
    for night in &inputs.follows {
        for f in night {
            partition::read_parquet_columns(fs, f, &["follower", "followee"], &mut |b| {
                stats.follow_rows += b.num_rows() as u64;
                let follower = columns::ids(f, b, "follower")?;
                let followee = columns::ids(f, b, "followee")?;
                for i in 0..b.num_rows() {
                    if mine(followee.value(i)) {
                        edges.push((followee.value(i), follower.value(i)));
                    }
                }
                Ok(())
            })?;
        }
    }
    edges.sort_unstable();
    edges.dedup();
    stats.edges = edges.len() as u64;

    // Posts by authors here, the newest night's record of each mid (a later record by an
    // author elsewhere, or without author, removes it).
    let mut posts: FxHashMap<i64, Post> = FxHashMap::default();
    for night in &inputs.posts {
        for f in night {
            let cols = ["mid", "uid", "created_at", "is_deleted"];
            partition::read_parquet_columns(fs, f, &cols, &mut |b| {
                stats.post_rows += b.num_rows() as u64;
                let mid = columns::ids(f, b, "mid")?;
                let uid = columns::opt_ids(b, "uid");
                let created = columns::times(f, b, "created_at")?;
                let deleted = b
                    .column_by_name("is_deleted")
                    .and_then(|c| c.as_boolean_opt());
                for i in 0..b.num_rows() {
                    let m = mid.value(i);
                    match columns::opt(uid, i).filter(|&u| mine(u)) {
                        Some(author) if created.is_valid(i) => {
                            let deleted = deleted.is_some_and(|d| d.is_valid(i) && d.value(i));
                            let post = Post {
                                author,
                                created: created.value(i),
                                deleted,
                            };
                            posts.insert(m, post);
                        }
                        _ if !posts.is_empty() => {
                            posts.remove(&m);
                        }
                        _ => {}
                    }
                }
                Ok(())
            })?;
        }
    }
    let mut by_author: Vec<(i64, i64, i64)> = Vec::with_capacity(posts.len());
    for (mid, post) in posts {
        if post.deleted {
            stats.posts_deleted += 1;
        } else {
            stats.posts += 1;
            by_author.push((post.author, post.created, mid));
        }
    }
    // By author, newest first (ties by mid ascending: the feed order).
    by_author.sort_unstable_by_key(|&(a, created, mid)| (a, std::cmp::Reverse(created), mid));

    let mut authors = Vec::new();
    let mut rest_posts = &by_author[..];
    let mut rest_edges = &edges[..];
    while let Some(&(a, _)) = rest_edges.first() {
        let fans_n = rest_edges.iter().take_while(|(e, _)| *e == a).count();
        let fans: Vec<i64> = rest_edges[..fans_n].iter().map(|&(_, f)| f).collect();
        rest_edges = &rest_edges[fans_n..];
        // Skip the posts of authors nobody follows.
        let skip = rest_posts.iter().take_while(|(u, ..)| *u < a).count();
        rest_posts = &rest_posts[skip..];
        let own = rest_posts.iter().take_while(|(u, ..)| *u == a).count();
        let newest = &rest_posts[..own.min(options.k)];
        rest_posts = &rest_posts[own..];
        let celebrity = fans.len() as u64 > options.celebrity_threshold;
        if celebrity {
            stats.celebrities_skipped += 1;
            stats.edges_to_celebrities += fans.len() as u64;
        } else if newest.is_empty() {
            stats.edges_without_posts += fans.len() as u64;
            continue;
        } else {
            stats.edges_fanned_out += fans.len() as u64;
            stats.entries += (fans.len() * newest.len()) as u64;
        }
        let posts = if celebrity {
            Vec::new()
        } else {
            let times: Vec<i64> = newest.iter().map(|&(_, t, _)| t).collect();
            newest
                .iter()
                .zip(versions(&times))
                .map(|(&(_, t, mid), v)| (t, mid, v))
                .collect()
        };
        authors.push(Author {
            uid: a,
            fans,
            posts,
            celebrity,
        });
    }
    Ok(Built { authors, stats })
}

/// Writes partition `p`'s rows as part `p` of both staged tables.
fn write_part(
    fs: &FileSystems,
    staged: &[Staged; 2],
    p: u32,
    built: &Built,
    data_page_version: u8,
) -> Result<()> {
    let (mut uid, mut followee, mut mid, mut created, mut version) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut celebrity, mut fans) = (Vec::new(), Vec::new());
    for a in &built.authors {
        if a.celebrity {
            celebrity.push(a.uid);
            fans.push(a.fans.len() as i64);
            continue;
        }
        for &(t, m, v) in &a.posts {
            for &f in &a.fans {
                uid.push(f);
                followee.push(a.uid);
                mid.push(m);
                created.push(t);
                version.push(v);
            }
        }
    }
    let inbox = RecordBatch::try_new(
        inbox_schema(),
        vec![
            Arc::new(Int64Array::from(uid)),
            Arc::new(Int64Array::from(followee)),
            Arc::new(Int64Array::from(mid)),
            Arc::new(TimestampMillisecondArray::from(created).with_timezone("UTC")),
            Arc::new(Int64Array::from(version)),
        ],
    )
    .expect("columns of the schema");
    let celebrities = RecordBatch::try_new(
        celebrities_schema(),
        vec![
            Arc::new(Int64Array::from(celebrity)),
            Arc::new(Int64Array::from(fans)),
        ],
    )
    .expect("columns of the schema");
    staged[0].write_part(fs, p, &inbox, data_page_version)?;
    staged[1].write_part(fs, p, &celebrities, data_page_version)
}

//! The absolute counters of the `user` and `post` tables and the mention edges of
//! `user_post`, computed in batch over every night loaded so far, in bounded memory.
//!
//! The counters are those of the union of the nights' cleaned data, deduplicated across
//! nights by natural key (follow pair, mid, cid), the later night's record winning: what one
//! load over that union would write. See docs/nightly.md for how
//! [`super::state`] turns them into the cells a night writes.
//!
//! The key space is cut into N partitions, N chosen from the input's row counts (Parquet
//! metadata) so one partition's maps fit the memory budget. Pass p reads only the id columns
//! of the inputs, oldest night first, and keeps:
//! - the users whose uid hashes to p: followers, following, posts, reposts and comments
//!   received (a uid seen only in follows or as an author counts too);
//! - the posts owned by p (by their newest author's uid, or by their mid when the author is
//!   unknown): the reposts and comments they received, counted from the graph;
//! - the screen names hashing to p, to resolve the mentions (`at_users`) naming them.
//!
//! Invariants: every uid, post and name belongs to exactly one partition, so the passes
//! together give exactly what one pass over everything would; a natural key counts once
//! however many nights crawled it, with its newest night's attributes (a post whose author
//! changed is dropped by the partition of its old author); a name used by two users means
//! the one read last (newest night, then file order); the hashes are fixed functions of the
//! ids, so a resumed run cuts the same partitions.

use arrow::array::{Array, AsArray};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::dataset::columns::{ids, nullable_ids, opt, opt_ids, times};
use crate::dataset::parquet_io;
use crate::error::Result;
use crate::hdfs::{FileEntry, FileSystems};

/// Bytes a user costs in a pass: its counters' map entry and its name's, with the tables'
/// slack.
const BYTES_PER_USER: u64 = 192;
/// Bytes a post costs in a pass's map of owned posts.
const BYTES_PER_POST: u64 = 96;
/// Bytes a repost or a comment costs in its map (id to target, 16 bytes and the slack).
const BYTES_PER_REFERENCE: u64 = 40;
/// Bytes one follow edge costs in a pass: its two ends, in the lists of the partitions of
/// its follower and of its followee.
const BYTES_PER_EDGE: u64 = 32;

/// Counters of the users and posts of one partition, sorted by key.
#[derive(Debug, Default, PartialEq)]
pub struct PartitionCounters {
    /// uid → [followers, following, posts, reposts received, comments received]
    pub users: Vec<(i64, UserCounts)>,
    /// mid → (author uid or 0, created_at ms, reposts, comments)
    pub posts: Vec<(i64, PostCounts)>,
    /// Mentions whose name hashes here but no user has.
    pub unresolved_mentions: u64,
}

impl PartitionCounters {
    /// From a partition's maps, each sorted by key.
    pub(super) fn sorted<S>(
        users: std::collections::HashMap<i64, UserCounts, S>,
        posts: std::collections::HashMap<i64, PostCounts, S>,
        unresolved_mentions: u64,
    ) -> PartitionCounters {
        let mut users: Vec<(i64, UserCounts)> = users.into_iter().collect();
        users.sort_unstable_by_key(|(uid, _)| *uid);
        let mut posts: Vec<(i64, PostCounts)> = posts.into_iter().collect();
        posts.sort_unstable_by_key(|(mid, _)| *mid);
        PartitionCounters {
            users,
            posts,
            unresolved_mentions,
        }
    }
}

/// followers, following, posts, reposts received, comments received.
pub type UserCounts = [i64; 5];
/// author uid (0 when unknown), created_at ms, reposts, comments.
pub type PostCounts = (i64, i64, i64, i64);

/// A mention of a known user: `target` is named in post `mid` by `by`, at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mention {
    pub target: i64,
    pub by: i64,
    pub at: i64,
    pub mid: i64,
}

/// The cleaned parts the counters read, per entity: every night of the history, oldest
/// night first (a night's files together), so a later night's record replaces an earlier one.
pub struct Inputs<'a> {
    pub users: &'a [FileEntry],
    pub follows: &'a [FileEntry],
    pub posts: &'a [FileEntry],
    pub comments: &'a [FileEntry],
    /// The posts whose mentions the run writes (the night being loaded); the names they
    /// mention are resolved against every night's users.
    pub mention_posts: &'a [FileEntry],
}

/// The entities the counters read, by their names in [`Inputs::of`].
pub const COUNTED: [&str; 4] = ["users", "follows", "posts", "comments"];

impl<'a> Inputs<'a> {
    /// The inputs in `files`, by entity ([`COUNTED`]; one not there is empty).
    pub fn of(
        files: &'a std::collections::BTreeMap<&str, Vec<FileEntry>>,
        mention_posts: &'a [FileEntry],
    ) -> Inputs<'a> {
        let of = |entity: &str| files.get(entity).map_or(&[][..], Vec::as_slice);
        Inputs {
            users: of("users"),
            follows: of("follows"),
            posts: of("posts"),
            comments: of("comments"),
            mention_posts,
        }
    }
}

/// How many partitions keep one pass within `budget` bytes. The users (counters and names)
/// stay for the whole pass; the follow ends are counted and dropped before the posts are
/// read, so the peak is the users plus the larger of the follow ends and the posts with their
/// reposts and comments (each kept once however many nights crawled it).
pub fn partitions_for(fs: &FileSystems, inputs: &Inputs<'_>, budget: u64) -> Result<u32> {
    let rows = |files: &[FileEntry]| parquet_io::parquet_rows(fs, files);
    let bytes = peak_bytes(
        rows(inputs.users)?,
        rows(inputs.follows)?,
        rows(inputs.posts)?,
        rows(inputs.comments)?,
    );
    Ok(bytes.div_ceil(budget.max(1)).clamp(1, 4096) as u32)
}

/// The bytes one pass over everything would hold at its peak (see [`partitions_for`]).
fn peak_bytes(users: u64, follows: u64, posts: u64, comments: u64) -> u64 {
    let ends = follows.saturating_mul(BYTES_PER_EDGE);
    let posts = posts
        .saturating_mul(BYTES_PER_POST + BYTES_PER_REFERENCE)
        .saturating_add(comments.saturating_mul(BYTES_PER_REFERENCE));
    users
        .saturating_mul(BYTES_PER_USER)
        .saturating_add(ends.max(posts))
}

/// The partition of a uid (and of the posts of that author).
pub fn uid_partition(uid: i64, n: u32) -> u32 {
    crate::hash::id_bucket(uid, n)
}

/// The partition of a post whose author is unknown.
fn orphan_post_partition(mid: i64, n: u32) -> u32 {
    crate::hash::bucket(crate::hash::splitmix64(mid as u64 ^ 0x5bd1_e995), n as u64) as u32
}

/// The partition owning a post: its author's, or by its mid when the author is unknown.
pub fn post_partition(author: Option<i64>, mid: i64, n: u32) -> u32 {
    match author {
        Some(uid) => uid_partition(uid, n),
        None => orphan_post_partition(mid, n),
    }
}

fn name_partition(name: &str, n: u32) -> u32 {
    crate::hash::bucket(crate::hash::text(name.as_bytes()), n as u64) as u32
}

/// Counts the runs of equal first elements of sorted, deduplicated pairs into `slot`.
fn count_sorted(users: &mut FxHashMap<i64, UserCounts>, mut ends: Vec<(i64, i64)>, slot: usize) {
    ends.sort_unstable();
    ends.dedup();
    let mut rest = &ends[..];
    while let Some(&(u, _)) = rest.first() {
        let run = rest.iter().take_while(|(x, _)| *x == u).count();
        users.entry(u).or_default()[slot] += run as i64;
        rest = &rest[run..];
    }
}

/// Computes partition `p` of `n`; `mention` receives the resolved mentions of the names in
/// this partition made by [`Inputs::mention_posts`], in file order (only for posts with a
/// known author).
pub fn compute(
    fs: &FileSystems,
    inputs: &Inputs<'_>,
    p: u32,
    n: u32,
    mention: &mut dyn FnMut(Mention) -> Result<()>,
) -> Result<PartitionCounters> {
    let mine = |uid: i64| uid_partition(uid, n) == p;
    let mut users: FxHashMap<i64, UserCounts> = FxHashMap::default();
    let mut names: FxHashMap<String, i64> = FxHashMap::default();
    for_users(fs, inputs.users, |u, name| {
        if mine(u) {
            users.entry(u).or_default();
        }
        if let Some(name) = name.filter(|name| name_partition(name, n) == p) {
            names.insert(name.to_string(), u);
        }
    })?;
    // Follow edges by their two ends: a pair crawled on several nights counts once.
    let (mut out_ends, mut in_ends) = (Vec::new(), Vec::new());
    for_pairs(fs, inputs.follows, |a, e| {
        if mine(a) {
            out_ends.push((a, e));
        }
        if mine(e) {
            in_ends.push((e, a));
        }
    })?;
    count_sorted(&mut users, in_ends, 0);
    count_sorted(&mut users, out_ends, 1);

    // Posts: the newest night's record of each mid decides its author, so an older record
    // owned here is dropped when a newer one is owned elsewhere.
    let mut posts: FxHashMap<i64, PostCounts> = FxHashMap::default();
    for_posts(fs, inputs.posts, &POST_OWNERS, |m, author, at, _| {
        if post_partition(author, m, n) == p {
            posts.insert(m, (author.unwrap_or(0), at, 0, 0));
        } else if !posts.is_empty() {
            posts.remove(&m);
        }
    })?;
    for (author, ..) in posts.values() {
        if *author != 0 {
            users.entry(*author).or_default()[2] += 1;
        }
    }
    // Reposts and comments of the posts owned here, each counted once (by its own mid or cid)
    // with the target its newest record names.
    let mut reposts: FxHashMap<i64, i64> = FxHashMap::default();
    for_posts(fs, inputs.posts, &POST_TARGETS, |m, _, _, rt| {
        match rt.filter(|r| posts.contains_key(r)) {
            Some(r) => {
                reposts.insert(m, r);
            }
            None if !reposts.is_empty() => {
                reposts.remove(&m);
            }
            None => {}
        }
    })?;
    let mut comments: FxHashMap<i64, i64> = FxHashMap::default();
    for_comments(fs, inputs.comments, |c, m| {
        if let Some(m) = m.filter(|m| posts.contains_key(m)) {
            comments.insert(c, m);
        } else if !comments.is_empty() {
            comments.remove(&c);
        }
    })?;
    for r in reposts.into_values() {
        received(&mut posts, &mut users, r, 2);
    }
    for m in comments.into_values() {
        received(&mut posts, &mut users, m, 3);
    }

    let unresolved_mentions = mentions(fs, inputs.mention_posts, p, n, &names, mention)?;
    Ok(PartitionCounters::sorted(users, posts, unresolved_mentions))
}

/// The columns of a post record [`for_posts`] reads: who owns it and when (`POST_OWNERS`),
/// what it reposts (`POST_TARGETS`), or all of it (`POST_RECORDS`).
pub(super) const POST_OWNERS: [&str; 3] = ["mid", "uid", "created_at"];
pub(super) const POST_TARGETS: [&str; 2] = ["mid", "retweet_mid"];
pub(super) const POST_RECORDS: [&str; 4] = ["mid", "uid", "created_at", "retweet_mid"];

/// Each user record, in file order: uid and screen name.
pub(super) fn for_users(
    fs: &FileSystems,
    files: &[FileEntry],
    mut f: impl FnMut(i64, Option<&str>),
) -> Result<()> {
    for file in files {
        parquet_io::read_parquet_columns(fs, file, &["uid", "screen_name"], &mut |b| {
            let uid = ids(file, b, "uid")?;
            let name = crate::dataset::columns::opt_texts(b, "screen_name");
            for i in 0..b.num_rows() {
                f(
                    uid.value(i),
                    name.filter(|c| !c.is_null(i)).map(|c| c.value(i)),
                );
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Each follow record, in file order: follower and followee.
pub(super) fn for_pairs(
    fs: &FileSystems,
    files: &[FileEntry],
    mut f: impl FnMut(i64, i64),
) -> Result<()> {
    for file in files {
        parquet_io::read_parquet_columns(fs, file, &["follower", "followee"], &mut |b| {
            let (a, e) = (ids(file, b, "follower")?, ids(file, b, "followee")?);
            for (&a, &e) in a.values().iter().zip(e.values()) {
                f(a, e);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Each post record, in file order, of the `columns` read (one of the `POST_*`): mid,
/// author, time (0 when not read) and repost target.
pub(super) fn for_posts(
    fs: &FileSystems,
    files: &[FileEntry],
    columns: &[&str],
    mut f: impl FnMut(i64, Option<i64>, i64, Option<i64>),
) -> Result<()> {
    let with_time = columns.contains(&"created_at");
    for file in files {
        parquet_io::read_parquet_columns(fs, file, columns, &mut |b| {
            let mid = ids(file, b, "mid")?;
            let (uid, rt) = (opt_ids(b, "uid"), opt_ids(b, "retweet_mid"));
            let created = match with_time {
                true => Some(times(file, b, "created_at")?),
                false => None,
            };
            for i in 0..b.num_rows() {
                let at = created.map_or(0, |c| c.value(i));
                f(mid.value(i), opt(uid, i), at, opt(rt, i));
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Each comment record, in file order: cid and the post it comments (`None` when the crawl
/// did not record it: the comment counts towards no post).
pub(super) fn for_comments(
    fs: &FileSystems,
    files: &[FileEntry],
    mut f: impl FnMut(i64, Option<i64>),
) -> Result<()> {
    for file in files {
        parquet_io::read_parquet_columns(fs, file, &["cid", "mid"], &mut |b| {
            let (cid, mid) = (ids(file, b, "cid")?, nullable_ids(file, b, "mid")?);
            for (i, &c) in cid.values().iter().enumerate() {
                f(c, opt(Some(mid), i));
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Resolves the mentions (`at_users`) of `posts` whose names hash to partition `p` of `n`
/// against `names` (screen name to its newest holder), calling `mention` for each in file
/// order; returns how many named nobody (only posts with a known author count).
pub(super) fn mentions(
    fs: &FileSystems,
    posts: &[FileEntry],
    p: u32,
    n: u32,
    names: &FxHashMap<String, i64>,
    mention: &mut dyn FnMut(Mention) -> Result<()>,
) -> Result<u64> {
    let mut unresolved = 0;
    let columns = ["mid", "uid", "created_at", "at_users"];
    for f in posts {
        parquet_io::read_parquet_columns(fs, f, &columns, &mut |b| {
            let Some(at_users) = b
                .column_by_name("at_users")
                .and_then(|c| c.as_list_opt::<i32>())
            else {
                return Ok(());
            };
            let (mid, uid) = (ids(f, b, "mid")?, opt_ids(b, "uid"));
            let created = times(f, b, "created_at")?;
            for i in 0..b.num_rows() {
                let by = opt(uid, i).unwrap_or(0);
                if by == 0 || at_users.is_null(i) {
                    continue;
                }
                let listed = at_users.value(i);
                let Some(listed) = listed.as_string_opt::<i32>() else {
                    continue;
                };
                for j in (0..listed.len()).filter(|&j| !listed.is_null(j)) {
                    let name = listed.value(j);
                    if name_partition(name, n) != p {
                        continue;
                    }
                    match names.get(name) {
                        Some(&target) => mention(Mention {
                            target,
                            by,
                            at: created.value(i),
                            mid: mid.value(i),
                        })?,
                        None => unresolved += 1,
                    }
                }
            }
            Ok(())
        })?;
    }
    Ok(unresolved)
}

/// The names that `posts` mention (`at_users`), in any partition.
pub(super) fn mentioned_names(fs: &FileSystems, posts: &[FileEntry]) -> Result<FxHashSet<String>> {
    let mut names = FxHashSet::default();
    for f in posts {
        parquet_io::read_parquet_columns(fs, f, &["uid", "at_users"], &mut |b| {
            let Some(at_users) = b
                .column_by_name("at_users")
                .and_then(|c| c.as_list_opt::<i32>())
            else {
                return Ok(());
            };
            for i in (0..b.num_rows()).filter(|&i| !at_users.is_null(i)) {
                let listed = at_users.value(i);
                if let Some(listed) = listed.as_string_opt::<i32>() {
                    let named = (0..listed.len()).filter(|&j| !listed.is_null(j));
                    names.extend(named.map(|j| listed.value(j).to_string()));
                }
            }
            Ok(())
        })?;
    }
    Ok(names)
}

/// Credits a repost (`slot` 2) or a comment (`slot` 3) to post `mid`, if this partition owns
/// it, and to its author.
fn received(
    posts: &mut FxHashMap<i64, PostCounts>,
    users: &mut FxHashMap<i64, UserCounts>,
    mid: i64,
    slot: usize,
) {
    let Some(post) = posts.get_mut(&mid) else {
        return;
    };
    let author = post.0;
    if slot == 2 {
        post.2 += 1;
    } else {
        post.3 += 1;
    }
    if author != 0 {
        users.entry(author).or_default()[slot + 1] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
    use arrow::datatypes::{Field, Schema};
    use rand::{Rng, SeedableRng};

    /// One night of cleaned rows, as the counters read them.
    #[derive(Default)]
    struct Night {
        users: Vec<(i64, String)>,
        follows: Vec<(i64, i64)>,
        /// mid, author, created_at, retweet_mid
        posts: Vec<(i64, Option<i64>, i64, Option<i64>)>,
        /// cid, mid (`None`: the crawl did not record the post)
        comments: Vec<(i64, Option<i64>)>,
    }

    fn i64s(v: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
        Arc::new(Int64Array::from_iter(v))
    }

    fn write(
        fs: &FileSystems,
        dir: &std::path::Path,
        name: &str,
        cols: Vec<(&str, ArrayRef)>,
    ) -> FileEntry {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            cols.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap();
        let at = fs.parse(dir.join(name).to_str().unwrap()).unwrap();
        let props = parquet_io::writer_properties(false).build();
        parquet_io::write_parquet(fs, &at, batch.schema(), props, Some(&batch)).unwrap();
        fs.status(&at).unwrap().unwrap()
    }

    /// A random history: ids drawn from small ranges so that nights crawl the same follows,
    /// posts and comments again, posts change author (unknown, then known) and reposts and
    /// comments point at posts crawled on other nights, never, or none recorded.
    fn history(seed: u64, nights: usize) -> Vec<Night> {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        (0..nights)
            .map(|_| {
                let mut n = Night::default();
                let users: BTreeSet<i64> = (0..30).map(|_| rng.random_range(1..60)).collect();
                n.users = users.iter().map(|&u| (u, format!("u{u}"))).collect();
                let follows: BTreeSet<(i64, i64)> = (0..120)
                    .map(|_| (rng.random_range(1..60), rng.random_range(1..60)))
                    .filter(|(a, b)| a != b)
                    .collect();
                n.follows = follows.into_iter().collect();
                let mids: BTreeSet<i64> = (0..40).map(|_| rng.random_range(1000..1080)).collect();
                n.posts = mids
                    .into_iter()
                    .map(|m| {
                        let author = (rng.random_range(0..5) > 0).then(|| 1 + m % 50);
                        let rt =
                            (rng.random_range(0..3) == 0).then(|| rng.random_range(1000..1090));
                        (m, author, m * 1000 + rng.random_range(0..2), rt)
                    })
                    .collect();
                let cids: BTreeSet<i64> = (0..50).map(|_| rng.random_range(5000..5100)).collect();
                n.comments = cids
                    .into_iter()
                    .map(|c| {
                        (
                            c,
                            (rng.random_range(0..6) > 0).then(|| rng.random_range(1000..1090)),
                        )
                    })
                    .collect();
                n
            })
            .collect()
    }

    /// The counters of one load over the union of the nights, deduplicated by natural key
    /// with the later night winning, computed the plain way.
    fn naive(nights: &[Night]) -> (BTreeMap<i64, UserCounts>, BTreeMap<i64, PostCounts>) {
        let mut users: BTreeMap<i64, UserCounts> = BTreeMap::new();
        let mut follows = BTreeSet::new();
        let mut posts: BTreeMap<i64, (Option<i64>, i64, Option<i64>)> = BTreeMap::new();
        let mut comments: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        for n in nights {
            for (u, _) in &n.users {
                users.entry(*u).or_default();
            }
            follows.extend(n.follows.iter().copied());
            for &(m, a, at, rt) in &n.posts {
                posts.insert(m, (a, at, rt));
            }
            comments.extend(n.comments.iter().copied());
        }
        for (a, b) in follows {
            users.entry(a).or_default()[1] += 1;
            users.entry(b).or_default()[0] += 1;
        }
        let mut out: BTreeMap<i64, PostCounts> = posts
            .iter()
            .map(|(m, (a, at, _))| (*m, (a.unwrap_or(0), *at, 0, 0)))
            .collect();
        for (a, ..) in posts.values() {
            if let Some(a) = a {
                users.entry(*a).or_default()[2] += 1;
            }
        }
        let targets = posts.values().filter_map(|(_, _, rt)| *rt);
        for (target, slot) in targets
            .map(|t| (t, 2))
            .chain(comments.values().flatten().map(|m| (*m, 3)))
        {
            let Some(p) = out.get_mut(&target) else {
                continue;
            };
            if slot == 2 {
                p.2 += 1
            } else {
                p.3 += 1
            }
            if p.0 != 0 {
                users.entry(p.0).or_default()[slot + 1] += 1;
            }
        }
        (users, out)
    }

    /// Each night's files (users, follows, posts, comments) under `dir`, one folder a night.
    fn write_nights(
        fs: &FileSystems,
        dir: &std::path::Path,
        nights: &[Night],
    ) -> [Vec<FileEntry>; 4] {
        let (mut users, mut follows, mut posts, mut comments) = (vec![], vec![], vec![], vec![]);
        for (k, n) in nights.iter().enumerate() {
            let d = dir.join(format!("n{k}"));
            std::fs::create_dir_all(&d).unwrap();
            let names: Vec<&str> = n.users.iter().map(|(_, s)| s.as_str()).collect();
            users.push(write(
                fs,
                &d,
                "users.parquet",
                vec![
                    ("uid", i64s(n.users.iter().map(|u| Some(u.0)))),
                    ("screen_name", Arc::new(StringArray::from(names))),
                ],
            ));
            follows.push(write(
                fs,
                &d,
                "follows.parquet",
                vec![
                    ("follower", i64s(n.follows.iter().map(|f| Some(f.0)))),
                    ("followee", i64s(n.follows.iter().map(|f| Some(f.1)))),
                ],
            ));
            let created = TimestampMillisecondArray::from_iter_values(n.posts.iter().map(|p| p.2))
                .with_timezone("UTC");
            posts.push(write(
                fs,
                &d,
                "posts.parquet",
                vec![
                    ("mid", i64s(n.posts.iter().map(|p| Some(p.0)))),
                    ("uid", i64s(n.posts.iter().map(|p| p.1))),
                    ("created_at", Arc::new(created)),
                    ("retweet_mid", i64s(n.posts.iter().map(|p| p.3))),
                ],
            ));
            comments.push(write(
                fs,
                &d,
                "comments.parquet",
                vec![
                    ("cid", i64s(n.comments.iter().map(|c| Some(c.0)))),
                    ("mid", i64s(n.comments.iter().map(|c| c.1))),
                ],
            ));
        }
        [users, follows, posts, comments]
    }

    #[test]
    fn counters_over_nights_equal_one_load_of_their_union() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        for seed in [1, 2, 3] {
            let nights = history(seed, 4);
            let [users, follows, posts, comments] =
                write_nights(&fs, &dir.path().join(format!("s{seed}")), &nights);
            let (want_users, want_posts) = naive(&nights);
            let inputs = Inputs {
                users: &users,
                follows: &follows,
                posts: &posts,
                comments: &comments,
                mention_posts: &[],
            };
            for n in [1, 3] {
                let (mut got_users, mut got_posts) = (BTreeMap::new(), BTreeMap::new());
                for p in 0..n {
                    let c = compute(&fs, &inputs, p, n, &mut |_| Ok(())).unwrap();
                    for (u, v) in c.users {
                        assert!(
                            got_users.insert(u, v).is_none(),
                            "uid {u} in two partitions"
                        );
                    }
                    for (m, v) in c.posts {
                        assert!(
                            got_posts.insert(m, v).is_none(),
                            "mid {m} in two partitions"
                        );
                    }
                }
                assert_eq!(got_users, want_users, "users, seed {seed}, {n} partitions");
                assert_eq!(got_posts, want_posts, "posts, seed {seed}, {n} partitions");
            }
        }
    }

    /// The snapshot of the first k nights (cut in 2 partitions) carried forward over the
    /// rest equals a pass over every night, in 1, 2 (its own cut) and 3 partitions: with posts whose author
    /// changes between known users, reposts and comments crawled again with other targets,
    /// and older ones whose post arrives only later.
    #[test]
    fn counters_carried_forward_equal_a_pass_over_every_night() {
        use crate::load::{delta, state::State};
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        for seed in 1..=4 {
            let mut nights = history(seed, 5);
            for (k, night) in nights.iter_mut().enumerate().skip(1) {
                for post in night.posts.iter_mut().filter(|p| p.0 % 5 == k as i64 % 5) {
                    post.1 = Some(1 + (post.0 * 7 + k as i64) % 50);
                }
            }
            // Authors who lose every post two nights later: 100-102, whom no night crawls,
            // are gone then; 200, crawled but in no follow, stays with zero counters.
            nights[0].users.push((200, "u200".into()));
            let moved = |m: i64| m % 11 == 0 || m % 13 == 0;
            let mut back = Vec::new();
            for post in nights[1].posts.iter_mut().filter(|p| moved(p.0)) {
                post.1 = Some(if post.0 % 11 == 0 {
                    100 + post.0 % 3
                } else {
                    200
                });
                back.push((post.0, Some(7), post.2, post.3));
            }
            nights[3].posts.retain(|p| !moved(p.0));
            nights[3].posts.extend(back);
            let [users, follows, posts, comments] =
                write_nights(&fs, &dir.path().join(format!("s{seed}")), &nights);
            let upto = |from: usize, to: usize| Inputs {
                users: &users[from..to],
                follows: &follows[from..to],
                posts: &posts[from..to],
                comments: &comments[from..to],
                mention_posts: &[],
            };
            for k in 1..nights.len() {
                let root = fs
                    .parse(
                        dir.path()
                            .join(format!("state-{seed}-{k}"))
                            .to_str()
                            .unwrap(),
                    )
                    .unwrap();
                let state = State::new(&root, "ns");
                let next = state.next(&fs, "2026-11-01", false).unwrap();
                for p in 0..2 {
                    let c = compute(&fs, &upto(0, k), p, 2, &mut |_| Ok(())).unwrap();
                    next.write_part(&fs, p, 2, &c).unwrap();
                }
                next.commit(&fs, &state, 2).unwrap();
                let snapshot = state.latest(&fs).unwrap().unwrap();
                let d = delta::delta(&fs, &upto(0, k), &upto(k, nights.len()), &snapshot).unwrap();
                for n in [1, 2, 3] {
                    for p in 0..n {
                        let all = upto(0, nights.len());
                        let want = compute(&fs, &all, p, n, &mut |_| Ok(())).unwrap();
                        let mut got = PartitionCounters::default();
                        let (changes, unresolved) = delta::partition(
                            &fs,
                            &d,
                            &snapshot,
                            &[],
                            p,
                            n,
                            &mut |_| Ok(()),
                            &mut got,
                        )
                        .unwrap();
                        got.unresolved_mentions = unresolved;
                        let want_changes = crate::load::state::changes(
                            &want,
                            &snapshot.users(&fs, p, n).unwrap(),
                            &snapshot.posts(&fs, p, n).unwrap(),
                        );
                        assert_eq!(got, want, "seed {seed}, snapshot of {k} nights, {p}/{n}");
                        assert_eq!(
                            changes, want_changes,
                            "changes: seed {seed}, snapshot of {k} nights, {p}/{n}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_column_another_writer_left_out_is_bad_input_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let f = write(
            &fs,
            dir.path(),
            "follows.parquet",
            vec![("follower", i64s([Some(1)]))],
        );
        let inputs = Inputs {
            users: &[],
            follows: &[f],
            posts: &[],
            comments: &[],
            mention_posts: &[],
        };
        let e = compute(&fs, &inputs, 0, 1, &mut |_| Ok(())).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::BadInput { .. }), "{text}");
        assert!(
            text.contains("follows.parquet") && text.contains("followee"),
            "{text}"
        );
    }

    #[test]
    fn every_key_has_one_partition_in_range() {
        for n in [1, 2, 7, 64] {
            for uid in [0i64, 1, 1_000_000_007, i64::MAX, -5] {
                let p = uid_partition(uid, n);
                assert!(p < n);
                assert_eq!(p, uid_partition(uid, n));
            }
            assert!(name_partition("用户0000001", n) < n);
            assert!(orphan_post_partition(42, n) < n);
        }
        // Neighbouring uids spread out.
        let mut seen = [0u32; 8];
        for uid in 1_000_000_000..1_000_008_000i64 {
            seen[uid_partition(uid, 8) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
    }
}

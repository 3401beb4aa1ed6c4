//! One partition's values: every metric for the uids that hash to partition `p` of `n`,
//! read from the id and time columns of every night, oldest first.
//!
//! Invariants: a follow pair counts once (its ends are sorted and deduplicated), its first
//! day being the earliest day any of its records gives (follow time, else the night); a mid
//! or cid counts once, with the record of the newest night that has it (a later record
//! replaces an earlier one, and one owned elsewhere removes it); a repost or comment is
//! credited to the newest author of the post it names.

use arrow::array::Array;
use rustc_hash::FxHashMap;

use super::{day_of_ms, Inputs, Metric, Ranked, Values};
use crate::dataset::columns;
use crate::dataset::friends::{check, count_columns, counts_schema};
use crate::dataset::parquet_io;
use crate::error::Result;
use crate::graph::round::share;
use crate::hdfs::FileSystems;

/// Rows read by one partition's pass.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Read {
    pub(super) follow_rows: u64,
    pub(super) post_rows: u64,
    pub(super) comment_rows: u64,
    /// Comment records that name no post (the crawl did not record it): counted to no one.
    pub(super) comments_without_post: u64,
    pub(super) friend_count_rows: u64,
}

/// A partition's values, and once [`Partition::keep_top`] has run, its tops.
pub(super) struct Partition {
    values: FxHashMap<i64, Values>,
    pub(super) read: Read,
    /// Per metric (in [`Metric::ALL`] order): users with a value above 0, and the top
    /// candidates as `(uid, value)`.
    pub(super) tops: Vec<(u64, Vec<(i64, i64)>)>,
    /// Every user's followers, above 0, when kept ([`Partition::keep_top`]).
    pub(super) followers: Vec<(i64, i64)>,
}

impl Partition {
    /// Keeps only each metric's top `n`, and with `followers` every user's followers (the
    /// values map is dropped).
    pub(super) fn keep_top(mut self, metrics: &[Metric], n: usize, followers: bool) -> Partition {
        let values = std::mem::take(&mut self.values);
        if followers {
            let slot = Metric::Followers.index();
            self.followers = values
                .iter()
                .filter(|(_, v)| v[slot] > 0)
                .map(|(uid, v)| (*uid, v[slot]))
                .collect();
        }
        self.tops = Metric::ALL
            .iter()
            .map(|m| {
                if !metrics.contains(m) {
                    return (0, Vec::new());
                }
                let slot = m.index();
                let candidates: Vec<(i64, i64)> = values
                    .iter()
                    .filter(|(_, v)| v[slot] > 0)
                    .map(|(uid, v)| (*uid, v[slot]))
                    .collect();
                let count = candidates.len() as u64;
                let kept = super::top(candidates, n)
                    .into_iter()
                    .map(|Ranked { id, value, .. }| (id, value))
                    .collect();
                (count, kept)
            })
            .collect();
        self
    }
}

/// Computes partition `p` of `n` for the date `day`, of `follow_rows` follow rows in all.
pub(super) fn partition(
    fs: &FileSystems,
    inputs: &Inputs,
    day: i32,
    (p, n): (u32, u32),
    follow_rows: u64,
) -> Result<Partition> {
    // The load's counters cut the uids the same way (the one stable hash).
    let mine = |uid: i64| crate::hash::id_bucket(uid, n) == p;
    let mut values: FxHashMap<i64, Values> = FxHashMap::default();
    let mut read = Read::default();
    let slot = |m: Metric| m.index();

    // Follows: (followee, follower, first day) of the followees here, sorted, so each pair's
    // first record after the sort holds its earliest day.
    // Sized for the partition's share: grown by doubling, the vector would overshoot the
    // budget and copy itself at its largest.
    let mut ends: Vec<(i64, i64, i32)> = Vec::with_capacity(share(follow_rows, n));
    for night in &inputs.follows {
        for f in &night.files {
            let cols = ["follower", "followee", "followed_at"];
            parquet_io::read_parquet_columns(fs, f, &cols, &mut |b| {
                read.follow_rows += b.num_rows() as u64;
                let follower = columns::ids(f, b, "follower")?;
                let followee = columns::ids(f, b, "followee")?;
                let at = columns::times(f, b, "followed_at")?;
                for i in 0..b.num_rows() {
                    let e = followee.value(i);
                    if mine(e) {
                        let first = if at.is_valid(i) {
                            day_of_ms(at.value(i)).min(night.day)
                        } else {
                            night.day
                        };
                        ends.push((e, follower.value(i), first));
                    }
                }
                Ok(())
            })?;
        }
    }
    ends.sort_unstable();
    // Room for every followee at once: a map that doubles holds its old table beside the new.
    let followees = ends.chunk_by(|x, y| x.0 == y.0).count();
    values.reserve(followees);
    let mut last: Option<(i64, i64)> = None;
    for &(e, a, first) in &ends {
        if last == Some((e, a)) {
            continue;
        }
        last = Some((e, a));
        let v = values.entry(e).or_default();
        v[slot(Metric::Followers)] += 1;
        if first == day {
            v[slot(Metric::NewFans)] += 1;
        }
    }
    drop(ends);

    // Posts owned here (author hashes here): mid -> (author, created on the day).
    let mut owned: FxHashMap<i64, (i64, bool)> = FxHashMap::default();
    for night in &inputs.posts {
        for f in &night.files {
            parquet_io::read_parquet_columns(fs, f, &["mid", "uid", "created_at"], &mut |b| {
                read.post_rows += b.num_rows() as u64;
                let mid = columns::ids(f, b, "mid")?;
                let uid = columns::opt_ids(b, "uid");
                let created = columns::times(f, b, "created_at")?;
                for i in 0..b.num_rows() {
                    let m = mid.value(i);
                    match columns::opt(uid, i).filter(|&u| mine(u)) {
                        Some(author) => {
                            let today = day_of_ms(created.value(i)) == day;
                            owned.insert(m, (author, today));
                        }
                        None if !owned.is_empty() => {
                            owned.remove(&m);
                        }
                        None => {}
                    }
                }
                Ok(())
            })?;
        }
    }
    for (author, today) in owned.values() {
        if *today {
            values.entry(*author).or_default()[slot(Metric::Posts)] += 1;
        }
    }

    // Reposts of the posts owned here, made on the day: repost mid -> the post it names.
    // Only the day's are kept; a newer record of the same mid replaces or removes it.
    let mut reposts: FxHashMap<i64, i64> = FxHashMap::default();
    for night in &inputs.posts {
        for f in &night.files {
            let cols = ["mid", "retweet_mid", "created_at"];
            parquet_io::read_parquet_columns(fs, f, &cols, &mut |b| {
                let mid = columns::ids(f, b, "mid")?;
                let rt = columns::opt_ids(b, "retweet_mid");
                let created = columns::times(f, b, "created_at")?;
                for i in 0..b.num_rows() {
                    // The day first: it is arithmetic, the lookup a cache miss.
                    let today = day_of_ms(created.value(i)) == day;
                    let target = columns::opt(rt, i).filter(|_| today);
                    match target.filter(|r| owned.contains_key(r)) {
                        Some(r) => {
                            reposts.insert(mid.value(i), r);
                        }
                        None if !reposts.is_empty() => {
                            reposts.remove(&mid.value(i));
                        }
                        None => {}
                    }
                }
                Ok(())
            })?;
        }
    }
    let mut comments: FxHashMap<i64, i64> = FxHashMap::default();
    for night in &inputs.comments {
        for f in &night.files {
            parquet_io::read_parquet_columns(fs, f, &["cid", "mid", "created_at"], &mut |b| {
                read.comment_rows += b.num_rows() as u64;
                let cid = columns::ids(f, b, "cid")?;
                let mid = columns::nullable_ids(f, b, "mid")?;
                read.comments_without_post += mid.null_count() as u64;
                let created = columns::times(f, b, "created_at")?;
                for i in 0..b.num_rows() {
                    let (c, m) = (cid.value(i), columns::opt(Some(mid), i));
                    let on_day = day_of_ms(created.value(i)) == day;
                    if let Some(m) = m.filter(|m| on_day && owned.contains_key(m)) {
                        comments.insert(c, m);
                    } else if !comments.is_empty() {
                        comments.remove(&c);
                    }
                }
                Ok(())
            })?;
        }
    }
    for (targets, metric) in [
        (reposts, Metric::RepostsReceived),
        (comments, Metric::CommentsReceived),
    ] {
        for target in targets.into_values() {
            let (author, _) = owned[&target];
            values.entry(author).or_default()[slot(metric)] += 1;
        }
    }
    drop(owned);

    let schema = counts_schema();
    for f in &inputs.friend_counts {
        parquet_io::read_parquet_columns(fs, f, &["uid", "friends"], &mut |b| {
            read.friend_count_rows += b.num_rows() as u64;
            check(b, &schema, &f.location.to_string())?;
            let (uid, friends) = count_columns(b);
            for (&u, &k) in uid.values().iter().zip(friends.values()) {
                if mine(u) {
                    values.entry(u).or_default()[slot(Metric::Friends)] += k;
                }
            }
            Ok(())
        })?;
    }
    Ok(Partition {
        values,
        read,
        tops: Vec::new(),
        followers: Vec::new(),
    })
}

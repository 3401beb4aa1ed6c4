//! The boards of a night from the followers state of an earlier one ([`super::state`]) and
//! what the nights since bring, in place of a pass over every night per partition
//! (docs/design/rank.md, "Across nights").
//!
//! - `followers`: the state's counts plus the pairs of the follows nights after it that no
//!   night up to it has (one probe pass over the older follows' two id columns).
//! - `new_fans`: a pair's first day is the earliest its records give, and a night before the
//!   date gives a day before it; so only the date's own night can bring one, and only a pair
//!   no earlier night has.
//! - `posts`, `reposts_received`, `comments_received`: the records created on the date, each
//!   mid and cid by its newest record, kept in maps as the nights are read in order; then the
//!   newest author of each post they name, in a second pass over the posts' two id columns.
//! - `friends`: the date's friend counts, as the full pass reads them.
//!
//! The state's counts and the friend counts are streamed in uid order (each file is sorted)
//! into bounded boards ([`TopN`]); the new state is the old one merged with the pairs added,
//! as it is written ([`Counts::Carried`]).
//!
//! Invariants: the boards equal the full pass's ([`super::compute`]) for the same input (the
//! nightly tests compare them with a full recomputation after every night); memory holds the
//! nights after the state and the records of the date, so it is taken only when those fit
//! the budget.

use arrow::array::Array;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::state::{Counts, Followers, Saved};
use super::top::TopN;
use super::{day_of_ms, Inputs, Metric, Night, RankOptions, RankStats, Ranking};
use crate::dataset::columns;
use crate::dataset::friends::decode_counts;
use crate::dataset::parquet_io::sorted::SortedMerge;
use crate::dataset::{history, parquet_io};
use crate::error::Result;
use crate::hdfs::{FileEntry, FileSystems};

/// Bytes a row of the nights after the state may cost (a pair or record in a map, with its
/// slack). The state's counts are streamed, never held.
const BYTES_PER_FRESH_ROW: u64 = 64;

/// Where the follows after `saved` begin, when the state can be carried to `date` within
/// `budget`; `None`: take the full pass.
pub(super) fn applies(
    fs: &FileSystems,
    inputs: &Inputs,
    saved: &Saved,
    budget: u64,
) -> Result<Option<usize>> {
    let taken: Vec<history::Taken> = inputs.follows.iter().map(|n| n.taken.clone()).collect();
    let Some(split) = history::split_after(&taken, &saved.date, &saved.covered) else {
        return Ok(None);
    };
    let after = |nights: &[Night]| {
        let files = nights
            .iter()
            .filter(|n| {
                n.taken
                    .nights
                    .iter()
                    .all(|d| d.as_str() > saved.date.as_str())
            })
            .flat_map(|n| &n.files);
        parquet_io::parquet_rows(fs, files)
    };
    let fresh = after(&inputs.follows)? + after(&inputs.posts)? + after(&inputs.comments)?;
    let held = fresh.saturating_mul(BYTES_PER_FRESH_ROW);
    Ok((held <= budget).then_some(split))
}

/// The boards of `date` (day `day`), and the followers state as of it.
pub(super) fn run(
    fs: &FileSystems,
    inputs: &Inputs,
    options: &RankOptions,
    day: i32,
    saved: &Saved,
    split: usize,
    wanted: &[Metric],
) -> Result<Ranking> {
    let (date, top_n) = (options.date.as_str(), options.top);
    let mut stats = RankStats {
        partitions: 1,
        followers_carried_from: Some(saved.date.clone()),
        ..RankStats::default()
    };
    let (added, new_fans) = new_pairs(fs, inputs, date, day, split, &mut stats.follow_rows)?;
    let mut added: Vec<(i64, i64)> = added.into_iter().collect();
    added.sort_unstable();
    let counts = Counts::Carried {
        base: saved.files.clone(),
        added,
    };
    let day_values = DayValues::read(fs, inputs, day, &mut stats)?;

    let mut boards = Vec::new();
    for &metric in wanted {
        let mut board = TopN::new(top_n);
        match metric {
            Metric::Followers => counts.for_each(fs, &mut |uid, n| {
                board.push(uid, n);
                Ok(())
            })?,
            Metric::NewFans => positive(&new_fans, &mut board),
            Metric::Posts => positive(&day_values.posts, &mut board),
            Metric::RepostsReceived => positive(&day_values.reposts_received, &mut board),
            Metric::CommentsReceived => positive(&day_values.comments_received, &mut board),
            Metric::Friends => friend_counts(
                fs,
                &inputs.friend_counts,
                &mut stats.friend_count_rows,
                &mut board,
            )?,
        };
        stats.users_ranked.push((metric, board.pushed));
        boards.push((metric, board.finish()));
    }
    let taken: Vec<history::Taken> = inputs.follows.iter().map(|n| n.taken.clone()).collect();
    Ok(Ranking {
        boards,
        stats,
        followers: Some(Followers {
            date: date.to_string(),
            covered: history::covered(&taken),
            counts,
        }),
    })
}

/// The users of `values` with a value above 0, onto `board`.
fn positive(values: &FxHashMap<i64, i64>, board: &mut TopN) {
    for (&u, &v) in values {
        if v > 0 {
            board.push(u, v);
        }
    }
}

/// One file's `(followee, follower, first day is the date)`, and its rows.
type FilePairs = (Vec<(i64, i64, bool)>, u64);

/// Per followee, the pairs the follows after `split` bring that no item before it has, and
/// of those the pairs whose first day is `day`.
fn new_pairs(
    fs: &FileSystems,
    inputs: &Inputs,
    date: &str,
    day: i32,
    split: usize,
    rows: &mut u64,
) -> Result<(FxHashMap<i64, i64>, FxHashMap<i64, i64>)> {
    // (followee, follower) → whether every record of the pair gives the day itself.
    let mut fresh: FxHashMap<(i64, i64), bool> = FxHashMap::default();
    for night in &inputs.follows[split..] {
        let tonight = night.date == date;
        let read: Vec<FilePairs> = night
            .files
            .par_iter()
            .map(|f| {
                let mut pairs = Vec::new();
                let mut n = 0;
                let cols = ["follower", "followee", "followed_at"];
                parquet_io::read_parquet_columns(fs, f, &cols, &mut |b| {
                    n += b.num_rows() as u64;
                    let follower = columns::ids(f, b, "follower")?;
                    let followee = columns::ids(f, b, "followee")?;
                    let at = columns::times(f, b, "followed_at")?;
                    for i in 0..b.num_rows() {
                        let first_is_day =
                            tonight && (!at.is_valid(i) || day_of_ms(at.value(i)) >= day);
                        pairs.push((followee.value(i), follower.value(i), first_is_day));
                    }
                    Ok(())
                })?;
                Ok((pairs, n))
            })
            .collect::<Result<_>>()?;
        for (pairs, n) in read {
            *rows += n;
            for (e, a, first_is_day) in pairs {
                fresh
                    .entry((e, a))
                    .and_modify(|d| *d = *d && first_is_day)
                    .or_insert(first_is_day);
            }
        }
    }
    if !fresh.is_empty() {
        let older: Vec<&FileEntry> = inputs.follows[..split]
            .iter()
            .flat_map(|n| &n.files)
            .collect();
        let seen: Vec<(Vec<(i64, i64)>, u64)> = older
            .par_iter()
            .map(|f| {
                let mut seen = Vec::new();
                let mut n = 0;
                parquet_io::read_parquet_columns(fs, f, &["follower", "followee"], &mut |b| {
                    n += b.num_rows() as u64;
                    let follower = columns::ids(f, b, "follower")?;
                    let followee = columns::ids(f, b, "followee")?;
                    for (&e, &a) in followee.values().iter().zip(follower.values()) {
                        if fresh.contains_key(&(e, a)) {
                            seen.push((e, a));
                        }
                    }
                    Ok(())
                })?;
                Ok((seen, n))
            })
            .collect::<Result<_>>()?;
        for (pairs, n) in seen {
            *rows += n;
            for p in pairs {
                fresh.remove(&p);
            }
        }
    }
    let mut added: FxHashMap<i64, i64> = FxHashMap::default();
    let mut new_fans: FxHashMap<i64, i64> = FxHashMap::default();
    for ((e, _), first_is_day) in fresh {
        *added.entry(e).or_default() += 1;
        if first_is_day {
            *new_fans.entry(e).or_default() += 1;
        }
    }
    Ok((added, new_fans))
}

/// The day's values, by user.
#[derive(Default)]
struct DayValues {
    posts: FxHashMap<i64, i64>,
    reposts_received: FxHashMap<i64, i64>,
    comments_received: FxHashMap<i64, i64>,
}

/// What one file of a night changes in a map keyed by mid or cid: records to put, and keys
/// the map holds that a record not of the day removes. A key is once in a night, so the
/// files of a night apply in any order.
#[derive(Default)]
struct Changes {
    put: Vec<(i64, i64)>,
    removed: Vec<i64>,
}

impl Changes {
    fn apply(self, to: &mut FxHashMap<i64, i64>) {
        for k in self.removed {
            to.remove(&k);
        }
        to.extend(self.put);
    }
}

impl DayValues {
    fn read(fs: &FileSystems, inputs: &Inputs, day: i32, stats: &mut RankStats) -> Result<Self> {
        // mid → author, of the posts written on the day; mid → the post a repost of the
        // day names.
        let (mut posts, mut reposts) = (FxHashMap::default(), FxHashMap::default());
        for night in &inputs.posts {
            let found: Vec<(Changes, Changes, u64)> = night
                .files
                .par_iter()
                .map(|f| {
                    let (mut p, mut r, mut n) = (Changes::default(), Changes::default(), 0);
                    let cols = ["mid", "uid", "created_at", "retweet_mid"];
                    parquet_io::read_parquet_columns(fs, f, &cols, &mut |b| {
                        n += b.num_rows() as u64;
                        let mid = columns::ids(f, b, "mid")?;
                        let uid = columns::opt_ids(b, "uid");
                        let created = columns::times(f, b, "created_at")?;
                        let rt = columns::opt_ids(b, "retweet_mid");
                        for i in 0..b.num_rows() {
                            let m = mid.value(i);
                            let today = day_of_ms(created.value(i)) == day;
                            match columns::opt(uid, i).filter(|_| today) {
                                Some(author) => p.put.push((m, author)),
                                None if posts.contains_key(&m) => p.removed.push(m),
                                None => {}
                            }
                            match columns::opt(rt, i).filter(|_| today) {
                                Some(target) => r.put.push((m, target)),
                                None if reposts.contains_key(&m) => r.removed.push(m),
                                None => {}
                            }
                        }
                        Ok(())
                    })?;
                    Ok((p, r, n))
                })
                .collect::<Result<_>>()?;
            for (p, r, n) in found {
                stats.post_rows += n;
                p.apply(&mut posts);
                r.apply(&mut reposts);
            }
        }
        // cid → the post a comment of the day names.
        let mut comments = FxHashMap::default();
        for night in &inputs.comments {
            let found: Vec<(Changes, u64, u64)> = night
                .files
                .par_iter()
                .map(|f| {
                    let (mut c, mut n, mut without_post) = (Changes::default(), 0, 0);
                    parquet_io::read_parquet_columns(
                        fs,
                        f,
                        &["cid", "mid", "created_at"],
                        &mut |b| {
                            n += b.num_rows() as u64;
                            let cid = columns::ids(f, b, "cid")?;
                            let mid = columns::nullable_ids(f, b, "mid")?;
                            without_post += mid.null_count() as u64;
                            let created = columns::times(f, b, "created_at")?;
                            for i in 0..b.num_rows() {
                                let k = cid.value(i);
                                let m = columns::opt(Some(mid), i);
                                if let Some(m) = m.filter(|_| day_of_ms(created.value(i)) == day) {
                                    c.put.push((k, m));
                                } else if comments.contains_key(&k) {
                                    c.removed.push(k);
                                }
                            }
                            Ok(())
                        },
                    )?;
                    Ok((c, n, without_post))
                })
                .collect::<Result<_>>()?;
            for (c, n, without_post) in found {
                stats.comment_rows += n;
                stats.comments_without_post += without_post;
                c.apply(&mut comments);
            }
        }
        let targets: FxHashSet<i64> = reposts.values().chain(comments.values()).copied().collect();
        let authors = newest_authors(fs, &inputs.posts, &targets)?;
        let mut values = DayValues::default();
        for author in posts.into_values() {
            *values.posts.entry(author).or_default() += 1;
        }
        for (made, to) in [
            (reposts, &mut values.reposts_received),
            (comments, &mut values.comments_received),
        ] {
            for target in made.into_values() {
                if let Some(Some(author)) = authors.get(&target) {
                    *to.entry(*author).or_default() += 1;
                }
            }
        }
        Ok(values)
    }
}

/// The author of each of `targets` by its newest record (`None`: that record has none).
fn newest_authors(
    fs: &FileSystems,
    nights: &[Night],
    targets: &FxHashSet<i64>,
) -> Result<FxHashMap<i64, Option<i64>>> {
    let mut authors = FxHashMap::default();
    if targets.is_empty() {
        return Ok(authors);
    }
    for night in nights {
        let found: Vec<Vec<(i64, Option<i64>)>> = night
            .files
            .par_iter()
            .map(|f| {
                let mut found = Vec::new();
                parquet_io::read_parquet_columns(fs, f, &["mid", "uid"], &mut |b| {
                    let mid = columns::ids(f, b, "mid")?;
                    let uid = columns::opt_ids(b, "uid");
                    for i in 0..b.num_rows() {
                        if targets.contains(&mid.value(i)) {
                            found.push((mid.value(i), columns::opt(uid, i)));
                        }
                    }
                    Ok(())
                })?;
                Ok(found)
            })
            .collect::<Result<_>>()?;
        authors.extend(found.into_iter().flatten());
    }
    Ok(authors)
}

/// The date's friend counts by user (summed over slices: a user is in one row of each
/// slice's counts, and each file is sorted by uid), those above 0 onto `board`.
fn friend_counts(
    fs: &FileSystems,
    files: &[FileEntry],
    rows: &mut u64,
    board: &mut TopN,
) -> Result<()> {
    let mut merge = SortedMerge::open(fs, files, decode_counts)?;
    let mut user: Option<(i64, i64)> = None;
    while let Some((u, k)) = merge.next_row()? {
        *rows += 1;
        match &mut user {
            Some((held, sum)) if *held == u => *sum += k,
            _ => {
                if let Some((held, sum)) = user.replace((u, k)) {
                    if sum > 0 {
                        board.push(held, sum);
                    }
                }
            }
        }
    }
    if let Some((held, sum)) = user.filter(|(_, sum)| *sum > 0) {
        board.push(held, sum);
    }
    Ok(())
}

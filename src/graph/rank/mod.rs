//! Daily leaderboards: the top N users of each metric on a date, from the cleaned tables of
//! every night up to that date and the friends output of that date.
//!
//! The metrics (their definitions are in docs/design/rank.md):
//! - `followers`: distinct followers over every night so far, as `count:followers` in `user`;
//! - `new_fans`: follows that began on the date, a pair's first day being the earlier of its
//!   follow time and the first night that crawled it;
//! - `posts`, `reposts_received`, `comments_received`: posts written, and reposts and
//!   comments received, created on the date;
//! - `friends`: mutual follows, from `friend_counts/dt=<date>` (summed over slices).
//!
//! Days are Asia/Shanghai days, as Weibo's clocks. A follow pair, a mid or a cid counts once
//! however many nights crawled it, with its newest night's record (the load's counters do
//! the same).
//!
//! Invariants: only users whose value is above 0 are ranked, and ties go to the smaller uid,
//! so the output is a function of the input alone. The uids are cut into hash partitions
//! (each uid in exactly one), and the top N of a partition holds every user of the overall
//! top N that it holds, so the top N of the partitions' tops is the overall top N.
//!
//! The same holds across machines: a slice (`--slice i/N`) ranks every N-th partition,
//! cut as if by one thread so every slice cuts alike, and writes its own boards under
//! `slice=i-of-N/`; the top N of the slices' boards ([`merge_boards`]) is the whole job's.

mod carried;
mod compute;
pub mod hbase;
mod output;
pub mod state;
mod top;

use std::fmt;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::dataset::parquet_io;
use crate::dataset::slice::Slice;
use crate::dataset::{history, partition};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

pub use output::{read_boards, write};
pub use top::{top, Ranked};

/// The leaderboards, in the order of their output.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Metric {
    Followers,
    #[value(alias = "new-fans")]
    NewFans,
    Posts,
    #[value(alias = "reposts-received")]
    RepostsReceived,
    #[value(alias = "comments-received")]
    CommentsReceived,
    Friends,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::Followers,
        Metric::NewFans,
        Metric::Posts,
        Metric::RepostsReceived,
        Metric::CommentsReceived,
        Metric::Friends,
    ];

    /// The metric's name in the output, the HBase rowkeys and `query rank`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Followers => "followers",
            Metric::NewFans => "new_fans",
            Metric::Posts => "posts",
            Metric::RepostsReceived => "reposts_received",
            Metric::CommentsReceived => "comments_received",
            Metric::Friends => "friends",
        }
    }

    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Position in [`Metric::ALL`], for per-metric arrays.
    fn index(self) -> usize {
        Metric::ALL
            .iter()
            .position(|m| *m == self)
            .expect("every metric is in ALL")
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A metric's value for every user of a partition: one slot per [`Metric`].
type Values = [i64; 6];

/// One night's committed part files of a cleaned table, and that night's day; or a run of
/// the compacted history, labelled with its last night.
#[derive(Clone, Debug)]
pub struct Night {
    pub date: String,
    /// Days since 1970-01-01 (the night's date).
    pub day: i32,
    pub files: Vec<FileEntry>,
    /// The nights it stands for, with their stamps ([`history::Taken`]).
    pub taken: history::Taken,
}

/// What the job reads: every committed night up to the date, oldest first, of the cleaned
/// tables it needs, and the friend counts of the date.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub follows: Vec<Night>,
    pub posts: Vec<Night>,
    pub comments: Vec<Night>,
    pub friend_counts: Vec<FileEntry>,
}

impl Inputs {
    /// Finds the committed nights of `clean` up to `date`, and the friend counts under
    /// `friends` (a friends `--output`) for `date` when the `friends` metric is asked for:
    /// a missing friends partition is then an error, not a board of zeros.
    pub fn find(
        fs: &FileSystems,
        clean: &Location,
        friends: Option<&Location>,
        date: &str,
        metrics: &[Metric],
    ) -> Result<Inputs> {
        let nights = |entity: &str| -> Result<Vec<Night>> {
            Ok(history::take_history(fs, &clean.join(entity), date)?
                .into_iter()
                .filter_map(|taken| {
                    let day = day_of_date(&taken.date)?;
                    Some(Night {
                        date: taken.date.clone(),
                        day,
                        files: taken.files.clone(),
                        taken,
                    })
                })
                .collect())
        };
        let wants = |ms: &[Metric]| ms.iter().any(|m| metrics.contains(m));
        let mut inputs = Inputs::default();
        if wants(&[Metric::Followers, Metric::NewFans]) {
            inputs.follows = nights("follows")?;
        }
        if wants(&[
            Metric::Posts,
            Metric::RepostsReceived,
            Metric::CommentsReceived,
        ]) {
            inputs.posts = nights("posts")?;
        }
        if wants(&[Metric::CommentsReceived]) {
            inputs.comments = nights("comments")?;
        }
        if wants(&[Metric::Friends]) {
            let Some(friends) = friends else {
                return Err(Error::Usage(
                    "the friends metric needs the friends output (--friends)".into(),
                ));
            };
            let dir = friends
                .join(crate::dataset::friends::COUNTS_TABLE)
                .join(&format!("dt={date}"));
            inputs.friend_counts = friend_count_parts(fs, &dir)?;
        }
        let found = [&inputs.follows, &inputs.posts, &inputs.comments];
        if found.iter().all(|n| n.is_empty()) && inputs.friend_counts.is_empty() {
            return Err(Error::BadInput {
                path: clean.to_string(),
                line: 0,
                reason: format!("no committed clean partitions up to dt={date}"),
            });
        }
        Ok(inputs)
    }

    fn rows(&self, fs: &FileSystems) -> Result<[u64; 3]> {
        let rows =
            |nights: &[Night]| parquet_io::parquet_rows(fs, nights.iter().flat_map(|n| &n.files));
        Ok([
            rows(&self.follows)?,
            rows(&self.posts)?,
            rows(&self.comments)?,
        ])
    }
}

/// The committed parts of a friend counts partition: the whole run's, or every slice's when
/// the run was split (`slice=i-of-N/`, each committed on its own).
fn friend_count_parts(fs: &FileSystems, dir: &Location) -> Result<Vec<FileEntry>> {
    let whole = partition::committed_parts(fs, dir)?;
    if !whole.is_empty() {
        return Ok(whole);
    }
    let mut parts = Vec::new();
    if fs.exists(dir)? {
        for e in fs.list(dir, false)? {
            let slice = crate::dataset::slice::SLICE_PREFIX;
            if e.location.file_name().is_some_and(|n| n.starts_with(slice)) {
                parts.extend(partition::committed_parts(fs, &e.location)?);
            }
        }
    }
    if parts.is_empty() {
        return Err(Error::BadInput {
            path: dir.to_string(),
            line: 0,
            reason: "no committed friend counts for this date: run friends first".into(),
        });
    }
    Ok(parts)
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date; `None` for anything else.
pub fn day_of_date(date: &str) -> Option<i32> {
    let d = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    Some((d - chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?).num_days() as i32)
}

/// The Asia/Shanghai day (days since 1970-01-01) of an instant in epoch milliseconds.
pub fn day_of_ms(ms: i64) -> i32 {
    (ms + 8 * 3_600_000).div_euclid(86_400_000) as i32
}

#[derive(Clone, Debug)]
pub struct RankOptions {
    pub date: String,
    /// Users per board.
    pub top: usize,
    pub metrics: Vec<Metric>,
    /// Memory for the per-user values and the follow ends of the partitions held at once.
    pub memory_budget: u64,
    /// The uids of one slice (`--slice i/N`): every N-th hash partition;
    /// [`Slice::ALL`] for the whole job.
    pub slice: Slice,
}

/// Users per board unless told otherwise.
pub const TOP: usize = 100;

/// What a run read and found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankStats {
    pub follow_rows: u64,
    pub post_rows: u64,
    pub comment_rows: u64,
    /// Comment records that name no post (the crawl did not record it): counted to no one.
    #[serde(default)]
    pub comments_without_post: u64,
    pub friend_count_rows: u64,
    pub partitions: u32,
    /// Per metric: the users with a value above 0 (those that could be ranked).
    pub users_ranked: Vec<(Metric, u64)>,
    /// The night whose followers state the run carried forward ([`state`]); `None` for a
    /// pass over every night.
    #[serde(default)]
    pub followers_carried_from: Option<String>,
}

impl RankStats {
    /// The whole job's figures from its slices': every slice reads every row, so the rows
    /// read and the partitions must agree; the users ranked add up (each uid is in one
    /// slice). `None` when the slices disagree.
    pub fn of_slices(slices: &[RankStats]) -> Option<RankStats> {
        let first = slices.first()?;
        let read = |s: &RankStats| {
            (
                s.follow_rows,
                s.post_rows,
                s.comment_rows,
                s.comments_without_post,
                s.friend_count_rows,
                s.partitions,
            )
        };
        let metrics = |s: &RankStats| s.users_ranked.iter().map(|(m, _)| *m).collect::<Vec<_>>();
        let mut whole = first.clone();
        for s in &slices[1..] {
            if read(s) != read(first) || metrics(s) != metrics(first) {
                return None;
            }
            for (sum, (_, n)) in whole.users_ranked.iter_mut().zip(&s.users_ranked) {
                sum.1 += n;
            }
        }
        Some(whole)
    }
}

/// The whole job's boards from its slices' boards: for each metric of `metrics` (in
/// [`Metric::ALL`] order), the top `top_n` over every slice's board of it.
pub fn merge_boards(
    slices: &[Vec<(Metric, Vec<Ranked>)>],
    metrics: &[Metric],
    top_n: usize,
) -> Vec<(Metric, Vec<Ranked>)> {
    Metric::ALL
        .into_iter()
        .filter(|m| metrics.contains(m))
        .map(|metric| {
            let candidates: Vec<(i64, i64)> = slices
                .iter()
                .flatten()
                .filter(|(m, _)| *m == metric)
                .flat_map(|(_, board)| board.iter().map(|r| (r.id, r.value)))
                .collect();
            (metric, top(candidates, top_n))
        })
        .collect()
}

/// The boards: for each metric asked for, in [`Metric::ALL`] order, its top users, rank 1
/// first.
#[derive(Clone, Debug, Default)]
pub struct Ranking {
    pub boards: Vec<(Metric, Vec<Ranked>)>,
    pub stats: RankStats,
    /// Every user's followers as of the date, for the next night to carry forward: counted
    /// by a whole run that read the follows, `None` otherwise.
    pub followers: Option<state::Followers>,
}

/// Bytes a follow end costs in a pass: followee, follower and day, sorted in place.
const BYTES_PER_END: u64 = 24;
/// Bytes a post costs in a pass: its entry in the map of owned posts, with the table's slack.
const BYTES_PER_POST: u64 = 48;
/// Bytes a user's values cost: a 56-byte map slot with the map's slack (it is at most 7/8
/// full, and at least 7/16 just after it grows).
const BYTES_PER_USER: u64 = 128;
/// Follow and post rows per user with values, at most: a followee has several fans, an
/// author several posts (the paper preset's followees have about 4 fans each).
const ROWS_PER_USER: u64 = 4;

/// How many partitions keep `threads` passes at once within `budget`: the follow ends are
/// counted and dropped before the posts are read, so a pass peaks at the larger of the two.
fn partitions_for(rows: [u64; 3], budget: u64, threads: usize) -> u32 {
    let [follows, posts, _] = rows;
    let users = ((follows + posts) / ROWS_PER_USER).saturating_mul(BYTES_PER_USER);
    let peak = users.saturating_add(
        follows
            .saturating_mul(BYTES_PER_END)
            .max(posts.saturating_mul(BYTES_PER_POST)),
    );
    let per_pass = (budget / threads.max(1) as u64).max(1);
    let at_least = threads.clamp(1, 4096) as u32;
    (peak.div_ceil(per_pass).min(4096) as u32).clamp(at_least, 4096)
}

/// Computes the boards: from the followers state an earlier night left under `output` and
/// the nights since, when it can be carried forward ([`carried`]), else in a pass over every
/// night.
pub fn run(
    fs: &FileSystems,
    inputs: &Inputs,
    options: &RankOptions,
    output: &Location,
) -> Result<Ranking> {
    let day = day_of_date(&options.date)
        .ok_or_else(|| Error::Usage(format!("--date {:?} is not YYYY-MM-DD", options.date)))?;
    let wanted: Vec<Metric> = Metric::ALL
        .into_iter()
        .filter(|m| options.metrics.contains(m))
        .collect();
    let whole = options.slice == Slice::ALL;
    let counts_followers = whole && !inputs.follows.is_empty();
    if counts_followers {
        if let Some(saved) = state::newest_before(fs, output, &options.date)? {
            if let Some(split) = carried::applies(fs, inputs, &saved, options.memory_budget)? {
                log::info!("rank: carrying the followers of {} forward", saved.date);
                return carried::run(fs, inputs, options, day, &saved, split, &wanted);
            }
        }
    }
    let threads = rayon::current_num_threads();
    let rows = inputs.rows(fs)?;
    let (n, mine) = options
        .slice
        .cut(threads, |t| partitions_for(rows, options.memory_budget, t));
    log::info!(
        "rank: {} follows, {} posts, {} comments in {n} partitions",
        rows[0],
        rows[1],
        rows[2]
    );
    let bar = crate::progress::count(mine.len() as u64, "rank");
    let mut parts: Vec<compute::Partition> = mine
        .into_par_iter()
        .map(|p| {
            let part = compute::partition(fs, inputs, day, (p, n), rows[0])?;
            bar.inc(1);
            Ok(part.keep_top(&wanted, options.top, counts_followers))
        })
        .collect::<Result<_>>()?;
    bar.finish_and_clear();
    let mut stats = RankStats {
        partitions: n,
        ..RankStats::default()
    };
    let mut boards = Vec::new();
    for &metric in &wanted {
        let mut candidates = Vec::new();
        let mut ranked = 0;
        for part in &parts {
            let (count, tops) = &part.tops[metric.index()];
            ranked += count;
            candidates.extend_from_slice(tops);
        }
        stats.users_ranked.push((metric, ranked));
        boards.push((metric, top(candidates, options.top)));
    }
    for part in &parts {
        stats.follow_rows += part.read.follow_rows;
        stats.post_rows += part.read.post_rows;
        stats.comment_rows += part.read.comment_rows;
        stats.comments_without_post += part.read.comments_without_post;
        stats.friend_count_rows += part.read.friend_count_rows;
    }
    // Every partition reads every row: report the input once.
    let n = parts.len().max(1) as u64;
    stats.follow_rows /= n;
    stats.post_rows /= n;
    stats.comment_rows /= n;
    stats.comments_without_post /= n;
    stats.friend_count_rows /= n;
    let followers = counts_followers.then(|| {
        let mut counts: Vec<(i64, i64)> = parts
            .iter_mut()
            .flat_map(|p| std::mem::take(&mut p.followers))
            .collect();
        counts.sort_unstable();
        let taken: Vec<history::Taken> = inputs.follows.iter().map(|n| n.taken.clone()).collect();
        state::Followers {
            date: options.date.clone(),
            covered: history::covered(&taken),
            counts: state::Counts::Held(counts),
        }
    });
    Ok(Ranking {
        boards,
        stats,
        followers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_shanghai_days() {
        let d = day_of_date("2026-11-29").unwrap();
        // 2026-11-29 00:00 +08:00 is 2026-11-28 16:00 UTC.
        let midnight = 1_795_910_400_000 - 8 * 3_600_000;
        assert_eq!(day_of_ms(midnight), d);
        assert_eq!(day_of_ms(midnight - 1), d - 1);
        assert_eq!(day_of_ms(midnight + 86_400_000 - 1), d);
        assert_eq!(day_of_ms(-1), 0);
        assert_eq!(day_of_ms(-8 * 3_600_000 - 1), -1);
        assert_eq!(day_of_date("2026-13-01"), None);
    }

    #[test]
    fn partitions_fit_the_budget_and_use_every_thread() {
        assert_eq!(partitions_for([0, 0, 0], 1 << 30, 2), 2);
        let rows = [100_000_000, 10_000_000, 0];
        let n = partitions_for(rows, 1 << 30, 2);
        // 2.4 GB of follow ends and 3.5 GB of users over two passes of 512 MiB each.
        assert_eq!(n, 12);
        assert!(partitions_for(rows, 1 << 28, 2) > n);
    }

    #[test]
    fn slices_boards_merge_into_the_whole_board() {
        let r = |rank, id, value| Ranked { rank, id, value };
        let a = vec![(Metric::Posts, vec![r(1, 5, 9), r(2, 1, 3)])];
        let b = vec![
            (Metric::Followers, vec![r(1, 2, 7)]),
            (Metric::Posts, vec![r(1, 4, 9), r(2, 8, 4)]),
        ];
        let merged = merge_boards(&[a, b], &[Metric::Posts, Metric::Followers], 2);
        let rows: Vec<_> = merged
            .into_iter()
            .map(|(m, b)| {
                let b: Vec<_> = b.iter().map(|x| (x.rank, x.id, x.value)).collect();
                (m, b)
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (Metric::Followers, vec![(1, 2, 7)]),
                (Metric::Posts, vec![(1, 4, 9), (2, 5, 9)]),
            ]
        );
        let stats = |rows, ranked| RankStats {
            follow_rows: rows,
            partitions: 4,
            users_ranked: vec![(Metric::Posts, ranked)],
            ..RankStats::default()
        };
        let whole = RankStats::of_slices(&[stats(10, 3), stats(10, 4)]).unwrap();
        assert_eq!(whole.users_ranked, vec![(Metric::Posts, 7)]);
        assert_eq!(RankStats::of_slices(&[stats(10, 3), stats(11, 4)]), None);
    }

    #[test]
    fn metric_names_round_trip() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_name(m.name()), Some(m));
            assert_eq!(Metric::ALL[m.index()], m);
        }
    }
}

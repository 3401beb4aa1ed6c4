//! Consecutive nights of raw crawl increments, as `weibo-etl run` meets them, with the
//! cumulative truth after each night.
//!
//! Each night brings new users, follows (some answering an earlier follow, so friendships
//! form across nights), posts (some reposting earlier ones) and comments, and crawls part of
//! the earlier data again: users, follows, and posts with grown reported counts. Night `k` is
//! written under `<out>/dt=<date k>/` in the canonical raw format, with `_truth.json`: the
//! counters that one load of nights `1..=k` must leave in HBase, computed here the plain
//! way (union by natural key; see [`crate::load::counters`] for the rules).
//!
//! Invariants: the output is a pure function of the spec (same seed, same bytes); a record
//! crawled again keeps its natural key, author and time, so only the reported counts change;
//! the truth's `digest` is an MD5 over every counter, defined in [`counters_digest`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use md5::{Digest, Md5};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::Serialize;

use super::{mid, uid};
use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

/// What each night brings.
#[derive(Clone, Debug, Serialize)]
pub struct NightsSpec {
    pub nights: u32,
    /// The first night (`YYYY-MM-DD`); the others follow day by day.
    pub first: String,
    pub seed: u64,
    pub users: u64,
    pub follows: u64,
    pub posts: u64,
    pub comments: u64,
    /// Share of a night's records that are earlier records crawled again.
    pub recrawl: f64,
}

impl NightsSpec {
    /// A preset's daily volume: its data set spread over the seven days it covers.
    pub fn preset(name: &str) -> Option<NightsSpec> {
        let (users, follows, posts, comments) = match name {
            "tiny" => (40, 180, 45, 60),
            "small" => (14_300, 42_900, 8_600, 30_000),
            "paper" => (1_070_000, 3_015_000, 581_000, 3_570_000),
            _ => return None,
        };
        Some(NightsSpec {
            nights: 3,
            first: "2026-11-01".into(),
            seed: 1,
            users,
            follows,
            posts,
            comments,
            recrawl: 0.1,
        })
    }
}

/// The counters after a night, as one load of every night so far must write them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct NightTruth {
    pub date: String,
    pub night: u32,
    /// Distinct records of the night itself and of the union so far.
    pub night_records: BTreeMap<String, u64>,
    pub total: BTreeMap<String, u64>,
    pub friend_pairs: u64,
    /// [`counters_digest`] of every user's and post's counters.
    pub digest: String,
    /// uid → [followers, following, posts, reposts received, comments received, friends];
    /// only for data sets of at most [`DETAIL_USERS`] users.
    pub users: Option<BTreeMap<i64, [u64; 6]>>,
    /// mid → [reposts, comments], as above.
    pub posts: Option<BTreeMap<i64, [u64; 2]>>,
}

/// Data sets up to this many users list every counter in the truth.
pub const DETAIL_USERS: usize = 20_000;

/// The digest of every counter: MD5 over the lines `u <uid> <followers> <following> <posts>
/// <reposts received> <comments received> <friends>` by uid, then `p <mid> <reposts>
/// <comments>` by mid, each ending in `\n`. A reader computes it from HBase the same way.
pub fn counters_digest(users: &BTreeMap<i64, [u64; 6]>, posts: &BTreeMap<i64, [u64; 2]>) -> String {
    let mut h = Md5::new();
    let mut line = String::new();
    for (uid, c) in users {
        line.clear();
        let _ = writeln!(
            line,
            "u {uid} {} {} {} {} {} {}",
            c[0], c[1], c[2], c[3], c[4], c[5]
        );
        h.update(line.as_bytes());
    }
    for (mid, c) in posts {
        line.clear();
        let _ = writeln!(line, "p {mid} {} {}", c[0], c[1]);
        h.update(line.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

struct World {
    users: BTreeSet<i64>,
    follows: BTreeSet<(i64, i64)>,
    /// mid → (author, created s, retweet mid, reported reposts)
    posts: BTreeMap<i64, (i64, i64, Option<i64>, u64)>,
    /// cid → (mid, commenter, created s)
    comments: BTreeMap<i64, (i64, i64, i64)>,
    next_user: u64,
    next_post: u64,
    next_comment: u64,
}

fn csv(header: &str, rows: &[String]) -> Vec<u8> {
    let mut s = String::with_capacity(header.len() + rows.len() * 64);
    s.push_str(header);
    s.push('\n');
    for r in rows {
        s.push_str(r);
        s.push('\n');
    }
    s.into_bytes()
}

/// Picks one of `items` (a skew toward the first when `skew`).
fn pick<T: Copy>(rng: &mut Pcg64, items: &[T], skew: bool) -> T {
    let u: f64 = rng.random();
    let u = if skew { u * u * u } else { u };
    items[((items.len() as f64 * u) as usize).min(items.len() - 1)]
}

/// Writes the nights under `out`; returns each night's truth.
pub fn generate(fs: &FileSystems, out: &Location, spec: &NightsSpec) -> Result<Vec<NightTruth>> {
    let first = chrono::NaiveDate::parse_from_str(&spec.first, "%Y-%m-%d")
        .map_err(|e| Error::Usage(format!("--date {:?}: {e}", spec.first)))?;
    let mut rng = Pcg64::seed_from_u64(spec.seed ^ 0x6e69_6768_7473);
    let mut w = World {
        users: BTreeSet::new(),
        follows: BTreeSet::new(),
        posts: BTreeMap::new(),
        comments: BTreeMap::new(),
        next_user: 0,
        next_post: 0,
        next_comment: 0,
    };
    let mut truths = Vec::new();
    for night in 0..spec.nights {
        let date = first + chrono::Duration::days(night as i64);
        let date_text = date.format("%Y-%m-%d").to_string();
        // Crawled in the evening (Asia/Shanghai); posts and comments of the day before it.
        let day_start = date
            .and_hms_opt(0, 0, 0)
            .expect("valid")
            .and_utc()
            .timestamp()
            - 8 * 3600;
        let crawl = super::formats::shanghai_text(day_start + 23 * 3600);
        let at = |rng: &mut Pcg64| day_start + rng.random_range(0..22 * 3600);
        let recrawls = |n: u64| (n as f64 * spec.recrawl).round() as usize;

        // Users: new ones, and some earlier ones again.
        let old_users: Vec<i64> = w.users.iter().copied().collect();
        let mut night_users: BTreeSet<i64> = BTreeSet::new();
        for _ in 0..spec.users {
            night_users.insert(uid(w.next_user));
            w.next_user += 1;
        }
        if !old_users.is_empty() {
            for _ in 0..recrawls(spec.users) {
                night_users.insert(pick(&mut rng, &old_users, false));
            }
        }
        w.users.extend(night_users.iter().copied());
        let everyone: Vec<i64> = w.users.iter().copied().collect();

        // Follows: a skewed followee; some answer an earlier follow; some are crawled again.
        let old_follows: Vec<(i64, i64)> = w.follows.iter().copied().collect();
        let mut night_follows: BTreeSet<(i64, i64)> = BTreeSet::new();
        while (night_follows.len() as u64) < spec.follows.min(everyone.len() as u64 * 4) {
            let edge = if !old_follows.is_empty() && rng.random_bool(0.15) {
                let (a, b) = pick(&mut rng, &old_follows, false);
                (b, a)
            } else {
                (
                    pick(&mut rng, &everyone, false),
                    pick(&mut rng, &everyone, true),
                )
            };
            if edge.0 != edge.1 {
                night_follows.insert(edge);
            }
        }
        if !old_follows.is_empty() {
            for _ in 0..recrawls(spec.follows) {
                night_follows.insert(pick(&mut rng, &old_follows, false));
            }
        }
        w.follows.extend(night_follows.iter().copied());

        // Posts: new ones (30 % reposting an earlier post), and earlier ones crawled again
        // with more reposts reported.
        let old_posts: Vec<i64> = w.posts.keys().copied().collect();
        let mut night_posts: BTreeSet<i64> = BTreeSet::new();
        for _ in 0..spec.posts {
            let m = mid(w.next_post);
            w.next_post += 1;
            let author = pick(&mut rng, &everyone, true);
            let rt = (!old_posts.is_empty() && rng.random_bool(0.3))
                .then(|| pick(&mut rng, &old_posts, false));
            let created = at(&mut rng);
            w.posts.insert(m, (author, created, rt, 0));
            night_posts.insert(m);
        }
        if !old_posts.is_empty() {
            for _ in 0..recrawls(spec.posts) {
                let m = pick(&mut rng, &old_posts, false);
                if let Some(p) = w.posts.get_mut(&m) {
                    p.3 += rng.random_range(1..50);
                }
                night_posts.insert(m);
            }
        }
        let all_posts: Vec<i64> = w.posts.keys().copied().collect();
        let mut night_comments: BTreeSet<i64> = BTreeSet::new();
        for _ in 0..spec.comments {
            let c = 4_950_000_000_000_000 + w.next_comment as i64 * 3;
            w.next_comment += 1;
            let on = pick(&mut rng, &all_posts, false);
            let by = pick(&mut rng, &everyone, false);
            // After the post it is on.
            let created = w.posts[&on].1.max(day_start) + rng.random_range(60..3600);
            w.comments
                .insert(c, (on, by, created.min(day_start + 22 * 3600)));
            night_comments.insert(c);
        }

        let dir = out.join(&format!("dt={date_text}"));
        let users: Vec<String> = night_users
            .iter()
            .map(|u| format!("{u},用户{u},{},{crawl}", 100 + u % 900))
            .collect();
        fs.write_atomic(
            &dir.join("users.csv"),
            &csv("uid,screen_name,followers_count,crawl_time", &users),
        )?;
        let follows: Vec<String> = night_follows
            .iter()
            .map(|(a, b)| format!("{a},{b},{crawl}"))
            .collect();
        fs.write_atomic(
            &dir.join("follows.csv"),
            &csv("follower,followee,crawl_time", &follows),
        )?;
        let posts: Vec<String> = night_posts
            .iter()
            .map(|m| {
                let (author, created, rt, reposts) = w.posts[m];
                let rt = rt.map(|r| r.to_string()).unwrap_or_default();
                let created = super::formats::shanghai_text(created);
                format!("{m},{author},{created},微博 {m},{reposts},{rt},{crawl}")
            })
            .collect();
        fs.write_atomic(
            &dir.join("posts.csv"),
            &csv(
                "mid,uid,created_at,text,reposts_count,retweet_mid,crawl_time",
                &posts,
            ),
        )?;
        let comments: Vec<String> = night_comments
            .iter()
            .map(|c| {
                let (on, by, created) = w.comments[c];
                let created = super::formats::shanghai_text(created);
                format!("{c},{on},{by},{created},评论 {c},{crawl}")
            })
            .collect();
        fs.write_atomic(
            &dir.join("comments.csv"),
            &csv("cid,mid,uid,created_at,text,crawl_time", &comments),
        )?;

        let truth = truth_of(
            &w,
            night + 1,
            &date_text,
            [
                ("users", night_users.len()),
                ("follows", night_follows.len()),
                ("posts", night_posts.len()),
                ("comments", night_comments.len()),
            ],
        );
        let text = serde_json::to_string_pretty(&truth).unwrap_or_default();
        fs.write_atomic(&dir.join("_truth.json"), text.as_bytes())?;
        truths.push(truth);
    }
    Ok(truths)
}

/// The counters of the union so far, the plain way.
fn truth_of(w: &World, night: u32, date: &str, records: [(&str, usize); 4]) -> NightTruth {
    let mut users: BTreeMap<i64, [u64; 6]> = w.users.iter().map(|u| (*u, [0; 6])).collect();
    for &(a, b) in &w.follows {
        users.entry(a).or_default()[1] += 1;
        users.entry(b).or_default()[0] += 1;
        if a < b && w.follows.contains(&(b, a)) {
            users.entry(a).or_default()[5] += 1;
            users.entry(b).or_default()[5] += 1;
        }
    }
    let friend_pairs = users.values().map(|c| c[5]).sum::<u64>() / 2;
    let mut posts: BTreeMap<i64, [u64; 2]> = BTreeMap::new();
    for (m, (author, ..)) in &w.posts {
        posts.insert(*m, [0, 0]);
        users.entry(*author).or_default()[2] += 1;
    }
    for (author_of_repost, target) in w.posts.values().filter_map(|p| Some((p.0, p.2?))) {
        let _ = author_of_repost;
        if let Some(p) = posts.get_mut(&target) {
            p[0] += 1;
            users.entry(w.posts[&target].0).or_default()[3] += 1;
        }
    }
    for (on, ..) in w.comments.values() {
        if let Some(p) = posts.get_mut(on) {
            p[1] += 1;
            users.entry(w.posts[on].0).or_default()[4] += 1;
        }
    }
    let digest = counters_digest(&users, &posts);
    let detail = users.len() <= DETAIL_USERS;
    NightTruth {
        date: date.to_string(),
        night,
        night_records: records
            .iter()
            .map(|(e, n)| (e.to_string(), *n as u64))
            .collect(),
        total: BTreeMap::from([
            ("users".to_string(), users.len() as u64),
            ("follows".to_string(), w.follows.len() as u64),
            ("posts".to_string(), w.posts.len() as u64),
            ("comments".to_string(), w.comments.len() as u64),
        ]),
        friend_pairs,
        digest,
        users: detail.then_some(users),
        posts: detail.then_some(posts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nights_grow_recrawl_and_are_reproducible() {
        let fs = FileSystems::new("file:///");
        let spec = NightsSpec {
            nights: 3,
            ..NightsSpec::preset("tiny").unwrap()
        };
        let mut runs = Vec::new();
        for _ in 0..2 {
            let dir = tempfile::tempdir().unwrap();
            let out = fs.parse(dir.path().to_str().unwrap()).unwrap();
            let truths = generate(&fs, &out, &spec).unwrap();
            let bytes = std::fs::read(dir.path().join("dt=2026-11-03/posts.csv")).unwrap();
            runs.push((truths, bytes));
        }
        assert_eq!(runs[0].1, runs[1].1, "same seed, same bytes");
        let t = &runs[0].0;
        assert_eq!(t.len(), 3);
        assert_eq!(t[2].date, "2026-11-03");
        // Later nights crawl earlier records again: the union grows by less than the night.
        for e in ["users", "follows", "posts"] {
            let grew = t[2].total[e] - t[1].total[e];
            assert!(
                grew < t[2].night_records[e],
                "{e}: {grew} vs {:?}",
                t[2].night_records
            );
        }
        assert!(t[2].friend_pairs > t[0].friend_pairs);
        let users = t[2].users.as_ref().unwrap();
        let followers: u64 = users.values().map(|c| c[0]).sum();
        assert_eq!(followers, t[2].total["follows"]);
        assert_eq!(
            t[2].digest,
            counters_digest(users, t[2].posts.as_ref().unwrap())
        );
        assert_ne!(t[1].digest, t[2].digest);
    }
}

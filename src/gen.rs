//! Synthetic Weibo data with known right answers: users, follows, posts (with repost chains and
//! mentions), comments and reposts in the canonical raw format, dirt injected at a controlled
//! rate, and a `truth.json` that says what a correct pipeline must produce from it.
//!
//! Shape: followee choice is skewed (`index = N * u^3`, so the first users are celebrities with
//! a large share of all fans), followers are uniform, a follow is answered with probability
//! `q = r / (2 - r)` so that the reciprocity (`2 * mutual / edges`) is `r` (30 %). A share of
//! users are zombies that follow but never post. Posts are spread over `days` days ending on the
//! run date; 30 % of posts repost an earlier post (chains form as reposts get reposted).
//!
//! Invariants: the output is a pure function of the spec (same seed, same bytes, whatever the
//! thread count); every injected dirty record is counted in the truth under the reason or
//! duplicate count `clean` must report for it.

use std::collections::BTreeMap;
use std::io::Write;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;
use serde::Serialize;

use crate::clean::values::mid_to_bid;
use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

/// Sizes and knobs of a data set.
#[derive(Clone, Debug, Serialize)]
pub struct GenSpec {
    pub users: u64,
    pub follows: u64,
    pub posts: u64,
    /// Target for posts + comments + mentions (the paper's user-post edges); comments fill
    /// what posts and mentions leave.
    pub user_post_edges: u64,
    pub days: u32,
    pub seed: u64,
    /// Share of extra dirty records injected per entity.
    pub noise: f64,
    /// The run date (`YYYY-MM-DD`, Asia/Shanghai); data ends on it.
    pub date: String,
    /// Rows per output file.
    pub part_rows: u64,
    /// Entities to write (all when empty); the truth still describes the whole data set.
    pub only: Vec<String>,
}

impl GenSpec {
    fn writes(&self, entity: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|e| e == entity)
    }
}

impl GenSpec {
    /// A preset by name: `tiny` (tests), `small` (~100 k users), `paper` (the paper's sizes).
    pub fn preset(name: &str) -> Option<GenSpec> {
        let (users, follows, posts, edges) = match name {
            "tiny" => (200, 1_200, 300, 900),
            "small" => (100_000, 300_000, 60_000, 450_000),
            "paper" => (7_489_707, 21_105_470, 4_067_183, 32_958_308),
            _ => return None,
        };
        Some(GenSpec {
            users,
            follows,
            posts,
            user_post_edges: edges,
            days: 7,
            seed: 1,
            noise: 0.01,
            date: "2026-11-29".into(),
            part_rows: 1_000_000,
            only: Vec::new(),
        })
    }

    /// A spec scaled from the paper's ratios for `users` users.
    pub fn scaled(users: u64) -> GenSpec {
        let paper = GenSpec::preset("paper").expect("preset exists");
        let f = users as f64 / paper.users as f64;
        GenSpec {
            users,
            follows: (paper.follows as f64 * f).round() as u64,
            posts: (paper.posts as f64 * f).round() as u64,
            user_post_edges: (paper.user_post_edges as f64 * f).round() as u64,
            ..paper
        }
    }
}

/// What `clean` and `friends` must report for the generated data.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Truth {
    pub spec: Option<GenSpec>,
    /// Per entity: records_in, records_out, rejected by reason, duplicates.
    pub entities: BTreeMap<String, EntityTruth>,
    pub friend_pairs: u64,
    pub reciprocity: f64,
    pub user_post_edges: u64,
    pub mentions: u64,
    pub top_by_followers: Vec<(i64, u64)>,
    pub sampled_users: Vec<UserTruth>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct EntityTruth {
    pub records_in: u64,
    pub records_out: u64,
    pub rejected: BTreeMap<String, u64>,
    pub duplicates: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct UserTruth {
    pub uid: i64,
    pub followers: u64,
    pub following: u64,
    pub posts: u64,
    pub friends: u64,
    pub reposts_received: u64,
    pub comments_received: u64,
}

/// The uid of user index `i`: ten digits, like real ones, and below 2^31.
pub fn uid(i: u64) -> i64 {
    1_000_000_000 + i as i64
}

/// The mid of post index `i` (16 digits, increasing with time like real mids).
pub fn mid(i: u64) -> i64 {
    4_900_000_000_000_000 + i as i64 * 7
}

fn cid(i: u64) -> i64 {
    4_950_000_000_000_000 + i as i64 * 3
}

const PROVINCES: &[(&str, &str)] = &[
    ("北京", "海淀"),
    ("上海", "浦东"),
    ("广东", "深圳"),
    ("浙江", "杭州"),
    ("四川", "成都"),
    ("湖北", "武汉"),
    ("江苏", "南京"),
    ("其他", ""),
];

const PHRASES: &[&str] = &[
    "热爱生活",
    "喜欢旅行和摄影",
    "数据工程师",
    "每天进步一点点",
    "关注科技与互联网",
    "记录日常",
    "美食爱好者",
    "读书笔记",
    "跑步十年",
    "音乐是生活的一部分",
    "偶尔写代码",
    "北京的秋天最好",
    "周末爬山",
    "猫奴一枚",
    "分享好物",
];

const SOURCES: &[&str] = &[
    "iPhone 16 Pro",
    "Android",
    "微博 weibo.com",
    "HUAWEI Mate 70",
    "小米15",
];

/// Shanghai wall-clock text of epoch seconds.
fn shanghai_text(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs + 8 * 3600, 0)
        .unwrap_or_default()
        .naive_utc()
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

fn day_end_secs(date: &str) -> Result<i64> {
    let d = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d")
        .map_err(|e| Error::Usage(format!("--date {date:?}: {e}")))?;
    Ok(d.and_hms_opt(23, 0, 0)
        .expect("valid")
        .and_utc()
        .timestamp()
        - 8 * 3600)
}

fn rng_for(seed: u64, stream: u64, part: u64) -> Pcg64 {
    Pcg64::seed_from_u64(
        seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ part.wrapping_mul(0xd1b5_4a32_d192_ed03),
    )
}

/// Skewed pick in `0..n`: small indices are far more likely (`n * u^power`).
fn skewed(rng: &mut Pcg64, n: u64, power: i32) -> u64 {
    let u: f64 = rng.random();
    ((n as f64) * u.powi(power)).min((n - 1) as f64) as u64
}

struct Graph {
    /// Distinct edges `follower << 32 | followee` over user indices, sorted.
    edges: Vec<u64>,
    followers: Vec<u32>,
    following: Vec<u32>,
    friends: Vec<u32>,
    mutual_pairs: u64,
}

fn build_graph(spec: &GenSpec) -> Graph {
    let n = spec.users.max(2);
    let reciprocity = 0.3;
    let q = reciprocity / (2.0 - reciprocity);
    // Generate in parallel chunks of base edges, each chunk with its own seeded stream.
    let chunks = 64u64;
    let target = spec.follows;
    let per_chunk = (target as f64 / (1.0 + q) * 1.08 / chunks as f64).ceil() as u64 + 1;
    let mut edges: Vec<u64> = (0..chunks)
        .into_par_iter()
        .flat_map_iter(|c| {
            let mut rng = rng_for(spec.seed, 1, c);
            let mut out = Vec::with_capacity((per_chunk as f64 * (1.0 + q)) as usize + 4);
            for _ in 0..per_chunk {
                let a = rng.random_range(0..n);
                let b = skewed(&mut rng, n, 3);
                if a == b {
                    continue;
                }
                out.push((a << 32) | b);
                if rng.random_bool(q) {
                    out.push((b << 32) | a);
                }
            }
            out
        })
        .collect();
    edges.par_sort_unstable();
    edges.dedup();
    if edges.len() as u64 > target {
        // Drop a deterministic pseudo-random subset to hit the exact count.
        let mut rng = rng_for(spec.seed, 2, 0);
        let mut keep: Vec<(u64, u64)> = edges.iter().map(|&e| (rng.random::<u64>(), e)).collect();
        keep.par_sort_unstable();
        keep.truncate(target as usize);
        edges = keep.into_iter().map(|(_, e)| e).collect();
        edges.par_sort_unstable();
    }
    let mut followers = vec![0u32; n as usize];
    let mut following = vec![0u32; n as usize];
    let mut friends = vec![0u32; n as usize];
    let mut mutual_pairs = 0;
    for &e in &edges {
        let (a, b) = (e >> 32, e & 0xffff_ffff);
        following[a as usize] += 1;
        followers[b as usize] += 1;
        if a < b && edges.binary_search(&((b << 32) | a)).is_ok() {
            mutual_pairs += 1;
            friends[a as usize] += 1;
            friends[b as usize] += 1;
        }
    }
    Graph {
        edges,
        followers,
        following,
        friends,
        mutual_pairs,
    }
}

struct PostRow {
    author: u64,
    created: i64,
    retweet: Option<u64>,
    mentions: Vec<u64>,
}

/// Writes a data set under `out`; returns its truth (also written as `truth.json`).
pub fn generate(fs: &FileSystems, out: &Location, spec: &GenSpec) -> Result<Truth> {
    let end = day_end_secs(&spec.date)?;
    let start = end - spec.days.max(1) as i64 * 86_400;
    let crawl_text = shanghai_text(end);
    let n = spec.users.max(2);
    let zombie = |i: u64| i % 10 >= 7 && i > 100; // 30 % zombies, never among celebrities

    log::info!("gen: follow graph of {} users", n);
    let graph = build_graph(spec);

    // Posts: sequential, so reposts can point at earlier posts (chains).
    log::info!("gen: {} posts", spec.posts);
    let active: Vec<u64> = (0..n).filter(|&i| !zombie(i)).collect();
    let mut rng = rng_for(spec.seed, 3, 0);
    let mut posts: Vec<PostRow> = Vec::with_capacity(spec.posts as usize);
    let mut mentions = 0u64;
    for i in 0..spec.posts {
        let author = active[skewed(&mut rng, active.len() as u64, 2) as usize];
        let created = start + (i as i64 * (end - start - 60)) / spec.posts.max(1) as i64;
        let retweet = (i > 0 && rng.random_bool(0.3)).then(|| {
            // Mostly recent posts: reposts of reposts make chains several levels deep.
            let back = skewed(&mut rng, i.min(5_000), 2) + 1;
            i - back.min(i)
        });
        let m = if rng.random_bool(0.2) {
            (0..rng.random_range(1..=2))
                .map(|_| skewed(&mut rng, n, 3))
                .collect()
        } else {
            Vec::new()
        };
        mentions += m.len() as u64;
        posts.push(PostRow {
            author,
            created,
            retweet,
            mentions: m,
        });
    }
    let comments = spec.user_post_edges.saturating_sub(spec.posts + mentions);

    let mut posts_by = vec![0u32; n as usize];
    let mut reposts_received = vec![0u32; n as usize];
    for p in &posts {
        posts_by[p.author as usize] += 1;
        if let Some(r) = p.retweet {
            reposts_received[posts[r as usize].author as usize] += 1;
        }
    }
    let mut comments_received = vec![0u32; n as usize];
    let comment_target = |c: u64| -> u64 {
        let mut r = rng_for(spec.seed, 5, c);
        skewed(&mut r, spec.posts.max(1), 2)
    };
    if spec.posts > 0 {
        for c in 0..comments {
            comments_received[posts[comment_target(c) as usize].author as usize] += 1;
        }
    }

    let mut truth = Truth {
        spec: Some(spec.clone()),
        friend_pairs: graph.mutual_pairs,
        reciprocity: 2.0 * graph.mutual_pairs as f64 / graph.edges.len().max(1) as f64,
        mentions,
        user_post_edges: spec.posts + mentions + comments,
        ..Truth::default()
    };

    let noise = spec.noise;
    let dirty = |rng: &mut Pcg64| noise > 0.0 && rng.random_bool(noise.min(1.0));

    // Users.
    log::info!("gen: writing users");
    let users_truth = write_parts_if(
        spec.writes("users"),
        fs,
        &out.join("users"),
        "users",
        "csv",
        n,
        spec.part_rows,
        |part, range, w| {
            let mut rng = rng_for(spec.seed, 10, part);
            let mut t = EntityTruth::default();
            writeln!(w, "uid,screen_name,gender,province,city,location,description,verified,verified_type,followers_count,follow_count,statuses_count,created_at,crawl_time")?;
            for i in range {
                let (prov, city) = PROVINCES[(i % PROVINCES.len() as u64) as usize];
                let mut desc = String::with_capacity(1000);
                while desc.len() < 820 {
                    desc.push_str(PHRASES[rng.random_range(0..PHRASES.len())]);
                    desc.push('，');
                }
                let verified = graph.followers[i as usize] > 10_000;
                let created = 1_262_275_200 + (i as i64 * 7919) % 500_000_000;
                let line = format!(
                    "{},用户{:07},{},{},{},{} {},\"{}\",{},{},{},{},{},{},{}\n",
                    uid(i),
                    i,
                    if i % 2 == 0 { "m" } else { "f" },
                    prov,
                    city,
                    prov,
                    city,
                    desc,
                    verified,
                    if verified { 0 } else { -1 },
                    graph.followers[i as usize],
                    graph.following[i as usize],
                    posts_by[i as usize],
                    shanghai_text(created),
                    crawl_text
                );
                w.write_all(line.as_bytes())?;
                t.records_in += 1;
                t.records_out += 1;
                if dirty(&mut rng) {
                    match rng.random_range(0..2) {
                        0 => {
                            // An older crawl of the same user: a duplicate the newest crawl beats.
                            let older = line.replace(&crawl_text, &shanghai_text(end - 86_400));
                            w.write_all(older.as_bytes())?;
                            t.records_in += 1;
                            t.duplicates += 1;
                        }
                        _ => {
                            // A count no parser can read.
                            writeln!(w, "{},坏计数{i},m,,,,,false,-1,很多,1,1,2020-01-01 00:00:00,{crawl_text}", uid(n + i))?;
                            t.records_in += 1;
                            *t.rejected.entry("bad_count".into()).or_default() += 1;
                        }
                    }
                }
            }
            Ok(t)
        },
    )?;
    if spec.writes("users") {
        truth.entities.insert("users".into(), users_truth);
    }

    // Follows.
    log::info!("gen: writing {} follows", graph.edges.len());
    let edges = &graph.edges;
    let follows_truth = write_parts_if(
        spec.writes("follows"),
        fs,
        &out.join("follows"),
        "follows",
        "csv",
        edges.len() as u64,
        spec.part_rows,
        |part, range, w| {
            let mut rng = rng_for(spec.seed, 11, part);
            let mut t = EntityTruth::default();
            writeln!(w, "follower,followee,followed_at,crawl_time")?;
            for k in range {
                let e = edges[k as usize];
                let (a, b) = (e >> 32, e & 0xffff_ffff);
                let followed = if rng.random_bool(0.8) {
                    shanghai_text(start - rng.random_range(0..86_400 * 900))
                } else {
                    String::new()
                };
                writeln!(w, "{},{},{},{}", uid(a), uid(b), followed, crawl_text)?;
                t.records_in += 1;
                t.records_out += 1;
                if dirty(&mut rng) {
                    if rng.random_bool(0.5) {
                        writeln!(w, "{},{},{},{}", uid(a), uid(a), followed, crawl_text)?;
                        *t.rejected.entry("self_follow".into()).or_default() += 1;
                    } else {
                        writeln!(
                            w,
                            "{},{},{},{}",
                            uid(a),
                            uid(b),
                            followed,
                            shanghai_text(end - 3_600)
                        )?;
                        t.duplicates += 1;
                    }
                    t.records_in += 1;
                }
            }
            Ok(t)
        },
    )?;
    if spec.writes("follows") {
        truth.entities.insert("follows".into(), follows_truth);
    }

    // Posts (JSON lines) and reposts (CSV).
    log::info!("gen: writing posts");
    let posts_ref = &posts;
    let posts_truth = write_parts_if(
        spec.writes("posts"),
        fs,
        &out.join("posts"),
        "posts",
        "jsonl",
        spec.posts,
        spec.part_rows,
        |part, range, w| {
            let mut rng = rng_for(spec.seed, 12, part);
            let mut t = EntityTruth::default();
            for i in range {
                let p = &posts_ref[i as usize];
                let at: Vec<String> = p.mentions.iter().map(|m| format!("用户{m:07}")).collect();
                let mut obj = serde_json::json!({
                    "mid": mid(i).to_string(),
                    "bid": mid_to_bid(mid(i)),
                    "uid": uid(p.author).to_string(),
                    "created_at": shanghai_text(p.created),
                    "text": format!("第{i}条微博 {}", at.iter().map(|a| format!("@{a}")).collect::<Vec<_>>().join(" ")),
                    "source": SOURCES[(i % SOURCES.len() as u64) as usize],
                    "reposts_count": "0",
                    "comments_count": "0",
                    "attitudes_count": (i % 1000).to_string(),
                    "topics": if i % 5 == 0 { "大数据" } else { "" },
                    "at_users": at.join(","),
                    "pics": "",
                    "retweet_mid": p.retweet.map(|r| mid(r).to_string()).unwrap_or_default(),
                    "crawl_time": crawl_text,
                });
                w.write_all(obj.to_string().as_bytes())?;
                w.write_all(b"\n")?;
                t.records_in += 1;
                t.records_out += 1;
                if dirty(&mut rng) {
                    match rng.random_range(0..2) {
                        0 => {
                            obj["created_at"] = "上周某天".into();
                            obj["mid"] = mid(spec.posts + i).to_string().into();
                            *t.rejected.entry("bad_time".into()).or_default() += 1;
                        }
                        _ => {
                            obj["mid"] = format!("{:.2E}", mid(i) as f64).into();
                            *t.rejected.entry("lossy_id".into()).or_default() += 1;
                        }
                    }
                    w.write_all(obj.to_string().as_bytes())?;
                    w.write_all(b"\n")?;
                    t.records_in += 1;
                }
            }
            Ok(t)
        },
    )?;
    if spec.writes("posts") {
        truth.entities.insert("posts".into(), posts_truth);
    }

    let repost_ids: Vec<u64> = (0..spec.posts)
        .filter(|&i| posts[i as usize].retweet.is_some())
        .collect();
    let repost_ids = &repost_ids;
    let reposts_truth = write_parts_if(
        spec.writes("reposts"),
        fs,
        &out.join("reposts"),
        "reposts",
        "csv",
        repost_ids.len() as u64,
        spec.part_rows,
        |_, range, w| {
            let mut t = EntityTruth::default();
            writeln!(w, "mid,uid,retweet_mid,created_at,text,crawl_time")?;
            for k in range {
                let i = repost_ids[k as usize];
                let p = &posts_ref[i as usize];
                let r = p.retweet.expect("filtered");
                writeln!(
                    w,
                    "{},{},{},{},转发微博,{}",
                    mid(i),
                    uid(p.author),
                    mid(r),
                    shanghai_text(p.created),
                    crawl_text
                )?;
                t.records_in += 1;
                t.records_out += 1;
            }
            Ok(t)
        },
    )?;
    if spec.writes("reposts") {
        truth.entities.insert("reposts".into(), reposts_truth);
    }

    log::info!("gen: writing {comments} comments");
    let comments_truth = write_parts_if(
        spec.writes("comments"),
        fs,
        &out.join("comments"),
        "comments",
        "csv",
        if spec.posts > 0 { comments } else { 0 },
        spec.part_rows,
        |part, range, w| {
            let mut rng = rng_for(spec.seed, 13, part);
            let mut t = EntityTruth::default();
            writeln!(
                w,
                "cid,mid,uid,created_at,text,like_count,reply_to_cid,crawl_time"
            )?;
            for c in range {
                let target = comment_target(c);
                let p = &posts_ref[target as usize];
                let when = p.created + rng.random_range(0..(end - p.created).max(1));
                writeln!(
                    w,
                    "{},{},{},{},评论{c},{},,{}",
                    cid(c),
                    mid(target),
                    uid(rng.random_range(0..n)),
                    shanghai_text(when),
                    c % 50,
                    crawl_text
                )?;
                t.records_in += 1;
                t.records_out += 1;
            }
            Ok(t)
        },
    )?;
    if spec.writes("comments") {
        truth.entities.insert("comments".into(), comments_truth);
    }

    // Top users and a few sampled users' counters.
    let mut top: Vec<(u64, u32)> = graph
        .followers
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u64, *f))
        .collect();
    top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    truth.top_by_followers = top
        .iter()
        .take(10)
        .map(|(i, f)| (uid(*i), *f as u64))
        .collect();
    let samples = [0, 1, 2, n / 3, n / 2, n - 1];
    truth.sampled_users = samples
        .iter()
        .map(|&i| UserTruth {
            uid: uid(i),
            followers: graph.followers[i as usize] as u64,
            following: graph.following[i as usize] as u64,
            posts: posts_by[i as usize] as u64,
            friends: graph.friends[i as usize] as u64,
            reposts_received: reposts_received[i as usize] as u64,
            comments_received: comments_received[i as usize] as u64,
        })
        .collect();

    let text = serde_json::to_string_pretty(&truth).unwrap_or_default();
    fs.write_atomic(&out.join("_truth.json"), text.as_bytes())?;
    Ok(truth)
}

/// [`write_parts`] when `enabled`; otherwise writes nothing and returns an empty truth.
#[allow(clippy::too_many_arguments)]
fn write_parts_if(
    enabled: bool,
    fs: &FileSystems,
    dir: &Location,
    name: &str,
    ext: &str,
    rows: u64,
    part_rows: u64,
    fill: impl Fn(u64, std::ops::Range<u64>, &mut dyn Write) -> std::io::Result<EntityTruth> + Sync,
) -> Result<EntityTruth> {
    if enabled {
        write_parts(fs, dir, name, ext, rows, part_rows, fill)
    } else {
        Ok(EntityTruth::default())
    }
}

/// Writes `rows` rows as numbered part files, in parallel; `fill` writes one part's rows and
/// returns its truth, which is summed.
fn write_parts(
    fs: &FileSystems,
    dir: &Location,
    name: &str,
    ext: &str,
    rows: u64,
    part_rows: u64,
    fill: impl Fn(u64, std::ops::Range<u64>, &mut dyn Write) -> std::io::Result<EntityTruth> + Sync,
) -> Result<EntityTruth> {
    let part_rows = part_rows.max(1);
    let parts = rows.div_ceil(part_rows).max(1);
    let truths: Vec<EntityTruth> = (0..parts)
        .into_par_iter()
        .map(|part| -> Result<EntityTruth> {
            let location = dir.join(&format!("{name}-{part:05}.{ext}"));
            let mut file = fs.create_atomic(&location)?;
            let range = part * part_rows..((part + 1) * part_rows).min(rows);
            let t = fill(part, range, &mut file).map_err(|e| Error::Io {
                op: "write",
                path: location.to_string(),
                source: e,
            })?;
            file.commit()?;
            Ok(t)
        })
        .collect::<Result<_>>()?;
    let mut total = EntityTruth::default();
    for t in truths {
        total.records_in += t.records_in;
        total.records_out += t.records_out;
        total.duplicates += t.duplicates;
        for (k, v) in t.rejected {
            *total.rejected.entry(k).or_default() += v;
        }
    }
    Ok(total)
}

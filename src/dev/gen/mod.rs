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

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::field_rules::mid_to_bid;
use crate::hdfs::{FileSystems, Location};

mod cascades;
pub mod formats;
pub mod nights;

pub use cascades::CascadesTruth;

use formats::{shanghai_text, Comment, Follow, NetworkArc, OutFormat, PartFiles, Post, User};

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
    /// Raw formats to write, each record in one of those that can carry it (see
    /// [`formats`]); canonical when empty or when none can.
    pub formats: Vec<OutFormat>,
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
            formats: vec![OutFormat::Canonical],
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
    /// The `user_post` rows a load writes: posts and reposts by their authors, mentions, and
    /// comments whose commenter is known (weibo-crawler's export names only a screen name).
    pub user_post_edges: u64,
    pub mentions: u64,
    /// The ten users with the most of each counter, `(uid, count)`, most first.
    pub top_by_followers: Vec<(i64, u64)>,
    pub top_by_following: Vec<(i64, u64)>,
    pub top_by_posts: Vec<(i64, u64)>,
    pub top_by_friends: Vec<(i64, u64)>,
    pub top_by_reposts_received: Vec<(i64, u64)>,
    pub top_by_comments_received: Vec<(i64, u64)>,
    pub sampled_users: Vec<UserTruth>,
    /// Per entity, the records written in each raw format (dirty ones included).
    pub formats: BTreeMap<String, BTreeMap<String, u64>>,
    /// What `cascades` must build from the posts' repost chains.
    pub cascades: CascadesTruth,
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
        seed ^ stream.wrapping_mul(crate::hash::GOLDEN) ^ part.wrapping_mul(0xd1b5_4a32_d192_ed03),
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

/// A post's own words: its number and its mentions (a repost's text adds its hops).
fn post_words(posts: &[PostRow], i: usize) -> String {
    let at: Vec<String> = posts[i]
        .mentions
        .iter()
        .map(|m| format!("@用户{m:07}"))
        .collect();
    format!("第{i}条微博 {}", at.join(" "))
}

struct PostRow {
    author: u64,
    created: i64,
    retweet: Option<u64>,
    mentions: Vec<u64>,
}

/// Writes a data set under `out`; returns its truth (also written as `truth.json`).
pub fn generate(fs: &FileSystems, out: &Location, spec: &GenSpec) -> Result<Truth> {
    let w = World::build(spec)?;
    let mut truth = Truth {
        spec: Some(spec.clone()),
        friend_pairs: w.graph.mutual_pairs,
        reciprocity: 2.0 * w.graph.mutual_pairs as f64 / w.graph.edges.len().max(1) as f64,
        mentions: w.mentions,
        user_post_edges: spec.posts + w.mentions + w.comments,
        ..Truth::default()
    };
    let out_ctx = OutCtx { fs, out, spec };
    for (entity, (t, f)) in [
        ("users", write_users(&out_ctx, &w)?),
        ("follows", write_follows(&out_ctx, &w)?),
        ("posts", write_posts(&out_ctx, &w)?),
        ("reposts", write_reposts(&out_ctx, &w)?),
        ("comments", write_comments(&out_ctx, &w)?),
    ] {
        if spec.writes(entity) {
            if entity == "comments" {
                // weibo-crawler's export names the commenter by screen name only: no uid, so
                // no user_post row for those comments.
                let nameless = f.get(OutFormat::WeiboCrawler.name()).copied().unwrap_or(0);
                truth.user_post_edges -= nameless;
            }
            truth.entities.insert(entity.into(), t);
            truth.formats.insert(entity.into(), f);
        }
    }

    w.rank_and_sample(&mut truth);
    let text = serde_json::to_string_pretty(&truth).unwrap_or_default();
    fs.write_atomic(&out.join("_truth.json"), text.as_bytes())?;
    Ok(truth)
}

/// The post comment `c` is on.
fn comment_target(spec: &GenSpec, c: u64) -> u64 {
    let mut r = rng_for(spec.seed, 5, c);
    skewed(&mut r, spec.posts.max(1), 2)
}

/// What writing one entity gives: its truth, and the records written per format.
type Written = (EntityTruth, BTreeMap<String, u64>);

/// The data set before it is written: the follow graph, the posts with their chains, and
/// what each user has; every writer reads it, none changes it.
struct World<'a> {
    spec: &'a GenSpec,
    /// The crawl's end (the night's end) and the start of the days it covers, epoch s.
    end: i64,
    start: i64,
    crawl_text: String,
    /// Users.
    n: u64,
    graph: Graph,
    posts: Vec<PostRow>,
    chains: cascades::Chains,
    mentions: u64,
    comments: u64,
    posts_by: Vec<u32>,
    reposts_received: Vec<u32>,
    comments_received: Vec<u32>,
}

impl<'a> World<'a> {
    fn build(spec: &'a GenSpec) -> Result<World<'a>> {
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
        // Reposts as the API names them: the root as what was reposted, the hops in the text.
        let chains = cascades::hang(&mut posts);

        let mut posts_by = vec![0u32; n as usize];
        let mut reposts_received = vec![0u32; n as usize];
        for p in &posts {
            posts_by[p.author as usize] += 1;
            if let Some(r) = p.retweet {
                reposts_received[posts[r as usize].author as usize] += 1;
            }
        }
        let mut comments_received = vec![0u32; n as usize];
        if spec.posts > 0 {
            for c in 0..comments {
                comments_received[posts[comment_target(spec, c) as usize].author as usize] += 1;
            }
        }
        Ok(World {
            spec,
            end,
            start,
            crawl_text,
            n,
            graph,
            posts,
            chains,
            mentions,
            comments,
            posts_by,
            reposts_received,
            comments_received,
        })
    }

    /// Whether this record gets a dirty twin (`--noise`).
    fn dirty(&self, rng: &mut Pcg64) -> bool {
        let noise = self.spec.noise;
        noise > 0.0 && rng.random_bool(noise.min(1.0))
    }

    /// The formats of the spec that carry `entity`.
    fn formats_for(&self, entity: &str) -> Vec<OutFormat> {
        self.spec
            .formats
            .iter()
            .copied()
            .filter(|f| f.carries(entity))
            .collect()
    }

    /// Top users and a few sampled users' counters, into the truth.
    fn rank_and_sample(&self, truth: &mut Truth) {
        let World {
            n,
            ref graph,
            ref posts,
            ref chains,
            ref posts_by,
            ref reposts_received,
            ref comments_received,
            ..
        } = *self;
        // Top users and a few sampled users' counters.
        // Ties go to the smaller uid, so the lists are a function of the data.
        let top = |metric: &[u32]| -> Vec<(i64, u64)> {
            let mut ranked: Vec<(u64, u32)> = metric
                .iter()
                .enumerate()
                .map(|(i, v)| (i as u64, *v))
                .collect();
            ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            ranked
                .iter()
                .take(10)
                .map(|(i, v)| (uid(*i), *v as u64))
                .collect()
        };
        truth.cascades = chains.truth(posts);
        truth.top_by_followers = top(&graph.followers);
        truth.top_by_following = top(&graph.following);
        truth.top_by_posts = top(posts_by);
        truth.top_by_friends = top(&graph.friends);
        truth.top_by_reposts_received = top(reposts_received);
        truth.top_by_comments_received = top(comments_received);
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
    }
}

/// The users, with a dirty twin now and then (an older crawl, an unreadable count).
fn write_users(out_ctx: &OutCtx<'_>, w: &World<'_>) -> Result<Written> {
    let World {
        spec,
        end,
        n,
        ref graph,
        ref posts_by,
        ..
    } = *w;
    // Users.
    log::info!("gen: writing users");
    let user_formats = w.formats_for("users");
    out_ctx.write_parts("users", n, |part, range, files| {
        let mut rng = rng_for(spec.seed, 10, part);
        let mut t = EntityTruth::default();
        for i in range {
            let format = formats::pick(&user_formats, spec.seed, 10, i);
            let (province, city) = PROVINCES[(i % PROVINCES.len() as u64) as usize];
            let mut desc = String::with_capacity(1000);
            while desc.len() < 820 {
                desc.push_str(PHRASES[rng.random_range(0..PHRASES.len())]);
                desc.push('，');
            }
            let (followers, following, statuses) = (
                graph.followers[i as usize].to_string(),
                graph.following[i as usize].to_string(),
                posts_by[i as usize].to_string(),
            );
            let name = format!("用户{i:07}");
            let mut user = User {
                uid: uid(i),
                screen_name: &name,
                male: i % 2 == 0,
                province,
                city,
                description: &desc,
                verified: graph.followers[i as usize] > 10_000,
                followers: &followers,
                following: &following,
                statuses: &statuses,
                created: 1_262_275_200 + (i as i64 * 7919) % 500_000_000,
                crawl: end,
            };
            user.write(format, files.record(format)?)?;
            t.records_in += 1;
            t.records_out += 1;
            if w.dirty(&mut rng) {
                match rng.random_range(0..2) {
                    0 => {
                        // An older crawl of the same user: a duplicate the newest crawl beats.
                        user.crawl = end - 86_400;
                        user.write(format, files.record(format)?)?;
                        t.duplicates += 1;
                    }
                    _ => {
                        // A count no parser can read.
                        let bad_name = format!("坏计数{i}");
                        User {
                            uid: uid(n + i),
                            screen_name: &bad_name,
                            male: true,
                            province: "",
                            city: "",
                            description: "",
                            verified: false,
                            followers: "很多",
                            following: "1",
                            statuses: "1",
                            created: 1_577_808_000,
                            crawl: end,
                        }
                        .write(format, files.record(format)?)?;
                        *t.rejected.entry("bad_count".into()).or_default() += 1;
                    }
                }
                t.records_in += 1;
            }
        }
        Ok(t)
    })
}

/// The follow edges (AMiner's as one network file per part), with duplicates and self
/// follows now and then.
fn write_follows(out_ctx: &OutCtx<'_>, w: &World<'_>) -> Result<Written> {
    let World {
        spec,
        end,
        start,
        ref graph,
        ..
    } = *w;
    // Follows.
    log::info!("gen: writing {} follows", graph.edges.len());
    let edges = &graph.edges;
    let follow_formats = w.formats_for("follows");
    let follow_format = |k: u64| formats::pick(&follow_formats, spec.seed, 11, k);
    let part_rows = spec.part_rows.max(1);
    out_ctx.write_parts("follows", edges.len() as u64, |part, range, files| {
        let mut rng = rng_for(spec.seed, 11, part);
        let mut t = EntityTruth::default();
        let mut arcs: Vec<NetworkArc> = Vec::new();
        for k in range {
            let e = edges[k as usize];
            let (a, b) = (e >> 32, e & 0xffff_ffff);
            let followed_at = rng
                .random_bool(0.8)
                .then(|| start - rng.random_range(0..86_400 * 900));
            let format = follow_format(k);
            let mut follow = Follow {
                follower: uid(a),
                followee: uid(b),
                followed_at,
                crawl: end,
            };
            if format == OutFormat::Aminer {
                // The flag says "reciprocal" when the reverse arc is in the same file.
                let reciprocal = edges.binary_search(&((b << 32) | a)).is_ok_and(|r| {
                    r as u64 / part_rows == part && follow_format(r as u64) == OutFormat::Aminer
                });
                arcs.push(NetworkArc {
                    follower: a,
                    followee: b,
                    reciprocal,
                });
                *files.records.entry(format).or_default() += 1;
            } else {
                follow.write(format, k, files.record(format)?)?;
            }
            t.records_in += 1;
            t.records_out += 1;
            if w.dirty(&mut rng) {
                if rng.random_bool(0.5) {
                    follow.followee = follow.follower;
                    *t.rejected.entry("self_follow".into()).or_default() += 1;
                    if format == OutFormat::Aminer {
                        arcs.push(NetworkArc {
                            follower: a,
                            followee: a,
                            reciprocal: true,
                        });
                    }
                } else {
                    follow.crawl = end - 3_600;
                    t.duplicates += 1;
                    if format == OutFormat::Aminer {
                        let again = NetworkArc {
                            follower: a,
                            followee: b,
                            reciprocal: arcs.last().is_some_and(|x| x.reciprocal),
                        };
                        arcs.push(again);
                    }
                }
                if format == OutFormat::Aminer {
                    *files.records.entry(format).or_default() += 1;
                } else {
                    follow.write(format, k, files.record(format)?)?;
                }
                t.records_in += 1;
            }
        }
        if !arcs.is_empty() {
            let mut network = Vec::new();
            let mut uidlist = Vec::new();
            formats::write_aminer(&arcs, uid, &mut network, &mut uidlist)?;
            files
                .file(OutFormat::Aminer, "weibo_network.txt")?
                .write_all(&network)?;
            files
                .file(OutFormat::Aminer, "uidlist.txt")?
                .write_all(&uidlist)?;
        }
        Ok(t)
    })
}

/// The posts in every format that can carry each, with repeated headers and unreadable
/// times or ids now and then.
fn write_posts(out_ctx: &OutCtx<'_>, w: &World<'_>) -> Result<Written> {
    let World {
        spec,
        end,
        ref posts,
        ref chains,
        ..
    } = *w;
    // Posts (JSON lines) and reposts (CSV).
    log::info!("gen: writing posts");
    let post_formats = w.formats_for("posts");
    out_ctx.write_parts("posts", spec.posts, |part, range, files| {
        let mut rng = rng_for(spec.seed, 12, part);
        let mut t = EntityTruth::default();
        let mut header_repeated = std::collections::HashSet::new();
        for i in range {
            let p = &posts[i as usize];
            let (mut able, mut k) = ([OutFormat::Canonical; OutFormat::ALL.len()], 0);
            for f in &post_formats {
                if f.carries_post(p.author, p.retweet.is_some(), !p.mentions.is_empty()) {
                    able[k] = *f;
                    k += 1;
                }
            }
            let format = formats::pick(&able[..k], spec.seed, 12, i);
            // The timeline crawlers' file of this post's author: `<name>/<uid>.csv`.
            let account = if format.per_account() {
                format!("用户{:07}/{}.csv", p.author, uid(p.author))
            } else {
                String::new()
            };
            let at: Vec<String> = p.mentions.iter().map(|m| format!("用户{m:07}")).collect();
            let text = chains.text(posts, i as usize, &|k| post_words(posts, k));
            let (mid_text, bid, created) = (
                mid(i).to_string(),
                mid_to_bid(mid(i)),
                shanghai_text(p.created),
            );
            let retweet_bid = p.retweet.map(|r| mid_to_bid(mid(r))).unwrap_or_default();
            let at_users = at.join(",");
            let mut post = Post {
                mid: &mid_text,
                bid: &bid,
                uid: uid(p.author),
                retweet_bid: &retweet_bid,
                created: &created,
                text: &text,
                source: SOURCES[(i % SOURCES.len() as u64) as usize],
                attitudes: i % 1000,
                topics: if i % 5 == 0 { "大数据" } else { "" },
                at_users: &at_users,
                retweet: p.retweet.map(mid),
                crawl: end,
            };
            post.write(format, files.record_in(format, &account)?)?;
            t.records_in += 1;
            t.records_out += 1;
            if format == OutFormat::WeiboSpider
                && files.file_records(format, &account) >= 2
                && header_repeated.insert(account.clone())
            {
                // weiboSpider writes its header again on every run: a repeated header row,
                // which the cleaner counts as a duplicate.
                let header = formats::header(format, "posts").expect("posts header");
                files
                    .record_in(format, &account)?
                    .write_all(header.as_bytes())?;
                t.records_in += 1;
                t.duplicates += 1;
            }
            if w.dirty(&mut rng) {
                let (other_mid, lossy) = (
                    mid(spec.posts + i).to_string(),
                    format!("{:.2E}", mid(i) as f64),
                );
                let other_bid = mid_to_bid(mid(spec.posts + i));
                // weiboSpider rows carry the bid, which Excel does not mangle: its dirt is
                // an unreadable time.
                match rng.random_range(0..2) {
                    r if r == 0 || format == OutFormat::WeiboSpider => {
                        post.created = "上周某天";
                        post.mid = &other_mid;
                        post.bid = &other_bid;
                        *t.rejected.entry("bad_time".into()).or_default() += 1;
                    }
                    // MediaCrawler's note_url keeps the mid: the cleaner takes it from there,
                    // and the record is a copy of the post.
                    _ if format == OutFormat::MediaCrawler => {
                        post.mid = &lossy;
                        t.duplicates += 1;
                    }
                    _ => {
                        post.mid = &lossy;
                        *t.rejected.entry("lossy_id".into()).or_default() += 1;
                    }
                }
                post.write(format, files.record_in(format, &account)?)?;
                t.records_in += 1;
            }
        }
        Ok(t)
    })
}

/// The reposts, as the API names them (CSV).
fn write_reposts(out_ctx: &OutCtx<'_>, w: &World<'_>) -> Result<Written> {
    let World {
        spec,
        ref crawl_text,
        ref posts,
        ref chains,
        ..
    } = *w;
    let repost_ids: Vec<u64> = (0..spec.posts)
        .filter(|&i| posts[i as usize].retweet.is_some())
        .collect();
    let repost_ids = &repost_ids;
    out_ctx.write_parts("reposts", repost_ids.len() as u64, |_, range, files| {
        let mut t = EntityTruth::default();
        for k in range {
            let i = repost_ids[k as usize];
            let p = &posts[i as usize];
            let r = p.retweet.expect("filtered");
            writeln!(
                files.record(OutFormat::Canonical)?,
                "{},{},{},{},{},{}",
                mid(i),
                uid(p.author),
                mid(r),
                shanghai_text(p.created),
                formats::field(&chains.text(posts, i as usize, &|k| post_words(posts, k))),
                crawl_text
            )?;
            t.records_in += 1;
            t.records_out += 1;
        }
        Ok(t)
    })
}

/// The comments.
fn write_comments(out_ctx: &OutCtx<'_>, w: &World<'_>) -> Result<Written> {
    let World {
        spec,
        end,
        n,
        ref posts,
        comments,
        ..
    } = *w;
    log::info!("gen: writing {comments} comments");
    let comment_formats = w.formats_for("comments");
    out_ctx.write_parts(
        "comments",
        if spec.posts > 0 { comments } else { 0 },
        |part, range, files| {
            let mut rng = rng_for(spec.seed, 13, part);
            let mut t = EntityTruth::default();
            for c in range {
                let target = comment_target(spec, c);
                let p = &posts[target as usize];
                let when = p.created + rng.random_range(0..(end - p.created).max(1));
                let commenter = rng.random_range(0..n);
                let format = formats::pick(&comment_formats, spec.seed, 13, c);
                let (bid, name, text) = (
                    mid_to_bid(mid(target)),
                    format!("用户{commenter:07}"),
                    format!("评论{c}"),
                );
                Comment {
                    cid: cid(c),
                    mid: mid(target),
                    bid: &bid,
                    uid: uid(commenter),
                    screen_name: &name,
                    created: when,
                    text: &text,
                    likes: c % 50,
                    crawl: end,
                }
                .write(format, files.record(format)?)?;
                t.records_in += 1;
                t.records_out += 1;
            }
            Ok(t)
        },
    )
}

/// Where a data set goes, and how it is cut into parts.
struct OutCtx<'a> {
    fs: &'a FileSystems,
    out: &'a Location,
    spec: &'a GenSpec,
}

impl OutCtx<'_> {
    /// Writes `rows` rows of `entity` as numbered parts, in parallel (nothing when the spec
    /// leaves the entity out); `fill` writes one part's rows into its files and returns its
    /// truth. Returns the summed truth and the records written per format.
    fn write_parts(
        &self,
        entity: &'static str,
        rows: u64,
        fill: impl Fn(u64, std::ops::Range<u64>, &mut PartFiles) -> std::io::Result<EntityTruth> + Sync,
    ) -> Result<Written> {
        let mut total = EntityTruth::default();
        let mut formats = BTreeMap::new();
        if !self.spec.writes(entity) {
            return Ok((total, formats));
        }
        let dir = self.out.join(entity);
        let part_rows = self.spec.part_rows.max(1);
        let parts = rows.div_ceil(part_rows).max(1);
        let done: Vec<(EntityTruth, BTreeMap<OutFormat, u64>)> = (0..parts)
            .into_par_iter()
            .map(|part| -> Result<_> {
                let mut files = PartFiles::new(self.fs, &dir, entity, part, &self.spec.date);
                let range = part * part_rows..((part + 1) * part_rows).min(rows);
                let t = fill(part, range, &mut files).map_err(|e| Error::Io {
                    op: "write",
                    path: format!("{dir}/ part {part}"),
                    source: e,
                })?;
                let records = std::mem::take(&mut files.records);
                files.commit()?;
                Ok((t, records))
            })
            .collect::<Result<_>>()?;
        for (t, records) in done {
            total.records_in += t.records_in;
            total.records_out += t.records_out;
            total.duplicates += t.duplicates;
            for (k, v) in t.rejected {
                *total.rejected.entry(k).or_default() += v;
            }
            for (f, v) in records {
                *formats.entry(f.name().to_string()).or_default() += v;
            }
        }
        Ok((total, formats))
    }
}

//! The absolute counters of the `user` and `post` tables and the mention edges of
//! `user_post`, computed in batch from the cleaned data in bounded memory.
//!
//! The key space is cut into N partitions, N chosen from the input's row counts (Parquet
//! metadata) so one partition's maps fit the memory budget. Pass p reads only the id columns
//! of the inputs and keeps:
//! - the users whose uid hashes to p: followers, following, posts, reposts and comments
//!   received (a uid seen only in follows or as an author counts too);
//! - the posts owned by p (by their author's uid, or by their mid when the author is
//!   unknown): the reposts and comments they received, counted from the graph;
//! - the screen names hashing to p, to resolve the mentions (`at_users`) naming them.
//!
//! Invariants: every uid, post and name belongs to exactly one partition, so the passes
//! together give exactly what one pass over everything would; a name used by two users means
//! the one read last (file order), as before partitioning; the hashes are fixed functions of
//! the ids, so a resumed run cuts the same partitions.

use arrow::array::{Array, AsArray};
use rustc_hash::FxHashMap;

use super::{i64_col, opt, ts_col};
use crate::error::Result;
use crate::hdfs::{FileEntry, FileSystems};
use crate::partition;

/// Bytes one key costs in a pass's maps (hash map entry, its value, the table's slack).
const BYTES_PER_KEY: u64 = 96;

/// Counters of the users and posts of one partition, sorted by key.
#[derive(Debug, Default, PartialEq)]
pub struct PartitionCounters {
    /// uid → [followers, following, posts, reposts received, comments received]
    pub users: Vec<(i64, [i64; 5])>,
    /// mid → (author uid or 0, created_at ms, reposts, comments)
    pub posts: Vec<(i64, (i64, i64, i64, i64))>,
    /// Mentions whose name hashes here but no user has.
    pub unresolved_mentions: u64,
}

/// A mention of a known user: `target` is named in post `mid` by `by`, at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mention {
    pub target: i64,
    pub by: i64,
    pub at: i64,
    pub mid: i64,
}

/// The cleaned parts the counters read, per entity.
pub struct Inputs<'a> {
    pub users: &'a [FileEntry],
    pub follows: &'a [FileEntry],
    pub posts: &'a [FileEntry],
    pub comments: &'a [FileEntry],
}

/// How many partitions keep one pass within `budget` bytes: users are counted twice (their
/// counters and their name), posts once; a follow's endpoints are nearly always users.
pub fn partitions_for(fs: &FileSystems, inputs: &Inputs<'_>, budget: u64) -> Result<u32> {
    let rows = |files: &[FileEntry]| -> Result<u64> {
        files.iter().try_fold(0u64, |sum, f| {
            let builder = partition::open_parquet(fs, f)?;
            Ok(sum + builder.metadata().file_metadata().num_rows().max(0) as u64)
        })
    };
    let keys = 2 * rows(inputs.users)? + rows(inputs.posts)?;
    Ok(keys
        .saturating_mul(BYTES_PER_KEY)
        .div_ceil(budget.max(1))
        .clamp(1, 4096) as u32)
}

fn mix(x: u64) -> u64 {
    // splitmix64's finaliser: neighbouring ids land in different partitions.
    let mut x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The partition of a uid (and of the posts of that author).
pub fn uid_partition(uid: i64, n: u32) -> u32 {
    (mix(uid as u64) % n as u64) as u32
}

/// The partition of a post whose author is unknown.
fn orphan_post_partition(mid: i64, n: u32) -> u32 {
    (mix(mid as u64 ^ 0x5bd1_e995) % n as u64) as u32
}

/// The partition owning a post: its author's, or by its mid when the author is unknown.
fn post_partition(author: Option<i64>, mid: i64, n: u32) -> u32 {
    match author {
        Some(uid) => uid_partition(uid, n),
        None => orphan_post_partition(mid, n),
    }
}

fn name_partition(name: &str, n: u32) -> u32 {
    // FNV-1a: a hash defined by its few lines, not by a crate version, so a resumed run built
    // later cuts the names the same way.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    (mix(h) % n as u64) as u32
}

/// Computes partition `p` of `n`; `mention` receives the resolved mentions of the names in
/// this partition, in file order (only for posts with a known author).
pub fn compute(
    fs: &FileSystems,
    inputs: &Inputs<'_>,
    p: u32,
    n: u32,
    mention: &mut dyn FnMut(Mention) -> Result<()>,
) -> Result<PartitionCounters> {
    let mine = |uid: i64| uid_partition(uid, n) == p;
    let mut users: FxHashMap<i64, [i64; 5]> = FxHashMap::default();
    let mut names: FxHashMap<String, i64> = FxHashMap::default();
    for f in inputs.users {
        partition::read_parquet_columns(fs, f, &["uid", "screen_name"], &mut |b| {
            let uid = i64_col(b, "uid").expect("uid");
            let name = b
                .column_by_name("screen_name")
                .and_then(|c| c.as_string_opt::<i32>());
            for i in 0..b.num_rows() {
                let u = uid.value(i);
                if mine(u) {
                    users.entry(u).or_default();
                }
                if let Some(name) = name.filter(|c| !c.is_null(i)).map(|c| c.value(i)) {
                    if name_partition(name, n) == p {
                        names.insert(name.to_string(), u);
                    }
                }
            }
            Ok(())
        })?;
    }
    for f in inputs.follows {
        partition::read_parquet_columns(fs, f, &["follower", "followee"], &mut |b| {
            let a = i64_col(b, "follower").expect("follower");
            let e = i64_col(b, "followee").expect("followee");
            for i in 0..b.num_rows() {
                if mine(a.value(i)) {
                    users.entry(a.value(i)).or_default()[1] += 1;
                }
                if mine(e.value(i)) {
                    users.entry(e.value(i)).or_default()[0] += 1;
                }
            }
            Ok(())
        })?;
    }
    let mut posts: FxHashMap<i64, (i64, i64, i64, i64)> = FxHashMap::default();
    for f in inputs.posts {
        partition::read_parquet_columns(fs, f, &["mid", "uid", "created_at"], &mut |b| {
            let mid = i64_col(b, "mid").expect("mid");
            let uid = i64_col(b, "uid");
            let created = ts_col(b, "created_at").expect("created_at");
            for i in 0..b.num_rows() {
                let (m, author) = (mid.value(i), opt(uid, i));
                if post_partition(author, m, n) != p {
                    continue;
                }
                if let Some(u) = author {
                    users.entry(u).or_default()[2] += 1;
                }
                posts.insert(m, (author.unwrap_or(0), created.value(i), 0, 0));
            }
            Ok(())
        })?;
    }
    let mut unresolved_mentions = 0;
    let columns = ["mid", "uid", "created_at", "retweet_mid", "at_users"];
    for f in inputs.posts {
        partition::read_parquet_columns(fs, f, &columns, &mut |b| {
            let rt = i64_col(b, "retweet_mid");
            for i in 0..b.num_rows() {
                if let Some(r) = opt(rt, i) {
                    received(&mut posts, &mut users, r, 2);
                }
            }
            let Some(at_users) = b
                .column_by_name("at_users")
                .and_then(|c| c.as_list_opt::<i32>())
            else {
                return Ok(());
            };
            let (mid, uid) = (i64_col(b, "mid").expect("mid"), i64_col(b, "uid"));
            let created = ts_col(b, "created_at").expect("created_at");
            for i in 0..b.num_rows() {
                let by = opt(uid, i).unwrap_or(0);
                if by == 0 || at_users.is_null(i) {
                    continue;
                }
                let listed = at_users.value(i);
                let listed = listed.as_string::<i32>();
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
                        None => unresolved_mentions += 1,
                    }
                }
            }
            Ok(())
        })?;
    }
    for f in inputs.comments {
        partition::read_parquet_columns(fs, f, &["mid"], &mut |b| {
            let mid = i64_col(b, "mid").expect("mid");
            for i in 0..b.num_rows() {
                received(&mut posts, &mut users, mid.value(i), 3);
            }
            Ok(())
        })?;
    }
    let mut users: Vec<(i64, [i64; 5])> = users.into_iter().collect();
    users.sort_unstable_by_key(|(uid, _)| *uid);
    let mut posts: Vec<(i64, (i64, i64, i64, i64))> = posts.into_iter().collect();
    posts.sort_unstable_by_key(|(mid, _)| *mid);
    Ok(PartitionCounters {
        users,
        posts,
        unresolved_mentions,
    })
}

/// Credits a repost (`slot` 2) or a comment (`slot` 3) to post `mid`, if this partition owns
/// it, and to its author.
fn received(
    posts: &mut FxHashMap<i64, (i64, i64, i64, i64)>,
    users: &mut FxHashMap<i64, [i64; 5]>,
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

//! The counters carried forward: the committed snapshot (the counters as of an earlier
//! night) with the effect of the nights loaded since, in place of a pass over every night
//! ([`counters::compute`]) for each counter partition. The answer is the same; the tests hold
//! the two against each other.
//!
//! It is used only when every night the snapshot covered is unchanged since (docs/nightly.md,
//! "Counters across nights"). What the delta's keys were before is found in one scan of the
//! history's id columns: whether a follow pair was crawled already, the earlier target of a
//! repost or a comment crawled again, the older reposts and comments of a post crawled only
//! now, and whether an author who lost every post is still a crawled user. Memory follows
//! the delta, plus one partition of the snapshot at a time.

use rustc_hash::{FxHashMap, FxHashSet};

use super::counters::{self, for_comments, for_pairs, for_posts, for_users};
use super::counters::{Inputs, Mention, PartitionCounters, PostCounts, UserCounts};
use super::state::Snapshot;
use crate::error::Result;
use crate::hdfs::{FileEntry, FileSystems};

/// What the nights since the snapshot change, over every partition.
#[derive(Debug, Default)]
pub struct Delta {
    /// Counter changes by uid, added to the snapshot's.
    users: FxHashMap<i64, UserCounts>,
    /// Users the new nights name (crawled, following or followed, authors): they have an
    /// entry, counters or not.
    seen: FxHashSet<i64>,
    /// Users whose entry goes: every counter is zero now and no night crawled them.
    gone: FxHashSet<i64>,
    /// The posts the new nights crawled, as their newest record says, with the counts the
    /// snapshot held for them (zero for a post new to the history).
    posts: FxHashMap<i64, PostCounts>,
    /// Reposts and comments received, changes by mid.
    received: FxHashMap<i64, (i64, i64)>,
    /// Screen name to its newest holder, for the names the night's posts mention.
    names: FxHashMap<String, i64>,
}

/// A post's newest record in the new nights: author (0 when unknown), time, repost target.
type Record = (i64, i64, Option<i64>);

/// The new nights' records, newest per key.
#[derive(Default)]
struct Tonight {
    posts: FxHashMap<i64, Record>,
    /// cid → the post it comments.
    comments: FxHashMap<i64, i64>,
    pairs: FxHashSet<(i64, i64)>,
    users: FxHashSet<i64>,
}

/// What the history says about the new nights' keys.
#[derive(Default)]
struct Before {
    /// The newest history record's repost target of each post crawled again.
    targets: FxHashMap<i64, Option<i64>>,
    /// The newest history record's post of each comment crawled again.
    commented: FxHashMap<i64, i64>,
    /// History reposts (mid → target) and comments (cid → post) whose newest record names a
    /// post that is new tonight: they count from tonight.
    reposts_of_new: FxHashMap<i64, i64>,
    comments_of_new: FxHashMap<i64, i64>,
}

/// Computes what `nights` (the nights after the snapshot's, oldest first) change in
/// `snapshot`, which holds the counters of `history` (every night up to the snapshot's);
/// `mention_posts` are the posts whose mentions the run resolves.
pub fn delta(
    fs: &FileSystems,
    history: &Inputs<'_>,
    nights: &Inputs<'_>,
    snapshot: &Snapshot,
) -> Result<Delta> {
    let tonight = read_tonight(fs, nights)?;
    // The snapshot's record of every post tonight names (crawled, reposted, commented).
    let named: FxHashSet<i64> = tonight
        .posts
        .iter()
        .flat_map(|(m, r)| std::iter::once(*m).chain(r.2))
        .chain(tonight.comments.values().copied())
        .collect();
    let mut known = snapshot.posts_where(fs, |m| named.contains(&m))?;
    let new_posts: FxHashSet<i64> = tonight
        .posts
        .keys()
        .filter(|m| !known.contains_key(m))
        .copied()
        .collect();
    let before = read_before(fs, history, &tonight, &new_posts)?;
    // Earlier targets the snapshot may hold counts for, not named tonight.
    let earlier: FxHashSet<i64> = before
        .targets
        .values()
        .flatten()
        .chain(before.commented.values())
        .filter(|t| !known.contains_key(t))
        .copied()
        .collect();
    known.extend(snapshot.posts_where(fs, |m| earlier.contains(&m))?);

    let mut d = Delta::default();
    d.seen.extend(tonight.users.iter().copied());
    let new_pairs = new_follow_pairs(fs, history, &tonight)?;
    for &(a, e) in &new_pairs {
        add(&mut d.users, e, 0, 1);
        add(&mut d.users, a, 1, 1);
    }
    for &(a, e) in &tonight.pairs {
        d.seen.extend([a, e]);
    }
    let old_authors = move_posts(&mut d, &tonight, &known);
    let author = |t: i64| -> i64 {
        match tonight.posts.get(&t) {
            Some(r) => r.0,
            None => known.get(&t).map_or(0, |k| k.0),
        }
    };
    let is_post = |t: &i64| known.contains_key(t) || tonight.posts.contains_key(t);
    let was_post = |t: &i64| known.contains_key(t);
    // Reposts crawled tonight: counted towards the target their newest record names.
    let reposts = tonight.posts.iter().map(|(m, r)| {
        let then = before.targets.get(m).copied().flatten().filter(was_post);
        (then, r.2.filter(is_post))
    });
    let comments = tonight.comments.iter().map(|(c, t)| {
        let then = before.commented.get(c).copied().filter(was_post);
        (then, Some(*t).filter(is_post))
    });
    let older_reposts = before.reposts_of_new.values().map(|t| (None, Some(*t)));
    let older_comments = before.comments_of_new.values().map(|t| (None, Some(*t)));
    let changes = reposts
        .chain(older_reposts)
        .map(|c| (c, 0))
        .chain(comments.chain(older_comments).map(|c| (c, 1)));
    for ((then, now), kind) in changes {
        if then == now {
            continue;
        }
        for (target, by) in [(then, -1), (now, 1)] {
            let Some(t) = target else { continue };
            let r = d.received.entry(t).or_default();
            if kind == 0 {
                r.0 += by;
            } else {
                r.1 += by;
            }
            add(&mut d.users, author(t), 3 + kind, by);
        }
    }
    // An author who lost every post keeps an entry only if a night crawled them.
    let old: FxHashSet<i64> = old_authors.difference(&d.seen).copied().collect();
    let then = snapshot.users_where(fs, |u| old.contains(&u))?;
    let mut suspects: FxHashSet<i64> = old
        .into_iter()
        .filter(|u| {
            let was = then.get(u).copied().unwrap_or_default();
            let change = d.users.get(u).copied().unwrap_or_default();
            (0..5).all(|k| was[k] + change[k] == 0)
        })
        .collect();
    let wanted = counters::mentioned_names(fs, nights.mention_posts)?;
    for files in [history.users, nights.users] {
        for_users(fs, files, |uid, name| {
            suspects.remove(&uid);
            if let Some(name) = name.filter(|n| wanted.contains(*n)) {
                d.names.insert(name.to_string(), uid);
            }
        })?;
    }
    d.gone = suspects;
    Ok(d)
}

/// The counters of partition `p` of `n`: the snapshot's, with `d` applied; `mention`
/// receives the mentions of `mention_posts` whose names hash here, as
/// [`counters::compute`] gives them.
pub fn partition(
    fs: &FileSystems,
    d: &Delta,
    snapshot: &Snapshot,
    mention_posts: &[FileEntry],
    p: u32,
    n: u32,
    mention: &mut dyn FnMut(Mention) -> Result<()>,
) -> Result<PartitionCounters> {
    let mine = |uid: i64| counters::uid_partition(uid, n) == p;
    let mut users = snapshot.users(fs, p, n)?;
    for (&u, change) in d.users.iter().filter(|(u, _)| mine(**u)) {
        let counts = users.entry(u).or_default();
        for k in 0..5 {
            counts[k] += change[k];
        }
    }
    for &u in d.seen.iter().filter(|u| mine(**u)) {
        users.entry(u).or_default();
    }
    for u in &d.gone {
        users.remove(u);
    }
    let mut posts = snapshot.posts(fs, p, n)?;
    posts.retain(|m, _| !d.posts.contains_key(m));
    for (&m, &post) in &d.posts {
        let author = (post.0 != 0).then_some(post.0);
        if counters::post_partition(author, m, n) == p {
            posts.insert(m, post);
        }
    }
    for (t, (reposts, comments)) in &d.received {
        if let Some(post) = posts.get_mut(t) {
            post.2 += reposts;
            post.3 += comments;
        }
    }
    let unresolved_mentions = counters::mentions(fs, mention_posts, p, n, &d.names, mention)?;
    Ok(PartitionCounters::sorted(users, posts, unresolved_mentions))
}

fn add(users: &mut FxHashMap<i64, UserCounts>, uid: i64, slot: usize, by: i64) {
    if uid != 0 {
        users.entry(uid).or_default()[slot] += by;
    }
}

/// The new nights' records, the later one winning per key.
fn read_tonight(fs: &FileSystems, nights: &Inputs<'_>) -> Result<Tonight> {
    let mut t = Tonight::default();
    for_users(fs, nights.users, |uid, _| {
        t.users.insert(uid);
    })?;
    for_pairs(fs, nights.follows, |a, e| {
        t.pairs.insert((a, e));
    })?;
    for_posts(
        fs,
        nights.posts,
        &counters::POST_RECORDS,
        |m, author, at, rt| {
            t.posts.insert(m, (author.unwrap_or(0), at, rt));
        },
    )?;
    for_comments(fs, nights.comments, |c, m| {
        t.comments.insert(c, m);
    })?;
    Ok(t)
}

/// The follow pairs crawled tonight that no earlier night has.
fn new_follow_pairs(
    fs: &FileSystems,
    history: &Inputs<'_>,
    tonight: &Tonight,
) -> Result<FxHashSet<(i64, i64)>> {
    let mut new = tonight.pairs.clone();
    for_pairs(fs, history.follows, |a, e| {
        new.remove(&(a, e));
    })?;
    Ok(new)
}

/// Records tonight's posts in `d` (author and time from their newest record, counts from the
/// snapshot), moving the posts and the counts received of a post whose author changed;
/// returns the authors who lost a post.
fn move_posts(
    d: &mut Delta,
    tonight: &Tonight,
    known: &super::state::Map<PostCounts>,
) -> FxHashSet<i64> {
    let mut lost = FxHashSet::default();
    for (&m, &(author, at, _)) in &tonight.posts {
        let (was, reposts, comments) = match known.get(&m) {
            Some(k) => (Some(k.0), k.2, k.3),
            None => (None, 0, 0),
        };
        if was != Some(author) {
            if let Some(old) = was {
                add(&mut d.users, old, 2, -1);
                add(&mut d.users, old, 3, -reposts);
                add(&mut d.users, old, 4, -comments);
                if old != 0 {
                    lost.insert(old);
                }
            }
            add(&mut d.users, author, 2, 1);
            add(&mut d.users, author, 3, reposts);
            add(&mut d.users, author, 4, comments);
        }
        if author != 0 {
            d.seen.insert(author);
        }
        d.posts.insert(m, (author, at, reposts, comments));
    }
    lost
}

/// One scan of the history's posts and comments: what tonight's keys were before, and the
/// reposts and comments of tonight's new posts.
fn read_before(
    fs: &FileSystems,
    history: &Inputs<'_>,
    tonight: &Tonight,
    new_posts: &FxHashSet<i64>,
) -> Result<Before> {
    let mut b = Before::default();
    for_posts(fs, history.posts, &counters::POST_TARGETS, |m, _, _, rt| {
        if tonight.posts.contains_key(&m) {
            b.targets.insert(m, rt);
        } else if let Some(t) = rt.filter(|t| new_posts.contains(t)) {
            b.reposts_of_new.insert(m, t);
        } else if !b.reposts_of_new.is_empty() {
            b.reposts_of_new.remove(&m);
        }
    })?;
    for_comments(fs, history.comments, |c, m| {
        if tonight.comments.contains_key(&c) {
            b.commented.insert(c, m);
        } else if new_posts.contains(&m) {
            b.comments_of_new.insert(c, m);
        } else if !b.comments_of_new.is_empty() {
            b.comments_of_new.remove(&c);
        }
    })?;
    Ok(b)
}

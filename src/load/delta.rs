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
//! the delta, plus a batch of each part of the snapshot, which is streamed.

use rustc_hash::{FxHashMap, FxHashSet};

use super::counters::{self, for_comments, for_pairs, for_posts, for_users};
use super::counters::{Inputs, Mention, PartitionCounters, PostCounts, UserCounts};
use super::state::{Changes, PartWriter, Row, Snapshot};
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
    /// cid → the post it comments, if the crawl recorded it.
    comments: FxHashMap<i64, Option<i64>>,
    pairs: FxHashSet<(i64, i64)>,
    users: FxHashSet<i64>,
}

/// What the history says about the new nights' keys.
#[derive(Default)]
struct Before {
    /// The newest history record's repost target of each post crawled again.
    targets: FxHashMap<i64, Option<i64>>,
    /// The newest history record's post of each comment crawled again.
    commented: FxHashMap<i64, Option<i64>>,
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
        .chain(tonight.comments.values().flatten().copied())
        .collect();
    let mut known = snapshot.posts_where(fs, |m| named.contains(&m))?;
    let new_posts: FxHashSet<i64> = tonight
        .posts
        .keys()
        .filter(|m| !known.contains_key(m))
        .copied()
        .collect();
    let mut d = Delta::default();
    d.seen.extend(tonight.users.iter().copied());
    for &(a, e) in &tonight.pairs {
        d.seen.extend([a, e]);
    }
    // Tonight's posts are all in `known` already (`named`).
    let old_authors = move_posts(&mut d, &tonight, &known);
    // Authors who lost a post and whom tonight does not name: their entry may go.
    let old: FxHashSet<i64> = old_authors.difference(&d.seen).copied().collect();
    // The history's scans are independent: side by side, as they wait on HDFS as much as
    // they decode. The users scan keeps every name tonight's posts mention.
    let wanted = counters::mentioned_names(fs, nights.mention_posts)?;
    let (before, (new_pairs, users)) = rayon::join(
        || read_before(fs, history, &tonight, &new_posts),
        || {
            rayon::join(
                || new_follow_pairs(fs, history, &tonight),
                || crawled_users(fs, [history.users, nights.users], &old, &wanted),
            )
        },
    );
    let (before, new_pairs, (crawled, names)) = (before?, new_pairs?, users?);
    // Earlier targets the snapshot may hold counts for, not named tonight.
    let earlier: FxHashSet<i64> = before
        .targets
        .values()
        .flatten()
        .chain(before.commented.values().flatten())
        .filter(|t| !known.contains_key(t))
        .copied()
        .collect();
    known.extend(snapshot.posts_where(fs, |m| earlier.contains(&m))?);

    for &(a, e) in &new_pairs {
        add(&mut d.users, e, 0, 1);
        add(&mut d.users, a, 1, 1);
    }
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
        let then = before.commented.get(c).copied().flatten().filter(was_post);
        (then, t.filter(is_post))
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
    let then = snapshot.users_where(fs, |u| old.contains(&u))?;
    let mut suspects: FxHashSet<i64> = old
        .into_iter()
        .filter(|u| {
            let was = then.get(u).copied().unwrap_or_default();
            let change = d.users.get(u).copied().unwrap_or_default();
            (0..5).all(|k| was[k] + change[k] == 0)
        })
        .collect();
    suspects.retain(|u| !crawled.contains(u));
    d.names = names;
    d.gone = suspects;
    Ok(d)
}

/// The users of `among` that the nights crawled, and the newest holder of each name in
/// `wanted` (files in night order).
fn crawled_users(
    fs: &FileSystems,
    nights: [&[FileEntry]; 2],
    among: &FxHashSet<i64>,
    wanted: &FxHashSet<String>,
) -> Result<(FxHashSet<i64>, FxHashMap<String, i64>)> {
    let (mut crawled, mut names) = (FxHashSet::default(), FxHashMap::default());
    for files in nights {
        for_users(fs, files, |uid, name| {
            if among.contains(&uid) {
                crawled.insert(uid);
            }
            if let Some(name) = name.filter(|n| wanted.contains(*n)) {
                names.insert(name.to_string(), uid);
            }
        })?;
    }
    Ok((crawled, names))
}

/// Where a carried partition's rows go, each entity in key order: the next snapshot's part,
/// or nowhere when the snapshot does not move on.
pub trait Sink {
    fn user(&mut self, row: Row) -> Result<()>;
    fn post(&mut self, row: Row) -> Result<()>;
}

impl Sink for Option<PartWriter> {
    fn user(&mut self, row: Row) -> Result<()> {
        self.as_mut().map_or(Ok(()), |w| w.user(row))
    }
    fn post(&mut self, row: Row) -> Result<()> {
        self.as_mut().map_or(Ok(()), |w| w.post(row))
    }
}

/// Collected as counters, to compare with [`counters::compute`].
impl Sink for PartitionCounters {
    fn user(&mut self, r: Row) -> Result<()> {
        self.users.push((r[0], [r[1], r[2], r[3], r[4], r[5]]));
        Ok(())
    }
    fn post(&mut self, r: Row) -> Result<()> {
        self.posts.push((r[0], (r[1], r[2], r[3], r[4])));
        Ok(())
    }
}

/// Partition `p` of `n` carried forward: the snapshot's rows streamed in key order, with `d`
/// applied, into `sink`; `mention` receives the mentions of `mention_posts` whose names hash
/// here, as [`counters::compute`] gives them. Returns what the partition must write and the
/// mentions that named nobody. Only the keys `d` touches can differ from the snapshot, so the
/// changes are [`crate::load::state::changes`] over those keys alone. Memory: the delta and a
/// batch of each snapshot part, whatever the snapshot's size.
#[allow(clippy::too_many_arguments)]
pub fn partition(
    fs: &FileSystems,
    d: &Delta,
    snapshot: &Snapshot,
    mention_posts: &[FileEntry],
    p: u32,
    n: u32,
    mention: &mut dyn FnMut(Mention) -> Result<()>,
    sink: &mut dyn Sink,
) -> Result<(Changes, u64)> {
    let mut changes = Changes::default();
    carry_users(fs, d, snapshot, p, n, sink, &mut changes)?;
    carry_posts(fs, d, snapshot, p, n, sink, &mut changes)?;
    let unresolved_mentions = counters::mentions(fs, mention_posts, p, n, &d.names, mention)?;
    Ok((changes, unresolved_mentions))
}

/// The users of the partition: the snapshot's merged with the delta's (counter changes, and
/// an entry for each user seen), without the users gone.
fn carry_users(
    fs: &FileSystems,
    d: &Delta,
    snapshot: &Snapshot,
    p: u32,
    n: u32,
    sink: &mut dyn Sink,
    changes: &mut Changes,
) -> Result<()> {
    let mine = |uid: &i64| counters::uid_partition(*uid, n) == p;
    let mut delta: Vec<(i64, UserCounts)> = d.users.iter().map(|(u, c)| (*u, *c)).collect();
    delta.extend(
        d.seen
            .iter()
            .filter(|u| !d.users.contains_key(u))
            .map(|u| (*u, [0; 5])),
    );
    delta.retain(|(u, _)| mine(u));
    delta.sort_unstable_by_key(|(u, _)| *u);
    let mut delta = delta.into_iter().peekable();
    let mut old = snapshot.users_in_order(fs, p, n)?;
    let mut next_old = old.next_row()?;
    loop {
        let key = match (next_old.map(|r| r[0]), delta.peek().map(|c| c.0)) {
            (None, None) => return Ok(()),
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
        };
        let was = match next_old.filter(|r| r[0] == key) {
            Some(r) => {
                next_old = old.next_row()?;
                Some([r[1], r[2], r[3], r[4], r[5]])
            }
            None => None,
        };
        let change = delta.next_if(|c| c.0 == key).map(|c| c.1);
        let gone = d.gone.contains(&key);
        let now = match (was, change) {
            _ if gone => None,
            (was, Some(change)) => {
                let mut counts = was.unwrap_or_default();
                for k in 0..5 {
                    counts[k] += change[k];
                }
                Some(counts)
            }
            (was, None) => was,
        };
        if let Some(c) = now {
            sink.user([key, c[0], c[1], c[2], c[3], c[4]])?;
        }
        if change.is_some() || gone {
            match (now, was) {
                (Some(now), was) if was != Some(now) => changes.users.push((key, now)),
                // Left the union: zeros, as `state::changes` writes them.
                (None, Some(_)) => changes.users.push((key, [0; 5])),
                _ => {}
            }
        }
    }
}

/// The posts of the partition: the snapshot's, those the new nights crawled in place of their
/// old record (here or in another partition), and the reposts and comments they received.
fn carry_posts(
    fs: &FileSystems,
    d: &Delta,
    snapshot: &Snapshot,
    p: u32,
    n: u32,
    sink: &mut dyn Sink,
    changes: &mut Changes,
) -> Result<()> {
    let mut crawled: Vec<(i64, PostCounts)> = d
        .posts
        .iter()
        .filter(|(m, post)| {
            let author = (post.0 != 0).then_some(post.0);
            counters::post_partition(author, **m, n) == p
        })
        .map(|(m, post)| (*m, *post))
        .collect();
    crawled.sort_unstable_by_key(|(m, _)| *m);
    let mut crawled = crawled.into_iter().peekable();
    let mut old = snapshot.posts_in_order(fs, p, n)?;
    let mut next_old = old.next_row()?;
    loop {
        let key = match (next_old.map(|r| r[0]), crawled.peek().map(|c| c.0)) {
            (None, None) => return Ok(()),
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
        };
        let was = match next_old.filter(|r| r[0] == key) {
            Some(r) => {
                next_old = old.next_row()?;
                Some((r[1], r[2], r[3], r[4]))
            }
            None => None,
        };
        let mut now = match crawled.next_if(|c| c.0 == key) {
            Some((_, post)) => Some(post),
            // Crawled again with an author of another partition: it moved there.
            None if d.posts.contains_key(&key) => None,
            None => was,
        };
        let received = d.received.get(&key);
        if let (Some(post), Some((reposts, comments))) = (now.as_mut(), received) {
            post.2 += reposts;
            post.3 += comments;
        }
        if let Some(c) = now {
            sink.post([key, c.0, c.1, c.2, c.3, 0])?;
        }
        // A post that left the partition keeps its row (`state::changes`).
        let touched = received.is_some() || d.posts.contains_key(&key);
        if let Some(now) = now.filter(|now| touched && was != Some(*now)) {
            changes.posts.push((key, now));
        }
    }
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
        } else if let Some(m) = m.filter(|m| new_posts.contains(m)) {
            b.comments_of_new.insert(c, m);
        } else if !b.comments_of_new.is_empty() {
            b.comments_of_new.remove(&c);
        }
    })?;
    Ok(b)
}

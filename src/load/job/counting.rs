//! The night's counter units: one per counter partition, each computing its share of the
//! counters over every night so far ([`counters::compute`]), writing the mention edges, and
//! putting the counters that changed since the snapshot. With one partition the user and
//! post rows go out here, profile and counters in one put ([`Night::merged`]).

use std::sync::atomic::{AtomicU64, Ordering};

use super::Night;
use crate::dataset::{columns, parquet_io};
use crate::error::Result;
use crate::hbase::layout::keys::{self, Relation};
use crate::hbase::layout::{be, cell, Table};
use crate::hbase::write::writers::{Router, Unit};
use crate::hbase::Put;
use crate::load::counters::{self, PostCounts};
use crate::load::delta::{self, Delta};
use crate::load::rows::*;
use crate::load::state::{self, Changes, Next, Snapshot};

/// What the counter units share: their inputs, the snapshot they diff against, the staged
/// next snapshot, and what they found.
pub(super) struct Counting<'a> {
    pub(super) inputs: counters::Inputs<'a>,
    /// What the nights since the snapshot change, when it is carried forward instead of
    /// computed over every night.
    pub(super) carried: Option<Delta>,
    /// The counters readers see, unless every counter is to be written.
    pub(super) snapshot: Option<Snapshot>,
    /// The snapshot this run stages, when it writes every counter.
    pub(super) next: Option<Next>,
    /// The newest night the counters cover.
    pub(super) as_of: String,
    pub(super) partitions: u32,
    /// The timestamp of the counter cells: that of `as_of`.
    pub(super) counter_ts: i64,
    pub(super) unresolved_mentions: AtomicU64,
    pub(super) users_changed: AtomicU64,
    pub(super) posts_changed: AtomicU64,
}

impl Counting<'_> {
    /// The night of the snapshot the changes are taken against, for the units' names.
    pub(super) fn base(&self) -> &str {
        self.snapshot.as_ref().map_or("none", |s| s.as_of.as_str())
    }

    /// The name of counter unit `p`.
    pub(super) fn unit_name(&self, p: u32) -> String {
        format!(
            "counters:{p}/{} as of {} over {}",
            self.partitions,
            self.as_of,
            self.base()
        )
    }
}

/// `counters:<p>/<n> as of <night> over <snapshot>`: one unit per counter partition.
pub(super) fn units<'a>(n: &'a Night<'a>, c: &'a Counting<'a>) -> Vec<(String, Unit<'a>)> {
    (0..c.partitions)
        .map(|p| {
            let unit: Unit<'a> = Box::new(move |r: &mut Router| partition_unit(n, c, p, r));
            (c.unit_name(p), unit)
        })
        .collect()
}

/// Counter partition `p`: its counters and mentions computed, the changes put, and its
/// share of the next snapshot staged.
fn partition_unit(n: &Night<'_>, c: &Counting<'_>, p: u32, r: &mut Router) -> Result<()> {
    let fs = n.fs;
    let mention = &mut |m: counters::Mention| {
        if !n.wants(Table::UserPost) {
            return Ok(());
        }
        r.put(
            Table::UserPost,
            Put::new(keys::user_post_key(
                m.target,
                Relation::Mention,
                m.at,
                m.mid,
            ))
            .cell(cell::POST, keys::post_key(m.by, m.at, m.mid))
            .cell(cell::BY, be(m.by)),
        )
    };
    let changes = match c.carried.as_ref().zip(c.snapshot.as_ref()) {
        Some((d, s)) => {
            // Streamed into the next snapshot's part as it goes.
            let mut part = match &c.next {
                Some(next) => Some(next.part_writer(fs, p, c.partitions)?),
                None => None,
            };
            let mentions = c.inputs.mention_posts;
            let (changes, unresolved) =
                delta::partition(fs, d, s, mentions, p, c.partitions, mention, &mut part)?;
            if let Some(part) = part {
                part.finish()?;
            }
            c.unresolved_mentions
                .fetch_add(unresolved, Ordering::Relaxed);
            changes
        }
        None => {
            let computed = counters::compute(fs, &c.inputs, p, c.partitions, mention)?;
            c.unresolved_mentions
                .fetch_add(computed.unresolved_mentions, Ordering::Relaxed);
            let changes = match &c.snapshot {
                Some(s) => state::changes(
                    &computed,
                    &s.users(fs, p, c.partitions)?,
                    &s.posts(fs, p, c.partitions)?,
                ),
                None => Changes {
                    users: computed.users.clone(),
                    posts: computed.posts.clone(),
                },
            };
            if let Some(next) = &c.next {
                next.write_part(fs, p, c.partitions, &computed)?;
            }
            changes
        }
    };
    if n.wants(Table::User) {
        c.users_changed
            .fetch_add(changes.users.len() as u64, Ordering::Relaxed);
    }
    if n.wants(Table::Post) {
        c.posts_changed
            .fetch_add(changes.posts.len() as u64, Ordering::Relaxed);
    }
    if !n.merged {
        // The profiles went out with their parts: counters alone here, so no partition
        // reads the wide columns again.
        return put_counters(n, c, changes, r);
    }
    // One partition (so every row is this unit's): each user and post row goes out once,
    // profile and changed counters together.
    if n.wants(Table::User) {
        put_users_with_counters(n, changes.users, r)?;
    }
    if n.wants(Table::Post) {
        put_posts_with_counters(n, changes.posts, r)?;
    }
    Ok(())
}

/// The changed counters alone, at the counters' timestamp.
fn put_counters(n: &Night<'_>, c: &Counting<'_>, changes: Changes, r: &mut Router) -> Result<()> {
    if n.wants(Table::User) {
        for (uid, counts) in &changes.users {
            r.put_at(Table::User, user_counts_put(*uid, counts), c.counter_ts)?;
        }
    }
    if n.wants(Table::Post) {
        for (mid, (uid, at, reposts, comments)) in &changes.posts {
            let key = keys::post_key(*uid, *at, *mid);
            let put = with_post_counts(Put::new(key), *reposts, *comments);
            r.put_at(Table::Post, put, c.counter_ts)?;
        }
    }
    Ok(())
}

/// Tonight's user rows, each with its changed counters; then the counters of users not
/// crawled tonight.
fn put_users_with_counters(
    n: &Night<'_>,
    changed: Vec<(i64, counters::UserCounts)>,
    r: &mut Router,
) -> Result<()> {
    let mut users = ChangedCounters::new(changed);
    for f in &n.files["users"] {
        parquet_io::read_parquet(n.fs, f, &mut |b| {
            let uid = columns::ids(f, b, "uid")?;
            for i in 0..b.num_rows() {
                let u = uid.value(i);
                let put = user_profile_put(b, i, u);
                let put = match users.claim(u, |_| true) {
                    Some(c) => with_user_counts(put, c),
                    None => put,
                };
                r.put(Table::User, put)?;
            }
            Ok(())
        })?;
    }
    for (uid, c) in users.unclaimed() {
        r.put(Table::User, user_counts_put(*uid, c))?;
    }
    Ok(())
}

/// Tonight's post rows, each with its changed counters when it has their rowkey; then the
/// counters of the other posts.
fn put_posts_with_counters(
    n: &Night<'_>,
    changed: Vec<(i64, PostCounts)>,
    r: &mut Router,
) -> Result<()> {
    let mut posts = ChangedCounters::new(changed);
    for f in &n.files["posts"] {
        parquet_io::read_parquet(n.fs, f, &mut |b| {
            let mid = columns::ids(f, b, "mid")?;
            let created = columns::times(f, b, "created_at")?;
            for i in 0..b.num_rows() {
                let (m, at) = (mid.value(i), created.value(i));
                let uid = columns::opt(columns::opt_ids(b, "uid"), i).unwrap_or(0);
                let put = post_info_put(b, i, keys::post_key(uid, at, m), at);
                // Counters go with the row only if it has their rowkey.
                let same_key = |c: &PostCounts| (c.0, c.1) == (uid, at);
                let put = match posts.claim(m, same_key) {
                    Some((_, _, reposts, comments)) => with_post_counts(put, *reposts, *comments),
                    None => put,
                };
                r.put(Table::Post, put)?;
            }
            Ok(())
        })?;
    }
    for (mid, (uid, at, reposts, comments)) in posts.unclaimed() {
        let key = keys::post_key(*uid, *at, *mid);
        r.put(
            Table::Post,
            with_post_counts(Put::new(key), *reposts, *comments),
        )?;
    }
    Ok(())
}

//! What `load` remembers between nights: the counters that readers of `user` and `post` see,
//! as of the newest night loaded into a namespace (the *snapshot*).
//!
//! Each night's load computes the counters of every night so far ([`super::counters`]),
//! writes only the ones that differ from the snapshot, then commits the new snapshot. So the
//! counter puts of a night grow with what the night changed, not with the history, and:
//! - loading a night twice writes no counter the second time;
//! - rerunning an older night (or folding in a late crawl) computes the counters as of the
//!   newest night and writes any difference with the newest night's cell timestamp, so what
//!   a reader sees is always the counters of every committed night up to the newest loaded.
//!
//! Layout, under `<clean root>/_load/state/<namespace>/`: one committed folder per night,
//! `dt=<as of>/` with `_SUCCESS`, `state.json`, and `users-<p>-of-<n>.parquet` /
//! `posts-<p>-of-<n>.parquet` per counter partition. A run stages its snapshot in
//! `_tmp.dt=<as of>.next/` (a fixed name, so `--resume` finds the partitions already done)
//! and commits it only after every counter put was flushed: a failed run leaves the previous
//! snapshot in force, and its rerun writes the same differences again. The two newest
//! snapshots are kept. The snapshot moves on only with a run that writes both `user` and
//! `post`; one whose tables were just created starts with none. docs/nightly.md has the
//! whole protocol.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::Int64Array;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde::{Deserialize, Serialize};

mod sorted;

pub use sorted::{Row, SortedRows};

use super::counters::{self, PartitionCounters, PostCounts, UserCounts};
use crate::dataset::partition::{self, Staged};
use crate::dataset::{history, parquet_io};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};
use sorted::PartFile;

/// Snapshots kept: the newest, and the one before it in case the newest is being replaced.
const KEEP: usize = 2;

/// `state.json` of a snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Meta {
    /// The newest night whose counters the snapshot holds.
    as_of: String,
    /// Counter partitions it was written in.
    partitions: u32,
    /// The nights it holds the counters of, per entity, with their stamps (absent in a
    /// snapshot of a sliced load: the next load computes over every night).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    covered: Option<Covered>,
}

/// Per entity the counters read (`users`, `follows`, `posts`, `comments`), its nights with
/// their stamps ([`crate::dataset::history::Taken`]), oldest first.
pub type Covered = std::collections::BTreeMap<String, Vec<(String, i64)>>;

/// The snapshots of one namespace, loaded from one clean root.
pub struct State {
    root: Location,
}

/// A committed snapshot.
pub struct Snapshot {
    pub as_of: String,
    /// Partitions it was written in: with as many, partition p is one part.
    partitions: u32,
    /// The nights it covers, when recorded.
    pub covered: Option<Covered>,
    users: Vec<FileEntry>,
    posts: Vec<FileEntry>,
}

/// The counters of one partition that the night must write.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// Users whose counters differ from the snapshot, or that left it (written as zeros).
    pub users: Vec<(i64, UserCounts)>,
    /// Posts whose counters, author or time (so rowkey) differ from the snapshot.
    pub posts: Vec<(i64, PostCounts)>,
}

fn user_schema() -> SchemaRef {
    let cols = [
        "uid",
        "followers",
        "following",
        "posts",
        "reposts_received",
        "comments_received",
    ];
    Arc::new(Schema::new(
        cols.iter()
            .map(|c| Field::new(*c, DataType::Int64, false))
            .collect::<Vec<_>>(),
    ))
}

fn post_schema() -> SchemaRef {
    let cols = ["mid", "uid", "created_at", "reposts", "comments"];
    Arc::new(Schema::new(
        cols.iter()
            .map(|c| Field::new(*c, DataType::Int64, false))
            .collect::<Vec<_>>(),
    ))
}

fn bad(location: &Location, reason: String) -> Error {
    Error::BadInput {
        path: location.to_string(),
        line: 0,
        reason,
    }
}

impl State {
    pub fn new(clean_root: &Location, namespace: &str) -> State {
        State {
            root: clean_root.join("_load").join("state").join(namespace),
        }
    }

    /// Removes every snapshot (the tables they describe are new).
    pub fn clear(&self, fs: &FileSystems) -> Result<()> {
        fs.delete(&self.root)
    }

    /// The newest committed snapshot, if any.
    pub fn latest(&self, fs: &FileSystems) -> Result<Option<Snapshot>> {
        let Some(dir) = self.committed(fs)?.pop() else {
            return Ok(None);
        };
        let meta: Meta = serde_json::from_slice(&fs.read_to_vec(&dir.join("state.json"))?)
            .map_err(|e| bad(&dir.join("state.json"), e.to_string()))?;
        let files = partition::committed_parts(fs, &dir)?;
        let named = |prefix: &str| -> Vec<FileEntry> {
            files
                .iter()
                .filter(|f| {
                    f.location
                        .file_name()
                        .is_some_and(|n| n.starts_with(prefix))
                })
                .cloned()
                .collect()
        };
        Ok(Some(Snapshot {
            as_of: meta.as_of,
            partitions: meta.partitions,
            covered: meta.covered,
            users: named("users-"),
            posts: named("posts-"),
        }))
    }

    /// Committed snapshot folders, oldest first.
    fn committed(&self, fs: &FileSystems) -> Result<Vec<Location>> {
        let mut dirs = Vec::new();
        for (_, dir) in partition::dated_folders(fs, &self.root)? {
            if fs.exists(&dir.join("_SUCCESS"))? {
                dirs.push(dir);
            }
        }
        Ok(dirs)
    }

    /// The night a run for `date` computes the counters as of: `date`, or the newest night
    /// already loaded when that is later (a rerun, a late crawl folds into the newest).
    pub fn as_of(&self, fs: &FileSystems, date: &str) -> Result<String> {
        Ok(match self.latest(fs)? {
            Some(s) if s.as_of.as_str() > date => s.as_of,
            _ => date.to_string(),
        })
    }

    /// The snapshot a run as of `as_of` stages; `resume` keeps the partitions a previous
    /// attempt of the same run already wrote.
    pub fn next(&self, fs: &FileSystems, as_of: &str, resume: bool) -> Result<Next> {
        let staged = Staged::new(&self.root, &format!("dt={as_of}"), "next");
        if !resume {
            fs.delete(&staged.tmp)?;
        }
        fs.mkdirs(&staged.tmp)?;
        Ok(Next {
            staged,
            as_of: as_of.to_string(),
            covered: None,
            writing: std::sync::Mutex::new(None),
        })
    }
}

impl Snapshot {
    /// The parts that may hold partition `p` of `n`: its own when cut the same way, else all.
    fn parts<'a>(
        &self,
        files: &'a [FileEntry],
        entity: &str,
        p: u32,
        n: u32,
    ) -> Vec<&'a FileEntry> {
        let own = part_name(entity, p, n);
        let same = self.partitions == n;
        files
            .iter()
            .filter(|f| !same || f.location.file_name().as_deref() == Some(own.as_str()))
            .collect()
    }

    /// The snapshot's users in partition `p` of `n`.
    pub fn users(&self, fs: &FileSystems, p: u32, n: u32) -> Result<Map<UserCounts>> {
        let files = self.parts(&self.users, "users", p, n);
        read_users(fs, &files, |uid| counters::uid_partition(uid, n) == p)
    }

    /// The snapshot's posts in partition `p` of `n`.
    pub fn posts(&self, fs: &FileSystems, p: u32, n: u32) -> Result<Map<PostCounts>> {
        let files = self.parts(&self.posts, "posts", p, n);
        read_posts(fs, &files, |mid, uid| {
            let author = (uid != 0).then_some(uid);
            counters::post_partition(author, mid, n) == p
        })
    }

    /// The snapshot's users in partition `p` of `n`, by uid, streamed.
    pub fn users_in_order(&self, fs: &FileSystems, p: u32, n: u32) -> Result<SortedRows> {
        let files = self.parts(&self.users, "users", p, n);
        let keep = move |r: &Row| counters::uid_partition(r[0], n) == p;
        SortedRows::open(fs, &files, &user_schema(), Box::new(keep))
    }

    /// The snapshot's posts in partition `p` of `n`, by mid, streamed.
    pub fn posts_in_order(&self, fs: &FileSystems, p: u32, n: u32) -> Result<SortedRows> {
        let files = self.parts(&self.posts, "posts", p, n);
        let keep = move |r: &Row| {
            let author = (r[1] != 0).then_some(r[1]);
            counters::post_partition(author, r[0], n) == p
        };
        SortedRows::open(fs, &files, &post_schema(), Box::new(keep))
    }

    /// The snapshot's users whose uid `keep` accepts, from every part.
    pub fn users_where(
        &self,
        fs: &FileSystems,
        keep: impl Fn(i64) -> bool,
    ) -> Result<Map<UserCounts>> {
        read_users(fs, &self.users.iter().collect::<Vec<_>>(), keep)
    }

    /// The snapshot's posts whose mid `keep` accepts, from every part.
    pub fn posts_where(
        &self,
        fs: &FileSystems,
        keep: impl Fn(i64) -> bool,
    ) -> Result<Map<PostCounts>> {
        read_posts(fs, &self.posts.iter().collect::<Vec<_>>(), |mid, _| {
            keep(mid)
        })
    }
}

/// The users of snapshot parts whose uid `keep` accepts.
fn read_users(
    fs: &FileSystems,
    files: &[&FileEntry],
    keep: impl Fn(i64) -> bool,
) -> Result<Map<UserCounts>> {
    read_counts(fs, files, user_schema(), |c, i| {
        let uid = c[0].value(i);
        keep(uid).then(|| (uid, [1, 2, 3, 4, 5].map(|k| c[k].value(i))))
    })
}

/// The posts of snapshot parts that `keep` accepts, given the mid and the author (0: unknown).
fn read_posts(
    fs: &FileSystems,
    files: &[&FileEntry],
    keep: impl Fn(i64, i64) -> bool,
) -> Result<Map<PostCounts>> {
    read_counts(fs, files, post_schema(), |c, i| {
        let (mid, uid) = (c[0].value(i), c[1].value(i));
        keep(mid, uid).then(|| (mid, (uid, c[2].value(i), c[3].value(i), c[4].value(i))))
    })
}

/// Counters by key, as the snapshot holds them.
pub type Map<V> = HashMap<i64, V, rustc_hash::FxBuildHasher>;

/// The rows of snapshot parts (every column of `schema`, all `Int64`) that `keep` keeps.
fn read_counts<V>(
    fs: &FileSystems,
    files: &[&FileEntry],
    schema: SchemaRef,
    keep: impl Fn(&[&Int64Array], usize) -> Option<(i64, V)>,
) -> Result<Map<V>> {
    let mut out = Map::default();
    for f in files {
        parquet_io::read_parquet(fs, f, &mut |b| {
            let columns: Vec<&Int64Array> = schema
                .fields()
                .iter()
                .map(|field| crate::dataset::columns::ids(f, b, field.name()))
                .collect::<Result<_>>()?;
            out.extend((0..b.num_rows()).filter_map(|i| keep(&columns, i)));
            Ok(())
        })?;
    }
    Ok(out)
}

/// What a partition must write: its counters that the snapshot (`old`, the same partition)
/// does not already hold.
pub fn changes(
    new: &PartitionCounters,
    old_users: &Map<UserCounts>,
    old_posts: &Map<PostCounts>,
) -> Changes {
    let mut users: Vec<(i64, UserCounts)> = new
        .users
        .iter()
        .filter(|(uid, c)| old_users.get(uid) != Some(c))
        .copied()
        .collect();
    // A user no night has any more (a night cleaned again with less in it): its counters are
    // zero now. A post that left keeps its row, whose key may be a stale one (docs/nightly.md).
    let current: std::collections::HashSet<i64> = new.users.iter().map(|(u, _)| *u).collect();
    users.extend(
        old_users
            .keys()
            .filter(|u| !current.contains(u))
            .map(|u| (*u, [0; 5])),
    );
    users.sort_unstable_by_key(|(u, _)| *u);
    let posts = new
        .posts
        .iter()
        .filter(|(mid, c)| old_posts.get(mid) != Some(c))
        .copied()
        .collect();
    Changes { users, posts }
}

/// A snapshot being staged.
pub struct Next {
    staged: Staged,
    as_of: String,
    covered: Option<Covered>,
    /// The part still being written, if any ([`Next::write_part`]).
    writing: std::sync::Mutex<Option<std::thread::JoinHandle<Result<()>>>>,
}

/// One partition of a snapshot being staged, written row by row ([`Next::part_writer`]).
pub struct PartWriter {
    users: PartFile,
    posts: PartFile,
}

impl PartWriter {
    /// A user's row: uid, then its counters.
    pub fn user(&mut self, row: Row) -> Result<()> {
        self.users.push(row)
    }

    /// A post's row: mid, author, time, reposts, comments.
    pub fn post(&mut self, row: Row) -> Result<()> {
        self.posts.push(row)
    }

    /// Moves both files into place, side by side: each close waits on the NameNode.
    pub fn finish(self) -> Result<()> {
        let PartWriter { users, posts } = self;
        let (users, posts) = std::thread::scope(|s| {
            let users = s.spawn(|| users.finish());
            (users.join(), posts.finish())
        });
        // A panic there is a bug: it goes on as one here.
        users.unwrap_or_else(|e| std::panic::resume_unwind(e))?;
        posts
    }
}

fn part_name(entity: &str, p: u32, n: u32) -> String {
    format!("{entity}-{p:05}-of-{n:05}.parquet")
}

impl Next {
    /// Records the nights the snapshot covers, so that the next load may carry it forward.
    pub fn covering(mut self, covered: Covered) -> Next {
        self.covered = Some(covered);
        self
    }

    /// Whether partition `p` of `n` is staged already.
    pub fn has_part(&self, fs: &FileSystems, p: u32, n: u32) -> Result<bool> {
        self.wait_for_part()?;
        Ok(fs.exists(&self.staged.tmp.join(&part_name("users", p, n)))?
            && fs.exists(&self.staged.tmp.join(&part_name("posts", p, n)))?)
    }

    /// Writes partition `p` of `n` of the new snapshot (atomically: a part is there whole or
    /// not at all), on a thread of its own; the next call, [`Next::has_part`] and
    /// [`Next::commit`] wait for it and return its error.
    pub fn write_part(
        &self,
        fs: &FileSystems,
        p: u32,
        n: u32,
        c: &PartitionCounters,
    ) -> Result<()> {
        let users: Vec<Row> = c
            .users
            .iter()
            .map(|(u, k)| [*u, k[0], k[1], k[2], k[3], k[4]])
            .collect();
        let posts: Vec<Row> = c
            .posts
            .iter()
            .map(|(m, k)| [*m, k.0, k.1, k.2, k.3, 0])
            .collect();
        // Written while the next partition computes: each file's close waits on the
        // NameNode for its block. One part is in flight at a time; a part not written when
        // the run dies is redone by the resume, which finds it missing (docs/nightly.md).
        self.wait_for_part()?;
        let writer = self.part_writer(fs, p, n)?;
        let thread = std::thread::spawn(move || {
            let mut writer = writer;
            for row in users {
                writer.user(row)?;
            }
            for row in posts {
                writer.post(row)?;
            }
            writer.finish()
        });
        *self.writing.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
        Ok(())
    }

    /// A writer of partition `p` of `n`, row by row (users by uid, posts by mid).
    pub fn part_writer(&self, fs: &FileSystems, p: u32, n: u32) -> Result<PartWriter> {
        let at = |entity| self.staged.tmp.join(&part_name(entity, p, n));
        Ok(PartWriter {
            users: PartFile::create(fs, &at("users"), user_schema())?,
            posts: PartFile::create(fs, &at("posts"), post_schema())?,
        })
    }

    /// Waits for the part in flight, with its error.
    pub fn wait_for_part(&self) -> Result<()> {
        let pending = self
            .writing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match pending.map(|w| w.join()) {
            None => Ok(()),
            Some(Ok(written)) => written,
            Some(Err(_)) => Err(bad(
                &self.staged.tmp,
                "a snapshot part's writer panicked".into(),
            )),
        }
    }

    /// Drops the staging folder of a snapshot an earlier attempt already committed.
    pub fn abandon(self, fs: &FileSystems) {
        let _ = self.wait_for_part();
        partition::abandon(fs, std::slice::from_ref(&self.staged));
    }

    /// Merges the staged `parts` of each entity into one, in key order: a snapshot is one
    /// part per entity whatever cut wrote it, so a rebuild, a sliced load and a single one
    /// leave the same bytes (docs/nightly.md, "Repair").
    fn merge_parts(&self, fs: &FileSystems, parts: &[(String, FileEntry)]) -> Result<()> {
        let merge = |entity: &str, schema: SchemaRef| -> Result<()> {
            let prefix = format!("{entity}-");
            let files: Vec<&FileEntry> = (parts.iter())
                .filter(|(name, _)| name.starts_with(&prefix))
                .map(|(_, e)| e)
                .collect();
            let mut rows = SortedRows::open(fs, &files, &schema, Box::new(|_| true))?;
            let at = self.staged.tmp.join(&part_name(entity, 0, 1));
            let mut out = PartFile::create(fs, &at, schema)?;
            while let Some(row) = rows.next_row()? {
                out.push(row)?;
            }
            out.finish()?;
            for f in files {
                fs.delete(&f.location)?;
            }
            Ok(())
        };
        let (users, posts) = rayon::join(
            || merge("users", user_schema()),
            || merge("posts", post_schema()),
        );
        users.and(posts)
    }

    /// Commits the snapshot once all `n` partitions are written: it becomes the newest, and
    /// snapshots older than the [`KEEP`] newest are removed.
    pub fn commit(self, fs: &FileSystems, state: &State, n: u32) -> Result<()> {
        self.wait_for_part()?;
        let wanted: std::collections::BTreeSet<String> = (0..n)
            .flat_map(|p| [part_name("users", p, n), part_name("posts", p, n)])
            .collect();
        let mut parts = Vec::new();
        for e in fs.list(&self.staged.tmp, false)? {
            let name = e.location.file_name().unwrap_or_default();
            if wanted.contains(&name) {
                parts.push((name, e));
            } else {
                // A part of an attempt cut in another number of partitions.
                fs.delete(&e.location)?;
            }
        }
        if let Some(name) = wanted.iter().find(|w| !parts.iter().any(|(p, _)| p == *w)) {
            return Err(bad(
                &self.staged.tmp,
                format!("counter snapshot part {name} was not written"),
            ));
        }
        if n > 1 {
            self.merge_parts(fs, &parts)?;
        }
        let meta = Meta {
            as_of: self.as_of.clone(),
            partitions: 1,
            covered: self.covered.clone(),
        };
        let text = serde_json::to_vec_pretty(&meta).unwrap_or_default();
        fs.write_atomic(&self.staged.tmp.join("state.json"), &text)?;
        partition::commit(fs, std::slice::from_ref(&self.staged))?;
        let committed = state.committed(fs)?;
        for old in committed.iter().take(committed.len().saturating_sub(KEEP)) {
            fs.delete(old)?;
        }
        Ok(())
    }
}

/// What [`check`] found for one namespace's newest snapshot.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SnapshotCheck {
    pub namespace: String,
    /// The night the snapshot holds the counters of.
    pub as_of: String,
    /// Users and posts recomputed from every night up to `as_of`.
    pub users: u64,
    pub posts: u64,
    /// Users and posts whose counters in the snapshot differ from the recomputation, or
    /// that only one of the two has.
    pub users_differ: u64,
    pub posts_differ: u64,
}

impl SnapshotCheck {
    pub fn same(&self) -> bool {
        self.users_differ == 0 && self.posts_differ == 0
    }
}

/// Recomputes the counters of the newest snapshot of every namespace loaded from
/// `clean_root` (`<clean_root>/_load/state/<namespace>/`) over every night up to its date,
/// as a load would, and counts what differs. Partition by partition, in the snapshot's own
/// cut, so it needs what the load that wrote it needed.
pub fn check(fs: &FileSystems, clean_root: &Location) -> Result<Vec<SnapshotCheck>> {
    let states = clean_root.join("_load").join("state");
    if !fs.exists(&states)? {
        return Ok(Vec::new());
    }
    let mut namespaces: Vec<String> = fs
        .list(&states, false)?
        .into_iter()
        .filter(|e| e.is_dir)
        .filter_map(|e| e.location.file_name())
        .filter(|name| !name.starts_with(['_', '.']))
        .collect();
    namespaces.sort();
    let mut checked = Vec::new();
    for namespace in namespaces {
        let Some(snapshot) = State::new(clean_root, &namespace).latest(fs)? else {
            continue;
        };
        let mut found = check_one(fs, clean_root, &snapshot)?;
        found.namespace = namespace;
        checked.push(found);
    }
    Ok(checked)
}

/// [`check`] for one snapshot.
fn check_one(fs: &FileSystems, clean_root: &Location, s: &Snapshot) -> Result<SnapshotCheck> {
    let mut history = std::collections::BTreeMap::new();
    for entity in counters::COUNTED {
        let taken = history::take_history(fs, &clean_root.join(entity), &s.as_of)?;
        let files: Vec<FileEntry> = taken.into_iter().flat_map(|t| t.files).collect();
        history.insert(entity, files);
    }
    let inputs = counters::Inputs::of(&history, &[]);
    let mut found = SnapshotCheck {
        as_of: s.as_of.clone(),
        ..SnapshotCheck::default()
    };
    // In the cut a full pass would take, whatever the snapshot's own.
    let budget = crate::hbase::write::WriteOptions::MEMORY_BUDGET;
    let n = counters::partitions_for(fs, &inputs, budget)?;
    for p in 0..n {
        let computed = counters::compute(fs, &inputs, p, n, &mut |_| Ok(()))?;
        let (users, posts) = (s.users(fs, p, n)?, s.posts(fs, p, n)?);
        let c = changes(&computed, &users, &posts);
        let recomputed: std::collections::HashSet<i64> =
            computed.posts.iter().map(|(mid, _)| *mid).collect();
        let extra_posts = posts.keys().filter(|m| !recomputed.contains(m)).count();
        found.users += computed.users.len() as u64;
        found.posts += computed.posts.len() as u64;
        found.users_differ += c.users.len() as u64;
        found.posts_differ += (c.posts.len() + extra_posts) as u64;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hm<V>(entries: &[(i64, V)]) -> Map<V>
    where
        V: Copy,
    {
        entries.iter().copied().collect()
    }

    #[test]
    fn changes_are_what_the_snapshot_lacks() {
        let new = PartitionCounters {
            users: vec![
                (1, [1, 0, 0, 0, 0]),
                (2, [0, 1, 0, 0, 0]),
                (4, [2, 2, 1, 0, 0]),
            ],
            posts: vec![(10, (4, 100, 0, 1)), (11, (4, 200, 0, 0))],
            unresolved_mentions: 0,
        };
        let old_users = hm(&[
            (1, [1, 0, 0, 0, 0]),
            (2, [0, 0, 0, 0, 0]),
            (3, [5, 0, 0, 0, 0]),
        ]);
        let old_posts = hm(&[
            (10, (4, 100, 0, 1)),
            (11, (0, 200, 0, 0)),
            (12, (4, 1, 0, 0)),
        ]);
        let c = changes(&new, &old_users, &old_posts);
        // 1 is unchanged; 2 changed; 3 left (zeros); 4 is new.
        assert_eq!(
            c.users,
            vec![(2, [0, 1, 0, 0, 0]), (3, [0; 5]), (4, [2, 2, 1, 0, 0])]
        );
        // 11's author is known now (another rowkey); 12 left and is not rewritten.
        assert_eq!(c.posts, vec![(11, (4, 200, 0, 0))]);
        // Against itself, nothing.
        let same_users = hm(&new.users);
        let same_posts = hm(&new.posts);
        assert_eq!(changes(&new, &same_users, &same_posts), Changes::default());
    }

    #[test]
    fn a_snapshot_round_trips_and_keeps_the_two_newest() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let root = fs.parse(dir.path().to_str().unwrap()).unwrap();
        let state = State::new(&root, "ns");
        assert!(state.latest(&fs).unwrap().is_none());
        let c = PartitionCounters {
            users: vec![(7, [1, 2, 3, 4, 5]), (8, [0, 1, 0, 0, 0])],
            posts: vec![(70, (7, 123, 1, 2)), (71, (0, 456, 0, 3))],
            unresolved_mentions: 0,
        };
        for date in ["2026-11-01", "2026-11-02", "2026-11-03"] {
            let next = state.next(&fs, date, false).unwrap();
            next.write_part(&fs, 0, 1, &c).unwrap();
            next.commit(&fs, &state, 1).unwrap();
        }
        let snap = state.latest(&fs).unwrap().unwrap();
        assert_eq!(snap.as_of, "2026-11-03");
        assert_eq!(snap.users(&fs, 0, 1).unwrap(), hm(&c.users));
        assert_eq!(snap.posts(&fs, 0, 1).unwrap(), hm(&c.posts));
        // Cut in two partitions, the halves are disjoint and make the whole.
        let (a, b) = (
            snap.users(&fs, 0, 2).unwrap(),
            snap.users(&fs, 1, 2).unwrap(),
        );
        assert_eq!(a.len() + b.len(), 2);
        let kept: Vec<String> = state
            .committed(&fs)
            .unwrap()
            .iter()
            .filter_map(|l| l.file_name())
            .collect();
        assert_eq!(kept, vec!["dt=2026-11-02", "dt=2026-11-03"]);
        // A snapshot missing a partition is refused, and the newest stays in force.
        let next = state.next(&fs, "2026-11-04", false).unwrap();
        next.write_part(&fs, 0, 2, &c).unwrap();
        assert!(next.commit(&fs, &state, 2).is_err());
        assert_eq!(state.latest(&fs).unwrap().unwrap().as_of, "2026-11-03");
    }

    #[test]
    fn a_snapshot_is_the_same_bytes_whatever_cut_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let all = PartitionCounters {
            users: (1..=200).map(|u| (u * 7919, [u, 1, 2, 3, u % 5])).collect(),
            posts: (1..=300)
                .map(|m| (m * 104_729, ((m % 40) * 7919, 1000 + m, m % 3, m % 7)))
                .collect(),
            unresolved_mentions: 0,
        };
        let written_in = |n: u32| -> Vec<(String, Vec<u8>)> {
            let at = dir.path().join(format!("cut-{n}"));
            let root = fs.parse(at.to_str().unwrap()).unwrap();
            let state = State::new(&root, "ns");
            let next = state.next(&fs, "2026-11-01", false).unwrap();
            for p in 0..n {
                let part = PartitionCounters {
                    users: (all.users.iter())
                        .filter(|(u, _)| counters::uid_partition(*u, n) == p)
                        .copied()
                        .collect(),
                    posts: (all.posts.iter())
                        .filter(|(m, k)| {
                            let author = (k.0 != 0).then_some(k.0);
                            counters::post_partition(author, *m, n) == p
                        })
                        .copied()
                        .collect(),
                    unresolved_mentions: 0,
                };
                next.write_part(&fs, p, n, &part).unwrap();
            }
            next.commit(&fs, &state, n).unwrap();
            let newest = state.committed(&fs).unwrap().pop().unwrap();
            let mut files: Vec<_> = (fs.list(&newest, false).unwrap().into_iter())
                .map(|e| {
                    let bytes = fs.read_to_vec(&e.location).unwrap();
                    (e.location.file_name().unwrap(), bytes)
                })
                .collect();
            files.sort();
            files
        };
        let one = written_in(1);
        let names: Vec<&str> = one.iter().map(|(name, _)| name.as_str()).collect();
        for part in [
            "users-00000-of-00001.parquet",
            "posts-00000-of-00001.parquet",
        ] {
            assert!(names.contains(&part), "{names:?}");
        }
        for n in [2, 3] {
            assert!(written_in(n) == one, "written in {n} partitions");
        }
        let snap = State::new(
            &fs.parse(dir.path().join("cut-3").to_str().unwrap())
                .unwrap(),
            "ns",
        );
        let snap = snap.latest(&fs).unwrap().unwrap();
        assert_eq!(snap.users(&fs, 0, 1).unwrap(), hm(&all.users));
        assert_eq!(snap.posts(&fs, 0, 1).unwrap(), hm(&all.posts));
    }
}

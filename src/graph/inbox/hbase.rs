//! The inbox into HBase (`inbox --load`): each fanned-out post as one cell version per fan
//! (the version is the post's time), and for each celebrity one marker cell per fan that
//! `query feed` follows to the celebrity's timeline at read time. docs/hbase-layout.md.
//!
//! Only what the namespace does not hold yet is written: a [`Marker`],
//! `<output>/_load/<namespace>.inbox.json`, names the night whose inbox was last loaded, and
//! that night's output is the base ([`LoadedFeeds`]). A feed cell is written when its post is
//! new to its author's newest K or its fan is new to the author; a celebrity's markers when its
//! count of fans changed. So a night writes the cells its delta brings, not every feed again.
//! The marker also records the follows nights the base was computed from: while they are
//! unchanged, the fans the base served are the edges of those nights, and only the posts it
//! served are read back ([`super::FollowNights`]).
//!
//! Invariant: the `inbox` table keeps exactly K versions of its feed family; a table made for
//! another K is refused, since HBase would silently cut or pad the feeds.

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::dataset::columns;
use crate::dataset::inbox::{CELEBRITIES_TABLE, INBOX_TABLE};
use crate::dataset::partition;
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::graph::loaded::Marker;
use crate::hbase::admin::{Admin, Compression};
use crate::hbase::layout::{self, keys, Table, CELEBRITY_FAMILY, INBOX_FAMILY};
use crate::hbase::write::{self, Route, WriteOptions, WriteReport};
use crate::hbase::{Connection, Put};
use crate::hdfs::{FileSystems, Location};

use super::{Author, Built, InboxOptions, InboxStats};
use crate::dataset::parquet_io;

/// What `inbox --load` wrote, and against which base.
#[derive(Clone, Debug, Serialize)]
pub struct Loaded {
    #[serde(flatten)]
    pub written: WriteReport,
    pub base: FeedBase,
}

/// The night whose inbox the namespace held, and the cells left out as already there.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FeedBase {
    pub date: Option<String>,
    pub unchanged_cells: u64,
    /// Whether the base's fans were read back from its output, because the follows nights
    /// up to it changed since (or were not recorded); else they are the edges of those nights.
    pub fans_read_back: bool,
}

/// Builds the inbox of `options` (as [`super::run`] does) and writes into the `inbox` table
/// of `hbase.namespace` (created with K versions when missing) the cells it does not hold yet;
/// then records the night in the namespace's marker.
pub fn run(
    fs: &FileSystems,
    clean: &Location,
    output: &Location,
    options: &InboxOptions,
    hbase: &WriteOptions,
) -> Result<(InboxStats, Loaded)> {
    let created = ensure_inbox_table(hbase, options.k as u32)?;
    let hbase = &WriteOptions {
        tables: vec![Table::Inbox],
        ..hbase.clone()
    };
    let whole = options.slice == Slice::ALL;
    let marker = Marker::new(
        output,
        &format!("{}.inbox.json", hbase.namespace),
        &[INBOX_TABLE, CELEBRITIES_TABLE],
    );
    let base_date = match whole && !created {
        true => marker.base(fs)?,
        false => None,
    };
    // The nights up to the base as the base saw them: then its fans are those edges, and
    // need not be read back from its output.
    let mut follows = super::FollowNights::take(fs, clean, &options.date)?;
    let covered = follows.covered();
    let recorded = marker.nights(fs)?;
    let split = match (&base_date, &recorded) {
        (Some(date), Some(then)) => follows.split_after(date, then),
        _ => false,
    };
    let base = base_date
        .map(|date| LoadedFeeds::read(fs, output, date, !split))
        .transpose()?;
    // --via auto weighs the cells it expects: with a base, each of the night's posts to its
    // author's fans and each of the night's follows to K posts; else every follow (up to K).
    let weighed = || -> Result<u64> {
        match &base {
            Some(b) => night_cells(fs, clean, &options.date, options.k as u64, b),
            None => {
                let follows = partition::history(fs, clean, "follows", &options.date)?;
                Ok(parquet_io::parquet_rows(fs, &follows)? * options.k as u64)
            }
        }
    };
    let route = Route {
        fs,
        root: output.clone(),
        rows: &weighed,
    };
    let run_ts = write::cell_timestamp(&options.date)?;
    let mut split_follows = Some(follows);
    let mut stats = None;
    let mut unchanged = 0u64;
    let written = write::write_routed_with(&route, hbase, &mut |sink| {
        // Called once; were it called again, the nights are listed again, unsplit.
        let follows = match split_follows.take() {
            Some(f) => f,
            None => super::FollowNights::take(fs, clean, &options.date)?,
        };
        let s = super::run_over(fs, clean, output, options, follows, &mut |built| {
            for a in &built.authors {
                unchanged += write_author(built, a, base.as_ref(), run_ts, sink)?;
            }
            Ok(())
        })?;
        stats = Some(s);
        Ok(())
    })?;
    let stats = stats.ok_or_else(|| Error::Hbase {
        op: "inbox",
        table: Table::Inbox.in_namespace(&hbase.namespace),
        reason: "the inbox job produced no report".into(),
    })?;
    let fans_read_back = base.is_some() && !split;
    let base_date = base.map(|b| b.date);
    if whole {
        // The marker keeps naming the later night: then the nights its output came from.
        let later_base = base_date
            .as_deref()
            .is_some_and(|b| b > options.date.as_str());
        let nights = if later_base { recorded } else { Some(covered) };
        marker.record_covering(fs, &options.date, base_date.as_deref(), nights.as_deref())?;
    }
    let loaded = Loaded {
        written,
        base: FeedBase {
            date: base_date,
            unchanged_cells: unchanged,
            fans_read_back,
        },
    };
    Ok((stats, loaded))
}

/// The cells a night brings on top of `base`, as far as its inputs tell before the fan-out:
/// its follows times `k`, and each of its posts times the fans the base gives its author.
fn night_cells(
    fs: &FileSystems,
    clean: &Location,
    date: &str,
    k: u64,
    base: &LoadedFeeds,
) -> Result<u64> {
    let night = |entity: &str| {
        partition::committed_parts(fs, &clean.join(entity).join(&format!("dt={date}")))
    };
    let mut cells = parquet_io::parquet_rows(fs, &night("follows")?)? * k;
    for f in &night("posts")? {
        parquet_io::read_parquet_columns(fs, f, &["uid"], &mut |b| {
            let uid = columns::opt_ids(b, "uid");
            for i in 0..b.num_rows() {
                if let Some(author) = columns::opt(uid, i) {
                    cells += base.fans(author);
                }
            }
            Ok(())
        })?;
    }
    Ok(cells)
}

/// Writes the cells of one author's fan-out that `base` does not hold; returns how many were
/// left out. Post by post, so the writers batch each version's cells together.
fn write_author(
    built: &Built,
    a: &Author,
    base: Option<&LoadedFeeds>,
    run_ts: i64,
    sink: &mut write::TimedPutSink<'_>,
) -> Result<u64> {
    let fans_n = a.fans.len() as u64;
    if a.celebrity {
        // The union of the follows only grows, so an unchanged count is an unchanged fan set.
        if base.and_then(|b| b.celebrities.get(&a.uid)) == Some(&(fans_n as i64)) {
            return Ok(fans_n);
        }
        let column = layout::inbox_column(CELEBRITY_FAMILY, a.uid);
        let fans = (fans_n as i64).to_be_bytes();
        for f in built.fans(a) {
            let put = Put {
                key: keys::user_key(f),
                cells: vec![(column.clone(), fans.to_vec())],
            };
            sink(Table::Inbox, put, run_ts)?;
        }
        return Ok(0);
    }
    let served = base.map_or(&[][..], |b| b.posts(a.uid));
    // Fans the base did not serve this author: they get every post.
    let new_fans: Vec<i64> = match built.fresh_fans(a) {
        Some(fresh) => fresh.collect(),
        None => {
            let known_fans = base.map_or(&[][..], |b| b.edges_of(a.uid));
            built
                .fans(a)
                .filter(|&f| {
                    known_fans
                        .binary_search_by_key(&f, |&(_, fan)| fan)
                        .is_err()
                })
                .collect()
        }
    };
    let column = layout::inbox_column(INBOX_FAMILY, a.uid);
    let mut unchanged = 0;
    for &(created, mid, version) in built.posts(a) {
        let post = keys::post_key(a.uid, created, mid);
        let known = served.contains(&(created, mid, version));
        let mut put = |f: i64| {
            let put = Put {
                key: keys::user_key(f),
                cells: vec![(column.clone(), post.clone())],
            };
            sink(Table::Inbox, put, version)
        };
        if known {
            unchanged += fans_n - new_fans.len() as u64;
            new_fans.iter().try_for_each(|&f| put(f))?;
        } else {
            built.fans(a).try_for_each(put)?;
        }
    }
    Ok(unchanged)
}

/// A post as served in a feed: `(created_at, mid, version)`.
type Served = (i64, i64, i64);

/// The feeds a namespace holds: the committed inbox output of the night its marker names.
struct LoadedFeeds {
    date: String,
    /// `(followee, fan)`, sorted and distinct: each fanned-out author's fans are a range.
    /// Empty when not read (the run is split at the base, [`super::FollowNights`]).
    edges: Vec<(i64, i64)>,
    /// Each fanned-out author's newest K as served, `(created_at, mid, version)`, and its
    /// count of fans.
    posts: FxHashMap<i64, (Vec<Served>, u64)>,
    /// Each celebrity's count of fans.
    celebrities: FxHashMap<i64, i64>,
}

impl LoadedFeeds {
    /// Reads the base: the posts each author was served with (every fan of an author has
    /// the same posts, so its rows are fans × posts), and with `edges` the fans of each, in a
    /// second pass that holds one row per edge: those of the author's newest post.
    fn read(fs: &FileSystems, output: &Location, date: String, edges: bool) -> Result<LoadedFeeds> {
        let dt = format!("dt={date}");
        let entries = partition::committed_parts(fs, &output.join(INBOX_TABLE).join(&dt))?;
        // An author's rows are in one part (the parts are partitions of the authors).
        let per_part: Vec<FxHashMap<i64, (Vec<Served>, u64)>> = entries
            .par_iter()
            .map(|f| {
                let mut posts: FxHashMap<i64, (Vec<Served>, u64)> = FxHashMap::default();
                let cols = ["followee", "mid", "created_at", "version"];
                parquet_io::read_parquet_columns(fs, f, &cols, &mut |b| {
                    let followee = columns::ids(f, b, "followee")?;
                    let mid = columns::ids(f, b, "mid")?;
                    let created = columns::times(f, b, "created_at")?;
                    let version = columns::ids(f, b, "version")?;
                    for i in 0..b.num_rows() {
                        let post = (created.value(i), mid.value(i), version.value(i));
                        let (served, rows) = posts.entry(followee.value(i)).or_default();
                        *rows += 1;
                        if served.last() != Some(&post) && !served.contains(&post) {
                            served.push(post);
                        }
                    }
                    Ok(())
                })?;
                Ok(posts)
            })
            .collect::<Result<_>>()?;
        let mut posts: FxHashMap<i64, (Vec<Served>, u64)> = FxHashMap::default();
        for part in per_part {
            for (author, (served, rows)) in part {
                let (all, n) = posts.entry(author).or_default();
                for p in served {
                    if !all.contains(&p) {
                        all.push(p);
                    }
                }
                *n += rows;
            }
        }
        for (served, rows) in posts.values_mut() {
            *rows /= served.len().max(1) as u64;
        }
        let edges = match edges {
            true => read_edges(fs, &entries, &posts)?,
            false => Vec::new(),
        };
        let mut celebrities = FxHashMap::default();
        let stars = partition::committed_parts(fs, &output.join(CELEBRITIES_TABLE).join(&dt))?;
        for f in &stars {
            parquet_io::read_parquet_columns(fs, f, &["uid", "fans"], &mut |b| {
                let uid = columns::ids(f, b, "uid")?;
                let fans = columns::ids(f, b, "fans")?;
                celebrities.extend(
                    uid.values()
                        .iter()
                        .copied()
                        .zip(fans.values().iter().copied()),
                );
                Ok(())
            })?;
        }
        log::info!(
            "inbox: the namespace holds the feeds of {date} ({} authors, {} celebrities{}): \
             writing what differs",
            posts.len(),
            celebrities.len(),
            match edges.is_empty() {
                true => String::new(),
                false => format!(", {} edges read back", edges.len()),
            }
        );
        Ok(LoadedFeeds {
            date,
            edges,
            posts,
            celebrities,
        })
    }

    /// The posts served for `author`.
    fn posts(&self, author: i64) -> &[Served] {
        self.posts
            .get(&author)
            .map_or(&[][..], |(p, _)| p.as_slice())
    }

    /// The count of fans the base served `author`.
    fn fans(&self, author: i64) -> u64 {
        self.posts.get(&author).map_or(0, |(_, n)| *n)
    }

    /// The edges `(author, fan)` of `author` the base served, by fan (read only when the run
    /// is not split at the base).
    fn edges_of(&self, author: i64) -> &[(i64, i64)] {
        let from = self.edges.partition_point(|&(a, _)| a < author);
        let to = self.edges.partition_point(|&(a, _)| a <= author);
        &self.edges[from..to]
    }
}

/// The base's edges `(followee, fan)`, sorted and distinct: the rows of each author's newest
/// post.
fn read_edges(
    fs: &FileSystems,
    entries: &[crate::hdfs::FileEntry],
    posts: &FxHashMap<i64, (Vec<Served>, u64)>,
) -> Result<Vec<(i64, i64)>> {
    let newest: FxHashMap<i64, i64> = posts
        .iter()
        .map(|(&a, (p, _))| (a, p.iter().map(|x| x.2).max().unwrap_or(i64::MIN)))
        .collect();
    let mut edges = Vec::new();
    for f in entries {
        parquet_io::read_parquet_columns(fs, f, &["uid", "followee", "version"], &mut |b| {
            let fan = columns::ids(f, b, "uid")?;
            let followee = columns::ids(f, b, "followee")?;
            let version = columns::ids(f, b, "version")?;
            for i in 0..b.num_rows() {
                let a = followee.value(i);
                if newest.get(&a) == Some(&version.value(i)) {
                    edges.push((a, fan.value(i)));
                }
            }
            Ok(())
        })?;
    }
    edges.sort_unstable();
    edges.dedup();
    Ok(edges)
}

/// Creates the inbox table with `VERSIONS = k` on its feed family (true), or checks that the
/// one there has it (false).
fn ensure_inbox_table(hbase: &WriteOptions, k: u32) -> Result<bool> {
    let ns = &hbase.namespace;
    let mut admin = Admin::connect(&hbase.admin, hbase.timeouts)?;
    admin.ensure_namespace(ns)?;
    if !admin.table_exists(ns, Table::Inbox.name())? {
        let mut spec = Table::Inbox.spec(ns, Compression::None);
        for f in &mut spec.families {
            if f.name == INBOX_FAMILY {
                f.max_versions = k as i32;
            }
        }
        admin.create_table(&spec, &keys::split_points(hbase.regions))?;
        return Ok(true);
    }
    let table = Table::Inbox.in_namespace(ns);
    let mut conn = Connection::connect(&hbase.thrift, hbase.timeouts)?;
    let versions = conn.family_versions(&table)?;
    match versions.get(INBOX_FAMILY) {
        Some(&v) if v == k as i32 => Ok(false),
        found => Err(Error::Usage(format!(
            "{table} keeps {} versions of {INBOX_FAMILY}, not --k {k}: drop it first \
             (weibo-etl tables drop) to change K",
            found.map_or("no".to_string(), |v| v.to_string())
        ))),
    }
}

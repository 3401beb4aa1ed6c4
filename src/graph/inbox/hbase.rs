//! The inbox into HBase (`inbox --load`): each fanned-out post as one cell version per fan
//! (the version is the post's time), and for each celebrity one marker cell per fan that
//! `query feed` follows to the celebrity's timeline at read time. docs/hbase-layout.md.
//!
//! Only what the namespace does not hold yet is written. A [`Marker`],
//! `<output>/_load/<namespace>.inbox.json`, names the night whose inbox was last loaded. When
//! it is the night the run continues from ([`super::Plan`]) or a later one, the namespace
//! holds the base's feeds, and the night writes the entries its partition adds; when it is
//! this very night, loaded from the same nights, it writes nothing; otherwise (tables just
//! created, marker missing or stale, a slice) every author is built and every cell written.
//!
//! Invariant: the `inbox` table keeps exactly K versions of its feed family; a table made for
//! another K is refused, since HBase would silently cut or pad the feeds.

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::dataset::columns;
use crate::dataset::inbox::{CELEBRITIES_TABLE, INBOX_TABLE};
use crate::dataset::parquet_io;
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::graph::loaded::Marker;
use crate::hbase::admin::{Admin, Compression};
use crate::hbase::layout::{self, keys, Table, CELEBRITY_FAMILY, INBOX_FAMILY};
use crate::hbase::write::{self, Route, WriteOptions, WriteReport};
use crate::hbase::{Connection, Put};
use crate::hdfs::{FileSystems, Location};

use super::{Built, InboxOptions, InboxStats, Plan, Scope};

/// What `inbox --load` wrote, and against which base.
#[derive(Clone, Debug, Serialize)]
pub struct Loaded {
    #[serde(flatten)]
    pub written: WriteReport,
    pub base: FeedBase,
}

/// The night the run's entries add to, and what the namespace was given.
#[derive(Clone, Debug, Serialize)]
pub struct FeedBase {
    pub date: Option<String>,
    pub wrote: Wrote,
}

/// What a load wrote into the namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Wrote {
    /// Every feed: the namespace did not hold the base's (or there is none).
    Every,
    /// The entries the night's partition adds to its base's feeds.
    Added,
    /// Nothing: the namespace holds this night's entries, loaded from the same nights.
    Nothing,
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
    let plan = Plan::of(fs, clean, output, options)?;
    let held = match whole && !created {
        true => marker.base(fs)?,
        false => None,
    };
    let wrote = match (held.as_deref(), plan.base_date()) {
        (Some(h), _)
            if h == options.date
                && super::recorded(fs, output, h)?.as_ref() == Some(plan.record()) =>
        {
            Wrote::Nothing
        }
        (Some(h), Some(base)) if h >= base => Wrote::Added,
        _ => Wrote::Every,
    };
    let scope = match wrote {
        Wrote::Every => Scope::Every,
        Wrote::Added | Wrote::Nothing => Scope::Touched,
    };
    // --via auto weighs the cells it expects: every follow (up to K), or the night's follows
    // to K posts each and its posts to their authors' fans.
    let weighed = || -> Result<u64> {
        match wrote {
            Wrote::Every => {
                let follows: Vec<_> = plan.follows().map(|(f, _)| f).collect();
                Ok(parquet_io::parquet_rows(fs, follows)? * options.k as u64)
            }
            Wrote::Added => added_cells(fs, &plan, options.k as u64),
            Wrote::Nothing => Ok(0),
        }
    };
    let route = Route {
        fs,
        root: output.clone(),
        rows: &weighed,
    };
    let run_ts = write::cell_timestamp(&options.date)?;
    let mut stats = None;
    let written = write::write_routed_with(&route, hbase, &mut |sink| {
        let s = super::run_planned(fs, output, options, &plan, scope, &mut |built| {
            if wrote == Wrote::Nothing {
                return Ok(());
            }
            for a in &built.authors {
                write_author(built, a, wrote == Wrote::Every, run_ts, sink)?;
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
    if whole {
        // The marker keeps naming the later night.
        marker.record(fs, &options.date, held.as_deref())?;
    }
    let loaded = Loaded {
        written,
        base: FeedBase {
            date: plan.base_date().map(String::from),
            wrote,
        },
    };
    Ok((stats, loaded))
}

/// The cells the nights after the base bring, as far as the inputs tell before the fan-out:
/// their follows times `k`, and each of their posts times its author's fans.
fn added_cells(fs: &FileSystems, plan: &Plan, k: u64) -> Result<u64> {
    let mut cells = parquet_io::parquet_rows(fs, super::new_files(plan.follows()))? * k;
    let mut posts: FxHashMap<i64, (u64, u64)> = FxHashMap::default();
    for f in super::new_files(plan.posts()) {
        parquet_io::read_parquet_columns(fs, f, &["uid"], &mut |b| {
            let uid = columns::opt_ids(b, "uid");
            for i in 0..b.num_rows() {
                if let Some(author) = columns::opt(uid, i) {
                    posts.entry(author).or_default().0 += 1;
                }
            }
            Ok(())
        })?;
    }
    for (f, _) in plan.follows() {
        parquet_io::read_parquet_columns(fs, f, &["followee"], &mut |b| {
            let followee = columns::ids(f, b, "followee")?;
            for a in followee.values() {
                if let Some((_, fans)) = posts.get_mut(a) {
                    *fans += 1;
                }
            }
            Ok(())
        })?;
    }
    cells += posts.values().map(|(p, fans)| p * fans).sum::<u64>();
    Ok(cells)
}

/// Writes the cells of one author's fan-out: `every` one, or those the base's feeds do not
/// hold. Post by post, so the writers batch each version's cells together.
fn write_author(
    built: &Built,
    a: &super::Author,
    every: bool,
    run_ts: i64,
    sink: &mut write::TimedPutSink<'_>,
) -> Result<()> {
    if a.celebrity {
        if !every && !built.celebrity_changed(a) {
            return Ok(());
        }
        let column = layout::inbox_column(CELEBRITY_FAMILY, a.uid);
        let fans = (a.fans.len() as i64).to_be_bytes();
        for f in built.fans(a) {
            let put = Put {
                key: keys::user_key(f),
                cells: vec![(column.clone(), fans.to_vec())],
                deletes: Vec::new(),
            };
            sink(Table::Inbox, put, run_ts)?;
        }
        return Ok(());
    }
    let column = layout::inbox_column(INBOX_FAMILY, a.uid);
    built.for_each_entry(a, every, &mut |(created, mid, version), f| {
        let put = Put {
            key: keys::user_key(f),
            cells: vec![(column.clone(), keys::post_key(a.uid, created, mid))],
            deletes: Vec::new(),
        };
        sink(Table::Inbox, put, version)
    })
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

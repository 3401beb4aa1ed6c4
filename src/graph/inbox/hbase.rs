//! The inbox into HBase (`inbox --load`): each fanned-out post as one cell version per fan
//! (the version is the post's time), and for each celebrity one marker cell per fan that
//! `query feed` follows to the celebrity's timeline at read time. docs/hbase-layout.md.
//!
//! Invariant: the `inbox` table keeps exactly K versions of its feed family; a table made for
//! another K is refused, since HBase would silently cut or pad the feeds.

use crate::dataset::partition;
use crate::error::{Error, Result};
use crate::hbase::admin::{Admin, Compression};
use crate::hbase::layout::{self, keys, Table, CELEBRITY_FAMILY, INBOX_FAMILY};
use crate::hbase::write::{self, Route, WriteOptions, WriteReport};
use crate::hbase::{Connection, Put};
use crate::hdfs::{FileSystems, Location};

use super::{InboxOptions, InboxStats};
use crate::dataset::parquet_io;

/// Builds the inbox of `options` (as [`super::run`] does) and writes its cells into the
/// `inbox` table of `hbase.namespace`, created with K versions when missing.
pub fn run(
    fs: &FileSystems,
    clean: &Location,
    output: &Location,
    options: &InboxOptions,
    hbase: &WriteOptions,
) -> Result<(InboxStats, WriteReport)> {
    ensure_inbox_table(hbase, options.k as u32)?;
    let hbase = &WriteOptions {
        tables: vec![Table::Inbox],
        ..hbase.clone()
    };
    // --via auto weighs the follow rows: each becomes up to K cells.
    let follow_rows = || -> Result<u64> {
        let follows = partition::history(fs, clean, "follows", &options.date)?;
        parquet_io::parquet_rows(fs, &follows)
    };
    let route = Route {
        fs,
        root: output.clone(),
        rows: &follow_rows,
    };
    let run_ts = write::cell_timestamp(&options.date)?;
    let mut stats = None;
    let written = write::write_routed_with(&route, hbase, &mut |sink| {
        let s = super::run(fs, clean, output, options, &mut |built| {
            for a in &built.authors {
                if a.celebrity {
                    let column = layout::inbox_column(CELEBRITY_FAMILY, a.uid);
                    let fans = (a.fans.len() as i64).to_be_bytes();
                    for f in built.fans(a) {
                        let put = Put {
                            key: keys::user_key(f),
                            cells: vec![(column.clone(), fans.to_vec())],
                        };
                        sink(Table::Inbox, put, run_ts)?;
                    }
                    continue;
                }
                // Post by post, so the writers batch each version's cells together.
                let column = layout::inbox_column(INBOX_FAMILY, a.uid);
                for &(created, mid, version) in built.posts(a) {
                    let post = keys::post_key(a.uid, created, mid);
                    for f in built.fans(a) {
                        let put = Put {
                            key: keys::user_key(f),
                            cells: vec![(column.clone(), post.clone())],
                        };
                        sink(Table::Inbox, put, version)?;
                    }
                }
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
    Ok((stats, written))
}

/// Creates the inbox table with `VERSIONS = k` on its feed family, or checks that the one
/// there has it.
fn ensure_inbox_table(hbase: &WriteOptions, k: u32) -> Result<()> {
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
        return Ok(());
    }
    let table = Table::Inbox.in_namespace(ns);
    let mut conn = Connection::connect(&hbase.thrift, hbase.timeouts)?;
    let versions = conn.family_versions(&table)?;
    match versions.get(INBOX_FAMILY) {
        Some(&v) if v == k as i32 => Ok(()),
        found => Err(Error::Usage(format!(
            "{table} keeps {} versions of {INBOX_FAMILY}, not --k {k}: drop it first \
             (weibo-etl tables drop) to change K",
            found.map_or("no".to_string(), |v| v.to_string())
        ))),
    }
}

//! Which route a write takes (`--via thrift|hfile|auto`), and what the HFile route needs
//! before the first put: an empty staging folder on HDFS and the tables' current regions.
//! `--via auto` weighs the night's size against `--auto-threshold`, and says why it chose.

use std::sync::Mutex;

use super::writers::BulkTarget;
use super::{bulk, AutoChoice, Via, WriteOptions};
use crate::error::{Error, Result};
use crate::hbase::Connection;
use crate::hdfs::{FileSystems, Location};

/// Where `--via hfile` stages its files: `--staging`, or `<input>/_hfiles`.
pub fn staging_base(fs: &FileSystems, root: &Location, options: &WriteOptions) -> Result<Location> {
    match &options.staging {
        Some(url) => fs.parse(url),
        None => Ok(root.join("_hfiles")),
    }
}

/// `--via auto` for `input_rows`: the bulk load from `auto_threshold` rows, when its
/// staging folder (under `root`, or `--staging`) is on HDFS, since the region servers move
/// the files in.
pub fn choose(
    fs: &FileSystems,
    root: &Location,
    options: &WriteOptions,
    input_rows: u64,
) -> Result<AutoChoice> {
    let base = staging_base(fs, root, options)?;
    let threshold = options.auto_threshold;
    let (chose, because) = if input_rows < threshold {
        (
            Via::Thrift,
            format!("{input_rows} rows, below {threshold}: through Thrift"),
        )
    } else if !base.is_hdfs() {
        (
            Via::Thrift,
            format!("{input_rows} rows, but {base} is not on HDFS for the HFiles: through Thrift"),
        )
    } else {
        (
            Via::Hfile,
            format!("{input_rows} rows, at least {threshold}: as HFiles"),
        )
    };
    log::info!("--via auto: {because}");
    Ok(AutoChoice {
        input_rows,
        threshold,
        chose,
        because,
    })
}

/// Prepares `--via hfile`: an empty staging folder (a failed run's files must never be
/// handed over), the tables' current region boundaries, and a scratch folder.
pub fn bulk_target<'a>(
    fs: &'a FileSystems,
    root: &Location,
    options: &WriteOptions,
    ts: i64,
) -> Result<BulkTarget<'a>> {
    let base = staging_base(fs, root, options)?;
    if !base.is_hdfs() {
        return Err(Error::Usage(format!(
            "--via hfile stages HFiles on the cluster's HDFS, and {base} is not on HDFS: \
             pass --staging hdfs://…"
        )));
    }
    let staging = bulk::staging_root(&base, &options.date, &options.namespace);
    // Slices stage (and hand over) apart: each empties only its own folder.
    let staging = match options.slice {
        Some(s) => staging.join(&s.folder()),
        None => staging,
    };
    fs.delete(&staging)?;
    let mut conn = Connection::connect(&options.thrift, options.timeouts)?;
    let mut boundaries = bulk::Boundaries::default();
    for t in &options.tables {
        let regions = conn.regions(&t.in_namespace(&options.namespace))?;
        let mut starts: Vec<Vec<u8>> = regions.into_iter().map(|r| r.start_key).collect();
        starts.sort();
        boundaries.0.insert(*t, starts);
    }
    Ok(BulkTarget {
        fs,
        staging,
        boundaries,
        spill: crate::spill::SpillDir::create(None, "weibo-etl-load-")?,
        hfile: crate::hbase::hfile::WriterOptions {
            created_ms: chrono::Utc::now().timestamp_millis(),
            source_task: format!("weibo-etl load dt={} ts={ts}", options.date),
            codec: options.hfile_compression.codec(),
            ..Default::default()
        },
        staged: Mutex::new(Vec::new()),
    })
}

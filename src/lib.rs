//! weibo-etl: batch ETL for a Weibo social graph kept in Hadoop.
//!
//! Raw crawled data on HDFS is cleaned into Parquet, keyed and counted, bulk-loaded into
//! HBase through its Thrift gateway, and analysed as a graph. This crate is the library the
//! `weibo-etl` binary's jobs are built from; each module owns one concern.
//!
//! The stages, in pipeline order:
//! - [`raw`]: readers for raw crawled files (formats, compression, encodings), on top of the
//!   shared mapping types in `raw::mapping`;
//! - [`clean`]: the cleaning rules and the `clean` job;
//! - [`load`]: cleaned Parquet into pre-split HBase tables, counters, resumable;
//! - [`graph`]: batch graph analytics, one folder per job (friends, rank, inbox, cascades),
//!   each with its HBase output beside it;
//! - [`verify`]: sampled read-back of the loaded tables, with latencies;
//! - [`nightly`]: the nightly runner's job file, its lock and its stages, for `weibo-etl run`;
//! - [`yarn`]: a job's slices as the map tasks of a YARN job (Hadoop Streaming), and the job
//!   commit that promotes them.
//!
//! The contracts and mechanisms they share, which depend on no stage:
//! - [`dataset`]: the cleaned tables (entities, reject codes, schemas, the follows pair
//!   layout, the friends tables) and the `dt=` partitions' commit protocol;
//! - [`field_rules`]: the field-cleaning rules readers and the cleaner share (ids, counts,
//!   times, text);
//! - [`stage`]: the jobs of a night as one type, shared by `run`, `yarn submit` and reports;
//! - [`hash`]: the one stable hash; [`spill`]: local scratch files;
//! - [`hdfs`]: files by URL (HDFS or local), listing, globbing, streaming, atomic writes;
//! - [`hbase`]: the HBase room: Thrift1 data calls and Thrift2 admin, the table contract
//!   ([`hbase::layout`]: every table, rowkey and cell any job writes or reads) and the one
//!   way in ([`hbase::write`]: routing, Thrift writers, HFiles and their hand-over);
//! - [`report`] and [`progress`]: what a run tells its operator;
//! - [`error`]: the error type and the exit codes cron sees.
//!
//! [`dev`] holds the tooling no job depends on: the local cluster and the data generator.

pub mod clean;
pub mod dataset;
pub mod dev;
pub mod error;
pub mod field_rules;
pub mod graph;
pub mod hash;
pub mod hbase;
pub mod hdfs;
pub mod load;
pub mod nightly;
pub mod progress;
pub mod raw;
pub mod report;
pub mod spill;
pub mod stage;
pub mod verify;
pub mod yarn;

pub use error::{Error, Result};

#[cfg(test)]
mod house {
    //! The architecture, held against the code: which top-level modules each module's files
    //! may name (`crate::<module>`). Stages depend on the contracts, not on each other, and
    //! no core module depends on the dev tooling.

    use std::collections::BTreeSet;
    use std::path::Path;

    /// The top-level modules a file under `module` names.
    fn named(module: &str) -> BTreeSet<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![root.join(format!("{module}.rs"))];
        let mut dirs = vec![root.join(module)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|x| x == "rs") {
                    files.push(path);
                }
            }
        }
        let mut found = BTreeSet::new();
        for file in files.iter().filter(|f| f.exists()) {
            let text = std::fs::read_to_string(file).unwrap();
            for (at, _) in text.match_indices("crate::") {
                let name: String = text[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // `crate::hbase::layout` is the HBase layout contract, not the load job.
                let layout = name == "load" && text[at..].starts_with("crate::hbase::layout");
                if name != module && !layout {
                    found.insert(name);
                }
            }
        }
        found
    }

    #[test]
    fn stages_depend_on_contracts_and_nothing_on_dev() {
        let stages = ["raw", "clean", "load", "graph", "verify", "nightly", "yarn"];
        let shared = [
            "dataset",
            "field_rules",
            "stage",
            "hash",
            "spill",
            "hdfs",
            "hbase",
            "report",
            "progress",
            "error",
        ];
        // What each may name besides the shared contracts and mechanisms.
        let allowed: &[(&str, &[&str])] = &[
            ("raw", &[]),
            ("clean", &["raw"]),
            ("load", &[]),
            ("graph", &[]),
            ("verify", &[]),
            ("nightly", &[]),
            ("yarn", &[]),
        ];
        for (module, extra) in allowed {
            for name in named(module) {
                assert!(
                    shared.contains(&name.as_str()) || extra.contains(&name.as_str()),
                    "{module} names crate::{name}"
                );
            }
        }
        for module in shared {
            for name in named(module) {
                assert!(
                    shared.contains(&name.as_str()) && !stages.contains(&name.as_str()),
                    "{module} (shared) names crate::{name}"
                );
            }
        }
    }
}

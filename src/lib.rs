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
//! - [`query`]: point reads of the loaded tables, as JSON, with each call's latency;
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
pub mod query;
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
            // The home feed is the inbox's read path.
            ("query", &["graph"]),
            ("nightly", &[]),
            // YARN runs the jobs: it names their entry points and their merges.
            ("yarn", &["clean", "load", "graph"]),
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

    /// `cmd/` turns arguments into options, calls one library function and prints: of each
    /// stage it may name only the entry points, and of HBase only the table contract and the
    /// write options, never the writers' machinery.
    #[test]
    fn cmd_names_only_entry_points_and_contracts() {
        let entries: &[(&str, &[&str])] = &[
            ("raw", &["Format"]),
            ("clean", &["job", "shuffle", "inspect"]),
            ("load", &["run", "check_state", "LoadOptions", "LoadReport"]),
            ("graph", &["friends", "rank", "inbox", "cascades"]),
            ("verify", &[]),
            ("query", &[]),
            ("nightly", &["job", "run"]),
            ("yarn", &["jobs", "submit", "task", "TaskSpec"]),
        ];
        let internals = ["writers", "bulk", "route", "emission"];
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cmd");
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let file = entry.path();
            let text = std::fs::read_to_string(&file).unwrap();
            for (at, _) in text.match_indices("weibo_etl::") {
                let path: Vec<&str> = text[at + 11..]
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                    .next()
                    .unwrap_or_default()
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .collect();
                let shown = format!("{}: weibo_etl::{}", file.display(), path.join("::"));
                if let Some((_, allowed)) = entries.iter().find(|(m, _)| Some(m) == path.first()) {
                    assert!(
                        path.get(1).is_none_or(|item| allowed.contains(item)),
                        "{shown} is not an entry point"
                    );
                }
                if path.first() == Some(&"hbase") && path.get(1) == Some(&"write") {
                    assert!(
                        path.get(2).is_none_or(|item| !internals.contains(item)),
                        "{shown}: the writers' machinery is the library's"
                    );
                }
            }
        }
    }
}

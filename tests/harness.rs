//! Shared test plumbing: running the binary, golden files, and the local cluster.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The night every sample test cleans.
pub const SAMPLE_DATE: &str = "2026-11-29";

/// The bundled raw sample (`sample_data/`): every format, and dirty rows on purpose.
pub fn sample_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sample_data")
}

/// The mapping file of the sample's fork (a layout we do not ship).
pub fn sample_mapping() -> PathBuf {
    sample_dir().join("crawlers/fork-mapped/_mapping.toml")
}

/// The shared fixture of the tests that start from cleaned data: the whole sample cleaned
/// into `clean` for [`SAMPLE_DATE`] (its dirty rows on purpose: a reject budget of one half),
/// its fork read through [`sample_mapping`].
pub fn clean_sample(clean: &Path) {
    let out = run(bin()
        .args(["-q", "clean", "--mapping"])
        .arg(sample_mapping())
        .arg("--input")
        .arg(sample_dir())
        .arg("--output")
        .arg(clean)
        .args(["--date", SAMPLE_DATE, "--max-reject-ratio", "0.5"]));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The built `weibo-etl` binary.
pub fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weibo-etl"));
    // Tests must not pick up an operator's environment.
    for var in [
        "WEIBO_ETL_HDFS",
        "WEIBO_ETL_HBASE",
        "WEIBO_ETL_HBASE_ADMIN",
        "WEIBO_ETL_NAMESPACE",
        "HADOOP_CONF_DIR",
        "WEIBO_ETL_LOG",
        "WEIBO_ETL_ROOT",
        "WEIBO_ETL_RAW",
        "WEIBO_ETL_CLEAN",
        "WEIBO_ETL_GRAPH",
        "WEIBO_ETL_BULKLOAD_CMD",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run weibo-etl")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
}

/// Compares `actual` with `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites the file instead.
pub fn assert_golden(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create)",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "{} differs from the output (run with UPDATE_GOLDEN=1 to accept):\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }
}

#[cfg(feature = "integration")]
pub mod cluster {
    use std::sync::OnceLock;

    use weibo_etl::dev::cluster::{self, ClusterPaths, UpOptions};

    pub const HDFS: &str = "hdfs://127.0.0.1:9000";
    pub const THRIFT: &str = "127.0.0.1:9090";
    pub const THRIFT2: &str = "127.0.0.1:9091";

    static UP: OnceLock<Result<(), String>> = OnceLock::new();

    /// Makes sure the local cluster runs. A cluster this process starts watches this
    /// process's pid and stops when the test binary exits; one found running is left alone.
    pub fn ensure() {
        let result = UP.get_or_init(|| {
            let options = UpOptions {
                watch_pid: Some(std::process::id()),
                ..UpOptions::default()
            };
            match cluster::up(&ClusterPaths::discover(), &options) {
                Ok(outcome) => {
                    eprintln!(
                        "local cluster: {}",
                        if outcome.already_running {
                            "reusing the running one".to_string()
                        } else {
                            format!("started in {:.1}s", outcome.seconds)
                        }
                    );
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        });
        if let Err(e) = result {
            panic!("the local cluster is not available: {e}");
        }
    }

    static YARN: OnceLock<Result<String, String>> = OnceLock::new();

    /// [`ensure`], and the cluster's YARN too (`cluster up --yarn`), started once per run.
    pub fn ensure_yarn() {
        ensure();
        let result = YARN.get_or_init(|| cluster::start_yarn().map_err(|e| e.to_string()));
        if let Err(e) = result {
            panic!("the local cluster's YARN is not available: {e}");
        }
    }

    /// A namespace of its own for one test, so tests never share tables.
    pub fn namespace(test: &str) -> String {
        format!("it_{test}_{}", std::process::id())
    }

    /// Every table a night writes: `load`'s and `friends --load`'s.
    pub fn every_table() -> Vec<&'static str> {
        use weibo_etl::hbase::layout::Table;
        Table::ALL
            .iter()
            .chain([&Table::Friend])
            .map(|t| t.name())
            .collect()
    }

    /// Where a test's `--via hfile` stages its HFiles: its namespace's folder on HDFS.
    pub fn staging(ns: &str) -> String {
        format!("{HDFS}/it/{ns}/staging")
    }

    /// The local cluster's hand-over command, for `--bulkload-cmd`.
    pub fn local_handover() -> String {
        format!("{} cluster bulkload", env!("CARGO_BIN_EXE_weibo-etl"))
    }

    /// `--via hfile` staging under [`staging`], handed over by [`local_handover`].
    pub fn bulk_route(ns: &str) -> Vec<String> {
        let (staging, handover) = (staging(ns), local_handover());
        [
            "--via",
            "hfile",
            "--staging",
            &staging,
            "--bulkload-cmd",
            &handover,
        ]
        .map(String::from)
        .to_vec()
    }

    /// A test's namespace whose tables are dropped when it goes out of scope (a failed test
    /// included), so a long suite does not fill the one JVM's heap with regions.
    pub struct Scratch(pub String);

    impl Scratch {
        pub fn new(test: &str) -> Scratch {
            Scratch(namespace(test))
        }
    }

    impl std::fmt::Display for Scratch {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::ops::Deref for Scratch {
        type Target = str;
        fn deref(&self) -> &str {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let timeouts = weibo_etl::hbase::Timeouts::default();
            let Ok(mut admin) = weibo_etl::hbase::admin::Admin::connect(THRIFT2, timeouts) else {
                return;
            };
            // `rank` and `inbox` too, written by their jobs.
            for table in every_table().into_iter().chain(["rank", "inbox"]) {
                let _ = admin.drop_table(&self.0, table);
            }
        }
    }
}

/// The feeds as of a night from the `inbox` partitions up to it, as docs/design/inbox.md
/// ("Reading the Parquet") tells a reader to take them: `partitions` are each night's rows
/// (JSON lines), oldest first; an entry `(uid, followee, mid)` keeps its newest night's
/// row; followees among `celebrities` (every `inbox_celebrities` uid up to the night) are
/// left out; each `(uid, followee)` keeps its newest `k` posts. Rows sorted.
pub fn feeds_as_of(partitions: &[Vec<String>], celebrities: &[i64], k: usize) -> Vec<String> {
    use std::collections::BTreeMap;
    let field = |v: &serde_json::Value, f: &str| v[f].as_i64().unwrap();
    let mut entries: BTreeMap<(i64, i64, i64), (String, String)> = BTreeMap::new();
    for rows in partitions {
        for line in rows {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let key = (field(&v, "uid"), field(&v, "followee"), field(&v, "mid"));
            let created = v["created_at"].as_str().unwrap().to_string();
            entries.insert(key, (created, line.clone()));
        }
    }
    type Posts = Vec<(i64, i64, String)>;
    let mut edges: BTreeMap<(i64, i64), Posts> = BTreeMap::new();
    for ((uid, followee, mid), (created, line)) in entries {
        if celebrities.contains(&followee) {
            continue;
        }
        let at = chrono::DateTime::parse_from_rfc3339(&created)
            .unwrap()
            .timestamp_millis();
        edges
            .entry((uid, followee))
            .or_default()
            .push((at, mid, line));
    }
    let mut feeds = Vec::new();
    for (_, mut posts) in edges {
        posts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        feeds.extend(posts.into_iter().take(k).map(|p| p.2));
    }
    feeds.sort();
    feeds
}

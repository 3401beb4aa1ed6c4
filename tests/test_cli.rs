//! The CLI surface: `--help` golden files and the documented exit codes for unreachable
//! services. None of this needs the cluster: the addresses used refuse connections.

use crate::harness::{assert_golden, bin, run, stderr};

#[test]
fn help_matches_golden() {
    for (args, golden) in [
        (vec!["--help"], "help.txt"),
        (vec!["cascades", "--help"], "help-cascades.txt"),
        (vec!["clean", "--help"], "help-clean.txt"),
        (vec!["cluster", "--help"], "help-cluster.txt"),
        (vec!["friends", "--help"], "help-friends.txt"),
        (vec!["fs", "--help"], "help-fs.txt"),
        (vec!["gen", "--help"], "help-gen.txt"),
        (vec!["history", "--help"], "help-history.txt"),
        (vec!["inbox", "--help"], "help-inbox.txt"),
        (vec!["load", "--help"], "help-load.txt"),
        (vec!["query", "--help"], "help-query.txt"),
        (vec!["rank", "--help"], "help-rank.txt"),
        (vec!["query", "rank", "--help"], "help-query-rank.txt"),
        (vec!["query", "feed", "--help"], "help-query-feed.txt"),
        (vec!["verify", "--help"], "help-verify.txt"),
        (vec!["tables", "--help"], "help-tables.txt"),
        (vec!["demo", "--help"], "help-demo.txt"),
        (vec!["run", "--help"], "help-run.txt"),
        (vec!["yarn", "--help"], "help-yarn.txt"),
        (vec!["yarn", "submit", "--help"], "help-yarn-submit.txt"),
    ] {
        let out = run(bin().args(&args).env("COLUMNS", "100"));
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.contains(env!("CARGO_MANIFEST_DIR")),
            "{golden}: help must not depend on where the checkout lives"
        );
        assert_golden(golden, &text);
    }
}

#[test]
fn bad_usage_exits_2() {
    let out = run(bin().args(["fs", "frobnicate"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run(bin().args(["fs", "ls", "s3://bucket/x"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unsupported scheme"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unreachable_hbase_exits_5_with_one_line_naming_the_address() {
    let out = run(bin().args(["--hbase", "127.0.0.1:1", "tables", "list"]));
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("127.0.0.1:1"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let out = run(bin().args([
        "--hbase-admin",
        "127.0.0.1:1",
        "tables",
        "create",
        "t",
        "--family",
        "f",
    ]));
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("127.0.0.1:1"), "{}", stderr(&out));
}

#[test]
fn unreachable_hdfs_exits_4_with_one_line_naming_the_url() {
    let out = run(bin().args(["--hdfs", "hdfs://127.0.0.1:1", "fs", "ls", "hdfs:///weibo"]));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("hdfs://127.0.0.1:1"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn default_fs_comes_from_hadoop_conf_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("core-site.xml"),
        "<configuration><property><name>fs.defaultFS</name>\
         <value>hdfs://127.0.0.1:2</value></property></configuration>",
    )
    .unwrap();
    let out = run(bin()
        .env("HADOOP_CONF_DIR", dir.path())
        .args(["fs", "ls", "hdfs:///x"]));
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("hdfs://127.0.0.1:2"),
        "{}",
        stderr(&out)
    );
}

//! `gen tiny` → `clean` → `load` → `friends` against the generator's ground truth
//! (`_truth.json`): counts per entity, friend pairs, and every counter of the sampled users as
//! HBase serves them.

use std::collections::BTreeMap;
use std::fs;

use serde_json::Value;

use crate::harness::{bin, run, stderr};
use crate::test_clean::parquet_rows;

fn json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn go(args: &[&str]) {
    let r = run(bin().arg("-q").args(args));
    assert!(r.status.success(), "{args:?}: {}", stderr(&r));
}

/// Every format `gen --formats` writes.
const ALL_FORMATS: &str = "canonical,nghuyong,mediacrawler,weibo-crawler,weibospider,aminer";

/// `gen tiny` (with dirt) in `formats` and `clean`, checked against the truth; returns the
/// folder, the cleaned output and the truth.
fn gen_and_clean(formats: &str) -> (tempfile::TempDir, std::path::PathBuf, Value) {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let out = dir.path().join("out");
    go(&[
        "gen",
        "--out",
        raw.to_str().unwrap(),
        "--preset",
        "tiny",
        "--noise",
        "0.05",
        "--seed",
        "3",
        // Several parts per entity, so the formats' files and AMiner's per-part id lists are
        // exercised more than once.
        "--part-rows",
        "300",
        "--formats",
        formats,
    ]);
    let truth = json(&raw.join("_truth.json"));
    // Every requested format got records of every entity it can carry (no vacuous pass).
    let written = &truth["formats"];
    for format in formats.split(',') {
        let entities: Vec<&str> = written
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, by)| by[format].as_u64().unwrap_or(0) > 0)
            .map(|(e, _)| e.as_str())
            .collect();
        let expected: &[&str] = match format {
            "canonical" => &["comments", "follows", "posts", "reposts", "users"],
            "nghuyong" => &["comments", "follows", "posts", "users"],
            "mediacrawler" => &["comments", "posts", "users"],
            "weibo-crawler" => &["comments", "posts", "users"],
            "weibospider" => &["posts"],
            "aminer" => &["follows"],
            other => panic!("unknown format {other}"),
        };
        assert_eq!(entities, expected, "entities written as {format}");
    }
    let report_path = dir.path().join("clean.json");
    go(&[
        "clean",
        "--input",
        raw.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--date",
        "2026-11-29",
        "--report",
        report_path.to_str().unwrap(),
    ]);
    let clean = json(&report_path)["clean"].clone();
    for (entity, t) in truth["entities"].as_object().unwrap() {
        let got = &clean["entities"][entity];
        for key in ["records_in", "records_out", "duplicates"] {
            assert_eq!(got[key], t[key], "{entity} {key}");
        }
        assert_eq!(got["rejected_by_reason"], t["rejected"], "{entity} rejects");
    }
    assert_eq!(clean["unattributed"]["records_in"], 0);
    // The crawler files were read as what they are, not as canonical look-alikes.
    let read_as: std::collections::BTreeSet<&str> = clean["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["format"].as_str().unwrap())
        .collect();
    let expected_reads: &[&str] = if formats == ALL_FORMATS {
        &[
            "aminer-network",
            "aminer-uidlist",
            "canonical-csv",
            "canonical-jsonl",
            "mediacrawler-jsonl",
            "nghuyong-jsonl",
            "weibo-crawler-comments",
            "weibo-crawler-posts",
            "weibo-crawler-users",
            "weibospider-posts",
        ]
    } else {
        &["canonical-csv", "canonical-jsonl"]
    };
    assert_eq!(read_as.into_iter().collect::<Vec<_>>(), expected_reads);
    (dir, out, truth)
}

#[test]
fn generated_data_cleans_and_pairs_exactly_as_its_truth_says() {
    for formats in ["canonical", ALL_FORMATS] {
        cleans_and_pairs_as_the_truth_says(formats);
    }
}

fn cleans_and_pairs_as_the_truth_says(formats: &str) {
    let (_dir, out, truth) = gen_and_clean(formats);
    go(&[
        "friends",
        "--input",
        out.join("follows").to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--date",
        "2026-11-29",
    ]);
    let pairs = parquet_rows(&out.join("friends/dt=2026-11-29"))
        .lines()
        .count() as u64;
    assert_eq!(pairs, truth["friend_pairs"].as_u64().unwrap());
    let counts: BTreeMap<i64, u64> = parquet_rows(&out.join("friend_counts/dt=2026-11-29"))
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["uid"].as_i64().unwrap(), v["friends"].as_u64().unwrap())
        })
        .collect();
    for user in truth["sampled_users"].as_array().unwrap() {
        let uid = user["uid"].as_i64().unwrap();
        assert_eq!(
            counts.get(&uid).copied().unwrap_or(0),
            user["friends"].as_u64().unwrap(),
            "friends of {uid}"
        );
    }
}

/// The whole chain on the local cluster, from raw files in every crawler format: every
/// counter of the truth's sampled users and top users, read back through `query`, is the
/// truth's.
#[cfg(feature = "integration")]
#[test]
fn generated_data_loads_into_hbase_with_the_truths_counters() {
    use crate::harness::{cluster, stdout};
    cluster::ensure();
    let (_dir, out, truth) = gen_and_clean(ALL_FORMATS);
    let ns = cluster::namespace("pipeline");
    let out_s = out.to_str().unwrap();
    let follows = out.join("follows");
    go(&[
        "--namespace",
        &ns,
        "load",
        "--input",
        out_s,
        "--date",
        "2026-11-29",
        "--regions",
        "4",
    ]);
    go(&[
        "--namespace",
        &ns,
        "friends",
        "--input",
        follows.to_str().unwrap(),
        "--output",
        out_s,
        "--date",
        "2026-11-29",
        "--load",
        "--regions",
        "4",
    ]);
    let counters = |uid: i64| -> Value {
        let r = run(bin().args(["--namespace", &ns, "query", "user", &uid.to_string()]));
        assert!(r.status.success(), "{}", stderr(&r));
        let v: Value = serde_json::from_str(&stdout(&r)).unwrap();
        v["result"]["cells"].clone()
    };
    let count = |cells: &Value, name: &str| cells[format!("count:{name}")].as_u64().unwrap_or(0);
    let sampled = truth["sampled_users"].as_array().unwrap();
    assert!(sampled.len() >= 3);
    for user in sampled {
        let uid = user["uid"].as_i64().unwrap();
        let cells = counters(uid);
        for (ours, theirs) in [
            ("followers", "followers"),
            ("following", "following"),
            ("posts", "posts"),
            ("friends", "friends"),
            ("reposts_received", "reposts_received"),
            ("comments_received", "comments_received"),
        ] {
            assert_eq!(
                count(&cells, ours),
                user[theirs].as_u64().unwrap(),
                "{ours} of {uid}"
            );
        }
    }
    // The top ten users of every counter, as HBase serves them.
    for metric in [
        "followers",
        "following",
        "posts",
        "friends",
        "reposts_received",
        "comments_received",
    ] {
        let list = truth[format!("top_by_{metric}")].as_array().unwrap();
        assert_eq!(list.len(), 10, "top_by_{metric}");
        for top in list {
            let (uid, n) = (top[0].as_i64().unwrap(), top[1].as_u64().unwrap());
            assert_eq!(count(&counters(uid), metric), n, "{metric} of {uid}");
        }
    }
}

#[test]
fn gen_is_deterministic_for_a_seed() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b"] {
        let out = dir.path().join(name);
        let r = run(bin()
            .args([
                "-q",
                "gen",
                "--preset",
                "tiny",
                "--seed",
                "9",
                "--part-rows",
                "300",
            ])
            .args(["--formats", ALL_FORMATS, "--out"])
            .arg(&out));
        assert!(r.status.success(), "{}", stderr(&r));
    }
    let a = crate::test_clean::tree(&dir.path().join("a"));
    let b = crate::test_clean::tree(&dir.path().join("b"));
    assert!(a == b, "same seed, different bytes");
    assert!(a.len() >= 30, "{} files", a.len());
}

//! `rank`: the boards of a generated history against DuckDB's window query over the same
//! Parquet, the boards of `sample_data/` against a golden file, and (with the local cluster)
//! the `rank` table read back by `query rank`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::harness::{assert_golden, bin, run, stderr};
use crate::test_clean::{parquet_rows, sample_dir, DATE};

/// One row of a board: metric, rank, id, value.
type Row = (String, i64, i64, i64);

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

fn clean(inputs: &[PathBuf], clean: &Path, date: &str) {
    let mut cmd = bin();
    cmd.args(["-q", "clean"]);
    for input in inputs {
        cmd.arg("--input").arg(input);
    }
    ok(run(cmd.arg("--output").arg(clean).args(["--date", date])));
}

/// friends over every follows night of `clean` up to `date`, as `run` calls it.
fn friends(clean: &Path, graph: &Path, date: &str) {
    let mut cmd = bin();
    cmd.args(["-q", "friends"]);
    let mut nights: Vec<PathBuf> = std::fs::read_dir(clean.join("follows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("dt=") && name[3..] <= *date
        })
        .collect();
    nights.sort();
    for night in nights {
        cmd.arg("--input").arg(night);
    }
    ok(run(cmd.arg("--output").arg(graph).args(["--date", date])));
}

fn rank(clean: &Path, graph: &Path, date: &str, extra: &[&str]) -> Output {
    run(bin()
        .args(["-q", "rank", "--input"])
        .arg(clean)
        .arg("--output")
        .arg(graph)
        .args(["--date", date])
        .args(extra))
}

/// Our boards, as written.
fn boards(graph: &Path, date: &str) -> Vec<Row> {
    let dir = graph.join("rank").join(format!("dt={date}"));
    assert!(
        dir.join("_SUCCESS").exists(),
        "{} is not committed",
        dir.display()
    );
    parquet_rows(&dir)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            (
                v["metric"].as_str().unwrap().to_string(),
                v["rank"].as_i64().unwrap(),
                v["id"].as_i64().unwrap(),
                v["value"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// DuckDB's boards over the same Parquet (tests/reference/duckdb_rank.py).
fn duckdb_boards(clean: &Path, graph: &Path, date: &str, top: usize, scratch: &Path) -> Vec<Row> {
    let peer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/duckdb_rank.py");
    let csv = scratch.join(format!("duck-{date}.csv"));
    let out = Command::new("python3")
        .arg(&peer)
        .arg(clean)
        .arg(graph)
        .arg(date)
        .arg(top.to_string())
        .arg(&csv)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "DuckDB peer failed (pip install duckdb): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect()
}

fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort();
    rows
}

fn metrics(rows: &[Row]) -> std::collections::BTreeSet<&str> {
    rows.iter().map(|r| r.0.as_str()).collect()
}

/// Three nights of generated crawls (each crawling some earlier records again, follows
/// without a time) and, on the first night, a generated data set whose follows have times
/// and whose posts span the nights: every board of every night equals DuckDB's, through one
/// partition and through many, with ties among small counts.
#[test]
fn every_board_equals_duckdbs_window_query_over_three_nights() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let extra = dir.path().join("extra");
    let nights = ["2026-11-27", "2026-11-28", "2026-11-29"];
    ok(run(bin()
        .args(["-q", "gen", "--out"])
        .arg(&raw)
        .args(["--nights", "3", "--date", nights[0]])));
    ok(run(bin().args(["-q", "gen", "--out"]).arg(&extra).args([
        "--users", "3000", "--days", "3", "--date", nights[2], "--seed", "5",
    ])));
    let (clean_root, graph) = (dir.path().join("clean"), dir.path().join("graph"));
    for (i, night) in nights.iter().enumerate() {
        let mut inputs = vec![raw.join(format!("dt={night}"))];
        if i == 0 {
            inputs.push(extra.clone());
        }
        clean(&inputs, &clean_root, night);
        friends(&clean_root, &graph, night);
    }
    let top = 25;
    for night in nights {
        ok(rank(
            &clean_root,
            &graph,
            night,
            &["--top", &top.to_string()],
        ));
        let ours = boards(&graph, night);
        let duck = duckdb_boards(&clean_root, &graph, night, top, dir.path());
        assert_eq!(
            metrics(&ours),
            [
                "comments_received",
                "followers",
                "friends",
                "new_fans",
                "posts",
                "reposts_received"
            ]
            .into(),
            "{night}: every metric has a board"
        );
        assert!(
            ours.iter().any(|r| r.1 == top as i64),
            "{night}: some board is full"
        );
        assert_eq!(sorted(ours.clone()), sorted(duck), "{night}");
        // Many small partitions give the same boards as the default's few.
        ok(rank(
            &clean_root,
            &graph,
            night,
            &["--top", &top.to_string(), "--memory-budget", "64KiB"],
        ));
        assert_eq!(boards(&graph, night), ours, "{night}, many partitions");
    }
}

/// The sample's boards, hand-checkable: one board per metric in the job's order.
#[test]
fn sample_boards_are_golden() {
    let dir = tempfile::tempdir().unwrap();
    let (clean_root, graph) = (dir.path().join("clean"), dir.path().join("graph"));
    clean(&[sample_dir().join("canonical")], &clean_root, DATE);
    friends(&clean_root, &graph, DATE);
    let out = ok(rank(&clean_root, &graph, DATE, &[]));
    let text: String = boards(&graph, DATE)
        .iter()
        .map(|(m, rank, id, value)| format!("{m} {rank} {id} {value}\n"))
        .collect();
    assert_golden("rank/sample.txt", &text);
    assert!(stderr(&out).contains("followers:"), "{}", stderr(&out));

    // A metric subset, and a missing friends output named as such.
    ok(rank(&clean_root, &graph, DATE, &["--metric", "posts"]));
    assert_eq!(metrics(&boards(&graph, DATE)), ["posts"].into());
    let missing = rank(
        &clean_root,
        &dir.path().join("nowhere"),
        DATE,
        &["--metric", "friends"],
    );
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("friend_counts/dt=2026-11-29"),
        "{}",
        stderr(&missing)
    );
    assert!(!dir.path().join("nowhere/rank").exists());
}

/// A comment whose post the crawl did not record (nghuyong's comment spider) counts towards
/// no one, and the report says how many there were.
#[test]
fn comments_without_a_post_count_towards_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let (clean_root, graph) = (dir.path().join("clean"), dir.path().join("graph"));
    // The spider's comments and the posts they may be on (its reposts alone would be over
    // the reject budget).
    let input = dir.path().join("nghuyong");
    std::fs::create_dir(&input).unwrap();
    for name in ["comment_20261129230000.jsonl", "tweet_20261129230000.jsonl"] {
        let from = sample_dir().join("crawlers/nghuyong").join(name);
        std::fs::copy(from, input.join(name)).unwrap();
    }
    clean(&[input], &clean_root, DATE);
    let report = dir.path().join("rank.json");
    let metric = ["--metric", "comments_received", "--report"];
    ok(rank(
        &clean_root,
        &graph,
        DATE,
        &[&metric[..], &[report.to_str().unwrap()]].concat(),
    ));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let stats = &r["rank"];
    assert_eq!(stats["comment_rows"], 2, "{r}");
    assert_eq!(stats["comments_without_post"], 1, "{r}");
    // The other comment is on a post the spider crawled: its author is ranked.
    assert_eq!(
        stats["users_ranked"],
        serde_json::json!([["comments_received", 1]]),
        "{r}"
    );
}

#[cfg(feature = "integration")]
mod cluster_tests {
    use super::*;
    use crate::harness::cluster;

    fn query(ns: &str, args: &[&str]) -> Output {
        run(bin().args(["--namespace", ns, "query", "rank"]).args(args))
    }

    /// `rank --load` writes every board; `query rank` reads each back as written, the
    /// newest day without `--date`, and exits 7 for a day without a board.
    #[test]
    fn loaded_boards_read_back_through_query_rank() {
        cluster::ensure();
        let dir = tempfile::tempdir().unwrap();
        let (clean_root, graph) = (dir.path().join("clean"), dir.path().join("graph"));
        clean(&[sample_dir().join("canonical")], &clean_root, DATE);
        friends(&clean_root, &graph, DATE);
        let ns = cluster::namespace("rank_load");
        ok(run(bin()
            .args(["-q", "--namespace", &ns, "rank", "--input"])
            .arg(&clean_root)
            .arg("--output")
            .arg(&graph)
            .args(["--date", DATE, "--load"])));
        let ours = boards(&graph, DATE);
        for metric in metrics(&ours) {
            let out = ok(query(&ns, &[metric, "--date", DATE, "--limit", "1000"]));
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            let read: Vec<Row> = v["result"]["board"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        metric.to_string(),
                        r["rank"].as_i64().unwrap(),
                        r["id"].as_i64().unwrap(),
                        r["value"].as_i64().unwrap(),
                    )
                })
                .collect();
            let want: Vec<Row> = ours.iter().filter(|r| r.0 == metric).cloned().collect();
            assert_eq!(read, want, "{metric}");
        }
        let newest = ok(query(&ns, &["followers", "--limit", "1"]));
        let v: Value = serde_json::from_slice(&newest.stdout).unwrap();
        assert_eq!(v["result"]["date"], DATE);
        assert_eq!(v["result"]["board"].as_array().unwrap().len(), 1);
        let none = query(&ns, &["followers", "--date", "2020-01-01"]);
        assert_eq!(none.status.code(), Some(7), "{}", stderr(&none));
        assert!(
            stderr(&none).contains("no followers board of 2020-01-01"),
            "{}",
            stderr(&none)
        );
    }
}

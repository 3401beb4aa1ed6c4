//! `cascades`: the repost trees of `sample_data/`, hand-checked (a `//@` chain three reposts
//! deep, a named parent never crawled, a root never crawled) and pinned by a golden file.

use std::path::Path;

use serde_json::Value;

use crate::harness::{assert_golden, bin, run, stderr};
use crate::test_clean::{parquet_rows, sample_dir, DATE};

fn rows(dir: &Path) -> Vec<Value> {
    assert!(
        dir.join("_SUCCESS").exists(),
        "{} is not committed",
        dir.display()
    );
    parquet_rows(dir)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn sample_cascades_are_hand_checked_and_golden() {
    let dir = tempfile::tempdir().unwrap();
    let (clean, graph) = (dir.path().join("clean"), dir.path().join("graph"));
    crate::harness::clean_sample(&clean);
    let report = dir.path().join("report.json");
    let out = run(bin()
        .args(["-q", "--report"])
        .arg(&report)
        .args(["cascades", "--input"])
        .arg(&clean)
        .arg("--output")
        .arg(&graph)
        .args(["--date", DATE]));
    assert!(out.status.success(), "{}", stderr(&out));

    let paths = rows(&graph.join(format!("repost_paths/dt={DATE}")));
    let by_mid = |mid: i64| {
        paths
            .iter()
            .find(|r| r["mid"] == mid)
            .unwrap_or_else(|| panic!("no path of {mid}"))
    };
    let (root, north, south, east, west) = (
        2100000001i64,
        2100000002i64,
        2100000003i64,
        2100000004i64,
        2100000005i64,
    );
    // 好美 reposts the root; 同感//@北风 hangs under it; 转发//@南山 under that: three deep.
    assert_eq!(by_mid(4974000000000101)["parent_mid"], 4974000000000100i64);
    assert_eq!(by_mid(4974000000000102)["parent_mid"], 4974000000000101i64);
    let deep = by_mid(4974000000000103);
    assert_eq!(deep["parent_mid"], 4974000000000102i64);
    assert_eq!(deep["depth"], 3);
    assert_eq!(deep["path"], serde_json::json!([east, south, north, root]));
    // 路人甲 was never crawled: the repost falls back to the root.
    let lost = by_mid(4974000000000104);
    assert_eq!(
        (lost["parent_mid"].as_i64(), lost["depth"].as_i64()),
        (Some(4974000000000100), Some(1))
    );
    assert_eq!(lost["path"], serde_json::json!([west, root]));
    // A repost of a root never crawled: the path stops at the repost.
    assert_eq!(by_mid(4974000000000105)["path"], serde_json::json!([south]));

    let cascades = rows(&graph.join(format!("cascades/dt={DATE}")));
    let snow = cascades
        .iter()
        .find(|c| c["root_mid"] == 4974000000000100i64)
        .unwrap();
    assert_eq!(
        (snow["size"].as_i64(), snow["depth"].as_i64()),
        (Some(4), Some(3))
    );
    assert_eq!(snow["root_uid"], root);
    let orphan = cascades
        .iter()
        .find(|c| c["root_mid"] == 4974000000000999i64)
        .unwrap();
    assert!(
        orphan.get("root_uid").is_none_or(Value::is_null),
        "{orphan}"
    );

    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let s = &r["cascades"];
    assert_eq!(s["reposts"], paths.len());
    assert_eq!(s["cascades"], cascades.len());
    assert!(s["parents_root_not_found"].as_u64().unwrap() >= 1, "{s}");
    assert!(s["parents_from_markers"].as_u64().unwrap() >= 2, "{s}");
    assert!(s["roots_not_crawled"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["top"][0]["root_mid"], 4974000000000100i64, "{s}");

    // In root order, each cascade's paths as placed: the same however many partitions.
    let (mut cascades, mut paths) = (cascades.clone(), paths.clone());
    cascades.sort_by_key(|c| c["root_mid"].as_i64());
    paths.sort_by_key(|p| p["root_mid"].as_i64());
    let mut golden = String::new();
    for c in &cascades {
        golden.push_str(&format!("cascade {c}\n"));
    }
    for p in &paths {
        golden.push_str(&format!("path {p}\n"));
    }
    assert_golden("cascades/sample.txt", &golden);
}

/// The generator writes reposts as the API names them (the root as `retweet_mid`, the hops
/// in the text) and keeps the real trees: every cascade's size and depth and every repost's
/// path equal its truth, through two crawler formats and dirt, in one partition and in many.
#[test]
fn generated_cascades_equal_the_truth() {
    use md5::{Digest, Md5};
    let dir = tempfile::tempdir().unwrap();
    let (raw, clean) = (dir.path().join("raw"), dir.path().join("clean"));
    let ok = |out: std::process::Output| assert!(out.status.success(), "{}", stderr(&out));
    ok(run(bin().args(["-q", "gen", "--out"]).arg(&raw).args([
        "--users",
        "10000",
        "--formats",
        "canonical,weibo-crawler",
    ])));
    ok(run(bin()
        .args(["-q", "clean", "--input"])
        .arg(&raw)
        .arg("--output")
        .arg(&clean)
        .args(["--date", DATE])));
    let truth: Value =
        serde_json::from_slice(&std::fs::read(raw.join("_truth.json")).unwrap()).unwrap();
    let truth = &truth["cascades"];
    assert!(truth["max_depth"].as_u64().unwrap() >= 3, "{truth}");
    for budget in ["1GiB", "256KiB"] {
        let graph = dir.path().join(format!("graph-{budget}"));
        ok(run(bin()
            .args(["-q", "cascades", "--input"])
            .arg(&clean)
            .arg("--output")
            .arg(&graph)
            .args(["--date", DATE, "--memory-budget", budget])));
        let mut cascades = rows(&graph.join(format!("cascades/dt={DATE}")));
        cascades.sort_by_key(|c| c["root_mid"].as_i64());
        let mut paths = rows(&graph.join(format!("repost_paths/dt={DATE}")));
        paths.sort_by_key(|p| p["mid"].as_i64());
        let mut lines = String::new();
        for c in &cascades {
            lines.push_str(&format!(
                "c {} {} {}\n",
                c["root_mid"], c["size"], c["depth"]
            ));
        }
        for p in &paths {
            let path: Vec<String> = p["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u.to_string())
                .collect();
            lines.push_str(&format!("r {} {}\n", p["mid"], path.join(",")));
        }
        assert_eq!(
            cascades.len() as u64,
            truth["cascades"].as_u64().unwrap(),
            "{budget}"
        );
        assert_eq!(
            paths.len() as u64,
            truth["reposts"].as_u64().unwrap(),
            "{budget}"
        );
        let md5: String = Md5::digest(lines.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(md5, truth["md5"].as_str().unwrap(), "{budget}");
    }
}

/// A post as the canonical posts JSON lines write it.
fn post_line(mid: &str, uid: &str, at: &str, text: &str, retweet: &str) -> String {
    serde_json::json!({
        "mid": mid, "bid": "", "uid": uid, "created_at": at, "text": text,
        "source": "iPhone", "reposts_count": "0", "comments_count": "0",
        "attitudes_count": "0", "topics": "", "at_users": "", "pics": "",
        "retweet_mid": retweet, "crawl_time": "2026-11-30 23:20:00"
    })
    .to_string()
}

/// A later night's record of a mid replaces the earlier one: a repost re-crawled as a plain
/// post leaves its cascade (the repost that named its author falls back to the root), and a
/// repost re-crawled with another chain hangs under the parent that chain names.
#[test]
fn a_later_nights_record_replaces_the_earlier_one() {
    let dir = tempfile::tempdir().unwrap();
    let (clean, graph) = (dir.path().join("clean"), dir.path().join("graph"));
    let next = "2026-11-30";
    let night2 = dir.path().join("night2").join("posts");
    std::fs::create_dir_all(&night2).unwrap();
    let post = post_line;
    let lines = [
        // 好美 is no longer a repost.
        post(
            "4974000000000101",
            "2100000002",
            "2026-11-29 09:00:00",
            "好美",
            "",
        ),
        // 围观 now names 南山, whose repost (10:00) came before it (12:00).
        post(
            "4974000000000104",
            "2100000005",
            "2026-11-29 12:00:00",
            "围观//@南山:同感",
            "4974000000000100",
        ),
        // 转发微博 was the only repost of 999, and is now one of 202 (a crawler's error, or
        // a corrected root; neither root was crawled): it leaves 999's cascade, whatever
        // partitions hold the two.
        post(
            "4974000000000105",
            "2100000003",
            "2026-11-29 14:00:00",
            "转发微博",
            "4974000000000202",
        ),
    ];
    std::fs::write(night2.join("posts.jsonl"), lines.join("\n") + "\n").unwrap();
    for (input, date) in [
        (sample_dir(), DATE),
        (night2.parent().unwrap().into(), next),
    ] {
        let out = run(bin()
            .args(["-q", "clean", "--input"])
            .arg(&input)
            .arg("--output")
            .arg(&clean)
            .args(["--date", date, "--max-reject-ratio", "0.5"]));
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let root = 4974000000000100i64;
    let (moved_from, moved_to) = (4974000000000999i64, 4974000000000202i64);
    // Whether a run held the two roots in different partitions of one round (two threads:
    // rounds of two), where the new record must remove the old one from the other's.
    let mut apart_in_a_round = false;
    for budget in ["1GiB", "1KiB", "300B"] {
        let report = dir.path().join(format!("report-{budget}.json"));
        let out = run(bin()
            .env("RAYON_NUM_THREADS", "2")
            .args(["-q", "--report"])
            .arg(&report)
            .args(["cascades", "--input"])
            .arg(&clean)
            .arg("--output")
            .arg(&graph)
            .args(["--date", next, "--memory-budget", budget]));
        assert!(out.status.success(), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let n = report["cascades"]["partitions"].as_u64().unwrap() as u32;
        let (a, b) = (
            weibo_etl::hash::id_bucket(moved_from, n),
            weibo_etl::hash::id_bucket(moved_to, n),
        );
        apart_in_a_round |= a != b && a / 2 == b / 2;
        let paths = rows(&graph.join(format!("repost_paths/dt={next}")));
        let of = |mid: i64| {
            let p = paths.iter().find(|r| r["mid"] == mid);
            p.map(|p| {
                (
                    p["parent_mid"].as_i64().unwrap(),
                    p["depth"].as_i64().unwrap(),
                )
            })
        };
        assert_eq!(of(4974000000000101), None, "{budget}: no longer a repost");
        assert_eq!(of(4974000000000105), Some((moved_to, 1)), "{budget}: moved");
        assert_eq!(
            of(4974000000000102),
            Some((root, 1)),
            "{budget}: 北风 has no repost"
        );
        assert_eq!(
            of(4974000000000103),
            Some((4974000000000102, 2)),
            "{budget}"
        );
        assert_eq!(
            of(4974000000000104),
            Some((4974000000000102, 2)),
            "{budget}: 南山's"
        );
        let cascades = rows(&graph.join(format!("cascades/dt={next}")));
        let c = cascades.iter().find(|c| c["root_mid"] == root).unwrap();
        assert_eq!(
            (c["size"].as_i64(), c["depth"].as_i64()),
            (Some(3), Some(2))
        );
        assert!(
            !cascades.iter().any(|c| c["root_mid"] == moved_from),
            "{budget}: 999 has no repost left"
        );
        let to: Vec<_> = cascades
            .iter()
            .filter(|c| c["root_mid"] == moved_to)
            .collect();
        assert_eq!(to.len(), 1, "{budget}");
        assert_eq!(to[0]["size"].as_i64(), Some(1), "{budget}");
    }
    assert!(
        apart_in_a_round,
        "no run held the two roots apart in one round"
    );
}

/// Each night's cascades continue from the night before's (rebuilding the roots the night
/// touches) and equal a build over every night, rows and figures: through records that
/// leave, join and move between cascades, a screen name given to another user (which moves
/// a parent), and a root crawled late.
#[test]
fn each_night_continues_from_the_last_and_equals_the_build_over_every_night() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    let night = |date: &str, files: &[(&str, String)]| {
        let raw = dir.path().join(format!("raw-{date}"));
        for (name, text) in files {
            let at = raw.join(name);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, text).unwrap();
        }
        let out = run(bin()
            .args(["-q", "clean", "--input"])
            .arg(&raw)
            .arg("--output")
            .arg(&clean)
            .args(["--date", date, "--max-reject-ratio", "0.5"]));
        assert!(out.status.success(), "{}", stderr(&out));
    };
    // Runs `date` into `graph`; returns its figures and rows.
    let cascades_of = |graph: &Path, date: &str| {
        let report = graph.with_extension(format!("{date}.json"));
        let out = run(bin()
            .env("RAYON_NUM_THREADS", "2")
            .args(["-q", "--report"])
            .arg(&report)
            .args(["cascades", "--input"])
            .arg(&clean)
            .arg("--output")
            .arg(graph)
            .args(["--date", date]));
        assert!(out.status.success(), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let sorted = |table: &str| {
            let mut rows: Vec<String> = rows(&graph.join(format!("{table}/dt={date}")))
                .iter()
                .map(Value::to_string)
                .collect();
            rows.sort();
            rows
        };
        (
            report["cascades"].clone(),
            sorted("cascades"),
            sorted("repost_paths"),
        )
    };
    let graph = dir.path().join("graph");
    let mut before: Option<&str> = None;
    let mut check = |date: &'static str| {
        let (mut figures, cascades, paths) = cascades_of(&graph, date);
        assert_eq!(
            figures["carried_from"].as_str(),
            before,
            "{date}: {figures}"
        );
        before = Some(date);
        let fresh = dir.path().join(format!("full-{date}"));
        let (mut full, full_cascades, full_paths) = cascades_of(&fresh, date);
        assert!(full["carried_from"].is_null(), "{full}");
        figures["carried_from"] = Value::Null;
        full["carried_from"] = Value::Null;
        assert_eq!(figures, full, "{date}: figures");
        assert_eq!(cascades, full_cascades, "{date}: cascades");
        assert_eq!(paths, full_paths, "{date}: repost paths");
        paths
    };
    let parent_of = |paths: &[String], mid: i64| {
        paths
            .iter()
            .map(|p| serde_json::from_str::<Value>(p).unwrap())
            .find(|p| p["mid"] == mid)
            .map(|p| p["parent_mid"].as_i64().unwrap())
    };
    crate::harness::clean_sample(&clean);
    check(DATE);
    // 好美 leaves the root's cascade, 围观 names 南山, 转发微博 moves from 999 to 202.
    night(
        "2026-11-30",
        &[(
            "posts/posts.jsonl",
            [
                post_line(
                    "4974000000000101",
                    "2100000002",
                    "2026-11-29 09:00:00",
                    "好美",
                    "",
                ),
                post_line(
                    "4974000000000104",
                    "2100000005",
                    "2026-11-29 12:00:00",
                    "围观//@南山:同感",
                    "4974000000000100",
                ),
                post_line(
                    "4974000000000105",
                    "2100000003",
                    "2026-11-29 14:00:00",
                    "转发微博",
                    "4974000000000202",
                ),
            ]
            .join("\n")
                + "\n",
        )],
    );
    let paths = check("2026-11-30");
    assert_eq!(parent_of(&paths, 4974000000000104), Some(4974000000000102));
    // Only users: 东篱 takes the name 南山, so 围观 (12:00) now hangs under 东篱's repost
    // (11:00), though no post of the night is a repost.
    let users = std::fs::read_to_string(sample_dir().join("cascades/users/users.csv")).unwrap();
    let header = users.lines().next().unwrap();
    night(
        "2026-12-01",
        &[(
            "users/users.csv",
            format!(
                "{header}\n2100000004,南山,m,浙江,杭州,浙江 杭州,,false,-1,40,60,12,\
                 2020-09-09 09:09:00,2026-12-01 23:10:00\n"
            ),
        )],
    );
    let paths = check("2026-12-01");
    assert_eq!(parent_of(&paths, 4974000000000104), Some(4974000000000103));
    // The root 202 is crawled, and a new repost names 南山, now 东篱's account (whose old
    // name no longer finds it).
    night(
        "2026-12-02",
        &[(
            "posts/posts.jsonl",
            [
                post_line(
                    "4974000000000202",
                    "2100000001",
                    "2026-11-28 08:00:00",
                    "旧帖",
                    "",
                ),
                post_line(
                    "4974000000000106",
                    "2100000002",
                    "2026-11-30 08:00:00",
                    "再转//@南山:转发",
                    "4974000000000100",
                ),
            ]
            .join("\n")
                + "\n",
        )],
    );
    let paths = check("2026-12-02");
    assert_eq!(
        parent_of(&paths, 4974000000000106),
        Some(4974000000000103),
        "{paths:#?}"
    );
}

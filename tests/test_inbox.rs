//! `inbox`: the feed entries of a generated history against DuckDB's window query over the
//! same Parquet (tests/reference/duckdb_inbox.py), and (with the local cluster) `query feed`
//! for chosen users against DuckDB's naive feed, celebrities included, after a rerun and
//! after a second night.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::harness::{bin, feeds_as_of, run, stderr};
use crate::test_clean::parquet_rows;

const NIGHTS: [&str; 2] = ["2026-11-28", "2026-11-29"];
const K: usize = 3;
/// Low enough that the generated graph's most followed authors are celebrities.
const THRESHOLD: u64 = 15;

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// Two nights of generated crawls, cleaned under `<dir>/clean`: increments (records
/// re-crawled), and with `extra` on the first night a larger data set whose authors have many
/// fans and posts. The two data sets share ids, so with `extra` some mids move to another
/// author on the second night: each night's entries still follow the newest records, but
/// HBase keeps the first night's cells of a moved post (docs/design/inbox.md), so the feed
/// test reads the increments alone.
fn history(dir: &Path, extra_on_first_night: bool) -> PathBuf {
    let (raw, extra) = (dir.join("raw"), dir.join("extra"));
    ok(run(bin()
        .args(["-q", "gen", "--out"])
        .arg(&raw)
        .args(["--nights", "2", "--date", NIGHTS[0]])));
    if extra_on_first_night {
        ok(run(bin().args(["-q", "gen", "--out"]).arg(&extra).args([
            "--users", "3000", "--days", "3", "--date", NIGHTS[0], "--seed", "11",
        ])));
    }
    let clean = dir.join("clean");
    for (i, night) in NIGHTS.iter().enumerate() {
        let mut cmd = bin();
        cmd.args(["-q", "clean", "--input"])
            .arg(raw.join(format!("dt={night}")));
        if i == 0 && extra_on_first_night {
            cmd.arg("--input").arg(&extra);
        }
        ok(run(cmd.arg("--output").arg(&clean).args(["--date", night])));
    }
    clean
}

fn inbox(clean: &Path, graph: &Path, date: &str, extra: &[&str]) -> Value {
    let report = graph.join(format!("inbox-{date}.json"));
    ok(run(bin()
        .args(["-q", "--report"])
        .arg(&report)
        .args(["inbox", "--input"])
        .arg(clean)
        .arg("--output")
        .arg(graph)
        .args(["--date", date, "--k", &K.to_string()])
        .args(["--celebrity-threshold", &THRESHOLD.to_string()])
        .args(extra)));
    let v: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    v["inbox"].clone()
}

/// The rows of one night's `inbox` partition, checking each `(uid, followee)`'s versions
/// strictly decrease and never pass the post's time.
fn partition_rows(graph: &Path, date: &str) -> Vec<String> {
    let dir = graph.join("inbox").join(format!("dt={date}"));
    assert!(
        dir.join("_SUCCESS").exists(),
        "{} is not committed",
        dir.display()
    );
    let mut last: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    let rows: Vec<String> = parquet_rows(&dir).lines().map(String::from).collect();
    for line in &rows {
        let v: Value = serde_json::from_str(line).unwrap();
        let (uid, followee) = (v["uid"].as_i64().unwrap(), v["followee"].as_i64().unwrap());
        let version = v["version"].as_i64().unwrap();
        let created = chrono::DateTime::parse_from_rfc3339(v["created_at"].as_str().unwrap())
            .unwrap()
            .timestamp_millis();
        assert!(version <= created, "{line}");
        if let Some(prev) = last.insert((uid, followee), version) {
            assert!(
                version < prev,
                "versions of {uid} -> {followee} do not decrease: {line}"
            );
        }
    }
    rows
}

/// The uids of a night's `inbox_celebrities` partition.
fn celebrities(graph: &Path, date: &str) -> Vec<i64> {
    parquet_rows(&graph.join("inbox_celebrities").join(format!("dt={date}")))
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["uid"]
                .as_i64()
                .unwrap()
        })
        .collect()
}

/// Each mid's author in its newest record up to `date`.
fn newest_authors(clean: &Path, date: &str) -> BTreeMap<i64, i64> {
    let mut authors = BTreeMap::new();
    for night in NIGHTS.iter().filter(|n| **n <= date) {
        for l in parquet_rows(&clean.join("posts").join(format!("dt={night}"))).lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            if let (Some(mid), Some(uid)) = (v["mid"].as_i64(), v["uid"].as_i64()) {
                authors.insert(mid, uid);
            }
        }
    }
    authors
}

/// The feeds as of `date` read from every committed partition up to it
/// ([`feeds_as_of`]), as `(uid, followee, mid)`.
fn entries(graph: &Path, date: &str) -> Vec<(i64, i64, i64)> {
    let (mut partitions, mut stars) = (Vec::new(), Vec::new());
    for night in NIGHTS.iter().filter(|n| **n <= date) {
        if graph
            .join("inbox")
            .join(format!("dt={night}/_SUCCESS"))
            .exists()
        {
            partitions.push(partition_rows(graph, night));
            stars.extend(celebrities(graph, night));
        }
    }
    let mut rows: Vec<(i64, i64, i64)> = feeds_as_of(&partitions, &stars, K)
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let id = |f: &str| v[f].as_i64().unwrap();
            (id("uid"), id("followee"), id("mid"))
        })
        .collect();
    rows.sort_unstable();
    rows
}

fn peer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/duckdb_inbox.py")
}

/// DuckDB's entries, and its feeds of `uids` when given.
fn duckdb(clean: &Path, date: &str, scratch: &Path, feeds: &[i64], limit: usize) -> Duck {
    let (csv, feeds_csv) = (scratch.join("duck.csv"), scratch.join("duck-feeds.csv"));
    let mut cmd = Command::new("python3");
    cmd.arg(peer())
        .arg(clean)
        .args([date, &K.to_string(), &THRESHOLD.to_string()])
        .arg(&csv);
    if !feeds.is_empty() {
        let uids: Vec<String> = feeds.iter().map(i64::to_string).collect();
        cmd.args([uids.join(","), limit.to_string()])
            .arg(&feeds_csv);
    }
    let out = cmd.output().expect("run python3");
    assert!(
        out.status.success(),
        "DuckDB peer failed (pip install duckdb): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let numbers = |path: &Path| -> Vec<Vec<i64>> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(|f| f.parse().unwrap()).collect())
            .collect()
    };
    let entries = numbers(&csv)
        .into_iter()
        .map(|f| (f[0], f[1], f[2]))
        .collect();
    let mut by_user: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    if !feeds.is_empty() {
        for f in numbers(&feeds_csv) {
            by_user.entry(f[0]).or_default().push(f[2]);
        }
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(line.trim()).expect("the peer's JSON line");
    Duck {
        entries,
        feeds: by_user,
        edges: report["edges"].clone(),
    }
}

struct Duck {
    entries: Vec<(i64, i64, i64)>,
    feeds: BTreeMap<i64, Vec<i64>>,
    /// How the distinct edges are served, under the report's names.
    edges: Value,
}

/// Every entry of both nights equals DuckDB's, with some authors skipped as celebrities,
/// whether a night's feeds are built whole or as what it adds to the night before; many
/// small partitions give the same entries.
#[test]
fn entries_equal_duckdbs_window_query_over_two_nights() {
    let dir = tempfile::tempdir().unwrap();
    let clean = history(dir.path(), true);
    let graph = dir.path().join("graph");
    let many_graph = dir.path().join("many");
    for (i, night) in NIGHTS.iter().enumerate() {
        let stats = inbox(&clean, &graph, night, &[]);
        let e = |k: &str| stats[k].as_u64().unwrap();
        assert_eq!(
            e("entries"),
            partition_rows(&graph, night).len() as u64,
            "{stats}"
        );
        assert_eq!(
            e("edges"),
            e("edges_fanned_out") + e("edges_to_celebrities") + e("edges_without_posts"),
            "every edge is accounted for: {stats}"
        );
        let duck = duckdb(&clean, night, dir.path(), &[], 0);
        // This history moves some mids to another author on the second night: a reader of
        // the partitions drops the entries whose followee is no longer the post's author
        // (docs/design/inbox.md, "Reading the Parquet").
        let authors = newest_authors(&clean, night);
        let mut ours = entries(&graph, night);
        ours.retain(|(_, followee, mid)| authors.get(mid) == Some(followee));
        assert_eq!(ours, duck.entries, "{night}");
        // The whole feeds in a fresh output: the report's counts equal DuckDB's.
        let whole_graph = dir.path().join(format!("whole-{i}"));
        let whole = inbox(&clean, &whole_graph, night, &[]);
        assert_eq!(whole["base"], Value::Null, "{whole}");
        assert!(
            whole["celebrities_skipped"].as_u64().unwrap() > 0,
            "{whole}"
        );
        assert!(whole["edges_fanned_out"].as_u64().unwrap() > 0, "{whole}");
        assert_eq!(entries(&whole_graph, night), ours, "{night}, whole");
        // The first night's edges to authors without posts are counted, not held; the
        // second's are made distinct over both nights.
        let served = duck.edges.as_object().expect("edge counts");
        assert!(served["edges_without_posts"].as_u64().unwrap() > 0);
        for (k, v) in served {
            assert_eq!(&whole[k], v, "{night}: {k}");
        }
        if i > 0 {
            assert_eq!(stats["base"], NIGHTS[i - 1], "{stats}");
            assert!(e("touched_authors") > 0, "{stats}");
            assert!(e("entries") < whole["entries"].as_u64().unwrap(), "{stats}");
        }
        inbox(&clean, &many_graph, night, &["--memory-budget", "64KiB"]);
        let mut many = entries(&many_graph, night);
        many.retain(|(_, followee, mid)| authors.get(mid) == Some(followee));
        assert_eq!(many, ours, "{night}, many partitions");
    }
}

/// The same crawl cleaned as a second night changes nothing: every pair is read twice and
/// counts once, whether its followee has posts or not, and the entries are the same.
#[test]
fn a_night_crawled_again_counts_each_edge_once() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    ok(run(bin()
        .args(["-q", "gen", "--out"])
        .arg(&raw)
        .args(["--users", "2000", "--date", NIGHTS[0]])));
    let clean = dir.path().join("clean");
    for night in NIGHTS {
        ok(run(bin()
            .args(["-q", "clean", "--input"])
            .arg(&raw)
            .arg("--output")
            .arg(&clean)
            .args(["--date", night])));
    }
    let graph = dir.path().join("graph");
    let once = inbox(&clean, &graph, NIGHTS[0], &[]);
    // Continuing from the first night, the second adds nothing.
    let added = inbox(&clean, &graph, NIGHTS[1], &[]);
    assert_eq!(added["base"], NIGHTS[0], "{added}");
    assert_eq!(added["entries"], 0, "{added}");
    assert_eq!(entries(&graph, NIGHTS[1]), entries(&graph, NIGHTS[0]));
    assert!(celebrities(&graph, NIGHTS[1]).is_empty());
    let whole = dir.path().join("whole");
    let twice = inbox(&clean, &whole, NIGHTS[1], &[]);
    assert!(once["edges_without_posts"].as_u64().unwrap() > 0, "{once}");
    assert!(once["edges_fanned_out"].as_u64().unwrap() > 0, "{once}");
    assert_eq!(
        twice["follow_rows"].as_u64().unwrap(),
        2 * once["follow_rows"].as_u64().unwrap()
    );
    for k in [
        "edges",
        "edges_fanned_out",
        "edges_to_celebrities",
        "edges_without_posts",
        "celebrities_skipped",
        "entries",
        "posts",
    ] {
        assert_eq!(twice[k], once[k], "{k}");
    }
    assert_eq!(entries(&whole, NIGHTS[1]), entries(&graph, NIGHTS[0]));
}

#[cfg(feature = "integration")]
mod cluster_tests {
    use super::*;
    use crate::harness::cluster;

    /// The mids of a user's feed, and how many came from a celebrity's timeline.
    fn feed(ns: &str, uid: i64, limit: usize) -> (Vec<i64>, usize) {
        let out = ok(run(bin().args([
            "--namespace",
            ns,
            "query",
            "feed",
            &uid.to_string(),
            "--limit",
            &limit.to_string(),
        ])));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["calls"].as_array().is_some_and(|c| !c.is_empty()), "{v}");
        let posts = v["result"]["feed"].as_array().unwrap();
        let from_timelines = posts.iter().filter(|p| p["via"] == "timeline").count();
        let mids = posts.iter().map(|p| p["mid"].as_i64().unwrap()).collect();
        (mids, from_timelines)
    }

    /// Users to read: those with the most feed entries, and followers of a celebrity.
    fn chosen(graph: &Path, clean: &Path, date: &str) -> Vec<i64> {
        let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
        for (uid, _, _) in entries(graph, date) {
            *counts.entry(uid).or_default() += 1;
        }
        let mut busiest: Vec<(usize, i64)> = counts.into_iter().map(|(u, n)| (n, u)).collect();
        busiest.sort_unstable_by(|a, b| b.cmp(a));
        let mut users: BTreeSet<i64> = busiest.iter().take(4).map(|&(_, u)| u).collect();
        let celebrities: BTreeSet<i64> = celebrities(graph, date).into_iter().collect();
        let follows = parquet_rows(&clean.join("follows").join(format!("dt={date}")));
        let fans_of_celebrities = follows.lines().filter_map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            celebrities
                .contains(&v["followee"].as_i64().unwrap())
                .then(|| v["follower"].as_i64().unwrap())
        });
        users.extend(fans_of_celebrities.take(3));
        users.into_iter().collect()
    }

    /// `inbox --load` of `night` into `ns`, with `extra` (a route); returns its report.
    fn inbox_load(ns: &str, clean: &Path, graph: &Path, night: &str, extra: &[&str]) -> Value {
        let report = graph.join(format!("load-{ns}-{night}.json"));
        ok(run(bin()
            .args(["-q", "--namespace", ns, "--report"])
            .arg(&report)
            .args(["inbox", "--input"])
            .arg(clean)
            .arg("--output")
            .arg(graph)
            .args(["--date", night, "--k", &K.to_string(), "--load"])
            .args(["--celebrity-threshold", &THRESHOLD.to_string()])
            .args(extra)));
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap()
    }

    use weibo_etl::hbase::admin::VersionedCell;

    /// Every version of every cell of the inbox rows of `users` in `ns`.
    fn inbox_cells(ns: &str, users: &BTreeSet<i64>) -> Vec<(i64, Vec<VersionedCell>)> {
        use weibo_etl::hbase::layout::keys;
        let timeouts = weibo_etl::hbase::Timeouts::default();
        let mut admin = weibo_etl::hbase::admin::Admin::connect(cluster::THRIFT2, timeouts)
            .expect("thrift2 gateway");
        let table = format!("{ns}:inbox");
        users
            .iter()
            .map(|&u| {
                let cells = admin
                    .get_versions(&table, &keys::user_key(u), 1000)
                    .unwrap();
                (u, cells)
            })
            .collect()
    }

    /// The inbox cells of `users` as a reader sees them: a celebrity marker's timestamp is
    /// the night it was written, not data, so it is left out (docs/nightly.md); and the `f:`
    /// cells of an author that also has a `c:` cell in the row (it crossed the celebrity
    /// threshold after they were written) are ignored, as `query feed` ignores them
    /// (docs/design/inbox.md).
    fn visible_cells(ns: &str, users: &BTreeSet<i64>) -> Vec<(i64, Vec<VersionedCell>)> {
        use weibo_etl::hbase::layout::{CELEBRITY_FAMILY, INBOX_FAMILY};
        let marker = format!("{CELEBRITY_FAMILY}:").into_bytes();
        let feed = format!("{INBOX_FAMILY}:").into_bytes();
        inbox_cells(ns, users)
            .into_iter()
            .map(|(u, cells)| {
                let stars: BTreeSet<Vec<u8>> = cells
                    .iter()
                    .filter_map(|(c, _, _)| c.strip_prefix(marker.as_slice()))
                    .map(<[u8]>::to_vec)
                    .collect();
                let cells = cells
                    .into_iter()
                    .filter(|(c, _, _)| {
                        c.strip_prefix(feed.as_slice())
                            .is_none_or(|author| !stars.contains(author))
                    })
                    .map(|(c, ts, v)| {
                        let ts = if c.starts_with(&marker) { 0 } else { ts };
                        (c, ts, v)
                    })
                    .collect();
                (u, cells)
            })
            .collect()
    }

    /// Night 2 on top of night 1 writes only the cells night 2 brings (new posts to every
    /// fan, every served post to a new fan, markers whose count changed), and leaves the
    /// table as one load of night 2 into an empty namespace does. A rerun writes nothing; a
    /// namespace without the marker gets every feed, and the same table.
    #[test]
    fn a_night_writes_only_the_cells_its_delta_brings() {
        cluster::ensure();
        let dir = tempfile::tempdir().unwrap();
        let clean = history(dir.path(), false);
        let graph = dir.path().join("graph");
        let nightly = cluster::Scratch::new("inbox_delta");
        let once = cluster::Scratch::new("inbox_once");
        let first = inbox_load(&nightly, &clean, &graph, NIGHTS[0], &[]);
        assert_eq!(first["load"]["base"]["wrote"], "every", "{first}");
        let second = inbox_load(&nightly, &clean, &graph, NIGHTS[1], &[]);
        assert_eq!(second["load"]["base"]["date"], NIGHTS[0], "{second}");
        assert_eq!(second["load"]["base"]["wrote"], "added", "{second}");
        let whole_graph = dir.path().join("whole");
        let full = inbox_load(&once, &clean, &whole_graph, NIGHTS[1], &[]);
        assert_eq!(full["load"]["base"]["wrote"], "every", "{full}");
        let delta = second["load"]["rows"].as_u64().unwrap();
        let every = full["load"]["rows"].as_u64().unwrap();
        assert!(delta > 0 && delta < every, "{second}\n{full}");
        // The feed cells written are the entries of the night's partition.
        let entries_cells = second["inbox"]["entries"].as_u64().unwrap();
        assert!(entries_cells <= delta, "{second}");
        let rows: BTreeSet<i64> = entries(&graph, NIGHTS[1])
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(
            entries(&graph, NIGHTS[1]),
            entries(&whole_graph, NIGHTS[1]),
            "the feeds read from the partitions"
        );
        assert!(
            !celebrities(&whole_graph, NIGHTS[1]).is_empty(),
            "celebrities are covered"
        );
        let cells = visible_cells(&nightly, &rows);
        assert!(cells.iter().any(|(_, c)| c.len() > 1), "versions kept");
        let at_once = visible_cells(&once, &rows);
        for ((uid, by_night), (_, once)) in cells.iter().zip(&at_once) {
            assert_eq!(
                by_night, once,
                "the feed of {uid}: night by night = at once"
            );
        }
        let rerun = inbox_load(&nightly, &clean, &graph, NIGHTS[1], &[]);
        assert_eq!(rerun["load"]["rows"], 0, "{rerun}");
        assert_eq!(rerun["load"]["base"]["wrote"], "nothing", "{rerun}");

        // A namespace whose marker is gone is given every feed; the partition is the same.
        let marker = graph
            .join("_load")
            .join(format!("{}.inbox.json", &*nightly));
        std::fs::remove_file(&marker).unwrap();
        let before = partition_rows(&graph, NIGHTS[1]);
        let again = inbox_load(&nightly, &clean, &graph, NIGHTS[1], &[]);
        assert_eq!(again["load"]["base"]["wrote"], "every", "{again}");
        assert_eq!(again["load"]["rows"], full["load"]["rows"], "{again}");
        assert_eq!(partition_rows(&graph, NIGHTS[1]), before);
        assert_eq!(visible_cells(&nightly, &rows), cells);
    }

    /// Night by night: load, inbox --load, and every chosen user's feed equals DuckDB's naive
    /// feed; the HFile route writes every version of every cell the Thrift route writes; a
    /// rerun of the night's inbox (by either route) leaves the feeds as they were.
    #[test]
    fn query_feed_equals_the_naive_feed_night_after_night() {
        cluster::ensure();
        let dir = tempfile::tempdir().unwrap();
        let clean = history(dir.path(), false);
        let graph = dir.path().join("graph");
        let ns = cluster::Scratch::new("inbox_feed");
        let bulk = cluster::Scratch::new("inbox_bulk");
        let route = cluster::bulk_route(&bulk);
        let route: Vec<&str> = route.iter().map(String::as_str).collect();
        let limit = 50;
        for night in NIGHTS {
            for namespace in [&ns, &bulk] {
                ok(run(bin()
                    .args(["-q", "--namespace", namespace, "load", "--input"])
                    .arg(&clean)
                    .args(["--date", night])));
            }
            let thrift = inbox_load(&ns, &clean, &graph, night, &[]);
            assert_eq!(thrift["load"]["via"], "thrift", "{thrift}");
            let hfile = inbox_load(&bulk, &clean, &graph, night, &route);
            assert_eq!(hfile["load"]["via"], "hfile", "{hfile}");
            assert!(
                hfile["load"]["hfiles"]["files"].as_u64().unwrap() > 0,
                "{hfile}"
            );
            assert_eq!(hfile["load"]["rows"], thrift["load"]["rows"]);
            // Every row either route wrote: the followers of every author.
            let rows: BTreeSet<i64> = entries(&graph, night).into_iter().map(|e| e.0).collect();
            let cells = inbox_cells(&ns, &rows);
            assert!(
                cells.iter().any(|(_, c)| c.len() > 1),
                "{night}: versions kept"
            );
            assert_eq!(inbox_cells(&bulk, &rows), cells, "{night}: HFile route");
            let users = chosen(&graph, &clean, night);
            let duck = duckdb(&clean, night, dir.path(), &users, limit);
            let (mut nonempty, mut from_timelines) = (0, 0);
            for &uid in &users {
                let want = duck.feeds.get(&uid).cloned().unwrap_or_default();
                nonempty += usize::from(!want.is_empty());
                let (got, timeline) = feed(&ns, uid, limit);
                from_timelines += timeline;
                assert_eq!(got, want, "{night}: feed of {uid}");
                assert_eq!(
                    feed(&bulk, uid, limit).0,
                    want,
                    "{night}: bulk feed of {uid}"
                );
            }
            assert!(nonempty >= 4, "{night}: the chosen users have feeds");
            assert!(
                from_timelines > 0,
                "{night}: celebrities' posts are merged in"
            );
        }
        // A rerun of the last night writes the same cells.
        let last = NIGHTS[1];
        let users = chosen(&graph, &clean, last);
        let before: Vec<(Vec<i64>, usize)> = users.iter().map(|&u| feed(&ns, u, limit)).collect();
        inbox_load(&ns, &clean, &graph, last, &[]);
        let after: Vec<(Vec<i64>, usize)> = users.iter().map(|&u| feed(&ns, u, limit)).collect();
        assert_eq!(after, before);
        let rows: BTreeSet<i64> = entries(&graph, last).into_iter().map(|e| e.0).collect();
        let cells = inbox_cells(&bulk, &rows);
        inbox_load(&bulk, &clean, &graph, last, &route);
        assert_eq!(
            inbox_cells(&bulk, &rows),
            cells,
            "a bulk rerun adds no version"
        );
        // Another K would change what the table keeps: refused, not silently cut.
        let other = run(bin()
            .args(["-q", "--namespace", &ns, "inbox", "--input"])
            .arg(&clean)
            .arg("--output")
            .arg(&graph)
            .args(["--date", last, "--k", "5", "--load"]));
        assert_eq!(other.status.code(), Some(2), "{}", stderr(&other));
        assert!(stderr(&other).contains("not --k 5"), "{}", stderr(&other));
    }
}

//! `load` against the real HBase of the local cluster: the sample is cleaned, loaded, and
//! read back through Thrift (ours) and happybase (theirs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use md5::{Digest, Md5};
use serde_json::Value;
use weibo_etl::hbase::{Connection, Timeouts};

use crate::harness::{bin, cluster, run, stderr, stdout};
use crate::test_clean::{parquet_rows, sample_dir, DATE};

fn rows(dir: &Path, entity: &str) -> Vec<Value> {
    parquet_rows(&dir.join(entity).join(format!("dt={DATE}")))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Row count and a digest of every cell (key, column, value, timestamp) of a table.
pub fn table_digest(conn: &mut Connection, table: &str) -> (u64, String) {
    let mut n = 0;
    let mut h = Md5::new();
    conn.scan_with(table, &[], |row| {
        n += 1;
        for (col, cell) in &row.cells {
            h.update(&row.key);
            h.update(col);
            h.update(&cell.value);
            h.update(cell.timestamp.to_be_bytes());
        }
        true
    })
    .unwrap();
    (n, h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// One row that must exist.
pub fn row(conn: &mut Connection, table: &str, key: &[u8]) -> weibo_etl::hbase::Row {
    conn.get(table, key)
        .unwrap()
        .unwrap_or_else(|| panic!("no row {key:02x?} in {table}"))
}

/// `load` of `input` into `ns`, small batches so several units and batches are in play.
fn load_cmd(input: &Path, ns: &str) -> std::process::Command {
    let mut cmd = bin();
    cmd.args(["-q", "--namespace", ns, "load", "--input"])
        .arg(input)
        .args([
            "--date",
            DATE,
            "--regions",
            "4",
            "--writers",
            "3",
            "--batch-bytes",
            "2000",
        ]);
    cmd
}

fn load(input: &Path, ns: &str, extra: &[&str]) -> std::process::Output {
    run(load_cmd(input, ns).args(extra))
}

#[test]
fn sample_round_trip_counts_queries_happybase_and_rerun() {
    cluster::ensure();
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    crate::harness::clean_sample(&clean);
    let ns = cluster::namespace("load");
    let first = dir.path().join("load.json");
    let out = load(&clean, &ns, &["--report", first.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));

    // What the cleaned data implies, computed here from the Parquet rows.
    let users = rows(&clean, "users");
    let follows = rows(&clean, "follows");
    let posts = rows(&clean, "posts");
    let comments = rows(&clean, "comments");
    let mut uids: BTreeSet<i64> = users.iter().map(|u| u["uid"].as_i64().unwrap()).collect();
    for f in &follows {
        uids.insert(f["follower"].as_i64().unwrap());
        uids.insert(f["followee"].as_i64().unwrap());
    }
    uids.extend(posts.iter().filter_map(|p| p["uid"].as_i64()));
    let names: BTreeMap<String, i64> = users
        .iter()
        .filter_map(|u| Some((u["screen_name"].as_str()?.to_string(), u["uid"].as_i64()?)))
        .collect();
    let mentions: usize = posts
        .iter()
        .filter(|p| p["uid"].as_i64().is_some())
        .map(|p| {
            p["at_users"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| names.contains_key(n.as_str().unwrap()))
                .count()
        })
        .sum();
    // A comment whose post the crawl did not record (nghuyong's comment spider) is in no
    // list, and the report counts it.
    let without_post = comments.iter().filter(|c| c["mid"].is_null()).count();
    assert!(without_post >= 1, "the sample has such a comment");
    let r: Value = serde_json::from_slice(&std::fs::read(&first).unwrap()).unwrap();
    assert_eq!(r["load"]["comments_without_post"], without_post);
    let user_post = posts.iter().filter(|p| p["uid"].as_i64().is_some()).count()
        + mentions
        + comments
            .iter()
            .filter(|c| c["uid"].as_i64().is_some() && !c["mid"].is_null())
            .count();
    let expected: BTreeMap<&str, u64> = BTreeMap::from([
        ("user", uids.len() as u64),
        ("user_by_name", names.len() as u64),
        ("post", posts.len() as u64),
        ("post_by_mid", posts.len() as u64),
        ("follow", follows.len() as u64),
        ("fans", follows.len() as u64),
        ("user_post", user_post as u64),
    ]);
    let mut conn = Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();
    let mut digests = BTreeMap::new();
    for (table, n) in &expected {
        let full = format!("{ns}:{table}");
        let (count, digest) = table_digest(&mut conn, &full);
        assert_eq!(count, *n, "{table} rows");
        assert_eq!(conn.regions(&full).unwrap().len(), 4, "{table} regions");
        digests.insert(*table, digest);
    }

    // Queries answer from the tables: counters are the graph's, not the crawler's.
    let followers_of = |uid: i64| follows.iter().filter(|f| f["followee"] == uid).count() as i64;
    let query = |args: &[&str]| -> Value {
        let out = run(bin().args(["--namespace", &ns, "query"]).args(args));
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    };
    let user = query(&["user", "1669879400"]);
    let cells = &user["result"]["cells"];
    assert_eq!(cells["count:followers"], followers_of(1669879400));
    assert_eq!(cells["count:reported_followers"], 78_000_000);
    assert_eq!(cells["info:screen_name"], "迪丽热巴");
    let followees = query(&["followees", "5872301234"]);
    let expected_followees: Vec<i64> = {
        let mut v: Vec<i64> = follows
            .iter()
            .filter(|f| f["follower"] == 5872301234i64)
            .map(|f| f["followee"].as_i64().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(followees["result"], serde_json::json!(expected_followees));
    let fans = query(&["fans", "1195230310"]);
    assert_eq!(
        fans["result"].as_array().unwrap().len() as i64,
        followers_of(1195230310)
    );
    let post = query(&["post", "4973000000000001"]);
    let first: i64 = 4973000000000001;
    let reposts_of_first = posts.iter().filter(|p| p["retweet_mid"] == first).count();
    let comments_on_first = comments.iter().filter(|c| c["mid"] == first).count();
    assert!(reposts_of_first >= 2 && comments_on_first >= 1);
    assert_eq!(post["result"]["cells"]["count:reposts"], reposts_of_first);
    assert_eq!(post["result"]["cells"]["count:comments"], comments_on_first);
    let timeline = query(&["timeline", "1669879400", "--limit", "3"]);
    let times: Vec<i64> = timeline["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cells"]["info:created_at"].as_i64().unwrap())
        .collect();
    assert_eq!(times.len(), 3);
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );

    // happybase decodes count:followers as HBase's 8-byte counter.
    let script = "import happybase, struct, sys\n\
                  c = happybase.Connection('127.0.0.1', 9090)\n\
                  t = c.table(sys.argv[1])\n\
                  import hashlib\n\
                  uid = int(sys.argv[2])\n\
                  key = hashlib.md5(uid.to_bytes(8, 'big')).digest()[:2] + uid.to_bytes(8, 'big')\n\
                  print(struct.unpack('>q', t.row(key)[b'count:followers'])[0])\n";
    let py = Command::new("python3")
        .args(["-c", script, &format!("{ns}:user"), "1669879400"])
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        followers_of(1669879400).to_string()
    );

    // A rerun (no --resume) leaves every cell as it was: same values, same timestamps.
    let out = load(&clean, &ns, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    for (table, digest) in &digests {
        assert_eq!(
            &table_digest(&mut conn, &format!("{ns}:{table}")).1,
            digest,
            "{table} changed on rerun"
        );
    }
    // --resume after a finished run has nothing left to do.
    let report = dir.path().join("resume.json");
    let out = run(bin()
        .args(["-q", "--namespace", &ns, "--report"])
        .arg(&report)
        .args(["load", "--input"])
        .arg(&clean)
        .args(["--date", DATE, "--resume"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["load"]["rows"], 0);
    assert_eq!(r["load"]["units_done"], 0);
    assert!(r["load"]["units_skipped"].as_u64().unwrap() >= 5);

    // verify: every sampled record reads back equal, with latencies reported...
    let verify = |report: &Path| {
        run(bin()
            .args(["-q", "--namespace", &ns, "--report"])
            .arg(report)
            .args(["verify", "--input"])
            .arg(&clean)
            .args(["--date", DATE, "--sample", "100"]))
    };
    let vr = dir.path().join("verify.json");
    let out = verify(&vr);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&std::fs::read(&vr).unwrap()).unwrap();
    assert_eq!(v["verify"]["users_checked"], users.len());
    assert_eq!(v["verify"]["posts_checked"], posts.len());
    assert_eq!(v["verify"]["follows_checked"], follows.len());
    assert!(v["verify"]["get_ms"]["p99"].as_f64().unwrap() > 0.0);
    // ...and a cell changed behind the loader's back is caught.
    conn.put(
        &format!("{ns}:user"),
        &[
            weibo_etl::hbase::Put::new(weibo_etl::hbase::layout::keys::user_key(1669879400))
                .cell("info:screen_name", "tampered"),
        ],
        i64::MAX / 2,
    )
    .unwrap();
    let out = verify(&vr);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("user 1669879400: screen_name differs"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unreachable_gateway_fails_with_exit_5() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    let out = run(bin()
        .args(["-q", "clean", "--input"])
        .arg(sample_dir().join("canonical"))
        .arg("--output")
        .arg(&clean)
        .args(["--date", DATE]));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(bin()
        .args([
            "--hbase",
            "127.0.0.1:1",
            "--hbase-admin",
            "127.0.0.1:1",
            "load",
            "--input",
        ])
        .arg(&clean)
        .args(["--date", DATE]));
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(stderr(&out).contains("127.0.0.1:1"), "{}", stderr(&out));
}

/// Where a load of `clean` into `ns` keeps its checkpoint manifest.
fn manifest_of(clean: &Path, ns: &str) -> std::path::PathBuf {
    clean
        .join("_load")
        .join(format!("dt={DATE}"))
        .join(format!("{ns}.json"))
}

/// Waits (up to two minutes) until a running load's manifest records a finished unit; the
/// load must not end before that, or there is nothing left to interrupt.
fn wait_for_a_finished_unit(child: &mut std::process::Child, manifest: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the load finished ({status}) before it could be interrupted");
        }
        let units = std::fs::read(manifest)
            .ok()
            .and_then(|b| serde_json::from_slice::<Vec<String>>(&b).ok())
            .map_or(0, |v| v.len());
        if units >= 1 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no unit finished in time"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Every table of `victim` equals `reference`'s: row count and a digest of every cell.
pub fn assert_same_tables(reference: &str, victim: &str) {
    let mut conn = Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();
    for table in [
        "user",
        "post",
        "post_by_mid",
        "follow",
        "fans",
        "user_post",
        "user_by_name",
    ] {
        let a = table_digest(&mut conn, &format!("{reference}:{table}"));
        let b = table_digest(&mut conn, &format!("{victim}:{table}"));
        assert!(a.0 > 0, "{table} is empty");
        assert_eq!(
            a, b,
            "{table}: resumed load differs from an uninterrupted one"
        );
    }
}

/// 3,000 generated users' data, cleaned under `dir/clean`: enough units and batches for a
/// load to be interrupted halfway. `WEIBO_ETL_IT_PRESET=small` takes `gen --preset small`
/// instead (100,000 users: for a release-build run by hand, docs/development.md).
pub fn generated_clean(dir: &Path) -> std::path::PathBuf {
    let raw = dir.join("raw");
    let clean = dir.join("clean");
    let ok = |out: std::process::Output| assert!(out.status.success(), "{}", stderr(&out));
    let size: &[&str] = match std::env::var("WEIBO_ETL_IT_PRESET").as_deref() {
        Ok("small") => &["--preset", "small"],
        _ => &["--users", "3000"],
    };
    ok(run(bin()
        .args(["-q", "gen"])
        .args(size)
        .args(["--seed", "5", "--out"])
        .arg(&raw)));
    ok(run(bin()
        .args(["-q", "clean", "--input"])
        .arg(&raw)
        .arg("--output")
        .arg(&clean)
        .args(["--date", DATE])));
    clean
}

#[test]
fn killed_load_resumes_to_the_same_tables_as_an_uninterrupted_one() {
    cluster::ensure();
    let dir = tempfile::tempdir().unwrap();
    let clean = generated_clean(dir.path());
    let ok = |out: std::process::Output| assert!(out.status.success(), "{}", stderr(&out));

    // The reference: one uninterrupted load.
    let reference = cluster::namespace("load_ref");
    ok(load(&clean, &reference, &[]));

    // The victim: killed once its checkpoint records a finished unit, then resumed. It also
    // computes its counters in key partitions (a budget far below the data's), so the tables
    // also prove that partitioned counters are exactly the single-pass ones.
    let victim = cluster::namespace("load_kill");
    let partitioned = ["--memory-budget", "64KiB"];
    let manifest = manifest_of(&clean, &victim);
    let mut child = load_cmd(&clean, &victim)
        .args(partitioned)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_a_finished_unit(&mut child, &manifest);
    child.kill().unwrap();
    child.wait().unwrap();
    let done_before: Vec<String> =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let report = dir.path().join("resume.json");
    ok(run(bin()
        .args(["-q", "--namespace", &victim, "--report"])
        .arg(&report)
        .args(["load", "--input"])
        .arg(&clean)
        .args([
            "--date",
            DATE,
            "--regions",
            "4",
            "--writers",
            "3",
            "--resume",
        ])
        .args(partitioned)));
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(
        r["load"]["units_skipped"].as_u64().unwrap(),
        done_before.len() as u64
    );
    assert!(r["load"]["units_done"].as_u64().unwrap() >= 1);
    assert!(r["load"]["counter_partitions"].as_u64().unwrap() > 4, "{r}");

    assert_same_tables(&reference, &victim);
}

/// The Thrift gateway itself dies (SIGKILL to its own JVM, so every connection drops) in the
/// middle of a load: the loader's retries run out and it stops with the unreachable-HBase exit
/// code; once a gateway is back, `--resume` finishes, and every table equals an uninterrupted
/// load's.
#[test]
fn killed_thrift_gateway_then_resume_gives_the_same_tables() {
    use weibo_etl::dev::cluster::{ClusterPaths, Gateway};
    cluster::ensure();
    let dir = tempfile::tempdir().unwrap();
    let clean = generated_clean(dir.path());
    let ok = |out: std::process::Output| assert!(out.status.success(), "{}", stderr(&out));
    let reference = cluster::namespace("gw_ref");
    ok(load(&clean, &reference, &[]));

    let paths = ClusterPaths::discover();
    let port = 9190;
    let timeout = std::time::Duration::from_secs(120);
    let mut gateway = Gateway::start(&paths, port, timeout).unwrap();
    let addr = format!("127.0.0.1:{port}");
    let victim = cluster::namespace("gw_kill");
    let through_gateway = |extra: &[&str]| {
        let mut cmd = bin();
        cmd.args(["-q", "--hbase", &addr, "--hbase-admin", cluster::THRIFT2])
            .args(["--namespace", &victim, "load", "--input"])
            .arg(&clean)
            .args(["--date", DATE, "--regions", "4", "--writers", "3"])
            .args(["--batch-bytes", "2000"])
            .args(extra);
        cmd
    };
    let manifest = manifest_of(&clean, &victim);
    let mut child = through_gateway(&[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_a_finished_unit(&mut child, &manifest);
    gateway.kill();
    let failed = child.wait_with_output().unwrap();
    assert_eq!(
        failed.status.code(),
        Some(5),
        "a load whose gateway died must stop with exit 5: {}",
        stderr(&failed)
    );

    let _gateway = Gateway::start(&paths, port, timeout).unwrap();
    let resumed = run(&mut through_gateway(&["--resume"]));
    ok(resumed);

    assert_same_tables(&reference, &victim);
}

#[test]
fn friends_load_writes_friend_rows_counts_and_mutual_flags() {
    cluster::ensure();
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    let ok = |out: std::process::Output| assert!(out.status.success(), "{}", stderr(&out));
    ok(run(bin()
        .args(["-q", "clean", "--input"])
        .arg(sample_dir().join("canonical"))
        .arg("--output")
        .arg(&clean)
        .args(["--date", DATE])));
    let ns = cluster::namespace("friends_load");
    ok(load(&clean, &ns, &[]));
    ok(run(bin()
        .args(["-q", "--namespace", &ns, "friends", "--input"])
        .arg(clean.join("follows"))
        .arg("--output")
        .arg(dir.path().join("graph"))
        .args(["--date", DATE, "--load", "--regions", "4"])));

    let mut conn = Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();
    // The sample has two mutual pairs: 1195230310 with 1669879400 and with 5872301234.
    assert_eq!(table_digest(&mut conn, &format!("{ns}:friend")).0, 4);
    let friends_of = conn
        .scan_prefix(
            &format!("{ns}:friend"),
            &weibo_etl::hbase::layout::keys::user_key(1195230310),
            10,
        )
        .unwrap();
    let ids: Vec<i64> = friends_of
        .iter()
        .map(|r| i64::from_be_bytes(r.key[10..18].try_into().unwrap()))
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, vec![1669879400, 5872301234]);
    let user = row(
        &mut conn,
        &format!("{ns}:user"),
        &weibo_etl::hbase::layout::keys::user_key(1195230310),
    );
    assert_eq!(user.get("count:friends").unwrap(), 2i64.to_be_bytes());
    let edge = row(
        &mut conn,
        &format!("{ns}:follow"),
        &weibo_etl::hbase::layout::keys::follow_key(1669879400, 1195230310),
    );
    assert_eq!(edge.get("r:mutual"), Some(&b"1"[..]));
    let one_way = row(
        &mut conn,
        &format!("{ns}:follow"),
        &weibo_etl::hbase::layout::keys::follow_key(6012345678, 1669879400),
    );
    assert_eq!(one_way.get("r:mutual"), None);
    let fan = row(
        &mut conn,
        &format!("{ns}:fans"),
        &weibo_etl::hbase::layout::keys::fans_key(1195230310, 5872301234),
    );
    assert_eq!(fan.get("r:mutual"), Some(&b"1"[..]));

    // The lookups that read them: friends by uid, a user by screen name.
    let query = |args: &[&str]| run(bin().args(["--namespace", &ns, "query"]).args(args));
    let json = |out: &std::process::Output| -> Value {
        assert!(out.status.success(), "{}", stderr(out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let friends = json(&query(&["friends", "1195230310"]));
    let mut listed: Vec<i64> = friends["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    listed.sort();
    assert_eq!(listed, vec![1669879400, 5872301234]);
    assert_eq!(
        json(&query(&["friends", "6012345678"]))["result"],
        serde_json::json!([])
    );
    let found = json(&query(&["name", "何炅"]));
    assert_eq!(found["result"]["uid"], 1195230310);
    assert_eq!(found["result"]["user"]["cells"]["info:screen_name"], "何炅");
    assert_eq!(found["calls"].as_array().unwrap().len(), 2);
    let missing = query(&["name", "没有这个人"]);
    assert_eq!(missing.status.code(), Some(7), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("not found: no user named \"没有这个人\""),
        "{}",
        stderr(&missing)
    );
}

/// Three nights of raw crawls, as canonical CSV: each night's files under `raw/dt=<night>/`,
/// and all of them together under `union/` (one crawl holding what the nights hold).
const NIGHTS: [&str; 3] = ["2026-11-01", "2026-11-02", "2026-11-03"];

/// A, B, C and D; night 1: A→B, C→B and B's post P; night 2: D→B, and A→B crawled again,
/// P again with more reposts reported, A crawled again without the description it had;
/// night 3: B→A (A and B become friends), D reposts P, C comments on it.
fn write_nights(dir: &Path) {
    let (a, b, c, d) = (1000000001i64, 1000000002i64, 1000000003i64, 1000000004i64);
    let (p, r) = (4900000000000001i64, 4900000000000002i64);
    let users = |night: usize| {
        let mut s = String::from("uid,screen_name,description,crawl_time\n");
        for (uid, name) in [(a, "甲"), (b, "乙"), (c, "丙"), (d, "丁")] {
            let description = if uid == a && night == 0 {
                "旧简介"
            } else {
                ""
            };
            s += &format!("{uid},{name},{description},{} 23:00:00\n", NIGHTS[night]);
        }
        s
    };
    let follows = |night: usize, edges: &[(i64, i64)]| {
        let mut s = String::from("follower,followee,followed_at,crawl_time\n");
        for (x, y) in edges {
            s += &format!("{x},{y},2026-10-01 10:00:00,{} 23:10:00\n", NIGHTS[night]);
        }
        s
    };
    let posts = |night: usize, rows: &[(i64, i64, &str, u32)]| {
        let mut s = String::from("mid,uid,created_at,text,reposts_count,retweet_mid,crawl_time\n");
        for (mid, uid, rt, n) in rows {
            s += &format!(
                "{mid},{uid},2026-10-31 08:00:00,text {mid},{n},{rt},{} 23:20:00\n",
                NIGHTS[night]
            );
        }
        s
    };
    let files: [Vec<(&str, String)>; 3] = [
        vec![
            ("users.csv", users(0)),
            ("follows.csv", follows(0, &[(a, b), (c, b)])),
            ("posts.csv", posts(0, &[(p, b, "", 0)])),
        ],
        vec![
            ("users.csv", users(1)),
            ("follows.csv", follows(1, &[(d, b), (a, b)])),
            ("posts.csv", posts(1, &[(p, b, "", 5)])),
        ],
        vec![
            ("follows.csv", follows(2, &[(b, a)])),
            ("posts.csv", posts(2, &[(r, d, &p.to_string(), 0)])),
            (
                "comments.csv",
                format!(
                    "cid,mid,uid,created_at,text,crawl_time\n\
                     4900000000000101,{p},{c},2026-11-03 09:00:00,好,2026-11-03 23:30:00\n"
                ),
            ),
        ],
    ];
    for (night, files) in files.iter().enumerate() {
        for (name, text) in files {
            let at = dir.join("raw").join(format!("dt={}", NIGHTS[night]));
            std::fs::create_dir_all(&at).unwrap();
            std::fs::write(at.join(name), text).unwrap();
            let union = dir.join("union");
            std::fs::create_dir_all(&union).unwrap();
            std::fs::write(union.join(format!("n{night}-{name}")), text).unwrap();
        }
    }
}

/// Every cell of `user` and `post` in `ns` but the counters, without its timestamp:
/// "table rowkey-in-hex column" → value (a cell an older night wrote and a newer record lacks
/// must be gone).
fn profile_cells(conn: &mut Connection, ns: &str) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for table in ["user", "post"] {
        conn.scan_with(&format!("{ns}:{table}"), &[], |row| {
            for (col, cell) in &row.cells {
                if !col.starts_with(b"count:") || col.starts_with(b"count:reported") {
                    let key: String = row.key.iter().map(|b| format!("{b:02x}")).collect();
                    let col = String::from_utf8_lossy(col);
                    out.insert(format!("{table} {key} {col}"), cell.value.clone());
                }
            }
            true
        })
        .unwrap();
    }
    out
}

/// Every `count:` cell of `user` and `post` in `ns`: "table rowkey-in-hex column" → value.
pub fn counter_cells(conn: &mut Connection, ns: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for table in ["user", "post"] {
        conn.scan_with(&format!("{ns}:{table}"), &[], |row| {
            for (col, cell) in &row.cells {
                if col.starts_with(b"count:") {
                    let v = i64::from_be_bytes(cell.value.as_slice().try_into().unwrap());
                    let key: String = row.key.iter().map(|b| format!("{b:02x}")).collect();
                    let col = String::from_utf8_lossy(col);
                    out.insert(format!("{table} {key} {col}"), v);
                }
            }
            true
        })
        .unwrap();
    }
    out
}

fn counter(conn: &mut Connection, ns: &str, uid: i64, column: &str) -> i64 {
    let user = row(
        conn,
        &format!("{ns}:user"),
        &weibo_etl::hbase::layout::keys::user_key(uid),
    );
    let cell = user
        .get(column)
        .unwrap_or_else(|| panic!("{uid} has no {column}"));
    i64::from_be_bytes(cell.try_into().unwrap())
}

#[test]
fn nights_accumulate_counters_and_reruns_or_late_nights_change_nothing_seen() {
    cluster::ensure();
    let dir = tempfile::tempdir().unwrap();
    write_nights(dir.path());
    let ok = |out: std::process::Output| assert!(out.status.success(), "{}", stderr(&out));
    let clean = dir.path().join("clean");
    for night in NIGHTS {
        ok(run(bin()
            .args(["-q", "clean", "--input"])
            .arg(dir.path().join("raw").join(format!("dt={night}")))
            .arg("--output")
            .arg(&clean)
            .args(["--date", night])));
    }
    let load_night_with = |ns: &str, night: &str, extra: &[&str]| {
        ok(run(bin()
            .args(["-q", "--namespace", ns, "load", "--input"])
            .arg(&clean)
            .args(["--date", night, "--regions", "2", "--writers", "2"])
            .args(extra)));
    };
    let load_night = |ns: &str, night: &str| load_night_with(ns, night, &[]);
    let mut conn = Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();
    let (a, b) = (1000000001i64, 1000000002i64);

    // In date order: B's followers are 2, then 3 (A→B crawled again counts once), then 3.
    let ns = cluster::Scratch::new("nights");
    let expected = [(2, 0, 0), (3, 0, 0), (3, 1, 1)];
    for (night, (followers, following, reposts)) in NIGHTS.iter().zip(expected) {
        load_night(&ns, night);
        assert_eq!(
            counter(&mut conn, &ns, b, "count:followers"),
            followers,
            "{night}"
        );
        assert_eq!(
            counter(&mut conn, &ns, b, "count:following"),
            following,
            "{night}"
        );
        assert_eq!(counter(&mut conn, &ns, b, "count:posts"), 1, "{night}");
        assert_eq!(
            counter(&mut conn, &ns, b, "count:reposts_received"),
            reposts
        );
        assert_eq!(counter(&mut conn, &ns, a, "count:following"), 1, "{night}");
    }

    // The same counters as one load of everything crawled, cleaned as one night.
    let union_clean = dir.path().join("union-clean");
    ok(run(bin()
        .args(["-q", "clean", "--input"])
        .arg(dir.path().join("union"))
        .arg("--output")
        .arg(&union_clean)
        .args(["--date", NIGHTS[2]])));
    let union_ns = cluster::Scratch::new("nights_union");
    ok(run(bin()
        .args(["-q", "--namespace", &union_ns, "load", "--input"])
        .arg(&union_clean)
        .args(["--date", NIGHTS[2], "--regions", "2"])));
    let counters = counter_cells(&mut conn, &ns);
    assert!(counters.len() > 20, "{counters:?}");
    assert_eq!(counters, counter_cells(&mut conn, &union_ns));
    // And the same profiles: A's description, gone from its newer record, is gone.
    let profiles = profile_cells(&mut conn, &ns);
    assert!(
        profiles.keys().any(|k| k.ends_with("info:screen_name")),
        "{profiles:?}"
    );
    assert!(
        !profiles.keys().any(|k| k.ends_with("info:description")),
        "{profiles:?}"
    );
    assert_eq!(profiles, profile_cells(&mut conn, &union_ns));

    // Rerunning night 1, or night 3 again, leaves every cell a reader sees as it was.
    let tables = ["user", "post", "post_by_mid", "follow", "fans", "user_post"];
    let digests = |conn: &mut Connection| -> Vec<(u64, String)> {
        tables
            .iter()
            .map(|t| table_digest(conn, &format!("{ns}:{t}")))
            .collect()
    };
    let before = digests(&mut conn);
    let reruns = [
        (NIGHTS[0], "rerun of night 1 after night 3"),
        (NIGHTS[2], "night 3 loaded twice"),
    ];
    for (night, what) in reruns {
        let report = dir.path().join(format!("rerun-{night}.json"));
        load_night_with(&ns, night, &["--report", report.to_str().unwrap()]);
        assert_eq!(digests(&mut conn), before, "{what}");
        // Not the same values written again: none written at all.
        let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(r["load"]["users_changed"], 0, "{what}: {r}");
        assert_eq!(r["load"]["posts_changed"], 0, "{what}: {r}");
        assert_eq!(r["load"]["counters_as_of"], NIGHTS[2], "{what}: {r}");
    }

    // Night 2 crawled late: cleaned and loaded after night 3, it folds in, and the counters
    // are those of the nights in order. Its loads go through HFiles (a column's delete
    // marker in a bulk-loaded file).
    let late_clean = dir.path().join("late-clean");
    let late = cluster::Scratch::new("nights_late");
    for night in [NIGHTS[0], NIGHTS[2], NIGHTS[1]] {
        ok(run(bin()
            .args(["-q", "clean", "--input"])
            .arg(dir.path().join("raw").join(format!("dt={night}")))
            .arg("--output")
            .arg(&late_clean)
            .args(["--date", night])));
        ok(run(bin()
            .args(["-q", "--namespace", &late, "load", "--input"])
            .arg(&late_clean)
            .args(["--date", night, "--regions", "2", "--writers", "2"])
            .args(cluster::bulk_route(&late))));
        if night == NIGHTS[2] {
            assert_eq!(counter(&mut conn, &late, b, "count:followers"), 2);
        }
    }
    assert_eq!(counter_cells(&mut conn, &late), counters);
    assert_eq!(profile_cells(&mut conn, &late), profiles);
}

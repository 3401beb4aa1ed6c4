//! `run`: the plan, the lock and failing stages without the cluster, and on the local
//! cluster three generated nights through `jobs/nightly.toml` with raw data and outputs on
//! HDFS, against each night's cumulative truth; a rerun of an earlier night, a run killed in
//! its load stage, and two runs at once.

use std::path::Path;

use serde_json::Value;

use crate::harness::{bin, run, stderr, stdout};
use crate::test_clean::sample_dir;

fn job_file() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs/nightly.toml")
}

/// `run` of the nights `when` names, on local folders under `root`, each raw night the
/// canonical sample, and an HBase that refuses connections.
fn local_run_of(root: &Path, when: &[&str]) -> std::process::Command {
    let mut cmd = bin();
    cmd.args([
        "--hbase",
        "127.0.0.1:1",
        "--hbase-admin",
        "127.0.0.1:1",
        "run",
    ])
    .arg(job_file())
    .args(when)
    .arg("--set")
    .arg(format!("root={}", root.display()))
    .arg("--set")
    .arg(format!("raw={}", sample_dir().join("canonical").display()));
    cmd
}

/// [`local_run_of`] the night of 2026-11-29, with `extra` arguments.
fn local_run(root: &Path, extra: &[&str]) -> std::process::Command {
    let mut cmd = local_run_of(root, &["--date", "2026-11-29"]);
    cmd.args(extra);
    cmd
}

#[test]
fn dry_run_prints_every_stage_command_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut local_run(dir.path(), &["--dry-run"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(
        line.starts_with("nightly 2026-11-29 weibo: ok in "),
        "{line}"
    );
    assert!(
        line.trim_end().ends_with(
            "s; clean planned, load planned, friends planned, rank planned, inbox planned, \
                 cascades planned"
        ),
        "{line}"
    );
    let plan = stderr(&out);
    for stage in ["clean", "load", "friends", "rank", "inbox", "cascades"] {
        assert!(
            plan.contains(&format!("2026-11-29: {stage} would run: weibo-etl")),
            "{plan}"
        );
    }
    assert!(plan.contains("--max-reject-ratio 0.05"), "{plan}");
    assert!(plan.contains("friends --input"), "{plan}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a dry run writes nothing"
    );
    // --namespace on the command line is the run's namespace, as --set namespace= would be
    // (a local root: planning friends lists the follows nights, and needs no HDFS here).
    let out = run(bin()
        .args(["--namespace", "other", "run"])
        .arg(job_file())
        .args(["--date", "2026-11-29", "--dry-run", "--set"])
        .arg(format!("root={}", dir.path().display())));
    assert!(
        stdout(&out).starts_with("nightly 2026-11-29 other: ok"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("--namespace other"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_failed_stage_ends_the_run_with_its_code_and_committed_stages_skip_on_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.json");
    let out = run(local_run(dir.path(), &[]).arg("--report").arg(&copy));
    // load meets an HBase that refuses connections: the run ends with load's exit code.
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let line = stdout(&out);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.contains("FAILED") && line.contains("load failed (exit 5)"),
        "{line}"
    );
    assert!(
        line.contains("clean ") && !line.contains("friends"),
        "{line}"
    );
    let report = dir.path().join("_runs/weibo/dt=2026-11-29");
    let runs: Value =
        serde_json::from_slice(&std::fs::read(report.join("run.json")).unwrap()).unwrap();
    assert_eq!(runs["ok"], false);
    let status: Vec<&str> = runs["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["ran", "failed"]);
    assert_eq!(runs["stages"][0]["report"]["ok"], true);
    // --report gets the same document.
    let copied: Value = serde_json::from_slice(&std::fs::read(&copy).unwrap()).unwrap();
    assert_eq!(copied, runs);
    // The lock is released, and a rerun skips the committed clean.
    assert!(!dir.path().join("_runs/weibo/nightly.lock").exists());
    let out = run(&mut local_run(dir.path(), &[]));
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("clean skipped, load failed"),
        "{}",
        stdout(&out)
    );
    // --from a stage whose predecessors are not committed is refused.
    let out = run(&mut local_run(dir.path(), &["--from", "friends"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stage load of 2026-11-29 is not committed"),
        "{}",
        stderr(&out)
    );
    // A range stops at its first failing night, and says which.
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = local_run_of(dir.path(), &["--date-range", "2026-11-27..2026-11-29"]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    assert!(stdout(&out).starts_with("nightly 2026-11-27 weibo: FAILED"));
    assert!(
        stderr(&out).contains("--date-range stopped at 2026-11-27"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("_runs/weibo/dt=2026-11-28").exists());
}

#[test]
fn a_held_lock_is_exit_6_naming_its_owner_and_bad_job_files_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("_runs/weibo/nightly.lock");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let owner = serde_json::json!({
        "host": host.trim(), "pid": std::process::id(), "started_at": "2026-11-30T02:30:00Z"
    });
    std::fs::write(&lock, owner.to_string()).unwrap();
    let out = run(&mut local_run(dir.path(), &["--break-lock"]));
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("pid {}", std::process::id())),
        "{}",
        stderr(&out)
    );
    assert!(lock.exists(), "a live owner's lock is never broken");

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "stages = ['clean', 'shuffle']\n").unwrap();
    let out = run(bin().arg("run").arg(&bad).arg("--dry-run"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown stage `shuffle`"),
        "{}",
        stderr(&out)
    );
    let out = run(&mut local_run(
        dir.path(),
        &["--only", "shuffle", "--dry-run"],
    ));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[cfg(feature = "integration")]
mod on_the_cluster {
    use std::collections::BTreeMap;
    use std::process::{Command, Output, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::Value;
    use std::path::Path;
    use weibo_etl::dev::gen::nights::counters_digest;

    use weibo_etl::hbase::admin::{Admin, VersionedCell};
    use weibo_etl::hbase::{Connection, Timeouts};
    use weibo_etl::hdfs::FileSystems;

    use super::job_file;
    use crate::harness::{bin, cluster, feeds_as_of, run, stderr, stdout};
    use crate::test_load::table_digest;
    use crate::test_yarn::all_rows_of;

    const NIGHTS: [&str; 3] = ["2026-11-01", "2026-11-02", "2026-11-03"];

    /// `weibo-etl run jobs/nightly.toml` with the places under `root` (raw from `raw`) and the
    /// tables in `ns`; small regions and writers for a two-core box.
    fn run_cmd(root: &str, raw: &str, ns: &str, extra: &[&str]) -> Command {
        let mut cmd = bin();
        cmd.args(["-q", "--hdfs", cluster::HDFS, "run"])
            .arg(job_file())
            .args(["--set", &format!("root={root}")])
            .args(["--set", &format!("raw={raw}/dt={{date}}")])
            .args(["--set", &format!("namespace={ns}")])
            .args(["--set", "load.regions=2", "--set", "load.writers=2"])
            .args(["--set", "friends.regions=2"])
            .args(extra);
        // The job's --via auto hands HFiles over with this, when a night crosses the
        // threshold (the local cluster has no `hbase` script).
        let exe = env!("CARGO_BIN_EXE_weibo-etl");
        cmd.env("WEIBO_ETL_BULKLOAD_CMD", format!("{exe} cluster bulkload"));
        cmd
    }

    fn ok(out: Output) -> Output {
        assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
        out
    }

    /// Every counter of `ns` as the truth states them: uid → [followers, following, posts,
    /// reposts received, comments received, friends], mid → [reposts, comments].
    type Counters = (BTreeMap<i64, [u64; 6]>, BTreeMap<i64, [u64; 2]>);

    fn counters_in_hbase(conn: &mut Connection, ns: &str) -> Counters {
        let get = |row: &weibo_etl::hbase::Row, col: &str| -> u64 {
            row.get(col)
                .map_or(0, |v| i64::from_be_bytes(v.try_into().unwrap()) as u64)
        };
        let mut users = BTreeMap::new();
        conn.scan_with(&format!("{ns}:user"), &[], |row| {
            let uid = i64::from_be_bytes(row.key[2..10].try_into().unwrap());
            let cols = [
                "count:followers",
                "count:following",
                "count:posts",
                "count:reposts_received",
                "count:comments_received",
                "count:friends",
            ];
            users.insert(uid, cols.map(|c| get(&row, c)));
            true
        })
        .unwrap();
        let mut posts = BTreeMap::new();
        conn.scan_with(&format!("{ns}:post"), &[], |row| {
            let mid = i64::from_be_bytes(row.key[18..26].try_into().unwrap());
            posts.insert(
                mid,
                [get(&row, "count:reposts"), get(&row, "count:comments")],
            );
            true
        })
        .unwrap();
        (users, posts)
    }

    fn truth(fs: &FileSystems, raw: &str, night: &str) -> Value {
        let at = fs.parse(&format!("{raw}/dt={night}/_truth.json")).unwrap();
        serde_json::from_slice(&fs.read_to_vec(&at).unwrap()).unwrap()
    }

    fn truth_counters(t: &Value) -> Counters {
        let users = t["users"].as_object().unwrap();
        let posts = t["posts"].as_object().unwrap();
        let nums = |v: &Value| -> Vec<u64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
                .collect()
        };
        (
            users
                .iter()
                .map(|(k, v)| (k.parse().unwrap(), nums(v).try_into().unwrap()))
                .collect(),
            posts
                .iter()
                .map(|(k, v)| (k.parse().unwrap(), nums(v).try_into().unwrap()))
                .collect(),
        )
    }

    /// Row count and cell digest of every table a night writes, read with default versions.
    fn all_tables(conn: &mut Connection, ns: &str) -> Vec<(String, (u64, String))> {
        cluster::every_table()
            .into_iter()
            .chain(["rank", "inbox"])
            .map(|t| (t.to_string(), table_digest(conn, &format!("{ns}:{t}"))))
            .collect()
    }

    fn happybase_counters(ns: &str, uid: i64) -> Vec<i64> {
        let script = "import happybase, hashlib, struct, sys\n\
                      c = happybase.Connection('127.0.0.1', 9090)\n\
                      t = c.table(sys.argv[1])\n\
                      uid = int(sys.argv[2]).to_bytes(8, 'big')\n\
                      row = t.row(hashlib.md5(uid).digest()[:2] + uid)\n\
                      cols = ['followers', 'following', 'posts', 'friends']\n\
                      print(' '.join(str(struct.unpack('>q', row.get(('count:' + c).encode(), bytes(8)))[0]) for c in cols))\n";
        let out = Command::new("python3")
            .args(["-c", script, &format!("{ns}:user"), &uid.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect()
    }

    /// Starts `cmd` (a run) and kills it once its load has finished a unit, which the load's
    /// checkpoint `manifest` names.
    fn kill_in_load(fs: &FileSystems, mut cmd: Command, manifest: &str) {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let manifest = fs.parse(manifest).unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the run ended before its load was cut"
            );
            let units = fs
                .read_to_vec(&manifest)
                .ok()
                .and_then(|b| serde_json::from_slice::<Vec<String>>(&b).ok())
                .map_or(0, |u| u.len());
            if units >= 1 {
                break;
            }
            assert!(Instant::now() < deadline, "the load never finished a unit");
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn three_nights_rerun_kill_and_overlap() {
        cluster::ensure();
        let fs = FileSystems::new(cluster::HDFS);
        let base = format!("{}/it_run_{}", cluster::HDFS, std::process::id());
        let raw = format!("{base}/raw");
        ok(run(bin().args([
            "-q",
            "--hdfs",
            cluster::HDFS,
            "gen",
            "--out",
            &raw,
            "--nights",
            "3",
            "--preset",
            "tiny",
            "--date",
            NIGHTS[0],
        ])));
        // A fresh connection for each look: the gateway drops a socket idle for 60 s, and the
        // runs in between take longer.
        let conn = || Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();

        // Night after night, every counter equals that night's cumulative truth.
        let root = format!("{base}/main");
        let ns = cluster::Scratch::new("run");
        for night in NIGHTS {
            let out = ok(run(&mut run_cmd(&root, &raw, &ns, &["--date", night])));
            let line = stdout(&out);
            assert!(
                line.starts_with(&format!("nightly {night} {ns}: ok")),
                "{line}"
            );
            assert_eq!(line.lines().count(), 1, "{line}");
            let t = truth(&fs, &raw, night);
            let want = truth_counters(&t);
            let got = counters_in_hbase(&mut conn(), &ns);
            assert_eq!(got.0, want.0, "user counters after {night}");
            assert_eq!(got.1, want.1, "post counters after {night}");
            assert_eq!(
                counters_digest(&got.0, &got.1),
                t["digest"].as_str().unwrap()
            );
            let friend_rows = table_digest(&mut conn(), &format!("{ns}:friend")).0;
            assert_eq!(
                friend_rows,
                2 * t["friend_pairs"].as_u64().unwrap(),
                "{night}"
            );
            // Both edges of every pair so far are flagged mutual, in follow and in fans.
            for table in ["follow", "fans"] {
                let mut mutual = 0;
                conn()
                    .scan_with(&format!("{ns}:{table}"), &[], |row| {
                        mutual += u64::from(row.get("r:mutual") == Some(&b"1"[..]));
                        true
                    })
                    .unwrap();
                assert_eq!(mutual, friend_rows, "{table} after {night}");
            }
        }
        let t3 = truth_counters(&truth(&fs, &raw, NIGHTS[2]));
        let (uid, c) = t3.0.iter().max_by_key(|(_, c)| (c[5], c[0])).unwrap();
        assert!(c[5] > 0, "a user with friends");
        let want: Vec<i64> = [c[0], c[1], c[2], c[5]].iter().map(|&v| v as i64).collect();
        assert_eq!(happybase_counters(&ns, *uid), want);
        let run_report = fs
            .read_to_vec(
                &fs.parse(&format!("{root}/_runs/{ns}/dt={}/run.json", NIGHTS[2]))
                    .unwrap(),
            )
            .unwrap();
        let run_report: Value = serde_json::from_slice(&run_report).unwrap();
        assert_eq!(run_report["ok"], true);
        assert_eq!(run_report["stages"].as_array().unwrap().len(), 6);
        // Night 3's clean folded nights 1 and 2 into one run per entity, and the stages after
        // it read that run in their place: the counters and pairs above come from it.
        let stage = |name: &str| -> Value {
            let stages = run_report["stages"].as_array().unwrap();
            stages.iter().find(|s| s["stage"] == name).unwrap()["report"].clone()
        };
        let clean = stage("clean");
        assert_eq!(clean["clean"]["history"]["runs_written"], 5, "{clean}");
        assert_eq!(stage("load")["load"]["history_nights"], 3);
        for entity in ["users", "posts", "follows", "comments", "reposts"] {
            let run = format!(
                "{root}/clean/{entity}/_history/run={}_{}/_SUCCESS",
                NIGHTS[0], NIGHTS[1]
            );
            assert!(fs.exists(&fs.parse(&run).unwrap()).unwrap(), "{run}");
        }

        // Night 1 again after night 3, forced through every stage: nothing a reader sees moves.
        let tables = all_tables(&mut conn(), &ns);
        ok(run(&mut run_cmd(
            &root,
            &raw,
            &ns,
            &["--date", NIGHTS[0], "--force"],
        )));
        assert_eq!(
            all_tables(&mut conn(), &ns),
            tables,
            "rerun of night 1 after night 3"
        );
        // Unforced, every stage is committed and skipped.
        let out = ok(run(&mut run_cmd(&root, &raw, &ns, &["--date", NIGHTS[2]])));
        assert!(stdout(&out).contains(
            "clean skipped, load skipped, friends skipped, rank skipped, inbox skipped, \
             cascades skipped"
        ));

        // A run killed in its load stage: the next one (breaking the stale lock) finishes with the
        // same tables as the uninterrupted run.
        // This namespace computes its counters in key partitions (a budget far below the
        // data's), so equal tables also prove the partitioned snapshot diffs are the same as
        // the single pass's.
        let killed_root = format!("{base}/killed");
        let killed = cluster::Scratch::new("run_killed");
        let split = ["--set", "load.memory-budget=4KiB"];
        let killed_run = |extra: &[&str]| {
            let mut cmd = run_cmd(&killed_root, &raw, &killed, extra);
            cmd.args(split);
            cmd
        };
        for night in &NIGHTS[..2] {
            ok(run(&mut killed_run(&["--date", night])));
        }
        let slow = ["--set", "load.batch-bytes=1", "--set", "load.writers=1"];
        let mut cmd = killed_run(&["--date", NIGHTS[2]]);
        cmd.args(slow);
        kill_in_load(
            &fs,
            cmd,
            &format!("{killed_root}/clean/_load/dt={}/{killed}.json", NIGHTS[2]),
        );
        let out = run(&mut killed_run(&["--date", NIGHTS[2]]));
        assert_eq!(out.status.code(), Some(6), "a stale lock: {}", stderr(&out));
        assert!(stderr(&out).contains("--break-lock"), "{}", stderr(&out));
        let out = ok(run(&mut killed_run(&["--date", NIGHTS[2], "--break-lock"])));
        assert!(
            stdout(&out).contains("clean skipped, load "),
            "{}",
            stdout(&out)
        );
        // The load resumed its checkpoint. Night 1 counted in key partitions; night 3
        // carried night 2's snapshot forward, which streams through one (docs/nightly.md).
        let load_report = |night: &str| -> Value {
            let at = format!("{killed_root}/_runs/{killed}/dt={night}/load.json");
            serde_json::from_slice(&fs.read_to_vec(&fs.parse(&at).unwrap()).unwrap()).unwrap()
        };
        let first = load_report(NIGHTS[0]);
        assert!(
            first["load"]["counter_partitions"].as_u64().unwrap() > 1,
            "{first}"
        );
        let load = load_report(NIGHTS[2]);
        assert!(
            load["load"]["units_skipped"].as_u64().unwrap() >= 1,
            "{load}"
        );
        assert_eq!(load["load"]["counters_carried"], true, "{load}");
        assert_eq!(load["load"]["counter_partitions"], 1, "{load}");
        assert_eq!(
            all_tables(&mut conn(), &killed),
            tables,
            "killed, then finished"
        );

        // Two runs at once: one is refused with exit 6, the other's result is one run's.
        let both_root = format!("{base}/both");
        let both = cluster::Scratch::new("run_both");
        let first = run_cmd(&both_root, &raw, &both, &["--date", NIGHTS[0]])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lock = fs
            .parse(&format!("{both_root}/_runs/{both}/nightly.lock"))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !fs.exists(&lock).unwrap() {
            assert!(
                Instant::now() < deadline,
                "the first run never took its lock"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let second = run(&mut run_cmd(
            &both_root,
            &raw,
            &both,
            &["--date", NIGHTS[0]],
        ));
        assert_eq!(second.status.code(), Some(6), "{}", stderr(&second));
        ok(first.wait_with_output().unwrap());
        let want = truth_counters(&truth(&fs, &raw, NIGHTS[0]));
        assert_eq!(counters_in_hbase(&mut conn(), &both), want);

        // Night 2 crawled late, run after night 3: its difference is folded into night 3's
        // counters and friends, which then equal night 3's truth.
        let late_root = format!("{base}/late");
        let late = cluster::Scratch::new("run_late");
        for night in [NIGHTS[0], NIGHTS[2], NIGHTS[1]] {
            let out = ok(run(&mut run_cmd(
                &late_root,
                &raw,
                &late,
                &["--date", night],
            )));
            if night == NIGHTS[1] {
                let line = stdout(&out);
                for stage in ["friends", "rank", "inbox", "cascades"] {
                    assert!(
                        line.contains(&format!("{stage} of {}", NIGHTS[2])),
                        "{line}"
                    );
                }
            }
        }
        let t = truth(&fs, &raw, NIGHTS[2]);
        assert_eq!(counters_in_hbase(&mut conn(), &late), truth_counters(&t));
        let friend_rows = table_digest(&mut conn(), &format!("{late}:friend")).0;
        assert_eq!(friend_rows, 2 * t["friend_pairs"].as_u64().unwrap());
        fs.delete(&fs.parse(&base).unwrap()).unwrap();
    }

    /// A table's cells as a reader sees them: the newest value of every column of every row
    /// whose key `keep` accepts. No timestamps: a counter untouched since an earlier night
    /// keeps that night's time, where a recomputation writes it with its own.
    fn cells(
        conn: &mut Connection,
        table: &str,
        keep: impl Fn(&[u8]) -> bool,
    ) -> BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>> {
        let mut cells = BTreeMap::new();
        conn.scan_with(table, &[], |row| {
            if keep(&row.key) {
                for (col, cell) in &row.cells {
                    cells.insert((row.key.clone(), col.clone()), cell.value.clone());
                }
            }
            true
        })
        .unwrap();
        cells
    }

    /// Every version of every cell of the `inbox` table (the feeds are K versions a
    /// followee), with its timestamp: a version is the post's time, part of the feed.
    fn inbox_versions(ns: &str) -> BTreeMap<Vec<u8>, Vec<VersionedCell>> {
        let table = format!("{ns}:inbox");
        let keys: Vec<Vec<u8>> = cells(
            &mut Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap(),
            &table,
            |_| true,
        )
        .into_keys()
        .map(|(row, _)| row)
        .collect();
        let mut admin = Admin::connect(cluster::THRIFT2, Timeouts::default()).unwrap();
        keys.into_iter()
            .map(|key| {
                let mut versions = admin.get_versions(&table, &key, 1000).unwrap();
                versions.sort();
                (key, versions)
            })
            .collect()
    }

    /// Asserts that namespace `ns` and graph root `graph` hold what the recomputation `reference`
    /// holds as of `date`: every HBase table (the `rank` rows of that day), and every graph
    /// output of that date.
    fn assert_same_as(
        tmp: &Path,
        (ns, graph): (&str, &str),
        reference: &Reference,
        date: &str,
        after: &str,
    ) {
        let conn = || Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();
        let (ref_ns, ref_graph) = (reference.ns.as_str(), &reference.graph);
        for table in cluster::every_table() {
            let got = cells(&mut conn(), &format!("{ns}:{table}"), |_| true);
            let want = cells(&mut conn(), &format!("{ref_ns}:{table}"), |_| true);
            assert!(!want.is_empty(), "{table} of the reference is empty");
            assert_first_difference(&got, &want, &format!("{table} after {after}"));
        }
        let day = format!(":{}:", date.replace('-', ""));
        let of_the_day = |key: &[u8]| String::from_utf8_lossy(key).contains(&day);
        let got = board_as_read(cells(&mut conn(), &format!("{ns}:rank"), of_the_day));
        let want = board_as_read(cells(&mut conn(), &format!("{ref_ns}:rank"), of_the_day));
        assert!(!want.is_empty(), "no board of {date}");
        assert_first_difference(&got, &want, &format!("rank after {after}"));
        assert_first_difference(
            &inbox_versions(ns),
            &inbox_versions(ref_ns),
            &format!("inbox after {after}"),
        );
        for output in [
            "friends",
            "friend_counts",
            "rank",
            "cascades",
            "repost_paths",
        ] {
            let got = all_rows_of(tmp, &format!("{graph}/{output}/dt={date}"));
            let want = all_rows_of(tmp, &format!("{ref_graph}/{output}/dt={date}"));
            assert_eq!(got, want, "{output} of {date} after {after}");
        }
        // The inbox partitions hold what each night adds: read up to the date, they are the
        // reference's whole feeds (docs/design/inbox.md, "Reading the Parquet").
        let (feeds, stars) = feeds_up_to(tmp, graph, date);
        let want = all_rows_of(tmp, &format!("{ref_graph}/inbox/dt={date}"));
        assert_eq!(feeds, want, "inbox of {date} after {after}");
        let want = all_rows_of(tmp, &format!("{ref_graph}/inbox_celebrities/dt={date}"));
        assert_eq!(stars, want, "inbox_celebrities of {date} after {after}");
    }

    /// The feeds as of `date` read from every committed `inbox` partition under `graph` up
    /// to it ([`feeds_as_of`]), and the celebrities as of `date`: each uid's newest row.
    fn feeds_up_to(tmp: &Path, graph: &str, date: &str) -> (Vec<String>, Vec<String>) {
        let fs = FileSystems::new(cluster::HDFS);
        let mut nights: Vec<String> = fs
            .list(&fs.parse(&format!("{graph}/inbox")).unwrap(), false)
            .unwrap()
            .into_iter()
            .filter(|e| fs.exists(&e.location.join("_SUCCESS")).unwrap())
            .filter_map(|e| {
                e.location
                    .file_name()?
                    .strip_prefix("dt=")
                    .map(String::from)
            })
            .filter(|d| d.as_str() <= date)
            .collect();
        nights.sort();
        let record = fs
            .parse(&format!("{graph}/inbox/dt={date}/_feeds.json"))
            .unwrap();
        let record: Value = serde_json::from_slice(&fs.read_to_vec(&record).unwrap()).unwrap();
        let k = record["k"].as_u64().unwrap() as usize;
        let mut partitions = Vec::new();
        let mut stars: BTreeMap<i64, String> = BTreeMap::new();
        for night in &nights {
            partitions.push(all_rows_of(tmp, &format!("{graph}/inbox/dt={night}")));
            for row in all_rows_of(tmp, &format!("{graph}/inbox_celebrities/dt={night}")) {
                let uid = serde_json::from_str::<Value>(&row).unwrap()["uid"]
                    .as_i64()
                    .unwrap();
                stars.insert(uid, row);
            }
        }
        let uids: Vec<i64> = stars.keys().copied().collect();
        let mut rows: Vec<String> = stars.into_values().collect();
        rows.sort();
        (feeds_as_of(&partitions, &uids, k), rows)
    }

    /// A day's boards as `query rank` reads them: the rows up to the `r:of` of each board's
    /// first row. A later run of the day that ranks fewer users leaves the rows past it
    /// (docs/hbase-layout.md): a delete at the day's timestamp would hide a board that grows
    /// back at that same timestamp.
    fn board_as_read(
        cells: BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>>,
    ) -> BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>> {
        let split = |key: &[u8]| -> (String, u64) {
            let key = String::from_utf8_lossy(key).to_string();
            let (board, rank) = key.rsplit_once(':').unwrap();
            (board.to_string(), rank.parse().unwrap())
        };
        let mut of = BTreeMap::new();
        for ((row, col), value) in &cells {
            let (board, rank) = split(row);
            if rank == 1 && col.as_slice() == b"r:of" {
                of.insert(
                    board,
                    i64::from_be_bytes(value[..].try_into().unwrap()) as u64,
                );
            }
        }
        cells
            .into_iter()
            .filter(|((row, _), _)| {
                let (board, rank) = split(row);
                of.get(&board).is_some_and(|&n| rank <= n)
            })
            .collect()
    }

    /// Fails naming the first key where two maps differ, and how many do.
    fn assert_first_difference<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
        got: &BTreeMap<K, V>,
        want: &BTreeMap<K, V>,
        what: &str,
    ) {
        let differ: Vec<&K> = got
            .keys()
            .chain(want.keys())
            .filter(|k| got.get(k) != want.get(k))
            .collect();
        if let Some(k) = differ.first() {
            panic!(
                "{what}: {} keys differ, the first {k:?}: {:?}, a full recomputation {:?}",
                differ.len(),
                got.get(k),
                want.get(k)
            );
        }
    }

    /// A recomputation as of one date: its namespace and graph root.
    struct Reference {
        ns: String,
        graph: String,
    }

    /// The plain history a nightly namespace is checked against: every raw night cleaned on
    /// its own and never folded (no `_history`), loaded one night after another in date
    /// order into a namespace of its own (a late night starts a new one), and friends, rank,
    /// inbox and cascades computed once over all of it into a fresh graph root, so that
    /// nothing they carry from night to night (load markers, inbox bases) is used.
    struct Replay {
        root: String,
        raw: String,
        cleaned: Vec<String>,
        ns: Option<cluster::Scratch>,
        loaded: Vec<String>,
        /// Namespaces and graph roots made so far: each gets a name of its own.
        made: usize,
    }

    impl Replay {
        fn stage(&self, root: &str, ns: &str, stage: &str, date: &str, graph: &str) {
            ok(run(&mut run_cmd(
                root,
                &self.raw,
                ns,
                &[
                    "--only",
                    stage,
                    "--date",
                    date,
                    "--set",
                    &format!("clean={}/clean", self.root),
                    "--set",
                    &format!("graph={graph}"),
                ],
            )));
        }

        fn recompute(&mut self, fs: &FileSystems, nights: &[&str], date: &str) -> Reference {
            let mut nights: Vec<String> = nights.iter().map(|n| n.to_string()).collect();
            nights.sort();
            for night in &nights {
                if !self.cleaned.contains(night) {
                    let root = &self.root;
                    self.stage(root, "ref_clean", "clean", night, &format!("{root}/graph"));
                    self.cleaned.push(night.clone());
                }
            }
            for entity in ["users", "posts", "follows", "comments", "reposts"] {
                let history = fs
                    .parse(&format!("{}/clean/{entity}/_history", self.root))
                    .unwrap();
                if fs.exists(&history).unwrap() {
                    fs.delete(&history).unwrap();
                }
            }
            if self.ns.is_none() || !nights.starts_with(&self.loaded) {
                self.made += 1;
                self.ns = Some(cluster::Scratch::new(&format!("run_ref{}", self.made)));
                self.loaded.clear();
            }
            let ns = self.ns.as_ref().unwrap().to_string();
            let root = format!("{}/{ns}", self.root);
            for night in &nights[self.loaded.len()..] {
                self.stage(&root, &ns, "load", night, &format!("{root}/graph"));
            }
            self.loaded = nights;
            self.made += 1;
            let graph = format!("{root}/graph{}", self.made);
            for stage in ["friends", "rank", "inbox", "cascades"] {
                self.stage(&root, &ns, stage, date, &graph);
            }
            Reference { ns, graph }
        }
    }

    /// Ten nights through `jobs/nightly.toml`, with an early night rerun, a late night and a
    /// night killed in its load and resumed: after each, the tables and the graph outputs equal
    /// a full recomputation over the nights run so far (docs/nightly.md, "Graph outputs across nights").
    #[test]
    fn ten_nights_equal_a_full_recomputation_after_each() {
        cluster::ensure();
        let fs = FileSystems::new(cluster::HDFS);
        let tmp = tempfile::tempdir().unwrap();
        let base = format!("{}/it_nights_{}", cluster::HDFS, std::process::id());
        let raw = format!("{base}/raw");
        let nights: Vec<String> = (1..=10).map(|d| format!("2026-11-{d:02}")).collect();
        ok(run(bin().args([
            "-q",
            "--hdfs",
            cluster::HDFS,
            "gen",
            "--out",
            &raw,
            "--nights",
            "10",
            "--preset",
            "tiny",
            "--date",
            &nights[0],
        ])));
        let root = format!("{base}/nightly");
        let graph = format!("{root}/graph");
        let ns = cluster::Scratch::new("run_nights");
        let mut replay = Replay {
            root: format!("{base}/reference"),
            raw: raw.clone(),
            cleaned: Vec::new(),
            ns: None,
            loaded: Vec::new(),
            made: 0,
        };
        // The order the nights arrive in: night 5 comes late, after night 6.
        let order = [1, 2, 3, 4, 6, 5, 7, 8, 9, 10].map(|d| nights[d - 1].as_str());
        let mut done: Vec<&str> = Vec::new();
        let mut last = None;
        for night in order {
            if night == nights[6] {
                // Killed in its load, then resumed by the next run (breaking the stale lock).
                let mut cmd = run_cmd(&root, &raw, &ns, &["--date", night]);
                cmd.args(["--set", "load.batch-bytes=1", "--set", "load.writers=1"]);
                kill_in_load(
                    &fs,
                    cmd,
                    &format!("{root}/clean/_load/dt={night}/{ns}.json"),
                );
                ok(run(&mut run_cmd(
                    &root,
                    &raw,
                    &ns,
                    &["--date", night, "--break-lock"],
                )));
            } else {
                ok(run(&mut run_cmd(&root, &raw, &ns, &["--date", night])));
            }
            // The counters of a night later than every loaded one carry the snapshot forward
            // (docs/nightly.md); a late night's are computed over every night.
            let load = format!("{root}/_runs/{ns}/dt={night}/load.json");
            let load: Value =
                serde_json::from_slice(&fs.read_to_vec(&fs.parse(&load).unwrap()).unwrap())
                    .unwrap();
            let later = done.iter().all(|d| *d < night);
            let carried = night != nights[0] && later;
            assert_eq!(load["load"]["counters_carried"], carried, "{night}: {load}");
            // So do rank's followers, from the state of the night before.
            if carried {
                let rank = format!("{root}/_runs/{ns}/dt={night}/rank.json");
                let rank: Value =
                    serde_json::from_slice(&fs.read_to_vec(&fs.parse(&rank).unwrap()).unwrap())
                        .unwrap();
                let before = done.iter().max().unwrap();
                assert_eq!(
                    rank["rank"]["followers_carried_from"], **before,
                    "{night}: {rank}"
                );
                // And friends and cascades, from their outputs of the night before.
                for (stage, key) in [("friends", "friends"), ("cascades", "cascades")] {
                    let at = format!("{root}/_runs/{ns}/dt={night}/{stage}.json");
                    let report: Value =
                        serde_json::from_slice(&fs.read_to_vec(&fs.parse(&at).unwrap()).unwrap())
                            .unwrap();
                    assert_eq!(report[key]["carried_from"], **before, "{night}: {report}");
                }
            }
            done.push(night);
            let date = *done.iter().max().unwrap();
            let now = replay.recompute(&fs, &done, date);
            assert_same_as(tmp.path(), (&ns, &graph), &now, date, night);
            if night == nights[3] {
                // Night 2 again, forced through every stage: nothing a reader sees moves.
                ok(run(&mut run_cmd(
                    &root,
                    &raw,
                    &ns,
                    &["--date", &nights[1], "--force"],
                )));
                assert_same_as(
                    tmp.path(),
                    (&ns, &graph),
                    &now,
                    date,
                    "night 2 forced again",
                );
            }
            last = Some(now);
        }
        repair_gives_the_same_state_and_tables(
            &fs,
            tmp.path(),
            (&root, &raw, &ns),
            (&last.expect("ten nights ran"), &nights[9]),
        );
        drop(replay);
        fs.delete(&fs.parse(&base).unwrap()).unwrap();
    }

    /// Every file of the state a nightly namespace carries forward, by path under `root`,
    /// with its bytes: the compacted history, the newest counter snapshot, the graph load
    /// markers, rank's newest followers state (docs/nightly.md, "Repair").
    fn state_files(fs: &FileSystems, root: &str, ns: &str) -> BTreeMap<String, Vec<u8>> {
        let newest_in = |dir: &str| -> String {
            let newest = fs
                .list(&fs.parse(dir).unwrap(), false)
                .unwrap()
                .into_iter()
                .filter_map(|e| e.location.file_name())
                .filter(|name| name.starts_with("dt="))
                .max()
                .unwrap_or_else(|| panic!("no committed state in {dir}"));
            format!("{dir}/{newest}")
        };
        let state = format!("{root}/clean/_load/state/{ns}");
        let followers = format!("{root}/graph/rank/_followers");
        let places = ["users", "posts", "follows", "comments", "reposts"]
            .map(|entity| format!("{root}/clean/{entity}/_history"))
            .into_iter()
            .chain([
                newest_in(&state),
                format!("{root}/graph/_load"),
                newest_in(&followers),
            ]);
        let prefix = fs.parse(root).unwrap().to_string();
        let mut files = BTreeMap::new();
        for place in places {
            let at = fs.parse(&place).unwrap();
            for e in fs.list(&at, true).unwrap() {
                if !e.is_dir {
                    let path = e.location.to_string();
                    let short = path.strip_prefix(&prefix).unwrap().to_string();
                    files.insert(short, fs.read_to_vec(&e.location).unwrap());
                }
            }
        }
        files
    }

    /// The state deleted and rebuilt as docs/nightly.md's "Repair" says (`history rebuild`,
    /// then the newest night from `load` on): the same bytes, and the same tables and
    /// outputs as the recomputation `reference` of `date`.
    fn repair_gives_the_same_state_and_tables(
        fs: &FileSystems,
        tmp: &Path,
        (root, raw, ns): (&str, &str, &str),
        (reference, date): (&Reference, &str),
    ) {
        let before = state_files(fs, root, ns);
        assert!(
            before.keys().any(|f| f.contains("/_history/run=")),
            "{before:?}"
        );
        assert!(before.keys().any(|f| f.ends_with("/state.json")));
        assert!(before.keys().any(|f| f.starts_with("/graph/_load/")));
        assert!(before
            .keys()
            .any(|f| f.ends_with("/_followers/dt=2026-11-10/nights.json")));
        let clean = format!("{root}/clean");
        let check = || {
            let mut cmd = bin();
            cmd.args(["-q", "--hdfs", cluster::HDFS, "history", "check", "--input"]);
            run(cmd.arg(&clean))
        };
        let line = format!("counter snapshot of {ns} as of {date}: ");
        let same = |out: &Output| {
            let text = stdout(out);
            let found = text.lines().find(|l| l.starts_with(&line));
            let found = found.unwrap_or_else(|| panic!("no {line:?} in {text}"));
            found.ends_with("; 0 users and 0 posts differ")
        };
        assert!(same(&ok(check())));
        // A snapshot that holds an older night's user counters is found out.
        let snapshots = format!("{clean}/_load/state/{ns}");
        let mut dated: Vec<String> = fs
            .list(&fs.parse(&snapshots).unwrap(), false)
            .unwrap()
            .into_iter()
            .filter_map(|e| e.location.file_name())
            .filter(|name| name.starts_with("dt="))
            .collect();
        dated.sort();
        let (older, newest) = (&dated[dated.len() - 2], &dated[dated.len() - 1]);
        let users_of = |dir: &str| -> Vec<_> {
            let at = fs.parse(&format!("{snapshots}/{dir}")).unwrap();
            let files = fs.list(&at, false).unwrap().into_iter();
            files
                .filter(|e| e.location.file_name().unwrap().starts_with("users-"))
                .collect()
        };
        for e in users_of(newest) {
            fs.delete(&e.location).unwrap();
        }
        for e in users_of(older) {
            let name = e.location.file_name().unwrap();
            let to = fs.parse(&format!("{snapshots}/{newest}/{name}")).unwrap();
            fs.write_atomic(&to, &fs.read_to_vec(&e.location).unwrap())
                .unwrap();
        }
        let wrong = check();
        assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
        assert!(!same(&wrong), "{}", stdout(&wrong));
        let entities = ["users", "posts", "follows", "comments", "reposts"];
        for place in entities
            .map(|entity| format!("clean/{entity}/_history"))
            .into_iter()
            .chain([
                format!("clean/_load/state/{ns}"),
                "graph/_load".into(),
                "graph/rank/_followers".into(),
            ])
        {
            fs.delete(&fs.parse(&format!("{root}/{place}")).unwrap())
                .unwrap();
        }
        ok(run(bin().args([
            "-q",
            "--hdfs",
            cluster::HDFS,
            "history",
            "rebuild",
            "--input",
            &clean,
        ])));
        ok(run(&mut run_cmd(
            root,
            raw,
            ns,
            &["--date", date, "--from", "load"],
        )));
        let after = state_files(fs, root, ns);
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>()
        );
        for (file, bytes) in &before {
            assert!(&after[file] == bytes, "{file} differs after the repair");
        }
        assert!(same(&ok(check())));
        let graph = format!("{root}/graph");
        assert_same_as(tmp, (ns, &graph), reference, date, "the state rebuilt");
    }
}

//! `yarn submit` on the local cluster's YARN (`cluster up --yarn`): a job's slices run as the
//! map tasks of a Hadoop Streaming job, held against the same job run on one machine.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::harness::{bin, cluster, run, stderr};
use crate::test_clean::{parquet_rows, DATE};

fn ok(out: std::process::Output) -> std::process::Output {
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// Generated cleaned data (3,000 users) put on HDFS under `<root>/clean`.
fn clean_on_hdfs(dir: &Path, root: &str) -> String {
    let clean = crate::test_load::generated_clean(dir);
    let url = format!("{root}/clean");
    ok(run(bin().args(["-q", "fs", "put"]).arg(&clean).arg(&url)));
    url
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `friends` on one machine; returns its report.
fn friends_here(dir: &Path, clean: &str, output: &str) -> serde_json::Value {
    let file = dir.join("single.json");
    ok(run(bin()
        .args(["-q", "--report"])
        .arg(&file)
        .args(["friends", "--input"])
        .arg(format!("{clean}/follows"))
        .args(["--output", output, "--date", DATE])));
    report(&file)
}

/// `weibo-etl [global] --report <report> yarn submit --submitter local --tasks <tasks> --
/// <job>`, with `env` set for the submitter: the one command every test here submits.
fn yarn_submit<S: AsRef<std::ffi::OsStr>>(
    global: &[&str],
    report: &Path,
    tasks: u32,
    job: impl IntoIterator<Item = S>,
    env: &[(&str, &str)],
) -> std::process::Command {
    let mut cmd = bin();
    cmd.args(global)
        .arg("--report")
        .arg(report)
        .args(["yarn", "submit", "--submitter", "local", "--tasks"])
        .arg(tasks.to_string())
        .arg("--")
        .args(job);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// `friends` through YARN in `tasks` tasks, with `env` set for the submitter; returns its
/// report.
fn friends_on_yarn(
    dir: &Path,
    clean: &str,
    output: &str,
    tasks: u32,
    env: &[(&str, &str)],
) -> serde_json::Value {
    let file = dir.join("yarn.json");
    let follows = format!("{clean}/follows");
    let job = [
        "friends", "--input", &follows, "--output", output, "--date", DATE,
    ];
    let out = ok(run(&mut yarn_submit(&[], &file, tasks, job, env)));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(": SUCCEEDED ("),
        "the job's state and tracking URL are printed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    report(&file)
}

/// Every file under a URL, relative to it.
fn files_under(url: &str) -> Vec<String> {
    let fs = weibo_etl::hdfs::FileSystems::new(cluster::HDFS);
    let root = fs.parse(url).unwrap();
    let mut files: Vec<String> = fs
        .list(&root, true)
        .unwrap()
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.location.relative_to(&root).unwrap())
        .collect();
    files.sort();
    files
}

/// The rows of every Parquet file of a partition on HDFS, slices included, sorted.
pub fn all_rows_of(dir: &Path, url: &str) -> Vec<String> {
    let local = dir.join(format!("get-{}", weibo_etl::hash::text(url.as_bytes())));
    ok(run(bin().args(["-q", "fs", "get", url]).arg(&local)));
    let mut folders = vec![local.clone()];
    let mut rows = Vec::new();
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            }
        }
        rows.extend(parquet_rows(&folder).lines().map(String::from));
    }
    rows.sort();
    rows
}

/// [`all_rows_of`] for a table whose rows are distinct (friend pairs): each is there once.
fn rows_of(dir: &Path, url: &str) -> BTreeSet<String> {
    let rows = all_rows_of(dir, url);
    let set: BTreeSet<String> = rows.iter().cloned().collect();
    assert_eq!(set.len(), rows.len(), "a row twice under {url}");
    set
}

/// friend_counts summed by uid (a sliced run holds one partial count per slice).
fn counts_of(dir: &Path, url: &str) -> BTreeMap<i64, u64> {
    let mut counts = BTreeMap::new();
    for line in all_rows_of(dir, url) {
        let row: serde_json::Value = serde_json::from_str(&line).unwrap();
        *counts.entry(row["uid"].as_i64().unwrap()).or_default() +=
            row["friends"].as_u64().unwrap();
    }
    counts
}

#[test]
fn friends_through_yarn_in_four_tasks_equals_the_single_machine_run() {
    cluster::ensure_yarn();
    let dir = tempfile::tempdir().unwrap();
    let root = format!(
        "{}/it/{}",
        cluster::HDFS,
        cluster::namespace("yarn_friends")
    );
    let clean = clean_on_hdfs(dir.path(), &root);
    let (here, there) = (format!("{root}/single"), format!("{root}/yarn"));
    let single = friends_here(dir.path(), &clean, &here);
    let yarn = friends_on_yarn(dir.path(), &clean, &there, 4, &[]);

    let partition = |out: &str, table: &str| format!("{out}/{table}/dt={DATE}");
    let pairs = rows_of(dir.path(), &partition(&here, "friends"));
    assert!(
        pairs.len() > 100,
        "too few pairs to compare: {}",
        pairs.len()
    );
    assert_eq!(rows_of(dir.path(), &partition(&there, "friends")), pairs);
    assert_eq!(
        counts_of(dir.path(), &partition(&there, "friend_counts")),
        counts_of(dir.path(), &partition(&here, "friend_counts"))
    );
    // One _SUCCESS for the partition, written once all four slices had committed.
    for table in ["friends", "friend_counts"] {
        let files = files_under(&partition(&there, table));
        let top: Vec<&String> = files.iter().filter(|f| !f.contains('/')).collect();
        assert_eq!(top, ["_SUCCESS"], "{files:?}");
        for i in 0..4 {
            assert!(
                files.contains(&format!("slice={i}-of-4/_SUCCESS")),
                "{files:?}"
            );
        }
    }
    assert_eq!(yarn["yarn"][0]["state"], "SUCCEEDED", "{yarn}");
    assert_eq!(yarn["slices"].as_array().unwrap().len(), 4);
    for field in ["edges_read", "distinct_edges", "mutual_pairs"] {
        assert_eq!(yarn["friends"][field], single["friends"][field], "{field}");
    }
    assert!(
        !files_under(&there).iter().any(|f| f.starts_with("_yarn")),
        "the run's staging is gone"
    );
}

#[test]
fn a_task_failed_on_its_first_attempt_is_retried_and_leaves_nothing() {
    cluster::ensure_yarn();
    let dir = tempfile::tempdir().unwrap();
    let root = format!("{}/it/{}", cluster::HDFS, cluster::namespace("yarn_retry"));
    let clean = clean_on_hdfs(dir.path(), &root);
    let (here, there) = (format!("{root}/single"), format!("{root}/yarn"));
    friends_here(dir.path(), &clean, &here);
    // An earlier run of the night, on one machine, into the same output: replaced whole.
    friends_here(dir.path(), &clean, &there);
    let yarn = friends_on_yarn(
        dir.path(),
        &clean,
        &there,
        3,
        &[("WEIBO_ETL_YARN_FAIL_SLICE", "1")],
    );

    // Slice 1 committed from its second attempt, the others from their first.
    let attempt_of = |i: usize| {
        let output = yarn["slices"][i]["output"].as_str().unwrap().to_string();
        let attempt = output
            .split('/')
            .find(|p| p.starts_with("attempt_"))
            .unwrap_or_else(|| panic!("no attempt in {output}"))
            .to_string();
        attempt.rsplit('_').next().unwrap().to_string()
    };
    assert_eq!(
        (attempt_of(0), attempt_of(1), attempt_of(2)),
        ("0".into(), "1".into(), "0".into())
    );
    let partition = |out: &str| format!("{out}/friends/dt={DATE}");
    assert_eq!(
        rows_of(dir.path(), &partition(&there)),
        rows_of(dir.path(), &partition(&here))
    );
    let files = files_under(&there);
    assert!(
        !files
            .iter()
            .any(|f| f.contains("FAILED-ATTEMPT") || f.contains("_temporary")),
        "a file of the failed attempt survived: {files:?}"
    );
    let top = |table: &str| -> Vec<String> {
        files
            .iter()
            .filter_map(|f| f.strip_prefix(&format!("{table}/dt={DATE}/")))
            .filter(|f| !f.contains('/'))
            .map(String::from)
            .collect()
    };
    assert_eq!(
        top("friends"),
        ["_SUCCESS"],
        "the earlier run's parts are gone"
    );
    assert_eq!(top("friend_counts"), ["_SUCCESS"]);
}

/// The part files of a partition on HDFS, by name, each with its rows.
fn parts_of(dir: &Path, url: &str) -> BTreeMap<String, String> {
    let local = dir.join(format!("parts-{}", weibo_etl::hash::text(url.as_bytes())));
    ok(run(bin().args(["-q", "fs", "get", url]).arg(&local)));
    std::fs::read_dir(&local)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .map(|p| {
            let one = dir.join("one-part");
            let _ = std::fs::remove_dir_all(&one);
            std::fs::create_dir_all(&one).unwrap();
            std::fs::copy(&p, one.join("part.parquet")).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, parquet_rows(&one))
        })
        .collect()
}

#[test]
fn clean_through_yarn_equals_the_single_machine_run() {
    cluster::ensure_yarn();
    let dir = tempfile::tempdir().unwrap();
    let root = format!("{}/it/{}", cluster::HDFS, cluster::namespace("yarn_clean"));
    let raw = dir.path().join("raw");
    ok(run(bin()
        .args(["-q", "gen", "--users", "3000", "--seed", "11", "--out"])
        .arg(&raw)));
    // A re-crawl of every other user in a file of its own, with the same crawl time: the
    // later input record wins, in whichever map read it.
    let users = std::fs::read_to_string(raw.join("users/users-00000.csv")).unwrap();
    let mut recrawl: Vec<String> = users.lines().take(1).map(String::from).collect();
    recrawl.extend(
        users
            .lines()
            .skip(1)
            .step_by(2)
            .map(|l| l.replacen("用户", "重爬", 1)),
    );
    std::fs::write(raw.join("users/users-00001.csv"), recrawl.join("\n") + "\n").unwrap();
    let raw_url = format!("{root}/raw/dt={DATE}");
    ok(run(bin().args(["-q", "fs", "put"]).arg(&raw).arg(&raw_url)));
    let files = files_under(&raw_url);
    assert!(files.len() >= 4, "a multi-file raw partition: {files:?}");
    let (here, there) = (format!("{root}/single"), format!("{root}/yarn"));
    let job = |output: &str| -> Vec<String> {
        [
            "clean",
            "--input",
            &raw_url,
            "--output",
            output,
            "--date",
            DATE,
            "--key-partitions",
            "4",
            "--max-reject-ratio",
            "1",
        ]
        .map(String::from)
        .to_vec()
    };
    let single_report = dir.path().join("single.json");
    ok(run(bin()
        .args(["-q", "--report"])
        .arg(&single_report)
        .args(job(&here))));
    let yarn_report = dir.path().join("yarn.json");
    let out = ok(run(&mut yarn_submit(
        &[],
        &yarn_report,
        3,
        job(&there),
        &[],
    )));
    assert!(String::from_utf8_lossy(&out.stdout).contains(": SUCCEEDED ("));
    let (single, yarn) = (report(&single_report), report(&yarn_report));

    // The same rows in every part of every entity, the same rejects, the same accounting.
    for entity in ["users", "posts", "follows", "comments", "reposts"] {
        let partition = |out: &str| format!("{out}/{entity}/dt={DATE}");
        let ours = parts_of(dir.path(), &partition(&there));
        assert!(!ours.is_empty(), "{entity} has parts");
        assert_eq!(ours, parts_of(dir.path(), &partition(&here)), "{entity}");
        assert_eq!(
            files_under(&partition(&there)),
            files_under(&partition(&here)),
            "{entity}: the same files, one _SUCCESS"
        );
    }
    let fs = weibo_etl::hdfs::FileSystems::new(cluster::HDFS);
    let rejects = |out: &str| {
        fs.read_to_vec(
            &fs.parse(&format!("{out}/_rejects/dt={DATE}/rejects.jsonl"))
                .unwrap(),
        )
        .unwrap()
    };
    assert!(!rejects(&here).is_empty(), "generated dirt gives rejects");
    assert_eq!(rejects(&there), rejects(&here));
    let users = parts_of(dir.path(), &format!("{there}/users/dt={DATE}"));
    let recrawled = users
        .values()
        .flat_map(|rows| rows.lines())
        .filter(|l| l.contains("重爬"))
        .count();
    assert!(recrawled > 1000, "the re-crawl wins: {recrawled} rows");
    let clean = &yarn["clean"];
    assert_eq!(clean["entities"], single["clean"]["entities"]);
    assert_eq!(clean["unattributed"], single["clean"]["unattributed"]);
    assert_eq!(clean["bytes_in"], single["clean"]["bytes_in"]);
    let paths = |r: &serde_json::Value| -> Vec<String> {
        r["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(paths(clean), paths(&single["clean"]));
    // Each file's records are accounted for alike.
    let figures = |r: &serde_json::Value| -> Vec<String> {
        let keys = [
            "records_in",
            "records_out",
            "rejected",
            "duplicates",
            "rejected_by_reason",
        ];
        r["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| keys.map(|k| f[k].to_string()).join(" "))
            .collect()
    };
    assert_eq!(figures(clean), figures(&single["clean"]));
    assert_eq!(
        yarn["yarn"].as_array().unwrap().len(),
        2,
        "a map and a reduce job"
    );
    assert!(!files_under(&there).iter().any(|f| f.starts_with("_yarn")));
}

/// `load` of one cleaned night on one machine into `ns`: 4 regions, 3 writers.
fn load_here(clean: &str, ns: &str, night: &str) {
    ok(run(bin().args([
        "-q",
        "--namespace",
        ns,
        "load",
        "--input",
        clean,
        "--date",
        night,
        "--regions",
        "4",
        "--writers",
        "3",
    ])));
}

/// The same through YARN in `tasks` tasks, with `extra` load arguments and `env` for the
/// submitter; returns its report.
fn load_on_yarn(
    dir: &Path,
    clean: &str,
    ns: &str,
    night: &str,
    tasks: u32,
    extra: &[String],
    env: &[(&str, &str)],
) -> serde_json::Value {
    let file = dir.join(format!("load-{ns}-{night}.json"));
    let load = ["load", "--input", clean, "--date", night];
    let job = load
        .into_iter()
        .chain(["--regions", "4", "--writers", "3"])
        .chain(extra.iter().map(String::as_str));
    ok(run(&mut yarn_submit(
        &["--namespace", ns],
        &file,
        tasks,
        job,
        env,
    )));
    report(&file)
}

#[test]
fn load_through_yarn_gives_the_single_runs_tables_night_after_night() {
    use crate::test_load::assert_same_tables;
    cluster::ensure_yarn();
    let dir = tempfile::tempdir().unwrap();
    let root = format!("{}/it/{}", cluster::HDFS, cluster::namespace("yarn_load"));
    let nights = ["2026-11-01", "2026-11-02"];
    let raw = format!("{root}/raw");
    ok(run(bin().args([
        "-q", "gen", "--out", &raw, "--nights", "2", "--preset", "tiny", "--date", nights[0],
    ])));
    let clean = format!("{root}/clean");
    for night in nights {
        ok(run(bin().args([
            "-q",
            "clean",
            "--input",
            &format!("{raw}/dt={night}"),
            "--output",
            &clean,
            "--date",
            night,
        ])));
    }
    let single = cluster::Scratch::new("yarn_load_single");
    let thrift = cluster::Scratch::new("yarn_load_thrift");
    let bulk = cluster::Scratch::new("yarn_load_hfile");
    let hfile = cluster::bulk_route(&bulk);

    // Night 1: through Thrift in three tasks, and as HFiles in two, on tables the
    // submitter creates.
    load_here(&clean, &single, nights[0]);
    let first = load_on_yarn(dir.path(), &clean, &thrift, nights[0], 3, &[], &[]);
    load_on_yarn(dir.path(), &clean, &bulk, nights[0], 2, &hfile, &[]);
    assert_same_tables(&single, &thrift);
    assert_same_tables(&single, &bulk);
    assert_eq!(first["slices"].as_array().unwrap().len(), 3, "{first}");
    let slice_rows: u64 = first["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["load"]["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(first["load"]["rows"].as_u64(), Some(slice_rows), "{first}");
    assert!(slice_rows > 0);
    assert_eq!(first["load"]["counters_as_of"], nights[0]);

    // Night 2, with slice 1 failed on its first attempt: the counters are those of both
    // nights, as the single machine's second load leaves them.
    load_here(&clean, &single, nights[1]);
    let second = load_on_yarn(
        dir.path(),
        &clean,
        &thrift,
        nights[1],
        3,
        &[],
        &[("WEIBO_ETL_YARN_FAIL_SLICE", "1")],
    );
    load_on_yarn(dir.path(), &clean, &bulk, nights[1], 2, &hfile, &[]);
    assert_same_tables(&single, &thrift);
    assert_same_tables(&single, &bulk);
    assert_eq!(second["load"]["counters_as_of"], nights[1], "{second}");
    assert_eq!(second["load"]["counters_base"], nights[0], "{second}");
    // The same counter snapshot on every route, to the byte: the counters of both nights,
    // one part per entity however many slices wrote it.
    let snapshot = |ns: &str| {
        use weibo_etl::load::state::State;
        let fs = weibo_etl::hdfs::FileSystems::new(cluster::HDFS);
        let snapshot = State::new(&fs.parse(&clean).unwrap(), ns)
            .latest(&fs)
            .unwrap()
            .expect("a committed counter snapshot");
        let users: BTreeMap<_, _> = snapshot.users(&fs, 0, 1).unwrap().into_iter().collect();
        let posts: BTreeMap<_, _> = snapshot.posts(&fs, 0, 1).unwrap().into_iter().collect();
        let at = format!("{clean}/_load/state/{ns}/dt={}", snapshot.as_of);
        let files: BTreeMap<String, Vec<u8>> = files_under(&at)
            .into_iter()
            .map(|f| {
                let bytes = fs.read_to_vec(&fs.parse(&format!("{at}/{f}")).unwrap());
                (f, bytes.unwrap())
            })
            .collect();
        (snapshot.as_of, users, posts, files)
    };
    let here = snapshot(&single);
    assert_eq!(here.0, nights[1]);
    assert!(!here.1.is_empty() && !here.2.is_empty());
    assert!(
        snapshot(&thrift) == here,
        "the snapshot through YARN differs"
    );
    assert!(
        snapshot(&bulk) == here,
        "the snapshot of the HFile route differs"
    );
    // The counter snapshot moved on once, after every slice had loaded.
    let state = format!("{clean}/_load/state/{thrift}");
    let files = files_under(&state);
    assert!(
        files.contains(&format!("dt={}/_SUCCESS", nights[1])),
        "{files:?}"
    );
    assert!(
        !files.iter().any(|f| f.starts_with("_tmp")),
        "nothing staged is left: {files:?}"
    );
    assert!(!files_under(&format!("{clean}/_load"))
        .iter()
        .any(|f| f.starts_with("_yarn")));
}

/// How a YARN job's partitions are laid out: as its slices (`slice=i-of-N/` folders under
/// one `_SUCCESS`), or as one run writes them (the slices merged by the submitter).
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Slices,
    Merged,
}

/// Runs a graph job (`job` and its arguments, given the clean root and the output) on one
/// machine and through YARN in three tasks, and checks that every table's partition holds
/// the same rows, committed, in `layout`; returns both reports. `prepare` is given the
/// clean root and both outputs before either run.
fn sliced_against_single(
    name: &str,
    tables: &[&str],
    layout: Layout,
    prepare: &dyn Fn(&str, &[&str]),
    args: &dyn Fn(&str, &str) -> Vec<String>,
) -> (serde_json::Value, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let root = format!("{}/it/{}", cluster::HDFS, cluster::namespace(name));
    let clean = clean_on_hdfs(dir.path(), &root);
    let (here, there) = (format!("{root}/single"), format!("{root}/yarn"));
    prepare(&clean, &[&here, &there]);
    let single_report = dir.path().join("single.json");
    ok(run(bin()
        .args(["-q", "--report"])
        .arg(&single_report)
        .args(args(&clean, &here))));
    let yarn_report = dir.path().join("yarn.json");
    ok(run(&mut yarn_submit(
        &[],
        &yarn_report,
        3,
        args(&clean, &there),
        &[],
    )));
    let partition = |out: &str, table: &str| format!("{out}/{table}/dt={DATE}");
    for table in tables {
        let rows = rows_of(dir.path(), &partition(&here, table));
        assert!(
            rows.len() > 20,
            "too few {table} rows to compare: {}",
            rows.len()
        );
        assert_eq!(
            rows_of(dir.path(), &partition(&there, table)),
            rows,
            "{table}"
        );
        let files = files_under(&partition(&there, table));
        let top: Vec<&String> = files.iter().filter(|f| !f.contains('/')).collect();
        match layout {
            Layout::Slices => assert_eq!(top, ["_SUCCESS"], "{files:?}"),
            Layout::Merged => assert_eq!(files, ["_SUCCESS", "part-00000.parquet"]),
        }
    }
    let yarn = report(&yarn_report);
    assert_eq!(yarn["slices"].as_array().unwrap().len(), 3);
    (report(&single_report), yarn)
}

/// The job's arguments over `clean` into `output`, with a budget small enough that both
/// runs cut their work into several partitions, and not alike.
fn graph_args(job: &str, clean: &str, output: &str, more: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        job,
        "--input",
        clean,
        "--output",
        output,
        "--date",
        DATE,
        "--memory-budget",
        "256KiB",
    ]
    .map(String::from)
    .to_vec();
    args.extend(more.iter().map(|s| s.to_string()));
    args
}

#[test]
fn cascades_through_yarn_equal_the_single_machine_run() {
    cluster::ensure_yarn();
    let (single, yarn) = sliced_against_single(
        "yarn_cascades",
        &["cascades", "repost_paths"],
        Layout::Slices,
        &|_, _| {},
        &|clean, out| graph_args("cascades", clean, out, &[]),
    );
    assert!(
        single["cascades"]["partitions"].as_u64().unwrap() > 1,
        "{single}"
    );
    for field in [
        "rows_read",
        "reposts",
        "cascades",
        "max_depth",
        "parents_from_markers",
        "parents_root_not_found",
        "top",
    ] {
        assert_eq!(
            yarn["cascades"][field], single["cascades"][field],
            "{field}"
        );
    }
}

#[test]
fn inbox_through_yarn_equals_the_single_machine_run() {
    cluster::ensure_yarn();
    // A low threshold, so some authors are celebrities and both tables have rows.
    let (single, yarn) = sliced_against_single(
        "yarn_inbox",
        &["inbox", "inbox_celebrities"],
        Layout::Slices,
        &|_, _| {},
        &|clean, out| {
            graph_args(
                "inbox",
                clean,
                out,
                &["--k", "3", "--celebrity-threshold", "4"],
            )
        },
    );
    let (s, y) = (&single["inbox"], &yarn["inbox"]);
    assert!(s["partitions"].as_u64().unwrap() > 1, "{single}");
    assert!(s["celebrities_skipped"].as_u64().unwrap() > 0, "{single}");
    for field in [
        "follow_rows",
        "post_rows",
        "edges",
        "edges_fanned_out",
        "edges_to_celebrities",
        "edges_without_posts",
        "posts",
        "posts_deleted",
        "entries",
        "celebrities_skipped",
        "k",
    ] {
        assert_eq!(y[field], s[field], "{field}");
    }
}

#[test]
fn rank_through_yarn_equals_the_single_machine_run() {
    cluster::ensure_yarn();
    // The friends metric reads the friends output of the date from --output (the default of
    // --friends), which the tasks must get although their own --output is elsewhere.
    let friends = |clean: &str, outputs: &[&str]| {
        for out in outputs {
            ok(run(bin()
                .args(["-q", "friends", "--input"])
                .arg(format!("{clean}/follows"))
                .args(["--output", out, "--date", DATE])));
        }
    };
    let (single, yarn) = sliced_against_single(
        "yarn_rank",
        &["rank"],
        Layout::Merged,
        &friends,
        &|clean, out| graph_args("rank", clean, out, &["--top", "25"]),
    );
    let (s, y) = (&single["rank"], &yarn["rank"]);
    assert!(s["partitions"].as_u64().unwrap() > 1, "{single}");
    let ranked = s["users_ranked"].as_array().unwrap();
    assert_eq!(ranked.len(), 6, "every metric: {single}");
    for field in [
        "follow_rows",
        "post_rows",
        "comment_rows",
        "friend_count_rows",
        "users_ranked",
    ] {
        assert_eq!(y[field], s[field], "{field}");
    }
}

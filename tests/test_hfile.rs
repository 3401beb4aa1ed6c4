//! HFiles written by `hbase::hfile` against HBase itself: its HFilePrettyPrinter reads and
//! checks them, its BulkLoadHFilesTool adopts them into a pre-split table (region servers run
//! with `hbase.hstore.bulkload.verify`), and every cell reads back through Thrift1.

use weibo_etl::hbase::admin::{Admin, FamilySpec, TableSpec};
use weibo_etl::hbase::hfile::{Cell, Codec, HFileWriter, WriterOptions};
use weibo_etl::hbase::layout::keys;
use weibo_etl::hbase::{Connection, Timeouts};
use weibo_etl::hdfs::FileSystems;

use crate::harness::{bin, cluster, run, stderr, stdout};

struct Cells {
    row: Vec<u8>,
    name: Vec<u8>,
    count: [u8; 8],
    ts: i64,
}

fn rows(n: i64) -> Vec<Cells> {
    let mut rows: Vec<Cells> = (0..n)
        .map(|id| {
            let mut row = keys::hash_prefix(id).to_vec();
            row.extend_from_slice(&id.to_be_bytes());
            Cells {
                row,
                name: format!("user-{id}-名字").into_bytes(),
                count: (id * 3).to_be_bytes(),
                ts: 1_600_000_000_000 + id,
            }
        })
        .collect();
    rows.sort_by(|a, b| a.row.cmp(&b.row));
    rows
}

/// Writes `rows` of one family as one HFile at `url`.
fn write_file(fs: &FileSystems, url: &str, family: &[u8], rows: &[&Cells]) -> u64 {
    let out = fs.create_atomic(&fs.parse(url).unwrap()).unwrap();
    let options = WriterOptions {
        created_ms: 1_700_000_000_000,
        source_task: "test_hfile".into(),
        // Small blocks, so a file has many of them and a real index.
        block_size: 4096,
        // The info files are zstd-compressed as HBase's ZstdCodec frames them, the count
        // file is not: the region server reads both.
        codec: if family == b"info" {
            Codec::Zstd { level: 1 }
        } else {
            Codec::None
        },
        ..WriterOptions::default()
    };
    let mut w = HFileWriter::new(out, options).unwrap();
    for r in rows {
        let (qualifier, value): (&[u8], &[u8]) = if family == b"info" {
            (b"name", &r.name)
        } else {
            (b"followers", &r.count)
        };
        w.append(&Cell {
            row: &r.row,
            family,
            qualifier,
            timestamp: r.ts,
            value,
            kind: weibo_etl::hbase::hfile::TYPE_PUT,
        })
        .unwrap();
    }
    let (out, summary) = w.finish().unwrap();
    out.commit().unwrap();
    summary.cells
}

#[test]
fn hbase_reads_checks_and_bulk_loads_our_hfiles() {
    cluster::ensure();
    let ns = cluster::Scratch::new("hfile");
    let mut admin = Admin::connect(cluster::THRIFT2, Timeouts::default()).unwrap();
    admin.ensure_namespace(&ns).unwrap();
    let spec = TableSpec {
        namespace: ns.to_string(),
        name: "user".into(),
        families: vec![
            FamilySpec::new("info"),
            FamilySpec::new("count").versions(1),
        ],
    };
    let splits = keys::split_points(4);
    admin.create_table(&spec, &splits).unwrap();
    let table = spec.full_name();

    let all = rows(3000);
    let fs = FileSystems::new(cluster::HDFS);
    let staging = format!("{}/it/{ns}/hfiles", cluster::HDFS);
    let mut files = Vec::new();
    // `info`: one file per region, cut at the split points.
    let mut bounds = vec![Vec::new()];
    bounds.extend(splits.iter().cloned());
    for (i, start) in bounds.iter().enumerate() {
        let end = bounds.get(i + 1);
        let part: Vec<&Cells> = all
            .iter()
            .filter(|r| r.row >= *start && end.is_none_or(|e| r.row < *e))
            .collect();
        let url = format!("{staging}/info/region-{i}");
        assert_eq!(write_file(&fs, &url, b"info", &part), part.len() as u64);
        files.push((url, part.len()));
    }
    // `count`: one file across every region, which the tool must split.
    let url = format!("{staging}/count/all");
    write_file(&fs, &url, b"count", &all.iter().collect::<Vec<_>>());
    files.push((url, all.len()));

    for (file, cells) in &files {
        let out = run(bin().args([
            "cluster", "hfile", "--", "-m", "-p", "-k", "-a", "-h", "-f", file,
        ]));
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(out.status.success(), "{text}");
        assert!(!text.contains("checksum verification failed"), "{text}");
        assert!(
            !text.contains("WARNING"),
            "the printer found a problem in {file}:\n{text}"
        );
        assert!(
            text.contains(&format!("Scanned kv count -> {cells}\n")),
            "{text}"
        );
        assert!(
            text.contains("majorVersion=3") && text.contains("minorVersion=3"),
            "{text}"
        );
    }

    let out = run(bin().args(["cluster", "bulkload", &staging, &table]));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("checksum verification failed"), "{text}");

    let mut conn = Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();
    let mut seen = 0;
    let mut iter = all.iter();
    conn.scan_with(&table, &[], |row| {
        let expected = iter.next().expect("no more rows than written");
        assert_eq!(row.key, expected.row);
        let name = &row.cells[b"info:name".as_slice()];
        assert_eq!(
            (name.value.as_slice(), name.timestamp),
            (expected.name.as_slice(), expected.ts)
        );
        let count = &row.cells[b"count:followers".as_slice()];
        assert_eq!(
            (count.value.as_slice(), count.timestamp),
            (expected.count.as_slice(), expected.ts)
        );
        assert_eq!(row.cells.len(), 2);
        seen += 1;
        true
    })
    .unwrap();
    assert_eq!(seen, all.len());

    // The region server moved every file into the table: nothing adoptable is left.
    let left: Vec<_> = fs
        .list(&fs.parse(&staging).unwrap(), true)
        .unwrap()
        .into_iter()
        .filter(|f| {
            !f.is_dir
                && !f.location.to_string().contains("/_")
                && !f.location.to_string().contains("/.")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `out`, after checking it succeeded.
fn ok(out: std::process::Output) -> std::process::Output {
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    out
}

/// `weibo-etl <global> load` of `clean` into `ns` (4 regions, 3 writers), then `extra`.
fn load(
    clean: &std::path::Path,
    ns: &str,
    global: &[&std::ffi::OsStr],
    extra: &[&str],
) -> std::process::Output {
    run(bin()
        .args(["-q", "--namespace", ns])
        .args(global)
        .args(["load", "--input"])
        .arg(clean)
        .args([
            "--date",
            crate::test_clean::DATE,
            "--regions",
            "4",
            "--writers",
            "3",
        ])
        .args(extra))
}

/// The same `--via hfile`, staging under the test's folder on HDFS and handing over with
/// `handover`.
fn hfile_load(
    clean: &std::path::Path,
    ns: &str,
    global: &[&std::ffi::OsStr],
    handover: &str,
    extra: &[&str],
) -> std::process::Output {
    let staging = cluster::staging(ns);
    let mut args = vec![
        "--via",
        "hfile",
        "--staging",
        &staging,
        "--bulkload-cmd",
        handover,
    ];
    args.extend_from_slice(extra);
    load(clean, ns, global, &args)
}

#[test]
fn hfile_route_gives_the_thrift_routes_tables_and_survives_a_failed_hand_over() {
    use crate::test_load::{assert_same_tables, generated_clean};
    cluster::ensure();
    let dir = tempfile::tempdir().unwrap();
    let clean = generated_clean(dir.path());

    let thrift = cluster::Scratch::new("via_thrift");
    ok(load(&clean, &thrift, &[], &[]));

    // Spilled runs (a budget far below the cells) and counters in key partitions.
    let bulk = cluster::Scratch::new("via_hfile");
    let report = dir.path().join("hfile.json");
    let out = ok(hfile_load(
        &clean,
        &bulk,
        &["--report".as_ref(), report.as_os_str()],
        &cluster::local_handover(),
        &["--memory-budget", "64KiB"],
    ));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["load"]["via"], "hfile", "{r}");
    let files = r["load"]["hfiles"]["files"].as_u64().unwrap();
    // 7 tables, 4 regions each, user and post with two families: at least one per table.
    assert!(files >= 7, "{r}");
    assert!(
        stderr(&out).is_empty() || !stderr(&out).contains("error"),
        "{}",
        stderr(&out)
    );
    assert_same_tables(&thrift, &bulk);

    // The hand-over fails after the HFiles are written: nothing is recorded as loaded, and
    // the run's --resume (a rerun of every unit) ends with the same tables.
    let failed = cluster::Scratch::new("via_hfile_fail");
    let out = hfile_load(&clean, &failed, &[], "false", &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("bulk load"), "{}", stderr(&out));
    let manifest = clean
        .join("_load")
        .join(format!("dt={}", crate::test_clean::DATE))
        .join(format!("{failed}.json"));
    let recorded: Vec<String> = std::fs::read(&manifest)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    assert!(
        recorded.is_empty(),
        "units recorded before their hand-over: {recorded:?}"
    );
    // Nor is any HFile left that a later hand-over could adopt.
    let fs = FileSystems::new(cluster::HDFS);
    let staging = fs.parse(&cluster::staging(&failed)).unwrap();
    let left = fs.list(&staging, true).unwrap_or_default();
    assert!(left.iter().all(|f| f.is_dir), "a failed run left {left:?}");
    // The resumed run writes zstd-compressed HFiles: the region servers read them too.
    ok(hfile_load(
        &clean,
        &failed,
        &[],
        &cluster::local_handover(),
        &["--resume", "--hfile-compression", "zstd"],
    ));
    assert_same_tables(&thrift, &failed);

    // Killed (SIGKILL, no cleanup) after every HFile is written and before any table is
    // handed over: the HFiles stay in the staging folder, nothing is recorded, and --resume
    // clears them and gives the same tables.
    let killed = cluster::Scratch::new("via_hfile_kill");
    let kill = dir.path().join("kill-parent.sh");
    std::fs::write(&kill, "#!/bin/sh\nkill -9 $PPID\nsleep 5\nexit 1\n").unwrap();
    std::fs::set_permissions(&kill, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = hfile_load(&clean, &killed, &[], kill.to_str().unwrap(), &[]);
    assert_eq!(
        out.status.code(),
        None,
        "killed by a signal: {}",
        stderr(&out)
    );
    let staging = fs.parse(&cluster::staging(&killed)).unwrap();
    let left = fs.list(&staging, true).unwrap_or_default();
    assert!(
        left.iter().any(|f| !f.is_dir),
        "the kill left the HFiles: {left:?}"
    );
    ok(hfile_load(
        &clean,
        &killed,
        &[],
        &cluster::local_handover(),
        &["--resume"],
    ));
    assert_same_tables(&thrift, &killed);

    // A second load of the same night through HFiles changes nothing a reader sees, and
    // neither does a major compaction, which merges the two loads' equal cells.
    ok(hfile_load(
        &clean,
        &failed,
        &[],
        &cluster::local_handover(),
        &[],
    ));
    assert_same_tables(&thrift, &failed);
    for table in cluster::every_table()
        .into_iter()
        .filter(|t| *t != "friend")
    {
        ok(run(bin().args([
            "cluster",
            "compact",
            &format!("{failed}:{table}"),
        ])));
    }
    assert_same_tables(&thrift, &failed);
}

/// `--via auto` goes through Thrift below its threshold or without HDFS for the HFiles, as
/// HFiles from the threshold on, says which and why in the report, and the tables are the
/// same either way.
#[test]
fn via_auto_picks_the_route_by_the_nights_size_and_says_why() {
    use crate::test_load::{assert_same_tables, generated_clean};
    cluster::ensure();
    let dir = tempfile::tempdir().unwrap();
    let clean = generated_clean(dir.path());
    let ok = |out: std::process::Output| assert!(out.status.success(), "{}", stderr(&out));
    let auto = |ns: &str, extra: &[&str]| -> serde_json::Value {
        let report = dir.path().join(format!("{ns}.json"));
        let mut args = vec!["--via", "auto"];
        args.extend_from_slice(extra);
        ok(load(
            &clean,
            ns,
            &["--report".as_ref(), report.as_os_str()],
            &args,
        ));
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        doc["load"].clone()
    };

    // Any night is large enough, but the HFiles would have to go to the local disk.
    let local = cluster::Scratch::new("auto_local");
    let r = auto(&local, &["--auto-threshold", "1"]);
    assert_eq!(r["via"], "thrift", "{r}");
    assert_eq!(r["auto"]["chose"], "thrift", "{r}");
    assert!(
        r["auto"]["because"]
            .as_str()
            .unwrap()
            .contains("not on HDFS"),
        "{r}"
    );
    let rows = r["auto"]["input_rows"].as_u64().unwrap();
    assert!(rows > 10_000, "{r}");

    let handover = cluster::local_handover();
    let staged = cluster::staging;
    // One row short of the threshold: Thrift.
    let small = cluster::Scratch::new("auto_small");
    let (below, at) = ((rows + 1).to_string(), rows.to_string());
    let r = auto(
        &small,
        &[
            "--auto-threshold",
            &below,
            "--staging",
            &staged(&small),
            "--bulkload-cmd",
            &handover,
        ],
    );
    assert_eq!(r["via"], "thrift", "{r}");
    assert!(
        r["auto"]["because"].as_str().unwrap().contains("below"),
        "{r}"
    );

    // At the threshold: HFiles, and the same tables.
    let large = cluster::Scratch::new("auto_large");
    let r = auto(
        &large,
        &[
            "--auto-threshold",
            &at,
            "--staging",
            &staged(&large),
            "--bulkload-cmd",
            &handover,
        ],
    );
    assert_eq!(r["via"], "hfile", "{r}");
    assert_eq!(r["auto"]["input_rows"].as_u64(), Some(rows), "{r}");
    assert!(r["hfiles"]["files"].as_u64().unwrap() > 0, "{r}");
    assert_same_tables(&local, &large);
}

/// `friends --load --via hfile` writes the cells `friends --load` writes through Thrift: the
/// friend table, `count:friends` and the `r:mutual` flags.
#[test]
fn friends_through_hfiles_give_the_thrift_routes_tables() {
    use crate::test_load::{generated_clean, table_digest};
    cluster::ensure();
    let dir = tempfile::tempdir().unwrap();
    let clean = generated_clean(dir.path());
    let thrift = cluster::Scratch::new("friends_thrift");
    let bulk = cluster::Scratch::new("friends_hfile");
    for (ns, route) in [(&thrift, vec![]), (&bulk, cluster::bulk_route(&bulk))] {
        ok(load(&clean, ns, &[], &[]));
        let report = dir.path().join(format!("friends-{ns}.json"));
        ok(run(bin()
            .args(["-q", "--namespace", ns, "--report"])
            .arg(&report)
            .args(["friends", "--input"])
            .arg(clean.join("follows"))
            .arg("--output")
            .arg(dir.path().join(format!("graph-{ns}")))
            .args([
                "--date",
                crate::test_clean::DATE,
                "--load",
                "--regions",
                "4",
            ])
            .args(&route)));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let via = if route.is_empty() { "thrift" } else { "hfile" };
        assert_eq!(r["load"]["via"], via, "{r}");
    }
    let mut conn = Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();
    for table in ["friend", "user", "follow", "fans"] {
        let a = table_digest(&mut conn, &format!("{thrift}:{table}"));
        let b = table_digest(&mut conn, &format!("{bulk}:{table}"));
        assert!(a.0 > 0, "{table} is empty");
        assert_eq!(a, b, "{table}: the HFile route differs");
    }
}

//! The `clean` job on local files: golden rows and rejects for every sample file, the
//! accounting identity, reruns, and the reject budget. (The HDFS twin of these runs lives in
//! `test_clean_hdfs`, behind the integration switch.)

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::{assert_golden, bin, run, stderr};

pub const DATE: &str = crate::harness::SAMPLE_DATE;

#[test]
fn rows_held_in_memory_or_spilled_give_the_same_partitions() {
    let out = tempfile::tempdir().unwrap();
    let mut trees = Vec::new();
    // Everything spilled, a budget that holds some batches and spills the rest, the default.
    for (name, budget) in [("files", "0"), ("mixed", "8KiB"), ("memory", "256MiB")] {
        let target = out.path().join(name);
        // -v: the log says how much was held and how much spilled.
        let run = run(bin()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["-v", "clean", "--input"])
            .arg(sample_dir())
            .arg("--output")
            .arg(&target)
            .args(["--date", DATE, "--max-reject-ratio", "0.5"])
            .args(["--spill-memory", budget]));
        assert!(run.status.success(), "{}", crate::harness::stderr(&run));
        let log = crate::harness::stderr(&run);
        let bytes = |what: &str| -> u64 {
            let at = log
                .find(what)
                .unwrap_or_else(|| panic!("no {what:?} in {log}"));
            let number = log[..at].trim_end().rsplit(' ').next().unwrap();
            number.parse().unwrap()
        };
        let (held, spilled) = (
            bytes("bytes held in memory"),
            bytes("bytes written to files"),
        );
        match name {
            "files" => assert!(held == 0 && spilled > 0, "{held} {spilled}"),
            "mixed" => assert!(held > 0 && spilled > 0, "{held} {spilled}"),
            _ => assert!(held > 0 && spilled == 0, "{held} {spilled}"),
        }
        trees.push(tree(&target));
    }
    assert!(trees[0] == trees[1], "held + spilled differs from spilled");
    assert!(trees[0] == trees[2], "held differs from spilled");
}

pub use crate::harness::sample_dir;

/// Every file below `dir`, relative path → bytes.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The rows of a Parquet partition folder as JSON lines, in file then row order.
pub fn parquet_rows(dir: &Path) -> String {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    let mut buf = Vec::new();
    {
        let mut writer = arrow::json::LineDelimitedWriter::new(&mut buf);
        for f in files {
            let reader = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(f).unwrap())
                .unwrap()
                .build()
                .unwrap();
            for batch in reader {
                writer.write(&batch.unwrap()).unwrap();
            }
        }
        writer.finish().unwrap();
    }
    String::from_utf8(buf).unwrap()
}

fn clean(input: &Path, output: &Path, extra: &[&str]) -> std::process::Output {
    run(bin()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["-q", "clean", "--input"])
        .arg(input)
        .arg("--output")
        .arg(output)
        .args(["--date", DATE])
        .args(extra))
}

/// The rejects a clean into `clean` wrote for [`DATE`].
fn rejects_of(clean: &Path) -> String {
    let at = clean
        .join("_rejects")
        .join(format!("dt={DATE}"))
        .join("rejects.jsonl");
    fs::read_to_string(at).unwrap()
}

fn report(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

#[test]
fn sample_data_gives_golden_rows_rejects_and_balanced_counts() {
    let out = tempfile::tempdir().unwrap();
    let report_path = out.path().join("report.json");
    let result = clean(
        Path::new("sample_data"),
        &out.path().join("clean"),
        &[
            "--max-reject-ratio",
            "0.5",
            "--mapping",
            "sample_data/crawlers/fork-mapped/_mapping.toml",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    assert!(result.status.success(), "{}", stderr(&result));
    let report = report(&report_path);
    assert_eq!(report["ok"], true);
    let clean = &report["clean"];

    // records_in == records_out + rejected + duplicates, per entity, from the report alone.
    let mut counts = String::new();
    for (entity, c) in clean["entities"].as_object().unwrap() {
        let n = |k: &str| c[k].as_u64().unwrap();
        assert_eq!(
            n("records_in"),
            n("records_out") + n("rejected") + n("duplicates"),
            "{entity}: {c}"
        );
        let by_reason: u64 = c["rejected_by_reason"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(by_reason, n("rejected"), "{entity}");
        counts.push_str(&format!("{entity} {c}\n"));
    }
    counts.push_str(&format!("unattributed {}\n", clean["unattributed"]));
    assert_golden("clean/counts.txt", &counts);

    // The same, per file; and the files' figures add up to the entities'.
    let mut files = String::new();
    let mut sums = [0u64; 4];
    let keys = ["records_in", "records_out", "rejected", "duplicates"];
    for f in clean["files"].as_array().unwrap() {
        let n = |k: &str| f[k].as_u64().unwrap();
        assert_eq!(
            n("records_in"),
            n("records_out") + n("rejected") + n("duplicates"),
            "{f}"
        );
        for (sum, k) in sums.iter_mut().zip(keys) {
            *sum += n(k);
        }
        let path = f["path"].as_str().unwrap();
        let path = &path[path.find("sample_data/").unwrap()..];
        let figures: Vec<String> = keys.iter().map(|k| format!("{k} {}", n(k))).collect();
        files.push_str(&format!(
            "{path} {} {} {}\n",
            f["format"],
            figures.join(" "),
            f["rejected_by_reason"]
        ));
    }
    let entities = clean["entities"]
        .as_object()
        .unwrap()
        .values()
        .chain([&clean["unattributed"]]);
    let mut totals = [0u64; 4];
    for c in entities {
        for (total, k) in totals.iter_mut().zip(keys) {
            *total += c[k].as_u64().unwrap();
        }
    }
    assert_eq!(sums, totals, "the files' figures against the entities'");
    assert_golden("clean/files.txt", &files);

    // Cleaned rows of every entity, and every reject with its reason, file and line.
    for entity in ["users", "posts", "follows", "comments", "reposts"] {
        let dir = out
            .path()
            .join("clean")
            .join(entity)
            .join(format!("dt={DATE}"));
        assert!(dir.join("_SUCCESS").exists(), "{entity} not committed");
        assert_golden(&format!("clean/{entity}.jsonl"), &parquet_rows(&dir));
    }
    assert_golden(
        "clean/rejects.jsonl",
        &rejects_of(&out.path().join("clean")),
    );
}

#[test]
fn rerun_replaces_the_partitions_byte_for_byte() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("clean");
    let ok = ["--max-reject-ratio", "0.5"];
    assert!(clean(&sample_dir(), &target, &ok).status.success());
    let first = tree(&target);
    // The rerun also spills into a scratch folder that does not exist yet (a fresh node's
    // --spill-dir): it is created, and left empty.
    let spill = out.path().join("scratch").join("spill");
    let rerun = clean(
        &sample_dir(),
        &target,
        &[&ok[..], &["--spill-dir", spill.to_str().unwrap()]].concat(),
    );
    assert!(rerun.status.success(), "{}", crate::harness::stderr(&rerun));
    assert_eq!(fs::read_dir(&spill).unwrap().count(), 0, "spill files left");
    let second = tree(&target);
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        second.keys().collect::<Vec<_>>(),
        "stray or missing files after a rerun"
    );
    assert!(first == second, "a rerun changed the output");
    assert!(
        first.keys().all(|k| !k.contains("_tmp")),
        "{:?}",
        first.keys()
    );
}

/// A fork's layout we do not ship: refused without its mapping file, read with it (times,
/// bids, nested keys, the uid from the path), and a wrong mapping file is a usage error.
#[test]
fn a_mapping_file_reads_a_fork_that_is_refused_without_it() {
    let fork = sample_dir().join("crawlers/fork-mapped");
    let out = tempfile::tempdir().unwrap();
    let files = |extra: &[&str]| {
        let report_path = out.path().join("report.json");
        let mut args = vec![
            "--max-reject-ratio",
            "1",
            "--report",
            report_path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let result = clean(&fork, &out.path().join("clean"), &args);
        assert!(result.status.success(), "{}", stderr(&result));
        let r = report(&report_path);
        let mut files: Vec<String> = r["clean"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let name = f["path"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string();
                format!(
                    "{name} {} out {} rejected {}",
                    f["format"], f["records_out"], f["rejected"]
                )
            })
            .collect();
        files.sort();
        (r, files)
    };
    let (_, without) = files(&[]);
    assert_eq!(
        without,
        [
            "1669879400.csv null out 0 rejected 3",
            "comments.jsonl null out 0 rejected 3"
        ]
    );
    let mapping = fork.join("_mapping.toml");
    let (r, with) = files(&["--mapping", mapping.to_str().unwrap()]);
    assert_eq!(
        with,
        [
            "1669879400.csv \"fork-posts\" out 2 rejected 1",
            "comments.jsonl \"fork-comments\" out 2 rejected 1"
        ]
    );
    let rows = |entity: &str| -> Vec<Value> {
        parquet_rows(
            &out.path()
                .join("clean")
                .join(entity)
                .join(format!("dt={DATE}")),
        )
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
    };
    let posts = rows("posts");
    let mid = weibo_etl::field_rules::bid_to_mid("NuD3W0F1a").unwrap();
    assert_eq!(posts[0]["mid"], mid);
    assert_eq!(
        posts[0]["uid"], 1669879400i64,
        "the uid from the file's name"
    );
    assert_eq!(
        posts[0]["created_at"], "2026-11-29T11:40:00Z",
        "Beijing wall time"
    );
    assert_eq!(posts[1]["attitudes_count"], 10000);
    let comments = rows("comments");
    assert_eq!(comments[0]["mid"], mid, "a bid in a nested-key record");
    assert_eq!(comments[0]["uid"], 1195230310i64);
    assert!(comments[1]["mid"].is_null(), "a comment without its post");
    assert_eq!(r["clean"]["entities"]["comments"]["without_post"], 1);
    let rejects = rejects_of(&out.path().join("clean"));
    assert!(
        rejects.contains("\"bad_time\"") && rejects.contains("\"unknown_format\""),
        "{rejects}"
    );

    // A mapping file that names a field posts do not have: exit 2, the file and the column.
    let bad = out.path().join("bad.toml");
    fs::write(
        &bad,
        "[[layout]]\nname = \"x\"\nentity = \"posts\"\nevidence = [\"a\"]\n[layout.columns]\na = \"likes\"\n",
    )
    .unwrap();
    let result = clean(
        &fork,
        &out.path().join("clean"),
        &["--mapping", bad.to_str().unwrap()],
    );
    assert_eq!(result.status.code(), Some(2), "{}", stderr(&result));
    let err = stderr(&result);
    assert!(
        err.contains("bad.toml") && err.contains("\"likes\""),
        "{err}"
    );
}

#[test]
fn over_the_reject_budget_exits_3_and_commits_nothing() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("clean");
    // A good run first: a failed rerun must leave it untouched.
    assert!(clean(&sample_dir().join("canonical"), &target, &[])
        .status
        .success());
    let before = tree(&target);

    let report_path = out.path().join("report.json");
    let result = clean(
        &sample_dir(),
        &target,
        &[
            "--max-reject-ratio",
            "0.01",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    assert_eq!(result.status.code(), Some(3), "{}", stderr(&result));
    let err = stderr(&result);
    let last = err.lines().last().unwrap();
    // Entities are checked in name order: comments reject none, follows (4 of 31 rejected)
    // is the first over 1 %.
    assert!(last.contains("reject budget exceeded for follows"), "{err}");
    assert!(last.contains("mostly malformed_row (2)"), "{err}");
    assert_eq!(
        tree(&target),
        before,
        "a failed run changed committed output"
    );
    let report = report(&report_path);
    assert_eq!(report["ok"], false);
    assert_eq!(report["clean"]["committed"], false);
}

#[test]
fn bad_usage_is_exit_2() {
    let out = tempfile::tempdir().unwrap();
    let result = clean(&sample_dir(), out.path(), &["--format", "nope"]);
    assert_eq!(result.status.code(), Some(2));
    let result = run(bin().args([
        "clean",
        "--input",
        "x",
        "--output",
        "y",
        "--date",
        "29/11/2026",
    ]));
    assert_eq!(result.status.code(), Some(2));
    assert!(
        stderr(&result).contains("YYYY-MM-DD"),
        "{}",
        stderr(&result)
    );
    let result = clean(&out.path().join("missing"), &out.path().join("o"), &[]);
    assert_eq!(result.status.code(), Some(1));
    assert!(stderr(&result).contains("missing"), "{}", stderr(&result));
}

/// Partitions far larger than one write gather (clean hands the Parquet writer 4,096 rows at
/// a time): the counts are the generator's truth (plus three follows of unknown users), every
/// entity comes out sorted by its key with no key twice, and the dangling counts, which
/// depend on the uids every gather of the users partition left behind, are what the written
/// rows themselves imply.
#[test]
fn partitions_larger_than_a_gather_are_complete_sorted_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let out = dir.path().join("out");
    let gen = run(bin().args(["-q", "gen", "--out"]).arg(&raw).args([
        "--users",
        "15000",
        "--seed",
        "5",
        "--only",
        "users,follows,comments",
    ]));
    assert!(gen.status.success(), "{}", stderr(&gen));
    let truth = report(&raw.join("_truth.json"));
    fs::write(
        raw.join("follows").join("unknown-users.csv"),
        "follower,followee,followed_at,crawl_time\n\
         1000000000,7,2026-11-28 10:00:00,2026-11-29 02:00:00\n\
         8,1000000001,2026-11-28 10:00:00,2026-11-29 02:00:00\n\
         9,10,,2026-11-29 02:00:00\n",
    )
    .unwrap();
    let report_path = dir.path().join("report.json");
    let run = clean(&raw, &out, &["--report", report_path.to_str().unwrap()]);
    assert!(run.status.success(), "{}", stderr(&run));
    let entities = report(&report_path)["clean"]["entities"].clone();
    for entity in ["users", "follows", "comments"] {
        let t = &truth["entities"][entity];
        let extra = if entity == "follows" { 3 } else { 0 };
        for key in ["records_in", "records_out"] {
            assert_eq!(
                entities[entity][key].as_u64(),
                t[key].as_u64().map(|n| n + extra),
                "{entity} {key}"
            );
        }
        assert_eq!(entities[entity]["duplicates"], t["duplicates"], "{entity}");
        assert!(
            t["records_out"].as_u64().unwrap() > 3 * 4096,
            "{entity}: too few rows to span gathers"
        );
    }
    let dir_of = |entity: &str| out.join(entity).join(format!("dt={DATE}"));
    let rows = |entity: &str| -> Vec<Value> {
        parquet_rows(&dir_of(entity))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let parts = |entity: &str| {
        fs::read_dir(dir_of(entity))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "parquet")
            })
            .count()
    };
    let id = |v: &Value, k: &str| v[k].as_i64();
    let users = rows("users");
    let follows = rows("follows");
    let comments = rows("comments");
    // Each part file sorted by key (follows by canonical pair, then follower): the files end
    // to end descend at most once per file boundary; no key twice anywhere.
    for (entity, rows, key) in [
        ("users", &users, ["uid", "uid"]),
        ("follows", &follows, ["follower", "followee"]),
        ("comments", &comments, ["cid", "cid"]),
    ] {
        let keys: Vec<(i64, i64)> = rows
            .iter()
            .map(|r| (id(r, key[0]).unwrap(), id(r, key[1]).unwrap()))
            .collect();
        let order = |&(a, b): &(i64, i64)| match entity {
            "follows" => (a.min(b), a.max(b), a),
            _ => (a, b, 0),
        };
        let descents = keys
            .windows(2)
            .filter(|w| order(&w[0]) >= order(&w[1]))
            .count();
        assert!(descents < parts(entity), "{entity}: {descents} descents");
        let distinct: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len(), "{entity}: a key twice");
        assert_eq!(
            keys.len() as u64,
            entities[entity]["records_out"].as_u64().unwrap()
        );
    }
    let known: std::collections::HashSet<i64> =
        users.iter().map(|u| id(u, "uid").unwrap()).collect();
    let unknown = |uid: Option<i64>| uid.is_none_or(|u| !known.contains(&u));
    let dangling_follows = follows
        .iter()
        .filter(|f| unknown(id(f, "follower")) || unknown(id(f, "followee")))
        .count() as u64;
    let dangling_comments = comments.iter().filter(|c| unknown(id(c, "uid"))).count() as u64;
    assert_eq!(dangling_follows, 3, "the three added follows");
    assert_eq!(entities["follows"]["dangling"], dangling_follows);
    assert_eq!(entities["comments"]["dangling"], dangling_comments);
}

/// The data page versions ("1", "2") of the first column chunk of `part`.
pub fn page_versions(part: &Path) -> Vec<&'static str> {
    use parquet::column::page::Page;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(fs::File::open(part).unwrap()).unwrap();
    let mut pages = reader
        .get_row_group(0)
        .unwrap()
        .get_column_page_reader(0)
        .unwrap();
    let mut kinds = Vec::new();
    while let Some(page) = pages.get_next_page().unwrap() {
        match page {
            Page::DataPage { .. } => kinds.push("1"),
            Page::DataPageV2 { .. } => kinds.push("2"),
            Page::DictionaryPage { .. } => {}
        }
    }
    kinds
}

/// `--data-page-version 1` and the default (2) write the same rows, in pages of the version
/// asked for.
#[test]
fn data_page_versions_hold_the_same_rows() {
    let out = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for version in ["1", "2"] {
        let target = out.path().join(version);
        let mut extra = vec!["--max-reject-ratio", "0.5"];
        if version == "1" {
            extra.extend(["--data-page-version", "1"]);
        }
        let run = clean(&sample_dir(), &target, &extra);
        assert!(run.status.success(), "{}", stderr(&run));
        let part = target
            .join("users")
            .join(format!("dt={DATE}"))
            .join("part-00000.parquet");
        let kinds = page_versions(&part);
        assert!(
            !kinds.is_empty() && kinds.iter().all(|k| *k == version),
            "{kinds:?}"
        );
        rows.push(
            ["users", "posts", "follows", "comments", "reposts"]
                .map(|e| parquet_rows(&target.join(e).join(format!("dt={DATE}")))),
        );
    }
    assert!(!rows[0][0].is_empty());
    assert_eq!(rows[0], rows[1]);
}

/// A GB18030 users CSV larger than the 64 KiB encoding sniff, laid out so that the sniff ends
/// on the lead byte of a two-byte character, cleans exactly as its UTF-8 transcode.
#[test]
fn gb18030_cut_by_the_encoding_sniff_cleans_as_its_utf8_transcode() {
    const SNIFF: usize = 64 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let rows = |pad: usize| {
        let mut s = String::from("uid,screen_name,description,crawl_time\n");
        s += &format!("1000000000,起点,{},2026-11-29 23:00:00\n", "x".repeat(pad));
        for i in 1..1200 {
            s += &format!(
                "{},用户{i}号,喜欢旅行和摄影,2026-11-29 23:00:00\n",
                1000000000 + i
            );
        }
        s
    };
    // Two-byte characters from the start of a row: find a padding that puts a lead byte last.
    let (text, gb) = (0..64)
        .map(|pad| {
            let text = rows(pad);
            let gb = encoding_rs::GB18030.encode(&text).0.into_owned();
            (text, gb)
        })
        .find(|(_, gb)| {
            let mut i = 0;
            while i < SNIFF - 1 {
                i += if gb[i] < 0x80 { 1 } else { 2 };
            }
            i == SNIFF - 1 && gb[i] >= 0x81
        })
        .expect("a padding that cuts a character at the sniff's end");
    assert!(gb.len() > SNIFF);
    let (utf8_in, gb_in) = (dir.path().join("utf8"), dir.path().join("gb"));
    for (d, bytes) in [(&utf8_in, text.as_bytes()), (&gb_in, &gb[..])] {
        fs::create_dir_all(d).unwrap();
        fs::write(d.join("users.csv"), bytes).unwrap();
    }
    let outputs: Vec<String> = [&utf8_in, &gb_in]
        .iter()
        .map(|input| {
            let out = input.with_extension("out");
            let done = clean(input, &out, &[]);
            assert!(done.status.success(), "{}", stderr(&done));
            parquet_rows(&out.join("users").join(format!("dt={DATE}")))
        })
        .collect();
    assert_eq!(outputs[0].lines().count(), 1200);
    assert_eq!(outputs[0], outputs[1]);
}

/// A truncated `.gz` fails the run (exit 1) by default; with `--skip-corrupt-files` the
/// records before the break are kept, the break is one `corrupt_file` reject naming the file
/// and the line, and the report lists the file with its reason.
#[test]
fn a_truncated_gzip_fails_unless_corrupt_files_are_skipped() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    fs::create_dir_all(&raw).unwrap();
    let mut text = String::from("follower,followee,followed_at,crawl_time\n");
    for i in 0..20_000u64 {
        text.push_str(&format!(
            "{},{},2026-11-01 10:00:00,2026-11-29 23:00:00\n",
            1_000_000_000 + i,
            1_000_100_000 + (i * 7919) % 50_000
        ));
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    let whole = gz.finish().unwrap();
    fs::write(raw.join("follows.csv.gz"), &whole[..whole.len() * 2 / 3]).unwrap();
    fs::write(
        raw.join("users.csv"),
        "uid,screen_name,crawl_time\n1000000000,a,2026-11-29 23:00:00\n",
    )
    .unwrap();

    let failed = clean(&raw, &dir.path().join("a"), &[]);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    assert!(
        stderr(&failed).contains("follows.csv.gz"),
        "{}",
        stderr(&failed)
    );
    assert!(!dir.path().join("a/follows").exists());

    let report_path = dir.path().join("report.json");
    let ok = clean(
        &raw,
        &dir.path().join("b"),
        &[
            "--skip-corrupt-files",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    let report = report(&report_path);
    let files = report["clean"]["files"].as_array().unwrap();
    let gz_file = files
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("follows.csv.gz"))
        .unwrap();
    assert!(gz_file["corrupt"].as_str().is_some(), "{gz_file}");
    let follows = &report["clean"]["entities"]["follows"];
    let kept = follows["records_out"].as_u64().unwrap();
    assert!(kept > 1_000 && kept < 20_000, "{follows}");
    let unattributed = &report["clean"]["unattributed"];
    assert_eq!(unattributed["rejected_by_reason"]["corrupt_file"], 1);
    let rejects = fs::read_to_string(
        dir.path()
            .join("b/_rejects")
            .join(format!("dt={DATE}"))
            .join("rejects.jsonl"),
    )
    .unwrap();
    let line: Value = serde_json::from_str(rejects.lines().next().unwrap()).unwrap();
    assert_eq!(line["reason"], "corrupt_file");
    assert!(line["file"].as_str().unwrap().ends_with("follows.csv.gz"));
    // The break comes after the last record read (line 1 is the header).
    assert!(line["line"].as_u64().unwrap() > kept + 1, "{line}");
}

/// The report says what every file was read as; sidecars that are not data (weibo-crawler's
/// markdown, weiboSpider's `.txt` summary) are listed as skipped, with the reason, and are
/// neither records nor rejects.
#[test]
fn the_report_names_each_files_dialect_and_lists_sidecars_as_skipped() {
    let out = tempfile::tempdir().unwrap();
    let report_path = out.path().join("report.json");
    let result = clean(
        &sample_dir().join("crawlers"),
        &out.path().join("clean"),
        // The crawlers' reposts alone are mostly id-less 2020 records.
        &[
            "--max-reject-ratio",
            "1",
            "--mapping",
            "sample_data/crawlers/fork-mapped/_mapping.toml",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    assert!(result.status.success(), "{}", stderr(&result));
    let report = report(&report_path);
    let mut skipped = Vec::new();
    for file in report["clean"]["files"].as_array().unwrap() {
        let path = file["path"].as_str().unwrap();
        match file["skipped"].as_str() {
            Some(reason) => {
                assert!(file["format"].is_null(), "{file}");
                assert!(reason.contains("not data"), "{file}");
                skipped.push(path.rsplit('/').next().unwrap().to_string());
            }
            None => assert!(file["format"].as_str().is_some(), "{file}"),
        }
    }
    skipped.sort();
    assert_eq!(skipped, ["1500000023.md", "2803301701.txt"]);
    assert!(stderr(&result).contains("skipped"), "{}", stderr(&result));
    // Every record is of an entity but the fork's one with half its layout's evidence.
    let unattributed = &report["clean"]["unattributed"];
    assert_eq!(unattributed["records_in"], 1, "{unattributed}");
    assert_eq!(
        unattributed["rejected_by_reason"],
        serde_json::json!({"unknown_format": 1}),
        "{unattributed}"
    );
    let formats: BTreeSet<&str> = report["clean"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["format"].as_str())
        .collect();
    for dialect in [
        "weibo-crawler-json",
        "weibo-crawler-posts",
        "nghuyong-jsonl",
        "mediacrawler-csv",
    ] {
        assert!(formats.contains(dialect), "{dialect} not in {formats:?}");
    }
}

#[test]
fn a_follow_export_after_a_users_csv_is_read_as_follows_and_leaves_the_profile_intact() {
    let dir = tempfile::tempdir().unwrap();
    let crawl = dir.path().join("crawl");
    fs::create_dir(&crawl).unwrap();
    // weibo-crawler's users.csv, then a fork's follow export whose name sorts after it: the
    // export has `用户id` and `昵称` too, and read as users its edges would overwrite the
    // profile of 1669879400 with a followee's name.
    let header = "用户id,昵称,性别,生日,所在地,IP属地,学习经历,公司,注册时间,阳光信用,\
                  微博数,粉丝数,关注数,简介,主页,头像,高清头像,微博等级,会员等级,是否认证,\
                  认证类型,认证信息,上次记录微博信息";
    let profile = "1669879400,Dear-迪丽热巴,f,,上海,,,,2010-07-01,,1200,80000000,300,,,,,,,\
                   True,0,,";
    fs::write(crawl.join("users.csv"), format!("{header}\n{profile}\n")).unwrap();
    fs::write(
        crawl.join("users_follows.csv"),
        "用户id,关注者id,昵称\n1669879400,1195230310,何炅\n1669879400,2803301701,人民日报\n",
    )
    .unwrap();
    // Part of a layout's evidence, and no more: refused, not read by the nearest layout.
    fs::write(
        crawl.join("partial.csv"),
        "用户id,昵称\n1669879400,someone\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let report_path = dir.path().join("report.json");
    let result = clean(
        &crawl,
        &out,
        &[
            "--max-reject-ratio",
            "1",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    assert!(result.status.success(), "{}", stderr(&result));
    let users: Vec<Value> = parquet_rows(&out.join(format!("users/dt={DATE}")))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(users[0]["uid"], 1669879400, "{users:?}");
    assert_eq!(users[0]["screen_name"], "Dear-迪丽热巴", "{users:?}");
    assert_eq!(users[0]["followers_count"], 80000000, "{users:?}");
    let follows: BTreeSet<(i64, i64)> = parquet_rows(&out.join(format!("follows/dt={DATE}")))
        .lines()
        .map(|l| {
            let row: Value = serde_json::from_str(l).unwrap();
            (
                row["follower"].as_i64().unwrap(),
                row["followee"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        follows,
        BTreeSet::from([(1669879400, 1195230310), (1669879400, 2803301701)])
    );
    let report = report(&report_path);
    let file = |name: &str| -> Value {
        report["clean"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("{name} not in {report}"))
            .clone()
    };
    assert_eq!(file("/users_follows.csv")["format"], "follow-export");
    assert_eq!(file("/users.csv")["format"], "weibo-crawler-users");
    let partial = file("/partial.csv");
    assert_eq!(partial["format"], Value::Null, "{partial}");
    // The report says why: the layout it partly is, and what it lacks.
    let why = partial["warnings"].to_string();
    assert!(
        why.contains("weibo-crawler-users") && why.contains("微博数"),
        "{partial}"
    );
    let rejects = rejects_of(&out);
    assert!(
        rejects.contains("unknown_format") && rejects.contains("partial.csv"),
        "{rejects}"
    );
}

/// A MatrixMarket file and a `#`-commented edge list clean to the follows the same edges
/// give in our canonical CSV, and join to the same friends; the report names each reader
/// and says the ids are the file's own.
#[test]
fn matrix_market_and_edge_lists_give_the_follows_and_friends_of_the_same_csv() {
    let dir = tempfile::tempdir().unwrap();
    let edges: Vec<(i64, i64)> = (1..=40)
        .flat_map(|a| {
            [(a, a % 13 + 1), (a % 13 + 1, a)]
                .into_iter()
                .take(1 + (a % 3 == 0) as usize)
        })
        .filter(|(a, b)| a != b)
        .collect();
    let lines = |sep: &str| -> String {
        edges
            .iter()
            .map(|(a, b)| format!("{a}{sep}{b}\n"))
            .collect()
    };
    let inputs = [
        (
            "mtx",
            "graph.mtx",
            format!(
                "%%MatrixMarket matrix coordinate pattern general\n% a public graph\n40 40 {}\n{}",
                edges.len(),
                lines(" ")
            ),
        ),
        (
            "edges",
            "graph.txt",
            format!("# Directed graph\n# FromNodeId\tToNodeId\n{}", lines("\t")),
        ),
        (
            "csv",
            "follows.csv",
            format!(
                "follower,followee,followed_at,crawl_time\n{}",
                lines(",").replace('\n', ",,2026-11-29 20:00:00\n")
            ),
        ),
    ];
    let mut seen = Vec::new();
    for (name, file, text) in &inputs {
        let input = dir.path().join(name);
        fs::create_dir(&input).unwrap();
        fs::write(input.join(file), text).unwrap();
        let out = dir.path().join(format!("out-{name}"));
        let report_path = dir.path().join(format!("{name}.json"));
        let args = [
            "--max-reject-ratio",
            "0",
            "--report",
            report_path.to_str().unwrap(),
        ];
        let result = clean(&input, &out, &args);
        assert!(result.status.success(), "{name}: {}", stderr(&result));
        let follows: BTreeSet<(i64, i64)> = parquet_rows(&out.join(format!("follows/dt={DATE}")))
            .lines()
            .map(|l| {
                let row: Value = serde_json::from_str(l).unwrap();
                (
                    row["follower"].as_i64().unwrap(),
                    row["followee"].as_i64().unwrap(),
                )
            })
            .collect();
        let friends = run(bin()
            .args(["-q", "friends", "--input"])
            .arg(out.join("follows"))
            .arg("--output")
            .arg(&out)
            .args(["--date", DATE]));
        assert!(friends.status.success(), "{name}: {}", stderr(&friends));
        let pairs = parquet_rows(&out.join(format!("friends/dt={DATE}")));
        let report = report(&report_path);
        let files = report["clean"]["files"].as_array().unwrap().clone();
        seen.push((follows, pairs, files));
    }
    let want: BTreeSet<(i64, i64)> = edges.iter().copied().collect();
    for (name, (follows, pairs, _)) in inputs.iter().map(|i| i.0).zip(&seen) {
        assert_eq!(follows, &want, "{name}");
        assert_eq!(pairs, &seen[2].1, "{name}");
        assert!(pairs.lines().count() >= 5, "{pairs}");
    }
    for (i, format) in [(0, "matrix-market"), (1, "edge-list")] {
        let file = &seen[i].2[0];
        assert_eq!(file["format"], format, "{file}");
        assert!(
            file["warnings"][0].as_str().unwrap().contains("own"),
            "{file}"
        );
    }
}

/// `clean --inspect` writes nothing and shows each file's reading: its dialect, how its
/// columns map, and its first records as they would be cleaned or refused.
#[test]
fn inspect_shows_each_files_reading_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let crawlers = sample_dir().join("crawlers");
    let out = run(bin()
        .current_dir(dir.path())
        .args(["-q", "clean", "--inspect", "--date", DATE, "--input"])
        .arg(crawlers.join("weibo-search"))
        .arg("--input")
        .arg(crawlers.join("mediacrawler/csv/search_contents_2026-11-30.csv")));
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "read as weibo-search, posts (utf-8, none)",
        "id → mid, bid → bid, user_id → uid, 用户昵称 → -, 微博正文 → text",
        "line 2: posts {",
        "\"mid\":4974100000000001",
        "read as mediacrawler-csv, posts",
        "\"mid\":4974200000000001",
        "line 3: rejected, lossy_id: mid=4.9742E+15",
    ] {
        assert!(shown.contains(expected), "{expected:?} not in:\n{shown}");
    }
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        0,
        "inspect wrote nothing"
    );
}

//! `friends` against references: a naive set-based implementation on small random graphs,
//! and DuckDB's self-join (the peer script) on a larger one. Out-of-core and sliced runs must
//! give exactly the in-memory answer.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{Field, Schema};
use parquet::file::properties::WriterPropertiesBuilder;
use proptest::prelude::*;
use weibo_etl::dataset::parquet_io::{typed_properties, write_parquet};
use weibo_etl::graph::friends::{self, Friends, FriendsOptions, Slice};
use weibo_etl::hdfs::{FileSystems, Location, LOCAL_NAMENODE};

use crate::harness::{bin, run, stderr};
use crate::test_clean::parquet_rows;

type Edge = (i64, i64, Option<i64>);

/// Writes edges as a cleaned-follows Parquet file, in one row group.
fn write_follows(path: &Path, edges: &[Edge]) {
    write_follows_in_groups(path, edges, usize::MAX)
}

/// Writes edges as a cleaned-follows Parquet file in row groups of `rows` (each row group
/// is a unit of work of its own).
fn write_follows_in_groups(path: &Path, edges: &[Edge], rows: usize) {
    write_columns(path, follow_columns(edges), |props| {
        props.set_max_row_group_row_count(Some(rows.max(1)))
    });
}

/// Edges as the columns of cleaned follows.
fn follow_columns(edges: &[Edge]) -> Vec<(&'static str, ArrayRef)> {
    vec![
        (
            "follower",
            Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| e.0))),
        ),
        (
            "followee",
            Arc::new(Int64Array::from_iter_values(edges.iter().map(|e| e.1))),
        ),
        (
            "followed_at",
            Arc::new(
                TimestampMillisecondArray::from(edges.iter().map(|e| e.2).collect::<Vec<_>>())
                    .with_timezone("UTC"),
            ),
        ),
    ]
}

/// Writes named columns as one Parquet file, as another tool might lay out follows: the ids
/// required, `followed_at` nullable; `props` adjusts the writer (row groups, codec).
fn write_columns(
    path: &Path,
    columns: Vec<(&str, ArrayRef)>,
    props: impl FnOnce(WriterPropertiesBuilder) -> WriterPropertiesBuilder,
) {
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, array)| {
                Field::new(*name, array.data_type().clone(), *name == "followed_at")
            })
            .collect::<Vec<_>>(),
    ));
    let arrays = columns.into_iter().map(|(_, array)| array).collect();
    let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
    let fs = FileSystems::new(LOCAL_NAMENODE);
    let props = props(typed_properties(&schema)).build();
    write_parquet(
        &fs,
        &Location::Local(path.to_path_buf()),
        schema,
        props,
        Some(&batch),
    )
    .unwrap();
}

/// How [`write_pair_parts`] orders each part's rows.
#[derive(Clone, Copy, Debug)]
enum RowOrder {
    /// By `(min id, max id, follower)`, as clean writes follows.
    Canonical,
    /// By `(follower, followee)`.
    ByFollower,
    /// As given.
    Input,
}

/// Writes edges as clean lays follows out: `parts` files `<prefix>-part-<p>.parquet`, each
/// holding both directions of its pairs and saying so in its footer (`p/N`, as clean does),
/// its rows in `order`.
fn write_pair_parts(dir: &Path, prefix: &str, edges: &[Edge], parts: usize, order: RowOrder) {
    use parquet::file::metadata::KeyValue;
    use weibo_etl::dataset::follows::{footer_value as pair_partition_value, PAIR_PARTITION_KEY};
    for p in 0..parts {
        let mut part: Vec<Edge> = edges
            .iter()
            .filter(|(a, b, _)| (a.min(b) ^ a.max(b)).rem_euclid(parts as i64) == p as i64)
            .copied()
            .collect();
        match order {
            RowOrder::Canonical => part.sort_by_key(|&(a, b, _)| (a.min(b), a.max(b), a)),
            RowOrder::ByFollower => part.sort_by_key(|&(a, b, _)| (a, b)),
            RowOrder::Input => {}
        }
        write_columns(
            &dir.join(format!("{prefix}-part-{p}.parquet")),
            follow_columns(&part),
            |props| {
                props
                    .set_max_row_group_row_count(Some(5))
                    .set_key_value_metadata(Some(vec![KeyValue::new(
                        PAIR_PARTITION_KEY.to_string(),
                        pair_partition_value(p, parts),
                    )]))
            },
        );
    }
}

/// Runs `weibo-etl -q friends --input <input> --output <out> --date 2026-11-29 <extra>` and
/// checks that it succeeded.
fn friends_ok(input: &Path, out: &Path, extra: &[&str]) {
    let r = run(bin()
        .args(["-q", "friends", "--input"])
        .arg(input)
        .arg("--output")
        .arg(out)
        .args(["--date", "2026-11-29"])
        .args(extra));
    assert!(r.status.success(), "{}", stderr(&r));
}

/// The obvious implementation: a pair is mutual if both directed edges exist.
fn naive(edges: &[Edge]) -> BTreeMap<(i64, i64), Option<i64>> {
    let directed: HashSet<(i64, i64)> = edges.iter().map(|e| (e.0, e.1)).collect();
    let mut earliest: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for &(a, b, t) in edges {
        if let Some(t) = t {
            let slot = earliest.entry((a, b)).or_insert(t);
            *slot = (*slot).min(t);
        }
    }
    let mut out = BTreeMap::new();
    for &(a, b) in &directed {
        if a < b && directed.contains(&(b, a)) {
            let since = match (earliest.get(&(a, b)), earliest.get(&(b, a))) {
                (Some(x), Some(y)) => Some(*x.max(y)),
                _ => None,
            };
            out.insert((a, b), since);
        }
    }
    out
}

fn as_map(f: &Friends) -> BTreeMap<(i64, i64), Option<i64>> {
    f.uid_a
        .iter()
        .zip(&f.uid_b)
        .zip(&f.since)
        .map(|((a, b), s)| ((*a, *b), *s))
        .collect()
}

/// An in-memory-API run over the Parquet files in `dir`.
fn run_over(dir: &Path, budget: u64, slice: Slice) -> weibo_etl::error::Result<Friends> {
    let fs = FileSystems::new(LOCAL_NAMENODE);
    let options = FriendsOptions {
        memory_budget: budget,
        slice,
        spill_dir: None,
    };
    friends::run(&fs, &[dir.to_string_lossy().into_owned()], &options)
}

fn compute(dir: &Path, budget: u64, slice: Slice) -> Friends {
    run_over(dir, budget, slice).unwrap()
}

/// The error of an in-memory run over `dir`, which must fail.
fn refusal(dir: &Path) -> weibo_etl::error::Error {
    run_over(dir, 1 << 30, Slice::ALL).expect_err("the input is refused")
}

/// A random graph: `users` ids from `base`, `spacing` apart, `edges` follows of which about
/// `reciprocal` are answered, some crawled twice, some self-follows, some without a time.
fn random_graph(
    seed: u64,
    users: i64,
    edges: usize,
    reciprocal: f64,
    (base, spacing): (i64, i64),
) -> Vec<Edge> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::new();
    while out.len() < edges {
        let a = base + (next() % users as u64) as i64 * spacing;
        let b = base + (next() % users as u64) as i64 * spacing;
        // Times as crawlers give them (whole seconds), and some the compact time code cannot
        // hold (milliseconds, before 1970) so the exact side list is exercised too.
        let t = match next() % 8 {
            0 | 1 => None,
            2 => Some(1_300_000_000_000 + (next() % 400_000_000_000) as i64),
            3 => Some(-((next() % 1_000_000) as i64) * 1000),
            _ => Some(1_300_000_000_000 + (next() % 400_000_000) as i64 * 1000),
        };
        out.push((a, b, t));
        let r = next() % 1000;
        if (r as f64) < reciprocal * 1000.0 {
            out.push((
                b,
                a,
                (next() % 4 != 0).then(|| {
                    1_300_000_000_000 + (next() % 1000) as i64 * [1, 1000][(next() % 2) as usize]
                }),
            ));
        }
        if r % 17 == 0 {
            out.push((a, b, t)); // crawled twice
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn matches_naive_in_memory_out_of_core_and_sliced(
        seed in any::<u64>(),
        users in 2i64..60,
        edges in 0usize..400,
        ids in 0usize..4,
    ) {
        // Small ids, ten-digit ids close together (both coded as offsets from the smallest),
        // ids spread over more than 2^31 (coded through a dictionary), and ids sparse but
        // within 2^31 (offsets spanning far more codes than edges: out of core, the friend
        // counts are then hashed and sorted rather than counted in ranges).
        let layout = [
            (1, 1),
            (5_000_000_000, 1),
            (-3_000_000_000, 3_000_000_000),
            (7_000_000_000, 40_000),
        ][ids];
        let graph = random_graph(seed, users, edges, 0.3, layout);
        let all_ids = || graph.iter().flat_map(|e| [e.0, e.1]);
        let span = all_ids().max().unwrap_or(0) - all_ids().min().unwrap_or(0);
        let dir = tempfile::tempdir().unwrap();
        // Two files, as two crawl dates would give; one in row groups of 7 rows, each
        // decoded on its own (and self-follows leave gaps between their edges).
        let (left, right) = graph.split_at(graph.len() / 2);
        write_follows_in_groups(&dir.path().join("a.parquet"), left, 7);
        write_follows(&dir.path().join("b.parquet"), right);
        let expected = naive(&graph);

        let in_memory = compute(dir.path(), 1 << 30, Slice::ALL);
        prop_assert_eq!(&as_map(&in_memory), &expected);
        prop_assert_eq!(in_memory.stats.dictionary_encoded, span > i32::MAX as i64);
        prop_assert!(in_memory.uid_a.iter().zip(&in_memory.uid_b).all(|(a, b)| a < b));

        // A budget of a tenth of the packed edges: out of core, same answer, same order.
        let budget = (graph.len() as u64 * 8 / 10).max(1);
        let ooc = compute(dir.path(), budget, Slice::ALL);
        prop_assert!(graph.len() < 20 || ooc.stats.partitions > 1);
        prop_assert_eq!(&ooc.uid_a, &in_memory.uid_a);
        prop_assert_eq!(&ooc.uid_b, &in_memory.uid_b);
        prop_assert_eq!(&ooc.since, &in_memory.since);
        prop_assert_eq!(&ooc.counts, &in_memory.counts);

        // The same edges laid out in pair parts, as clean lays follows out: two dates of
        // three parts (one sorted as clean sorts, the other another way), and one date alone
        // in clean's order. Joined part by part: the same answer, in the same order, with the
        // same statistics.
        let parted = tempfile::tempdir().unwrap();
        let other_order = [RowOrder::ByFollower, RowOrder::Input][(seed % 2) as usize];
        write_pair_parts(parted.path(), "d1", left, 3, RowOrder::Canonical);
        write_pair_parts(parted.path(), "d2", right, 3, other_order);
        let one_date = tempfile::tempdir().unwrap();
        write_pair_parts(one_date.path(), "d", &graph, 3, RowOrder::Canonical);
        prop_assert_eq!(in_memory.stats.pair_parts, 0);
        for dir in [parted.path(), one_date.path()] {
            let mut by_part = compute(dir, 1 << 30, Slice::ALL);
            prop_assert_eq!(by_part.stats.pair_parts, 3);
            (by_part.stats.pair_parts, by_part.stats.streamed_parts) = (0, 0);
            prop_assert_eq!(&by_part, &in_memory);
        }

        // As clean writes one date (no edge twice, no self-follow): each part read in one
        // pass, with the naive answer.
        let mut seen = HashSet::new();
        let cleaned: Vec<Edge> = graph
            .iter()
            .filter(|e| e.0 != e.1 && seen.insert((e.0, e.1)))
            .copied()
            .collect();
        let clean_dir = tempfile::tempdir().unwrap();
        write_pair_parts(clean_dir.path(), "d", &cleaned, 3, RowOrder::Canonical);
        let streamed = compute(clean_dir.path(), 1 << 30, Slice::ALL);
        // (Ids coded through a dictionary are joined in a buffer instead.)
        let parts = if streamed.stats.dictionary_encoded { 0 } else { 3 };
        prop_assert_eq!(streamed.stats.streamed_parts, parts);
        prop_assert_eq!(&as_map(&streamed), &naive(&cleaned));
        prop_assert_eq!(streamed.stats.distinct_edges, cleaned.len() as u64);

        // Three slices: disjoint, and their union is the whole; the same joined by part.
        let mut union = BTreeMap::new();
        let mut counts: BTreeMap<i64, u64> = BTreeMap::new();
        for i in 0..3 {
            let part = compute(dir.path(), 1 << 30, Slice { index: i, count: 3 });
            for dir in [parted.path(), one_date.path()] {
                let mut by_part = compute(dir, 1 << 30, Slice { index: i, count: 3 });
                by_part.stats.pair_parts = 0;
                prop_assert_eq!(by_part.stats.streamed_parts, 0);
                prop_assert_eq!(&by_part, &part);
            }
            for (k, v) in as_map(&part) {
                prop_assert!(union.insert(k, v).is_none(), "pair in two slices");
            }
            for (uid, n) in part.counts {
                *counts.entry(uid).or_default() += n;
            }
        }
        prop_assert_eq!(&union, &expected);
        prop_assert_eq!(counts.into_iter().collect::<Vec<_>>(), in_memory.counts.clone());

        // Counts: each friend pair gives each side one friend.
        let mut by_user: BTreeMap<i64, u64> = BTreeMap::new();
        for (a, b) in expected.keys() {
            *by_user.entry(*a).or_default() += 1;
            *by_user.entry(*b).or_default() += 1;
        }
        prop_assert_eq!(by_user.into_iter().collect::<Vec<_>>(), in_memory.counts);
    }
}

#[test]
fn stats_count_duplicates_self_edges_and_reciprocity() {
    let dir = tempfile::tempdir().unwrap();
    let edges = vec![
        (1, 2, Some(10)),
        (2, 1, Some(20)),
        (1, 2, Some(5)), // crawled again, earlier time known
        (3, 3, None),    // self edge
        (1, 3, None),
        (3, 4, None),
        (4, 3, Some(7)),
    ];
    write_follows(&dir.path().join("f.parquet"), &edges);
    let f = compute(dir.path(), 1 << 30, Slice::ALL);
    assert_eq!(
        as_map(&f),
        BTreeMap::from([((1, 2), Some(20)), ((3, 4), None)])
    );
    let s = &f.stats;
    assert_eq!(
        (
            s.edges_read,
            s.duplicate_edges,
            s.self_edges,
            s.distinct_edges,
            s.mutual_pairs
        ),
        (7, 1, 1, 5, 2)
    );
    assert!((s.reciprocity - 0.8).abs() < 1e-9);
    assert_eq!(s.users_with_friends, 4);
    assert_eq!(f.counts, vec![(1, 1), (2, 1), (3, 1), (4, 1)]);
}

#[test]
fn equals_duckdb_self_join_on_a_larger_graph() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("follows.parquet");
    let graph = random_graph(42, 20_000, 200_000, 0.3, (1_000_000_000, 1));
    write_follows(&input, &graph);

    let peer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/duckdb_friends.py");
    let duck_out = dir.path().join("duck.parquet");
    let out = Command::new("python3")
        .arg(&peer)
        .arg(&input)
        .arg(&duck_out)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "DuckDB peer failed (pip install duckdb pyarrow): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = "import sys, pyarrow.parquet as pq\n\
                  t = pq.read_table(sys.argv[1]).to_pydict()\n\
                  for a, b in sorted(zip(t['uid_a'], t['uid_b'])): print(a, b)\n";
    let listed = Command::new("python3")
        .args(["-c", script])
        .arg(&duck_out)
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let duck: BTreeSet<(i64, i64)> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();

    // Through the CLI, as an operator would run it.
    let out_dir = dir.path().join("graph");
    friends_ok(&input, &out_dir, &[]);
    let ours: BTreeSet<(i64, i64)> = parquet_rows(&out_dir.join("friends/dt=2026-11-29"))
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["uid_a"].as_i64().unwrap(), v["uid_b"].as_i64().unwrap())
        })
        .collect();
    assert!(
        duck.len() > 10_000,
        "the graph should have many mutual pairs: {}",
        duck.len()
    );
    assert_eq!(ours, duck);
}

/// `((uid_a, uid_b), since)` of one friends file, in file order.
fn pair_rows(file: &Path) -> Vec<((i64, i64), Option<i64>)> {
    id_pair_rows(file, ["uid_a", "uid_b", "since"])
}

/// `((a, b), time)` of the named columns of one Parquet file (two ids and a timestamp), in
/// file order.
fn id_pair_rows(file: &Path, [a, b, time]: [&str; 3]) -> Vec<((i64, i64), Option<i64>)> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Int64Type, TimestampMillisecondType};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let column = |name: &str| batch.column_by_name(name).unwrap().clone();
        let (ca, cb, ct) = (column(a), column(b), column(time));
        let (ca, cb) = (
            ca.as_primitive::<Int64Type>(),
            cb.as_primitive::<Int64Type>(),
        );
        let ct = ct.as_primitive::<TimestampMillisecondType>();
        for i in 0..batch.num_rows() {
            let t = ct.is_valid(i).then(|| ct.value(i));
            rows.push(((ca.value(i), cb.value(i)), t));
        }
    }
    rows
}

/// A result of many batches, from follows as clean's output holds them (no self-follows,
/// times in whole seconds: the packing's branch-free path), is dealt to two files; each is
/// sorted by `(uid_a, uid_b)`, and together they hold exactly the naive answer.
#[test]
fn a_large_result_is_two_sorted_files_that_together_are_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("follows.parquet");
    let graph: Vec<Edge> = random_graph(99, 40_000, 400_000, 0.9, (6_000_000_000, 1))
        .into_iter()
        .filter(|e| e.0 != e.1)
        .map(|(a, b, t)| (a, b, t.filter(|t| *t >= 0).map(|t| t / 1000 * 1000)))
        .collect();
    write_follows_in_groups(&input, &graph, 100_000);
    let expected = naive(&graph);
    assert!(expected.len() > 2 * 65_536, "{} pairs", expected.len());

    let out = dir.path().join("graph");
    friends_ok(&input, &out, &[]);
    let folder = out.join("friends/dt=2026-11-29");
    let mut files: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".parquet"))
        .collect();
    files.sort();
    assert_eq!(files, ["part-00000.parquet", "part-00001.parquet"]);
    let mut union = BTreeMap::new();
    for name in files {
        let rows = pair_rows(&folder.join(&name));
        assert!(rows.len() > 65_536, "{name}: {} rows", rows.len());
        assert!(
            rows.windows(2).all(|w| w[0].0 < w[1].0),
            "{name} is not sorted by (uid_a, uid_b)"
        );
        for (pair, since) in rows {
            assert!(
                union.insert(pair, since).is_none(),
                "{pair:?} in both files"
            );
        }
    }
    assert_eq!(union, expected);
}

/// Follows as other tools write them: follow times in any timestamp unit (DuckDB and Spark
/// write microseconds) and pages in any common codec (DuckDB and Spark write Snappy) give
/// the same pairs and `since`; a `followed_at` that is no timestamp fails, naming the file.
#[test]
fn follows_from_other_writers_any_time_unit_and_codec() {
    use arrow::array::{
        StringArray, TimestampMicrosecondArray, TimestampNanosecondArray, TimestampSecondArray,
    };
    use parquet::basic::{Compression, GzipLevel};
    let dir = tempfile::tempdir().unwrap();
    // Whole seconds, so every unit holds them exactly.
    let graph: Vec<Edge> = random_graph(5, 300, 3_000, 0.5, (1, 1))
        .into_iter()
        .map(|(a, b, t)| (a, b, t.filter(|t| *t >= 0).map(|t| t / 1000 * 1000)))
        .collect();
    let expected = naive(&graph);
    assert!(expected.values().filter(|s| s.is_some()).count() > 100);
    let times = |scale: i64| graph.iter().map(move |e| e.2.map(|t| t / 1000 * scale));
    let columns: [(&str, ArrayRef, Compression); 4] = [
        (
            "ms",
            Arc::new(TimestampMillisecondArray::from_iter(times(1000))),
            Compression::SNAPPY,
        ),
        (
            "s",
            Arc::new(TimestampSecondArray::from_iter(times(1)).with_timezone("UTC")),
            Compression::GZIP(GzipLevel::default()),
        ),
        (
            "us",
            Arc::new(TimestampMicrosecondArray::from_iter(times(1_000_000)).with_timezone("UTC")),
            Compression::LZ4_RAW,
        ),
        (
            "ns",
            Arc::new(TimestampNanosecondArray::from_iter(times(1_000_000_000))),
            Compression::UNCOMPRESSED,
        ),
    ];
    let write = |name: &str, followed_at: ArrayRef, codec: Compression| {
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "follower",
                Arc::new(Int64Array::from_iter_values(graph.iter().map(|e| e.0))),
            ),
            (
                "followee",
                Arc::new(Int64Array::from_iter_values(graph.iter().map(|e| e.1))),
            ),
            ("followed_at", followed_at),
        ];
        let folder = dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        write_columns(&folder.join("f.parquet"), columns, |p| {
            p.set_compression(codec)
        });
        folder
    };
    for (unit, column, codec) in columns {
        let folder = write(unit, column, codec);
        assert_eq!(
            as_map(&compute(&folder, 1 << 30, Slice::ALL)),
            expected,
            "followed_at in {unit}"
        );
    }
    let folder = write(
        "text",
        Arc::new(StringArray::from_iter_values(
            graph.iter().map(|_| "2026-11-29"),
        )),
        Compression::SNAPPY,
    );
    let message = refusal(&folder).to_string();
    assert!(
        message.contains("f.parquet") && message.contains("not a timestamp"),
        "{message}"
    );
}

/// Ids kept in narrower or unsigned integers by other writers give the same pairs; an
/// unsigned id beyond int64 is refused, naming the file, rather than wrapped.
#[test]
fn ids_in_other_integer_types_give_the_same_pairs() {
    use arrow::array::{Int32Array, UInt32Array, UInt64Array};
    let dir = tempfile::tempdir().unwrap();
    let graph = random_graph(8, 400, 3_000, 0.5, (1_000_000, 3));
    let expected = naive(&graph);
    assert!(expected.len() > 100);
    let write = |name: &str, follower: ArrayRef, followee: ArrayRef| {
        let folder = dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        let columns = vec![("follower", follower), ("followee", followee)];
        write_columns(&folder.join("f.parquet"), columns, |p| p);
        folder
    };
    let ids = |f: fn(&Edge) -> i64| graph.iter().map(f).collect::<Vec<i64>>();
    let (from, to) = (ids(|e| e.0), ids(|e| e.1));
    let int32 = write(
        "int32",
        Arc::new(Int32Array::from_iter_values(from.iter().map(|&i| i as i32))),
        Arc::new(Int32Array::from_iter_values(to.iter().map(|&i| i as i32))),
    );
    let uint32 = write(
        "uint32",
        Arc::new(UInt32Array::from_iter_values(
            from.iter().map(|&i| i as u32),
        )),
        Arc::new(UInt32Array::from_iter_values(to.iter().map(|&i| i as u32))),
    );
    for folder in [int32, uint32] {
        let pairs: BTreeSet<(i64, i64)> = as_map(&compute(&folder, 1 << 30, Slice::ALL))
            .into_keys()
            .collect();
        assert_eq!(pairs, expected.keys().copied().collect(), "{folder:?}");
    }
    let huge = write(
        "uint64",
        Arc::new(UInt64Array::from_iter_values([1, u64::MAX])),
        Arc::new(UInt64Array::from_iter_values([u64::MAX, 1])),
    );
    let err = refusal(&huge);
    assert!(err.to_string().contains("f.parquet"), "{err}");
}

/// clean writes follows in parts by canonical pair, each saying so in its footer, and
/// friends joins them part by part: one sorted file of pairs per part, together the same
/// pairs as the run over the same edges in one file of another writer's, and as many as
/// the generator made.
#[test]
fn clean_follows_are_joined_part_by_part() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let dir = tempfile::tempdir().unwrap();
    let clean_out = generated_clean_follows(dir.path(), 3, 5);
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("raw").join("_truth.json")).unwrap())
            .unwrap();

    // Every part says which of the 5 it is, and holds both directions of its pairs.
    let follows = clean_out.join("follows/dt=2026-11-29");
    let mut part_of: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    let mut edges: Vec<Edge> = Vec::new();
    for p in 0..5 {
        let file = follows.join(format!("part-{p:05}.parquet"));
        let reader = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
        let said = reader
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| {
                kv.iter()
                    .find(|kv| kv.key == weibo_etl::dataset::follows::PAIR_PARTITION_KEY)
            })
            .and_then(|kv| kv.value.clone());
        assert_eq!(said.as_deref(), Some(format!("{p}/5").as_str()));
        for ((a, b), t) in follow_rows(&file) {
            part_of.insert((a.min(b), a.max(b)), p);
            assert_eq!(
                part_of[&(a.min(b), a.max(b))],
                p,
                "{a} and {b} in two parts"
            );
            edges.push((a, b, t));
        }
    }

    let out = dir.path().join("graph");
    let report = dir.path().join("report.json");
    friends_ok(&follows, &out, &["--report", report.to_str().unwrap()]);
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(stats["friends"]["pair_parts"], 5);
    assert_eq!(stats["friends"]["streamed_parts"], 5);
    assert_eq!(stats["friends"]["mutual_pairs"], truth["friend_pairs"]);
    let folder = out.join("friends/dt=2026-11-29");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 5);
    let mut union = BTreeMap::new();
    for file in &files {
        let rows = pair_rows(file);
        assert!(
            rows.windows(2).all(|w| w[0].0 < w[1].0),
            "{} is not sorted by (uid_a, uid_b)",
            file.display()
        );
        for (pair, since) in rows {
            assert!(union.insert(pair, since).is_none(), "{pair:?} in two files");
        }
    }
    assert_eq!(union, naive(&edges));
    assert!(union.len() > 1_000, "{} pairs", union.len());

    let single = dir.path().join("single.parquet");
    write_follows(&single, &edges);
    let other = dir.path().join("other");
    friends_ok(&single, &other, &[]);
    let rows = |dir: &Path| parquet_rows(&dir.join("friend_counts/dt=2026-11-29"));
    assert_eq!(rows(&out), rows(&other));
}

/// A memory budget follows what the chosen path holds: clean's follows in many pair parts
/// stay on the pair-parts path under a budget just below what packing every edge takes
/// (which sends input of another layout out of core), and only a budget below the
/// pair-parts bound goes out of core. Every run gives the same pairs and counts.
#[test]
fn a_budget_the_pair_parts_fit_in_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let clean_out = generated_clean_follows(dir.path(), 5, 50);
    let follows = clean_out.join("follows/dt=2026-11-29");
    let friends_with = |name: &str, budget: Option<u64>| {
        let out = dir.path().join(name);
        let report = dir.path().join(format!("{name}.json"));
        let mut args = vec![
            "-q".to_string(),
            "--report".into(),
            report.display().to_string(),
        ];
        args.extend(["friends", "--input"].map(String::from));
        args.push(follows.display().to_string());
        args.extend(["--output".into(), out.display().to_string()]);
        args.extend(["--date", "2026-11-29"].map(String::from));
        if let Some(b) = budget {
            args.extend(["--memory-budget".into(), format!("{b}B")]);
        }
        let r = run(bin().env("RAYON_NUM_THREADS", "2").args(&args));
        assert!(r.status.success(), "{}", stderr(&r));
        let stats: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        // Rows of all files, sorted: the paths cut their output into different files.
        let rows = |t: &str| {
            let text = parquet_rows(&out.join(t).join("dt=2026-11-29"));
            let mut lines: Vec<String> = text.lines().map(String::from).collect();
            lines.sort();
            lines
        };
        (
            stats["friends"].clone(),
            rows("friends"),
            rows("friend_counts"),
        )
    };
    let (whole, pairs, counts) = friends_with("default", None);
    let edges = whole["edges_read"].as_u64().unwrap();
    assert_eq!(whole["pair_parts"], 50);

    // Just below 12 bytes an edge: another layout's input would go out of core here.
    let (tight, tight_pairs, tight_counts) = friends_with("tight", Some(12 * edges - 1));
    assert_eq!(
        (tight["partitions"].as_u64(), tight["pair_parts"].as_u64()),
        (Some(1), Some(50))
    );
    assert!(
        tight_pairs == pairs && tight_counts == counts,
        "tight budget: other rows"
    );

    // Below the ends of one pair for two edges: out of core, the same answer.
    let (small, small_pairs, small_counts) = friends_with("small", Some(2 * edges));
    assert!(small["partitions"].as_u64().unwrap() > 1, "{small}");
    assert_eq!(small["pair_parts"], 0);
    assert!(
        small_pairs == pairs && small_counts == counts,
        "out of core: other rows"
    );
    assert!(pairs.len() > 1_000, "{} pairs", pairs.len());
}

/// Follows of 4,000 generated users (`seed`), cleaned under `<dir>/clean` in `parts` pair
/// parts (the raw files and their `_truth.json` under `<dir>/raw`).
fn generated_clean_follows(dir: &Path, seed: u32, parts: u32) -> PathBuf {
    let raw = dir.join("raw");
    let gen = run(bin().args(["-q", "gen", "--out"]).arg(&raw).args([
        "--users",
        "4000",
        "--seed",
        &seed.to_string(),
        "--only",
        "follows",
        "--noise",
        "0",
    ]));
    assert!(gen.status.success(), "{}", stderr(&gen));
    let clean_out = dir.join("clean");
    let r = run(bin()
        .args(["-q", "clean", "--input"])
        .arg(&raw)
        .arg("--output")
        .arg(&clean_out)
        .args([
            "--date",
            "2026-11-29",
            "--key-partitions",
            &parts.to_string(),
        ]));
    assert!(r.status.success(), "{}", stderr(&r));
    clean_out
}

/// `((follower, followee), followed_at)` of one cleaned follows file.
fn follow_rows(file: &Path) -> Vec<((i64, i64), Option<i64>)> {
    id_pair_rows(file, ["follower", "followee", "followed_at"])
}

#[test]
fn sliced_runs_write_their_own_folders_and_union_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("follows.parquet");
    write_follows(&input, &random_graph(7, 500, 3_000, 0.3, (1, 1)));
    let out = dir.path().join("graph");
    let mut whole = BTreeSet::new();
    friends_ok(&input, &out, &[]);
    for l in parquet_rows(&out.join("friends/dt=2026-11-29")).lines() {
        whole.insert(l.to_string());
    }
    let sliced_out = dir.path().join("sliced");
    let mut union = BTreeSet::new();
    for i in 0..4 {
        friends_ok(&input, &sliced_out, &["--partition", &format!("{i}/4")]);
        let slice_dir = sliced_out.join(format!("friends/dt=2026-11-29/slice={i}-of-4"));
        assert!(slice_dir.join("_SUCCESS").exists());
        for l in parquet_rows(&slice_dir).lines() {
            assert!(union.insert(l.to_string()), "row in two slices: {l}");
        }
    }
    assert_eq!(union, whole);
    let bad = run(bin().args([
        "friends",
        "--input",
        "x",
        "--output",
        "y",
        "--date",
        "2026-11-29",
        "--partition",
        "4/4",
    ]));
    assert_eq!(bad.status.code(), Some(2));
}

/// `--data-page-version 1` and the default (2) write the same pairs and counts, in pages of
/// the version asked for.
#[test]
fn data_page_versions_hold_the_same_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("follows.parquet");
    write_follows(&input, &random_graph(11, 400, 2_000, 0.3, (1, 1)));
    let mut outputs = Vec::new();
    for version in ["1", "2"] {
        let out = dir.path().join(version);
        friends_ok(&input, &out, &["--data-page-version", version]);
        for table in ["friends", "friend_counts"] {
            let kinds = crate::test_clean::page_versions(
                &out.join(table).join("dt=2026-11-29/part-00000.parquet"),
            );
            assert!(
                !kinds.is_empty() && kinds.iter().all(|k| *k == version),
                "{table}: {kinds:?}"
            );
        }
        outputs.push(
            ["friends", "friend_counts"].map(|t| parquet_rows(&out.join(t).join("dt=2026-11-29"))),
        );
    }
    assert!(!outputs[0][0].is_empty());
    assert_eq!(outputs[0], outputs[1]);
}

/// A run that fails half-way (here: `--load` against a gateway nobody listens on) leaves the
/// previous output untouched and no staged files behind, and exits with the unreachable-HBase
/// code.
#[test]
fn a_failed_run_leaves_the_previous_output_and_nothing_staged() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("follows.parquet");
    write_follows(&input, &random_graph(11, 200, 1_500, 0.3, (1, 1)));
    let out = dir.path().join("graph");
    let friends = |extra: &[&str]| {
        run(bin()
            .args(["-q", "--hbase", "127.0.0.1:1", "friends", "--input"])
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .args(["--date", "2026-11-29"])
            .args(extra))
    };
    let first = friends(&[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let before = crate::test_clean::tree(&out);
    assert!(before.keys().any(|k| k.ends_with("_SUCCESS")));

    let failed = friends(&["--load"]);
    assert_eq!(failed.status.code(), Some(5), "{}", stderr(&failed));
    assert_eq!(
        crate::test_clean::tree(&out),
        before,
        "a failed run changed the output"
    );
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.starts_with("_tmp"), "left behind: {}", path.display());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
}

/// Given clean's follows root, friends reads its committed nights up to `--date` only: a
/// later night and a night without `_SUCCESS` are left out, so a rerun of an old date by
/// hand sees that date's history.
#[test]
fn a_follows_root_is_read_up_to_the_date_and_committed_nights_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("follows");
    let night = |date: &str, edges: &[Edge], committed: bool| {
        let d = root.join(format!("dt={date}"));
        std::fs::create_dir_all(&d).unwrap();
        write_follows(&d.join("part-00000.parquet"), edges);
        if committed {
            std::fs::write(d.join("_SUCCESS"), b"").unwrap();
        }
    };
    let first: [Edge; 3] = [(1, 2, Some(1_000)), (2, 1, Some(2_000)), (3, 4, None)];
    let second: [Edge; 2] = [(4, 3, None), (5, 6, None)];
    night("2026-11-28", &first, true);
    night("2026-11-29", &second, true);
    // Either would make (5, 6) friends, the later one (7, 8) too.
    night("2026-11-27", &[(6, 5, None)], false);
    night(
        "2026-11-30",
        &[(6, 5, None), (7, 8, None), (8, 7, None)],
        true,
    );
    let out = dir.path().join("out");
    friends_ok(&root, &out, &[]);
    let mut ours = BTreeMap::new();
    for entry in std::fs::read_dir(out.join("friends/dt=2026-11-29")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "parquet") {
            ours.extend(pair_rows(&path));
        }
    }
    let history: Vec<Edge> = first.iter().chain(&second).copied().collect();
    assert_eq!(ours, naive(&history));
    assert_eq!(ours.len(), 2, "{ours:?}");
}

/// Night after night over a follows root, each run continues from the night before (its
/// report says from which) and gives what the join over every night gives: the same pairs,
/// counts and figures. A late night is folded in the same way; a night cleaned again since
/// the base (it may have lost edges) sends the run back to the full join.
#[test]
fn each_night_continues_from_the_last_and_equals_the_join_over_every_night() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("follows");
    let night = |date: &str, edges: &[Edge]| {
        let d = root.join(format!("dt={date}"));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        write_follows(&d.join("part-00000.parquet"), edges);
        std::fs::write(d.join("_SUCCESS"), b"").unwrap();
    };
    // Few users, so later nights answer and crawl again the edges of earlier ones.
    let graph = random_graph(7, 300, 4_000, 0.3, (1_000, 3));
    let nights: Vec<&[Edge]> = graph.chunks(1_000).collect();
    let dates = ["2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29"];
    // Runs `date` into `out`; returns its report's figures and its pairs and counts.
    let friends_of = |out: &Path, date: &str| {
        let report = out.join(format!("report-{date}.json"));
        let r = run(bin()
            .args(["-q", "friends", "--input"])
            .arg(&root)
            .arg("--output")
            .arg(out)
            .args(["--date", date, "--report"])
            .arg(&report));
        assert!(r.status.success(), "{}", stderr(&r));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let files = |table: &str| -> Vec<PathBuf> {
            let dir = out.join(format!("{table}/dt={date}"));
            let files = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path());
            files
                .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
                .collect()
        };
        let pairs: BTreeMap<(i64, i64), i64> = files("friends")
            .iter()
            .flat_map(|f| pair_rows(f))
            .map(|(k, s)| (k, s.unwrap_or(i64::MIN)))
            .collect();
        let counts: BTreeMap<i64, i64> = files("friend_counts")
            .iter()
            .flat_map(|f| count_rows(f))
            .collect();
        (report["friends"].clone(), pairs, counts)
    };
    let out = dir.path().join("out");
    // Each night against a full join of the same nights into a fresh output.
    let check = |date: &str, carried_from: Option<&str>, union: &[Edge]| {
        let (figures, pairs, counts) = friends_of(&out, date);
        assert_eq!(
            figures["carried_from"].as_str(),
            carried_from,
            "{date}: {figures}"
        );
        let fresh = tempfile::tempdir().unwrap();
        let (full, full_pairs, full_counts) = friends_of(fresh.path(), date);
        assert!(full["carried_from"].is_null());
        // The same figures, but for how the join went.
        let how = ["carried_from", "pair_parts", "streamed_parts"];
        let counted = |mut f: serde_json::Value| {
            for k in how {
                f[k] = serde_json::Value::Null;
            }
            f
        };
        assert_eq!(counted(figures), counted(full), "{date}");
        assert_eq!((&pairs, &counts), (&full_pairs, &full_counts), "{date}");
        let want: BTreeMap<(i64, i64), i64> = naive(union)
            .into_iter()
            .map(|(k, s)| (k, s.unwrap_or(i64::MIN)))
            .collect();
        assert_eq!(pairs, want, "{date}");
        assert!(!pairs.is_empty());
    };
    night(dates[0], nights[0]);
    check(dates[0], None, nights[0]);
    night(dates[2], nights[2]);
    check(dates[2], Some(dates[0]), &[nights[0], nights[2]].concat());
    // A late night, between the two: folded in by a rerun of the newest date.
    night(dates[1], nights[1]);
    check(dates[2], Some(dates[0]), &nights[..3].concat());
    night(dates[3], nights[3]);
    check(dates[3], Some(dates[2]), &nights.concat());
    // Night 2 cleaned again, with fewer edges: its base saw the old ones.
    std::thread::sleep(std::time::Duration::from_millis(20));
    night(dates[1], &nights[1][..500]);
    let union = [nights[0], &nights[1][..500], nights[2], nights[3]].concat();
    check(dates[3], None, &union);
}

/// The `(uid, friends)` rows of a friend counts file.
fn count_rows(file: &Path) -> Vec<(i64, i64)> {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let uid = batch.column(0).as_primitive::<Int64Type>().clone();
        let n = batch.column(1).as_primitive::<Int64Type>().clone();
        rows.extend(uid.values().iter().copied().zip(n.values().iter().copied()));
    }
    rows
}

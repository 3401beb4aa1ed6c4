use proptest::prelude::*;

use super::record::{cmp_keys, group_len, row_prefix, split, Decoded, Record};
use super::*;
use crate::hdfs::FileSystems;

type Parts = (u8, Vec<u8>, u32, Vec<u8>, Vec<u8>, i64, u64);

fn encoded(p: &Parts) -> Vec<u8> {
    let mut out = Vec::new();
    Record {
        table: p.0,
        family: &p.1,
        region: p.2,
        row: &p.3,
        qualifier: &p.4,
        ts: p.5,
        seq_inv: p.6,
        value: b"v",
        kind: crate::hbase::hfile::TYPE_PUT,
    }
    .encode(&mut out);
    out
}

proptest! {
    /// Byte order of the encoded keys is the naive order of the parts (timestamp and
    /// emission descending), and every part reads back.
    #[test]
    fn keys_sort_as_their_parts_and_read_back(
        parts in proptest::collection::vec(
            (0u8..3, prop_oneof![Just(b"count".to_vec()), Just(b"info".to_vec()), Just(b"r".to_vec())],
             0u32..3, proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(0xff), any::<u8>()], 1..12),
             proptest::collection::vec(prop_oneof![Just(0u8), Just(0xff), any::<u8>()], 0..4),
             prop_oneof![Just(i64::MIN), Just(-1i64), Just(0), Just(i64::MAX), any::<i64>()],
             any::<u64>()),
            1..40),
    ) {
        let mut naive = parts.clone();
        naive.sort_by(|a, b| {
            (a.0, &a.1, a.2, &a.3, &a.4).cmp(&(b.0, &b.1, b.2, &b.3, &b.4))
                .then(b.5.cmp(&a.5))
                .then(a.6.cmp(&b.6))
        });
        let mut bytes: Vec<Vec<u8>> = parts.iter().map(encoded).collect();
        // Within a file, a smaller row prefix is a smaller key.
        for a in &bytes {
            for b in &bytes {
                let (ka, kb) = (split(a).0, split(b).0);
                if ka[..group_len(ka)] == kb[..group_len(kb)] && row_prefix(ka) < row_prefix(kb) {
                    prop_assert_eq!(cmp_keys(ka, kb), std::cmp::Ordering::Less);
                }
            }
        }
        bytes.sort_by(|a, b| cmp_keys(split(a).0, split(b).0));
        let mut d = Decoded::default();
        for (p, b) in naive.iter().zip(&bytes) {
            let (key, value) = split(b);
            d.read(key);
            prop_assert_eq!((d.table, &d.family, d.region, &d.row, &d.qualifier, d.ts), (p.0, &p.1, p.2, &p.3, &p.4, p.5));
            prop_assert_eq!(value, b"v");
        }
    }
}

/// The emission number of the `i`-th put.
fn seq(i: u32) -> u64 {
    u64::from(i) << MAX_CELL_BITS
}

fn boundaries() -> Boundaries {
    let mut b = Boundaries::default();
    b.0.insert(Table::User, vec![vec![], vec![0x80]]);
    b.0.insert(Table::Follow, vec![vec![]]);
    b
}

/// (row, qualifier, timestamp, value) as read back.
type ReadCell = (Vec<u8>, Vec<u8>, i64, Vec<u8>);

/// Collects puts, writes the HFiles to a local folder, and reads back (row, qualifier, ts,
/// value) per file ("table/family/region") with the test reader.
fn run(puts: &[(Table, i64, Put)], budget: usize) -> Vec<(String, Vec<ReadCell>)> {
    run_cells(puts, budget)
        .into_iter()
        .map(|(name, cells)| {
            let cells = cells
                .into_iter()
                .map(|c| (c.row, c.qualifier, c.timestamp, c.value))
                .collect();
            (name, cells)
        })
        .collect()
}

/// [`run`], with the whole cells read back (their types too).
fn run_cells(
    puts: &[(Table, i64, Put)],
    budget: usize,
) -> Vec<(String, Vec<crate::hbase::hfile::reader::OwnedCell>)> {
    let b = boundaries();
    let spill = SpillDir::create(None, "bulk-test").unwrap();
    let out = tempfile::tempdir().unwrap();
    let fs = FileSystems::new("hdfs://127.0.0.1:9");
    let staging = fs.parse(out.path().to_str().unwrap()).unwrap();
    let mut c = Collector::new(0, &b, &spill, budget);
    c.budget = budget;
    for (i, (t, ts, p)) in puts.iter().enumerate() {
        c.add(*t, *ts, seq(i as u32), p).unwrap();
    }
    let staged = c
        .write_hfiles(&fs, &staging, &WriterOptions::default())
        .unwrap();
    staged
        .iter()
        .map(|f| {
            let bytes = fs.read_to_vec(&fs.parse(&f.location).unwrap()).unwrap();
            let parsed = crate::hbase::hfile::reader::parse(&bytes).unwrap().cells;
            let rel = f.location.rsplit('/').take(3).collect::<Vec<_>>();
            (
                format!(
                    "{}/{}/{}",
                    rel[2],
                    rel[1],
                    rel[0].split('-').nth(1).unwrap()
                ),
                parsed,
            )
        })
        .collect()
}

#[test]
fn a_collector_spills_once_per_budget_of_cells() {
    let b = boundaries();
    let spill = SpillDir::create(None, "bulk-test").unwrap();
    let mut c = Collector::new(0, &b, &spill, 1 << 20);
    let put = |i: u32| Put::new(i.to_be_bytes().to_vec()).cell("info:n", vec![b'x'; 100]);
    for i in 0..1_000 {
        c.add(Table::User, 1, seq(i), &put(i)).unwrap();
    }
    assert!(c.runs.is_empty(), "150 KB fit in 1 MiB");
    // About 3 MB of records: a few runs of close to the budget each, not one per put.
    for i in 1_000..21_000 {
        c.add(Table::User, 1, seq(i), &put(i)).unwrap();
    }
    assert!((2..=5).contains(&c.runs.len()), "{} runs", c.runs.len());
    assert!(
        c.arena.capacity() <= 1 << 20,
        "the buffer never grows past the budget"
    );
}

/// Spills 50 puts of `value(i)` as one run, lets `damage` change the scratch file, and
/// returns the file's name and the error of the merge that follows.
fn merge_error_after(
    budget: usize,
    value: impl Fn(u32) -> Vec<u8>,
    damage: impl Fn(&std::path::Path),
) -> (String, String) {
    let b = boundaries();
    let spill = SpillDir::create(None, "bulk-test").unwrap();
    let out = tempfile::tempdir().unwrap();
    let fs = FileSystems::new("hdfs://127.0.0.1:9");
    let staging = fs.parse(out.path().to_str().unwrap()).unwrap();
    let mut c = Collector::new(0, &b, &spill, budget);
    c.budget = budget;
    for i in 0..50u32 {
        let put = Put::new(i.to_be_bytes().to_vec()).cell("info:n", value(i));
        c.add(Table::User, 1, seq(i), &put).unwrap();
    }
    c.spill_run().unwrap();
    let name = c.file.as_ref().unwrap().name.clone();
    damage(&spill.path(&name));
    let err = c
        .write_hfiles(&fs, &staging, &WriterOptions::default())
        .unwrap_err();
    (name, err.to_string())
}

#[test]
fn a_spilled_run_cut_short_fails_the_merge() {
    let (name, err) = merge_error_after(
        1,
        |_| vec![b'x'; 300],
        |path| {
            let len = std::fs::metadata(path).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            f.set_len(len / 2).unwrap();
        },
    );
    assert!(err.contains(&name), "{err}");
}

#[test]
fn a_spilled_block_changed_on_disk_fails_the_merge() {
    let (name, err) = merge_error_after(
        1 << 20,
        |i| format!("value {i}").into_bytes(),
        |path| {
            let mut bytes = std::fs::read(path).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 0x55;
            std::fs::write(path, bytes).unwrap();
        },
    );
    assert!(err.contains(&name) && err.contains("checksum"), "{err}");
}

#[test]
fn many_runs_merge_in_groups_to_the_same_files() {
    // 300 puts spilled one run each: more runs than the smallest fan-in, so groups of the
    // smallest runs merge first. Every cell is emitted twice, 150 puts apart: the later
    // value must win whichever runs merge together.
    let puts: Vec<(Table, i64, Put)> = (0..300u32)
        .map(|i| {
            let row = ((i % 150).wrapping_mul(2_654_435_761))
                .to_be_bytes()
                .to_vec();
            let put = Put::new(row).cell("info:n", format!("v{i}"));
            (Table::User, i64::from(i % 3), put)
        })
        .collect();
    let spilled = run(&puts, 1);
    assert_eq!(spilled, run(&puts, 1 << 30));
    let values: Vec<String> = spilled
        .iter()
        .flat_map(|f| f.1.iter().map(|c| String::from_utf8(c.3.clone()).unwrap()))
        .collect();
    assert_eq!(values.len(), 150);
    for v in &values {
        let i: u32 = v[1..].parse().unwrap();
        assert!(i >= 150, "{v}: the earlier emission survived");
    }
}

#[test]
fn files_follow_table_family_and_region_and_the_last_put_wins() {
    let puts = vec![
        (
            Table::User,
            5,
            Put::new(vec![0x90, 1])
                .cell("info:n", "late")
                .cell("count:f", vec![1]),
        ),
        (
            Table::User,
            5,
            Put::new(vec![0x10, 1]).cell("info:n", "early"),
        ),
        (Table::Follow, 5, Put::new(vec![0x10, 2]).cell("r:t", "x")),
        // The same cell again: the later emission wins.
        (
            Table::User,
            5,
            Put::new(vec![0x90, 1]).cell("info:n", "later"),
        ),
        // An older version of the same cell stays.
        (
            Table::User,
            4,
            Put::new(vec![0x90, 1]).cell("info:n", "older"),
        ),
    ];
    for budget in [1, 1 << 30] {
        let files = run(&puts, budget);
        let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "user/count/r1",
                "user/info/r0",
                "user/info/r1",
                "follow/r/r0"
            ]
        );
        let get = |name: &str| files.iter().find(|f| f.0 == name).unwrap().1.clone();
        assert_eq!(
            get("user/info/r0"),
            vec![(vec![0x10, 1], b"n".to_vec(), 5, b"early".to_vec())]
        );
        assert_eq!(
            get("user/info/r1"),
            vec![
                (vec![0x90, 1], b"n".to_vec(), 5, b"later".to_vec()),
                (vec![0x90, 1], b"n".to_vec(), 4, b"older".to_vec()),
            ],
            "budget {budget}"
        );
        assert_eq!(
            get("user/count/r1"),
            vec![(vec![0x90, 1], b"f".to_vec(), 5, vec![1])]
        );
        assert_eq!(
            get("follow/r/r0"),
            vec![(vec![0x10, 2], b"t".to_vec(), 5, b"x".to_vec())]
        );
    }
}

/// A column the record lacks is a delete marker of its own type (no value), in HBase's
/// order among the puts; of a put and a marker of one cell, the later emission stands.
#[test]
fn a_missing_column_is_a_delete_marker_and_the_later_emission_wins() {
    use crate::hbase::hfile::{TYPE_DELETE_COLUMN, TYPE_PUT};
    let row = vec![0x10, 1];
    let puts = vec![
        (
            Table::User,
            5,
            Put::new(row.clone())
                .cell("info:n", "a")
                .delete("info:d")
                .delete("info:m"),
        ),
        // The same cell as the first marker, emitted later: the put stands.
        (Table::User, 5, Put::new(row.clone()).cell("info:m", "back")),
        (Table::User, 6, Put::new(row.clone()).delete("info:n")),
    ];
    for budget in [1, 1 << 30] {
        let files = run_cells(&puts, budget);
        assert_eq!(files.len(), 1);
        let got: Vec<(&[u8], i64, &[u8], u8)> = files[0]
            .1
            .iter()
            .map(|c| {
                (
                    c.qualifier.as_slice(),
                    c.timestamp,
                    c.value.as_slice(),
                    c.kind,
                )
            })
            .collect();
        let want: Vec<(&[u8], i64, &[u8], u8)> = vec![
            (b"d", 5, b"", TYPE_DELETE_COLUMN),
            (b"m", 5, b"back", TYPE_PUT),
            (b"n", 6, b"", TYPE_DELETE_COLUMN),
            (b"n", 5, b"a", TYPE_PUT),
        ];
        assert_eq!(got, want, "budget {budget}");
    }
}

//! The `hbase` layer against the real Thrift1 and Thrift2 gateways of the local cluster, and
//! a third-party client (happybase) reading what we wrote.

use std::process::Command;

use weibo_etl::hbase::admin::{Admin, Compression, FamilySpec, TableSpec};
use weibo_etl::hbase::layout::keys;
use weibo_etl::hbase::{Connection, Put, Timeouts};

use crate::harness::{bin, cluster, run, stderr, stdout};

fn admin() -> Admin {
    cluster::ensure();
    Admin::connect(cluster::THRIFT2, Timeouts::default()).unwrap()
}

fn connect() -> Connection {
    cluster::ensure();
    Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap()
}

fn table(namespace: &str, name: &str) -> TableSpec {
    TableSpec {
        namespace: namespace.to_string(),
        name: name.to_string(),
        families: vec![
            FamilySpec::new("info").compression(Compression::Zstd),
            FamilySpec::new("count").versions(1),
        ],
    }
}

fn rowkey(id: i64) -> Vec<u8> {
    let mut key = keys::hash_prefix(id).to_vec();
    key.extend_from_slice(&id.to_be_bytes());
    key
}

#[test]
fn presplit_table_shows_n_regions_over_the_hash_space() {
    let ns = cluster::namespace("presplit");
    let mut admin = admin();
    assert!(admin.ensure_namespace(&ns).unwrap());
    assert!(
        !admin.ensure_namespace(&ns).unwrap(),
        "second call must be a no-op"
    );
    let spec = table(&ns, "t8");
    admin.create_table(&spec, &keys::split_points(8)).unwrap();
    assert!(admin.table_exists(&ns, "t8").unwrap());

    let regions = connect().regions(&spec.full_name()).unwrap();
    assert_eq!(regions.len(), 8);
    let starts: Vec<Vec<u8>> = regions.iter().map(|r| r.start_key.clone()).collect();
    let mut expected = vec![Vec::new()];
    expected.extend(keys::split_points(8));
    assert_eq!(starts, expected);
    assert!(regions.last().unwrap().end_key.is_empty());

    // The CLI shows the same through getTableRegions.
    let out = run(bin().args(["tables", "regions", &spec.full_name()]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).ends_with("8 regions\n"), "{}", stdout(&out));

    // Creating it again is a clear server-side error, not a panic.
    let err = admin.create_table(&spec, &[]).unwrap_err().to_string();
    assert!(
        err.contains("TableExistsException") || err.contains("exists"),
        "{err}"
    );
    assert!(admin.drop_table(&ns, "t8").unwrap());
    assert!(!admin.table_exists(&ns, "t8").unwrap());
}

#[test]
fn puts_10000_rows_in_batches_and_reads_every_one_back() {
    let ns = cluster::namespace("roundtrip");
    let mut admin = admin();
    admin.ensure_namespace(&ns).unwrap();
    let spec = table(&ns, "rows");
    admin.create_table(&spec, &keys::split_points(8)).unwrap();
    let name = spec.full_name();

    let ts = 1_700_000_000_000i64;
    let mut conn = connect();
    let rows: Vec<Put> = (0..10_000i64)
        .map(|id| {
            Put::new(rowkey(id))
                .cell("info:name", format!("user-{id}"))
                .cell("count:followers", (id * 7).to_be_bytes().to_vec())
        })
        .collect();
    for batch in rows.chunks(500) {
        conn.put(&name, batch, ts).unwrap();
    }

    // Full scan: every row once, values and timestamps as written.
    let mut seen = 0u64;
    conn.scan_with(&name, &[], |row| {
        let id = i64::from_be_bytes(row.key[2..10].try_into().unwrap());
        assert_eq!(row.key, rowkey(id));
        assert_eq!(
            row.get("info:name").unwrap(),
            format!("user-{id}").as_bytes()
        );
        assert_eq!(row.get("count:followers").unwrap(), (id * 7).to_be_bytes());
        assert!(row.cells.values().all(|c| c.timestamp == ts));
        seen += 1;
        true
    })
    .unwrap();
    assert_eq!(seen, 10_000);

    // Point gets from several threads, a connection each.
    std::thread::scope(|s| {
        for t in 0..4i64 {
            let name = name.clone();
            s.spawn(move || {
                let mut c = Connection::connect(cluster::THRIFT, Timeouts::default()).unwrap();
                for id in (t..10_000).step_by(97) {
                    let row = c.get(&name, &rowkey(id)).unwrap().unwrap();
                    assert_eq!(
                        row.get("info:name").unwrap(),
                        format!("user-{id}").as_bytes()
                    );
                }
            });
        }
    });
    assert_eq!(conn.get(&name, &rowkey(10_001)).unwrap(), None);

    // Prefix scan over one hash bucket returns exactly the ids hashing there.
    let prefix = keys::hash_prefix(42);
    let bucket = conn.scan_prefix(&name, &prefix, usize::MAX).unwrap();
    let expected = (0..10_000i64)
        .filter(|&id| keys::hash_prefix(id) == prefix)
        .count();
    assert_eq!(bucket.len(), expected);
    assert!(bucket.iter().all(|r| r.key.starts_with(&prefix)));

    // Rewriting the same batch with the same timestamp adds no versions and no rows.
    conn.put(&name, &rows[..100], ts).unwrap();
    assert_eq!(conn.count_rows(&name).unwrap(), 10_000);
}

#[test]
fn happybase_reads_rows_we_wrote() {
    let ns = cluster::namespace("happybase");
    let mut admin = admin();
    admin.ensure_namespace(&ns).unwrap();
    let spec = table(&ns, "users");
    admin.create_table(&spec, &keys::split_points(4)).unwrap();
    let name = spec.full_name();
    let mut conn = connect();
    let rows: Vec<Put> = (1..=50i64)
        .map(|id| {
            Put::new(rowkey(id))
                .cell("info:screen_name", format!("用户{id}"))
                .cell("count:followers", (id * 1000).to_be_bytes().to_vec())
        })
        .collect();
    conn.put(&name, &rows, 1_700_000_000_000).unwrap();

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/happybase_read.py"
    );
    let out = Command::new("python3")
        .args([
            script,
            "--host",
            "127.0.0.1",
            "--port",
            "9090",
            "--table",
            &name,
        ])
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "happybase reader failed (is happybase installed? `pip install happybase`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mut expected: Vec<(Vec<u8>, String)> = (1..=50i64)
        .map(|id| {
            (
                rowkey(id),
                format!("{}\t用户{id}\t{}", hex(&rowkey(id)), id * 1000),
            )
        })
        .collect();
    expected.sort();
    let expected: Vec<String> = expected.into_iter().map(|(_, l)| l).collect();
    assert_eq!(lines, expected);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

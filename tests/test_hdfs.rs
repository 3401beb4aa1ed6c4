//! The `hdfs` layer against the real NameNode and DataNode of the local cluster.

use std::io::{Read, Write};

use weibo_etl::hdfs::{FileSystems, Location};

use crate::harness::{bin, cluster, run, stderr, stdout};

fn fs() -> FileSystems {
    cluster::ensure();
    FileSystems::new(cluster::HDFS)
}

/// Deterministic, incompressible-looking bytes so a shifted or dropped block shows up.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn writes_and_reads_back_a_50_mb_file() {
    let fs = fs();
    let dir = fs
        .parse(&format!("hdfs:///it/hdfs_{}/big", std::process::id()))
        .unwrap();
    let target = dir.join("blob.bin");
    let data = pattern(50 * 1024 * 1024);

    let mut file = fs.create_atomic(&target).unwrap();
    for chunk in data.chunks(3 * 1024 * 1024 + 17) {
        file.write_all(chunk).unwrap();
    }
    assert!(!fs.exists(&target).unwrap(), "visible before commit");
    file.commit().unwrap();

    let status = fs.status(&target).unwrap().unwrap();
    assert_eq!(status.len, data.len() as u64);
    let mut back = Vec::with_capacity(data.len());
    fs.open(&target).unwrap().read_to_end(&mut back).unwrap();
    assert!(back == data, "content differs");
    // Only the committed file is in the folder: no temporary left behind.
    let names: Vec<_> = fs
        .list(&dir, false)
        .unwrap()
        .into_iter()
        .map(|e| e.location.file_name().unwrap())
        .collect();
    assert_eq!(names, vec!["blob.bin"]);
    fs.delete(&dir).unwrap();
    assert!(!fs.exists(&dir).unwrap());
}

#[test]
fn abandoned_write_leaves_the_old_file_and_no_temporary() {
    let fs = fs();
    let dir = fs
        .parse(&format!("hdfs:///it/hdfs_{}/abandon", std::process::id()))
        .unwrap();
    let target = dir.join("part-0");
    fs.write_atomic(&target, b"complete").unwrap();
    let mut half = fs.create_atomic(&target).unwrap();
    half.write_all(&pattern(1 << 20)).unwrap();
    drop(half);
    assert_eq!(fs.read_to_vec(&target).unwrap(), b"complete");
    assert_eq!(fs.list(&dir, false).unwrap().len(), 1);
    // A second commit replaces the file.
    fs.write_atomic(&target, b"replaced").unwrap();
    assert_eq!(fs.read_to_vec(&target).unwrap(), b"replaced");
}

#[test]
fn expands_folders_and_globs_skipping_hidden_names() {
    let fs = fs();
    let base = format!("hdfs:///it/hdfs_{}/expand", std::process::id());
    for name in [
        "a/1.csv",
        "a/sub/2.csv",
        "a/_SUCCESS",
        "a/_rejects/r.jsonl",
        "b/3.json",
        "b/4.csv",
    ] {
        fs.write_atomic(&fs.parse(&format!("{base}/{name}")).unwrap(), b"x")
            .unwrap();
    }
    let found: Vec<String> = fs
        .expand_inputs(&[format!("{base}/a"), format!("{base}/b/*.json")])
        .unwrap()
        .into_iter()
        .map(|e| e.location.relative_to(&fs.parse(&base).unwrap()).unwrap())
        .collect();
    assert_eq!(found, vec!["a/1.csv", "a/sub/2.csv", "b/3.json"]);
    assert!(fs.expand_inputs(&[format!("{base}/missing")]).is_err());
}

#[test]
fn cli_put_ls_cat_roundtrip() {
    let _ = fs();
    let local = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(local.path().join("users")).unwrap();
    std::fs::write(local.path().join("users/u.csv"), "uid\n1\n").unwrap();
    std::fs::write(local.path().join("top.txt"), "hello").unwrap();
    let url = format!("hdfs:///it/hdfs_{}/cli", std::process::id());
    let out = run(bin().args(["fs", "put"]).arg(local.path()).arg(&url));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("put 2 files, 11 bytes"),
        "{}",
        stdout(&out)
    );
    let out = run(bin().args(["fs", "ls", "-r", &url]));
    let listing = stdout(&out);
    assert!(listing.contains("/cli/users/u.csv"), "{listing}");
    let out = run(bin().args(["fs", "cat", &format!("{url}/users/u.csv")]));
    assert_eq!(stdout(&out), "uid\n1\n");
    let location = Location::parse(&url, cluster::HDFS).unwrap();
    assert!(location.is_hdfs());
}

#[test]
fn parquet_read_from_hdfs_in_stretches_equals_the_local_read() {
    use std::sync::Arc;

    use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use parquet::file::properties::WriterProperties;
    use weibo_etl::dataset::parquet_io::{read_parquet_columns, write_parquet, OpenedParquet};

    let fs = fs();
    // ~9.6 MB of plain, uncompressed, incompressible ids in many pages and row groups: the
    // HDFS reader reads 1 MiB stretches ahead, so pages straddle their ends.
    let rows = 400_000;
    let ids = |seed: usize| -> ArrayRef {
        let bytes = pattern(rows * 8 + seed);
        let values = bytes[seed..]
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()));
        Arc::new(values.collect::<Int64Array>())
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, false),
        Field::new("b", DataType::Int64, false),
        Field::new("c", DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(schema.clone(), vec![ids(1), ids(2), ids(3)]).unwrap();
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_max_row_group_row_count(Some(70_000))
        .build();
    let dir = tempfile::tempdir().unwrap();
    let local = Location::Local(dir.path().join("ids.parquet"));
    write_parquet(&fs, &local, schema, props, Some(&batch)).unwrap();
    let remote = fs
        .parse(&format!(
            "hdfs:///it/hdfs_{}/stretches/ids.parquet",
            std::process::id()
        ))
        .unwrap();
    fs.write_atomic(
        &remote,
        &std::fs::read(dir.path().join("ids.parquet")).unwrap(),
    )
    .unwrap();

    let column = |location: &Location, columns: &[&str]| -> Vec<Vec<i64>> {
        let entry = fs.status(location).unwrap().unwrap();
        let mut out = vec![Vec::new(); columns.len()];
        read_parquet_columns(&fs, &entry, columns, &mut |b| {
            for (i, name) in columns.iter().enumerate() {
                let values = b.column_by_name(name).unwrap().as_primitive::<Int64Type>();
                out[i].extend(values.values().iter());
            }
            Ok(())
        })
        .unwrap();
        out
    };
    let expected: Vec<Vec<i64>> = (0..3)
        .map(|i| {
            batch
                .column(i)
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(column(&local, &["a", "b", "c"]), expected);
    assert_eq!(column(&remote, &["a", "b", "c"]), expected);
    // Two of three columns, so stretches also skip bytes; and one row group alone.
    assert_eq!(
        column(&remote, &["a", "c"]),
        vec![expected[0].clone(), expected[2].clone()]
    );
    let opened = OpenedParquet::open(&fs, &fs.status(&remote).unwrap().unwrap()).unwrap();
    let mut third: Vec<i64> = Vec::new();
    opened
        .read_columns(Some(3), &["b"], &mut |b| {
            let values = b.column(0).as_primitive::<Int64Type>();
            assert_eq!(values.null_count(), 0);
            third.extend(values.values().iter());
            Ok(())
        })
        .unwrap();
    assert_eq!(third, expected[1][210_000..280_000]);
    fs.delete(&remote.parent().unwrap()).unwrap();
}

//! `clean` reading raw files from the real HDFS and writing its partitions there: the output
//! must be identical to a run over the same files on local disk.

use std::collections::BTreeMap;

use weibo_etl::hdfs::FileSystems;

use crate::harness::{bin, cluster, run, stderr};
use crate::test_clean::{sample_dir, tree, DATE};

/// Every file below an HDFS folder, relative path → bytes.
fn hdfs_tree(fs: &FileSystems, url: &str) -> BTreeMap<String, Vec<u8>> {
    let base = fs.parse(url).unwrap();
    fs.list(&base, true)
        .unwrap()
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| {
            (
                e.location.relative_to(&base).unwrap(),
                fs.read_to_vec(&e.location).unwrap(),
            )
        })
        .collect()
}

#[test]
fn hdfs_input_and_output_match_a_local_run() {
    cluster::ensure();
    let fs = FileSystems::new(cluster::HDFS);
    let root = format!("hdfs:///it/clean_{}", std::process::id());
    let raw = format!("{root}/raw/dt={DATE}");
    let out = run(bin().args(["fs", "put"]).arg(sample_dir()).arg(&raw));
    assert!(out.status.success(), "{}", stderr(&out));

    let hdfs_out = format!("{root}/clean");
    let out = run(bin().args([
        "-q",
        "clean",
        "--input",
        &raw,
        "--output",
        &hdfs_out,
        "--date",
        DATE,
        "--max-reject-ratio",
        "0.5",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));

    let local = tempfile::tempdir().unwrap();
    let out = run(bin()
        .args(["-q", "clean", "--input"])
        .arg(sample_dir())
        .arg("--output")
        .arg(local.path())
        .args(["--date", DATE, "--max-reject-ratio", "0.5"]));
    assert!(out.status.success(), "{}", stderr(&out));

    let from_hdfs = hdfs_tree(&fs, &hdfs_out);
    let from_disk = tree(local.path());
    assert_eq!(
        from_hdfs.keys().collect::<Vec<_>>(),
        from_disk.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &from_disk {
        if name.ends_with("rejects.jsonl") {
            // Rejects name their source file, which differs by file system; the rest must not.
            let strip =
                |b: &[u8], prefix: &str| String::from_utf8_lossy(b).replace(prefix, "<raw>");
            let hdfs_prefix = format!("{}{}", cluster::HDFS, raw.trim_start_matches("hdfs://"));
            assert_eq!(
                strip(&from_hdfs[name], &hdfs_prefix),
                strip(bytes, &sample_dir().to_string_lossy()),
            );
        } else {
            assert!(
                from_hdfs[name] == *bytes,
                "{name} differs between HDFS and local"
            );
        }
    }
}

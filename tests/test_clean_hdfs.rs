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

/// The same raw files through a symlinked folder, through a brace glob, and from HDFS through
/// the same brace glob clean to the same partitions (rejects aside, which name their file).
#[test]
fn a_symlinked_folder_a_brace_glob_and_hdfs_give_the_same_output() {
    cluster::ensure();
    let fs = FileSystems::new(cluster::HDFS);
    let dir = tempfile::tempdir().unwrap();
    let clean = |input: &str, output: &str| {
        let out = run(bin().args([
            "-q",
            "clean",
            "--input",
            input,
            "--output",
            output,
            "--date",
            DATE,
            "--max-reject-ratio",
            "0.5",
        ]));
        assert!(out.status.success(), "{input}: {}", stderr(&out));
    };
    // Rejects name their source file: the files' own names are what must agree.
    let normal = |tree: BTreeMap<String, Vec<u8>>, prefix: &str| -> BTreeMap<String, String> {
        tree.into_iter()
            .map(|(name, bytes)| {
                let text = String::from_utf8_lossy(&bytes).replace(prefix, "<raw>");
                (name, text)
            })
            .collect()
    };
    let sample = sample_dir().to_string_lossy().into_owned();
    let direct = dir.path().join("direct");
    clean(&sample, &direct.to_string_lossy());
    let expected = normal(tree(&direct), &sample);

    let link = dir.path().join("raw-link");
    std::os::unix::fs::symlink(sample_dir(), &link).unwrap();
    let linked = dir.path().join("linked");
    clean(&link.to_string_lossy(), &linked.to_string_lossy());
    assert!(
        normal(tree(&linked), &link.to_string_lossy()) == expected,
        "through a symlinked folder"
    );

    let braces = dir.path().join("braces");
    clean(
        &format!("{sample}/{{canonical,crawlers,dirty,cascades,graphs}}"),
        &braces.to_string_lossy(),
    );
    assert!(
        normal(tree(&braces), &sample) == expected,
        "through a brace glob"
    );

    let root = format!("hdfs:///it/clean_glob_{}", std::process::id());
    let raw = format!("{root}/raw");
    let out = run(bin().args(["fs", "put"]).arg(sample_dir()).arg(&raw));
    assert!(out.status.success(), "{}", stderr(&out));
    let hdfs_out = format!("{root}/clean");
    clean(
        &format!("{raw}/{{canonical,crawlers,dirty,cascades,graphs}}"),
        &hdfs_out,
    );
    let hdfs_prefix = format!("{}{}", cluster::HDFS, raw.trim_start_matches("hdfs://"));
    assert!(
        normal(hdfs_tree(&fs, &hdfs_out), &hdfs_prefix) == expected,
        "on HDFS through the brace glob"
    );
}

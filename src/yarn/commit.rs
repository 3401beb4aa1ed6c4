//! The job commit of a YARN run: from the streaming job's output, where MapReduce's committer
//! has promoted every committed task attempt, into the job's own output.
//!
//! Each task wrote its slice as `<table>/dt=<date>/slice=i-of-N/`, committed with its own
//! `_SUCCESS` (one task writes the partition as a single run does). Here every partition must hold exactly one committed slice per task and
//! nothing else; then all partitions are committed together with the commit protocol
//! ([`crate::dataset::partition::commit`]: `_SUCCESS` first, then each moved into place,
//! replacing an earlier run's), so a reader sees all N slices or the partition as it was.

use crate::dataset::partition::{self, Staged};
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hdfs::{is_hidden_name, FileSystems, Location};

/// Checks the `tasks` slices of every partition under `job_output` and commits the
/// partitions under `target` (`<target>/<table>/dt=<date>/`). Returns the committed
/// partitions, in order.
pub fn promote(
    fs: &FileSystems,
    job_output: &Location,
    target: &Location,
    tasks: u32,
) -> Result<Vec<Location>> {
    let staged = partitions(fs, job_output, target, tasks)?;
    commit_all(fs, &staged)?;
    Ok(staged.into_iter().map(|s| s.target).collect())
}

/// Commits partitions that a YARN job wrote whole (clean's reduces write each partition's
/// parts as one run does) into their targets, together, with the commit protocol.
pub fn commit_all(fs: &FileSystems, staged: &[Staged]) -> Result<()> {
    for s in staged {
        if let Some(table) = s.target.parent() {
            fs.mkdirs(&table)?;
        }
    }
    partition::commit(fs, staged)
}

/// The partitions of the job's output, each checked, as staged folders of their targets.
fn partitions(
    fs: &FileSystems,
    job_output: &Location,
    target: &Location,
    tasks: u32,
) -> Result<Vec<Staged>> {
    let incomplete = |what: String| Error::BadInput {
        path: job_output.to_string(),
        line: 0,
        reason: format!("the YARN job's output is not whole: {what}"),
    };
    let mut staged = Vec::new();
    for table in visible_folders(fs, job_output)? {
        let name = table.file_name().unwrap_or_default();
        for dt in visible_folders(fs, &table)? {
            let dt_name = dt.file_name().unwrap_or_default();
            if !dt_name.starts_with("dt=") {
                return Err(incomplete(format!("{dt} is not a dt= partition")));
            }
            if tasks == 1 {
                // Slice 0/1 is the whole job, written as a single run writes it.
                if !fs.exists(&dt.join("_SUCCESS"))? {
                    return Err(incomplete(format!("{dt} is not committed")));
                }
                staged.push(Staged {
                    tmp: dt.clone(),
                    target: target.join(&name).join(&dt_name),
                });
                continue;
            }
            let mut seen = vec![false; tasks as usize];
            for entry in fs.list(&dt, false)? {
                let entry_name = entry.location.file_name().unwrap_or_default();
                if is_hidden_name(&entry_name) {
                    continue;
                }
                let slice = Slice::of_folder(&entry_name)
                    .filter(|s| s.count == tasks && entry.is_dir)
                    .ok_or_else(|| {
                        incomplete(format!("{} is not a slice of {tasks}", entry.location))
                    })?;
                if !fs.exists(&entry.location.join("_SUCCESS"))? {
                    return Err(incomplete(format!("{} is not committed", entry.location)));
                }
                seen[slice.index as usize] = true;
            }
            if let Some(missing) = seen.iter().position(|s| !s) {
                return Err(incomplete(format!("{dt} has no slice {missing}/{tasks}")));
            }
            staged.push(Staged {
                tmp: dt.clone(),
                target: target.join(&name).join(&dt_name),
            });
        }
    }
    if staged.is_empty() {
        return Err(incomplete("it holds no partition".into()));
    }
    Ok(staged)
}

/// The folders right under `dir` whose names are not hidden (`_`, `.`), sorted.
fn visible_folders(fs: &FileSystems, dir: &Location) -> Result<Vec<Location>> {
    let mut folders: Vec<Location> = fs
        .list(dir, false)?
        .into_iter()
        .filter(|e| e.is_dir)
        .map(|e| e.location)
        .filter(|l| l.file_name().is_some_and(|n| !is_hidden_name(&n)))
        .collect();
    folders.sort_by_key(|l| l.to_string());
    Ok(folders)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(dir: &std::path::Path) -> Location {
        Location::Local(dir.to_path_buf())
    }

    fn slice_folder(root: &std::path::Path, table: &str, slice: &str, committed: bool) {
        let dir = root.join(table).join("dt=2026-11-29").join(slice);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("part-00000.parquet"), b"x").unwrap();
        if committed {
            std::fs::write(dir.join("_SUCCESS"), b"").unwrap();
        }
    }

    #[test]
    fn promotes_partitions_with_every_slice_committed() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, target) = (tmp.path().join("out"), tmp.path().join("target"));
        for table in ["friends", "friend_counts"] {
            for i in 0..2 {
                slice_folder(&out, table, &format!("slice={i}-of-2"), true);
            }
        }
        std::fs::create_dir_all(out.join("_reports")).unwrap();
        // An earlier run's partition is replaced whole.
        let old = target
            .join("friends")
            .join("dt=2026-11-29")
            .join("slice=0-of-3");
        std::fs::create_dir_all(&old).unwrap();
        let fs = FileSystems::new("hdfs://127.0.0.1:9000");
        let done = promote(&fs, &local(&out), &local(&target), 2).unwrap();
        assert_eq!(done.len(), 2);
        for table in ["friends", "friend_counts"] {
            let dt = target.join(table).join("dt=2026-11-29");
            assert!(dt.join("_SUCCESS").exists());
            let mut names: Vec<String> = std::fs::read_dir(&dt)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            assert_eq!(names, ["_SUCCESS", "slice=0-of-2", "slice=1-of-2"]);
        }
    }

    #[test]
    fn one_task_is_the_whole_partition() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, target) = (tmp.path().join("out"), tmp.path().join("target"));
        let dt = out.join("friends").join("dt=2026-11-29");
        std::fs::create_dir_all(&dt).unwrap();
        std::fs::write(dt.join("part-00000.parquet"), b"x").unwrap();
        let fs = FileSystems::new("hdfs://127.0.0.1:9000");
        assert!(promote(&fs, &local(&out), &local(&target), 1)
            .unwrap_err()
            .to_string()
            .contains("not committed"));
        std::fs::write(dt.join("_SUCCESS"), b"").unwrap();
        promote(&fs, &local(&out), &local(&target), 1).unwrap();
        let committed = target.join("friends").join("dt=2026-11-29");
        assert!(committed.join("part-00000.parquet").exists());
        assert!(committed.join("_SUCCESS").exists());
    }

    #[test]
    fn refuses_a_missing_or_uncommitted_slice() {
        let fs = FileSystems::new("hdfs://127.0.0.1:9000");
        for (slices, why) in [
            (vec![("slice=0-of-2", true)], "no slice 1/2"),
            (
                vec![("slice=0-of-2", true), ("slice=1-of-2", false)],
                "not committed",
            ),
            (
                vec![("slice=0-of-2", true), ("slice=1-of-3", true)],
                "not a slice of 2",
            ),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let (out, target) = (tmp.path().join("out"), tmp.path().join("target"));
            for (name, committed) in slices {
                slice_folder(&out, "friends", name, committed);
            }
            let err = promote(&fs, &local(&out), &local(&target), 2)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{err}");
            assert!(!target.exists(), "nothing is committed");
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("out")).unwrap();
        let err = promote(&fs, &local(&tmp.path().join("out")), &local(tmp.path()), 2);
        assert!(err.unwrap_err().to_string().contains("no partition"));
    }
}

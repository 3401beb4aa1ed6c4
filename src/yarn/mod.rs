//! Running a job past one machine: its slices (`--slice i/N`) as the map tasks of a YARN
//! job, through Hadoop Streaming, map-only.
//!
//! `weibo-etl yarn submit` writes the task list (one `i/N` line per task) and the task spec
//! (`job.json`: the job, its arguments, the environment) beside the job's output, ships the
//! binary from HDFS, and runs the streaming job ([`streaming`]). Each task runs
//! `weibo-etl yarn task job.json`, which runs its slice with `--output` set to the task
//! attempt's own folder (`$mapreduce_task_output_dir`), so MapReduce's committer promotes the
//! files of a committed attempt and drops those of a failed one. Once every task has
//! committed, [`commit::promote`] checks that each partition holds one committed slice per
//! task and commits the partitions into the output with the commit protocol, so a reader sees
//! the whole job or none of it (docs/design/yarn.md).

pub mod commit;
pub mod jobs;
pub mod streaming;
pub mod submit;
pub mod task;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::stage::Stage;

/// The jobs that can run as slices through YARN: every stage.
pub const SLICEABLE: [Stage; 6] = Stage::ALL;

/// Where `load`'s bookkeeping lives under its `--input` (it writes tables, not Parquet).
pub const LOAD_HOME: &str = "_load";

/// Where, in the job's output, the per-slice reports go (hidden from readers).
pub const REPORTS: &str = "_reports";

/// What every task of one YARN job runs: shipped to the tasks as `job.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// The job, e.g. `friends`.
    pub job: Stage,
    /// Its arguments as given to `submit`, `--output` included, `--slice` not.
    pub args: Vec<String>,
    /// How many tasks (slices) the job has.
    pub tasks: u32,
    /// Environment the slice runs with (the submitter's resolved global options).
    pub env: BTreeMap<String, String>,
    /// Which phase of the job the tasks run.
    #[serde(default)]
    pub phase: Phase,
}

/// What one task of a YARN job runs: a slice of the whole job (`--slice`), or one of
/// clean's two phases (`clean::shuffle`), which share their key partitions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Phase {
    #[default]
    Slice,
    Map {
        key_partitions: usize,
    },
    Reduce {
        key_partitions: usize,
        /// The map stage's output.
        shuffle: String,
    },
}

impl TaskSpec {
    /// Checks what `submit` was asked to run: a job that can be sliced, an `--output`, and no
    /// `--slice` (the tasks set it).
    pub fn new(
        job: &str,
        args: &[String],
        tasks: u32,
        env: BTreeMap<String, String>,
    ) -> Result<TaskSpec> {
        let Some(job) = Stage::of(job).filter(|s| SLICEABLE.contains(s)) else {
            return Err(Error::Usage(format!(
                "{job:?} cannot run through YARN yet; jobs that can: {}",
                SLICEABLE.map(Stage::name).join(", ")
            )));
        };
        if tasks == 0 {
            return Err(Error::Usage("--tasks must be at least 1".into()));
        }
        // load's slices keep manifests of their own beside the default one.
        let checkpoint = (job == Stage::Load).then_some("--checkpoint");
        let taken = [
            "--slice",
            "--partition",
            "--load",
            "--map",
            "--reduce",
            "--shuffle",
        ];
        for taken in taken.into_iter().chain(checkpoint) {
            if args
                .iter()
                .any(|a| a == taken || a.starts_with(&format!("{taken}=")))
            {
                return Err(Error::Usage(format!(
                    "{job} {taken}: not through YARN ({})",
                    if taken == "--load" {
                        "the tasks write Parquet only; load the committed output afterwards"
                    } else if taken == "--checkpoint" {
                        "each slice keeps its manifest beside the default one"
                    } else {
                        "each task is given its own slice of --tasks"
                    }
                )));
            }
        }
        if job == Stage::Load {
            if arg_values(args, "--input").is_empty() {
                return Err(Error::Usage(
                    "load through YARN needs its --input (the clean root)".into(),
                ));
            }
        } else if output_arg(args).is_none() {
            return Err(Error::Usage(format!(
                "{job} through YARN needs its --output (the committed partitions go there)"
            )));
        }
        let mut args = args.to_vec();
        // rank reads the friend counts from --friends, which defaults to --output: the
        // tasks' --output is their attempt folder, so they are given the job's own.
        if job == Stage::Rank && arg_values(&args, "--friends").is_empty() {
            let output = output_arg(&args).map(str::to_string);
            args.extend(["--friends".to_string()].into_iter().chain(output));
        }
        Ok(TaskSpec {
            job,
            args,
            tasks,
            env,
            phase: Phase::Slice,
        })
    }

    /// Where the job's results are committed, and the submission stages beside them: the
    /// job's `--output`, or for `load` (whose results are cells) `<input>/_load`.
    pub fn home(&self) -> String {
        match output_arg(&self.args) {
            Some(output) if self.job != Stage::Load => output.to_string(),
            _ => {
                let input = arg_values(&self.args, "--input")[0];
                format!("{}/{LOAD_HOME}", input.trim_end_matches('/'))
            }
        }
    }

    /// The command line of one slice (after the binary): its report, the job, its
    /// arguments with `--output` moved to `output`, and `--slice`.
    pub fn slice_args(&self, slice: Slice, output: &str, report: &str) -> Vec<String> {
        let mut argv = vec![
            "--report".to_string(),
            report.to_string(),
            self.job.name().to_string(),
        ];
        // load has no --output: its slices write cells, and their reports.
        argv.extend(with_output(&self.args, output));
        let slice = slice.to_string();
        match &self.phase {
            Phase::Slice => argv.extend(["--slice".into(), slice]),
            Phase::Map { key_partitions } => argv.extend([
                "--map".into(),
                slice,
                "--key-partitions".into(),
                key_partitions.to_string(),
            ]),
            Phase::Reduce {
                key_partitions,
                shuffle,
            } => argv.extend([
                "--reduce".into(),
                slice,
                "--key-partitions".into(),
                key_partitions.to_string(),
                "--shuffle".into(),
                shuffle.clone(),
            ]),
        }
        argv
    }

    /// The report file of `slice` in a task's output folder.
    pub fn report_name(slice: Slice) -> String {
        format!("{REPORTS}/{}.json", slice.folder())
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a spec serialises")
    }

    pub fn from_json(bytes: &[u8], origin: &str) -> Result<TaskSpec> {
        serde_json::from_slice(bytes).map_err(|e| Error::BadInput {
            path: origin.to_string(),
            line: e.line() as u64,
            reason: format!("not a task spec: {e}"),
        })
    }
}

/// The value of `--output` (or `--output=URL`) among a job's arguments.
pub fn output_arg(args: &[String]) -> Option<&str> {
    arg_values(args, "--output").into_iter().next()
}

/// Every value of option `flag` (`--flag V` or `--flag=V`) among a job's arguments.
pub fn arg_values<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    let mut values = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == flag {
            values.extend(it.next().map(String::as_str));
        } else if let Some(v) = a.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
            values.push(v);
        }
    }
    values
}

/// `args` without option `flag` and its value (`--flag V` or `--flag=V`).
pub fn without_arg(args: &[String], flag: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == flag {
            it.next();
        } else if !a.strip_prefix(flag).is_some_and(|v| v.starts_with('=')) {
            out.push(a.clone());
        }
    }
    out
}

/// `args` with the value of `--output` replaced by `output`.
pub fn with_output(args: &[String], output: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--output" {
            out.push(a.clone());
            out.push(output.to_string());
            it.next();
        } else if a.starts_with("--output=") {
            out.push(format!("--output={output}"));
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// The task list: one `i/N` line per task.
pub fn task_list(tasks: u32) -> String {
    (0..tasks)
        .map(|i| format!("{i}/{tasks}\n"))
        .collect::<String>()
}

/// The slices a task was given on stdin: one `i/N` per line, or `<offset>\t<i/N>` when the
/// input format's key was not dropped; blank lines are ignored.
pub fn slices_of_input(input: &str, tasks: u32) -> Result<Vec<Slice>> {
    let mut slices = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let value = line.rsplit('\t').next().unwrap_or("").trim();
        if value.is_empty() {
            continue;
        }
        let bad = |reason: String| Error::BadInput {
            path: "<task input>".into(),
            line: n as u64 + 1,
            reason,
        };
        let slice = Slice::parse(value).map_err(bad)?;
        if slice.count != tasks {
            return Err(bad(format!(
                "slice {slice} is not one of the job's {tasks} tasks"
            )));
        }
        slices.push(slice);
    }
    Ok(slices)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_slice_runs_the_job_with_its_task_folder_as_output() {
        let args = strings(&[
            "--input",
            "in",
            "--output",
            "hdfs:///g",
            "--date",
            "2026-11-29",
        ]);
        let spec = TaskSpec::new("friends", &args, 4, BTreeMap::new()).unwrap();
        assert_eq!(spec.home(), "hdfs:///g");
        let slice = Slice::parse("1/4").unwrap();
        assert_eq!(
            spec.slice_args(slice, "hdfs:///t/attempt", "hdfs:///t/attempt/r.json"),
            strings(&[
                "--report",
                "hdfs:///t/attempt/r.json",
                "friends",
                "--input",
                "in",
                "--output",
                "hdfs:///t/attempt",
                "--date",
                "2026-11-29",
                "--slice",
                "1/4"
            ])
        );
        let eq = strings(&["--output=hdfs:///g", "--date", "2026-11-29"]);
        assert_eq!(output_arg(&eq), Some("hdfs:///g"));
        assert_eq!(with_output(&eq, "x")[0], "--output=x");
        let back = TaskSpec::from_json(&spec.to_json(), "job.json").unwrap();
        assert_eq!(back, spec);
        let reduce = TaskSpec {
            phase: Phase::Reduce {
                key_partitions: 3,
                shuffle: "hdfs:///s/map".into(),
            },
            ..spec.clone()
        };
        let argv = reduce.slice_args(slice, "t", "r");
        assert_eq!(
            argv[argv.len() - 6..],
            strings(&[
                "--reduce",
                "1/4",
                "--key-partitions",
                "3",
                "--shuffle",
                "hdfs:///s/map"
            ])
        );
        assert_eq!(
            TaskSpec::from_json(&reduce.to_json(), "job.json").unwrap(),
            reduce
        );
        let inputs = strings(&["--input", "a", "--input=b", "--inputs", "c"]);
        assert_eq!(arg_values(&inputs, "--input"), ["a", "b"]);
        assert_eq!(without_arg(&inputs, "--input"), strings(&["--inputs", "c"]));
    }

    #[test]
    fn submit_refuses_what_the_tasks_cannot_run() {
        let with = |extra: &[&str]| {
            let mut a = strings(&["--input", "in", "--output", "o"]);
            a.extend(strings(extra));
            a
        };
        assert!(TaskSpec::new("gen", &with(&[]), 2, BTreeMap::new()).is_err());
        // rank's tasks get the job's --output as their --friends, unless it is given.
        let rank = TaskSpec::new("rank", &with(&[]), 2, BTreeMap::new()).unwrap();
        assert_eq!(arg_values(&rank.args, "--friends"), ["o"]);
        let rank = TaskSpec::new("rank", &with(&["--friends", "f"]), 2, BTreeMap::new()).unwrap();
        assert_eq!(arg_values(&rank.args, "--friends"), ["f"]);
        assert!(TaskSpec::new("clean", &with(&["--map", "0/2"]), 2, BTreeMap::new()).is_err());
        assert!(TaskSpec::new(
            "friends",
            &with(&["--partition", "1/2"]),
            2,
            BTreeMap::new()
        )
        .is_err());
        assert!(TaskSpec::new("friends", &with(&["--load"]), 2, BTreeMap::new()).is_err());
        assert!(
            TaskSpec::new("friends", &strings(&["--input", "in"]), 2, BTreeMap::new()).is_err()
        );
        assert!(TaskSpec::new("friends", &with(&[]), 0, BTreeMap::new()).is_err());
        let load = strings(&["--input", "hdfs:///c/", "--date", "2026-11-29"]);
        let spec = TaskSpec::new("load", &load, 2, BTreeMap::new()).unwrap();
        assert_eq!(spec.home(), "hdfs:///c/_load");
        let argv = spec.slice_args(Slice::parse("1/2").unwrap(), "t", "r");
        assert_eq!(
            argv[2..],
            strings(&[
                "load",
                "--input",
                "hdfs:///c/",
                "--date",
                "2026-11-29",
                "--slice",
                "1/2"
            ])
        );
        let mut own = load.clone();
        own.extend(strings(&["--checkpoint", "x.json"]));
        assert!(TaskSpec::new("load", &own, 2, BTreeMap::new()).is_err());
        assert!(TaskSpec::new("load", &load[2..], 2, BTreeMap::new()).is_err());
    }

    #[test]
    fn task_input_is_one_slice_per_line_with_or_without_the_key() {
        assert_eq!(task_list(3), "0/3\n1/3\n2/3\n");
        let slices = slices_of_input("0\t2/3\n\n1/3\n", 3).unwrap();
        assert_eq!(
            slices,
            vec![Slice::parse("2/3").unwrap(), Slice::parse("1/3").unwrap()]
        );
        let err = slices_of_input("0/3\n5/3\n", 3).unwrap_err().to_string();
        assert!(err.contains(":2:"), "{err}");
        assert!(slices_of_input("1/4\n", 3).is_err());
    }
}

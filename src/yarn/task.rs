//! The task side of a YARN job (`weibo-etl yarn task job.json`): the slices named on stdin,
//! each run as a child process of this binary into the task attempt's folder, with progress
//! and counters told to Hadoop Streaming in its `reporter:` lines.
//!
//! Invariant: a slice that fails fails the attempt with its exit code, so YARN retries it;
//! the attempt's files are promoted only if every slice of it succeeded.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{slices_of_input, TaskSpec};
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

/// Test switch: the first attempt of this slice index fails after writing its files, so a
/// test sees YARN retry it (read only by builds with the `integration` feature).
pub const FAIL_SWITCH: &str = "WEIBO_ETL_YARN_FAIL_SLICE";

/// Runs the slices of `input` (the task's stdin, read whole: Streaming sees a broken pipe
/// otherwise) as the spec at `spec_path` says; `reporter` is where Streaming reads its
/// `reporter:` lines (the task's stderr).
pub fn run(fs: &FileSystems, spec_path: &str, input: &str, reporter: &mut dyn Write) -> Result<()> {
    let spec_location = fs.parse(spec_path)?;
    let spec = TaskSpec::from_json(&fs.read_to_vec(&spec_location)?, spec_path)?;
    let slices = slices_of_input(input, spec.tasks)?;
    let task_dir = std::env::var("mapreduce_task_output_dir").map_err(|_| {
        Error::Usage(
            "`yarn task` runs inside a YARN task ($mapreduce_task_output_dir is not set)".into(),
        )
    })?;
    let attempt = std::env::var("mapreduce_task_attempt_id").unwrap_or_default();
    let exe = std::env::current_exe().map_err(|e| Error::Io {
        op: "find",
        path: "this binary".into(),
        source: e,
    })?;
    let task_dir_location = fs.parse(&task_dir)?;
    for slice in slices {
        let _ = writeln!(
            reporter,
            "reporter:status:{} slice {slice} ({attempt})",
            spec.job
        );
        let report = task_dir_location.join(&TaskSpec::report_name(slice));
        let status = Command::new(&exe)
            .args(spec.slice_args(slice, &task_dir, &report.to_string()))
            .envs(&spec.env)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| Error::Io {
                op: "run",
                path: format!("slice {slice}"),
                source: e,
            })?;
        if !status.success() {
            return Err(Error::Stage {
                stage: format!("{} {slice}", spec.job),
                date: attempt,
                code: status.code().unwrap_or(1),
            });
        }
        counters(fs, &report, spec.job.name(), reporter);
        fail_first_attempt(fs, &spec, slice, &attempt, &task_dir_location)?;
    }
    Ok(())
}

/// Streaming counters from a slice's report: its job section's whole numbers.
fn counters(fs: &FileSystems, report: &Location, job: &str, reporter: &mut dyn Write) {
    let Ok(bytes) = fs.read_to_vec(report) else {
        return;
    };
    let Ok(doc) = serde_json::from_slice::<Value>(&bytes) else {
        return;
    };
    if let Some(section) = doc[job].as_object() {
        for (name, value) in section {
            if let Some(n) = value.as_u64() {
                let _ = writeln!(reporter, "reporter:counter:weibo-etl {job},{name},{n}");
            }
        }
    }
}

/// The test switch: with `WEIBO_ETL_YARN_FAIL_SLICE=i` in the spec's environment, the first
/// attempt of slice `i` fails after its files are written, and marks them as its own.
#[cfg(feature = "integration")]
fn fail_first_attempt(
    fs: &FileSystems,
    spec: &TaskSpec,
    slice: Slice,
    attempt: &str,
    task_dir: &Location,
) -> Result<()> {
    let chosen = spec
        .env
        .get(FAIL_SWITCH)
        .and_then(|v| v.parse::<u32>().ok());
    if chosen == Some(slice.index) && attempt.ends_with("_0") {
        fs.write_atomic(&task_dir.join("FAILED-ATTEMPT"), attempt.as_bytes())?;
        return Err(Error::Yarn(format!(
            "{FAIL_SWITCH}={}: failing attempt {attempt} on purpose",
            slice.index
        )));
    }
    Ok(())
}

#[cfg(not(feature = "integration"))]
fn fail_first_attempt(
    _: &FileSystems,
    _: &TaskSpec,
    _: Slice,
    _: &str,
    _: &Location,
) -> Result<()> {
    Ok(())
}

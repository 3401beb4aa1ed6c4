//! Submitting a job to YARN: the binary shipped once per build, the job's phases run as
//! map-only streaming jobs, each waited for, and its slices' reports read back. What the
//! phases are and how their slices merge is each job's (`super::jobs`).
//!
//! Invariants: everything a submission stages lives under one hidden folder beside the
//! output (`_yarn/<job>-<tag>/`), removed however the submission ends; a phase that YARN did
//! not report as SUCCEEDED is an error, and nothing of it is committed.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Command, Stdio};

use serde::Serialize;
use serde_json::Value;

use super::streaming::{StreamingJob, BINARY_LINK};
use super::{task_list, TaskSpec};
use crate::dataset::partition;
use crate::dataset::slice::Slice;
use crate::error::{Error, Result, ResultExt};
use crate::hdfs::{FileSystems, Location};
use crate::stage::Stage;

/// How a job is handed to YARN.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
/// (`mapred` when it is on PATH, else the local cluster; `mapred streaming` from PATH, with
/// HADOOP_CONF_DIR; the local cluster's YARN, `cluster up --yarn`).
pub enum Submitter {
    Auto,
    Mapred,
    Local,
}

/// Runs the arguments of `mapred streaming` on the local cluster's YARN, and says how the job
/// ended (the runner of [`Submitter::Local`], given by the caller).
pub type LocalStreaming<'a> = &'a dyn Fn(&[String]) -> Result<Submitted>;

/// What to submit, and how.
pub struct SubmitOptions<'a> {
    /// Map tasks: one slice of the job each.
    pub tasks: u32,
    pub queue: Option<String>,
    /// Memory of each map container, in MB.
    pub memory_mb: u32,
    /// Attempts of each task before YARN fails the job.
    pub max_attempts: u32,
    pub submitter: Submitter,
    /// Where the binary is uploaded for the tasks to fetch.
    pub apps: String,
    /// The job's command line as given (the streaming job's name shows it).
    pub job_line: Vec<String>,
    /// The submitter of [`Submitter::Local`].
    pub local: LocalStreaming<'a>,
}

/// How one streaming job ended.
#[derive(Clone, Debug, Serialize)]
pub struct Submitted {
    pub exit: i32,
    pub job_id: String,
    pub state: String,
    pub tracking_url: String,
}

impl Submitted {
    fn succeeded(&self) -> bool {
        self.exit == 0 && self.state == "SUCCEEDED"
    }
}

/// What a submission committed, and what it tells.
pub struct Outcome {
    /// Every streaming job it ran, in order.
    pub jobs: Vec<Submitted>,
    /// The partitions it committed.
    pub committed: Vec<Location>,
    /// Every slice's report, phase by phase.
    pub slices: Vec<Value>,
    /// The whole job's figures, merged from the slices'.
    pub merged: Option<Value>,
}

/// One submission under way: where it stages, how it submits, the binary the tasks run.
pub struct Submission<'a> {
    pub fs: &'a FileSystems,
    options: &'a SubmitOptions<'a>,
    submitter: Submitter,
    staging: Location,
    binary: String,
}

impl<'a> Submission<'a> {
    /// Starts a submission of `spec`'s job: checks that its home is on HDFS and reachable,
    /// picks the submitter, and ships the binary. Everything it stages lives under one
    /// hidden folder beside the output, removed by [`Submission::clean_up`].
    pub fn start(
        fs: &'a FileSystems,
        options: &'a SubmitOptions<'a>,
        spec: &TaskSpec,
    ) -> Result<(Submission<'a>, Location)> {
        let output = fs.parse(&spec.home())?;
        if !output.is_hdfs() {
            let what = if spec.job == Stage::Load {
                "--input"
            } else {
                "--output"
            };
            return Err(Error::Usage(format!(
                "{what} {output}: the tasks of a YARN job work on HDFS, not on a local folder"
            )));
        }
        fs.check_reachable(&output)?;
        let submitter = match options.submitter {
            Submitter::Auto if on_path("mapred") => Submitter::Mapred,
            Submitter::Auto => Submitter::Local,
            chosen => chosen,
        };
        let staging = output
            .join("_yarn")
            .join(&format!("{}-{}", spec.job, partition::run_tag()));
        let mut submission = Submission {
            fs,
            options,
            submitter,
            staging,
            binary: String::new(),
        };
        match upload_binary(fs, &fs.parse(&options.apps)?) {
            Ok(binary) => submission.binary = binary.to_string(),
            Err(e) => {
                submission.clean_up();
                return Err(e);
            }
        }
        Ok((submission, output))
    }

    /// Removes what this submission staged, whatever happened.
    pub fn clean_up(self) {
        let _ = self.fs.delete(&self.staging);
        if let Some(runs) = self.staging.parent() {
            if self.fs.list(&runs, false).is_ok_and(|l| l.is_empty()) {
                let _ = self.fs.delete(&runs);
            }
        }
    }
}

impl Submission<'_> {
    /// Runs one streaming job of `spec`'s tasks into `<staging>/<name>`, waits for it, and
    /// returns how it ended and its slices' reports; an error unless it succeeded.
    pub fn phase(&self, spec: &TaskSpec, name: &str) -> Result<(Submitted, Location, Vec<Value>)> {
        let fs = self.fs;
        let spec_file = self.staging.join(&format!("{name}.json"));
        fs.write_atomic(&spec_file, &spec.to_json())?;
        let tasks_file = self.staging.join("tasks.txt");
        if !fs.exists(&tasks_file)? {
            fs.write_atomic(&tasks_file, task_list(spec.tasks).as_bytes())?;
        }
        let out = self.staging.join(name);
        let streaming = StreamingJob {
            name: format!("weibo-etl {} ({name})", self.options.job_line.join(" ")),
            binary: self.binary.clone(),
            spec: spec_file.to_string(),
            tasks_file: tasks_file.to_string(),
            output: out.to_string(),
            queue: self.options.queue.clone(),
            memory_mb: self.options.memory_mb,
            max_attempts: self.options.max_attempts,
        };
        log::info!(
            "submitting {} ({name}) as {} tasks to YARN ({})",
            spec.job,
            spec.tasks,
            match self.submitter {
                Submitter::Mapred => "mapred streaming",
                _ => "the local cluster",
            }
        );
        let submitted = match self.submitter {
            Submitter::Local => (self.options.local)(&streaming.args())
                .context("running the job on the local YARN")?,
            _ => mapred_streaming(&streaming.args())?,
        };
        log::info!(
            "yarn job {}: {} ({})",
            submitted.job_id,
            submitted.state,
            submitted.tracking_url
        );
        if !submitted.succeeded() {
            return Err(Error::Yarn(format!(
                "the YARN job {} ended {} (exit {}); its output is not committed; task logs: {}",
                submitted.job_id, submitted.state, submitted.exit, submitted.tracking_url
            )));
        }
        let slices = slice_reports(fs, &out, spec.tasks)?;
        Ok((submitted, out, slices))
    }
}

/// `mapred streaming <args>`: it prints the job id and tracking URL on stderr, which is
/// logged line by line as it comes.
fn mapred_streaming(args: &[String]) -> Result<Submitted> {
    let io = |e: std::io::Error| Error::Io {
        op: "run",
        path: "mapred streaming (is Hadoop on PATH?)".into(),
        source: e,
    };
    let mut child = Command::new("mapred")
        .arg("streaming")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io)?;
    let (mut job_id, mut url) = ("-".to_string(), "-".to_string());
    for line in BufReader::new(child.stderr.take().expect("piped")).lines() {
        let line = line.map_err(io)?;
        log::info!("{line}");
        if let Some(at) = line.find("Running job: ") {
            job_id = line[at + 13..].trim().to_string();
        }
        if let Some(at) = line.find("The url to track the job: ") {
            url = line[at + 26..].trim().to_string();
        }
    }
    let status = child.wait().map_err(io)?;
    let exit = status.code().unwrap_or(1);
    Ok(Submitted {
        exit,
        job_id,
        state: if exit == 0 { "SUCCEEDED" } else { "FAILED" }.into(),
        tracking_url: url,
    })
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Uploads this binary under `<apps>/<version>-<digest>/weibo-etl` unless it is there, and
/// returns where it is. The digest of its bytes tells builds of one version apart.
fn upload_binary(fs: &FileSystems, apps: &Location) -> Result<Location> {
    use md5::Digest as _;
    let exe = std::env::current_exe().map_err(|e| Error::Io {
        op: "find",
        path: "this binary".into(),
        source: e,
    })?;
    let io = |e: std::io::Error| Error::Io {
        op: "read",
        path: exe.display().to_string(),
        source: e,
    };
    let open = || std::fs::File::open(&exe).map_err(io);
    let (mut digest, mut len, mut reader) = (md5::Md5::new(), 0u64, open()?);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        digest.update(&buf[..n]);
        len += n as u64;
    }
    let hex: String = digest.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let target = apps
        .join(&format!("{}-{hex}", env!("CARGO_PKG_VERSION")))
        .join(BINARY_LINK);
    if fs.status(&target)?.is_some_and(|e| e.len == len) {
        return Ok(target);
    }
    // Under a name of its own first: a job that has started from the binary on HDFS fails
    // if the file changes under it, so a racing upload never replaces one in place.
    log::info!("uploading the binary to {target}");
    let tmp = target
        .parent()
        .expect("a folder")
        .join(&format!("_upload.{}", partition::run_tag()));
    let upload = |e: std::io::Error| Error::Io {
        op: "upload",
        path: target.to_string(),
        source: e,
    };
    let mut file = fs.create_atomic(&tmp)?;
    std::io::copy(&mut open()?, &mut file).map_err(upload)?;
    file.flush().map_err(upload)?;
    file.commit()?;
    if !fs.rename_new(&tmp, &target)? {
        fs.delete(&tmp)?;
    }
    Ok(target)
}

/// Every slice's report, from the job's output, in slice order.
fn slice_reports(fs: &FileSystems, out: &Location, tasks: u32) -> Result<Vec<Value>> {
    (0..tasks)
        .map(|index| {
            let slice = Slice {
                index,
                count: tasks,
            };
            let file = out.join(&TaskSpec::report_name(slice));
            let bytes = fs
                .read_to_vec(&file)
                .with_context(|| format!("the report of slice {slice}"))?;
            serde_json::from_slice(&bytes).map_err(|e| Error::BadInput {
                path: file.to_string(),
                line: e.line() as u64,
                reason: format!("not a slice report: {e}"),
            })
        })
        .collect()
}

/// The environment a task's slice runs with: the submitter's resolved global options, and
/// the switches it forwards (`forwarded`, read from this process's environment).
pub fn task_env(global: &[(&str, String)], forwarded: &[&str]) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = global
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    for name in forwarded {
        if let Ok(value) = std::env::var(name) {
            env.insert(name.to_string(), value);
        }
    }
    env
}

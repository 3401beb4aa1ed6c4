//! `weibo-etl yarn submit|task`: a job's slices as the map tasks of a YARN job (Hadoop
//! Streaming, map-only), and the task side that runs one slice (docs/design/yarn.md).

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};

use anyhow::{bail, Context as _, Result};
use serde_json::Value;
use weibo_etl::dataset::partition;
use weibo_etl::dataset::slice::Slice;
use weibo_etl::dev::cluster;
use weibo_etl::hdfs::{FileSystems, Location};
use weibo_etl::report::Report;
use weibo_etl::stage::Stage;
use weibo_etl::yarn::{self, commit, streaming::StreamingJob, TaskSpec};

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl yarn submit --tasks 16 --queue etl --memory 4096 -- \\
      friends --input hdfs:///weibo/clean/follows --output hdfs:///weibo/graph --date 2026-11-29 \\
      --memory-budget 3GiB
  weibo-etl yarn submit --tasks 8 -- load --input hdfs:///weibo/clean --date 2026-11-29
  # on this machine: `weibo-etl cluster up --yarn` first
  weibo-etl yarn submit --tasks 4 -- friends --input hdfs://127.0.0.1:9000/weibo/clean/follows \\
      --output hdfs://127.0.0.1:9000/weibo/graph --date 2026-11-29

Each task runs `weibo-etl <job> ... --slice i/N` with its output in the task attempt's
folder; a failed attempt is retried by YARN (--max-attempts) and leaves nothing. Once every
task has committed, each partition is committed into --output with one _SUCCESS beside the
N slice=i-of-N/ folders (clean: a map and a reduce job, and the parts as one run
writes them). load has no --output: the submitter creates the tables, the tasks load their
share of the night's units (Thrift or HFiles), and the counter snapshot moves on once every
task has. Jobs that run through YARN: cascades, clean, friends, inbox, load, rank.";

/// Run jobs on a Hadoop cluster's YARN: one slice of the job per map task
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Submit a job as a map-only Hadoop Streaming job of --tasks slices, wait for it, and
    /// commit its output; exits non-zero if the YARN job failed
    Submit(SubmitArgs),
    /// Run inside a YARN map task: the slices named on stdin, as the task spec says
    #[command(hide = true)]
    Task {
        /// The task spec (job.json in the task's working folder)
        spec: String,
    },
}

#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
struct SubmitArgs {
    /// Map tasks, one slice of the job each
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10000))]
    tasks: u32,
    /// YARN queue [default: the cluster's default queue]
    #[arg(long)]
    queue: Option<String>,
    /// Memory of each map container in MB: the binary's memory (size the job's
    /// --memory-budget below it), not a JVM heap
    #[arg(long, default_value_t = 1024, value_name = "MB")]
    memory: u32,
    /// Attempts of each task before YARN fails the job
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100))]
    max_attempts: u32,
    /// How to submit: mapred (`mapred streaming` from PATH, with HADOOP_CONF_DIR), local (the
    /// local cluster's YARN, `cluster up --yarn`), or auto (mapred if on PATH, else local)
    #[arg(long, value_enum, default_value = "auto")]
    submitter: Submitter,
    /// Where the binary is uploaded, once per version, for the tasks to fetch
    #[arg(long, default_value = "hdfs:///apps/weibo-etl", value_name = "URL")]
    apps: String,
    /// The job and its arguments, after `--`
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "JOB ARGS"
    )]
    job: Vec<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Submitter {
    Auto,
    Mapred,
    Local,
}

/// The global options a task's slice runs with, as environment (the submitter's values).
const FORWARDED_ENV: &[&str] = &["WEIBO_ETL_LOG", "RUST_BACKTRACE", FAIL_SWITCH];

/// Test switch: the first attempt of this slice index fails after writing its files, so a
/// test sees YARN retry it (read only by builds with the `integration` feature).
const FAIL_SWITCH: &str = "WEIBO_ETL_YARN_FAIL_SLICE";

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    match args.action {
        Action::Submit(submit) => run_submit(ctx, submit),
        Action::Task { spec } => run_task(ctx, &spec),
    }
}

fn run_submit(ctx: &Context, args: SubmitArgs) -> Result<()> {
    let mut report = Report::new("yarn");
    let fs = &ctx.fs;
    let (job, job_args) = args.job.split_first().expect("clap requires the job");
    let mut env = BTreeMap::new();
    env.insert("WEIBO_ETL_HDFS".to_string(), fs.default_fs().to_string());
    env.insert("WEIBO_ETL_HBASE".to_string(), ctx.global.hbase.clone());
    env.insert("WEIBO_ETL_HBASE_ADMIN".to_string(), ctx.admin_addr());
    env.insert(
        "WEIBO_ETL_NAMESPACE".to_string(),
        ctx.global.namespace.clone(),
    );
    for name in FORWARDED_ENV {
        if let Ok(value) = std::env::var(name) {
            env.insert(name.to_string(), value);
        }
    }
    let spec = TaskSpec::new(job, job_args, args.tasks, env)?;
    let output = fs.parse(&spec.home())?;
    if !output.is_hdfs() {
        let what = if spec.job == Stage::Load {
            "--input"
        } else {
            "--output"
        };
        return Err(weibo_etl::Error::Usage(format!(
            "{what} {output}: the tasks of a YARN job work on HDFS, not on a local folder"
        ))
        .into());
    }
    fs.check_reachable(&output)?;
    let submitter = match args.submitter {
        Submitter::Auto if on_path("mapred") => Submitter::Mapred,
        Submitter::Auto => Submitter::Local,
        chosen => chosen,
    };
    // Everything of this run lives under one hidden folder beside the output, removed at
    // the end whatever happens.
    let staging = output
        .join("_yarn")
        .join(&format!("{job}-{}", partition::run_tag()));
    let outcome = (|| -> Result<Outcome> {
        let run = Run {
            fs,
            args: &args,
            submitter,
            staging: staging.clone(),
            binary: upload_binary(fs, &fs.parse(&args.apps)?)?.to_string(),
        };
        match spec.job {
            Stage::Clean => run_clean(&run, spec, &output),
            Stage::Load => run_load(ctx, &run, spec),
            Stage::Rank => run_rank(&run, spec),
            Stage::Friends | Stage::Inbox | Stage::Cascades => run_slices(&run, spec, &output),
        }
    })();
    let _ = fs.delete(&staging);
    if let Some(runs) = staging.parent() {
        if fs.list(&runs, false).is_ok_and(|l| l.is_empty()) {
            let _ = fs.delete(&runs);
        }
    }
    let outcome = match outcome {
        Ok(done) => done,
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    for dir in &outcome.committed {
        eprintln!("committed {dir}");
    }
    if let Some(merged) = &outcome.merged {
        match merged.get("entities").and_then(Value::as_object) {
            Some(entities) => {
                for (name, c) in entities {
                    eprintln!(
                        "{name}: {} in, {} out, {} rejected, {} duplicates",
                        c["records_in"], c["records_out"], c["rejected"], c["duplicates"]
                    );
                }
            }
            // load's tables were listed as its slices were merged.
            None if job == "load" => {}
            None => eprintln!("{job}: {merged}"),
        }
        report.set(job, merged);
    }
    report.set("yarn", &outcome.jobs);
    report.set("tasks", args.tasks);
    report.set("slices", &outcome.slices);
    report.set(
        "committed",
        outcome
            .committed
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>(),
    );
    ctx.finish_report(&report, None)
}

/// One submission: where it stages, how it submits, the binary the tasks run.
struct Run<'a> {
    fs: &'a FileSystems,
    args: &'a SubmitArgs,
    submitter: Submitter,
    staging: Location,
    binary: String,
}

/// What a submission committed, and what it tells.
struct Outcome {
    jobs: Vec<Submitted>,
    committed: Vec<Location>,
    slices: Vec<Value>,
    merged: Option<Value>,
}

impl Run<'_> {
    /// Runs one streaming job of `spec`'s tasks into `<staging>/<name>`, waits for it, and
    /// returns how it ended and its slices' reports; an error unless it succeeded.
    fn stage(&self, spec: &TaskSpec, name: &str) -> Result<(Submitted, Location, Vec<Value>)> {
        let fs = self.fs;
        let spec_file = self.staging.join(&format!("{name}.json"));
        fs.write_atomic(&spec_file, &spec.to_json())?;
        let tasks_file = self.staging.join("tasks.txt");
        if !fs.exists(&tasks_file)? {
            fs.write_atomic(&tasks_file, yarn::task_list(spec.tasks).as_bytes())?;
        }
        let out = self.staging.join(name);
        let streaming = StreamingJob {
            name: format!("weibo-etl {} ({name})", self.args.job.join(" ")),
            binary: self.binary.clone(),
            spec: spec_file.to_string(),
            tasks_file: tasks_file.to_string(),
            output: out.to_string(),
            queue: self.args.queue.clone(),
            memory_mb: self.args.memory,
            max_attempts: self.args.max_attempts,
        };
        eprintln!(
            "submitting {} ({name}) as {} tasks to YARN ({})",
            spec.job,
            spec.tasks,
            match self.submitter {
                Submitter::Mapred => "mapred streaming",
                _ => "the local cluster",
            }
        );
        let submitted = submit(self.submitter, &streaming.args())?;
        println!(
            "yarn job {}: {} ({})",
            submitted.job_id, submitted.state, submitted.tracking_url
        );
        if !submitted.succeeded() {
            bail!(
                "the YARN job {} ended {} (exit {}); its output is not committed; task logs: {}",
                submitted.job_id,
                submitted.state,
                submitted.exit,
                submitted.tracking_url
            );
        }
        let slices = slice_reports(fs, &out, spec.tasks)?;
        Ok((submitted, out, slices))
    }
}

/// A job whose slices hold disjoint shares of its answer (friends): one streaming job, each
/// partition committed once every slice of it has.
fn run_slices(run: &Run, spec: TaskSpec, output: &Location) -> Result<Outcome> {
    let (submitted, out, slices) = run.stage(&spec, "out")?;
    let committed = commit::promote(run.fs, &out, output, spec.tasks)
        .context("committing the YARN job's output")?;
    let merged = merge(spec.job, &slices, &spec.args)?;
    Ok(Outcome {
        jobs: vec![submitted],
        committed,
        slices,
        merged,
    })
}

/// rank: one job of slices, each writing the boards of its share of the uids; then the top
/// N of their boards is written into --output and committed as one run's partition.
fn run_rank(run: &Run, spec: TaskSpec) -> Result<Outcome> {
    let (submitted, out, slices) = run.stage(&spec, "out")?;
    let committed = super::rank::commit_slices(run.fs, &spec.args, &out, spec.tasks)
        .context("committing the merged boards")?;
    let merged = merge(spec.job, &slices, &spec.args)?;
    Ok(Outcome {
        jobs: vec![submitted],
        committed: vec![committed],
        slices,
        merged,
    })
}

/// clean: a map stage (pass 1 over each slice's files, written as a shuffle), the reject
/// budget checked on the whole job's counts, then a reduce stage (pass 2 over each slice's
/// key partitions), and the partitions and rejects committed together.
fn run_clean(run: &Run, spec: TaskSpec, output: &Location) -> Result<Outcome> {
    use weibo_etl::clean::job::{self, CleanReport};
    use weibo_etl::clean::shuffle::{self, SliceCounts};
    let fs = run.fs;
    let value = |flag: &str| yarn::arg_values(&spec.args, flag).into_iter().next();
    let date = value("--date")
        .context("clean needs its --date")?
        .to_string();
    let budget: f64 = match value("--max-reject-ratio") {
        Some(r) => r
            .parse()
            .map_err(|_| weibo_etl::Error::Usage(format!("--max-reject-ratio {r:?}")))?,
        None => 0.05,
    };
    // Both stages cut keys the same way: the partitions one run over the input would take.
    let key_partitions = match value("--key-partitions") {
        Some(n) => n
            .parse()
            .map_err(|_| weibo_etl::Error::Usage(format!("--key-partitions {n:?}")))?,
        None => {
            let inputs: Vec<String> = yarn::arg_values(&spec.args, "--input")
                .into_iter()
                .map(String::from)
                .collect();
            let bytes: u64 = fs.expand_inputs(&inputs)?.iter().map(|f| f.len).sum();
            job::default_key_partitions(bytes)
        }
    };
    let args = yarn::without_arg(&spec.args, "--key-partitions");
    let map_spec = TaskSpec {
        args: args.clone(),
        phase: yarn::Phase::Map { key_partitions },
        ..spec.clone()
    };
    let (map_job, map_out, maps) = run.stage(&map_spec, "map")?;
    let counts = |reports: &[Value]| -> Result<Vec<SliceCounts>> {
        reports
            .iter()
            .enumerate()
            .map(|(i, r)| {
                serde_json::from_value(r["clean"].clone())
                    .with_context(|| format!("slice {i}'s report has no clean counts"))
            })
            .collect()
    };
    let map_counts = counts(&maps)?;
    let read = shuffle::merge(&map_counts, &[]);
    let mut whole = CleanReport {
        date: date.clone(),
        output: output.to_string(),
        entities: read.entities.clone(),
        unattributed: read.unattributed.clone(),
        files: Vec::new(),
        bytes_in: read.bytes_in,
        seconds: 0.0,
        mb_per_s: 0.0,
        committed: false,
    };
    if let Some(over) = job::budget_error(&whole, budget) {
        return Err(weibo_etl::Error::RejectBudget(over.to_string()).into());
    }
    let reduce_spec = TaskSpec {
        args,
        phase: yarn::Phase::Reduce {
            key_partitions,
            shuffle: map_out.to_string(),
        },
        ..spec.clone()
    };
    let (reduce_job, reduce_out, reduces) = run.stage(&reduce_spec, "reduce")?;
    let merged = shuffle::merge(&map_counts, &counts(&reduces)?);
    whole.entities = merged.entities;
    whole.unattributed = merged.unattributed;
    if !whole.balances() {
        bail!("the YARN job's counts do not balance: {:?}", whole.entities);
    }
    let dt = format!("dt={date}");
    let mut staged = Vec::new();
    for (name, counts) in &whole.entities {
        let dir = reduce_out.join(name).join(&dt);
        let parts: Vec<_> = fs
            .list(&dir, false)?
            .into_iter()
            .filter(|e| e.location.to_string().ends_with(".parquet"))
            .collect();
        let rows = partition::parquet_rows(fs, &parts)?;
        if rows != counts.records_out {
            bail!(
                "{dir} holds {rows} rows where the reduces report {} kept",
                counts.records_out
            );
        }
        staged.push(partition::Staged {
            tmp: dir,
            target: output.join(name).join(&dt),
        });
    }
    // The rejects of every map, in input order, as one run writes them.
    let rejects = reduce_out.join("_rejects").join(&dt);
    let mut sink = fs.create_atomic(&rejects.join("rejects.jsonl"))?;
    let from = map_out.join(shuffle::REJECTS);
    if fs.exists(&from)? {
        for entry in fs.list(&from, false)? {
            let mut reader = fs.open(&entry.location)?;
            std::io::copy(&mut reader, &mut sink)
                .with_context(|| format!("copying {}", entry.location))?;
        }
    }
    sink.commit()?;
    staged.push(partition::Staged {
        tmp: rejects,
        target: output.join("_rejects").join(&dt),
    });
    commit::commit_all(fs, &staged).context("committing the YARN job's output")?;
    whole.committed = true;
    let mut report = serde_json::to_value(&whole)?;
    // The files each map read, in input order.
    let mut files: Vec<Value> = maps
        .iter()
        .flat_map(|m| m["clean"]["files"].as_array().cloned().unwrap_or_default())
        .collect();
    files.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    report["files"] = Value::from(files);
    let slices = maps.into_iter().chain(reduces).collect();
    Ok(Outcome {
        jobs: vec![map_job, reduce_job],
        committed: staged.into_iter().map(|s| s.target).collect(),
        slices,
        merged: Some(report),
    })
}

/// How the YARN job ended.
#[derive(Debug, serde::Serialize)]
struct Submitted {
    exit: i32,
    job_id: String,
    state: String,
    tracking_url: String,
}

impl Submitted {
    fn succeeded(&self) -> bool {
        self.exit == 0 && self.state == "SUCCEEDED"
    }
}

fn submit(submitter: Submitter, args: &[String]) -> Result<Submitted> {
    if submitter == Submitter::Local {
        let o = cluster::run_streaming(args).context("running the job on the local YARN")?;
        return Ok(Submitted {
            exit: o.exit,
            job_id: o.job_id,
            state: o.state,
            tracking_url: o.tracking_url,
        });
    }
    // `mapred streaming` prints the job id and tracking URL on stderr; pass it through.
    let mut child = Command::new("mapred")
        .arg("streaming")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run `mapred streaming` (is Hadoop on PATH?)")?;
    let (mut job_id, mut url) = ("-".to_string(), "-".to_string());
    for line in BufReader::new(child.stderr.take().expect("piped")).lines() {
        let line = line?;
        eprintln!("{line}");
        if let Some(at) = line.find("Running job: ") {
            job_id = line[at + 13..].trim().to_string();
        }
        if let Some(at) = line.find("The url to track the job: ") {
            url = line[at + 26..].trim().to_string();
        }
    }
    let status = child.wait()?;
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
    use std::io::Write as _;
    let exe = std::env::current_exe().context("finding this binary")?;
    let open = || std::fs::File::open(&exe).with_context(|| format!("reading {}", exe.display()));
    let (mut digest, mut len, mut reader) = (md5::Md5::new(), 0u64, open()?);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf)?;
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
        .join(yarn::streaming::BINARY_LINK);
    if fs.status(&target)?.is_some_and(|e| e.len == len) {
        return Ok(target);
    }
    // Under a name of its own first: a job that has started from the binary on HDFS fails
    // if the file changes under it, so a racing upload never replaces one in place.
    eprintln!("uploading the binary to {target}");
    let tmp = target
        .parent()
        .expect("a folder")
        .join(&format!("_upload.{}", partition::run_tag()));
    let mut file = fs.create_atomic(&tmp)?;
    std::io::copy(&mut open()?, &mut file).with_context(|| format!("uploading to {target}"))?;
    file.flush()?;
    file.commit()?;
    if !fs.rename_new(&tmp, &target)? {
        fs.delete(&tmp)?;
    }
    Ok(target)
}

/// load: the tables created and the staged counter snapshot reset first, one streaming job
/// of N slices of the night's units, then the snapshot committed from their reports
/// (`load::slices`). The cells are in HBase once the tasks succeed; nothing is promoted.
fn run_load(ctx: &Context, run: &Run, spec: TaskSpec) -> Result<Outcome> {
    use weibo_etl::load::{slices, LoadReport};
    let options = super::load::options_of(ctx, &spec.args)?;
    let created = slices::prepare(run.fs, &options).context("preparing the tables")?;
    if !created.is_empty() {
        let names: Vec<&str> = created.iter().map(|t| t.name()).collect();
        eprintln!("created {}:{}", options.write.namespace, names.join(","));
    }
    let (submitted, _, slice_values) = run.stage(&spec, "out")?;
    let reports = slice_values
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::from_value::<LoadReport>(r["load"].clone())
                .with_context(|| format!("slice {i}'s report has no load section"))
        })
        .collect::<Result<Vec<_>>>()?;
    let merged = slices::commit(run.fs, &options, &reports).context("committing the load")?;
    for (table, n) in &merged.write.rows_by_table {
        eprintln!("{table:<13} {n:>10} puts");
    }
    Ok(Outcome {
        jobs: vec![submitted],
        committed: Vec::new(),
        slices: slice_values,
        merged: Some(serde_json::to_value(&merged)?),
    })
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
            serde_json::from_slice(&bytes).with_context(|| format!("reading {file}"))
        })
        .collect()
}

/// The job's figures for the whole run, from its slices' reports; checked where every slice
/// must agree.
fn merge(job: Stage, slices: &[Value], args: &[String]) -> Result<Option<Value>> {
    if job == Stage::Cascades {
        return merge_cascades(slices, args).map(Some);
    }
    if job == Stage::Inbox {
        return merge_inbox(slices).map(Some);
    }
    if job == Stage::Rank {
        use weibo_etl::graph::rank::RankStats;
        let stats: Vec<RankStats> = slice_figures(slices, "rank")?;
        let whole = RankStats::of_slices(&stats)
            .context("the slices read different inputs (rows read or partitions differ)")?;
        return Ok(Some(serde_json::to_value(whole)?));
    }
    if job != Stage::Friends {
        return Ok(None);
    }
    // Every slice reads every edge, and keeps the distinct edges and pairs of its own
    // buckets: the edges read must agree, the distinct edges and pairs add up. A user has
    // friends in several slices, so users_with_friends does not add up, and is left out.
    let mut merged = serde_json::Map::new();
    let field = |i: usize, s: &Value, name: &str| -> Result<u64> {
        s["friends"][name]
            .as_u64()
            .with_context(|| format!("slice {i}'s report has no friends.{name}"))
    };
    for name in ["edges_read", "duplicate_edges", "self_edges"] {
        let first = field(0, &slices[0], name)?;
        for (i, s) in slices.iter().enumerate() {
            let n = field(i, s, name)?;
            if n != first {
                bail!("the slices read different inputs: {name} is {first} in slice 0, {n} in slice {i}");
            }
        }
        merged.insert(name.into(), Value::from(first));
    }
    for name in ["distinct_edges", "mutual_pairs"] {
        let mut sum = 0;
        for (i, s) in slices.iter().enumerate() {
            sum += field(i, s, name)?;
        }
        merged.insert(name.into(), Value::from(sum));
    }
    let distinct = merged["distinct_edges"].as_u64().unwrap_or(0);
    let mutual = merged["mutual_pairs"].as_u64().unwrap_or(0);
    let reciprocity = if distinct == 0 {
        0.0
    } else {
        2.0 * mutual as f64 / distinct as f64
    };
    merged.insert("reciprocity".into(), Value::from(reciprocity));
    Ok(Some(Value::Object(merged)))
}

/// Every slice's figures of `job` (the `job` object of its report), in slice order.
fn slice_figures<T: serde::de::DeserializeOwned>(slices: &[Value], job: &str) -> Result<Vec<T>> {
    slices
        .iter()
        .enumerate()
        .map(|(i, s)| {
            serde_json::from_value(s[job].clone())
                .with_context(|| format!("slice {i}'s report has no {job} figures"))
        })
        .collect()
}

/// cascades: the slices hold disjoint roots, so their figures add up; the rows read must
/// agree, and the largest cascades are taken over every slice's.
fn merge_cascades(slices: &[Value], args: &[String]) -> Result<Value> {
    use weibo_etl::graph::cascades::CascadesStats;
    let stats: Vec<CascadesStats> = slice_figures(slices, "cascades")?;
    let top = match yarn::arg_values(args, "--top").first() {
        Some(t) => t
            .parse()
            .map_err(|_| weibo_etl::Error::Usage(format!("--top {t:?}")))?,
        None => weibo_etl::graph::cascades::TOP,
    };
    let whole = CascadesStats::of_slices(&stats, top)
        .context("the slices read different inputs (rows read or partitions differ)")?;
    Ok(serde_json::to_value(whole)?)
}

/// inbox: the slices hold disjoint authors, so their figures add up; the rows read and the
/// settings must agree.
fn merge_inbox(slices: &[Value]) -> Result<Value> {
    use weibo_etl::graph::inbox::InboxStats;
    let stats: Vec<InboxStats> = slice_figures(slices, "inbox")?;
    let whole = InboxStats::of_slices(&stats)
        .context("the slices read different inputs (rows read, partitions or K differ)")?;
    Ok(serde_json::to_value(whole)?)
}

/// The map task: reads its slices from stdin (all of it, or Streaming sees a broken pipe),
/// runs each as a child process of this binary into the task attempt's folder, and reports
/// progress and counters on stderr in Streaming's `reporter:` lines. A slice that fails
/// fails the attempt with its exit code.
fn run_task(ctx: &Context, spec_path: &str) -> Result<()> {
    let fs = &ctx.fs;
    let spec_location = fs.parse(spec_path)?;
    let spec = TaskSpec::from_json(&fs.read_to_vec(&spec_location)?, spec_path)?;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the task's input")?;
    let slices = yarn::slices_of_input(&input, spec.tasks)?;
    let task_dir = std::env::var("mapreduce_task_output_dir").map_err(|_| {
        weibo_etl::Error::Usage(
            "`yarn task` runs inside a YARN task ($mapreduce_task_output_dir is not set)".into(),
        )
    })?;
    let attempt = std::env::var("mapreduce_task_attempt_id").unwrap_or_default();
    let exe = std::env::current_exe().context("finding this binary")?;
    let task_dir_location = fs.parse(&task_dir)?;
    for slice in slices {
        eprintln!("reporter:status:{} slice {slice} ({attempt})", spec.job);
        let report = task_dir_location.join(&TaskSpec::report_name(slice));
        let status = Command::new(&exe)
            .args(spec.slice_args(slice, &task_dir, &report.to_string()))
            .envs(&spec.env)
            .stdin(Stdio::null())
            .status()
            .with_context(|| format!("running slice {slice}"))?;
        if !status.success() {
            let code = status.code().unwrap_or(1);
            return Err(weibo_etl::Error::Stage {
                stage: format!("{} {slice}", spec.job),
                date: attempt,
                code,
            }
            .into());
        }
        counters(fs, &report, spec.job.name());
        fail_first_attempt(fs, &spec, slice, &attempt, &task_dir_location)?;
    }
    Ok(())
}

/// Streaming counters from a slice's report: its job section's whole numbers.
fn counters(fs: &FileSystems, report: &Location, job: &str) {
    let Ok(bytes) = fs.read_to_vec(report) else {
        return;
    };
    let Ok(doc) = serde_json::from_slice::<Value>(&bytes) else {
        return;
    };
    if let Some(section) = doc[job].as_object() {
        for (name, value) in section {
            if let Some(n) = value.as_u64() {
                eprintln!("reporter:counter:weibo-etl {job},{name},{n}");
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
        bail!(
            "{FAIL_SWITCH}={}: failing attempt {attempt} on purpose",
            slice.index
        );
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

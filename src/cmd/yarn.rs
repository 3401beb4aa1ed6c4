//! `weibo-etl yarn submit|task`: a job's slices as the map tasks of a YARN job (Hadoop
//! Streaming, map-only), and the task side that runs one slice (docs/design/yarn.md).

use std::io::Read as _;

use anyhow::{Context as _, Result};
use serde_json::Value;
use weibo_etl::dev::cluster;
use weibo_etl::report::Report;
use weibo_etl::stage::Stage;
use weibo_etl::yarn::jobs::{self, Plan};
use weibo_etl::yarn::submit::{self, SubmitOptions, Submitted, Submitter};
use weibo_etl::yarn::{task, TaskSpec};

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

/// The global options a task's slice runs with, as environment (the submitter's values).
const FORWARDED_ENV: &[&str] = &["WEIBO_ETL_LOG", "RUST_BACKTRACE", task::FAIL_SWITCH];

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    match args.action {
        Action::Submit(submit) => run_submit(ctx, submit),
        Action::Task { spec } => {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .context("reading the task's input")?;
            task::run(&ctx.fs, &spec, &input, &mut std::io::stderr())?;
            Ok(())
        }
    }
}

fn run_submit(ctx: &Context, args: SubmitArgs) -> Result<()> {
    let mut report = Report::new("yarn");
    let (job, job_args) = args.job.split_first().expect("clap requires the job");
    let env = submit::task_env(
        &[
            ("WEIBO_ETL_HDFS", ctx.fs.default_fs().to_string()),
            ("WEIBO_ETL_HBASE", ctx.global.hbase.clone()),
            ("WEIBO_ETL_HBASE_ADMIN", ctx.admin_addr()),
            ("WEIBO_ETL_NAMESPACE", ctx.global.namespace.clone()),
        ],
        FORWARDED_ENV,
    );
    let spec = TaskSpec::new(job, job_args, args.tasks, env)?;
    let plan = match spec.job {
        Stage::Clean => Plan::Clean,
        Stage::Load => Plan::Load(Box::new(super::load::options_of(ctx, &spec.args)?)),
        Stage::Rank => Plan::Rank(super::rank::merge_of(&spec.args)?),
        Stage::Friends | Stage::Inbox | Stage::Cascades => Plan::Slices,
    };
    let local = |a: &[String]| {
        cluster::run_streaming(a).map(|o| Submitted {
            exit: o.exit,
            job_id: o.job_id,
            state: o.state,
            tracking_url: o.tracking_url,
        })
    };
    let options = SubmitOptions {
        tasks: args.tasks,
        queue: args.queue.clone(),
        memory_mb: args.memory,
        max_attempts: args.max_attempts,
        submitter: args.submitter,
        apps: args.apps.clone(),
        job_line: args.job.clone(),
        local: &local,
    };
    let outcome = match jobs::submit(&ctx.fs, &options, spec, plan) {
        Ok(done) => done,
        Err(e) => {
            let e = anyhow::Error::from(e);
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    for j in &outcome.jobs {
        println!("yarn job {}: {} ({})", j.job_id, j.state, j.tracking_url);
    }
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
            None if job == "load" => {
                if let Some(tables) = merged["rows_by_table"].as_object() {
                    for (table, n) in tables {
                        eprintln!("{table:<13} {n:>10} puts");
                    }
                }
            }
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

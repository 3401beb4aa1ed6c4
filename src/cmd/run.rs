//! `weibo-etl run`: the nightly runner of a job file ([`weibo_etl::nightly::run`]), one date
//! or a range of them; stdout carries only the summary line of each date.

use std::time::Duration;

use anyhow::Result;
use chrono::NaiveDate;
use weibo_etl::nightly::job::{self, Job};
use weibo_etl::nightly::run::{self as runner, Globals, RunOptions};
use weibo_etl::stage::Stage;
use weibo_etl::Error;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl run jobs/nightly.toml                         # yesterday (Asia/Shanghai)
  weibo-etl run jobs/nightly.toml --date 2026-11-29       # rerun one night: committed stages skip
  weibo-etl run jobs/nightly.toml --date 2026-11-29 --from load    # load and the stages after it
  weibo-etl run jobs/nightly.toml --date-range 2026-11-01..2026-11-30   # backfill a month
  weibo-etl run jobs/nightly.toml --set root=/data/weibo --set namespace=test --dry-run

Crontab (the lock makes an overlapping night exit 6 at once; --wait 2h waits instead):
  30 2 * * *  weibo-etl -q run /etc/weibo-etl/nightly.toml >> /var/log/weibo-etl.log 2>&1

Each date's reports go to <root>/_runs/<namespace>/dt=<date>/: run.json and one <stage>.json
per stage. A stage is committed when its report says ok and its output has _SUCCESS; a
committed stage is skipped unless --force or --from says otherwise, and once a stage runs,
the later ones run too. stdout gets one summary line per date; the exit code is the failing
stage's (see weibo-etl --help), 6 when the lock is held.";

/// Run the nightly pipeline of a job file (clean -> load -> friends -> rank -> inbox ->
/// cascades) for a date or a range of dates: each stage as a child process, committed stages skipped, one lock per job
/// and namespace.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The job file (TOML): places, namespace, stages and their options (jobs/nightly.toml)
    #[arg(value_name = "JOBFILE")]
    jobfile: std::path::PathBuf,
    /// The night to run [default: yesterday, Asia/Shanghai]
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date,
          conflicts_with = "date_range")]
    date: Option<NaiveDate>,
    /// Every night from A to B (inclusive) in order; stops at the first that fails
    #[arg(long, value_name = "A..B", value_parser = parse_range)]
    date_range: Option<(NaiveDate, NaiveDate)>,
    /// Run this stage and every later one, committed or not (earlier ones must be committed)
    #[arg(long, value_name = "STAGE", conflicts_with = "only", value_parser = parse_stage)]
    from: Option<Stage>,
    /// Run only this stage, committed or not
    #[arg(long, value_name = "STAGE", value_parser = parse_stage)]
    only: Option<Stage>,
    /// Run every stage, committed or not
    #[arg(long)]
    force: bool,
    /// Print what would run, and run nothing
    #[arg(long)]
    dry_run: bool,
    /// Override a place or the namespace (root, raw, clean, graph, namespace) or a stage
    /// option (load.writers=8); also WEIBO_ETL_ROOT, WEIBO_ETL_RAW, ... (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = job::parse_set)]
    sets: Vec<(String, String)>,
    /// When another run holds the lock, wait this long for it (e.g. 30m) instead of exiting 6
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    wait: Option<Duration>,
    /// Break the lock if its owner is gone (a run killed on this host); logged
    #[arg(long)]
    break_lock: bool,
}

fn parse_stage(s: &str) -> Result<Stage, String> {
    s.parse::<Stage>().map_err(|e| e.to_string())
}

fn parse_range(s: &str) -> Result<(NaiveDate, NaiveDate), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not A..B"))?;
    let (a, b) = (super::parse_date(a)?, super::parse_date(b)?);
    if a > b {
        return Err(format!("{s:?}: the range ends before it starts"));
    }
    Ok((a, b))
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let path = args.jobfile.display().to_string();
    let text = std::fs::read_to_string(&args.jobfile)
        .map_err(|e| Error::Usage(format!("job file {path}: {e}")))?;
    // --namespace on the command line counts as --set namespace=, and --set still wins.
    let mut sets = args.sets.clone();
    if ctx.global.namespace_on_command_line {
        sets.insert(0, ("namespace".into(), ctx.global.namespace.clone()));
    }
    let job = Job::parse(&text, &path, &sets, &|k| std::env::var(k).ok())?;
    let dates: Vec<String> = match (args.date, args.date_range) {
        (_, Some((a, b))) => a
            .iter_days()
            .take_while(|d| *d <= b)
            .map(|d| d.format("%Y-%m-%d").to_string())
            .collect(),
        (Some(d), None) => vec![d.format("%Y-%m-%d").to_string()],
        (None, None) => vec![runner::yesterday()],
    };
    let g = &ctx.global;
    let options = RunOptions {
        path,
        dates,
        from: args.from,
        only: args.only,
        force: args.force,
        dry_run: args.dry_run,
        wait: args.wait,
        break_lock: args.break_lock,
        globals: Globals {
            hdfs: g.hdfs.clone(),
            hbase: g.hbase.clone(),
            hbase_admin: ctx.admin_addr(),
            report: g.report.clone(),
            quiet: g.quiet,
            verbose: g.verbose,
        },
    };
    runner::run(&ctx.fs, &job, &options, &mut |line| println!("{line}"))?;
    Ok(())
}

//! `weibo-etl run`: the nightly pipeline of a job file, one date or a range of them, each
//! stage a child process of this binary, under the job's lock, skipping what is committed.
//!
//! Invariants: the lock is held for the whole run and released however it ends, short of
//! SIGKILL (SIGTERM and SIGINT stop the running stage first); a stage's report, and the
//! reports of the stages after it, are deleted before it starts, so a run cut short never
//! leaves a stage looking committed on the old input; stdout carries only the summary line.
//! The protocol is in docs/nightly.md.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chrono::NaiveDate;
use serde_json::{json, Value};
use weibo_etl::hdfs::Location;
use weibo_etl::nightly::job::{self, Job, JobStage};
use weibo_etl::nightly::lock::{Lock, LockOptions};
use weibo_etl::nightly::{follows_upto, output_committed};
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

/// What happened to one stage of one date.
struct StageOutcome {
    name: String,
    /// "ran", "failed", "skipped" (committed), "planned" (dry run) or "not selected".
    status: &'static str,
    seconds: f64,
    exit_code: Option<i32>,
    command: Vec<String>,
    report: Value,
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
    for stage in [args.from, args.only].into_iter().flatten() {
        if !job.stages.iter().any(|s| s.stage == stage) {
            let names: Vec<&str> = job.stages.iter().map(|s| s.stage.name()).collect();
            return Err(Error::Usage(format!(
                "no stage {:?} in {path} (stages: {})",
                stage.name(),
                names.join(", ")
            ))
            .into());
        }
    }
    let dates: Vec<String> = match (args.date, args.date_range) {
        (_, Some((a, b))) => a
            .iter_days()
            .take_while(|d| *d <= b)
            .map(|d| d.format("%Y-%m-%d").to_string())
            .collect(),
        (Some(d), None) => vec![d.format("%Y-%m-%d").to_string()],
        (None, None) => {
            let shanghai = chrono::Utc::now() + chrono::Duration::hours(8);
            let yesterday = shanghai.date_naive() - chrono::Duration::days(1);
            vec![yesterday.format("%Y-%m-%d").to_string()]
        }
    };
    let _lock = if args.dry_run {
        None
    } else {
        catch_stop_signals()?;
        let at = ctx.fs.parse(&job.lock_path())?;
        let options = LockOptions {
            wait: args.wait,
            break_stale: args.break_lock,
        };
        Some(Lock::acquire(&ctx.fs, &at, options)?)
    };
    for date in &dates {
        let started = Instant::now();
        let result = run_date(ctx, &job, &args, date);
        let (outcomes, error) = match result {
            Ok(o) => (o, None),
            Err((o, e)) => (o, Some(e)),
        };
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "{}",
            summary(&job, date, &outcomes, error.as_ref(), seconds)
        );
        if let Some(e) = error {
            if dates.len() > 1 {
                return Err(e.context(format!(
                    "--date-range stopped at {date}; the nights before it are done"
                )));
            }
            return Err(e);
        }
    }
    Ok(())
}

type DateResult = std::result::Result<Vec<StageOutcome>, (Vec<StageOutcome>, anyhow::Error)>;

/// Runs one date's stages; on failure, also what ran before it.
fn run_date(ctx: &Context, job: &Job, args: &Args, date: &str) -> DateResult {
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let started = Instant::now();
    let mut outcomes = Vec::new();
    let result = stages(ctx, job, args, date, &mut outcomes);
    if !args.dry_run {
        let doc = json!({
            "job": job.name,
            "date": date,
            "namespace": job.namespace(),
            "started_at": started_at,
            "seconds": round(started.elapsed().as_secs_f64()),
            "ok": result.is_ok(),
            "error": result.as_ref().err().map(|e| format!("{e:#}")),
            "stages": outcomes.iter().map(|o| json!({
                "stage": o.name,
                "status": o.status,
                "seconds": round(o.seconds),
                "exit_code": o.exit_code,
                "command": o.command,
                "report": o.report,
            })).collect::<Vec<_>>(),
        });
        let text = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        let written = ctx
            .fs
            .parse(&job.date_dir(date))
            .and_then(|dir| ctx.fs.write_atomic(&dir.join("run.json"), &text))
            // `--report` gets the same document (the last date's, for a range).
            .and_then(|_| match &ctx.global.report {
                Some(url) => ctx.fs.write_atomic(&ctx.fs.parse(url)?, &text),
                None => Ok(()),
            });
        if let Err(e) = written {
            // The stages' own outcome matters more than the report's.
            log::warn!("could not write the run report of {date}: {e}");
        }
    }
    match result {
        Ok(()) => Ok(outcomes),
        Err(e) => Err((outcomes, e)),
    }
}

fn round(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

fn stages(
    ctx: &Context,
    job: &Job,
    args: &Args,
    date: &str,
    outcomes: &mut Vec<StageOutcome>,
) -> Result<()> {
    let dir = ctx.fs.parse(&job.date_dir(date))?;
    let from = args
        .from
        .as_ref()
        .and_then(|f| job.stages.iter().position(|s| s.stage == *f));
    let mut ran = false;
    for (i, stage) in job.stages.iter().enumerate() {
        let report_at = dir.join(&format!("{}.json", stage.stage));
        let outcome = |status, report| StageOutcome {
            name: stage.stage.to_string(),
            status,
            seconds: 0.0,
            exit_code: None,
            command: Vec::new(),
            report,
        };
        if args.only.is_some_and(|o| o != stage.stage) {
            outcomes.push(outcome("not selected", Value::Null));
            continue;
        }
        let committed = committed_report(ctx, job, stage, date, &report_at)?;
        if from.is_some_and(|f| i < f) {
            let Some(report) = committed else {
                return Err(Error::Usage(format!(
                    "--from {}: stage {} of {date} is not committed; run the night without --from",
                    args.from.map_or("", Stage::name),
                    stage.stage
                ))
                .into());
            };
            outcomes.push(outcome("skipped", report));
            continue;
        }
        let must = args.force || ran || from.is_some() || args.only.is_some();
        if let (false, Some(report)) = (must, &committed) {
            log::info!("{date}: {} is committed, skipped", stage.stage);
            outcomes.push(outcome("skipped", report.clone()));
            continue;
        }
        let mut follows: Vec<String> = Vec::new();
        if stage.stage == Stage::Friends {
            let clean = ctx.fs.parse(&job.place("clean", date))?;
            let mut nights = follows_upto(&ctx.fs, &clean, date)?;
            let tonight = clean.join("follows").join(&format!("dt={date}"));
            if args.dry_run && ran && !nights.contains(&tonight) {
                // What the planned clean will commit.
                nights.push(tonight);
            }
            follows = nights.iter().map(|l| l.to_string()).collect();
        }
        let mut command = global_args(ctx, job, &report_at);
        command.extend(job.stage_args(stage, date, &follows));
        // A load cut short resumes its checkpoint, unless something before it ran again.
        if stage.stage == Stage::Load && !must && committed.is_none() {
            command.push("--resume".into());
        }
        if args.dry_run {
            eprintln!(
                "{date}: {} would run: weibo-etl {}",
                stage.stage,
                command.join(" ")
            );
            outcomes.push(StageOutcome {
                command,
                ..outcome("planned", Value::Null)
            });
            ran = true;
            continue;
        }
        // This stage's report and every later one's stop saying "committed" now: if the run
        // dies here, the next one runs them all again. A load after this stage starts over:
        // its checkpoint was made on the input this stage replaces.
        for later in &job.stages[i..] {
            ctx.fs.delete(&dir.join(&format!("{}.json", later.stage)))?;
        }
        if job.stages[i + 1..].iter().any(|s| s.stage == Stage::Load) {
            let clean = ctx.fs.parse(&job.place("clean", date))?;
            let manifest = clean
                .join("_load")
                .join(&format!("dt={date}"))
                .join(&format!("{}.json", job.namespace()));
            ctx.fs.delete(&manifest)?;
        }
        log::info!("{date}: {} ...", stage.stage);
        launch(ctx, stage.stage.name(), date, command, &report_at, outcomes)?;
        ran = true;
    }
    // An older night that changed the history: the newest night's graph jobs fold it in
    // (each reads every night up to its own).
    if !ran || args.dry_run {
        return Ok(());
    }
    for stage in job.stages.iter().filter(|s| s.stage.is_graph()) {
        let Some(newest) = newest_committed(ctx, job, stage, date)? else {
            continue;
        };
        log::info!(
            "{date}: {} of {newest} again, over the history as it is now",
            stage.stage
        );
        let follows: Vec<String> = if stage.stage == Stage::Friends {
            let clean = ctx.fs.parse(&job.place("clean", &newest))?;
            follows_upto(&ctx.fs, &clean, &newest)?
                .iter()
                .map(|l| l.to_string())
                .collect()
        } else {
            Vec::new()
        };
        let report_at = ctx
            .fs
            .parse(&job.date_dir(&newest))?
            .join(&format!("{}.json", stage.stage));
        ctx.fs.delete(&report_at)?;
        let mut command = global_args(ctx, job, &report_at);
        command.extend(job.stage_args(stage, &newest, &follows));
        launch(
            ctx,
            &format!("{} of {newest}", stage.stage),
            &newest,
            command,
            &report_at,
            outcomes,
        )?;
    }
    Ok(())
}

/// Runs one stage's command and records its outcome; a stage that fails is an error.
fn launch(
    ctx: &Context,
    name: &str,
    date: &str,
    command: Vec<String>,
    report_at: &Location,
    outcomes: &mut Vec<StageOutcome>,
) -> Result<()> {
    let started = Instant::now();
    let code = spawn(&command).with_context(|| format!("stage {name}"))?;
    outcomes.push(StageOutcome {
        name: name.to_string(),
        status: if code == 0 { "ran" } else { "failed" },
        seconds: started.elapsed().as_secs_f64(),
        exit_code: Some(code),
        command,
        report: read_json(ctx, report_at),
    });
    if code != 0 {
        return Err(Error::Stage {
            stage: name.to_string(),
            date: date.to_string(),
            code,
        }
        .into());
    }
    Ok(())
}

/// The newest night after `date` whose `stage` is committed in this namespace, if any.
fn newest_committed(
    ctx: &Context,
    job: &Job,
    stage: &JobStage,
    date: &str,
) -> Result<Option<String>> {
    let runs = ctx.fs.parse(&job.runs_dir())?;
    let nights = weibo_etl::dataset::partition::dated_folders(&ctx.fs, &runs)?;
    for (night, dir) in nights.into_iter().rev().filter(|(d, _)| d.as_str() > date) {
        let report_at = dir.join(&format!("{}.json", stage.stage));
        if committed_report(ctx, job, stage, &night, &report_at)?.is_some() {
            return Ok(Some(night));
        }
    }
    Ok(None)
}

/// The report of a committed stage, or `None` when it is not committed.
fn committed_report(
    ctx: &Context,
    job: &Job,
    stage: &JobStage,
    date: &str,
    report_at: &Location,
) -> Result<Option<Value>> {
    let report = read_json(ctx, report_at);
    if report.get("ok") != Some(&Value::Bool(true)) {
        return Ok(None);
    }
    let place = match stage.stage {
        Stage::Clean => job.place("clean", date),
        Stage::Friends | Stage::Rank | Stage::Inbox | Stage::Cascades => job.place("graph", date),
        Stage::Load => job.place("root", date),
    };
    let place = ctx.fs.parse(&place)?;
    Ok(output_committed(&ctx.fs, stage.stage, &place, date)?.then_some(report))
}

fn read_json(ctx: &Context, at: &Location) -> Value {
    ctx.fs
        .read_to_vec(at)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// The global options a stage inherits from this run, and its report's place.
fn global_args(ctx: &Context, job: &Job, report_at: &Location) -> Vec<String> {
    let g = &ctx.global;
    let mut a: Vec<String> = Vec::new();
    if let Some(hdfs) = &g.hdfs {
        a.extend(["--hdfs".into(), hdfs.clone()]);
    }
    a.extend([
        "--hbase".into(),
        g.hbase.clone(),
        "--hbase-admin".into(),
        ctx.admin_addr(),
        "--namespace".into(),
        job.namespace().to_string(),
        "--report".into(),
        report_at.to_string(),
    ]);
    if g.quiet {
        a.push("-q".into());
    }
    for _ in 0..g.verbose {
        a.push("-v".into());
    }
    a
}

/// The signal that asked this run to stop (SIGTERM or SIGINT), 0 while none did.
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(signal: i32) {
    STOP.store(signal, Ordering::SeqCst);
}

/// From now on SIGTERM and SIGINT ask the run to stop (see [`spawn`]) instead of ending it
/// with the lock still held.
fn catch_stop_signals() -> Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_stop),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for signal in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
        unsafe { sigaction(signal, &action) }.context("installing a signal handler")?;
    }
    Ok(())
}

/// Runs this binary with `args`; returns its exit code. Its stdout goes to our stderr (our
/// stdout is the summary), and it dies with us (a killed run leaves no stage running on).
/// When the run is asked to stop, the stage is stopped first (SIGTERM, then SIGKILL).
fn spawn(args: &[String]) -> Result<i32> {
    use std::os::fd::AsFd;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let exe = std::env::current_exe().context("finding this binary")?;
    let stdout = std::io::stderr().as_fd().try_clone_to_owned()?;
    let parent = std::process::id();
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout));
    // SAFETY: prctl and getppid are async-signal-safe and touch nothing of the parent's.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)?;
            // The run died before the death signal was armed: do not run on without it.
            if nix::unistd::getppid().as_raw() as u32 != parent {
                return Err(std::io::Error::other(
                    "the run that started this stage is gone",
                ));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let mut asked = None;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let signal = STOP.load(Ordering::SeqCst);
        if signal != 0 && asked.is_none() {
            log::warn!("stopping the running stage (signal {signal})");
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            asked = Some(Instant::now());
        }
        if asked.is_some_and(|t| t.elapsed() > Duration::from_secs(30)) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if let Some(signal) = (STOP.load(Ordering::SeqCst) != 0).then(|| STOP.load(Ordering::SeqCst)) {
        anyhow::bail!("stopped by signal {signal}");
    }
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// The one line cron mails: the date, the outcome, each stage's time and main figure.
fn summary(
    job: &Job,
    date: &str,
    outcomes: &[StageOutcome],
    error: Option<&anyhow::Error>,
    seconds: f64,
) -> String {
    let stages: Vec<String> = outcomes
        .iter()
        .filter(|o| o.status != "not selected")
        .map(|o| match o.status {
            "ran" => format!("{} {:.1}s{}", o.name, o.seconds, figure(&o.name, &o.report)),
            "failed" => format!("{} failed (exit {})", o.name, o.exit_code.unwrap_or(1)),
            status => format!("{} {status}", o.name),
        })
        .collect();
    let outcome = match error {
        None => "ok".to_string(),
        Some(e) => format!("FAILED ({})", first_line(e)),
    };
    format!(
        "{} {date} {}: {outcome} in {seconds:.1}s; {}",
        job.name,
        job.namespace(),
        stages.join(", ")
    )
}

fn first_line(e: &anyhow::Error) -> String {
    format!("{e:#}")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A stage's headline number from its report.
fn figure(stage: &str, report: &Value) -> String {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    match stage.split(' ').next().unwrap_or_default() {
        "clean" => {
            let entities = report["clean"]["entities"].as_object();
            let (out, rejected) = entities.map_or((0, 0), |e| {
                e.values().fold((0, 0), |(o, r), c| {
                    (o + n(&c["records_out"]), r + n(&c["rejected"]))
                })
            });
            format!(" ({out} rows, {rejected} rejected)")
        }
        "load" => format!(
            " ({} puts, {} users' counters changed)",
            n(&report["load"]["rows"]),
            n(&report["load"]["users_changed"])
        ),
        "friends" => format!(" ({} pairs)", n(&report["friends"]["mutual_pairs"])),
        "rank" => format!(
            " ({} boards)",
            report["rank"]["users_ranked"]
                .as_array()
                .map_or(0, Vec::len)
        ),
        "inbox" => format!(
            " ({} feed entries, {} celebrities)",
            n(&report["inbox"]["entries"]),
            n(&report["inbox"]["celebrities_skipped"])
        ),
        "cascades" => format!(" ({} cascades)", n(&report["cascades"]["cascades"])),
        _ => String::new(),
    }
}

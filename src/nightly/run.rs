//! One run of a job file over one date or a range of them: under the job's lock, each stage
//! a child process of this binary ([`super::child`]), committed stages skipped, and what each
//! did recorded under `<root>/_runs/<namespace>/dt=<date>/` (`run.json` and one
//! `<stage>.json` per stage).
//!
//! Invariants: the lock is held for the whole run and released however it ends, short of
//! SIGKILL; a stage's report, and the reports of the stages after it, are deleted before it
//! starts, so a run cut short never leaves a stage looking committed on the old input; once a
//! stage runs, the later ones run too; an older night that changed the history makes the
//! newest night's graph jobs run again over it. The protocol is in docs/nightly.md.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::child;
use super::job::{Job, JobStage};
use super::lock::{Lock, LockOptions};
use super::output_committed;
use super::summary::{summary, StageOutcome};
use crate::error::{Error, Result, ResultExt};
use crate::hdfs::{FileSystems, Location};
use crate::stage::Stage;

/// How to run a job file.
pub struct RunOptions {
    /// The job file's path, for messages.
    pub path: String,
    /// The nights, in order; a range stops at the first that fails.
    pub dates: Vec<String>,
    /// Run this stage and every later one, committed or not.
    pub from: Option<Stage>,
    /// Run only this stage, committed or not.
    pub only: Option<Stage>,
    /// Run every stage, committed or not.
    pub force: bool,
    /// Say what would run, and run nothing.
    pub dry_run: bool,
    /// How long to wait for another run's lock.
    pub wait: Option<Duration>,
    /// Break a lock whose owner is gone.
    pub break_lock: bool,
    pub globals: Globals,
}

/// The global options every stage inherits from this run.
pub struct Globals {
    pub hdfs: Option<String>,
    pub hbase: String,
    pub hbase_admin: String,
    /// Where the run's own report goes (the last date's `run.json`, for a range).
    pub report: Option<String>,
    pub quiet: bool,
    pub verbose: u8,
}

impl Globals {
    /// The global options of a stage's command line, with the job's namespace and the
    /// stage's report place.
    fn args(&self, job: &Job, report_at: &Location) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        if let Some(hdfs) = &self.hdfs {
            a.extend(["--hdfs".into(), hdfs.clone()]);
        }
        a.extend([
            "--hbase".into(),
            self.hbase.clone(),
            "--hbase-admin".into(),
            self.hbase_admin.clone(),
            "--namespace".into(),
            job.namespace().to_string(),
            "--report".into(),
            report_at.to_string(),
        ]);
        if self.quiet {
            a.push("-q".into());
        }
        for _ in 0..self.verbose {
            a.push("-v".into());
        }
        a
    }
}

/// Yesterday in Asia/Shanghai: the night a cron run takes by default.
pub fn yesterday() -> String {
    let shanghai = chrono::Utc::now() + chrono::Duration::hours(8);
    let yesterday = shanghai.date_naive() - chrono::Duration::days(1);
    yesterday.format("%Y-%m-%d").to_string()
}

/// Runs `job` as `options` say; `told` gets each date's summary line as the date ends.
pub fn run(
    fs: &FileSystems,
    job: &Job,
    options: &RunOptions,
    told: &mut dyn FnMut(&str),
) -> Result<()> {
    for stage in [options.from, options.only].into_iter().flatten() {
        if !job.stages.iter().any(|s| s.stage == stage) {
            let names: Vec<&str> = job.stages.iter().map(|s| s.stage.name()).collect();
            return Err(Error::Usage(format!(
                "no stage {:?} in {} (stages: {})",
                stage.name(),
                options.path,
                names.join(", ")
            )));
        }
    }
    let _lock = if options.dry_run {
        None
    } else {
        child::catch_stop_signals()?;
        let at = fs.parse(&job.lock_path())?;
        let lock = LockOptions {
            wait: options.wait,
            break_stale: options.break_lock,
        };
        Some(Lock::acquire(fs, &at, lock)?)
    };
    for date in &options.dates {
        let started = Instant::now();
        let (outcomes, error) = match run_date(fs, job, options, date) {
            Ok(o) => (o, None),
            Err((o, e)) => (o, Some(e)),
        };
        let seconds = started.elapsed().as_secs_f64();
        told(&summary(job, date, &outcomes, error.as_ref(), seconds));
        if let Some(e) = error {
            if options.dates.len() > 1 {
                return Err(e.context(format!(
                    "--date-range stopped at {date}; the nights before it are done"
                )));
            }
            return Err(e);
        }
    }
    Ok(())
}

type DateResult = std::result::Result<Vec<StageOutcome>, (Vec<StageOutcome>, Error)>;

/// Runs one date's stages; on failure, also what ran before it.
fn run_date(fs: &FileSystems, job: &Job, args: &RunOptions, date: &str) -> DateResult {
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let started = Instant::now();
    let mut outcomes = Vec::new();
    let result = stages(fs, job, args, date, &mut outcomes);
    if !args.dry_run {
        let doc = json!({
            "job": job.name,
            "date": date,
            "namespace": job.namespace(),
            "started_at": started_at,
            "seconds": round(started.elapsed().as_secs_f64()),
            "ok": result.is_ok(),
            "error": result.as_ref().err().map(|e| e.to_string()),
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
        let written = fs
            .parse(&job.date_dir(date))
            .and_then(|dir| fs.write_atomic(&dir.join("run.json"), &text))
            // `--report` gets the same document (the last date's, for a range).
            .and_then(|_| match &args.globals.report {
                Some(url) => fs.write_atomic(&fs.parse(url)?, &text),
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
    fs: &FileSystems,
    job: &Job,
    args: &RunOptions,
    date: &str,
    outcomes: &mut Vec<StageOutcome>,
) -> Result<()> {
    let dir = fs.parse(&job.date_dir(date))?;
    let from = args
        .from
        .as_ref()
        .and_then(|f| job.stages.iter().position(|s| s.stage == *f));
    let mut ran = false;
    for (i, stage) in job.stages.iter().enumerate() {
        let report_at = dir.join(&format!("{}.json", stage.stage));
        let outcome = |status, report| StageOutcome {
            stage: stage.stage,
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
        let committed = committed_report(fs, job, stage, date, &report_at)?;
        if from.is_some_and(|f| i < f) {
            let Some(report) = committed else {
                return Err(Error::Usage(format!(
                    "--from {}: stage {} of {date} is not committed; run the night without --from",
                    args.from.map_or("", Stage::name),
                    stage.stage
                )));
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
        let mut command = args.globals.args(job, &report_at);
        command.extend(job.stage_args(stage, date));
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
            fs.delete(&dir.join(&format!("{}.json", later.stage)))?;
        }
        if job.stages[i + 1..].iter().any(|s| s.stage == Stage::Load) {
            let clean = fs.parse(&job.place("clean", date))?;
            let manifest = clean
                .join("_load")
                .join(&format!("dt={date}"))
                .join(&format!("{}.json", job.namespace()));
            fs.delete(&manifest)?;
        }
        log::info!("{date}: {} ...", stage.stage);
        launch(
            fs,
            stage.stage,
            stage.stage.name(),
            date,
            command,
            &report_at,
            outcomes,
        )?;
        ran = true;
    }
    // An older night that changed the history: the newest night's graph jobs fold it in
    // (each reads every night up to its own).
    if !ran || args.dry_run {
        return Ok(());
    }
    for stage in job.stages.iter().filter(|s| s.stage.is_graph()) {
        let Some(newest) = newest_committed(fs, job, stage, date)? else {
            continue;
        };
        log::info!(
            "{date}: {} of {newest} again, over the history as it is now",
            stage.stage
        );
        let report_at = fs
            .parse(&job.date_dir(&newest))?
            .join(&format!("{}.json", stage.stage));
        fs.delete(&report_at)?;
        let mut command = args.globals.args(job, &report_at);
        command.extend(job.stage_args(stage, &newest));
        launch(
            fs,
            stage.stage,
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
    fs: &FileSystems,
    stage: Stage,
    name: &str,
    date: &str,
    command: Vec<String>,
    report_at: &Location,
    outcomes: &mut Vec<StageOutcome>,
) -> Result<()> {
    let started = Instant::now();
    let code = child::spawn(&command).with_context(|| format!("stage {name}"))?;
    outcomes.push(StageOutcome {
        stage,
        name: name.to_string(),
        status: if code == 0 { "ran" } else { "failed" },
        seconds: started.elapsed().as_secs_f64(),
        exit_code: Some(code),
        command,
        report: read_json(fs, report_at),
    });
    if code != 0 {
        return Err(Error::Stage {
            stage: name.to_string(),
            date: date.to_string(),
            code,
        });
    }
    Ok(())
}

/// The newest night after `date` whose `stage` is committed in this namespace, if any.
fn newest_committed(
    fs: &FileSystems,
    job: &Job,
    stage: &JobStage,
    date: &str,
) -> Result<Option<String>> {
    let runs = fs.parse(&job.runs_dir())?;
    let nights = crate::dataset::partition::dated_folders(fs, &runs)?;
    for (night, dir) in nights.into_iter().rev().filter(|(d, _)| d.as_str() > date) {
        let report_at = dir.join(&format!("{}.json", stage.stage));
        if committed_report(fs, job, stage, &night, &report_at)?.is_some() {
            return Ok(Some(night));
        }
    }
    Ok(None)
}

/// The report of a committed stage, or `None` when it is not committed.
fn committed_report(
    fs: &FileSystems,
    job: &Job,
    stage: &JobStage,
    date: &str,
    report_at: &Location,
) -> Result<Option<Value>> {
    let report = read_json(fs, report_at);
    if report.get("ok") != Some(&Value::Bool(true)) {
        return Ok(None);
    }
    let place = match stage.stage {
        Stage::Clean => job.place("clean", date),
        Stage::Friends | Stage::Rank | Stage::Inbox | Stage::Cascades => job.place("graph", date),
        Stage::Load => job.place("root", date),
    };
    let place = fs.parse(&place)?;
    Ok(output_committed(fs, stage.stage, &place, date)?.then_some(report))
}

fn read_json(fs: &FileSystems, at: &Location) -> Value {
    fs.read_to_vec(at)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

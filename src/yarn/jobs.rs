//! How each job runs through YARN: its phases, and how its slices' output and figures merge
//! into one run's. The YARN side sits above the jobs: it names their entry points and their
//! merges ([`crate::clean::shuffle`], [`crate::load::slices`], the graph jobs' `of_slices`),
//! never their internals (docs/design/yarn.md).
//!
//! - friends, inbox, cascades: one phase; the slices hold disjoint shares, and each partition
//!   is committed once every slice of it has ([`super::commit::promote`]).
//! - rank: one phase; the top N of the slices' boards is the whole job's, written and
//!   committed as one run's partition.
//! - clean: a map phase (pass 1 over each slice's files, written as a shuffle), the reject
//!   budget checked on the whole job's counts, then a reduce phase (pass 2 over each slice's
//!   key partitions); the partitions and the rejects are committed together.
//! - load: the tables created and the staged counter snapshot reset first, one phase of N
//!   slices of the night's units, then the snapshot committed from their reports. The cells
//!   are in HBase once the tasks succeed; nothing is promoted.

use serde_json::Value;

use super::submit::{Outcome, Submission, SubmitOptions};
use super::{arg_values, commit, without_arg, Phase, TaskSpec};
use crate::clean::job::{self as clean_job, CleanReport};
use crate::clean::shuffle::{self, SliceCounts};
use crate::dataset::parquet_io;
use crate::dataset::partition;
use crate::dataset::slice::Slice;
use crate::error::{Error, Result, ResultExt};
use crate::graph::cascades::{self, CascadesStats};
use crate::graph::inbox::InboxStats;
use crate::graph::rank::{self, Metric, RankStats};
use crate::hdfs::{FileSystems, Location};
use crate::load::{self, LoadOptions, LoadReport};
use crate::stage::Stage;

/// What a job needs beyond its task spec to run through YARN, as its own command line gives
/// it (parsed by the caller).
pub enum Plan {
    /// clean: its budget and key partitions are read from the job's arguments.
    Clean,
    /// load: the night's options.
    Load(Box<LoadOptions>),
    /// rank: where and how the merged boards are written.
    Rank(RankMerge),
    /// friends, inbox, cascades.
    Slices,
}

/// The whole rank job's boards: its date, `--output`, metrics, `--top` and Parquet page
/// version.
pub struct RankMerge {
    pub date: String,
    pub output: String,
    pub metrics: Vec<Metric>,
    pub top: usize,
    pub data_page_version: u8,
}

/// Submits the job `spec` describes (its phases as `plan` says), waits for it, and commits
/// its output; the submission's staging is removed whatever happens.
pub fn submit(
    fs: &FileSystems,
    options: &SubmitOptions<'_>,
    spec: TaskSpec,
    plan: Plan,
) -> Result<Outcome> {
    let (submission, output) = Submission::start(fs, options, &spec)?;
    let outcome = run(&submission, spec, plan, &output);
    submission.clean_up();
    outcome
}

/// Runs `spec`'s job as `plan` says, committing into `output`.
fn run(s: &Submission<'_>, spec: TaskSpec, plan: Plan, output: &Location) -> Result<Outcome> {
    match (spec.job, plan) {
        (Stage::Clean, Plan::Clean) => run_clean(s, spec, output),
        (Stage::Load, Plan::Load(options)) => run_load(s, spec, &options),
        (Stage::Rank, Plan::Rank(merge)) => run_rank(s, spec, &merge),
        (Stage::Friends | Stage::Inbox | Stage::Cascades, Plan::Slices) => {
            run_slices(s, spec, output)
        }
        (job, _) => Err(Error::Usage(format!(
            "{job} through YARN was given the plan of another job"
        ))),
    }
}

/// A job whose slices hold disjoint shares of its answer: one streaming job, each partition
/// committed once every slice of it has.
fn run_slices(s: &Submission<'_>, spec: TaskSpec, output: &Location) -> Result<Outcome> {
    let (submitted, out, slices) = s.phase(&spec, "out")?;
    let committed = commit::promote(s.fs, &out, output, spec.tasks)
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
fn run_rank(s: &Submission<'_>, spec: TaskSpec, merge_to: &RankMerge) -> Result<Outcome> {
    let (submitted, out, slices) = s.phase(&spec, "out")?;
    let committed =
        commit_rank(s.fs, merge_to, &out, spec.tasks).context("committing the merged boards")?;
    let merged = merge(spec.job, &slices, &spec.args)?;
    Ok(Outcome {
        jobs: vec![submitted],
        committed: vec![committed],
        slices,
        merged,
    })
}

/// The whole job's boards from the `tasks` slices written under `job_output`, written into
/// the job's `--output` and committed; returns the committed partition.
fn commit_rank(
    fs: &FileSystems,
    merge_to: &RankMerge,
    job_output: &Location,
    tasks: u32,
) -> Result<Location> {
    let dir = job_output
        .join(crate::dataset::rank::TABLE)
        .join(&format!("dt={}", merge_to.date));
    let slices = (0..tasks)
        .map(|index| {
            let slice = Slice {
                index,
                count: tasks,
            };
            // One task is the whole job, written as a single run writes it.
            let at = if tasks == 1 {
                dir.clone()
            } else {
                dir.join(&slice.folder())
            };
            rank::read_boards(fs, &at).with_context(|| format!("the boards of slice {slice}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let boards = rank::merge_boards(&slices, &merge_to.metrics, merge_to.top);
    let output = fs.parse(&merge_to.output)?;
    rank::write(
        fs,
        &output,
        &merge_to.date,
        Slice::ALL,
        merge_to.data_page_version,
        &boards,
        None,
    )
    .context("writing the merged boards")
}

/// clean: map, the reject budget, reduce, then the partitions and rejects committed together.
fn run_clean(s: &Submission<'_>, spec: TaskSpec, output: &Location) -> Result<Outcome> {
    let fs = s.fs;
    let value = |flag: &str| arg_values(&spec.args, flag).into_iter().next();
    let date = value("--date")
        .ok_or_else(|| Error::Usage("clean needs its --date".into()))?
        .to_string();
    let budget: f64 = match value("--max-reject-ratio") {
        Some(r) => r
            .parse()
            .map_err(|_| Error::Usage(format!("--max-reject-ratio {r:?}")))?,
        None => 0.05,
    };
    // Both phases cut keys the same way: the partitions one run over the input would take.
    let key_partitions = match value("--key-partitions") {
        Some(n) => n
            .parse()
            .map_err(|_| Error::Usage(format!("--key-partitions {n:?}")))?,
        None => {
            let inputs: Vec<String> = arg_values(&spec.args, "--input")
                .into_iter()
                .map(String::from)
                .collect();
            let bytes: u64 = fs.expand_inputs(&inputs)?.iter().map(|f| f.len).sum();
            clean_job::default_key_partitions(bytes)
        }
    };
    let args = without_arg(&spec.args, "--key-partitions");
    let map_spec = TaskSpec {
        args: args.clone(),
        phase: Phase::Map { key_partitions },
        ..spec.clone()
    };
    let (map_job, map_out, maps) = s.phase(&map_spec, "map")?;
    let map_counts = clean_counts(&maps)?;
    let read = shuffle::merge(&map_counts, &[]);
    let mut whole = CleanReport {
        date: date.clone(),
        output: output.to_string(),
        entities: read.entities.clone(),
        unattributed: read.unattributed.clone(),
        files: Vec::new(),
        kept_by_file: Vec::new(),
        bytes_in: read.bytes_in,
        seconds: 0.0,
        mb_per_s: 0.0,
        committed: false,
        history: None,
    };
    if let Some(over) = clean_job::budget_error(&whole, budget) {
        return Err(Error::RejectBudget(over.to_string()));
    }
    let reduce_spec = TaskSpec {
        args,
        phase: Phase::Reduce {
            key_partitions,
            shuffle: map_out.to_string(),
        },
        ..spec.clone()
    };
    let (reduce_job, reduce_out, reduces) = s.phase(&reduce_spec, "reduce")?;
    let merged = shuffle::merge(&map_counts, &clean_counts(&reduces)?);
    let merged_kept = merged.kept_by_file;
    whole.entities = merged.entities;
    whole.unattributed = merged.unattributed;
    if !whole.balances() {
        return Err(Error::Yarn(format!(
            "the YARN job's counts do not balance: {:?}",
            whole.entities
        )));
    }
    let staged = stage_clean_output(fs, &whole, &map_out, &reduce_out, output)?;
    commit::commit_all(fs, &staged).context("committing the YARN job's output")?;
    whole.committed = true;
    // The older nights fold into the history here, on the submitting machine, as a clean on
    // one machine folds them (docs/nightly.md, "The history, compacted").
    let page_version = value("--data-page-version")
        .and_then(|v| v.parse().ok())
        .unwrap_or(crate::dataset::parquet_io::DATA_PAGE_VERSION);
    let history = crate::dataset::history::compact(fs, output, page_version)
        .context("folding the older nights into the history")?;
    whole.history = Some(history);
    let mut report = serde_json::to_value(&whole).map_err(|e| Error::Yarn(e.to_string()))?;
    // The files each map read, in input order.
    let mut files: Vec<Value> = maps
        .iter()
        .flat_map(|m| m["clean"]["files"].as_array().cloned().unwrap_or_default())
        .collect();
    files.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    // The reduces counted the rows kept by input file index, the order above.
    for (i, file) in files.iter_mut().enumerate() {
        let kept = merged_kept.get(i).copied().unwrap_or(0);
        let count = |k: &str| file[k].as_u64().unwrap_or(0);
        let duplicates = count("records_in").saturating_sub(count("rejected") + kept);
        file["records_out"] = Value::from(kept);
        file["duplicates"] = Value::from(duplicates);
    }
    report["files"] = Value::from(files);
    let slices = maps.into_iter().chain(reduces).collect();
    Ok(Outcome {
        jobs: vec![map_job, reduce_job],
        committed: staged.into_iter().map(|s| s.target).collect(),
        slices,
        merged: Some(report),
    })
}

/// The clean counts of every slice's report, in slice order.
fn clean_counts(reports: &[Value]) -> Result<Vec<SliceCounts>> {
    reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::from_value(r["clean"].clone())
                .map_err(|e| Error::Yarn(format!("slice {i}'s report has no clean counts: {e}")))
        })
        .collect()
}

/// The reduces' partitions, each checked to hold the rows its counts say, and the rejects
/// of every map in input order, as one run writes them: what clean commits together.
fn stage_clean_output(
    fs: &FileSystems,
    whole: &CleanReport,
    map_out: &Location,
    reduce_out: &Location,
    output: &Location,
) -> Result<Vec<partition::Staged>> {
    let dt = format!("dt={}", whole.date);
    let mut staged = Vec::new();
    for (name, counts) in &whole.entities {
        let dir = reduce_out.join(name).join(&dt);
        let parts: Vec<_> = fs
            .list(&dir, false)?
            .into_iter()
            .filter(|e| e.location.to_string().ends_with(".parquet"))
            .collect();
        let rows = parquet_io::parquet_rows(fs, &parts)?;
        if rows != counts.records_out {
            return Err(Error::Yarn(format!(
                "{dir} holds {rows} rows where the reduces report {} kept",
                counts.records_out
            )));
        }
        staged.push(partition::Staged {
            tmp: dir,
            target: output.join(name).join(&dt),
        });
    }
    let rejects = reduce_out.join("_rejects").join(&dt);
    let rejects_file = rejects.join("rejects.jsonl");
    let mut sink = fs.create_atomic(&rejects_file)?;
    let from = map_out.join(shuffle::REJECTS);
    if fs.exists(&from)? {
        for entry in fs.list(&from, false)? {
            let mut reader = fs.open(&entry.location)?;
            std::io::copy(&mut reader, &mut sink).map_err(|e| Error::Io {
                op: "copy",
                path: entry.location.to_string(),
                source: e,
            })?;
        }
    }
    sink.commit()?;
    staged.push(partition::Staged {
        tmp: rejects,
        target: output.join("_rejects").join(&dt),
    });
    Ok(staged)
}

/// load: the tables prepared, one phase of slices, then the counter snapshot committed.
fn run_load(s: &Submission<'_>, spec: TaskSpec, options: &LoadOptions) -> Result<Outcome> {
    let created = load::slices::prepare(s.fs, options).context("preparing the tables")?;
    if !created.is_empty() {
        let names: Vec<&str> = created.iter().map(|t| t.name()).collect();
        log::info!("created {}:{}", options.write.namespace, names.join(","));
    }
    let (submitted, _, slice_values) = s.phase(&spec, "out")?;
    let reports = slice_values
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::from_value::<LoadReport>(r["load"].clone())
                .map_err(|e| Error::Yarn(format!("slice {i}'s report has no load section: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let merged = load::slices::commit(s.fs, options, &reports).context("committing the load")?;
    Ok(Outcome {
        jobs: vec![submitted],
        committed: Vec::new(),
        slices: slice_values,
        merged: Some(serde_json::to_value(&merged).map_err(|e| Error::Yarn(e.to_string()))?),
    })
}

/// The job's figures for the whole run, from its slices' reports; checked where every slice
/// must agree.
fn merge(job: Stage, slices: &[Value], args: &[String]) -> Result<Option<Value>> {
    let value = |v: Result<Value, serde_json::Error>| v.map_err(|e| Error::Yarn(e.to_string()));
    let differ =
        |what: &str| Error::Yarn(format!("the slices read different inputs ({what} differ)"));
    match job {
        Stage::Cascades => {
            let stats: Vec<CascadesStats> = slice_figures(slices, job)?;
            let top = match arg_values(args, "--top").first() {
                Some(t) => t
                    .parse()
                    .map_err(|_| Error::Usage(format!("--top {t:?}")))?,
                None => cascades::TOP,
            };
            let whole = CascadesStats::of_slices(&stats, top)
                .ok_or_else(|| differ("rows read or partitions"))?;
            value(serde_json::to_value(whole)).map(Some)
        }
        Stage::Inbox => {
            let stats: Vec<InboxStats> = slice_figures(slices, job)?;
            let whole = InboxStats::of_slices(&stats)
                .ok_or_else(|| differ("rows read, partitions or K"))?;
            value(serde_json::to_value(whole)).map(Some)
        }
        Stage::Rank => {
            let stats: Vec<RankStats> = slice_figures(slices, job)?;
            let whole =
                RankStats::of_slices(&stats).ok_or_else(|| differ("rows read or partitions"))?;
            value(serde_json::to_value(whole)).map(Some)
        }
        Stage::Friends => merge_friends(slices).map(Some),
        Stage::Clean | Stage::Load => Ok(None),
    }
}

/// friends: every slice reads every edge, and keeps the distinct edges and pairs of its own
/// buckets: the edges read must agree, the distinct edges and pairs add up. A user has
/// friends in several slices, so users_with_friends does not add up, and is left out.
fn merge_friends(slices: &[Value]) -> Result<Value> {
    let mut merged = serde_json::Map::new();
    let field = |i: usize, s: &Value, name: &str| -> Result<u64> {
        s["friends"][name]
            .as_u64()
            .ok_or_else(|| Error::Yarn(format!("slice {i}'s report has no friends.{name}")))
    };
    for name in ["edges_read", "duplicate_edges", "self_edges"] {
        let first = field(0, &slices[0], name)?;
        for (i, s) in slices.iter().enumerate() {
            let n = field(i, s, name)?;
            if n != first {
                return Err(Error::Yarn(format!(
                    "the slices read different inputs: {name} is {first} in slice 0, {n} in \
                     slice {i}"
                )));
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
    Ok(Value::Object(merged))
}

/// Every slice's figures of `job` (the `job` object of its report), in slice order.
fn slice_figures<T: serde::de::DeserializeOwned>(slices: &[Value], job: Stage) -> Result<Vec<T>> {
    slices
        .iter()
        .enumerate()
        .map(|(i, s)| {
            serde_json::from_value(s[job.name()].clone())
                .map_err(|e| Error::Yarn(format!("slice {i}'s report has no {job} figures: {e}")))
        })
        .collect()
}

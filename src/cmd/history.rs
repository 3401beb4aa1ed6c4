//! `weibo-etl history check|rebuild`: the state a clean root carries from night to night
//! (its compacted history, and the counter snapshot of each namespace loaded from it),
//! checked against its nights; the history rebuilt from them (docs/nightly.md, "Repair").

use anyhow::Result;
use weibo_etl::dataset::history;
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl history check --input hdfs:///weibo/clean
  weibo-etl history rebuild --input hdfs:///weibo/clean

check exits 1 when a run, or a namespace's counter snapshot, differs from its rebuild.
rebuild is always safe: until it is done the jobs read the nights themselves. A counter
snapshot is rebuilt by deleting it and loading the newest night again (docs/nightly.md).";

/// Check the state that carries from night to night (the runs that `clean` folds the older
/// nights into, the counter snapshots of `load`) against a rebuild from the nights, or
/// rebuild the runs
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Rebuild every run from its nights beside it and compare the two byte for byte (row for
    /// row where the bytes differ); recompute every namespace's counter snapshot and compare
    /// the counters
    Check(Place),
    /// Delete every run and fold the nights again
    Rebuild(Place),
}

#[derive(clap::Args, Debug)]
struct Place {
    /// The clean job's output folder (holding <entity>/dt=<date>/ and <entity>/_history/)
    #[arg(long, value_name = "URL")]
    input: String,
    #[command(flatten)]
    parquet: super::ParquetArgs,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("history");
    match args.action {
        Action::Check(place) => {
            let root = ctx.fs.parse(&place.input)?;
            let checked = history::check(&ctx.fs, &root, place.parquet.data_page_version)?;
            for (run, why) in &checked.differ {
                eprintln!("  differs: {run}: {why}");
            }
            for run in &checked.stale {
                eprintln!("  stale (its nights changed; the next clean replaces it): {run}");
            }
            println!(
                "{} runs checked: {} equal to their rebuild, {} differ, {} stale",
                checked.runs,
                checked.same,
                checked.differ.len(),
                checked.stale.len()
            );
            report.set("history", &checked);
            let snapshots = weibo_etl::load::check_state(&ctx.fs, &root)?;
            for s in &snapshots {
                println!(
                    "counter snapshot of {} as of {}: {} users, {} posts; {} users and {} posts differ",
                    s.namespace, s.as_of, s.users, s.posts, s.users_differ, s.posts_differ
                );
            }
            report.set("counter_snapshots", &snapshots);
            let wrong = snapshots.iter().filter(|s| !s.same()).count();
            let failed = !checked.differ.is_empty() || wrong > 0;
            let error = format!(
                "{} runs and {wrong} counter snapshots differ from their rebuild",
                checked.differ.len()
            );
            ctx.finish_report(&report, failed.then_some(error.as_str()))?;
            if failed {
                anyhow::bail!(error);
            }
        }
        Action::Rebuild(place) => {
            let root = ctx.fs.parse(&place.input)?;
            let done = history::rebuild(&ctx.fs, &root, place.parquet.data_page_version)?;
            println!(
                "{} runs written ({} nights, {} rows)",
                done.runs_written, done.nights, done.rows
            );
            report.set("history", &done);
            ctx.finish_report(&report, None)?;
        }
    }
    Ok(())
}

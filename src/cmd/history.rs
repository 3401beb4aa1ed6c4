//! `weibo-etl history check|rebuild`: the compacted history of a clean root, checked against
//! its nights or rebuilt from them (docs/nightly.md, "The history, compacted").

use anyhow::Result;
use weibo_etl::dataset::history;
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl history check --input hdfs:///weibo/clean
  weibo-etl history rebuild --input hdfs:///weibo/clean

check exits 1 when a run differs from its rebuild. rebuild is always safe: until it is done
the jobs read the nights themselves.";

/// Check the runs that `clean` folds the older nights into against a rebuild from those
/// nights, or rebuild them all
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Rebuild every run from its nights beside it and compare the two byte for byte
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
            let failed = !checked.differ.is_empty();
            let error = format!("{} runs differ from their rebuild", checked.differ.len());
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

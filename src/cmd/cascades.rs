//! `weibo-etl cascades`: every root post's reposts rebuilt as a tree from their `//@` chains.

use anyhow::{Context as _, Result};
use chrono::NaiveDate;
use weibo_etl::dataset::slice::Slice;
use weibo_etl::graph::cascades::{self, CascadesOptions};
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl cascades --input hdfs:///weibo/clean --output hdfs:///weibo/graph --date 2026-11-29

A repost's retweet_mid names the root post; its text names the hops, nearest first:
  好//@carol:哈哈//@bob:转发微博     carol reposted bob's repost of the root
A repost's parent is the latest repost of the same root by the user its first marker names,
made before it; with no marker, or none such, the root.

Output layout:
  <output>/cascades/dt=<date>/part-NNNNN.parquet
      root_mid, root_uid, size, depth, first_at, last_at
  <output>/repost_paths/dt=<date>/part-NNNNN.parquet
      mid, uid, root_mid, parent_mid, depth, path
path lists the uids from the repost back to the root's author (root_uid is empty, and the path
stops at the first repost, when the root was never crawled).

A whole run continues from the cascades of an earlier night when it can, rebuilding only those
the nights since touch (`carried_from` in the report names it); every other run builds them all.

With --slice i/N a run builds the cascades of every N-th hash partition of the roots into
<table>/dt=<date>/slice=i-of-N/: the N slices hold disjoint cascades, whole, and their union
is the single run's (how `weibo-etl yarn submit -- cascades` splits the job).";

/// Rebuild repost cascades (trees of reposts under their root post) and each repost's path,
/// from the cleaned posts and reposts of every night up to --date.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The clean root: the folder holding posts/, reposts/ and users/
    #[arg(long, value_name = "URL")]
    input: String,
    /// Folder the cascades and repost_paths partitions are written under
    #[arg(long, value_name = "URL")]
    output: String,
    /// Logical date of the run: names the dt= partitions
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
    date: NaiveDate,
    /// Memory for the reposts held at once; above it the roots are cut into more partitions
    #[arg(long, default_value = "1GiB", value_name = "SIZE", value_parser = super::parse_size)]
    memory_budget: u64,
    /// Largest cascades listed in the report
    #[arg(long, default_value_t = cascades::TOP)]
    top: usize,
    /// Slice i of N: only the cascades whose root falls in it, for splitting the job across
    /// machines
    #[arg(long, visible_alias = "partition", value_name = "i/N", value_parser = Slice::parse)]
    slice: Option<Slice>,
    #[command(flatten)]
    parquet: super::ParquetArgs,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("cascades");
    let options = CascadesOptions {
        date: args.date.format("%Y-%m-%d").to_string(),
        memory_budget: args.memory_budget,
        top: args.top,
        data_page_version: args.parquet.data_page_version,
        slice: args.slice.unwrap_or(Slice::ALL),
    };
    let outcome = (|| -> Result<_> {
        let clean = ctx.fs.parse(&args.input)?;
        let output = ctx.fs.parse(&args.output)?;
        cascades::run(&ctx.fs, &clean, &output, &options).context("building cascades")
    })();
    let s = match outcome {
        Ok(s) => s,
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    eprintln!(
        "reposts {} in {} cascades ({} roots not crawled, {} reposts without an author), \
         deepest {}; parents from markers {}, from ids {}, the root {} (no marker) and {} \
         (named parent not found)",
        s.reposts,
        s.cascades,
        s.roots_not_crawled,
        s.reposts_without_author,
        s.max_depth,
        s.parents_from_markers,
        s.parents_from_ids,
        s.parents_root_no_marker,
        s.parents_root_not_found
    );
    for t in &s.top {
        eprintln!(
            "  root {} by {}: {} reposts, {} deep",
            t.root_mid,
            t.root_uid.map_or("?".to_string(), |u| u.to_string()),
            t.size,
            t.depth
        );
    }
    report.set("cascades", &s);
    ctx.finish_report(&report, None)
}

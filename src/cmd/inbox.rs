//! `weibo-etl inbox`: home feeds materialised, the newest K posts of every followee, as
//! Parquet and (with `--load`) as K cell versions per followee in the `inbox` table.

use anyhow::{Context as _, Result};
use chrono::NaiveDate;
use weibo_etl::dataset::slice::Slice;
use weibo_etl::graph::inbox::hbase::Wrote;
use weibo_etl::graph::inbox::{self, InboxOptions, InboxStats};
use weibo_etl::hbase::layout::Table;
use weibo_etl::hbase::write::WriteOptions;
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl inbox --input hdfs:///weibo/clean --output hdfs:///weibo/graph --date 2026-11-29
  weibo-etl inbox --input hdfs:///weibo/clean --output hdfs:///weibo/graph --date 2026-11-29 \\
      --k 20 --celebrity-threshold 50000 --load --regions 16
  weibo-etl query feed 1669879400 --limit 20

For every follow F -> A, the newest K posts of A (deleted posts left out) go to F's feed.
Authors with more fans than --celebrity-threshold are not fanned out: `query feed` reads their
newest K posts from their timeline (the post table) and merges them in.

A night continues from the newest inbox partition before it: it builds only the authors its
new posts and follows touch, and its partitions hold what it adds to the feeds (every feed on
a first night). The feeds as of a date are the newest K per (uid, followee) of every partition
up to it (docs/design/inbox.md, \"Reading the Parquet\").

Output layout:
  <output>/inbox/dt=<date>/part-NNNNN.parquet
      uid, followee, mid, created_at, version
  <output>/inbox/dt=<date>/_feeds.json
      the night continued from, K, the threshold, the nights read
  <output>/inbox_celebrities/dt=<date>/part-NNNNN.parquet
      uid, fans
With --load, the inbox table: row hash(uid)+uid; f:<followee> = the post's rowkey, one version
per post at its time (VERSIONS = K); c:<celebrity followed> = its fan count.

With --slice i/N a run builds the feeds of every N-th hash partition of the authors into
<table>/dt=<date>/slice=i-of-N/: the N slices hold disjoint authors, whole, and their union
is the single run's rows (how `weibo-etl yarn submit -- inbox` splits the job).";

/// Materialise home feeds: for every follow edge, the newest K posts of the followee, from the
/// cleaned follows and posts of every night up to --date.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The clean root: the folder holding follows/ and posts/
    #[arg(long, value_name = "URL")]
    input: String,
    /// Folder the inbox and inbox_celebrities partitions are written under
    #[arg(long, value_name = "URL")]
    output: String,
    /// Logical date of the run: names the dt= partitions
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
    date: NaiveDate,
    /// Posts kept per followee: the VERSIONS of the inbox table's f family
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    k: u32,
    /// Authors with more fans than this are merged in at read time, not fanned out
    #[arg(long, default_value_t = 10_000, value_name = "FANS")]
    celebrity_threshold: u64,
    /// Memory for the edges and posts held at once; above it the authors are cut into more
    /// partitions
    #[arg(long, default_value = "1GiB", value_name = "SIZE", value_parser = super::parse_size)]
    memory_budget: u64,
    /// Slice i of N: only the feeds of the authors that fall in it, for splitting the job
    /// across machines (Parquet only: not with --load)
    #[arg(long, visible_alias = "partition", value_name = "i/N", value_parser = Slice::parse, conflicts_with = "load")]
    slice: Option<Slice>,
    /// Also write the feeds into HBase's inbox table
    #[arg(long)]
    load: bool,
    /// Regions a missing inbox table is pre-split into (with --load)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65536))]
    regions: u32,
    #[command(flatten)]
    route: super::RouteArgs,
    #[command(flatten)]
    parquet: super::ParquetArgs,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("inbox");
    let date = args.date.format("%Y-%m-%d").to_string();
    let options = InboxOptions {
        date: date.clone(),
        k: args.k as usize,
        celebrity_threshold: args.celebrity_threshold,
        memory_budget: args.memory_budget,
        data_page_version: args.parquet.data_page_version,
        slice: args.slice.unwrap_or(Slice::ALL),
    };
    let outcome = (|| -> Result<(InboxStats, Option<inbox::hbase::Loaded>)> {
        let clean = ctx.fs.parse(&args.input)?;
        let output = ctx.fs.parse(&args.output)?;
        if !args.load {
            let stats = inbox::run(&ctx.fs, &clean, &output, &options, &mut |_| Ok(()))
                .context("building the inbox")?;
            return Ok((stats, None));
        }
        let hbase = WriteOptions {
            regions: args.regions,
            ..args
                .route
                .apply(ctx.write_options(date.clone(), vec![Table::Inbox]))
        };
        let (stats, written) = inbox::hbase::run(&ctx.fs, &clean, &output, &options, &hbase)
            .context("writing the inbox table")?;
        Ok((stats, Some(written)))
    })();
    let (s, written) = match outcome {
        Ok(r) => r,
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    eprintln!(
        "edges {}: {} fanned out, {} to {} celebrities (more than {} fans) left to read time, \
         {} to authors without posts; {} feed entries of {} posts (K = {}; {} deleted posts \
         left out)",
        s.edges,
        s.edges_fanned_out,
        s.edges_to_celebrities,
        s.celebrities_skipped,
        s.celebrity_threshold,
        s.edges_without_posts,
        s.entries,
        s.posts,
        s.k,
        s.posts_deleted
    );
    if let (Some(base), Some(touched)) = (&s.base, s.touched_authors) {
        eprintln!(
            "since {base}: {touched} authors touched; the entries above are what they add to \
             the feeds of {base}"
        );
    }
    if let Some(loaded) = &written {
        let w = &loaded.written;
        eprintln!(
            "hbase: {} cells in {:.2}s into {}:inbox ({}); {}",
            w.rows,
            w.seconds,
            ctx.global.namespace,
            super::route_taken(w),
            match (loaded.base.wrote, &loaded.base.date) {
                (Wrote::Nothing, _) => "it held this night's entries already".to_string(),
                (Wrote::Added, Some(d)) => format!("what the nights since {d} add"),
                _ => "every feed".to_string(),
            }
        );
        report.set("load", loaded);
    }
    report.set("inbox", &s);
    ctx.finish_report(&report, None)
}

//! `weibo-etl rank`: the day's leaderboards, top N users per metric, as Parquet and (with
//! `--load`) as rows of the `rank` table.

use anyhow::{Context as _, Result};
use chrono::NaiveDate;
use weibo_etl::dataset::slice::Slice;
use weibo_etl::graph::rank::{self, Inputs, Metric, RankOptions};
use weibo_etl::hbase::layout::Table;
use weibo_etl::hbase::write::WriteOptions;
use weibo_etl::report::Report;
use weibo_etl::yarn::jobs::RankMerge;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl rank --input hdfs:///weibo/clean --output hdfs:///weibo/graph --date 2026-11-29
  weibo-etl rank --input hdfs:///weibo/clean --output hdfs:///weibo/graph --date 2026-11-29 \\
      --top 1000 --metric followers --metric new_fans --load

Metrics:
  followers          distinct followers over every night so far
  new_fans           follows that began on the date (the follow time, else the first night
                     that crawled the pair)
  posts              posts written on the date
  reposts_received   reposts made on the date of the user's posts
  comments_received  comments made on the date on the user's posts
  friends            mutual follows, from <friends>/friend_counts/dt=<date>
Days are Asia/Shanghai days. A pair, mid or cid counts once however many nights crawled it.
Only users with a value above 0 are ranked; ties go to the smaller uid.

Output layout:
  <output>/rank/dt=<date>/part-00000.parquet   metric, rank, id, value; by metric, then rank
With --load, the rank table: row <metric>:<yyyymmdd>:<rank, 6 digits>, r:id, r:value, r:of
(the board's length).

With --slice i/N a run ranks the users of every N-th hash partition of the uids into
rank/dt=<date>/slice=i-of-N/: the top N of the N slices' boards is the whole job's (how
`weibo-etl yarn submit -- rank` splits the job, and then writes the merged boards).";

/// Build the day's top-N leaderboards per metric from the cleaned tables (every night up to
/// --date) and the friends output of --date.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The clean root: the folder holding users/, follows/, posts/, comments/
    #[arg(long, value_name = "URL")]
    input: String,
    /// Folder the rank partition is written under
    #[arg(long, value_name = "URL")]
    output: String,
    /// Logical date of the run: the day ranked and the dt= partition written
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
    date: NaiveDate,
    /// Users per board
    #[arg(long, default_value_t = rank::TOP as u32, value_parser = clap::value_parser!(u32).range(1..=999_999))]
    top: u32,
    /// A metric to rank (repeatable) [default: all]
    #[arg(long = "metric", value_name = "METRIC")]
    metrics: Vec<Metric>,
    /// The friends job's --output, for the friends metric [default: --output]
    #[arg(long, value_name = "URL")]
    friends: Option<String>,
    /// Memory for the per-user values; above it the uids are cut into more partitions
    #[arg(long, default_value = "1GiB", value_name = "SIZE", value_parser = super::parse_size)]
    memory_budget: u64,
    /// Slice i of N: only the users that fall in it, for splitting the job across machines
    /// (their own boards; not with --load)
    #[arg(long, visible_alias = "partition", value_name = "i/N", value_parser = Slice::parse, conflicts_with = "load")]
    slice: Option<Slice>,
    /// Also write the boards into HBase's rank table
    #[arg(long)]
    load: bool,
    #[command(flatten)]
    parquet: super::ParquetArgs,
    /// Regions a missing rank table is pre-split into (with --load)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65536))]
    regions: u32,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("rank");
    let outcome = (|| -> Result<(rank::Ranking, String)> {
        let date = args.date.format("%Y-%m-%d").to_string();
        let clean = ctx.fs.parse(&args.input)?;
        let output = ctx.fs.parse(&args.output)?;
        let friends = ctx
            .fs
            .parse(args.friends.as_deref().unwrap_or(&args.output))?;
        let metrics = metrics_of(&args);
        let inputs = Inputs::find(&ctx.fs, &clean, Some(&friends), &date, &metrics)?;
        let options = RankOptions {
            date: date.clone(),
            top: args.top as usize,
            metrics,
            memory_budget: args.memory_budget,
            slice: args.slice.unwrap_or(Slice::ALL),
        };
        let ranking = rank::run(&ctx.fs, &inputs, &options, &output).context("ranking")?;
        // Parquet first, committed; HBase after, so a failed load leaves the committed boards
        // (a rerun writes the same cells).
        let target = rank::write(
            &ctx.fs,
            &output,
            &date,
            options.slice,
            args.parquet.data_page_version,
            &ranking.boards,
            ranking.followers.as_ref(),
        )
        .context("writing the boards")?;
        if args.load {
            let hbase = WriteOptions {
                regions: args.regions,
                ..ctx.write_options(date.clone(), vec![Table::Rank])
            };
            let written = rank::hbase::write(&ranking, &hbase).context("writing the rank table")?;
            eprintln!(
                "hbase: {} rows in {:.2}s into {}:rank",
                written.rows, written.seconds, ctx.global.namespace
            );
            report.set("load", &written);
        }
        Ok((ranking, target.to_string()))
    })();
    let (ranking, target) = match outcome {
        Ok(r) => r,
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    for (metric, board) in &ranking.boards {
        let ranked = ranking
            .stats
            .users_ranked
            .iter()
            .find(|(m, _)| m == metric)
            .map_or(0, |(_, n)| *n);
        match board.first() {
            Some(first) => eprintln!(
                "{metric}: {} of {ranked} users ranked; first {} with {}",
                board.len(),
                first.id,
                first.value
            ),
            None => eprintln!("{metric}: no user has a value above 0"),
        }
    }
    eprintln!("written under {target}");
    report.set("rank", &ranking.stats);
    report.set("output", target);
    ctx.finish_report(&report, None)
}

fn metrics_of(args: &Args) -> Vec<Metric> {
    if args.metrics.is_empty() {
        Metric::ALL.to_vec()
    } else {
        args.metrics.clone()
    }
}

/// `rank`'s arguments on their own, as `yarn submit -- rank <args>` passes them.
#[derive(clap::Parser, Debug)]
#[command(name = "rank")]
struct Line {
    #[command(flatten)]
    args: Args,
}

/// How the slices of `rank <job_args>` (a YARN job) merge into the whole job's boards.
pub fn merge_of(job_args: &[String]) -> Result<RankMerge> {
    use clap::Parser as _;
    let line =
        Line::try_parse_from(std::iter::once("rank".to_string()).chain(job_args.iter().cloned()))
            .map_err(|e| weibo_etl::Error::Usage(format!("rank {}: {e}", job_args.join(" "))))?;
    let args = line.args;
    Ok(RankMerge {
        date: args.date.format("%Y-%m-%d").to_string(),
        metrics: metrics_of(&args),
        top: args.top as usize,
        data_page_version: args.parquet.data_page_version,
        output: args.output,
    })
}

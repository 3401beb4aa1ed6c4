//! `weibo-etl friends`: mutual follows from cleaned follow edges, in memory or out of core,
//! whole or one slice of the pair space.

use anyhow::{Context as _, Result};
use chrono::NaiveDate;
use weibo_etl::graph::friends::{self, FriendsOptions, Slice};
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl friends --input hdfs:///weibo/clean/follows --output hdfs:///weibo/graph --date 2026-11-29
  weibo-etl friends --input hdfs:///weibo/clean/follows/dt=2026-11-2* --output out --date 2026-11-29 \\
      --memory-budget 512MiB
  # split over 4 machines; each writes its own slice folder:
  weibo-etl friends --input ... --output hdfs:///weibo/graph --date 2026-11-29 --partition 2/4

Output layout:
  <output>/friends/dt=<date>/part-00000.parquet         uid_a < uid_b, since (later follow time)
  <output>/friend_counts/dt=<date>/part-00000.parquet   uid, friends
With --partition i/N each machine writes <output>/friends/dt=<date>/slice=i-of-N/ (and the same
under friend_counts/). The N slices hold disjoint pair sets: their union (read dt=<date>
recursively) is exactly the single run's friends. Friend counts of the slices are partial per
user: sum them by uid.";

/// Compute friendships (mutual follows) from cleaned follows Parquet: packed canonical pairs
/// sorted in parallel; out of core by hash partitions when over --memory-budget.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Cleaned follows Parquet: files, folders or globs, one or many dates (repeatable)
    #[arg(long = "input", required = true, value_name = "URL")]
    inputs: Vec<String>,
    /// Folder the friends and friend_counts partitions are written under
    #[arg(long, value_name = "URL")]
    output: String,
    /// Logical date of the run: names the dt= partitions
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = parse_date)]
    date: NaiveDate,
    /// Memory for packed edges (8 bytes each); above it the run spills hash partitions to disk
    #[arg(long, default_value = "4GiB", value_name = "SIZE", value_parser = parse_size)]
    memory_budget: u64,
    /// Only the pairs whose hash bucket is i of N, for splitting the job across machines
    #[arg(long, value_name = "i/N", value_parser = Slice::parse)]
    partition: Option<Slice>,
    /// Local folder for spill files [default: the system temp folder]
    #[arg(long, value_name = "DIR")]
    spill_dir: Option<std::path::PathBuf>,
}

fn parse_date(s: &str) -> Result<NaiveDate, String> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|e| format!("{s:?} is not YYYY-MM-DD: {e}"))
}

fn parse_size(s: &str) -> Result<u64, String> {
    s.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("{s:?} is not a size like 512MiB or 4G: {e}"))
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("friends");
    let slice = args.partition.unwrap_or(Slice::ALL);
    let options = FriendsOptions {
        memory_budget: args.memory_budget,
        slice,
        spill_dir: args.spill_dir,
    };
    let result = friends::run(&ctx.fs, &args.inputs, &options).context("computing friends");
    log::debug!("friends: computed in {:.2}s", report.seconds());
    let mut result = match result {
        Ok(r) => r,
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    let output = ctx.fs.parse(&args.output)?;
    let written = friends::write_output(
        &ctx.fs,
        &output,
        &args.date.format("%Y-%m-%d").to_string(),
        slice,
        &mut result,
    );
    let target = match written {
        Ok(t) => t,
        Err(e) => {
            ctx.finish_report(&report, Some(&e.to_string()))?;
            return Err(e.into());
        }
    };
    let s = &result.stats;
    eprintln!(
        "edges read {}, duplicate edges {}, self edges {}, mutual pairs {}, reciprocity {:.3}, \
         users with friends {}, partitions {}{}",
        s.edges_read,
        s.duplicate_edges,
        s.self_edges,
        s.mutual_pairs,
        s.reciprocity,
        s.users_with_friends,
        s.partitions,
        if s.dictionary_encoded {
            ", dictionary-encoded ids"
        } else {
            ""
        }
    );
    eprintln!("written under {target}");
    report.set("friends", s);
    report.set("output", target.to_string());
    ctx.finish_report(&report, None)
}

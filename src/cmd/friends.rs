//! `weibo-etl friends`: mutual follows from cleaned follow edges, in memory or out of core,
//! whole or one slice of the pair space.

use anyhow::Result;
use chrono::NaiveDate;

use weibo_etl::graph::friends::{self, FriendsOptions, FriendsStats, Slice};
use weibo_etl::hbase::write::WriteOptions;
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl friends --input hdfs:///weibo/clean/follows --output hdfs:///weibo/graph --date 2026-11-29
  weibo-etl friends --input hdfs:///weibo/clean/follows/dt=2026-11-2* --output out --date 2026-11-29 \\
      --memory-budget 512MiB
  # split over 4 machines; each writes its own slice folder:
  weibo-etl friends --input ... --output hdfs:///weibo/graph --date 2026-11-29 --slice 2/4

Output layout:
  <output>/friends/dt=<date>/part-NNNNN.parquet        uid_a < uid_b, since (later follow time);
                                                        each file sorted by (uid_a, uid_b): one
                                                        per pair part of clean's follows, else two
  <output>/friend_counts/dt=<date>/part-NNNNN.parquet  uid, friends; each file sorted by uid
With --slice i/N each machine writes <output>/friends/dt=<date>/slice=i-of-N/ (and the same
under friend_counts/). The N slices hold disjoint pair sets: their union (read dt=<date>
recursively) is exactly the single run's friends. Friend counts of the slices are partial per
user: sum them by uid.";

/// Compute friendships (mutual follows) from cleaned follows Parquet: packed canonical pairs
/// sorted in parallel; out of core by hash partitions when over --memory-budget.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Cleaned follows Parquet: files, folders or globs, one or many dates (repeatable); a
    /// folder of dt= folders (clean's follows root) reads its committed nights up to --date.
    /// Any Parquet with integer follower/followee columns will do (followed_at, any
    /// timestamp unit, gives `since`), as clean or DuckDB writes it
    #[arg(long = "input", required = true, value_name = "URL")]
    inputs: Vec<String>,
    /// Folder the friends and friend_counts partitions are written under
    #[arg(long, value_name = "URL")]
    output: String,
    /// Logical date of the run: names the dt= partitions
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
    date: NaiveDate,
    /// Memory for packed edges (12 bytes each); above it the run spills hash partitions to disk
    #[arg(long, default_value = "4GiB", value_name = "SIZE", value_parser = super::parse_size)]
    memory_budget: u64,
    /// Slice i of N: only the pairs that fall in it, for splitting the job across machines
    #[arg(long, visible_alias = "partition", value_name = "i/N", value_parser = Slice::parse)]
    slice: Option<Slice>,
    /// Local folder for spill files [default: the system temp folder]
    #[arg(long, value_name = "DIR")]
    spill_dir: Option<std::path::PathBuf>,
    /// Also write HBase: the `friend` table (both directions, r:since), `count:friends` in
    /// `user`, and `r:mutual` = 1 on both edges in `follow` and `fans`
    #[arg(long)]
    load: bool,
    #[command(flatten)]
    parquet: super::ParquetArgs,
    /// Regions a missing table is pre-split into (with --load)
    #[arg(long, default_value_t = WriteOptions::REGIONS, value_parser = clap::value_parser!(u32).range(1..=65536))]
    regions: u32,
    #[command(flatten)]
    route: super::RouteArgs,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("friends");
    let slice = args.slice.unwrap_or(Slice::ALL);
    let options = FriendsOptions {
        memory_budget: args.memory_budget,
        slice,
        spill_dir: args.spill_dir.clone(),
    };
    let outcome = (|| -> Result<(FriendsStats, String)> {
        let output = ctx.fs.parse(&args.output)?;
        let date = args.date.format("%Y-%m-%d").to_string();
        let hbase = args.load.then(|| WriteOptions {
            regions: args.regions,
            ..args
                .route
                .apply(ctx.write_options(date.clone(), Vec::new()))
        });
        let done = friends::job::run(
            &ctx.fs,
            &args.inputs,
            &output,
            &date,
            &options,
            args.parquet.data_page_version,
            hbase.as_ref(),
        )?;
        if let Some(loaded) = &done.loaded {
            let w = &loaded.written;
            eprintln!(
                "hbase: {} puts in {:.2}s into {}:friend/user/follow/fans ({}; {} pairs and {} \
                 counts unchanged since {})",
                w.rows,
                w.seconds,
                ctx.global.namespace,
                super::route_taken(w),
                loaded.base.unchanged_pairs,
                loaded.base.unchanged_counts,
                loaded.base.date.as_deref().unwrap_or("-")
            );
            report.set("load", w);
            report.set("load_base", &loaded.base);
        }
        Ok((done.stats, done.committed.to_string()))
    })();
    log::debug!(
        "friends: finished in {:.2}s, peak {} MB",
        report.seconds(),
        weibo_etl::report::peak_rss_bytes().unwrap_or(0) >> 20
    );
    let (s, target) = match outcome {
        Ok(r) => r,
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    eprintln!(
        "edges read {}, duplicate edges {}, self edges {}, mutual pairs {}, reciprocity {:.3}, \
         users with friends {}, partitions {}{}{}",
        s.edges_read,
        s.duplicate_edges,
        s.self_edges,
        s.mutual_pairs,
        s.reciprocity,
        s.users_with_friends,
        s.partitions,
        if s.pair_parts > 0 {
            format!(" (joined in {} pair parts)", s.pair_parts)
        } else {
            String::new()
        },
        if s.dictionary_encoded {
            ", dictionary-encoded ids"
        } else {
            ""
        }
    );
    eprintln!("written under {target}");
    report.set("friends", &s);
    report.set("output", target);
    ctx.finish_report(&report, None)
}

//! `weibo-etl verify`: sampled read-back of loaded tables against the cleaned input.

use anyhow::Result;
use chrono::NaiveDate;
use weibo_etl::report::Report;
use weibo_etl::verify;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl verify --input hdfs:///weibo/clean --date 2026-11-29
  weibo-etl verify --input out/clean --date 2026-11-29 --sample 1000 --report verify.json

Exits 1 when any sampled record differs from what HBase returns.";

/// Sample cleaned users, posts and follows, read them back from HBase, compare, and report
/// mismatches and the p50/p99 latency of gets and prefix scans.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The clean job's output folder (holding <entity>/dt=<date>/)
    #[arg(long, value_name = "URL")]
    input: String,
    /// Logical date of the partitions that were loaded
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
    date: NaiveDate,
    /// Records to sample per entity (users, posts, follows)
    #[arg(long, default_value_t = 200)]
    sample: usize,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("verify");
    let r = verify::run(
        &ctx.fs,
        &args.input,
        &args.date.format("%Y-%m-%d").to_string(),
        &ctx.global.namespace,
        &ctx.global.hbase,
        ctx.timeouts,
        args.sample,
    )?;
    eprintln!(
        "checked {} users, {} posts, {} follows: {} mismatches",
        r.users_checked, r.posts_checked, r.follows_checked, r.mismatches
    );
    for e in &r.examples {
        eprintln!("  {e}");
    }
    eprintln!(
        "get  p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms  ({} calls)",
        r.get_ms.p50, r.get_ms.p99, r.get_ms.max, r.get_ms.calls
    );
    eprintln!(
        "scan p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms  ({} calls)",
        r.scan_ms.p50, r.scan_ms.p99, r.scan_ms.max, r.scan_ms.calls
    );
    report.set("verify", &r);
    let failed = r.mismatches > 0;
    ctx.finish_report(
        &report,
        failed
            .then(|| format!("{} mismatches", r.mismatches))
            .as_deref(),
    )?;
    if failed {
        anyhow::bail!("{} sampled records differ from HBase", r.mismatches);
    }
    Ok(())
}

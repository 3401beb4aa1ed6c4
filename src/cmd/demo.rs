//! `weibo-etl demo`: the whole pipeline on the local cluster and `sample_data/`, end to end.
//!
//! It grows with the jobs: today it starts the cluster, puts the raw sample into HDFS the way
//! the nightly crawl lands, cleans it from HDFS into Parquet on HDFS, and prepares the HBase
//! namespace; each job that lands adds its stage here.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use weibo_etl::clean::job;
use weibo_etl::clean::values::parse_crawl_time;
use weibo_etl::cluster::{self, ClusterPaths, UpOptions};
use weibo_etl::hbase::admin::Admin;
use weibo_etl::hbase::Connection;
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl demo                       start the cluster if needed, run, stop what it started
  weibo-etl demo --keep-cluster        leave the cluster up afterwards to explore
  weibo-etl demo --report demo.json    also write the run's JSON report";

/// Run the pipeline end to end on the local cluster and the bundled sample data, and print
/// what each stage did.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Local folder with the raw sample
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/sample_data"))]
    sample: PathBuf,
    /// Logical date of the run (the dt= partition)
    #[arg(long, default_value = "2026-11-29")]
    date: String,
    /// HDFS folder the raw data lands in (dt=<date> is appended)
    #[arg(long, default_value = "hdfs:///weibo/raw")]
    raw: String,
    /// HDFS folder the cleaned partitions go to
    #[arg(long, default_value = "hdfs:///weibo/clean")]
    clean: String,
    /// Leave a cluster this demo started running afterwards
    #[arg(long)]
    keep_cluster: bool,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("demo");
    let paths = ClusterPaths::discover();

    println!("[1/5] local cluster");
    let up = cluster::up(&paths, &UpOptions::default()).context("starting the local cluster")?;
    if up.already_running {
        println!("      reusing the running cluster");
    } else {
        println!(
            "      started in {:.1}s (pid {})",
            up.seconds,
            up.pid.unwrap_or_default()
        );
    }
    let result = stages(ctx, &args, &mut report);
    if !up.already_running && !args.keep_cluster {
        cluster::down(&paths)?;
        println!("      stopped the cluster this demo started (use --keep-cluster to keep it)");
    } else {
        println!("      cluster left running; stop it with `weibo-etl cluster down`");
    }
    ctx.finish_report(
        &report,
        result.as_ref().err().map(|e| e.to_string()).as_deref(),
    )?;
    result
}

fn stages(ctx: &Context, args: &Args, report: &mut Report) -> Result<()> {
    let raw = format!("{}/dt={}", args.raw.trim_end_matches('/'), args.date);
    println!("[2/5] put {} into {raw}", args.sample.display());
    let sample = args.sample.to_string_lossy();
    let (files, bytes) = super::fs::put(&ctx.fs, &sample, &raw)?;
    println!("      {files} files, {bytes} bytes");

    println!("[3/5] clean {raw} -> {}", args.clean);
    let options = job::CleanOptions {
        inputs: vec![raw.clone()],
        output: args.clean.clone(),
        date: args.date.clone(),
        format: None,
        default_crawl_ms: parse_crawl_time(&format!("{} 23:59:59", args.date))
            .map_err(|r| anyhow::anyhow!("--date {}: {}", args.date, r.code()))?,
        // The sample is dirty on purpose (one file per §3 case): far above a nightly budget.
        max_reject_ratio: 0.5,
        spill_dir: None,
    };
    let clean = job::run(&ctx.fs, &options, &|_| {}).map_err(|e| anyhow::anyhow!("{e}"))?;
    for (entity, c) in &clean.entities {
        println!(
            "      {entity:<9} in {:>3}  out {:>3}  rejected {:>2}  duplicates {:>2}  dangling {:>2}",
            c.records_in, c.records_out, c.rejected, c.duplicates, c.dangling
        );
    }
    println!(
        "      unattributed {} (unknown formats); rejects with reasons in {}/_rejects/dt={}/",
        clean.unattributed.records_in, args.clean, args.date
    );
    anyhow::ensure!(
        clean.balances(),
        "records_in != records_out + rejected + duplicates"
    );
    report.set("clean", &clean);

    println!("[4/5] HBase namespace '{}'", ctx.global.namespace);
    let mut admin = Admin::connect(&ctx.admin_addr(), ctx.timeouts)?;
    let created = admin.ensure_namespace(&ctx.global.namespace)?;
    let tables = Connection::connect(&ctx.global.hbase, ctx.timeouts)?.table_names()?;
    println!(
        "      {} ({} tables visible through Thrift)",
        if created { "created" } else { "exists" },
        tables.len()
    );
    println!("[5/5] load and friends: not built yet (issues #4, #5)");
    println!(
        "done: raw on HDFS at {raw}, cleaned Parquet at {}",
        args.clean
    );

    report.set("raw", &raw);
    report.set("files_put", files);
    report.set("bytes_put", bytes);
    Ok(())
}

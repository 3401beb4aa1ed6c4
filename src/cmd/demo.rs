//! `weibo-etl demo`: the whole pipeline on the local cluster and `sample_data/`, end to end.
//!
//! It grows with the jobs: today it starts the cluster, puts the raw sample into HDFS the way
//! the nightly crawl lands, reads it back, and prepares the HBase namespace; each job that
//! lands adds its stage here.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
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
    /// Leave a cluster this demo started running afterwards
    #[arg(long)]
    keep_cluster: bool,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("demo");
    let paths = ClusterPaths::discover();

    println!("[1/4] local cluster");
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
    println!("[2/4] put {} into {raw}", args.sample.display());
    let sample = args.sample.to_string_lossy();
    let (files, bytes) = super::fs::put(&ctx.fs, &sample, &raw)?;
    println!("      {files} files, {bytes} bytes");

    println!("[3/4] read the raw data back from HDFS");
    let found = ctx.fs.expand_inputs(std::slice::from_ref(&raw))?;
    let read_back: u64 = found
        .iter()
        .map(|f| ctx.fs.read_to_vec(&f.location).map(|b| b.len() as u64))
        .sum::<weibo_etl::Result<u64>>()?;
    anyhow::ensure!(
        read_back == bytes && found.len() as u64 == files,
        "read back {} files / {read_back} bytes, expected {files} / {bytes}",
        found.len()
    );
    println!(
        "      {} files, {read_back} bytes, identical sizes",
        found.len()
    );

    println!("[4/4] HBase namespace '{}'", ctx.global.namespace);
    let mut admin = Admin::connect(&ctx.admin_addr(), ctx.timeouts)?;
    let created = admin.ensure_namespace(&ctx.global.namespace)?;
    let tables = Connection::connect(&ctx.global.hbase, ctx.timeouts)?.table_names()?;
    println!(
        "      {} ({} tables visible through Thrift)",
        if created { "created" } else { "exists" },
        tables.len()
    );
    println!("done: raw sample on HDFS at {raw}; jobs clean/load/friends are not built yet");

    report.set("raw", &raw);
    report.set("files", files);
    report.set("bytes", bytes);
    Ok(())
}

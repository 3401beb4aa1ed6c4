//! `weibo-etl demo`: the whole pipeline on the local cluster and `sample_data/`, end to end.
//!
//! It starts the cluster, puts the raw sample into HDFS the way the nightly crawl lands,
//! cleans it into Parquet on HDFS, loads HBase, computes friendships and queries the result.
//! Each job that lands adds its stage here.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use weibo_etl::clean::job;
use weibo_etl::clean::values::parse_crawl_time;
use weibo_etl::cluster::{self, ClusterPaths, UpOptions};
use weibo_etl::graph::friends::{self, FriendsOptions, Slice};
use weibo_etl::hbase::Connection;
use weibo_etl::keys;
use weibo_etl::load::{self, Table};
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
    /// Local folder with the raw sample [default: sample_data/ of the checkout this binary was
    /// built from]
    #[arg(long, value_name = "DIR")]
    sample: Option<PathBuf>,
    /// Logical date of the run (the dt= partition)
    #[arg(long, default_value = "2026-11-29")]
    date: String,
    /// HDFS folder the raw data lands in (dt=<date> is appended)
    #[arg(long, default_value = "hdfs:///weibo/raw")]
    raw: String,
    /// HDFS folder the cleaned partitions go to
    #[arg(long, default_value = "hdfs:///weibo/clean")]
    clean: String,
    /// HDFS folder the friends partitions go to
    #[arg(long, default_value = "hdfs:///weibo/graph")]
    graph: String,
    /// Leave a cluster this demo started running afterwards
    #[arg(long)]
    keep_cluster: bool,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("demo");
    let paths = ClusterPaths::discover();

    println!("[1/6] local cluster");
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
    let sample = args
        .sample
        .clone()
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/sample_data")));
    println!("[2/6] put {} into {raw}", sample.display());
    let sample = sample.to_string_lossy();
    let (files, bytes) = super::fs::put(&ctx.fs, &sample, &raw)?;
    println!("      {files} files, {bytes} bytes");

    println!("[3/6] clean {raw} -> {}", args.clean);
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
        spill_memory: 256 << 20,
        key_partitions: None,
        data_page_version: weibo_etl::partition::DATA_PAGE_VERSION,
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

    println!(
        "[4/6] load {} -> HBase namespace '{}' (8 regions per table, 4 writers)",
        args.clean, ctx.global.namespace
    );
    let options = ctx.load_options(args.clean.clone(), args.date.clone(), Table::ALL.to_vec());
    let loaded = load::run(&ctx.fs, &options)?;
    for (table, n) in &loaded.rows_by_table {
        println!("      {table:<13} {n:>4} puts");
    }
    report.set("load", &loaded);

    println!("[5/6] friends (mutual follows) -> {}", args.graph);
    let friends = friends::run(
        &ctx.fs,
        &[format!("{}/follows", args.clean)],
        &FriendsOptions {
            memory_budget: 1 << 30,
            slice: Slice::ALL,
            spill_dir: None,
        },
    )?;
    println!(
        "      {} follow edges, {} mutual pairs, reciprocity {:.2}",
        friends.stats.edges_read, friends.stats.mutual_pairs, friends.stats.reciprocity
    );
    for (a, b) in friends.uid_a.iter().zip(&friends.uid_b) {
        println!("      friends: {a} <-> {b}");
    }
    report.set("friends", &friends.stats);
    let graph = ctx.fs.parse(&args.graph)?;
    let target = friends::write_output(&ctx.fs, &graph, &args.date, Slice::ALL, &friends)?;
    println!("      written under {target}");

    println!("[6/6] query the loaded tables");
    let mut conn = Connection::connect(&ctx.global.hbase, ctx.timeouts)?;
    let ns = &ctx.global.namespace;
    for uid in [1669879400i64, 1195230310] {
        let t = std::time::Instant::now();
        let row = conn.get(&format!("{ns}:user"), &keys::user_key(uid))?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let number = |col: &str| {
            row.as_ref()
                .and_then(|r| r.get(col))
                .filter(|v| v.len() == 8)
                .map_or(0, |v| i64::from_be_bytes(v.try_into().expect("8 bytes")))
        };
        let name = row
            .as_ref()
            .and_then(|r| r.get("info:screen_name"))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        println!(
            "      user {uid} {name}: followers {}, following {}, posts {} ({ms:.1} ms)",
            number("count:followers"),
            number("count:following"),
            number("count:posts")
        );
    }
    println!(
        "done: raw {raw} -> clean {} -> HBase '{ns}' + friends {}",
        args.clean, args.graph
    );

    report.set("raw", &raw);
    report.set("files_put", files);
    report.set("bytes_put", bytes);
    Ok(())
}

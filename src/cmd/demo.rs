//! `weibo-etl demo`: the whole pipeline on the local cluster and `sample_data/`, end to end.
//!
//! It starts the cluster, puts the raw sample into HDFS the way the nightly crawl lands, runs
//! the nightly job (`jobs/nightly.toml`: clean, load, friends, rank, inbox, cascades) on it as cron would, and
//! queries the result. Each stage that lands in the job file shows up here.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use weibo_etl::dev::cluster::{self, ClusterPaths, UpOptions};
use weibo_etl::hbase::layout::{cell, keys, Table};
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
    /// HDFS folder the run's lock and reports go under (<root>/_runs/<namespace>/)
    #[arg(long, default_value = "hdfs:///weibo")]
    root: String,
    /// Leave a cluster this demo started running afterwards
    #[arg(long)]
    keep_cluster: bool,
}

impl Args {
    /// The raw sample's folder.
    fn sample_dir(&self) -> PathBuf {
        let built = || PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/sample_data"));
        self.sample.clone().unwrap_or_else(built)
    }
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
    let sample = args.sample_dir();
    println!("[2/4] put {} into {raw}", sample.display());
    let sample = sample.to_string_lossy();
    let (files, bytes) = super::fs::put(&ctx.fs, &sample, &raw)?;
    println!("      {files} files, {bytes} bytes");

    let summary = run_nightly(ctx, args)?;
    println!("      {summary}");
    let run_report = print_stage_reports(ctx, args)?;
    report.set("run", &run_report);
    query_back(ctx, args)?;
    let ns = &ctx.global.namespace;
    println!(
        "done: raw {raw} -> clean {} -> HBase '{ns}' + friends and boards {}",
        args.clean, args.graph
    );

    report.set("raw", &raw);
    report.set("files_put", files);
    report.set("bytes_put", bytes);
    Ok(())
}

/// Runs the shipped nightly job on the sample's night, as cron runs it; returns its summary
/// line.
fn run_nightly(ctx: &Context, args: &Args) -> Result<String> {
    // The nightly job itself, as cron runs it, on the sample's night.
    let job = concat!(env!("CARGO_MANIFEST_DIR"), "/jobs/nightly.toml");
    let mut command: Vec<String> = Vec::new();
    if let Some(hdfs) = &ctx.global.hdfs {
        command.extend(["--hdfs".into(), hdfs.clone()]);
    }
    command.extend([
        "--hbase".into(),
        ctx.global.hbase.clone(),
        "--hbase-admin".into(),
        ctx.admin_addr(),
        "run".into(),
        job.into(),
        "--date".into(),
        args.date.clone(),
        "--force".into(),
    ]);
    for set in [
        format!("raw={}/dt={{date}}", args.raw.trim_end_matches('/')),
        format!("clean={}", args.clean),
        format!("graph={}", args.graph),
        format!("root={}", args.root),
        format!("namespace={}", ctx.global.namespace),
        // The sample is dirty on purpose (one file per case of the raw-format spec): far
        // above a nightly reject budget.
        "clean.max-reject-ratio=0.5".into(),
    ] {
        command.extend(["--set".into(), set]);
    }
    // The sample's fork is a layout we do not ship: read through its mapping file.
    let mapping = args.sample_dir().join("crawlers/fork-mapped/_mapping.toml");
    if mapping.exists() {
        let set = format!("clean.mapping={}", mapping.display());
        command.extend(["--set".into(), set]);
    }
    println!("[3/4] weibo-etl {}", command.join(" "));
    let exe = std::env::current_exe().context("finding this binary")?;
    let mut child = std::process::Command::new(&exe);
    if std::env::var_os("WEIBO_ETL_BULKLOAD_CMD").is_none() {
        // The bundled cluster has no `hbase` script: its bulk loads go through this binary.
        child.env(
            "WEIBO_ETL_BULKLOAD_CMD",
            format!("{} cluster bulkload", exe.display()),
        );
    }
    let out = child
        .args(&command)
        .stdin(std::process::Stdio::null())
        .output()
        .context("running the nightly job")?;
    let summary = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        anyhow::bail!(weibo_etl::Error::Stage {
            stage: "run".into(),
            date: args.date.clone(),
            code: out.status.code().unwrap_or(1),
        });
    }
    Ok(summary)
}

/// Prints what each stage of the night did, from the run's reports; returns `run.json`.
fn print_stage_reports(ctx: &Context, args: &Args) -> Result<serde_json::Value> {
    let runs = format!(
        "{}/_runs/{}/dt={}",
        args.root.trim_end_matches('/'),
        ctx.global.namespace,
        args.date
    );
    let run_report: serde_json::Value = serde_json::from_slice(
        &ctx.fs
            .read_to_vec(&ctx.fs.parse(&format!("{runs}/run.json"))?)?,
    )?;
    for stage in run_report["stages"].as_array().into_iter().flatten() {
        let name = stage["stage"].as_str().unwrap_or_default();
        let r = &stage["report"];
        match name {
            "clean" => {
                for (entity, c) in r["clean"]["entities"].as_object().into_iter().flatten() {
                    println!(
                        "      clean {entity:<9} in {:>3}  out {:>3}  rejected {:>2}  duplicates {:>2}",
                        c["records_in"], c["records_out"], c["rejected"], c["duplicates"]
                    );
                }
                println!(
                    "      rejects with reasons in {}/_rejects/dt={}/",
                    args.clean, args.date
                );
            }
            "load" => {
                for (table, n) in r["load"]["rows_by_table"].as_object().into_iter().flatten() {
                    println!("      load  {table:<13} {n:>4} puts");
                }
            }
            "friends" => println!(
                "      friends: {} follow edges, {} mutual pairs, under {}/friends/dt={}",
                r["friends"]["edges_read"], r["friends"]["mutual_pairs"], args.graph, args.date
            ),
            "rank" => {
                for entry in r["rank"]["users_ranked"].as_array().into_iter().flatten() {
                    println!(
                        "      rank  {:<18} {:>4} users ranked",
                        entry[0].as_str().unwrap_or_default(),
                        entry[1]
                    );
                }
                println!("      boards under {}/rank/dt={}", args.graph, args.date);
            }
            "inbox" => println!(
                "      inbox: {} feed entries for {} follow edges, {} celebrities read at query \
                 time, under {}/inbox/dt={}",
                r["inbox"]["entries"],
                r["inbox"]["edges"],
                r["inbox"]["celebrities_skipped"],
                args.graph,
                args.date
            ),
            "cascades" => println!(
                "      cascades: {} reposts in {} cascades, deepest {}, under {}/cascades/dt={}",
                r["cascades"]["reposts"],
                r["cascades"]["cascades"],
                r["cascades"]["max_depth"],
                args.graph,
                args.date
            ),
            _ => {}
        }
    }
    println!("      reports: {runs}/run.json and one <stage>.json per stage");
    Ok(run_report)
}

/// Reads a few users and the day's board back from HBase, with each read's latency.
fn query_back(ctx: &Context, args: &Args) -> Result<()> {
    println!("[4/4] query the loaded tables");
    let mut conn = Connection::connect(&ctx.global.hbase, ctx.timeouts)?;
    let ns = &ctx.global.namespace;
    for uid in [1669879400i64, 1195230310] {
        let t = std::time::Instant::now();
        let row = conn.get(&Table::User.in_namespace(ns), &keys::user_key(uid))?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let number = |col: &str| {
            row.as_ref()
                .and_then(|r| r.get(col))
                .filter(|v| v.len() == 8)
                .map_or(0, |v| i64::from_be_bytes(v.try_into().expect("8 bytes")))
        };
        let name = row
            .as_ref()
            .and_then(|r| r.get(cell::SCREEN_NAME))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        println!(
            "      user {uid} {name}: followers {}, following {}, posts {}, friends {} ({ms:.1} ms)",
            number(cell::FOLLOWERS),
            number(cell::FOLLOWING),
            number(cell::POSTS),
            number(cell::FRIENDS)
        );
    }
    let t = std::time::Instant::now();
    let board = conn.scan_prefix(
        &Table::Rank.in_namespace(ns),
        keys::rank_prefix("followers", &args.date).as_bytes(),
        3,
    )?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let leaders: Vec<String> = board
        .iter()
        .filter_map(|r| {
            let id = r.get(cell::RANK_ID)?;
            let value = r.get(cell::RANK_VALUE)?;
            let n = |v: &[u8]| i64::from_be_bytes(v.try_into().unwrap_or([0; 8]));
            Some(format!("{} ({})", n(id), n(value)))
        })
        .collect();
    println!(
        "      most followed on {}: {} ({ms:.1} ms)",
        args.date,
        leaders.join(", ")
    );
    Ok(())
}

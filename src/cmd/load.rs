//! `weibo-etl load`: cleaned Parquet → pre-split HBase tables, through Thrift or as HFiles.

use anyhow::{Context as _, Result};
use chrono::NaiveDate;
use weibo_etl::dataset::slice::Slice;
use weibo_etl::hbase::admin::Compression;
use weibo_etl::hbase::layout::Table;
use weibo_etl::hbase::write::WriteOptions;
use weibo_etl::load::{self, LoadOptions};
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl load --input hdfs:///weibo/clean --date 2026-11-29
  weibo-etl load --input hdfs:///weibo/clean --date 2026-11-29 --regions 16 --writers 8
  weibo-etl load --input hdfs:///weibo/clean --date 2026-11-29 --resume     # after a crash
  weibo-etl load --input out/clean --date 2026-11-29 --tables user,follow,fans
  weibo-etl load --input hdfs:///weibo/clean --date 2026-11-29 --via hfile   # bulk load

Tables (in --namespace): user, post, post_by_mid, follow, fans, user_post, user_by_name; the
docs/hbase-layout.md has the byte layout. Every cell of a run gets the timestamp of --date (midnight,
Asia/Shanghai), so reruns replace cells instead of adding versions. Progress is checkpointed
in <input>/_load/dt=<date>/<namespace>.json; --resume skips the units recorded there.
Counters are those of every night loaded so far (the union of the cleaned nights, each
follow, post and comment counted once, the later night's record winning), computed in batch
in --memory-budget: when they do not fit, in key partitions (one pass over the id columns
each, a unit of work each). Only the counters that differ from what the namespace already
holds are written, so a night's counter puts follow what it changed; loading an older night
again writes any difference with the newest loaded night's timestamp.";

/// [`WriteOptions::MEMORY_BUDGET`] as the help shows it (a unit test holds them equal).
const MEMORY_BUDGET: &str = "256MiB";

/// Load cleaned Parquet into HBase: hashed rowkeys, absolute counters computed in batch,
/// tables created pre-split, N parallel Thrift writers batching by region, resumable.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The clean job's output folder (holding <entity>/dt=<date>/)
    #[arg(long, value_name = "URL")]
    input: String,
    /// Logical date of the partitions to load
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
    date: NaiveDate,
    /// Tables to write (comma-separated) [default: all]
    #[arg(long, value_delimiter = ',', value_enum)]
    tables: Vec<Table>,
    /// Regions a missing table is pre-split into
    #[arg(long, default_value_t = WriteOptions::REGIONS, value_parser = clap::value_parser!(u32).range(1..=65536))]
    regions: u32,
    /// Parallel writers, each with its own Thrift connection
    #[arg(long, default_value_t = WriteOptions::WRITERS)]
    writers: usize,
    /// Bytes per batch (one mutateRows call)
    #[arg(long, default_value_t = WriteOptions::BATCH_BYTES)]
    batch_bytes: usize,
    /// Skip the units the checkpoint manifest records as done
    #[arg(long)]
    resume: bool,
    /// Block compression of created tables
    #[arg(long, value_enum, default_value = "none")]
    compression: Compression,
    /// Checkpoint manifest location [default: <input>/_load/dt=<date>/<namespace>.json]
    #[arg(long, value_name = "URL")]
    checkpoint: Option<String>,
    /// Memory for computing the counters; above it they are computed in key partitions, one
    /// pass over the id columns each
    #[arg(long, default_value = MEMORY_BUDGET, value_name = "SIZE", value_parser = super::parse_size)]
    memory_budget: u64,
    /// Write every counter, not only those that differ from the counters already loaded (the
    /// snapshot in <input>/_load/state/<namespace>/); for tables truncated outside weibo-etl
    #[arg(long)]
    rewrite_counters: bool,
    #[command(flatten)]
    route: super::RouteArgs,
    /// One slice of the night's units: what a task of `weibo-etl yarn submit -- load` runs
    /// (the submitter creates the tables and commits the counters; docs/design/yarn.md)
    #[arg(long, visible_alias = "partition", value_name = "i/N", value_parser = Slice::parse, hide = true)]
    slice: Option<Slice>,
}

/// `load`'s arguments on their own, as `yarn submit -- load <args>` passes them.
#[derive(clap::Parser, Debug)]
#[command(name = "load")]
struct Line {
    #[command(flatten)]
    args: Args,
}

/// The options of the load that `job_args` (the arguments after `load`) describe.
pub fn options_of(ctx: &Context, job_args: &[String]) -> Result<LoadOptions> {
    use clap::Parser as _;
    let line =
        Line::try_parse_from(std::iter::once("load".to_string()).chain(job_args.iter().cloned()))
            .map_err(|e| weibo_etl::Error::Usage(format!("load {}: {e}", job_args.join(" "))))?;
    Ok(options(ctx, line.args))
}

fn options(ctx: &Context, args: Args) -> LoadOptions {
    let tables = if args.tables.is_empty() {
        Table::ALL.to_vec()
    } else {
        args.tables
    };
    let write = WriteOptions {
        regions: args.regions,
        writers: args.writers.max(1),
        batch_bytes: args.batch_bytes.max(1),
        compression: args.compression,
        memory_budget: args.memory_budget,
        slice: args.slice,
        ..args
            .route
            .apply(ctx.write_options(args.date.format("%Y-%m-%d").to_string(), tables))
    };
    LoadOptions {
        resume: args.resume,
        checkpoint: args.checkpoint,
        rewrite_counters: args.rewrite_counters,
        ..LoadOptions::new(args.input, write)
    }
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let options = options(ctx, args);
    let mut report = Report::new("load");
    match load::run(&ctx.fs, &options).context("load failed") {
        Ok(r) => {
            for (table, n) in &r.write.rows_by_table {
                eprintln!("{table:<13} {n:>10} puts");
            }
            eprintln!(
                "{} puts, {:.1} MB in {:.2}s: {:.0} puts/s, {:.2} MB/s; {} units done, {} skipped (resume), {} retries{}",
                r.write.rows,
                r.write.bytes as f64 / 1e6,
                r.write.seconds,
                r.write.rows_per_s,
                r.write.mb_per_s,
                r.units_done,
                r.units_skipped,
                r.write.retries,
                if r.unresolved_mentions > 0 {
                    format!(", {} mentions of unknown names", r.unresolved_mentions)
                } else {
                    String::new()
                }
            );
            if let Some(h) = &r.write.hfiles {
                eprintln!(
                    "bulk load: {} HFiles, {} cells, {:.1} MB handed to {} tables in {:.1}s",
                    h.files,
                    h.cells,
                    h.bytes as f64 / 1e6,
                    h.tables,
                    h.seconds
                );
            }
            report.set("load", &r);
            ctx.finish_report(&report, None)
        }
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_shown_memory_budget_is_the_default() {
        assert_eq!(
            super::super::parse_size(super::MEMORY_BUDGET),
            Ok(weibo_etl::hbase::write::WriteOptions::MEMORY_BUDGET)
        );
    }
}

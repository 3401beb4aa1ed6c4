//! `weibo-etl clean`: raw crawled files → deduplicated Parquet partitions, rejects, report.

use anyhow::{Context as _, Result};
use chrono::{Duration, NaiveDate};
use weibo_etl::clean::job::{self, CleanError, CleanOptions, CleanReport};
use weibo_etl::clean::shuffle;
use weibo_etl::dataset::slice::Slice;
use weibo_etl::field_rules::parse_crawl_time;
use weibo_etl::raw::{Format, MappingFile};
use weibo_etl::report::Report;
use weibo_etl::Error;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl clean --input hdfs:///weibo/raw/dt=2026-11-29 --output hdfs:///weibo/clean --date 2026-11-29
  weibo-etl clean --inspect --input new-crawl/ --date 2026-11-29     # what each file is read as
  weibo-etl clean --input 'raw/*.csv.gz' --input raw/tweets.jsonl --output out --date 2026-11-29 \\
      --max-reject-ratio 0.01 --report clean.json

Output layout:
  <output>/<entity>/dt=<date>/part-NNNNN.parquet   entities: users posts follows comments reposts
  <output>/<entity>/dt=<date>/_SUCCESS            written last; a partition without it is not done
  <output>/_rejects/dt=<date>/rejects.jsonl       one line per rejected record: reason, file, line, raw

A rerun replaces the partitions of that date; a run over the reject budget commits nothing and
exits 3, naming the entity and its dominant reject reason.";

/// Clean raw crawled data: detect each file's format, decode it, apply the cleaning rules,
/// deduplicate by natural key (newest crawl wins) and write zstd Parquet partitions per entity,
/// committed atomically with _SUCCESS.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Raw input: files, folders or globs, on HDFS or local disk (repeatable)
    #[arg(long = "input", required = true, value_name = "URL")]
    inputs: Vec<String>,
    /// Folder the entity partitions are written under
    #[arg(long, value_name = "URL", required_unless_present = "inspect")]
    output: Option<String>,
    /// Logical date of the run: names the dt= partitions
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
    date: NaiveDate,
    /// Input format; auto detects it per file from name, header or first record
    #[arg(long, default_value = "auto", value_parser = parse_format)]
    format: FormatChoice,
    /// Crawl time for records that carry none, e.g. 2026-11-29T23:00:00+08:00 [default: the
    /// end of --date, Asia/Shanghai]
    #[arg(long, value_name = "TIME")]
    crawl_time: Option<String>,
    /// Fail (exit 3, nothing committed) when an entity rejects more than this fraction
    #[arg(long, default_value_t = 0.05, value_name = "R")]
    max_reject_ratio: f64,
    /// Read a truncated or corrupt .gz/.zst up to where it breaks and reject the rest as one
    /// corrupt_file (listed in the report) instead of failing the run with exit 1
    #[arg(long)]
    skip_corrupt_files: bool,
    /// Local folder for spill files [default: the system temp folder]
    #[arg(long, value_name = "DIR")]
    spill_dir: Option<std::path::PathBuf>,
    /// Cleaned rows held in memory between the two passes; the rest is spilled to files
    /// (0: spill everything). Peak memory grows by about this much.
    #[arg(long, default_value = "256MiB", value_name = "SIZE", value_parser = super::parse_size)]
    spill_memory: u64,
    /// Parts each entity is split into by key (follows by canonical pair, so that friends
    /// joins each part on its own) [default: one per 64 MiB of input]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=512))]
    key_partitions: Option<u32>,
    /// Read layouts we do not ship as this TOML file declares them (columns or keys, times,
    /// ids, the uid from the path); see docs/formats.md, "Your own layout"
    #[arg(long, value_name = "FILE")]
    mapping: Option<String>,
    #[command(flatten)]
    parquet: super::ParquetArgs,
    /// Write nothing: print what each input file is read as, how its columns map onto the
    /// canonical fields, and its first records as they would be cleaned (from the first MiB
    /// of each file)
    #[arg(long, conflicts_with_all = ["map", "reduce"])]
    inspect: bool,
    /// One map slice of a clean split over machines (`yarn submit`): pass 1 over the input
    /// files of this slice, written under --output as a shuffle; needs --key-partitions
    #[arg(long, value_name = "i/N", value_parser = Slice::parse, hide = true, conflicts_with = "reduce", requires = "key_partitions")]
    map: Option<Slice>,
    /// One reduce slice: pass 2 over this slice's key partitions, from the maps' shuffle
    #[arg(long, value_name = "i/N", value_parser = Slice::parse, hide = true, requires_all = ["shuffle", "key_partitions"])]
    reduce: Option<Slice>,
    /// The maps' output that a reduce slice reads
    #[arg(long, value_name = "URL", hide = true)]
    shuffle: Option<String>,
}

#[derive(Clone, Debug)]
struct FormatChoice(Option<Format>);

fn parse_format(s: &str) -> Result<FormatChoice, String> {
    if s == "auto" {
        return Ok(FormatChoice(None));
    }
    <Format as clap::ValueEnum>::from_str(s, true)
        .map(|f| FormatChoice(Some(f)))
        .map_err(|_| {
            let names: Vec<&str> = <Format as clap::ValueEnum>::value_variants()
                .iter()
                .map(|f| f.dialect().name())
                .collect();
            format!("unknown format {s:?}; one of: auto, {}", names.join(", "))
        })
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let default_crawl_ms = match &args.crawl_time {
        Some(t) => parse_crawl_time(t)
            .map_err(|r| Error::Usage(format!("--crawl-time {t:?}: {}", r.code())))?,
        None => {
            let end = args.date + Duration::days(1);
            parse_crawl_time(&end.format("%Y-%m-%d 00:00:00").to_string())
                .map_err(|r| Error::Usage(format!("--date: {}", r.code())))?
        }
    };
    let layouts = match &args.mapping {
        Some(url) => MappingFile::load(&ctx.fs, url)?,
        None => MappingFile::default(),
    };
    if args.inspect {
        return inspect(ctx, &args, &layouts, default_crawl_ms);
    }
    let options = CleanOptions {
        inputs: args.inputs,
        output: args.output.unwrap_or_default(),
        date: args.date.format("%Y-%m-%d").to_string(),
        format: args.format.0,
        skip_corrupt_files: args.skip_corrupt_files,
        default_crawl_ms,
        max_reject_ratio: args.max_reject_ratio,
        spill_dir: args.spill_dir,
        spill_memory: args.spill_memory,
        key_partitions: args.key_partitions.map(|n| n as usize),
        data_page_version: args.parquet.data_page_version,
        layouts,
    };
    let mut report = Report::new("clean");
    if args.map.is_some() || args.reduce.is_some() {
        let fs = &ctx.fs;
        let outcome = match (args.map, args.reduce, &args.shuffle) {
            (Some(slice), _, _) => shuffle::run_map(fs, &options, slice, &|_| {}),
            (_, Some(slice), Some(from)) => {
                shuffle::run_reduce(fs, &options, slice, &fs.parse(from)?)
            }
            _ => unreachable!("clap requires --shuffle with --reduce"),
        };
        return match outcome {
            Ok(slice) => {
                print_summary(&slice);
                report.set("clean", &slice);
                ctx.finish_report(&report, None)
            }
            Err(e) => {
                ctx.finish_report(&report, Some(&e.to_string()))?;
                Err(e).context("clean slice failed")
            }
        };
    }
    // Expand once for the progress bar's total; the job expands again (cheap metadata calls).
    let total: u64 = ctx
        .fs
        .expand_inputs(&options.inputs)?
        .iter()
        .map(|f| f.len)
        .sum();
    let bar = weibo_etl::progress::bytes(total, "clean");
    let outcome = job::run(&ctx.fs, &options, &|n| bar.inc(n));
    bar.finish_and_clear();
    match outcome {
        Ok(clean) => {
            print_summary(&clean);
            report.set("clean", &clean);
            ctx.finish_report(&report, None)?;
            Ok(())
        }
        Err(err @ CleanError::RejectBudget { .. }) => {
            let message = err.to_string();
            if let CleanError::RejectBudget {
                report: partial, ..
            } = &err
            {
                print_summary(partial);
                report.set("clean", partial.as_ref());
            }
            ctx.finish_report(&report, Some(&message))?;
            Err(Error::RejectBudget(message).into())
        }
        Err(CleanError::Other(e)) => {
            let message = e.to_string();
            ctx.finish_report(&report, Some(&message))?;
            Err(e).context("clean failed")
        }
    }
}

/// Records shown per file by `--inspect`.
const INSPECTED_RECORDS: usize = 3;

/// `--inspect`: each file, its columns and its first records, on stdout.
fn inspect(ctx: &Context, args: &Args, layouts: &MappingFile, crawl_ms: i64) -> Result<()> {
    let mut report = Report::new("clean");
    let found = weibo_etl::clean::inspect::inspect(
        &ctx.fs,
        &args.inputs,
        args.format.0,
        layouts,
        crawl_ms,
        INSPECTED_RECORDS,
    )
    .context("inspecting the input");
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    for f in &found {
        println!("{}", f.file.path);
        let read_as = f
            .file
            .format
            .map_or("nothing (unknown format)", |d| d.name());
        let entity = f
            .entity
            .map(|e| format!(", {}", e.name()))
            .unwrap_or_default();
        match f.file.skipped {
            Some(why) => println!("  skipped: {why}"),
            None => println!(
                "  read as {read_as}{entity} ({}, {})",
                f.file.encoding, f.file.compression
            ),
        }
        if !f.columns.is_empty() {
            let columns: Vec<String> = f
                .columns
                .iter()
                .map(|(name, field)| format!("{name} → {}", field.unwrap_or("-")))
                .collect();
            println!("  columns: {}", columns.join(", "));
        }
        for w in &f.file.warnings {
            println!("  warning: {w}");
        }
        for r in &f.records {
            match r {
                weibo_etl::clean::inspect::Sample::Cleaned { line, entity, row } => {
                    println!("  line {line}: {} {row}", entity.name())
                }
                weibo_etl::clean::inspect::Sample::Rejected {
                    line,
                    reason,
                    excerpt,
                    ..
                } => println!("  line {line}: rejected, {reason}: {excerpt}"),
            }
        }
    }
    report.set("inspect", &found);
    ctx.finish_report(&report, None)
}

fn print_summary(r: &CleanReport) {
    eprintln!(
        "{:<14} {:>10} {:>10} {:>9} {:>10} {:>9} {:>9}  rejects by reason",
        "entity", "records_in", "records_out", "rejected", "duplicates", "dangling", "no_author"
    );
    let rows = r
        .entities
        .iter()
        .map(|(n, c)| (n.as_str(), c))
        .chain(std::iter::once(("(unattributed)", &r.unattributed)));
    for (name, c) in rows {
        if c.records_in == 0 && name == "(unattributed)" {
            continue;
        }
        let reasons: Vec<String> = c
            .rejected_by_reason
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        eprintln!(
            "{name:<14} {:>10} {:>10} {:>9} {:>10} {:>9} {:>9}  {}",
            c.records_in,
            c.records_out,
            c.rejected,
            c.duplicates,
            c.dangling,
            c.without_author,
            reasons.join(" ")
        );
    }
    for (name, c) in &r.entities {
        if c.without_post > 0 {
            eprintln!(
                "{name}: {} kept without their post (the crawl did not record it)",
                c.without_post
            );
        }
        if c.crawl_time_defaulted > 0 {
            eprintln!(
                "{name}: {} records kept with the run's crawl time, their crawl stamp unreadable",
                c.crawl_time_defaulted
            );
        }
    }
    for f in &r.files {
        if let Some(reason) = f.skipped {
            eprintln!("skipped {}: {reason}", f.path);
        }
        if let Some(reason) = &f.corrupt {
            eprintln!("corrupt {}: {reason}", f.path);
        }
    }
    eprintln!(
        "{} files, {:.1} MB in {:.2}s ({:.1} MB/s){}",
        r.files.len(),
        r.bytes_in as f64 / 1e6,
        r.seconds,
        r.mb_per_s,
        if r.committed {
            format!(", committed under {}", r.output)
        } else {
            ", nothing committed".into()
        }
    );
}

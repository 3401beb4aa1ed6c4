//! The subcommands, one file each, and what they share: global options and the [`Context`]
//! built from them.

pub mod cascades;
pub mod clean;
pub mod cluster;
pub mod demo;
pub mod friends;
pub mod fs;
pub mod gen;
pub mod history;
pub mod inbox;
pub mod load;
pub mod query;
pub mod rank;
pub mod run;
pub mod tables;
pub mod verify;
pub mod yarn;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use weibo_etl::hbase::layout::Table;
use weibo_etl::hbase::write::{self as hbase_write, WriteOptions, WriteReport};
use weibo_etl::hbase::{self, admin, Timeouts};
use weibo_etl::hdfs::{self, FileSystems};
use weibo_etl::report::Report;

const AFTER_HELP: &str = "\
Exit codes (for cron):
  0  ok: the job finished and its output is committed
  1  failure: bad input file, I/O error, server-side error
  2  bad usage: unknown flag, missing argument, malformed URL or date
  3  rejected-data budget exceeded (--max-reject-ratio); nothing committed
  4  HDFS unreachable (the message names the NameNode URL)
  5  HBase Thrift gateway unreachable (the message names HOST:PORT)
  6  locked: another `run` of the job and namespace holds its lock (or left it stale)
  7  not found: `query name` or `query rank` found nothing for what it was asked
  `run` ends with the exit code of the stage that failed.

Examples:
  weibo-etl run jobs/nightly.toml --date 2026-11-29    the nightly pipeline: clean, load, friends
  weibo-etl demo                          run everything on the local cluster and sample_data/
  weibo-etl cluster up                    start HDFS + HBase + Thrift on this machine
  weibo-etl fs put sample_data hdfs:///weibo/raw/dt=2026-11-29
  weibo-etl tables regions weibo:user     list a table's regions through Thrift
  weibo-etl yarn submit --tasks 16 -- friends ...   one slice of the job per YARN task";

/// Batch ETL for a Weibo social graph kept in Hadoop: raw crawls on HDFS -> clean Parquet ->
/// HBase (via Thrift), plus graph analytics.
#[derive(Parser, Debug)]
#[command(name = "weibo-etl", version, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// HDFS NameNode URL used for hdfs:/// paths [default: fs.defaultFS from
    /// $HADOOP_CONF_DIR/core-site.xml, else hdfs://127.0.0.1:9000]
    #[arg(long, global = true, value_name = "URL", env = "WEIBO_ETL_HDFS")]
    pub hdfs: Option<String>,

    /// HBase Thrift1 gateway
    #[arg(
        long,
        global = true,
        value_name = "HOST:PORT",
        default_value = hbase::LOCAL_THRIFT,
        env = "WEIBO_ETL_HBASE"
    )]
    pub hbase: String,

    /// HBase Thrift2 gateway, used only for admin calls Thrift1 lacks (namespaces, pre-split
    /// tables) [default: the --hbase host, port 9091]
    #[arg(
        long,
        global = true,
        value_name = "HOST:PORT",
        env = "WEIBO_ETL_HBASE_ADMIN"
    )]
    pub hbase_admin: Option<String>,

    /// HBase namespace holding the tables
    #[arg(
        long,
        global = true,
        default_value = "weibo",
        env = "WEIBO_ETL_NAMESPACE"
    )]
    pub namespace: String,

    /// Write the job's JSON report here (local path or hdfs:// URL)
    #[arg(long, global = true, value_name = "FILE")]
    pub report: Option<String>,

    /// More log output (-v debug, -vv trace)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Only warnings and errors; no progress bars
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Whether --namespace was given on the command line (`run` then takes it over the job
    /// file's).
    #[arg(skip)]
    pub namespace_on_command_line: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Cascades(cascades::Args),
    Clean(clean::Args),
    Cluster(cluster::Args),
    Demo(demo::Args),
    Friends(friends::Args),
    Fs(fs::Args),
    Gen(gen::Args),
    History(history::Args),
    Inbox(inbox::Args),
    Load(load::Args),
    Query(query::Args),
    Rank(rank::Args),
    Run(run::Args),
    Tables(tables::Args),
    Verify(verify::Args),
    Yarn(yarn::Args),
}

/// What a job needs from the global options, resolved once.
pub struct Context {
    pub global: Global,
    pub fs: FileSystems,
    pub timeouts: Timeouts,
}

impl Context {
    pub fn new(global: Global) -> Self {
        let default_fs = global
            .hdfs
            .clone()
            .unwrap_or_else(hdfs::default_fs_from_env);
        Context {
            fs: FileSystems::new(default_fs),
            global,
            timeouts: Timeouts::default(),
        }
    }

    pub fn admin_addr(&self) -> String {
        self.global
            .hbase_admin
            .clone()
            .unwrap_or_else(|| admin::default_admin_addr(&self.global.hbase))
    }

    /// Options for writing HBase through the one way in ([`weibo_etl::hbase::write`]), with
    /// the CLI's defaults (8 regions, 4 writers, 1 MiB batches, no compression, 6 attempts per
    /// batch); callers override what their flags set.
    pub fn write_options(&self, date: String, tables: Vec<Table>) -> WriteOptions {
        WriteOptions::new(
            date,
            self.global.namespace.clone(),
            tables,
            self.global.hbase.clone(),
            self.admin_addr(),
            self.timeouts,
        )
    }

    /// Writes the report if `--report` was given, and logs where.
    pub fn finish_report(&self, report: &Report, error: Option<&str>) -> Result<()> {
        if let Some(url) = &self.global.report {
            report.write(&self.fs, url, error)?;
            log::info!("report written to {url}");
        }
        Ok(())
    }
}

/// How a job's cells reach HBase: the options of `load` and of the graph jobs' `--load`.
#[derive(clap::Args, Debug)]
pub struct RouteArgs {
    /// How the cells reach HBase: thrift (batched puts through the gateway), hfile (HFiles
    /// written under --staging and handed to HBase with --bulkload-cmd), or auto (hfile from
    /// --auto-threshold rows with the staging on HDFS, else thrift)
    #[arg(long, value_enum, default_value = "thrift")]
    pub via: hbase_write::Via,
    /// The command that hands a folder of HFiles to a table, run as `<cmd> <dir> <ns:table>`
    /// (split on whitespace, no shell); on the local cluster: `weibo-etl cluster bulkload`
    #[arg(
        long,
        value_name = "CMD",
        default_value = hbase_write::DEFAULT_BULKLOAD_CMD,
        env = "WEIBO_ETL_BULKLOAD_CMD"
    )]
    pub bulkload_cmd: String,
    /// Where --via hfile writes its HFiles, on the HBase cluster's HDFS [default: _hfiles/
    /// under --input for load, under --output for the graph jobs]
    #[arg(long, value_name = "URL")]
    pub staging: Option<String>,
    /// Block compression of the HFiles of --via hfile: none, or zstd as HBase's own ZstdCodec
    /// frames it (the region servers must read ZSTD with that codec, not Hadoop's native one)
    #[arg(long, value_enum, default_value = "none")]
    pub hfile_compression: hbase_write::HfileCompression,
    /// The size from which --via auto bulk-loads: a night's cleaned rows for load, the
    /// input rows for the graph jobs (the default is where the bulk load overtakes Thrift on
    /// the local cluster; measure yours with benches/routes.py)
    #[arg(long, value_name = "ROWS", default_value_t = hbase_write::AUTO_HFILE_ROWS)]
    pub auto_threshold: u64,
}

impl RouteArgs {
    /// `options` with this route.
    pub fn apply(&self, options: WriteOptions) -> WriteOptions {
        WriteOptions {
            via: self.via,
            bulkload_cmd: self
                .bulkload_cmd
                .split_whitespace()
                .map(String::from)
                .collect(),
            staging: self.staging.clone(),
            hfile_compression: self.hfile_compression,
            auto_threshold: self.auto_threshold,
            ..options
        }
    }
}

/// The route a write took, as its summary line says it: `--via hfile`, or `--via auto:` and
/// why.
pub fn route_taken(w: &WriteReport) -> String {
    use clap::ValueEnum as _;
    match &w.auto {
        Some(choice) => format!("--via auto: {}", choice.because),
        None => w
            .via
            .to_possible_value()
            .map_or_else(String::new, |v| format!("--via {}", v.get_name())),
    }
}

/// Options of every job that writes Parquet.
#[derive(clap::Args, Debug)]
pub struct ParquetArgs {
    /// Parquet data page version of the output: 2 (faster to write; read by DuckDB,
    /// Arrow/pyarrow, Spark 3, Trino and this toolkit) or 1 (for older readers)
    #[arg(long, value_name = "1|2", default_value_t = weibo_etl::dataset::parquet_io::DATA_PAGE_VERSION,
          value_parser = clap::value_parser!(u8).range(1..=2))]
    pub data_page_version: u8,
}

/// A size like `512MiB` or `4G`, for `--memory-budget`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    s.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("{s:?} is not a size like 512MiB or 4G: {e}"))
}

/// `--date` values: a calendar date, `YYYY-MM-DD`.
pub fn parse_date(s: &str) -> Result<chrono::NaiveDate, String> {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .map_err(|e| format!("{s:?} is not YYYY-MM-DD: {e}"))
}

pub fn init_logging(global: &Global) {
    let level = if global.quiet {
        log::LevelFilter::Warn
    } else {
        match global.verbose {
            0 => log::LevelFilter::Info,
            1 => log::LevelFilter::Debug,
            _ => log::LevelFilter::Trace,
        }
    };
    weibo_etl::progress::set_quiet(global.quiet);
    env_logger::Builder::new()
        .filter_level(log::LevelFilter::Warn)
        .filter_module("weibo_etl", level)
        // hdfs-native logs every retry at WARN; the error we return already says what failed.
        .filter_module(
            "hdfs_native",
            if global.verbose > 0 {
                log::LevelFilter::Warn
            } else {
                log::LevelFilter::Error
            },
        )
        .format_target(false)
        // Stages of a job are often well under a second apart.
        .format_timestamp_millis()
        .parse_env("WEIBO_ETL_LOG")
        .init();
}

pub fn run(cli: Cli) -> Result<()> {
    let ctx = Context::new(cli.global);
    match cli.command {
        Command::Cascades(args) => cascades::run(&ctx, args),
        Command::Clean(args) => clean::run(&ctx, args),
        Command::Cluster(args) => cluster::run(&ctx, args),
        Command::Demo(args) => demo::run(&ctx, args),
        Command::Friends(args) => friends::run(&ctx, args),
        Command::Fs(args) => fs::run(&ctx, args),
        Command::Gen(args) => gen::run(&ctx, args),
        Command::History(args) => history::run(&ctx, args),
        Command::Inbox(args) => inbox::run(&ctx, args),
        Command::Load(args) => load::run(&ctx, args),
        Command::Query(args) => query::run(&ctx, args),
        Command::Rank(args) => rank::run(&ctx, args),
        Command::Run(args) => run::run(&ctx, args),
        Command::Tables(args) => tables::run(&ctx, args),
        Command::Verify(args) => verify::run(&ctx, args),
        Command::Yarn(args) => yarn::run(&ctx, args),
    }
}

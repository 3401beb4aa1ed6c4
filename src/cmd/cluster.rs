//! `weibo-etl cluster up|down|status|bulkload|compact|hfile|importtsv`: the local HDFS + HBase + Thrift
//! cluster, and the HBase tools a real cluster has on its `PATH`.

use anyhow::{Context as _, Result};
use weibo_etl::dev::cluster::{self, ClusterPaths, UpOptions};
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl cluster up          start it (first run downloads Maven artifacts: minutes)
  weibo-etl cluster up --yarn   with YARN too, for `weibo-etl yarn submit`
  weibo-etl cluster status      which of HDFS / Thrift1 / Thrift2 answer
  weibo-etl cluster down        stop it (SIGTERM, clean shutdown)
  weibo-etl cluster bulkload hdfs://127.0.0.1:9000/staging/user weibo:user
                                hand HFiles to HBase (as `hbase completebulkload`)
  weibo-etl cluster compact weibo:user
                                major-compact a table and wait for the end
  weibo-etl cluster hfile -- -m -p -f hdfs://127.0.0.1:9000/staging/user/info/part-0
                                print an HFile (as `hbase hfile`)
  weibo-etl cluster importtsv -- -Dimporttsv.columns=HBASE_ROW_KEY,info:name \
      -Dimporttsv.bulk.output=hdfs://127.0.0.1:9000/out ns:t file:///data/users.tsv
                                HBase's ImportTsv, locally (as `hbase importtsv`)

It listens on hdfs://127.0.0.1:9000 (NameNode), 127.0.0.1:9090 (HBase Thrift1) and
127.0.0.1:9091 (HBase Thrift2), and 127.0.0.1:9092 (its control port: bulk loads and
compactions, and the streaming jobs of `yarn submit`). Logs, pid file and data live in
target/local-cluster/.";

/// Start, stop or inspect the local cluster: a real HDFS (MiniDFSCluster), HBase (mini
/// cluster, root dir on that HDFS) and the HBase Thrift1 + Thrift2 gateways in one JVM,
/// built from Maven artifacts by the project in cluster/.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Start the cluster in the background and wait until HDFS, HBase and Thrift answer
    Up {
        /// Give up waiting for READY after this many seconds
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// Also start YARN (a MiniMRYarnCluster: ResourceManager, one NodeManager, MapReduce)
        /// in the same JVM, on the same HDFS, for `weibo-etl yarn submit`; added to a running
        /// cluster too
        #[arg(long)]
        yarn: bool,
    },
    /// Stop the cluster started by `up`
    Down,
    /// Show which services answer; exits 1 if not all do
    Status,
    /// Hand a folder of HFiles (<dir>/<family>/<file>) to a table: HBase's bulk load
    /// (what `hbase completebulkload <dir> <table>` runs on a real cluster), run inside the
    /// cluster's JVM
    Bulkload {
        /// The folder, on the cluster's HDFS
        dir: String,
        /// The table, namespace:name
        table: String,
    },
    /// Major-compact a table and wait until the compaction is over
    Compact {
        /// The table, namespace:name
        table: String,
    },
    /// Run HBase's HFilePrettyPrinter (`hbase hfile`) with these arguments
    Hfile {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run HBase's ImportTsv (`hbase importtsv`) with these arguments, as a MapReduce job in
    /// Hadoop's local job runner (the bulk-load peer of the benchmarks)
    Importtsv {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let paths = ClusterPaths::discover();
    let mut report = Report::new("cluster");
    match args.action {
        Action::Up { timeout, yarn } => {
            let options = UpOptions {
                ready_timeout: std::time::Duration::from_secs(timeout),
                yarn,
                ..UpOptions::default()
            };
            let outcome = cluster::up(&paths, &options).context("starting the local cluster")?;
            if outcome.already_running {
                println!("cluster already running (hdfs://127.0.0.1:9000, thrift 127.0.0.1:9090, thrift2 127.0.0.1:9091)");
            } else {
                println!(
                    "cluster up in {:.1}s: hdfs://127.0.0.1:9000, thrift 127.0.0.1:9090, thrift2 127.0.0.1:9091 (pid {}, log {})",
                    outcome.seconds,
                    outcome.pid.unwrap_or_default(),
                    paths.log_file().display()
                );
            }
            if let Some(rm) = &outcome.yarn {
                println!("yarn up: ResourceManager at {rm}");
            }
            report.set("up", &outcome);
        }
        Action::Bulkload { dir, table } => {
            let files = cluster::bulk_load(&dir, &table)?;
            println!("bulk load: {files} files into {table}");
            return Ok(());
        }
        Action::Compact { table } => {
            cluster::major_compact(&table)?;
            println!("{table} major-compacted");
            return Ok(());
        }
        Action::Hfile { args } => {
            return pass_through(&paths, cluster::HFILE_TOOL, &args);
        }
        Action::Importtsv { args } => {
            return pass_through(&paths, cluster::IMPORTTSV_TOOL, &args);
        }
        Action::Down => {
            if cluster::down(&paths)? {
                println!("cluster stopped");
            } else {
                println!(
                    "no cluster was running (no live pid in {})",
                    paths.pid_file().display()
                );
            }
        }
        Action::Status => {
            let status = cluster::status(&paths);
            let word = |up: bool| if up { "up" } else { "down" };
            println!("hdfs    127.0.0.1:9000  {}", word(status.hdfs));
            println!("thrift  127.0.0.1:9090  {}", word(status.thrift));
            println!("thrift2 127.0.0.1:9091  {}", word(status.thrift2));
            match status.pid {
                Some(pid) => println!("pid     {pid}"),
                None => println!("pid     - (not started by `cluster up`, or not running)"),
            }
            report.set("status", &status);
            ctx.finish_report(&report, None)?;
            if !status.all_up() {
                anyhow::bail!("the local cluster is not fully up");
            }
            return Ok(());
        }
    }
    ctx.finish_report(&report, None)
}

/// Runs an HBase tool, passing its output through; its exit status becomes ours.
fn pass_through(paths: &ClusterPaths, class: &str, args: &[String]) -> Result<()> {
    use std::io::Write as _;
    let out = cluster::run_tool(paths, class, args)?;
    std::io::stdout().write_all(&out.stdout)?;
    std::io::stderr().write_all(&out.stderr)?;
    if !out.status.success() {
        anyhow::bail!("{class} failed ({})", out.status);
    }
    Ok(())
}

//! `weibo-etl tables list|regions|create|drop`: inspect, create and drop HBase tables
//! through Thrift.

use anyhow::{Context as _, Result};
use weibo_etl::hbase::admin::{Admin, Compression, FamilySpec, TableSpec};
use weibo_etl::hbase::layout::keys;
use weibo_etl::hbase::Connection;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl tables list
  weibo-etl tables regions weibo:user
  weibo-etl tables create scratch --family info --family count --regions 8
  weibo-etl tables drop scratch bench:user      disable and delete (HBase archives the files)";

/// Inspect HBase tables through the Thrift gateway, create pre-split ones, and drop them.
///
/// Tables are pre-split over the 2-byte hashed rowkey prefix: N regions get N-1 split keys
/// at floor(i * 65536 / N), created through the Thrift2 gateway (Thrift1 createTable takes no
/// split keys).
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// List all tables
    List,
    /// List a table's regions (start key, end key, server), as Thrift's getTableRegions has them
    Regions {
        /// namespace:table (a bare name takes --namespace)
        table: String,
    },
    /// Create a table in --namespace, pre-split over the hash prefix
    Create {
        name: String,
        /// Column family (repeatable)
        #[arg(long = "family", required = true)]
        families: Vec<String>,
        /// Regions to pre-split into
        #[arg(long, default_value_t = weibo_etl::hbase::write::WriteOptions::REGIONS, value_parser = clap::value_parser!(u32).range(1..=65536))]
        regions: u32,
        /// Versions kept per cell
        #[arg(long, default_value_t = 1)]
        versions: i32,
        /// Block compression
        #[arg(long, value_enum, default_value = "none")]
        compression: Compression,
    },
    /// Disable and delete tables; one that does not exist is reported and skipped
    Drop {
        /// namespace:table (a bare name takes --namespace)
        #[arg(required = true)]
        tables: Vec<String>,
    },
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    match args.action {
        Action::List => {
            let mut conn = Connection::connect(&ctx.global.hbase, ctx.timeouts)?;
            for name in conn.table_names()? {
                println!("{name}");
            }
        }
        Action::Regions { table } => {
            let table = qualified(ctx, &table);
            let mut conn = Connection::connect(&ctx.global.hbase, ctx.timeouts)?;
            let regions = conn.regions(&table)?;
            for r in &regions {
                println!(
                    "{:<12} {:<12} {}",
                    hex_or_dash(&r.start_key),
                    hex_or_dash(&r.end_key),
                    r.server
                );
            }
            println!("{} regions", regions.len());
        }
        Action::Create {
            name,
            families,
            regions,
            versions,
            compression,
        } => {
            let spec = TableSpec {
                namespace: ctx.global.namespace.clone(),
                name,
                families: families
                    .iter()
                    .map(|f| {
                        FamilySpec::new(f)
                            .versions(versions)
                            .compression(compression)
                    })
                    .collect(),
            };
            let addr = ctx.admin_addr();
            let mut admin = Admin::connect(&addr, ctx.timeouts)?;
            admin.ensure_namespace(&spec.namespace)?;
            admin
                .create_table(&spec, &keys::split_points(regions))
                .with_context(|| format!("creating {}", spec.full_name()))?;
            println!("created {} with {regions} regions", spec.full_name());
        }
        Action::Drop { tables } => {
            let mut admin = Admin::connect(&ctx.admin_addr(), ctx.timeouts)?;
            for table in tables {
                let full = qualified(ctx, &table);
                let (namespace, name) = full.split_once(':').expect("qualified");
                let dropped = admin
                    .drop_table(namespace, name)
                    .with_context(|| format!("dropping {full}"))?;
                if dropped {
                    println!("dropped {full}");
                } else {
                    println!("{full} does not exist");
                }
            }
        }
    }
    Ok(())
}

/// `namespace:table`, a bare name taking --namespace.
fn qualified(ctx: &Context, table: &str) -> String {
    if table.contains(':') {
        table.to_string()
    } else {
        format!("{}:{table}", ctx.global.namespace)
    }
}

fn hex_or_dash(key: &[u8]) -> String {
    if key.is_empty() {
        "-".into()
    } else {
        key.iter().map(|b| format!("{b:02x}")).collect()
    }
}

//! `weibo-etl query`: point reads of the loaded tables, printed as JSON with their latency.

use anyhow::Result;
use weibo_etl::graph::rank::Metric;
use weibo_etl::query::{self, Query};

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl query user 1669879400
  weibo-etl query followees 5872301234
  weibo-etl query fans 1669879400
  weibo-etl query timeline 1669879400 --limit 20
  weibo-etl query post 4973000000000001
  weibo-etl query friends 1669879400
  weibo-etl query feed 5872301234 --limit 20
  weibo-etl query name 何炅
  weibo-etl query rank followers --date 2026-11-29 --limit 10

`query name` and `query rank` exit with 7 when they find nothing.";

/// Read users, relations, timelines and posts back from HBase; prints JSON and the latency
/// of each Thrift call.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    what: Read,
}

#[derive(clap::Subcommand, Debug)]
enum Read {
    /// A user's profile and counters
    User { uid: i64 },
    /// Whom a user follows
    Followees {
        uid: i64,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Who follows a user
    Fans {
        uid: i64,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// A user's posts, newest first
    Timeline {
        uid: i64,
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// A post by id
    Post { mid: i64 },
    /// A user's friends (mutual follows), from the friend table
    Friends {
        uid: i64,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// A user's home feed: the inbox row merged with the timelines of the celebrities followed
    Feed {
        /// The user whose home feed to read
        uid: i64,
        /// Posts shown, newest first
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// A user by screen name, through the user_by_name index
    Name { screen_name: String },
    /// A day's leaderboard of a metric, from the rank table
    Rank {
        /// The board to read
        metric: Metric,
        /// The day [default: the newest day loaded for the metric]
        #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
        date: Option<chrono::NaiveDate>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let query = match args.what {
        Read::User { uid } => Query::User { uid },
        Read::Followees { uid, limit } => Query::Followees { uid, limit },
        Read::Fans { uid, limit } => Query::Fans { uid, limit },
        Read::Timeline { uid, limit } => Query::Timeline { uid, limit },
        Read::Post { mid } => Query::Post { mid },
        Read::Friends { uid, limit } => Query::Friends { uid, limit },
        Read::Feed { uid, limit } => Query::Feed { uid, limit },
        Read::Name { screen_name } => Query::Name { screen_name },
        Read::Rank {
            metric,
            date,
            limit,
        } => Query::Rank {
            metric: metric.name().to_string(),
            date: date.map(|d| d.format("%Y-%m-%d").to_string()),
            limit,
        },
    };
    let answer = query::run(
        &ctx.global.hbase,
        &ctx.admin_addr(),
        ctx.timeouts,
        &ctx.global.namespace,
        query,
    )?;
    println!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(())
}

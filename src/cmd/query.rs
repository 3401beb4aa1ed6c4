//! `weibo-etl query`: point reads of the loaded tables, printed as JSON with their latency.

use std::time::Instant;

use anyhow::Result;
use serde_json::{json, Map, Value};
use weibo_etl::error::Error;
use weibo_etl::graph::inbox::{newest_first, Entry};
use weibo_etl::graph::rank::Metric;
use weibo_etl::hbase::layout::{self, cell, keys, Kind, Table};
use weibo_etl::hbase::{Connection, Row};

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
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
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

/// A row as JSON: numbers decoded, text as text, anything else as hex.
pub fn row_json(row: &Row) -> Value {
    let mut cells = Map::new();
    for (name, cell) in &row.cells {
        let column = String::from_utf8_lossy(name).into_owned();
        let v = &cell.value;
        let hex = || json!(v.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let value = match layout::kind(&column) {
            Kind::Number if v.len() == 8 => {
                json!(i64::from_be_bytes(v[..8].try_into().expect("8 bytes")))
            }
            Kind::Rowkey => hex(),
            _ => std::str::from_utf8(v).map_or_else(|_| hex(), |text| json!(text)),
        };
        cells.insert(column, value);
    }
    json!({
        "rowkey": row.key.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "cells": cells,
    })
}

/// Runs one call against the connection and records its latency.
type Timed<'a> = dyn FnMut(&str, &mut dyn FnMut(&mut Connection) -> weibo_etl::Result<Value>) -> Result<Value>
    + 'a;

/// A candidate of the feed, and where it came from.
struct Candidate {
    entry: Entry,
    key: Vec<u8>,
    via: &'static str,
}

/// `query feed`: the inbox row (every version, one Thrift2 call) gives the fanned-out
/// followees' newest K posts and the celebrities followed; each celebrity's newest K are read
/// from its timeline; the merge is newest first (docs/design/inbox.md). Posts deleted after
/// they reached the inbox are dropped when their rows are read.
fn feed(ctx: &Context, uid: i64, limit: usize, timed: &mut Timed<'_>) -> Result<Value> {
    let ns = &ctx.global.namespace;
    let inbox = Table::Inbox.in_namespace(ns);
    let posts = Table::Post.in_namespace(ns);
    let k = timed("getColumnDescriptors inbox", &mut |c| {
        let versions = c.family_versions(&inbox)?;
        Ok(json!(versions.get(layout::INBOX_FAMILY)))
    })?;
    let Some(k) = k.as_i64().filter(|&k| k > 0) else {
        return Err(
            Error::NotFound(format!("{inbox} has no {} family", layout::INBOX_FAMILY)).into(),
        );
    };
    let mut admin = weibo_etl::hbase::admin::Admin::connect(&ctx.admin_addr(), ctx.timeouts)?;
    let mut cells = Vec::new();
    timed("get inbox (Thrift2, every version)", &mut |_| {
        cells = admin.get_versions(&inbox, &keys::user_key(uid), k as i32)?;
        Ok(Value::Null)
    })?;
    let fanned = format!("{}:", layout::INBOX_FAMILY).into_bytes();
    let celebrity = format!("{}:", layout::CELEBRITY_FAMILY).into_bytes();
    let mut candidates = Vec::new();
    let mut celebrities = Vec::new();
    for (column, _, value) in &cells {
        if column.starts_with(&fanned) {
            if let Some((author, created, mid)) = keys::post_key_parts(value) {
                candidates.push(Candidate {
                    entry: Entry {
                        created,
                        mid,
                        author,
                    },
                    key: value.clone(),
                    via: "inbox",
                });
            }
        } else if let Some(id) = column.strip_prefix(celebrity.as_slice()) {
            if let Ok(id) = <[u8; 8]>::try_from(id) {
                celebrities.push(i64::from_be_bytes(id));
            }
        }
    }
    // An author that became a celebrity after earlier nights fanned it out is read from its
    // timeline only.
    candidates.retain(|c| !celebrities.contains(&c.entry.author));
    for &author in &celebrities {
        let mut newest = Vec::new();
        timed(&format!("scan post {author}"), &mut |c| {
            c.scan_with(&posts, &keys::user_key(author), |row| {
                if row.get(cell::DELETED) != Some(b"1".as_slice()) {
                    newest.push(row.key);
                }
                (newest.len() as i64) < k
            })?;
            Ok(Value::Null)
        })?;
        for key in newest {
            if let Some((author, created, mid)) = keys::post_key_parts(&key) {
                candidates.push(Candidate {
                    entry: Entry {
                        created,
                        mid,
                        author,
                    },
                    key,
                    via: "timeline",
                });
            }
        }
    }
    candidates.sort_by(|a, b| newest_first(&a.entry, &b.entry));
    candidates.dedup_by_key(|c| c.entry.mid);
    // Read the posts in the feed's order, a limit's worth a call, until `limit` are shown.
    let mut shown = Vec::new();
    for chunk in candidates.chunks(limit.max(1)) {
        if shown.len() >= limit {
            break;
        }
        let wanted: Vec<Vec<u8>> = chunk.iter().map(|c| c.key.clone()).collect();
        let mut rows = Vec::new();
        timed("getRows post", &mut |c| {
            rows = c.get_rows(&posts, &wanted)?;
            Ok(Value::Null)
        })?;
        let by_key: std::collections::HashMap<&[u8], &Row> =
            rows.iter().map(|r| (r.key.as_slice(), r)).collect();
        for c in chunk {
            let row = by_key.get(c.key.as_slice());
            if row.is_some_and(|r| r.get(cell::DELETED) == Some(b"1".as_slice())) {
                continue;
            }
            if shown.len() < limit {
                let text = row
                    .and_then(|r| r.get(cell::TEXT))
                    .map(String::from_utf8_lossy);
                shown.push(json!({
                    "mid": c.entry.mid,
                    "uid": c.entry.author,
                    "created_at": c.entry.created,
                    "via": c.via,
                    "text": text,
                }));
            }
        }
    }
    Ok(json!({"uid": uid, "k": k, "celebrities": celebrities, "feed": shown}))
}

/// An 8-byte big-endian number cell.
fn number(v: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(v.try_into().ok()?))
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let ns = &ctx.global.namespace;
    let mut conn = Connection::connect(&ctx.global.hbase, ctx.timeouts)?;
    let mut calls = Vec::new();
    let mut timed = |name: &str,
                     f: &mut dyn FnMut(&mut Connection) -> weibo_etl::Result<Value>|
     -> Result<Value> {
        let t = Instant::now();
        let v = f(&mut conn)?;
        calls.push(json!({"call": name, "ms": (t.elapsed().as_secs_f64() * 1e6).round() / 1e3}));
        Ok(v)
    };
    let result = match args.what {
        What::User { uid } => timed("getRow user", &mut |c| {
            Ok(c.get(&Table::User.in_namespace(ns), &keys::user_key(uid))?
                .map_or(Value::Null, |r| row_json(&r)))
        })?,
        What::Followees { uid, limit }
        | What::Fans { uid, limit }
        | What::Friends { uid, limit } => {
            let table = match args.what {
                What::Followees { .. } => Table::Follow,
                What::Fans { .. } => Table::Fans,
                _ => Table::Friend,
            };
            timed(&format!("scan {}", table.name()), &mut |c| {
                let rows = c.scan_prefix(&table.in_namespace(ns), &keys::user_key(uid), limit)?;
                Ok(json!(rows
                    .iter()
                    .map(|r| keys::other_uid(&r.key))
                    .collect::<Vec<_>>()))
            })?
        }
        What::Timeline { uid, limit } => timed("scan post", &mut |c| {
            let rows = c.scan_prefix(&Table::Post.in_namespace(ns), &keys::user_key(uid), limit)?;
            Ok(json!(rows
                .iter()
                .map(|r| {
                    let mut v = row_json(r);
                    v["mid"] = json!(keys::post_key_mid(&r.key));
                    v
                })
                .collect::<Vec<_>>()))
        })?,
        What::Post { mid } => {
            // The index cell holds the post's rowkey, used as it is for the second call.
            let mut key = None;
            timed("getRow post_by_mid", &mut |c| {
                key = c
                    .get(
                        &Table::PostByMid.in_namespace(ns),
                        &keys::post_by_mid_key(mid),
                    )?
                    .and_then(|r| r.get(cell::POST).map(<[u8]>::to_vec));
                Ok(Value::Null)
            })?;
            match key {
                None => Value::Null,
                Some(key) => timed("getRow post", &mut |c| {
                    Ok(c.get(&Table::Post.in_namespace(ns), &key)?
                        .map_or(Value::Null, |r| row_json(&r)))
                })?,
            }
        }
        What::Feed { uid, limit } => feed(ctx, uid, limit, &mut timed)?,
        What::Name { ref screen_name } => {
            let row = timed("getRow user_by_name", &mut |c| {
                Ok(c.get(
                    &Table::UserByName.in_namespace(ns),
                    &keys::user_by_name_key(screen_name),
                )?
                .and_then(|r| r.get(cell::UID).and_then(number))
                .map_or(Value::Null, |uid| json!(uid)))
            })?;
            let Some(uid) = row.as_i64() else {
                return Err(Error::NotFound(format!(
                    "no user named {screen_name:?} in {}",
                    Table::UserByName.in_namespace(ns)
                ))
                .into());
            };
            let user = timed("getRow user", &mut |c| {
                Ok(c.get(&Table::User.in_namespace(ns), &keys::user_key(uid))?
                    .map_or(Value::Null, |r| row_json(&r)))
            })?;
            json!({"uid": uid, "user": user})
        }
        What::Rank {
            metric,
            date,
            limit,
        } => {
            let table = Table::Rank.in_namespace(ns);
            let date = match date {
                Some(d) => d.format("%Y-%m-%d").to_string(),
                None => {
                    let prefix = keys::rank_prefix(metric.name(), "");
                    let last = timed("reversed scan rank", &mut |c| {
                        Ok(c.last_with_prefix(&table, prefix.as_bytes())?
                            .and_then(|r| keys::rank_key_parts(&r.key))
                            .map_or(Value::Null, |(d, _)| json!(d)))
                    })?;
                    match last.as_str() {
                        Some(d) => d.to_string(),
                        None => {
                            return Err(
                                Error::NotFound(format!("no {metric} board in {table}")).into()
                            )
                        }
                    }
                }
            };
            let prefix = keys::rank_prefix(metric.name(), &date);
            let board = timed("scan rank", &mut |c| {
                let rows = c.scan_prefix(&table, prefix.as_bytes(), limit)?;
                // A board is as long as its own r:of: rows past it are left from a longer
                // board of an earlier run of the day.
                let of = rows
                    .first()
                    .and_then(|r| r.get(cell::RANK_OF).and_then(number))
                    .unwrap_or(0);
                Ok(json!(rows
                    .iter()
                    .filter_map(|r| {
                        let (_, rank) = keys::rank_key_parts(&r.key)?;
                        (i64::from(rank) <= of).then(|| {
                            json!({
                                "rank": rank,
                                "id": r.get(cell::RANK_ID).and_then(number),
                                "value": r.get(cell::RANK_VALUE).and_then(number),
                            })
                        })
                    })
                    .collect::<Vec<_>>()))
            })?;
            if board.as_array().is_none_or(Vec::is_empty) {
                return Err(
                    Error::NotFound(format!("no {metric} board of {date} in {table}")).into(),
                );
            }
            json!({"metric": metric.name(), "date": date, "board": board})
        }
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"result": result, "calls": calls}))?
    );
    Ok(())
}

//! `weibo-etl query`: point reads of the loaded tables, printed as JSON with their latency.

use std::time::Instant;

use anyhow::Result;
use serde_json::{json, Map, Value};
use weibo_etl::hbase::{Connection, Row};
use weibo_etl::keys;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl query user 1669879400
  weibo-etl query followees 5872301234
  weibo-etl query fans 1669879400
  weibo-etl query timeline 1669879400 --limit 20
  weibo-etl query post 4973000000000001";

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
}

/// Columns holding 8-byte big-endian numbers; everything else is UTF-8 text.
fn is_number(column: &str) -> bool {
    column.starts_with("count:")
        || matches!(
            column,
            "info:created_at"
                | "info:retweet_mid"
                | "info:verified_type"
                | "r:uid"
                | "r:followed_at"
                | "r:repost_from"
                | "r:mid"
                | "r:by"
        )
}

/// A row as JSON: numbers decoded, text as text, anything else as hex.
pub fn row_json(row: &Row) -> Value {
    let mut cells = Map::new();
    for (name, cell) in &row.cells {
        let column = String::from_utf8_lossy(name).into_owned();
        let v = &cell.value;
        let value = if is_number(&column) && v.len() == 8 {
            json!(i64::from_be_bytes(v[..8].try_into().expect("8 bytes")))
        } else if let Some(text) = std::str::from_utf8(v).ok().filter(|_| column != "r:post") {
            json!(text)
        } else {
            json!(v.iter().map(|b| format!("{b:02x}")).collect::<String>())
        };
        cells.insert(column, value);
    }
    json!({
        "rowkey": row.key.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "cells": cells,
    })
}

fn id_at(key: &[u8], offset: usize) -> i64 {
    key.get(offset..offset + 8)
        .map_or(0, |b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
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
            Ok(c.get(&format!("{ns}:user"), &keys::user_key(uid))?
                .map_or(Value::Null, |r| row_json(&r)))
        })?,
        What::Followees { uid, limit } | What::Fans { uid, limit } => {
            let table = if matches!(args.what, What::Followees { .. }) {
                "follow"
            } else {
                "fans"
            };
            timed(&format!("scan {table}"), &mut |c| {
                let rows = c.scan_prefix(&format!("{ns}:{table}"), &keys::user_key(uid), limit)?;
                Ok(json!(rows
                    .iter()
                    .map(|r| id_at(&r.key, 10))
                    .collect::<Vec<_>>()))
            })?
        }
        What::Timeline { uid, limit } => timed("scan post", &mut |c| {
            let rows = c.scan_prefix(&format!("{ns}:post"), &keys::user_key(uid), limit)?;
            Ok(json!(rows
                .iter()
                .map(|r| {
                    let mut v = row_json(r);
                    v["mid"] = json!(id_at(&r.key, 18));
                    v
                })
                .collect::<Vec<_>>()))
        })?,
        What::Post { mid } => {
            // The index cell holds the post's rowkey, used as it is for the second call.
            let mut key = None;
            timed("getRow post_by_mid", &mut |c| {
                key = c
                    .get(&format!("{ns}:post_by_mid"), &keys::post_by_mid_key(mid))?
                    .and_then(|r| r.get("r:post").map(<[u8]>::to_vec));
                Ok(Value::Null)
            })?;
            match key {
                None => Value::Null,
                Some(key) => timed("getRow post", &mut |c| {
                    Ok(c.get(&format!("{ns}:post"), &key)?
                        .map_or(Value::Null, |r| row_json(&r)))
                })?,
            }
        }
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"result": result, "calls": calls}))?
    );
    Ok(())
}

//! `weibo-etl query`: point reads of the loaded tables, printed as JSON with their latency.

use std::time::Instant;

use anyhow::Result;
use serde_json::{json, Map, Value};
use weibo_etl::hbase::{Connection, Row};
use weibo_etl::load::layout::{self, cell, keys, Kind, Table};

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
        What::Followees { uid, limit } | What::Fans { uid, limit } => {
            let table = if matches!(args.what, What::Followees { .. }) {
                Table::Follow
            } else {
                Table::Fans
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
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({"result": result, "calls": calls}))?
    );
    Ok(())
}

//! Point reads of the loaded tables (`weibo-etl query`), each answer as JSON with the
//! latency of every Thrift call it took. The rowkeys and cells are the table contract's
//! ([`crate::hbase::layout`]); the home feed is the inbox's own read path
//! ([`crate::graph::inbox::read`]).
//!
//! Invariant: a read that finds nothing where the caller asked for one thing by name (a
//! screen name, a board) is [`Error::NotFound`] (exit 7), never an empty answer.

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::hbase::layout::{self, cell, keys, Kind, Table};
use crate::hbase::reads::Reads;
use crate::hbase::{Row, Timeouts};

/// What to read.
#[derive(Clone, Debug)]
pub enum Query {
    /// A user's profile and counters.
    User { uid: i64 },
    /// Whom a user follows.
    Followees { uid: i64, limit: usize },
    /// Who follows a user.
    Fans { uid: i64, limit: usize },
    /// A user's posts, newest first.
    Timeline { uid: i64, limit: usize },
    /// A post by id.
    Post { mid: i64 },
    /// A user's friends (mutual follows), from the friend table.
    Friends { uid: i64, limit: usize },
    /// A user's home feed.
    Feed { uid: i64, limit: usize },
    /// A user by screen name, through the user_by_name index.
    Name { screen_name: String },
    /// A day's leaderboard of a metric (its name), the newest day loaded when `date` is
    /// `None`.
    Rank {
        metric: String,
        date: Option<String>,
        limit: usize,
    },
}

/// Answers `query` from the tables of `namespace` through the Thrift1 gateway `thrift` (and
/// Thrift2 `admin` for the feed's versions): `{"result": …, "calls": [{"call", "ms"}…]}`.
pub fn run(
    thrift: &str,
    admin: &str,
    timeouts: Timeouts,
    namespace: &str,
    query: Query,
) -> Result<Value> {
    let ns = namespace;
    let mut reads = Reads::connect(thrift, timeouts, namespace)?;
    let result = match query {
        Query::User { uid } => reads.timed("getRow user", &mut |c| {
            Ok(c.get(&Table::User.in_namespace(ns), &keys::user_key(uid))?
                .map_or(Value::Null, |r| row_json(&r)))
        })?,
        Query::Followees { uid, limit }
        | Query::Fans { uid, limit }
        | Query::Friends { uid, limit } => {
            let table = match query {
                Query::Followees { .. } => Table::Follow,
                Query::Fans { .. } => Table::Fans,
                _ => Table::Friend,
            };
            reads.timed(&format!("scan {}", table.name()), &mut |c| {
                let rows = c.scan_prefix(&table.in_namespace(ns), &keys::user_key(uid), limit)?;
                Ok(json!(rows
                    .iter()
                    .map(|r| keys::other_uid(&r.key))
                    .collect::<Vec<_>>()))
            })?
        }
        Query::Timeline { uid, limit } => reads.timed("scan post", &mut |c| {
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
        Query::Post { mid } => {
            // The index cell holds the post's rowkey, used as it is for the second call.
            let mut key = None;
            reads.timed("getRow post_by_mid", &mut |c| {
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
                Some(key) => reads.timed("getRow post", &mut |c| {
                    Ok(c.get(&Table::Post.in_namespace(ns), &key)?
                        .map_or(Value::Null, |r| row_json(&r)))
                })?,
            }
        }
        Query::Feed { uid, limit } => {
            crate::graph::inbox::read::feed(&mut reads, admin, uid, limit)?
        }
        Query::Name { screen_name } => {
            let row = reads.timed("getRow user_by_name", &mut |c| {
                Ok(c.get(
                    &Table::UserByName.in_namespace(ns),
                    &keys::user_by_name_key(&screen_name),
                )?
                .and_then(|r| r.get(cell::UID).and_then(number))
                .map_or(Value::Null, |uid| json!(uid)))
            })?;
            let Some(uid) = row.as_i64() else {
                return Err(Error::NotFound(format!(
                    "no user named {screen_name:?} in {}",
                    Table::UserByName.in_namespace(ns)
                )));
            };
            let user = reads.timed("getRow user", &mut |c| {
                Ok(c.get(&Table::User.in_namespace(ns), &keys::user_key(uid))?
                    .map_or(Value::Null, |r| row_json(&r)))
            })?;
            json!({"uid": uid, "user": user})
        }
        Query::Rank {
            metric,
            date,
            limit,
        } => {
            let table = Table::Rank.in_namespace(ns);
            let date = match date {
                Some(d) => d,
                None => {
                    let prefix = keys::rank_prefix(&metric, "");
                    let last = reads.timed("reversed scan rank", &mut |c| {
                        Ok(c.last_with_prefix(&table, prefix.as_bytes())?
                            .and_then(|r| keys::rank_key_parts(&r.key))
                            .map_or(Value::Null, |(d, _)| json!(d)))
                    })?;
                    match last.as_str() {
                        Some(d) => d.to_string(),
                        None => {
                            return Err(Error::NotFound(format!("no {metric} board in {table}")))
                        }
                    }
                }
            };
            let prefix = keys::rank_prefix(&metric, &date);
            let board = reads.timed("scan rank", &mut |c| {
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
                return Err(Error::NotFound(format!(
                    "no {metric} board of {date} in {table}"
                )));
            }
            json!({"metric": metric, "date": date, "board": board})
        }
    };
    Ok(json!({"result": result, "calls": reads.into_calls()}))
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

/// An 8-byte big-endian number cell.
fn number(v: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(v.try_into().ok()?))
}

//! The inbox's read path (`query feed`): a user's home feed, the inbox row's fanned-out
//! posts merged with the timelines of the celebrities followed, newest first in the order the
//! job wrote them ([`super::feed`]; docs/design/inbox.md).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::feed::{newest_first, Entry};
use crate::error::{Error, Result};
use crate::hbase::admin::Admin;
use crate::hbase::layout::{self, cell, keys, Table};
use crate::hbase::reads::Reads;
use crate::hbase::Row;

/// A candidate of the feed, and where it came from.
struct Candidate {
    entry: Entry,
    key: Vec<u8>,
    via: &'static str,
}

/// A user's home feed (`query feed`): the inbox row (every version, one Thrift2 call) gives the fanned-out
/// followees' newest K posts and the celebrities followed; each celebrity's newest K are read
/// from its timeline; the merge is newest first (docs/design/inbox.md). Posts deleted after
/// they reached the inbox are dropped when their rows are read.
pub fn feed(reads: &mut Reads<'_>, admin: &str, uid: i64, limit: usize) -> Result<Value> {
    let ns = reads.namespace().to_string();
    let ns = &ns;
    let inbox = Table::Inbox.in_namespace(ns);
    let posts = Table::Post.in_namespace(ns);
    let k = reads.timed("getColumnDescriptors inbox", &mut |c| {
        let versions = c.family_versions(&inbox)?;
        Ok(json!(versions.get(layout::INBOX_FAMILY)))
    })?;
    let Some(k) = k.as_i64().filter(|&k| k > 0) else {
        return Err(Error::NotFound(format!(
            "{inbox} has no {} family",
            layout::INBOX_FAMILY
        )));
    };
    let mut admin = Admin::connect(admin, reads.timeouts())?;
    let mut cells = Vec::new();
    reads.timed("get inbox (Thrift2, every version)", &mut |_| {
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
        reads.timed(&format!("scan post {author}"), &mut |c| {
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
        reads.timed("getRows post", &mut |c| {
            rows = c.get_rows(&posts, &wanted)?;
            Ok(Value::Null)
        })?;
        let by_key: HashMap<&[u8], &Row> = rows.iter().map(|r| (r.key.as_slice(), r)).collect();
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

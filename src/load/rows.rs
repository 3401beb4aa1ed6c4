//! Cleaned rows → the puts of `user` and `post` rows, and the small column readers they use.
//! The cells are those of docs/hbase-layout.md: a column that is null in the Parquet writes
//! no cell but a delete marker at the night's timestamp, so an older night's value does not
//! outlive the newer record that lacks it, and a rerun writes exactly what the first run
//! wrote.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::TimestampMillisecondType;

use crate::dataset::{columns, parquet_io};
use crate::error::Result;
use crate::hbase::layout::{be, cell, keys};
use crate::hbase::Put;
use crate::hdfs::{FileEntry, FileSystems};

pub(super) fn ts_col<'a>(
    b: &'a RecordBatch,
    name: &str,
) -> Option<&'a arrow::array::TimestampMillisecondArray> {
    b.column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<TimestampMillisecondType>())
}

pub(super) fn str_val(b: &RecordBatch, name: &str, i: usize) -> Option<String> {
    let c = b.column_by_name(name)?;
    let s = c.as_string_opt::<i32>()?;
    (!s.is_null(i)).then(|| s.value(i).to_string())
}

pub(super) fn list_val(b: &RecordBatch, name: &str, i: usize) -> Vec<String> {
    let Some(c) = b.column_by_name(name) else {
        return Vec::new();
    };
    let Some(list) = c.as_list_opt::<i32>() else {
        return Vec::new();
    };
    if list.is_null(i) {
        return Vec::new();
    }
    let values = list.value(i);
    let strings = values.as_string::<i32>();
    (0..strings.len())
        .filter(|&j| !strings.is_null(j))
        .map(|j| strings.value(j).to_string())
        .collect()
}

pub(super) fn bool_val(b: &RecordBatch, name: &str, i: usize) -> Option<bool> {
    let c = b.column_by_name(name)?.as_boolean_opt()?;
    (!c.is_null(i)).then(|| c.value(i))
}

/// The `user` row of cleaned user row `i`: profile cells and the crawler's reported counts.
pub(super) fn user_profile_put(b: &RecordBatch, i: usize, uid: i64) -> Put {
    let mut p = Put::new(keys::user_key(uid));
    for (col, q) in [
        ("screen_name", cell::SCREEN_NAME),
        ("gender", cell::GENDER),
        ("province", cell::PROVINCE),
        ("city", cell::CITY),
        ("location", cell::LOCATION),
        ("description", cell::DESCRIPTION),
    ] {
        p = or_delete(p, q, str_val(b, col, i));
    }
    let verified = bool_val(b, "verified", i).map(|v| if v { "1" } else { "0" });
    p = or_delete(p, cell::VERIFIED, verified);
    let verified_type = columns::opt(columns::opt_ids(b, "verified_type"), i);
    p = or_delete(p, cell::VERIFIED_TYPE, verified_type.map(be));
    let created = ts_col(b, "created_at").filter(|a| !a.is_null(i));
    p = or_delete(p, cell::CREATED_AT, created.map(|a| be(a.value(i))));
    for (col, q) in [
        ("followers_count", cell::REPORTED_FOLLOWERS),
        ("follow_count", cell::REPORTED_FOLLOWING),
        ("statuses_count", cell::REPORTED_POSTS),
    ] {
        p = or_delete(p, q, columns::opt(columns::opt_ids(b, col), i).map(be));
    }
    p
}

/// `column` with `value`, or its delete marker when the record has none.
fn or_delete<V: Into<Vec<u8>>>(p: Put, column: &str, value: Option<V>) -> Put {
    match value {
        Some(v) => p.cell(column, v),
        None => p.delete(column),
    }
}

/// A `user` row holding only the counters (a user seen in follows but not in `users`, or a
/// counter written apart from the profile).
pub(super) fn user_counts_put(uid: i64, c: &[i64; 5]) -> Put {
    with_user_counts(Put::new(keys::user_key(uid)), c)
}

/// The counters of a post, added to its `post` row.
pub(super) fn with_post_counts(p: Put, reposts: i64, comments: i64) -> Put {
    p.cell(cell::REPOSTS, be(reposts))
        .cell(cell::COMMENTS, be(comments))
}

/// The counters of a user, added to its `user` row.
pub(super) fn with_user_counts(p: Put, c: &[i64; 5]) -> Put {
    p.cell(cell::FOLLOWERS, be(c[0]))
        .cell(cell::FOLLOWING, be(c[1]))
        .cell(cell::POSTS, be(c[2]))
        .cell(cell::REPOSTS_RECEIVED, be(c[3]))
        .cell(cell::COMMENTS_RECEIVED, be(c[4]))
}

/// The `post` row of cleaned post row `i`: content cells and the reported counts.
pub(super) fn post_info_put(b: &RecordBatch, i: usize, key: Vec<u8>, at: i64) -> Put {
    let mut p = Put::new(key)
        .cell(cell::CREATED_AT, be(at))
        .cell(cell::TEXT, str_val(b, "text", i).unwrap_or_default())
        .cell(
            cell::DELETED,
            if bool_val(b, "is_deleted", i) == Some(true) {
                "1"
            } else {
                "0"
            },
        );
    p = or_delete(p, cell::SOURCE, str_val(b, "source", i));
    for (col, q) in [
        ("topics", cell::TOPICS),
        ("at_users", cell::AT_USERS),
        ("pics", cell::PICS),
    ] {
        let items = list_val(b, col, i);
        p = or_delete(p, q, (!items.is_empty()).then(|| items.join(",")));
    }
    let retweet = columns::opt(columns::opt_ids(b, "retweet_mid"), i);
    p = or_delete(p, cell::RETWEET_MID, retweet.map(be));
    for (col, q) in [
        ("reposts_count", cell::REPORTED_REPOSTS),
        ("comments_count", cell::REPORTED_COMMENTS),
        ("attitudes_count", cell::REPORTED_ATTITUDES),
    ] {
        p = or_delete(p, q, columns::opt(columns::opt_ids(b, col), i).map(be));
    }
    p
}

/// Streams a part's batches: every column when `columns` is empty, else only those.
pub(super) fn read_rows(
    fs: &FileSystems,
    file: &FileEntry,
    columns: &[&str],
    f: &mut dyn FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    if columns.is_empty() {
        parquet_io::read_parquet(fs, file, f)
    } else {
        parquet_io::read_parquet_columns(fs, file, columns, f)
    }
}

/// Counters of one partition, looked up by key while its rows stream past; what no row
/// claims (a followee who is not in `users`, say) is written count-only afterwards.
pub(super) struct ChangedCounters<K, V> {
    entries: Vec<(K, V)>,
    claimed: Vec<bool>,
}

impl<K: Ord + Copy, V> ChangedCounters<K, V> {
    pub(super) fn new(entries: Vec<(K, V)>) -> Self {
        let claimed = vec![false; entries.len()];
        ChangedCounters { entries, claimed }
    }

    /// The entry of `key`, if there is one and `fits` it; it is then no longer unclaimed.
    pub(super) fn claim(&mut self, key: K, fits: impl Fn(&V) -> bool) -> Option<&V> {
        let i = self.entries.binary_search_by(|(k, _)| k.cmp(&key)).ok()?;
        if !fits(&self.entries[i].1) {
            return None;
        }
        self.claimed[i] = true;
        Some(&self.entries[i].1)
    }

    pub(super) fn unclaimed(&self) -> impl Iterator<Item = &(K, V)> {
        self.entries
            .iter()
            .zip(&self.claimed)
            .filter(|(_, c)| !**c)
            .map(|(e, _)| e)
    }
}

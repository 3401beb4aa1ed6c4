//! `verify`: sample cleaned records, read them back from HBase, compare, and measure the
//! latency of the calls a serving layer would make (gets and prefix scans).
//!
//! Sampling is deterministic: the records whose natural key hashes lowest are taken, so two
//! runs over the same data check the same records, and the sample is uniform over the keys.

use std::collections::BinaryHeap;
use std::time::Instant;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampMillisecondType};
use serde::Serialize;

use crate::dataset::parquet_io;
use crate::dataset::partition;
use crate::error::Result;
use crate::hbase::layout::{cell, keys, Table};
use crate::hbase::{Connection, Timeouts};
use crate::hdfs::{FileSystems, Location};

/// What was checked, what differed, and how fast the reads were.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    pub users_checked: u64,
    pub posts_checked: u64,
    pub follows_checked: u64,
    pub mismatches: u64,
    /// The first mismatches, described.
    pub examples: Vec<String>,
    pub get_ms: Latency,
    pub scan_ms: Latency,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    pub calls: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

fn latency(mut ms: Vec<f64>) -> Latency {
    if ms.is_empty() {
        return Latency::default();
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    Latency {
        calls: ms.len() as u64,
        p50: at(0.5),
        p99: at(0.99),
        max: *ms.last().expect("non-empty"),
    }
}

/// Keeps the `n` items with the lowest hash.
struct Sample<T: Ord> {
    n: usize,
    heap: BinaryHeap<(u64, T)>,
}

impl<T: Ord> Sample<T> {
    fn new(n: usize) -> Self {
        Sample {
            n,
            heap: BinaryHeap::new(),
        }
    }

    fn offer(&mut self, hash: u64, item: T) {
        if self.heap.len() < self.n {
            self.heap.push((hash, item));
        } else if self.heap.peek().is_some_and(|(h, _)| hash < *h) {
            self.heap.pop();
            self.heap.push((hash, item));
        }
    }

    fn into_sorted(self) -> Vec<T> {
        let mut v = self.heap.into_vec();
        v.sort();
        v.into_iter().map(|(_, t)| t).collect()
    }
}

fn batches(fs: &FileSystems, dir: &Location, f: &mut dyn FnMut(&RecordBatch)) -> Result<()> {
    for file in partition::committed_parts(fs, dir)? {
        parquet_io::read_parquet(fs, &file, &mut |b| {
            f(b);
            Ok(())
        })?;
    }
    Ok(())
}

type UserSample = (i64, Option<String>, Option<i64>);
type PostSample = (i64, i64, Option<String>);

/// Samples `n` users, posts and follows of `date` under the clean output `input` and checks
/// each against the tables in `namespace`.
pub fn run(
    fs: &FileSystems,
    input: &str,
    date: &str,
    namespace: &str,
    thrift: &str,
    timeouts: Timeouts,
    n: usize,
) -> Result<VerifyReport> {
    let root = fs.parse(input)?;
    let dt = format!("dt={date}");
    let (users, posts, follows) = sample_night(fs, &root, &dt, n)?;

    let mut conn = Connection::connect(thrift, timeouts)?;
    let mut report = VerifyReport::default();
    let (mut gets, mut scans) = (Vec::new(), Vec::new());
    let mismatch = |report: &mut VerifyReport, what: String| {
        report.mismatches += 1;
        if report.examples.len() < 20 {
            report.examples.push(what);
        }
    };
    let table = |t: Table| t.in_namespace(namespace);

    for (uid, name, followers) in users.into_sorted() {
        report.users_checked += 1;
        let t = Instant::now();
        let row = conn.get(&table(Table::User), &keys::user_key(uid))?;
        gets.push(t.elapsed().as_secs_f64() * 1e3);
        let Some(row) = row else {
            mismatch(&mut report, format!("user {uid}: missing"));
            continue;
        };
        if let Some(name) = name {
            if row.get(cell::SCREEN_NAME) != Some(name.as_bytes()) {
                mismatch(&mut report, format!("user {uid}: screen_name differs"));
            }
        }
        if let Some(f) = followers {
            if row.get(cell::REPORTED_FOLLOWERS) != Some(&f.to_be_bytes()[..]) {
                mismatch(
                    &mut report,
                    format!("user {uid}: reported_followers differs"),
                );
            }
        }
        if row.get(cell::FOLLOWERS).map(<[u8]>::len) != Some(8) {
            mismatch(
                &mut report,
                format!("user {uid}: no 8-byte count:followers"),
            );
        }
    }
    for (mid, at, text) in posts.into_sorted() {
        report.posts_checked += 1;
        let t = Instant::now();
        let index = conn.get(&table(Table::PostByMid), &keys::post_by_mid_key(mid))?;
        gets.push(t.elapsed().as_secs_f64() * 1e3);
        let Some(post_key) = index.as_ref().and_then(|r| r.get(cell::POST)) else {
            mismatch(&mut report, format!("post {mid}: missing from post_by_mid"));
            continue;
        };
        let t = Instant::now();
        let row = conn.get(&table(Table::Post), post_key)?;
        gets.push(t.elapsed().as_secs_f64() * 1e3);
        match row {
            None => mismatch(
                &mut report,
                format!("post {mid}: index points at a missing row"),
            ),
            Some(row) => {
                if row.get(cell::CREATED_AT) != Some(&at.to_be_bytes()[..]) {
                    mismatch(&mut report, format!("post {mid}: created_at differs"));
                }
                if let Some(text) = text {
                    if row.get(cell::TEXT) != Some(text.as_bytes()) {
                        mismatch(&mut report, format!("post {mid}: text differs"));
                    }
                }
            }
        }
    }
    for (follower, followee) in follows.into_sorted() {
        report.follows_checked += 1;
        let t = Instant::now();
        let followees =
            conn.scan_prefix(&table(Table::Follow), &keys::user_key(follower), 10_000)?;
        scans.push(t.elapsed().as_secs_f64() * 1e3);
        if !followees
            .iter()
            .any(|r| r.key == keys::follow_key(follower, followee))
        {
            mismatch(
                &mut report,
                format!("follow {follower}->{followee}: missing"),
            );
        }
        let t = Instant::now();
        let fan = conn.get(&table(Table::Fans), &keys::fans_key(followee, follower))?;
        gets.push(t.elapsed().as_secs_f64() * 1e3);
        if fan.is_none() {
            mismatch(&mut report, format!("fans {followee}<-{follower}: missing"));
        }
    }
    report.get_ms = latency(gets);
    report.scan_ms = latency(scans);
    Ok(report)
}

/// A sample of `n` users, posts and follow edges of the night `dt`, chosen by hash so a
/// rerun checks the same rows.
#[allow(clippy::type_complexity)]
fn sample_night(
    fs: &FileSystems,
    root: &Location,
    dt: &str,
    n: usize,
) -> Result<(Sample<UserSample>, Sample<PostSample>, Sample<(i64, i64)>)> {
    let mut users: Sample<UserSample> = Sample::new(n);
    batches(fs, &root.join("users").join(dt), &mut |b| {
        let uid = b
            .column_by_name("uid")
            .map(|c| c.as_primitive::<Int64Type>().clone());
        let name = b
            .column_by_name("screen_name")
            .map(|c| c.as_string::<i32>().clone());
        let followers = b
            .column_by_name("followers_count")
            .map(|c| c.as_primitive::<Int64Type>().clone());
        let Some(uid) = uid else { return };
        for i in 0..b.num_rows() {
            let u = uid.value(i);
            let nm = name
                .as_ref()
                .filter(|a| !a.is_null(i))
                .map(|a| a.value(i).to_string());
            let fo = followers
                .as_ref()
                .filter(|a| !a.is_null(i))
                .map(|a| a.value(i));
            users.offer(crate::hash::splitmix64(u as u64), (u, nm, fo));
        }
    })?;
    let mut posts: Sample<PostSample> = Sample::new(n);
    batches(fs, &root.join("posts").join(dt), &mut |b| {
        let (Some(mid), Some(at)) = (
            b.column_by_name("mid")
                .map(|c| c.as_primitive::<Int64Type>().clone()),
            b.column_by_name("created_at")
                .map(|c| c.as_primitive::<TimestampMillisecondType>().clone()),
        ) else {
            return;
        };
        let text = b
            .column_by_name("text")
            .map(|c| c.as_string::<i32>().clone());
        for i in 0..b.num_rows() {
            let t = text.as_ref().map(|a| a.value(i).to_string());
            posts.offer(
                crate::hash::splitmix64(mid.value(i) as u64),
                (mid.value(i), at.value(i), t),
            );
        }
    })?;
    let mut follows: Sample<(i64, i64)> = Sample::new(n);
    batches(fs, &root.join("follows").join(dt), &mut |b| {
        let (Some(a), Some(e)) = (
            b.column_by_name("follower")
                .map(|c| c.as_primitive::<Int64Type>().clone()),
            b.column_by_name("followee")
                .map(|c| c.as_primitive::<Int64Type>().clone()),
        ) else {
            return;
        };
        for i in 0..b.num_rows() {
            let key = (a.value(i), e.value(i));
            follows.offer(
                crate::hash::splitmix64(key.0 as u64 ^ crate::hash::splitmix64(key.1 as u64)),
                key,
            );
        }
    })?;
    Ok((users, posts, follows))
}

//! `weibo-etl friends`: mutual follows from cleaned follow edges, in memory or out of core,
//! whole or one slice of the pair space.

use anyhow::{Context as _, Result};
use arrow::array::{Array, RecordBatch};
use chrono::NaiveDate;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use weibo_etl::error::Result as WeiboResult;

use weibo_etl::dataset;
use weibo_etl::graph::friends::{
    self, BatchWriter, FriendsOptions, FriendsSink, FriendsStats, FriendsWriter, Slice, Tee,
};
use weibo_etl::load::layout;
use weibo_etl::load::{self, LoadOptions, PutSink, Table};
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl friends --input hdfs:///weibo/clean/follows --output hdfs:///weibo/graph --date 2026-11-29
  weibo-etl friends --input hdfs:///weibo/clean/follows/dt=2026-11-2* --output out --date 2026-11-29 \\
      --memory-budget 512MiB
  # split over 4 machines; each writes its own slice folder:
  weibo-etl friends --input ... --output hdfs:///weibo/graph --date 2026-11-29 --partition 2/4

Output layout:
  <output>/friends/dt=<date>/part-NNNNN.parquet        uid_a < uid_b, since (later follow time);
                                                        each file sorted by (uid_a, uid_b): one
                                                        per pair part of clean's follows, else two
  <output>/friend_counts/dt=<date>/part-NNNNN.parquet  uid, friends; each file sorted by uid
With --partition i/N each machine writes <output>/friends/dt=<date>/slice=i-of-N/ (and the same
under friend_counts/). The N slices hold disjoint pair sets: their union (read dt=<date>
recursively) is exactly the single run's friends. Friend counts of the slices are partial per
user: sum them by uid.";

/// Compute friendships (mutual follows) from cleaned follows Parquet: packed canonical pairs
/// sorted in parallel; out of core by hash partitions when over --memory-budget.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Cleaned follows Parquet: files, folders or globs, one or many dates (repeatable). Any
    /// Parquet with integer follower/followee columns will do (followed_at, any timestamp
    /// unit, gives `since`), as clean or DuckDB writes it
    #[arg(long = "input", required = true, value_name = "URL")]
    inputs: Vec<String>,
    /// Folder the friends and friend_counts partitions are written under
    #[arg(long, value_name = "URL")]
    output: String,
    /// Logical date of the run: names the dt= partitions
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = super::parse_date)]
    date: NaiveDate,
    /// Memory for packed edges (12 bytes each); above it the run spills hash partitions to disk
    #[arg(long, default_value = "4GiB", value_name = "SIZE", value_parser = super::parse_size)]
    memory_budget: u64,
    /// Only the pairs whose hash bucket is i of N, for splitting the job across machines
    #[arg(long, value_name = "i/N", value_parser = Slice::parse)]
    partition: Option<Slice>,
    /// Local folder for spill files [default: the system temp folder]
    #[arg(long, value_name = "DIR")]
    spill_dir: Option<std::path::PathBuf>,
    /// Also write HBase: the `friend` table (both directions, r:since), `count:friends` in
    /// `user`, and `r:mutual` = 1 on both edges in `follow` and `fans`
    #[arg(long)]
    load: bool,
    #[command(flatten)]
    parquet: super::ParquetArgs,
    /// Regions a missing table is pre-split into (with --load)
    #[arg(long, default_value_t = LoadOptions::REGIONS, value_parser = clap::value_parser!(u32).range(1..=65536))]
    regions: u32,
    #[command(flatten)]
    route: super::RouteArgs,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    let mut report = Report::new("friends");
    let slice = args.partition.unwrap_or(Slice::ALL);
    let options = FriendsOptions {
        memory_budget: args.memory_budget,
        slice,
        spill_dir: args.spill_dir.clone(),
    };
    let outcome = (|| -> Result<(FriendsStats, String)> {
        let output = ctx.fs.parse(&args.output)?;
        let date = args.date.format("%Y-%m-%d").to_string();
        // Rows stream into staged files as partitions finish; nothing is visible until the
        // commit, and a failure leaves nothing behind.
        let writer = FriendsWriter::create(
            &ctx.fs,
            &output,
            &date,
            slice,
            args.parquet.data_page_version,
        )?;
        let (stats, marker) = if args.load {
            load_hbase(ctx, &args, slice, &options, &writer, &mut report)?
        } else {
            let stats = friends::run_to(&ctx.fs, &args.inputs, &options, &writer)
                .context("computing friends")?;
            (stats, None)
        };
        let target = writer.commit().context("writing friends")?;
        if let Some(marker) = marker {
            marker.write(ctx).context("recording the friends loaded")?;
        }
        log::debug!("friends: committed");
        Ok((stats, target.to_string()))
    })();
    log::debug!(
        "friends: finished in {:.2}s, peak {} MB",
        report.seconds(),
        weibo_etl::report::peak_rss_bytes().unwrap_or(0) >> 20
    );
    let (s, target) = match outcome {
        Ok(r) => r,
        Err(e) => {
            ctx.finish_report(&report, Some(&format!("{e:#}")))?;
            return Err(e);
        }
    };
    eprintln!(
        "edges read {}, duplicate edges {}, self edges {}, mutual pairs {}, reciprocity {:.3}, \
         users with friends {}, partitions {}{}{}",
        s.edges_read,
        s.duplicate_edges,
        s.self_edges,
        s.mutual_pairs,
        s.reciprocity,
        s.users_with_friends,
        s.partitions,
        if s.pair_parts > 0 {
            format!(" (joined in {} pair parts)", s.pair_parts)
        } else {
            String::new()
        },
        if s.dictionary_encoded {
            ", dictionary-encoded ids"
        } else {
            ""
        }
    );
    eprintln!("written under {target}");
    report.set("friends", &s);
    report.set("output", target);
    ctx.finish_report(&report, None)
}

/// Computes the friendships while writing them into HBase through the loader's writers (and
/// into `writer` at the same time).
fn load_hbase(
    ctx: &Context,
    args: &Args,
    slice: Slice,
    options: &FriendsOptions,
    writer: &FriendsWriter,
    report: &mut Report,
) -> Result<(FriendsStats, Option<Marker>)> {
    let load_options = LoadOptions {
        regions: args.regions,
        ..args.route.apply(ctx.load_options(
            String::new(),
            args.date.format("%Y-%m-%d").to_string(),
            vec![Table::Friend, Table::User, Table::Follow, Table::Fans],
        ))
    };
    let whole = slice == Slice::ALL;
    if !whole {
        log::warn!(
            "--partition: count:friends is not written (a slice sees part of each user's \
             friends); sum friend_counts of all slices"
        );
    }
    let output = ctx.fs.parse(&args.output)?;
    let date = args.date.format("%Y-%m-%d").to_string();
    let marker = output
        .join("_load")
        .join(&format!("{}.json", ctx.global.namespace));
    // What this namespace already holds: the friends of the last night loaded into it,
    // unless its tables are new.
    let created = load::ensure_tables(&load_options).context("creating the tables")?;
    let base = match whole && created.is_empty() {
        true => Base::read(&ctx.fs, &output, &marker)?,
        false => None,
    };
    let mut stats = None;
    let mut skipped = (0u64, 0u64);
    // --via auto weighs the follow rows read: each mutual pair becomes six puts.
    let follow_rows = || -> weibo_etl::Result<u64> {
        let files = ctx.fs.expand_inputs(&args.inputs)?;
        let parquet = files
            .iter()
            .filter(|f| f.location.to_string().ends_with(".parquet"));
        dataset::partition::parquet_rows(&ctx.fs, parquet)
    };
    let route = load::Route {
        fs: &ctx.fs,
        root: output.clone(),
        rows: &follow_rows,
    };
    let ts = load::cell_timestamp(&date)?;
    let written = load::write_routed_with(&route, &load_options, &mut |timed| {
        let put: &mut PutSink<'_> = &mut |t, p| timed(t, p, ts);
        let hbase = HBaseSink {
            put: Mutex::new(put),
            whole,
            base: base.as_ref(),
            unchanged_pairs: AtomicU64::new(0),
            unchanged_counts: AtomicU64::new(0),
        };
        stats = Some(friends::run_to(
            &ctx.fs,
            &args.inputs,
            options,
            &Tee(&*writer, &hbase),
        )?);
        skipped = (
            hbase.unchanged_pairs.into_inner(),
            hbase.unchanged_counts.into_inner(),
        );
        Ok(())
    })
    .context("computing friends into HBase")?;
    eprintln!(
        "hbase: {} puts in {:.2}s into {}:friend/user/follow/fans ({}; {} pairs and {} counts \
         unchanged since {})",
        written.rows,
        written.seconds,
        ctx.global.namespace,
        super::route_taken(&written),
        skipped.0,
        skipped.1,
        base.as_ref().map_or("-", |b| b.date.as_str())
    );
    report.set("load", &written);
    report.set(
        "load_base",
        serde_json::json!({
            "date": base.as_ref().map(|b| b.date.clone()),
            "unchanged_pairs": skipped.0,
            "unchanged_counts": skipped.1,
        }),
    );
    let stats = stats.context("friends did not run")?;
    // Written once the output is committed too: the next night diffs against the later of
    // the two nights.
    let marker = whole.then(|| Marker {
        at: marker,
        output: output.clone(),
        date: base.map_or(date.clone(), |b| b.date.max(date)),
    });
    Ok((stats, marker))
}

/// Which night's friends a namespace holds, to record once they are committed.
struct Marker {
    at: weibo_etl::hdfs::Location,
    output: weibo_etl::hdfs::Location,
    date: String,
}

impl Marker {
    /// Records the night and the sizes of its output's files: a base whose files changed
    /// since (rewritten by a run without --load) is not trusted.
    fn write(self, ctx: &Context) -> Result<()> {
        let parts = output_parts(&ctx.fs, &self.output, &self.date)?;
        let text = serde_json::to_vec(&serde_json::json!({ "as_of": self.date, "parts": parts }))?;
        ctx.fs.write_atomic(&self.at, &text)?;
        Ok(())
    }
}

/// `friends/dt=<date>/<part>` and `friend_counts/...` → size, of the committed output.
fn output_parts(
    fs: &weibo_etl::hdfs::FileSystems,
    output: &weibo_etl::hdfs::Location,
    date: &str,
) -> Result<std::collections::BTreeMap<String, u64>> {
    let mut parts = std::collections::BTreeMap::new();
    for table in ["friends", "friend_counts"] {
        let dir = output.join(table).join(&format!("dt={date}"));
        for f in weibo_etl::dataset::partition::committed_parts(fs, &dir)? {
            let name = f.location.file_name().unwrap_or_default();
            parts.insert(format!("{table}/{name}"), f.len);
        }
    }
    Ok(parts)
}

/// The friends a namespace already holds (the committed output of the night its marker
/// names): `friends --load` writes only the pairs and counts that differ from them. Writing
/// an older night's state is harmless whatever the base, as its cells carry that night's
/// (older) timestamp; docs/nightly.md.
struct Base {
    date: String,
    /// (uid_a, uid_b) → since (ms, or i64::MIN when unknown)
    pairs: rustc_hash::FxHashMap<(i64, i64), i64>,
    counts: rustc_hash::FxHashMap<i64, i64>,
}

impl Base {
    fn read(
        fs: &weibo_etl::hdfs::FileSystems,
        output: &weibo_etl::hdfs::Location,
        marker: &weibo_etl::hdfs::Location,
    ) -> Result<Option<Base>> {
        if !fs.exists(marker)? {
            return Ok(None);
        }
        let doc: serde_json::Value = serde_json::from_slice(&fs.read_to_vec(marker)?)
            .with_context(|| format!("reading {marker}"))?;
        let Some(date) = doc["as_of"].as_str().map(String::from) else {
            return Ok(None);
        };
        let recorded: std::collections::BTreeMap<String, u64> =
            serde_json::from_value(doc["parts"].clone()).unwrap_or_default();
        if recorded.is_empty() || recorded != output_parts(fs, output, &date)? {
            log::warn!(
                "the friends of {date} changed since they were loaded (or {marker} is old): \
                 writing every pair and count"
            );
            return Ok(None);
        }
        let dt = format!("dt={date}");
        let pair_parts =
            weibo_etl::dataset::partition::committed_parts(fs, &output.join("friends").join(&dt))?;
        let count_parts = weibo_etl::dataset::partition::committed_parts(
            fs,
            &output.join("friend_counts").join(&dt),
        )?;
        if pair_parts.is_empty() || count_parts.is_empty() {
            log::warn!("{marker} names {date}, whose friends output is gone: writing everything");
            return Ok(None);
        }
        let mut pairs = rustc_hash::FxHashMap::default();
        for f in &pair_parts {
            let path = f.location.to_string();
            weibo_etl::dataset::partition::read_parquet(fs, f, &mut |b| {
                dataset::friends::check(b, &dataset::friends::friends_schema(), &path)?;
                let (a, bb, since) = dataset::friends::pair_columns(b);
                for i in 0..b.num_rows() {
                    let t = if since.is_valid(i) {
                        since.value(i)
                    } else {
                        i64::MIN
                    };
                    pairs.insert((a.value(i), bb.value(i)), t);
                }
                Ok(())
            })?;
        }
        let mut counts = rustc_hash::FxHashMap::default();
        for f in &count_parts {
            let path = f.location.to_string();
            weibo_etl::dataset::partition::read_parquet(fs, f, &mut |b| {
                dataset::friends::check(b, &dataset::friends::counts_schema(), &path)?;
                let (uid, n) = dataset::friends::count_columns(b);
                counts.extend(uid.values().iter().copied().zip(n.values().iter().copied()));
                Ok(())
            })?;
        }
        Ok(Some(Base {
            date,
            pairs,
            counts,
        }))
    }
}

/// Friendships as HBase puts ([`layout::friendship_puts`], [`layout::friend_count_put`]),
/// those unchanged since the base left out. Runs come from several threads: the puts go
/// through the loader's one router, under a lock.
struct HBaseSink<'a, 'b> {
    put: Mutex<&'a mut PutSink<'b>>,
    whole: bool,
    base: Option<&'a Base>,
    unchanged_pairs: AtomicU64,
    unchanged_counts: AtomicU64,
}

/// A run of pairs, or a part of the counts, on its way to HBase.
struct HBaseRun<'s, 'a, 'b> {
    sink: &'s HBaseSink<'a, 'b>,
    counts: bool,
}

impl BatchWriter for HBaseRun<'_, '_, '_> {
    fn write(&mut self, batch: &RecordBatch) -> WeiboResult<()> {
        let sink = self.sink;
        let mut puts = Vec::new();
        let mut unchanged = 0;
        if self.counts {
            if sink.whole {
                let (uids, friends) = dataset::friends::count_columns(batch);
                for (uid, n) in uids.values().iter().zip(friends.values()) {
                    if sink.base.and_then(|base| base.counts.get(uid)) == Some(n) {
                        unchanged += 1;
                        continue;
                    }
                    puts.push(layout::friend_count_put(*uid, *n));
                }
            }
            sink.unchanged_counts
                .fetch_add(unchanged, Ordering::Relaxed);
        } else {
            let (uid_a, uid_b, since) = dataset::friends::pair_columns(batch);
            for i in 0..uid_a.len() {
                let (a, b) = (uid_a.value(i), uid_b.value(i));
                let since = since.is_valid(i).then(|| since.value(i));
                let t = since.unwrap_or(i64::MIN);
                if sink.base.and_then(|base| base.pairs.get(&(a, b))) == Some(&t) {
                    unchanged += 1;
                    continue;
                }
                puts.extend(layout::friendship_puts(a, b, since));
            }
            sink.unchanged_pairs.fetch_add(unchanged, Ordering::Relaxed);
        }
        // Built outside the lock; handed over under it.
        let mut put = sink.put.lock().unwrap_or_else(|e| e.into_inner());
        for (table, p) in puts {
            (*put)(table, p)?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> WeiboResult<()> {
        Ok(())
    }
}

impl FriendsSink for HBaseSink<'_, '_> {
    fn open_pairs(&self, _run: usize) -> WeiboResult<Box<dyn BatchWriter + '_>> {
        Ok(Box::new(HBaseRun {
            sink: self,
            counts: false,
        }))
    }

    fn open_counts(&self, _part: usize) -> WeiboResult<Box<dyn BatchWriter + '_>> {
        Ok(Box::new(HBaseRun {
            sink: self,
            counts: true,
        }))
    }
}

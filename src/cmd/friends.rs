//! `weibo-etl friends`: mutual follows from cleaned follow edges, in memory or out of core,
//! whole or one slice of the pair space.

use anyhow::{Context as _, Result};
use arrow::array::{Array, RecordBatch};
use chrono::NaiveDate;
use weibo_etl::error::Result as WeiboResult;
use weibo_etl::graph::friends::{
    self, FriendsOptions, FriendsSink, FriendsStats, FriendsWriter, Slice,
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
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=65536))]
    regions: u32,
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
        let mut writer = FriendsWriter::create(
            &ctx.fs,
            &output,
            &date,
            slice,
            args.parquet.data_page_version,
        )?;
        let (stats, marker) = if args.load {
            load_hbase(ctx, &args, slice, &options, &mut writer, &mut report)?
        } else {
            let stats = friends::run_to(&ctx.fs, &args.inputs, &options, &mut writer)
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
    writer: &mut FriendsWriter,
    report: &mut Report,
) -> Result<(FriendsStats, Option<Marker>)> {
    let load_options = LoadOptions {
        regions: args.regions,
        ..ctx.load_options(
            String::new(),
            args.date.format("%Y-%m-%d").to_string(),
            vec![Table::Friend, Table::User, Table::Follow, Table::Fans],
        )
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
    let written = load::write_with(&load_options, &mut |put| {
        let mut hbase = HBaseSink {
            put,
            whole,
            base: base.as_ref(),
            unchanged_pairs: 0,
            unchanged_counts: 0,
        };
        let mut both = Both(&mut *writer, &mut hbase);
        stats = Some(friends::run_to(&ctx.fs, &args.inputs, options, &mut both)?);
        skipped = (hbase.unchanged_pairs, hbase.unchanged_counts);
        Ok(())
    })
    .context("computing friends into HBase")?;
    eprintln!(
        "hbase: {} puts in {:.2}s into {}:friend/user/follow/fans ({} pairs and {} counts \
         unchanged since {})",
        written.rows,
        written.seconds,
        ctx.global.namespace,
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
            weibo_etl::dataset::partition::read_parquet(fs, f, &mut |b| {
                let (a, bb, since) = friends::pair_columns(b);
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
            weibo_etl::dataset::partition::read_parquet(fs, f, &mut |b| {
                let (uid, n) = friends::count_columns(b);
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

/// Hands the same results to two sinks.
struct Both<'a>(&'a mut dyn FriendsSink, &'a mut dyn FriendsSink);

impl FriendsSink for Both<'_> {
    fn pairs(&mut self, run: usize, batch: &RecordBatch) -> WeiboResult<()> {
        self.0.pairs(run, batch)?;
        self.1.pairs(run, batch)
    }

    fn counts(&mut self, batch: &RecordBatch) -> WeiboResult<()> {
        self.0.counts(batch)?;
        self.1.counts(batch)
    }
}

/// Friendships as HBase puts: the `friend` table both ways (`r:since`), `r:mutual` = 1 on both
/// edges in `follow` and `fans`, and `count:friends` in `user` (whole runs only).
struct HBaseSink<'a, 'b> {
    put: &'a mut PutSink<'b>,
    whole: bool,
    base: Option<&'a Base>,
    unchanged_pairs: u64,
    unchanged_counts: u64,
}

impl FriendsSink for HBaseSink<'_, '_> {
    fn pairs(&mut self, _run: usize, batch: &RecordBatch) -> WeiboResult<()> {
        let (uid_a, uid_b, since) = friends::pair_columns(batch);
        for i in 0..uid_a.len() {
            let (a, b) = (uid_a.value(i), uid_b.value(i));
            let since = since.is_valid(i).then(|| since.value(i));
            let t = since.unwrap_or(i64::MIN);
            if self.base.and_then(|base| base.pairs.get(&(a, b))) == Some(&t) {
                self.unchanged_pairs += 1;
                continue;
            }
            for (table, put) in layout::friendship_puts(a, b, since) {
                (self.put)(table, put)?;
            }
        }
        Ok(())
    }

    fn counts(&mut self, batch: &RecordBatch) -> WeiboResult<()> {
        if self.whole {
            let (uids, friends) = friends::count_columns(batch);
            for (uid, n) in uids.values().iter().zip(friends.values()) {
                if self.base.and_then(|base| base.counts.get(uid)) == Some(n) {
                    self.unchanged_counts += 1;
                    continue;
                }
                let (table, put) = layout::friend_count_put(*uid, *n);
                (self.put)(table, put)?;
            }
        }
        Ok(())
    }
}

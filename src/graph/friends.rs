//! Friendships: mutual follows, computed in batch from cleaned follow edges.
//!
//! Seed 001's online fix for racing follow/unfollow is a canonical pair `(min id, max id)`
//! with direction bits (1: the small id follows the large one, 2: the reverse, 3: friends).
//! In batch that becomes a sort: every edge is packed into one `u64`,
//! `pair << 1 | direction`, where `pair` is `small << 32 | large` over 31/32-bit user codes
//! and `direction` is 0 when the small id follows the large one. After `par_sort_unstable`
//! the two directions of a pair sit side by side; equal neighbours are duplicate edges.
//!
//! User codes are the ids themselves when every id is below 2^31 (checked from the input),
//! else ranks in the sorted set of distinct ids (a dictionary built in a first pass); either
//! way code order is id order, so sorted pairs come out sorted by `(uid_a, uid_b)`.
//!
//! Out of core: when the packed edges would exceed the memory budget, edges are hash-
//! partitioned by pair into spill files and each partition is sorted on its own. Scale-out:
//! `--partition i/N` keeps only pairs whose hash bucket is `i`. Both produce exactly the rows
//! the single in-memory run produces (for their buckets).
//!
//! Invariants: `uid_a < uid_b` in every output row; each pair appears once; `since` is the
//! later of the two follow times when both are known (for an edge crawled several times, its
//! earliest known time).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{
    DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit, TimestampMillisecondType,
};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use rayon::prelude::*;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

/// No follow time known.
const NO_TIME: i64 = i64::MIN;
/// Largest code that fits the small side of a pair (31 bits).
const MAX_DIRECT_ID: i64 = (1 << 31) - 1;
/// Bytes per packed edge held while sorting.
const BYTES_PER_EDGE: u64 = 8;

/// Which slice of the pair space a run handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub index: u32,
    pub count: u32,
}

impl Slice {
    pub const ALL: Slice = Slice { index: 0, count: 1 };

    /// Parses `i/N` with `0 <= i < N`.
    pub fn parse(s: &str) -> std::result::Result<Slice, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not i/N"))?;
        let index: u32 = i.trim().parse().map_err(|_| format!("{s:?}: bad i"))?;
        let count: u32 = n.trim().parse().map_err(|_| format!("{s:?}: bad N"))?;
        if count == 0 || index >= count {
            return Err(format!("{s:?}: need 0 <= i < N"));
        }
        Ok(Slice { index, count })
    }

    fn keeps(self, pair: u64) -> bool {
        self.count == 1 || bucket(pair, 0x5bd1_e995) % self.count as u64 == self.index as u64
    }
}

/// A well-mixed hash of a pair (by ids, not codes, so every machine agrees on buckets
/// whatever its dictionary).
fn bucket(pair: u64, seed: u64) -> u64 {
    let mut x = pair ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Options of a friends run.
#[derive(Clone, Debug)]
pub struct FriendsOptions {
    /// Bytes the packed edges may take; above it the run goes out of core.
    pub memory_budget: u64,
    pub slice: Slice,
    /// Local folder for spill files (default: the system temp folder).
    pub spill_dir: Option<PathBuf>,
}

/// What a run found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FriendsStats {
    pub edges_read: u64,
    /// Edges seen more than once (crawled on several dates or twice in one).
    pub duplicate_edges: u64,
    /// Edges from a user to themself (cleaned data has none; raw-ish input may).
    pub self_edges: u64,
    /// Distinct directed edges in this run's slice.
    pub distinct_edges: u64,
    pub mutual_pairs: u64,
    /// Share of distinct directed edges that are reciprocated: `2 * mutual / distinct`.
    pub reciprocity: f64,
    pub users_with_friends: u64,
    /// Out-of-core partitions used (1 = in memory).
    pub partitions: u32,
    pub dictionary_encoded: bool,
}

/// The result: friend pairs sorted by `(uid_a, uid_b)` and per-user counts sorted by uid.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Friends {
    pub uid_a: Vec<i64>,
    pub uid_b: Vec<i64>,
    /// Epoch ms, `None` when either follow time is unknown.
    pub since: Vec<Option<i64>>,
    pub counts: Vec<(i64, u64)>,
    pub stats: FriendsStats,
}

/// Maps user ids to order-preserving codes.
enum Coder {
    Direct,
    Dictionary(Vec<i64>),
}

impl Coder {
    fn encode(&self, id: i64) -> u64 {
        match self {
            Coder::Direct => id as u64,
            Coder::Dictionary(ids) => ids.binary_search(&id).map_or(u64::MAX, |i| i as u64),
        }
    }

    fn decode(&self, code: u64) -> i64 {
        match self {
            Coder::Direct => code as i64,
            Coder::Dictionary(ids) => ids[code as usize],
        }
    }
}

/// One chunk of edges as read: follower, followee, follow time (or [`NO_TIME`]).
struct EdgeChunk {
    follower: Vec<i64>,
    followee: Vec<i64>,
    time: Vec<i64>,
}

/// Reads the follower/followee/followed_at columns of the input Parquet files, chunk by chunk.
struct Input {
    fs: FileSystems,
    files: Vec<FileEntry>,
}

/// What a file's Parquet footer says: rows, and the id range when statistics are present.
struct FileMeta {
    rows: usize,
    id_range: Option<(i64, i64)>,
}

impl Input {
    fn open(&self, file: &FileEntry) -> Result<ParquetRecordBatchReaderBuilder<Bytes>> {
        let bytes = Bytes::from(self.fs.read_to_vec(&file.location)?);
        ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| Error::BadInput {
            path: file.location.to_string(),
            line: 0,
            reason: format!("not a follows Parquet file: {e}"),
        })
    }

    /// Rows and id range of a file from its footer alone (no data pages decoded).
    fn meta(&self, file: &FileEntry) -> Result<FileMeta> {
        use parquet::file::statistics::Statistics;
        let builder = self.open(file)?;
        let meta = builder.metadata();
        let schema = builder.parquet_schema();
        let column = |name: &str| schema.columns().iter().position(|c| c.name() == name);
        let mut range: Option<(i64, i64)> = Some((i64::MAX, i64::MIN));
        for rg in meta.row_groups() {
            for name in ["follower", "followee"] {
                let stats = column(name).and_then(|i| rg.column(i).statistics());
                match stats {
                    Some(Statistics::Int64(v)) => match (v.min_opt(), v.max_opt(), range) {
                        (Some(lo), Some(hi), Some((a, b))) => {
                            range = Some((a.min(*lo), b.max(*hi)))
                        }
                        _ => range = None,
                    },
                    _ => range = None,
                }
            }
        }
        Ok(FileMeta {
            rows: meta.file_metadata().num_rows().max(0) as usize,
            id_range: range.filter(|(a, b)| a <= b),
        })
    }

    /// Decodes one file's follower/followee/followed_at columns, chunk by chunk.
    fn file_chunks(
        &self,
        file: &FileEntry,
        f: &mut dyn FnMut(EdgeChunk) -> Result<()>,
    ) -> Result<()> {
        self.file_columns(file, true, f)
    }

    /// Decodes follower/followee (and followed_at when `times`), chunk by chunk. Without
    /// times the chunk's `time` is all [`NO_TIME`]: the widest column is not decompressed.
    fn file_columns(
        &self,
        file: &FileEntry,
        times: bool,
        f: &mut dyn FnMut(EdgeChunk) -> Result<()>,
    ) -> Result<()> {
        let builder = self.open(file)?;
        let schema = builder.parquet_schema();
        let names: &[&str] = if times {
            &["follower", "followee", "followed_at"]
        } else {
            &["follower", "followee"]
        };
        let wanted: Vec<usize> = names
            .iter()
            .filter_map(|name| schema.columns().iter().position(|c| c.name() == *name))
            .collect();
        let mask = ProjectionMask::leaves(schema, wanted);
        let reader = builder
            .with_projection(mask)
            .with_batch_size(64 * 1024)
            .build()
            .map_err(|e| Error::BadInput {
                path: file.location.to_string(),
                line: 0,
                reason: e.to_string(),
            })?;
        for batch in reader {
            let batch = batch.map_err(|e| Error::BadInput {
                path: file.location.to_string(),
                line: 0,
                reason: e.to_string(),
            })?;
            f(chunk_from_batch(&batch, &file.location)?)?;
        }
        Ok(())
    }

    fn for_each(&self, f: &mut dyn FnMut(EdgeChunk) -> Result<()>) -> Result<()> {
        for file in &self.files {
            self.file_chunks(file, f)?;
        }
        Ok(())
    }
}

fn chunk_from_batch(batch: &RecordBatch, path: &Location) -> Result<EdgeChunk> {
    let missing = |name: &str| Error::BadInput {
        path: path.to_string(),
        line: 0,
        reason: format!("follows Parquet lacks an int64 column {name:?}"),
    };
    let ids = |name: &str| -> Result<Vec<i64>> {
        let col = batch.column_by_name(name).ok_or_else(|| missing(name))?;
        let arr = col
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| missing(name))?;
        if arr.null_count() > 0 {
            return Err(Error::BadInput {
                path: path.to_string(),
                line: 0,
                reason: format!("null in {name:?}"),
            });
        }
        Ok(arr.values().to_vec())
    };
    let follower = ids("follower")?;
    let followee = ids("followee")?;
    let time = match batch
        .column_by_name("followed_at")
        .and_then(|c| c.as_primitive_opt::<TimestampMillisecondType>())
    {
        Some(t) => t.iter().map(|v| v.unwrap_or(NO_TIME)).collect(),
        None => vec![NO_TIME; follower.len()],
    };
    Ok(EdgeChunk {
        follower,
        followee,
        time,
    })
}

/// Pairs (`small << 32 | large`) that appear in both directions among sorted, deduplicated
/// packed edges: the two directions of a pair are neighbours after the sort.
pub fn mutual_pairs(sorted_keys: &[u64]) -> Vec<u64> {
    sorted_keys
        .windows(2)
        .filter(|w| w[0] >> 1 == w[1] >> 1)
        .map(|w| w[0] >> 1)
        .collect()
}

/// Packs an edge between two ids below 2^31 (the direct coding; see the module doc).
pub fn pack_direct(follower: i64, followee: i64) -> u64 {
    pack(&Coder::Direct, follower, followee)
}

/// Packs an edge: `(small << 32 | large) << 1 | dir`, dir 1 when the large id follows.
fn pack(coder: &Coder, follower: i64, followee: i64) -> u64 {
    let (a, b) = (coder.encode(follower), coder.encode(followee));
    let (small, large, dir) = if a < b { (a, b, 0) } else { (b, a, 1) };
    (((small << 32) | large) << 1) | dir
}

/// The pair of ids a pair code stands for (for bucket hashing independent of codes).
fn id_pair(follower: i64, followee: i64) -> u64 {
    let (s, l) = if follower < followee {
        (follower, followee)
    } else {
        (followee, follower)
    };
    (s as u64).wrapping_mul(0x1000_0000_01b3) ^ (l as u64)
}

/// Computes mutual follows over the given follows Parquet files (files or folders).
pub fn run(fs: &FileSystems, inputs: &[String], options: &FriendsOptions) -> Result<Friends> {
    let files: Vec<FileEntry> = fs
        .expand_inputs(inputs)?
        .into_iter()
        .filter(|f| {
            f.location
                .file_name()
                .is_some_and(|n| n.ends_with(".parquet"))
        })
        .collect();
    let input = Input {
        fs: fs.clone(),
        files,
    };

    // Pass 1: how many edges and the id range, from the Parquet footers when they carry
    // statistics (ours do); files without them are scanned.
    let metas: Vec<FileMeta> = input
        .files
        .par_iter()
        .map(|f| input.meta(f))
        .collect::<Result<_>>()?;
    let edges_read: u64 = metas.iter().map(|m| m.rows as u64).sum();
    let mut max_id = 0i64;
    let mut min_id = i64::MAX;
    for (file, meta) in input.files.iter().zip(&metas) {
        match meta.id_range {
            Some((lo, hi)) => {
                min_id = min_id.min(lo);
                max_id = max_id.max(hi);
            }
            None => input.file_chunks(file, &mut |c| {
                for &id in c.follower.iter().chain(&c.followee) {
                    min_id = min_id.min(id);
                    max_id = max_id.max(id);
                }
                Ok(())
            })?,
        }
    }
    let coder = if edges_read == 0 || (min_id >= 0 && max_id <= MAX_DIRECT_ID) {
        Coder::Direct
    } else {
        Coder::Dictionary(build_dictionary(&input)?)
    };
    if let Coder::Dictionary(ids) = &coder {
        if ids.len() as u64 > MAX_DIRECT_ID as u64 {
            return Err(Error::Usage(format!(
                "{} distinct users: more than 2^31 does not fit the packed pair layout",
                ids.len()
            )));
        }
    }

    let needed = edges_read * BYTES_PER_EDGE;
    let partitions = if needed <= options.memory_budget {
        1
    } else {
        needed.div_ceil(options.memory_budget.max(1)).clamp(2, 4096) as u32
    };
    log::info!(
        "friends: {edges_read} edges, {} coding, {partitions} partition(s) for a {} MB budget",
        if matches!(coder, Coder::Direct) {
            "direct"
        } else {
            "dictionary"
        },
        options.memory_budget >> 20
    );

    let mut result = Friends::default();
    let mut stats = FriendsStats {
        edges_read,
        partitions,
        dictionary_encoded: matches!(coder, Coder::Dictionary(_)),
        ..FriendsStats::default()
    };
    let mut pairs: Vec<(u64, i64)> = Vec::new();
    if partitions == 1 {
        pairs = mutual_in_memory(&input, &metas, &coder, options.slice, &mut stats)?;
    } else {
        let spill = Spill::create(options.spill_dir.as_deref(), partitions)?;
        input.for_each(&mut |c| {
            let (keys, times, selfs) = pack_chunk(&coder, &c, options.slice);
            stats.self_edges += selfs;
            spill.append(&keys, &times)
        })?;
        spill.finish()?;
        for p in 0..partitions {
            let source = |f: &mut KeySink<'_>| spill.read(p, f);
            pairs.extend(mutual_in(&source, &mut stats)?);
        }
        pairs.par_sort_unstable_by_key(|(pair, _)| *pair);
    }

    stats.mutual_pairs = pairs.len() as u64;
    stats.reciprocity = if stats.distinct_edges > 0 {
        2.0 * stats.mutual_pairs as f64 / stats.distinct_edges as f64
    } else {
        0.0
    };
    result.uid_a.reserve_exact(pairs.len());
    result.uid_b.reserve_exact(pairs.len());
    result.since.reserve_exact(pairs.len());
    for (p, t) in pairs {
        result.uid_a.push(coder.decode(p >> 32));
        result.uid_b.push(coder.decode(p & 0xffff_ffff));
        result.since.push((t != NO_TIME).then_some(t));
    }
    // Friend counts: `uid_a` is already sorted (pairs are), so only `uid_b` needs sorting;
    // a merge of the two sorted runs counts each user's pairs.
    let mut b_sorted = result.uid_b.clone();
    b_sorted.par_sort_unstable();
    let mut counts: Vec<(i64, u64)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (a, b) = (&result.uid_a, &b_sorted);
    while i < a.len() || j < b.len() {
        let uid = if j == b.len() || (i < a.len() && a[i] <= b[j]) {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        match counts.last_mut() {
            Some((last, n)) if *last == uid => *n += 1,
            _ => counts.push((uid, 1)),
        }
    }
    stats.users_with_friends = counts.len() as u64;
    result.counts = counts;
    result.stats = stats;
    Ok(result)
}

/// Packs the edges of a chunk that fall in `slice` (self-edges are never friendships: they
/// are counted and dropped).
fn pack_chunk(coder: &Coder, c: &EdgeChunk, slice: Slice) -> (Vec<u64>, Vec<i64>, u64) {
    let mut keys = Vec::with_capacity(c.follower.len());
    let mut times = Vec::with_capacity(c.follower.len());
    let mut selfs = 0;
    for i in 0..c.follower.len() {
        let (a, b) = (c.follower[i], c.followee[i]);
        if a == b {
            selfs += 1;
        } else if slice.keeps(id_pair(a, b)) {
            keys.push(pack(coder, a, b));
            times.push(c.time[i]);
        }
    }
    (keys, times, selfs)
}

/// The in-memory path: files are decoded in parallel straight into one preallocated key
/// array (sized from the footers, so it never reallocates), sorted in place, scanned for
/// pairs with both directions; a second parallel pass collects the follow times of the
/// mutual pairs only.
fn mutual_in_memory(
    input: &Input,
    metas: &[FileMeta],
    coder: &Coder,
    slice: Slice,
    stats: &mut FriendsStats,
) -> Result<Vec<(u64, i64)>> {
    use std::sync::atomic::{AtomicI64, Ordering};
    let total: usize = metas.iter().map(|m| m.rows).sum();
    let mut keys = vec![0u64; total];
    let mut slots: Vec<&mut [u64]> = Vec::with_capacity(metas.len());
    let mut rest = keys.as_mut_slice();
    for m in metas {
        let (head, tail) = rest.split_at_mut(m.rows);
        slots.push(head);
        rest = tail;
    }
    let filled: Vec<(usize, u64)> = input
        .files
        .par_iter()
        .zip(slots)
        .map(|(file, slot)| -> Result<(usize, u64)> {
            let (mut n, mut selfs) = (0usize, 0u64);
            input.file_columns(file, false, &mut |c| {
                for (&a, &b) in c.follower.iter().zip(&c.followee) {
                    if a == b {
                        selfs += 1;
                    } else if slice.keeps(id_pair(a, b)) {
                        let Some(cell) = slot.get_mut(n) else {
                            return Err(Error::BadInput {
                                path: file.location.to_string(),
                                line: 0,
                                reason: "more rows than the footer announced".into(),
                            });
                        };
                        *cell = pack(coder, a, b);
                        n += 1;
                    }
                }
                Ok(())
            })?;
            Ok((n, selfs))
        })
        .collect::<Result<_>>()?;
    // Close the gaps left by filtered rows.
    let mut write = 0usize;
    let mut read = 0usize;
    for ((n, selfs), m) in filled.iter().zip(metas) {
        keys.copy_within(read..read + n, write);
        write += n;
        read += m.rows;
        stats.self_edges += selfs;
    }
    keys.truncate(write);
    log::debug!("friends: keys packed");
    keys.par_sort_unstable();
    log::debug!("friends: keys sorted");
    let before = keys.len() as u64;
    keys.dedup();
    stats.duplicate_edges += before - keys.len() as u64;
    stats.distinct_edges += keys.len() as u64;
    let mutual = mutual_pairs(&keys);
    drop(keys);

    // Membership by hash, not binary search: ~17 M random probes into a 23 MB sorted array
    // cost a cache miss per level; a hash table costs about one.
    let index: rustc_hash::FxHashMap<u64, u32> = mutual
        .iter()
        .enumerate()
        .map(|(i, pair)| (*pair, i as u32))
        .collect();
    // Earliest known time per direction; `i64::MAX` stands for "none yet".
    let first: Vec<AtomicI64> = (0..mutual.len())
        .map(|_| AtomicI64::new(i64::MAX))
        .collect();
    let second: Vec<AtomicI64> = (0..mutual.len())
        .map(|_| AtomicI64::new(i64::MAX))
        .collect();
    input
        .files
        .par_iter()
        .map(|file| {
            input.file_chunks(file, &mut |c| {
                for i in 0..c.follower.len() {
                    let (a, b, t) = (c.follower[i], c.followee[i], c.time[i]);
                    if t == NO_TIME || a == b || !slice.keeps(id_pair(a, b)) {
                        continue;
                    }
                    let key = pack(coder, a, b);
                    if let Some(&j) = index.get(&(key >> 1)) {
                        let slot = if key & 1 == 0 {
                            &first[j as usize]
                        } else {
                            &second[j as usize]
                        };
                        slot.fetch_min(t, Ordering::Relaxed);
                    }
                }
                Ok(())
            })
        })
        .collect::<Result<()>>()?;
    drop(index);
    log::debug!("friends: follow times collected");
    Ok(mutual
        .into_iter()
        .zip(first.iter().zip(&second))
        .map(|(pair, (f, s))| {
            let (f, s) = (f.load(Ordering::Relaxed), s.load(Ordering::Relaxed));
            let since = if f == i64::MAX || s == i64::MAX {
                NO_TIME
            } else {
                f.max(s)
            };
            (pair, since)
        })
        .collect())
}

/// Receives packed edge keys and their follow times, chunk by chunk.
type KeySink<'a> = dyn FnMut(&[u64], &[i64]) -> Result<()> + 'a;

type Source<'a> = dyn Fn(&mut KeySink<'_>) -> Result<()> + 'a;

/// Mutual pairs among the edges a source yields: sort packed keys, find pairs with both
/// directions, then a second pass over the source collects their follow times.
fn mutual_in(source: &Source<'_>, stats: &mut FriendsStats) -> Result<Vec<(u64, i64)>> {
    let mut keys: Vec<u64> = Vec::new();
    source(&mut |k, _| {
        keys.extend_from_slice(k);
        Ok(())
    })?;
    keys.par_sort_unstable();
    let before = keys.len() as u64;
    keys.dedup();
    stats.duplicate_edges += before - keys.len() as u64;
    stats.distinct_edges += keys.len() as u64;
    let mutual = mutual_pairs(&keys);
    drop(keys);
    // Earliest known time per direction, then the later of the two.
    let mut first = vec![NO_TIME; mutual.len()];
    let mut second = vec![NO_TIME; mutual.len()];
    source(&mut |k, t| {
        for (key, time) in k.iter().zip(t) {
            if *time == NO_TIME {
                continue;
            }
            if let Ok(i) = mutual.binary_search(&(key >> 1)) {
                let slot = if key & 1 == 0 {
                    &mut first[i]
                } else {
                    &mut second[i]
                };
                if *slot == NO_TIME || *time < *slot {
                    *slot = *time;
                }
            }
        }
        Ok(())
    })?;
    Ok(mutual
        .into_iter()
        .enumerate()
        .map(|(i, pair)| {
            let since = if first[i] == NO_TIME || second[i] == NO_TIME {
                NO_TIME
            } else {
                first[i].max(second[i])
            };
            (pair, since)
        })
        .collect())
}

/// Sorted distinct ids of the input, built chunk by chunk so memory stays near the size of
/// the result.
fn build_dictionary(input: &Input) -> Result<Vec<i64>> {
    let mut ids: Vec<i64> = Vec::new();
    let mut pending: Vec<i64> = Vec::new();
    let merge = |ids: &mut Vec<i64>, pending: &mut Vec<i64>| {
        pending.par_sort_unstable();
        pending.dedup();
        let mut merged = Vec::with_capacity(ids.len() + pending.len());
        let (mut i, mut j) = (0, 0);
        while i < ids.len() || j < pending.len() {
            let take_left = j == pending.len() || (i < ids.len() && ids[i] <= pending[j]);
            let v = if take_left { ids[i] } else { pending[j] };
            if take_left {
                i += 1;
            } else {
                j += 1;
            }
            if merged.last() != Some(&v) {
                merged.push(v);
            }
        }
        *ids = merged;
        pending.clear();
    };
    input.for_each(&mut |c| {
        pending.extend_from_slice(&c.follower);
        pending.extend_from_slice(&c.followee);
        if pending.len() >= 4 << 20 {
            merge(&mut ids, &mut pending);
        }
        Ok(())
    })?;
    merge(&mut ids, &mut pending);
    Ok(ids)
}

/// Spill files of packed edges (key, time), one per hash partition of the pair.
struct Spill {
    dir: tempfile::TempDir,
    writers: Vec<std::sync::Mutex<BufWriter<File>>>,
}

impl Spill {
    fn create(base: Option<&std::path::Path>, partitions: u32) -> Result<Spill> {
        let io = |e: std::io::Error| Error::Io {
            op: "create spill",
            path: base.map_or("temp".into(), |p| p.display().to_string()),
            source: e,
        };
        let dir = match base {
            Some(b) => tempfile::Builder::new()
                .prefix("weibo-friends-")
                .tempdir_in(b),
            None => tempfile::Builder::new().prefix("weibo-friends-").tempdir(),
        }
        .map_err(io)?;
        let writers = (0..partitions)
            .map(|p| {
                File::create(dir.path().join(format!("p{p:05}.bin")))
                    .map(|f| std::sync::Mutex::new(BufWriter::with_capacity(256 << 10, f)))
                    .map_err(io)
            })
            .collect::<Result<_>>()?;
        Ok(Spill { dir, writers })
    }

    fn partition(&self, key: u64) -> usize {
        (bucket(key >> 1, 0x2545_f491_4f6c_dd1d) % self.writers.len() as u64) as usize
    }

    fn append(&self, keys: &[u64], times: &[i64]) -> Result<()> {
        for (key, time) in keys.iter().zip(times) {
            let p = self.partition(*key);
            let mut w = self.writers[p].lock().unwrap_or_else(|e| e.into_inner());
            let mut rec = [0u8; 16];
            rec[..8].copy_from_slice(&key.to_le_bytes());
            rec[8..].copy_from_slice(&time.to_le_bytes());
            w.write_all(&rec).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    fn finish(&self) -> Result<()> {
        for w in &self.writers {
            w.lock()
                .unwrap_or_else(|e| e.into_inner())
                .flush()
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    fn read(&self, p: u32, f: &mut KeySink<'_>) -> Result<()> {
        let path = self.dir.path().join(format!("p{p:05}.bin"));
        let mut reader =
            BufReader::with_capacity(1 << 20, File::open(&path).map_err(|e| self.err(e))?);
        let mut buf = vec![0u8; 16 * 65536];
        loop {
            let mut filled = 0;
            while filled < buf.len() {
                let n = reader.read(&mut buf[filled..]).map_err(|e| self.err(e))?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 {
                return Ok(());
            }
            let records = &buf[..filled - filled % 16];
            let keys: Vec<u64> = records
                .chunks_exact(16)
                .map(|r| u64::from_le_bytes(r[..8].try_into().expect("8 bytes")))
                .collect();
            let times: Vec<i64> = records
                .chunks_exact(16)
                .map(|r| i64::from_le_bytes(r[8..].try_into().expect("8 bytes")))
                .collect();
            f(&keys, &times)?;
            if filled < buf.len() {
                return Ok(());
            }
        }
    }

    fn err(&self, e: std::io::Error) -> Error {
        Error::Io {
            op: "spill",
            path: self.dir.path().display().to_string(),
            source: e,
        }
    }
}

/// Schema of the friends output.
pub fn friends_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("uid_a", DataType::Int64, false),
        Field::new("uid_b", DataType::Int64, false),
        Field::new(
            "since",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]))
}

/// Schema of the per-user friend counts.
pub fn counts_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Int64, false),
        Field::new("friends", DataType::Int64, false),
    ]))
}

impl Friends {
    /// The friends rows as a batch (the result's vectors move into it).
    pub fn pairs_batch(&mut self) -> Result<RecordBatch> {
        RecordBatch::try_new(
            friends_schema(),
            vec![
                Arc::new(Int64Array::from(std::mem::take(&mut self.uid_a))),
                Arc::new(Int64Array::from(std::mem::take(&mut self.uid_b))),
                Arc::new(
                    TimestampMillisecondArray::from(std::mem::take(&mut self.since))
                        .with_timezone("UTC"),
                ),
            ],
        )
        .map_err(|e| Error::Io {
            op: "build friends batch",
            path: "-".into(),
            source: std::io::Error::other(e.to_string()),
        })
    }

    pub fn counts_batch(&self) -> Result<RecordBatch> {
        RecordBatch::try_new(
            counts_schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(
                    self.counts.iter().map(|(u, _)| *u),
                )),
                Arc::new(Int64Array::from_iter_values(
                    self.counts.iter().map(|(_, n)| *n as i64),
                )),
            ],
        )
        .map_err(|e| Error::Io {
            op: "build counts batch",
            path: "-".into(),
            source: std::io::Error::other(e.to_string()),
        })
    }
}

/// Writes a result as `<output>/friends/dt=<date>/` and `<output>/friend_counts/dt=<date>/`
/// (or their `slice=i-of-N/` sub-folders for a sliced run), each committed atomically.
/// Returns where the friends rows went.
pub fn write_output(
    fs: &FileSystems,
    output: &Location,
    date: &str,
    slice: Slice,
    result: &mut Friends,
) -> Result<Location> {
    use crate::partition::{self, Staged};
    let dt = format!("dt={date}");
    let tag = partition::run_tag();
    let stage = |table: &str| {
        let parent = output.join(table);
        if slice == Slice::ALL {
            Staged::new(&parent, &dt, &tag)
        } else {
            Staged::new(
                &parent.join(&dt),
                &format!("slice={}-of-{}", slice.index, slice.count),
                &tag,
            )
        }
    };
    let staged = vec![stage("friends"), stage("friend_counts")];
    let written = (|| -> Result<()> {
        // Ids and times are nearly all distinct: dictionary encoding would only cost.
        partition::write_parquet_with(
            fs,
            &staged[0].tmp.join("part-00000.parquet"),
            friends_schema(),
            Some(&result.pairs_batch()?),
            false,
        )?;
        partition::write_parquet_with(
            fs,
            &staged[1].tmp.join("part-00000.parquet"),
            counts_schema(),
            Some(&result.counts_batch()?),
            false,
        )?;
        partition::commit(fs, &staged)
    })();
    if let Err(e) = written {
        partition::abandon(fs, &staged);
        return Err(e);
    }
    Ok(staged[0].target.clone())
}

//! Friendships: mutual follows, computed in batch from cleaned follow edges.
//!
//! Seed 001's online fix for racing follow/unfollow is a canonical pair `(min id, max id)`
//! with direction bits (1: the small id follows the large one, 2: the reverse, 3: friends).
//! In batch that becomes a sort: every edge is packed into one `u64`,
//! `pair << 1 | direction`, where `pair` is `small << 32 | large` over 31/32-bit user codes
//! and `direction` is 0 when the small id follows the large one. Beside the key travels the
//! follow time in 32 bits (whole seconds; other times are kept exactly on a side list), so an
//! edge is 12 bytes and the input is decoded once. After the sort the two directions of a
//! pair sit side by side, equal neighbours are duplicate edges, and one scan yields the pairs
//! with their `since`.
//!
//! User codes are offsets from the smallest id when the ids span less than 2^31 (checked
//! from the Parquet footers), else ranks in the sorted set of distinct ids (a dictionary
//! built in a first pass); either way code order is id order, so sorted pairs come out
//! sorted by `(uid_a, uid_b)`. Offsets also keep the keys short (Weibo's ten-digit uids of
//! one crawl span a few million), which the radix sort turns into fewer levels.
//!
//! Clean writes follows in parts by canonical pair (both directions of a pair in one part,
//! each part sorted by `(min id, max id, follower)`, its footer saying `p/N`). Such input is
//! joined a part at a time, each on one thread: a part as clean writes it in one pass (a
//! pair's two directions are neighbouring rows); several dates of a part, or a part in
//! another order, in buffers of that part's edges, where each direction is sorted only if
//! it did not come sorted and one merge of the two finds the pairs. Each part's pairs make
//! one sorted output file. Any other input takes the general path below.
//!
//! Out of core: when the packed edges would exceed the memory budget, edges are hash-
//! partitioned by pair into spill files and each partition is sorted on its own. Scale-out:
//! `--partition i/N` keeps only pairs whose hash bucket is `i`. Both produce exactly the rows
//! the single in-memory run produces (for their buckets).
//!
//! Invariants: `uid_a < uid_b` in every output row; each pair appears once; `since` is the
//! later of the two follow times when both are known (for an edge crawled several times, its
//! earliest known time).

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{
    DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit, TimestampMillisecondType,
};

use rayon::prelude::*;
use serde::Serialize;

use crate::dataset::follows;
use crate::dataset::partition::{BackgroundParquetWriter, OpenedParquet};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};
use crate::spill::Partitions;

/// No follow time known.
const NO_TIME: i64 = i64::MIN;
/// Largest code that fits the small side of a pair (31 bits).
const MAX_CODE: i64 = (1 << 31) - 1;

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
        self.count == 1 || bucket(pair, SLICE_SEED) % self.count as u64 == self.index as u64
    }
}

/// Seeds the slice hash apart from the out-of-core partition hash of the same pairs.
const SLICE_SEED: u64 = 0x5bd1_e995;

/// A well-mixed hash of a pair (by ids, not codes, so every machine agrees on buckets
/// whatever its dictionary).
fn bucket(pair: u64, seed: u64) -> u64 {
    crate::hash::pair(pair, seed)
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
    /// Pair partitions of the input joined one at a time, in memory (clean's follows are
    /// partitioned by canonical pair); 0 when the input is not, or the run is out of core.
    pub pair_parts: u32,
    /// Of those, the parts found in canonical pair order with no edge twice (one date of
    /// clean's follows) and read in one pass, with no buffer and no sort.
    pub streamed_parts: u32,
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
    /// `id - base`: ids spanning less than 2^31, whatever their magnitude.
    Offset(i64),
    Dictionary(Vec<i64>),
}

impl Coder {
    fn encode(&self, id: i64) -> u64 {
        match self {
            Coder::Offset(base) => id.wrapping_sub(*base) as u64,
            Coder::Dictionary(ids) => ids.binary_search(&id).map_or(u64::MAX, |i| i as u64),
        }
    }

    fn decode(&self, code: u64) -> i64 {
        match self {
            Coder::Offset(base) => code as i64 + base,
            Coder::Dictionary(ids) => ids[code as usize],
        }
    }

    /// Codes (held as i64) to ids in place, the coder's kind matched once for the slice.
    fn decode_all(&self, codes: &mut [i64]) {
        match self {
            Coder::Offset(base) => codes.iter_mut().for_each(|c| *c += base),
            Coder::Dictionary(ids) => codes.iter_mut().for_each(|c| *c = ids[*c as usize]),
        }
    }
}

/// One chunk of edges as read: the follower/followee columns and, when asked for, the
/// follow times (Arrow arrays, so no copy is made).
struct EdgeChunk {
    follower: Int64Array,
    followee: Int64Array,
    time: Option<TimestampMillisecondArray>,
}

impl EdgeChunk {
    fn len(&self) -> usize {
        self.follower.len()
    }

    fn time(&self, i: usize) -> Option<i64> {
        self.time
            .as_ref()
            .and_then(|t| t.is_valid(i).then(|| t.value(i)))
    }

    /// The follow times (ms) and their validity, when the chunk has times. A validity bitmap
    /// with no null in it (Parquet readers give one for any optional column) is no bitmap:
    /// the packing and scanning loops then skip a bit test per row.
    fn times(&self) -> Option<(&[i64], Option<&arrow::buffer::NullBuffer>)> {
        self.time.as_ref().map(|t| {
            let nulls = t.nulls().filter(|n| n.null_count() > 0);
            (t.values().as_ref(), nulls)
        })
    }
}

/// Reads the follower/followee/followed_at columns of the input Parquet files, chunk by chunk.
/// Each file is opened once (its footer read once); its row groups are the units of work, so
/// one large file is decoded on every thread (by file, it would be decoded on one core).
struct Input {
    files: Vec<OpenedParquet>,
    /// Each file's footer, read when it was opened.
    metas: Vec<FileMeta>,
}

/// What a file's Parquet footer says: rows per row group, and the id range when statistics
/// are present.
struct FileMeta {
    rows: usize,
    row_groups: Vec<usize>,
    id_range: Option<(i64, i64)>,
    /// `(p, N)`: the file is part `p` of `N` by canonical pair, as clean writes follows
    /// (see [`follows`]).
    pair_partition: Option<(u32, u32)>,
}

/// One row group of one input file: a unit of decoding.
#[derive(Clone, Copy)]
struct Part {
    file: usize,
    row_group: usize,
    rows: usize,
}

impl Input {
    fn open(fs: &FileSystems, files: &[FileEntry]) -> Result<Input> {
        let files: Vec<OpenedParquet> = files
            .par_iter()
            .map(|f| OpenedParquet::open(fs, f))
            .collect::<Result<_>>()?;
        let metas = files.iter().map(Input::meta).collect();
        Ok(Input { files, metas })
    }

    /// Rows and id range of a file from its footer alone (the data pages are not read).
    fn meta(file: &OpenedParquet) -> FileMeta {
        use parquet::file::statistics::Statistics;
        let meta = file.metadata();
        let schema = meta.file_metadata().schema_descr();
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
        let pair_partition = meta
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|kv| kv.key == follows::PAIR_PARTITION_KEY))
            .and_then(|kv| follows::parse_footer_value(kv.value.as_deref()?));
        FileMeta {
            rows: meta.file_metadata().num_rows().max(0) as usize,
            row_groups: file.row_group_rows(),
            id_range: range.filter(|(a, b)| a <= b),
            pair_partition,
        }
    }

    /// The files grouped by pair partition, largest group first, when every file says which
    /// part of the same `N` it is: then each group holds both directions of all its pairs
    /// (and every copy of an edge crawled on several dates), and can be joined alone. `None`
    /// for any other input (another writer's, or dates cleaned into different `N`).
    fn pair_groups(&self) -> Option<Vec<Vec<usize>>> {
        let n = self.metas.first()?.pair_partition?.1;
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); n as usize];
        for (file, meta) in self.metas.iter().enumerate() {
            match meta.pair_partition {
                Some((p, m)) if m == n => groups[p as usize].push(file),
                _ => return None,
            }
        }
        groups.retain(|g| !g.is_empty());
        let rows = |g: &Vec<usize>| g.iter().map(|&f| self.metas[f].rows).sum::<usize>();
        groups.sort_by_key(|g| std::cmp::Reverse(rows(g)));
        Some(groups)
    }

    /// Every row group of every file, in file order.
    fn parts(&self) -> Vec<Part> {
        self.metas
            .iter()
            .enumerate()
            .flat_map(|(file, m)| {
                m.row_groups
                    .iter()
                    .enumerate()
                    .map(move |(row_group, &rows)| Part {
                        file,
                        row_group,
                        rows,
                    })
            })
            .collect()
    }

    /// Where a group of files comes from, for messages: its first file.
    fn location_of(&self, files: &[usize]) -> &Location {
        self.files[files[0]].location()
    }

    /// Where a part comes from, for messages.
    fn location(&self, part: Part) -> &Location {
        self.files[part.file].location()
    }

    /// Decodes follower/followee (and followed_at when `times`) of one row group (or of a
    /// whole file when `row_group` is `None`), chunk by chunk. Without times the widest
    /// column is not decompressed at all.
    fn columns(
        &self,
        file: usize,
        row_group: Option<usize>,
        times: bool,
        f: &mut dyn FnMut(EdgeChunk) -> Result<()>,
    ) -> Result<()> {
        let names: &[&str] = if times {
            &["follower", "followee", "followed_at"]
        } else {
            &["follower", "followee"]
        };
        let file = &self.files[file];
        file.read_columns(row_group, names, &mut |batch| {
            f(chunk_from_batch(batch, file.location())?)
        })
    }
}

fn chunk_from_batch(batch: &RecordBatch, path: &Location) -> Result<EdgeChunk> {
    let missing = |name: &str| Error::BadInput {
        path: path.to_string(),
        line: 0,
        reason: format!("follows Parquet lacks an integer column {name:?}"),
    };
    let ids = |name: &str| -> Result<Int64Array> {
        let col = batch.column_by_name(name).ok_or_else(|| missing(name))?;
        // Other writers may keep ids in narrower or unsigned integers: widened to int64
        // (a u64 beyond i64 fails the cast, and is reported, rather than wrapping).
        let widened;
        let col =
            if col.data_type().is_integer() && col.data_type() != &DataType::Int64 {
                let strict = arrow::compute::CastOptions {
                    safe: false,
                    ..Default::default()
                };
                widened = arrow::compute::cast_with_options(col, &DataType::Int64, &strict)
                    .map_err(|e| Error::BadInput {
                        path: path.to_string(),
                        line: 0,
                        reason: format!("{name:?}: {e}"),
                    })?;
                &widened
            } else {
                col
            };
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
        Ok(arr.clone())
    };
    Ok(EdgeChunk {
        follower: ids("follower")?,
        followee: ids("followee")?,
        time: follow_times(batch, path)?,
    })
}

/// The follow times of a batch in milliseconds. Ours are stored in milliseconds; DuckDB and
/// Spark write microseconds, others seconds or nanoseconds: any timestamp unit is converted
/// (finer ones truncated to the millisecond), so no input loses its times silently. A
/// `followed_at` that is not a timestamp is an error; no such column means no times.
fn follow_times(batch: &RecordBatch, path: &Location) -> Result<Option<TimestampMillisecondArray>> {
    let Some(column) = batch.column_by_name("followed_at") else {
        return Ok(None);
    };
    if let Some(ms) = column.as_primitive_opt::<TimestampMillisecondType>() {
        return Ok(Some(ms.clone()));
    }
    let bad = |reason: String| Error::BadInput {
        path: path.to_string(),
        line: 0,
        reason,
    };
    if !matches!(column.data_type(), DataType::Timestamp(..)) {
        return Err(bad(format!(
            "followed_at is {}, not a timestamp",
            column.data_type()
        )));
    }
    let ms = arrow::compute::cast(column, &DataType::Timestamp(TimeUnit::Millisecond, None))
        .map_err(|e| bad(format!("followed_at: {e}")))?;
    Ok(ms.as_primitive_opt::<TimestampMillisecondType>().cloned())
}

/// Mutual pairs of edges held in memory (ids below 2^31), found exactly as the in-memory job
/// finds them: 12-byte packed edges, a parallel sort, one scan. Returns `(uid_a, uid_b,
/// since)` sorted; for benchmarks and tests of the core without Parquet around it.
pub fn mutual_pairs_of(
    follower: &[i64],
    followee: &[i64],
    followed_at: &[Option<i64>],
) -> Vec<(i64, i64, Option<i64>)> {
    let chunk = EdgeChunk {
        follower: Int64Array::from(follower.to_vec()),
        followee: Int64Array::from(followee.to_vec()),
        time: Some(TimestampMillisecondArray::from(followed_at.to_vec())),
    };
    let coder = Coder::Offset(0);
    let mut edges = Vec::with_capacity(follower.len());
    let mut aside = Vec::new();
    edges.resize(follower.len(), PackedEdge::default());
    let packed = pack_into(
        &coder,
        Slice::ALL,
        &"memory",
        &chunk,
        &mut aside,
        &mut edges,
    )
    .expect("ids below 2^31, as documented, all have codes");
    edges.truncate(packed.edges);
    let pairs = sort_and_scan(
        &mut edges,
        &AsideTimes(aside).seal(),
        &mut FriendsStats::default(),
    );
    pairs
        .iter()
        .map(|&(p, t)| {
            let since = (t != NO_TIME).then_some(t);
            (coder.decode(p >> 32), coder.decode(p & 0xffff_ffff), since)
        })
        .collect()
}

/// Sorts packed edges in parallel and finds the mutual pairs among them.
fn sort_and_scan(edges: &mut [PackedEdge], aside: &AsideTimes, stats: &mut FriendsStats) -> Pairs {
    // A parallel in-place radix sort: its low-memory tuner keeps the extra memory to a small
    // fraction of the edges, and on these keys it is faster than rayon's parallel pdqsort
    // (docs/design/friends.md).
    {
        use rdst::RadixSort;
        edges.radix_sort_builder().with_low_mem_tuner().sort();
    }
    scan_sorted(edges, aside, stats)
}

/// Packs an edge: `(small << 32 | large) << 1 | dir`, dir 1 when the large id follows.
/// `None` when an id has no code: outside the range the Parquet footers announced.
fn pack(coder: &Coder, follower: i64, followee: i64) -> Option<u64> {
    let (a, b) = (coder.encode(follower), coder.encode(followee));
    if a.max(b) > MAX_CODE as u64 {
        return None;
    }
    let (small, large, dir) = if a < b { (a, b, 0) } else { (b, a, 1) };
    Some((((small << 32) | large) << 1) | dir)
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

/// Receives a run's results as they are found, batch by batch, so that no stage has to hold
/// the whole output: friend pairs and per-user friend counts (each uid in exactly one
/// batch). Pairs come in sorted runs: the batches of one `run` arrive in order and are
/// sorted by `(uid_a, uid_b)` together; different runs hold different pairs, and a run's
/// batches may be interleaved with another's. Batches are Arrow record batches of
/// [`friends_schema`] and [`counts_schema`] ([`pair_columns`] and [`count_columns`] read
/// them), so a Parquet writer takes them as they are.
pub trait FriendsSink {
    fn pairs(&mut self, run: usize, batch: &RecordBatch) -> Result<()>;
    fn counts(&mut self, batch: &RecordBatch) -> Result<()>;

    /// A sink that stores each run as a file of its own may offer to have runs written
    /// straight from the threads that find them (see [`RunFiles`]); their pairs then do
    /// not come through [`FriendsSink::pairs`].
    fn run_files(&self) -> Option<RunFiles> {
        None
    }
}

/// Writes sorted runs of pairs from worker threads, a Parquet file per run, into a
/// [`FriendsWriter`]'s staged folder: each pair partition's run is then encoded by the
/// thread that joined it, beside the others, instead of queueing for two encoder threads
/// after the join.
#[derive(Clone)]
pub struct RunFiles {
    fs: FileSystems,
    dir: Location,
    props: parquet::file::properties::WriterProperties,
    written: Arc<std::sync::atomic::AtomicUsize>,
    counts_dir: Location,
    counts_props: parquet::file::properties::WriterProperties,
    counts_written: Arc<std::sync::atomic::AtomicUsize>,
}

impl RunFiles {
    /// Opens `<dir>/part-<part>.parquet` and counts it in `written`.
    fn create(
        &self,
        dir: &Location,
        part: usize,
        schema: &SchemaRef,
        props: &parquet::file::properties::WriterProperties,
        written: &std::sync::atomic::AtomicUsize,
    ) -> Result<crate::dataset::partition::ParquetWriter> {
        let location = dir.join(&format!("part-{part:05}.parquet"));
        let writer = crate::dataset::partition::ParquetWriter::create_staged(
            &self.fs,
            &location,
            schema.clone(),
            props.clone(),
        )?;
        written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(writer)
    }

    /// Writes run `run`, `(pair, since)` rows sorted by pair, as `part-<run>.parquet`.
    fn write(&self, run: usize, coder: &Coder, rows: &[(u64, i64)]) -> Result<()> {
        let schema = friends_schema();
        let mut writer = self.create(&self.dir, run, &schema, &self.props, &self.written)?;
        for chunk in rows.chunks(SINK_BATCH) {
            writer.write(&pair_batch(coder, &schema, chunk)?)?;
        }
        writer.finish()
    }

    /// Writes the friend counts a cursor gives (a range of codes) as the counts file
    /// `part-<part>.parquet`. Returns how many users it held.
    fn write_counts(&self, part: usize, coder: &Coder, counts: &mut CountCursor) -> Result<u64> {
        let schema = counts_schema();
        let mut writer = self.create(
            &self.counts_dir,
            part,
            &schema,
            &self.counts_props,
            &self.counts_written,
        )?;
        let mut users = 0;
        loop {
            let (mut uids, mut friends) = (Vec::new(), Vec::new());
            counts.next_batch(coder, &mut uids, &mut friends, SINK_BATCH);
            if uids.is_empty() {
                writer.finish()?;
                return Ok(users);
            }
            users += uids.len() as u64;
            writer.write(&count_batch(&schema, uids, friends)?)?;
        }
    }
}

/// Users and their friend counts as a batch of [`counts_schema`].
fn count_batch(schema: &SchemaRef, uids: Vec<i64>, friends: Vec<i64>) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(uids)),
        Arc::new(Int64Array::from(friends)),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(batch_error)
}

/// `uid_a`, `uid_b` and `since` (null when unknown) of a batch of [`friends_schema`].
pub fn pair_columns(batch: &RecordBatch) -> (&Int64Array, &Int64Array, &TimestampMillisecondArray) {
    (
        batch.column(0).as_primitive(),
        batch.column(1).as_primitive(),
        batch.column(2).as_primitive(),
    )
}

/// `uid` and `friends` of a batch of [`counts_schema`].
pub fn count_columns(batch: &RecordBatch) -> (&Int64Array, &Int64Array) {
    (
        batch.column(0).as_primitive(),
        batch.column(1).as_primitive(),
    )
}

/// Rows per batch handed to a [`FriendsSink`].
const SINK_BATCH: usize = 64 * 1024;

/// Computes mutual follows over the given follows Parquet files (files or folders), all in
/// memory and sorted: for tests, the demo and other small callers. Jobs stream with
/// [`run_to`].
pub fn run(fs: &FileSystems, inputs: &[String], options: &FriendsOptions) -> Result<Friends> {
    let mut friends = Friends::default();
    friends.stats = run_to(fs, inputs, options, &mut friends)?;
    Ok(friends.sorted())
}

/// Computes mutual follows over the given follows Parquet files (files or folders) and hands
/// the pairs and counts to `sink` as they are found. Memory: the packed edges (in memory) or
/// one partition (out of core), plus the pairs of one partition.
pub fn run_to(
    fs: &FileSystems,
    inputs: &[String],
    options: &FriendsOptions,
    sink: &mut dyn FriendsSink,
) -> Result<FriendsStats> {
    let files: Vec<FileEntry> = fs
        .expand_inputs(inputs)?
        .into_iter()
        .filter(|f| {
            f.location
                .file_name()
                .is_some_and(|n| n.ends_with(".parquet"))
        })
        .collect();
    let input = Input::open(fs, &files)?;

    // Pass 1: how many edges and the id range, from the Parquet footers when they carry
    // statistics (ours do); files without them are scanned.
    let metas = &input.metas;
    let edges_read: u64 = metas.iter().map(|m| m.rows as u64).sum();
    let mut max_id = 0i64;
    let mut min_id = i64::MAX;
    for (file, meta) in metas.iter().enumerate() {
        match meta.id_range {
            Some((lo, hi)) => {
                min_id = min_id.min(lo);
                max_id = max_id.max(hi);
            }
            None => input.columns(file, None, false, &mut |c| {
                for &id in c.follower.values().iter().chain(c.followee.values()) {
                    min_id = min_id.min(id);
                    max_id = max_id.max(id);
                }
                Ok(())
            })?,
        }
    }
    let coder = if edges_read == 0 {
        Coder::Offset(0)
    } else if max_id
        .checked_sub(min_id)
        .is_some_and(|span| span <= MAX_CODE)
    {
        Coder::Offset(min_id)
    } else {
        Coder::Dictionary(build_dictionary(&input)?)
    };
    if let Coder::Dictionary(ids) = &coder {
        if ids.len() as u64 > MAX_CODE as u64 {
            return Err(Error::Usage(format!(
                "{} distinct users: more than 2^31 does not fit the packed pair layout",
                ids.len()
            )));
        }
    }

    let needed = edges_read * PACKED_EDGE_BYTES as u64;
    let partitions = if needed <= options.memory_budget {
        1
    } else {
        needed.div_ceil(options.memory_budget.max(1)).clamp(2, 4096) as u32
    };
    log::info!(
        "friends: {edges_read} edges, {} coding, {partitions} partition(s) for a {} MB budget",
        if matches!(coder, Coder::Offset(_)) {
            "offset"
        } else {
            "dictionary"
        },
        options.memory_budget >> 20
    );

    let mut stats = FriendsStats {
        edges_read,
        partitions,
        dictionary_encoded: matches!(coder, Coder::Dictionary(_)),
        ..FriendsStats::default()
    };
    // How many user codes there may be: offsets up to the largest id, or dictionary ranks.
    let codes = match &coder {
        Coder::Offset(base) => max_id.wrapping_sub(*base) as u64 + 1,
        Coder::Dictionary(ids) => ids.len() as u64,
    };
    if partitions == 1 {
        let run_files = sink.run_files();
        // Codes few enough to count in place, by code (every code's counter is zeroed and
        // read once: 4 bytes a code, against the 12 bytes an edge the budget allows).
        let count_codes =
            (edges_read > 0 && codes <= 2 * edges_read + (1 << 20)).then_some(codes as usize);
        let (pairs, runs, counts) = match input.pair_groups() {
            Some(groups) => {
                let (pairs, counts) = mutual_by_pair_part(
                    &input,
                    &groups,
                    &coder,
                    options.slice,
                    run_files.as_ref(),
                    count_codes,
                    &mut stats,
                )?;
                (pairs, Runs::PerList, counts)
            }
            None => {
                let pairs = mutual_in_memory(&input, &coder, options.slice, &mut stats)?;
                stats.mutual_pairs = pairs.len() as u64;
                (pairs, Runs::Dealt, None)
            }
        };
        let counts = counts.unwrap_or_else(|| friend_counts(&pairs));
        log::debug!("friends: friends counted, peak {} MB", peak_mb());
        match (&run_files, &counts) {
            // Runs written by the join leave only the counts, which are written the same
            // way: a file per range of codes, each on a thread of its own.
            (Some(files), FriendCounts::Buckets(ends)) if runs == Runs::PerList => {
                let buckets = ends.buckets();
                let step = buckets.div_ceil(rayon::current_num_threads().max(1)).max(1);
                let users: Vec<u64> = (0..buckets.div_ceil(step))
                    .into_par_iter()
                    .map(|part| {
                        let range = part * step..((part + 1) * step).min(buckets);
                        files.write_counts(part, &coder, &mut ends.cursor(range))
                    })
                    .collect::<Result<_>>()?;
                stats.users_with_friends += users.iter().sum::<u64>();
            }
            _ => {
                let to_emit = if runs == Runs::PerList && run_files.is_some() {
                    &Pairs::default()
                } else {
                    &pairs
                };
                stats.users_with_friends +=
                    emit(&coder, to_emit, runs, &mut counts.cursor(), sink)?;
            }
        }
        log::debug!("friends: output handed over, peak {} MB", peak_mb());
    } else {
        let plan = CountPlan::new(codes, edges_read, partitions, options.memory_budget);
        mutual_out_of_core(&input, &coder, options, partitions, plan, &mut stats, sink)?;
    }
    stats.reciprocity = if stats.distinct_edges > 0 {
        2.0 * stats.mutual_pairs as f64 / stats.distinct_edges as f64
    } else {
        0.0
    };
    log::debug!("friends: done, peak {} MB", peak_mb());
    Ok(stats)
}

/// Friends per user code, in code order, of pairs held in memory: every pair counts once for
/// each of its two users.
enum FriendCounts {
    /// Indexed by code: codes span little more than the users who have friends (offsets from
    /// the smallest id of one crawl, or dictionary ranks), so counting in place beats
    /// sorting the pair ends.
    Dense(Vec<u32>),
    /// The pair ends, sorted: when codes are too sparse for an array.
    SortedEnds(Vec<u64>),
    /// The pair ends by range of codes, counted a range at a time as they are read.
    Buckets(EndLists),
}

impl FriendCounts {
    /// The counts in code order, a batch at a time.
    fn cursor(&self) -> CountCursor<'_> {
        match self {
            FriendCounts::Dense(by_code) => CountCursor::Dense {
                by_code,
                at: 0,
                base: 0,
            },
            FriendCounts::SortedEnds(ends) => CountCursor::Runs(Box::new(runs_of(ends))),
            FriendCounts::Buckets(ends) => ends.cursor(0..ends.buckets()),
        }
    }
}

/// Where the next batch of friend counts comes from.
enum CountCursor<'a> {
    /// Counts of codes `base..`, indexed from `base`; `at` is the first index not handed
    /// out yet.
    Dense {
        by_code: &'a [u32],
        at: usize,
        base: u64,
    },
    /// `(code, friends)` in code order.
    Runs(Box<dyn Iterator<Item = (u64, u64)> + 'a>),
    /// The buckets `next..end` of an [`EndLists`] still to count; `by_code` holds the counts
    /// of the one before, of codes from `base`, handed out up to `at`.
    Buckets {
        ends: &'a EndLists,
        next: usize,
        end: usize,
        by_code: Vec<u32>,
        at: usize,
        base: u64,
    },
}

impl CountCursor<'_> {
    /// Up to `max` users with friends and their counts, as ids; empty when none are left.
    fn next_batch(
        &mut self,
        coder: &Coder,
        uids: &mut Vec<i64>,
        friends: &mut Vec<i64>,
        max: usize,
    ) {
        uids.clear();
        friends.clear();
        match self {
            CountCursor::Dense { by_code, at, base } => {
                uids.resize(max, 0);
                friends.resize(max, 0);
                let kept = take_counted(by_code, at, *base, uids, friends, 0);
                uids.truncate(kept);
                friends.truncate(kept);
                coder.decode_all(uids);
            }
            CountCursor::Buckets {
                ends,
                next,
                end,
                by_code,
                at,
                base,
            } => {
                uids.resize(max, 0);
                friends.resize(max, 0);
                let mut kept = 0;
                loop {
                    kept = take_counted(by_code, at, *base, uids, friends, kept);
                    if kept == max || *next == *end {
                        break;
                    }
                    *base = ends.count(*next, by_code);
                    (*at, *next) = (0, *next + 1);
                }
                uids.truncate(kept);
                friends.truncate(kept);
                coder.decode_all(uids);
            }
            CountCursor::Runs(runs) => {
                for (code, n) in runs.take(max) {
                    uids.push(code as i64);
                    friends.push(n as i64);
                }
                coder.decode_all(uids);
            }
        }
    }
}

/// Moves the users of `by_code[*at..]` (counts of codes from `base`) who have friends into
/// `uids` and `friends` from index `kept` on, until those are full or the counts run out;
/// returns the new `kept`. Every code is written and only those with friends are kept (the
/// index moves on `n > 0`): about half the codes have none, at random, and a branch on it
/// was mispredicted that often.
fn take_counted(
    by_code: &[u32],
    at: &mut usize,
    base: u64,
    uids: &mut [i64],
    friends: &mut [i64],
    mut kept: usize,
) -> usize {
    while *at < by_code.len() && kept < uids.len() {
        let n = by_code[*at];
        uids[kept] = (base + *at as u64) as i64;
        friends[kept] = n as i64;
        kept += (n > 0) as usize;
        *at += 1;
    }
    kept
}

/// Codes per bucket of [`EndBuckets`], as a shift: a bucket's 2^15 counters (128 KiB) stay
/// in a core's cache while its ends are counted.
const END_BUCKET_SHIFT: u32 = 15;

/// The ends of the pairs found so far, by range of user codes (a bucket), in a list per
/// thread and bucket: counted a bucket at a time once every part is joined (only then is a
/// count final), each in counters that stay in cache. Counting every end as its pair was
/// found, in atomic counters over all the codes, waited on memory at each one (the larger
/// ends land anywhere in the counters; docs/design/friends.md).
struct EndBuckets {
    codes: u64,
    lists: Vec<std::sync::Mutex<Vec<Vec<u32>>>>,
}

impl EndBuckets {
    fn new(codes: u64, threads: usize) -> EndBuckets {
        let buckets = (codes >> END_BUCKET_SHIFT) as usize + 1;
        EndBuckets {
            codes,
            lists: (0..threads.max(1))
                .map(|_| std::sync::Mutex::new(vec![Vec::new(); buckets]))
                .collect(),
        }
    }

    /// Adds both ends of `pairs` to the lists of `thread`; false when an end is past the
    /// codes.
    fn add(&self, thread: usize, pairs: &[(u64, i64)]) -> bool {
        let mut lists = self.lists[thread % self.lists.len()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for &(pair, _) in pairs {
            for code in [pair >> 32, pair & 0xffff_ffff] {
                match lists.get_mut((code >> END_BUCKET_SHIFT) as usize) {
                    Some(list) if code < self.codes => list.push(code as u32),
                    _ => return false,
                }
            }
        }
        true
    }

    fn finish(self) -> EndLists {
        EndLists {
            codes: self.codes,
            lists: self
                .lists
                .into_iter()
                .map(|l| l.into_inner().unwrap_or_else(|e| e.into_inner()))
                .collect(),
        }
    }
}

/// [`EndBuckets`] once every part is joined.
struct EndLists {
    codes: u64,
    /// By thread, then bucket.
    lists: Vec<Vec<Vec<u32>>>,
}

impl EndLists {
    fn buckets(&self) -> usize {
        self.lists.first().map_or(0, Vec::len)
    }

    /// The friends of every code of bucket `b`, in `by_code` (one count a code of the
    /// bucket); returns the bucket's first code.
    fn count(&self, b: usize, by_code: &mut Vec<u32>) -> u64 {
        let base = (b as u64) << END_BUCKET_SHIFT;
        let span = self.codes.saturating_sub(base).min(1 << END_BUCKET_SHIFT);
        by_code.clear();
        by_code.resize(span as usize, 0);
        for list in self.lists.iter().map(|lists| &lists[b]) {
            for &code in list {
                // An end is in its bucket's range: `EndBuckets::add` placed it by its code.
                by_code[(code as u64 - base) as usize] += 1;
            }
        }
        base
    }

    /// The counts of `buckets`, in code order.
    fn cursor(&self, buckets: std::ops::Range<usize>) -> CountCursor<'_> {
        CountCursor::Buckets {
            ends: self,
            next: buckets.start,
            end: buckets.end,
            by_code: Vec::new(),
            at: 0,
            base: 0,
        }
    }
}

/// `(code, how many times)` of sorted codes.
fn runs_of(sorted: &[u64]) -> impl Iterator<Item = (u64, u64)> + '_ {
    sorted
        .chunk_by(|x, y| x == y)
        .map(|run| (run[0], run.len() as u64))
}

fn friend_counts(pairs: &Pairs) -> FriendCounts {
    let ends = || pairs.iter().flat_map(|(p, _)| [p >> 32, p & 0xffff_ffff]);
    let span = pairs
        .iter()
        .map(|(p, _)| p & 0xffff_ffff)
        .max()
        .map_or(0, |c| c + 1);
    // An array of 4 bytes a code against 8 bytes an end to sort: dense while codes are at
    // most a few times the ends (and a count fits in 4 bytes: codes are below 2^31).
    if span <= 4 * pairs.len() as u64 + (1 << 20) {
        // Each thread owns a range of codes and counts the ends that fall in it: the large
        // ends land all over the array, and one thread incrementing them in turn spent most
        // of its time waiting on memory (shared atomic counters would serialise instead).
        let mut by_code = vec![0u32; span as usize];
        let step = (span as usize)
            .div_ceil(rayon::current_num_threads().max(1))
            .max(1);
        by_code
            .par_chunks_mut(step)
            .enumerate()
            .for_each(|(i, counts)| {
                let (lo, len) = ((i * step) as u64, counts.len() as u64);
                // Without a branch: half the large ends fall outside this thread's range at
                // random, and each mispredicted branch cut short the misses the processor
                // had in flight. An end outside adds 0 to the first counter instead.
                for list in &pairs.0 {
                    for &(pair, _) in list {
                        for code in [pair >> 32, pair & 0xffff_ffff] {
                            let at = code.wrapping_sub(lo);
                            let inside = at < len;
                            counts[if inside { at as usize } else { 0 }] += inside as u32;
                        }
                    }
                }
            });
        FriendCounts::Dense(by_code)
    } else {
        let mut sorted: Vec<u64> = ends().collect();
        rdst::RadixSort::radix_sort_unstable(&mut sorted);
        FriendCounts::SortedEnds(sorted)
    }
}

/// How the lists of a [`Pairs`] make sorted runs for a [`FriendsSink`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runs {
    /// The lists laid end to end are one sorted sequence: its batches are dealt in turn to
    /// two runs, so that a sink which encodes each run on a thread of its own keeps two busy.
    Dealt,
    /// Each list is sorted on its own and is a run (one pair partition's pairs).
    PerList,
}

/// Hands `(pair, since)` rows, in the sorted runs `runs` says, and `(user code, friends)` in
/// code order to the sink as ids, a batch of each in turn, so a sink that encodes each output
/// on its own thread keeps both threads busy; either may be empty. Returns how many users
/// there were.
fn emit(
    coder: &Coder,
    pairs: &Pairs,
    runs: Runs,
    counts: &mut CountCursor,
    sink: &mut dyn FriendsSink,
) -> Result<u64> {
    let mut pair_chunks = pairs
        .0
        .iter()
        .enumerate()
        .flat_map(|(list, rows)| rows.chunks(SINK_BATCH).map(move |batch| (list, batch)))
        .enumerate()
        .map(|(n, (list, batch))| match runs {
            Runs::Dealt => (n % 2, batch),
            Runs::PerList => (list, batch),
        });
    let mut users = 0;
    let (pair_schema, count_schema) = (friends_schema(), counts_schema());
    loop {
        let pairs_left = match pair_chunks.next() {
            Some((run, chunk)) => {
                sink.pairs(run, &pair_batch(coder, &pair_schema, chunk)?)?;
                true
            }
            None => false,
        };
        let (mut uids, mut friends) = (Vec::new(), Vec::new());
        counts.next_batch(coder, &mut uids, &mut friends, SINK_BATCH);
        if !uids.is_empty() {
            users += uids.len() as u64;
            sink.counts(&count_batch(&count_schema, uids, friends)?)?;
        } else if !pairs_left {
            return Ok(users);
        }
    }
}

/// `(pair, since)` rows as a batch of [`friends_schema`]: each column built once, in place
/// (the unknown times marked in a validity bitmap, not through `Option`s).
fn pair_batch(coder: &Coder, schema: &SchemaRef, chunk: &[(u64, i64)]) -> Result<RecordBatch> {
    let mut a: Vec<i64> = chunk.iter().map(|(p, _)| (p >> 32) as i64).collect();
    let mut b: Vec<i64> = chunk
        .iter()
        .map(|(p, _)| (p & 0xffff_ffff) as i64)
        .collect();
    coder.decode_all(&mut a);
    coder.decode_all(&mut b);
    let known = arrow::buffer::BooleanBuffer::collect_bool(chunk.len(), |i| chunk[i].1 != NO_TIME);
    let since: Vec<i64> = chunk.iter().map(|&(_, t)| t).collect();
    let since = TimestampMillisecondArray::new(
        since.into(),
        Some(arrow::buffer::NullBuffer::new(known)).filter(|n| n.null_count() > 0),
    )
    .with_timezone("UTC");
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(a)),
        Arc::new(Int64Array::from(b)),
        Arc::new(since),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(batch_error)
}

fn peak_mb() -> u64 {
    crate::report::peak_rss_bytes().unwrap_or(0) >> 20
}

/// A follow time in 32 bits: whole seconds since 1970 (what crawlers give), or one of two
/// markers. Times that do not fit (milliseconds, before 1970, after 2106) are exact in an
/// [`AsideTimes`] list instead; there are none in crawled data, so the list stays empty.
const TIME_NONE: u32 = u32::MAX;
const TIME_ASIDE: u32 = u32::MAX - 1;

fn time_code(ms: Option<i64>) -> u32 {
    ms.map_or(TIME_NONE, whole_seconds)
}

/// An edge while sorting: its packed key and time code, 12 bytes.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, packed(4))]
struct PackedEdge {
    key: u64,
    time: u32,
}

/// Edges sort by their key alone; the time rides along. With offset codes the key's top
/// bytes are mostly zero, and the radix sort skips a level whose bytes are all equal.
impl rdst::RadixKey for PackedEdge {
    const LEVELS: usize = 8;
    #[inline]
    fn get_level(&self, level: usize) -> u8 {
        ({ self.key } >> (level * 8)) as u8
    }
}

const PACKED_EDGE_BYTES: usize = std::mem::size_of::<PackedEdge>();

/// The in-memory run's edges: a zeroed anonymous mapping of their own, not the allocator's.
/// Dropping it unmaps it at once, so the output phase's buffers do not stack on top of
/// memory the allocator would still be holding. It is not asked for in huge pages: zeroing
/// them on first touch cost more system time than 4 KiB pages (docs/design/friends.md).
struct EdgeArray {
    map: memmap2::MmapMut,
    len: usize,
}

impl EdgeArray {
    fn new(len: usize) -> Result<EdgeArray> {
        let bytes = (len * PACKED_EDGE_BYTES).max(1);
        let map = memmap2::MmapMut::map_anon(bytes).map_err(|e| Error::Io {
            op: "map memory for the edges",
            path: format!("{bytes} bytes"),
            source: e,
        })?;
        Ok(EdgeArray { map, len })
    }

    fn as_mut_slice(&mut self) -> &mut [PackedEdge] {
        // SAFETY: the mapping is page-aligned (PackedEdge needs 4), at least `len` edges
        // long, zeroed (a valid PackedEdge) and borrowed mutably with `self`.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast(), self.len) }
    }
}

/// Exact times of the edges whose time code is [`TIME_ASIDE`], earliest per key.
#[derive(Default)]
struct AsideTimes(Vec<(u64, i64)>);

impl AsideTimes {
    fn seal(mut self) -> AsideTimes {
        self.0.sort_unstable();
        self.0.dedup_by_key(|(key, _)| *key);
        self
    }

    fn earliest(&self, key: u64) -> Option<i64> {
        let i = self.0.partition_point(|(k, _)| *k < key);
        self.0.get(i).filter(|(k, _)| *k == key).map(|(_, t)| *t)
    }
}

/// How many edges of a chunk were packed, and how many self-edges it held.
#[derive(Debug)]
struct ChunkPacked {
    edges: usize,
    self_edges: u64,
}

/// Packs the edges of a chunk (read from `source`) that fall in `slice` into the first
/// cells of `cells`; self-edges are never friendships: they are counted and dropped. A
/// chunk with more rows than `cells` is an input whose footer undercounted its rows.
fn pack_into(
    coder: &Coder,
    slice: Slice,
    source: &dyn std::fmt::Display,
    c: &EdgeChunk,
    aside: &mut Vec<(u64, i64)>,
    cells: &mut [PackedEdge],
) -> Result<ChunkPacked> {
    let Some(cells) = cells.get_mut(..c.len()) else {
        return Err(Error::BadInput {
            path: source.to_string(),
            line: 0,
            reason: "more rows than the footer announced".into(),
        });
    };
    if let (Coder::Offset(base), Slice::ALL) = (coder, slice) {
        if pack_offsets(*base, c, &mut |i, edge| cells[i] = edge) {
            return Ok(ChunkPacked {
                edges: c.len(),
                self_edges: 0,
            });
        }
    }
    let mut edges = 0;
    let self_edges = pack_chunk(coder, slice, source, c, aside, &mut |edge| {
        cells[edges] = edge;
        edges += 1;
    })?;
    Ok(ChunkPacked { edges, self_edges })
}

/// The common case without a branch per edge: offset codes, every pair kept, and, as the
/// chunk turns out, no self-edge, no id beyond the codes and no time off whole seconds.
/// Each edge goes to `put(row, edge)`. Returns false when the chunk has any of those (then
/// what was put is garbage and the general path packs the chunk again). A chunk as clean
/// writes it takes this loop, without the general path's branches (docs/design/friends.md).
#[inline(always)]
fn pack_offsets(base: i64, c: &EdgeChunk, put: &mut impl FnMut(usize, PackedEdge)) -> bool {
    let (follower, followee) = (c.follower.values(), c.followee.values());
    let times = c.times();
    match times {
        None => pack_offsets_with(base, follower, followee, put, |_| TIME_NONE),
        Some((ms, None)) => {
            pack_offsets_with(base, follower, followee, put, |i| whole_seconds(ms[i]))
        }
        Some((ms, Some(nulls))) => pack_offsets_with(base, follower, followee, put, |i| {
            if nulls.is_valid(i) {
                whole_seconds(ms[i])
            } else {
                TIME_NONE
            }
        }),
    }
}

/// A known time as whole seconds, or [`TIME_ASIDE`] when it is not a whole second in
/// 1970..2106 (see [`time_code`]).
#[inline(always)]
fn whole_seconds(ms: i64) -> u32 {
    let secs = ms / 1000;
    if secs * 1000 == ms && (0..TIME_ASIDE as i64).contains(&secs) {
        secs as u32
    } else {
        TIME_ASIDE
    }
}

#[inline(always)]
fn pack_offsets_with(
    base: i64,
    follower: &[i64],
    followee: &[i64],
    put: &mut impl FnMut(usize, PackedEdge),
    time: impl Fn(usize) -> u32,
) -> bool {
    let mut general = false;
    for (i, (&a, &b)) in follower.iter().zip(followee).enumerate() {
        let (edge, needs_general) = offset_edge(base, a, b, time(i));
        general |= needs_general;
        put(i, edge);
    }
    !general
}

/// An edge between ids coded as offsets from `base`, and whether the general path must pack
/// it instead (a self-edge, an id beyond the codes, a time aside).
#[inline(always)]
fn offset_edge(base: i64, follower: i64, followee: i64, time: u32) -> (PackedEdge, bool) {
    let (a, b) = (
        follower.wrapping_sub(base) as u64,
        followee.wrapping_sub(base) as u64,
    );
    let (small, large) = (a.min(b), a.max(b));
    let general = (large > MAX_CODE as u64) | (a == b) | (time == TIME_ASIDE);
    let key = (((small << 32) | large) << 1) | (a > b) as u64;
    (PackedEdge { key, time }, general)
}

/// [`pack_offsets`] straight into a [`TwoEnded`]'s cells. Returns false, with the state as
/// it was, when the general path must pack the chunk (what was placed lies in free slots:
/// forgetting it is enough).
fn place_offsets(
    base: i64,
    c: &EdgeChunk,
    cells: &mut [PackedEdge],
    st: &mut TwoEndedState,
) -> bool {
    // A copy of the state, written back at the end: a local the compiler keeps in
    // registers, where through `st` itself every order check would go to memory.
    let mut local = *st;
    let packed = pack_offsets(base, c, &mut |_, edge| {
        TwoEnded::place(cells, &mut local, edge)
    });
    if packed {
        *st = local;
    }
    packed
}

/// Packs the edges of a chunk (read from `source`) that fall in `slice`, one by one; self-
/// edges are never friendships: they are counted and dropped. Returns the number of self-
/// edges.
fn pack_chunk(
    coder: &Coder,
    slice: Slice,
    source: &dyn std::fmt::Display,
    c: &EdgeChunk,
    aside: &mut Vec<(u64, i64)>,
    emit: &mut impl FnMut(PackedEdge),
) -> Result<u64> {
    let (follower, followee) = (c.follower.values(), c.followee.values());
    let mut selfs = 0;
    for i in 0..c.len() {
        let (a, b) = (follower[i], followee[i]);
        if a == b {
            selfs += 1;
            continue;
        }
        if !slice.keeps(id_pair(a, b)) {
            continue;
        }
        let key = pack(coder, a, b).ok_or_else(|| Error::BadInput {
            path: source.to_string(),
            line: 0,
            reason: format!(
                "follow {a} -> {b}: an id outside the range the Parquet statistics announce"
            ),
        })?;
        let ms = c.time(i);
        let time = time_code(ms);
        if time == TIME_ASIDE {
            aside.push((key, ms.expect("aside times are known")));
        }
        emit(PackedEdge { key, time });
    }
    Ok(selfs)
}

/// What packing one part (a row group) gave.
struct PartPacked {
    /// Edges kept (not self-edges, in the slice).
    edges: usize,
    self_edges: u64,
    /// `(key, ms)` of edges whose time went on the side list.
    aside: Vec<(u64, i64)>,
}

/// Earliest known time (epoch ms) of a run of equal keys.
fn earliest(run: &[PackedEdge], aside: &AsideTimes) -> Option<i64> {
    run.iter()
        .filter_map(|e| match e.time {
            TIME_NONE => None,
            TIME_ASIDE => aside.earliest(e.key),
            s => Some(s as i64 * 1000),
        })
        .min()
}

/// Mutual pairs among sorted edges, with `since` (or [`NO_TIME`]): runs of equal keys are
/// one edge crawled several times, and the two directions of a pair are neighbouring runs.
/// Chunks split at pair boundaries are scanned in parallel, once each, into their own lists,
/// which are then laid end to end.
fn scan_sorted(edges: &[PackedEdge], aside: &AsideTimes, stats: &mut FriendsStats) -> Pairs {
    let chunks = pair_aligned_chunks(edges, rayon::current_num_threads() * 4);
    let scanned: Vec<ChunkScan> = chunks
        .par_iter()
        .map(|chunk| scan_chunk(chunk, aside))
        .collect();
    let mut pairs = Pairs::default();
    for chunk in scanned {
        stats.distinct_edges += chunk.distinct;
        stats.duplicate_edges += chunk.duplicates;
        pairs.0.push(chunk.pairs);
    }
    pairs
}

/// Mutual pairs `(pair, since)` in key order, as the parallel scan left them: one list per
/// chunk, the lists in order (laying them end to end would copy every pair once more and
/// hold both copies at the peak).
#[derive(Default)]
struct Pairs(Vec<Vec<(u64, i64)>>);

impl Pairs {
    fn len(&self) -> usize {
        self.0.iter().map(Vec::len).sum()
    }

    fn iter(&self) -> impl Iterator<Item = &(u64, i64)> + '_ {
        self.0.iter().flatten()
    }
}

/// Splits sorted edges into about `n` chunks that never cut a pair's edges apart.
fn pair_aligned_chunks(edges: &[PackedEdge], n: usize) -> Vec<&[PackedEdge]> {
    let step = edges.len().div_ceil(n.max(1)).max(1);
    let mut chunks = Vec::with_capacity(n);
    let mut start = 0;
    while start < edges.len() {
        let mut end = (start + step).min(edges.len());
        while end < edges.len() && { edges[end].key } >> 1 == { edges[end - 1].key } >> 1 {
            end += 1;
        }
        chunks.push(&edges[start..end]);
        start = end;
    }
    chunks
}

/// What one scan of a pair-aligned chunk found.
struct ChunkScan {
    /// `(pair, since)` of each mutual pair, in key order.
    pairs: Vec<(u64, i64)>,
    distinct: u64,
    duplicates: u64,
}

/// One sequential scan of a pair-aligned chunk. An edge crawled once (nearly all of them)
/// takes the short path: its time is decoded from its own code, with no run to fold.
fn scan_chunk(edges: &[PackedEdge], aside: &AsideTimes) -> ChunkScan {
    // About 2 in 9 edges of a graph with 30 % reciprocity end a pair.
    let mut pairs = Vec::with_capacity(edges.len() / 4);
    let mut duplicates = 0u64;
    let mut distinct = 0u64;
    // The last distinct edge seen: its key and earliest time (ms or NO_TIME).
    let (mut prev_key, mut prev_time) = (u64::MAX, NO_TIME);
    let mut i = 0;
    while i < edges.len() {
        let PackedEdge { key, time } = edges[i];
        let mut j = i + 1;
        while j < edges.len() && { edges[j].key } == key {
            j += 1;
        }
        let time = if j == i + 1 {
            match time {
                TIME_NONE => NO_TIME,
                TIME_ASIDE => aside.earliest(key).unwrap_or(NO_TIME),
                s => s as i64 * 1000,
            }
        } else {
            duplicates += (j - i - 1) as u64;
            earliest(&edges[i..j], aside).unwrap_or(NO_TIME)
        };
        distinct += 1;
        if prev_key >> 1 == key >> 1 {
            let since = if prev_time == NO_TIME || time == NO_TIME {
                NO_TIME
            } else {
                prev_time.max(time)
            };
            pairs.push((key >> 1, since));
        }
        (prev_key, prev_time) = (key, time);
        i = j;
    }
    ChunkScan {
        pairs,
        distinct,
        duplicates,
    }
}

/// The in-memory path: files are decoded in parallel straight into one preallocated edge
/// array (sized from the footers, so it never reallocates), sorted in place and scanned once:
/// one decode of the input, no join for the follow times.
fn mutual_in_memory(
    input: &Input,
    coder: &Coder,
    slice: Slice,
    stats: &mut FriendsStats,
) -> Result<Pairs> {
    let started = std::time::Instant::now();
    let parts = input.parts();
    let total: usize = parts.iter().map(|p| p.rows).sum();
    let mut array = EdgeArray::new(total)?;
    let cells = array.as_mut_slice();
    let mut slots: Vec<&mut [PackedEdge]> = Vec::with_capacity(parts.len());
    let mut rest = &mut *cells;
    for part in &parts {
        let (head, tail) = rest.split_at_mut(part.rows);
        slots.push(head);
        rest = tail;
    }
    let filled: Vec<PartPacked> = parts
        .par_iter()
        .zip(slots)
        .map(|(&part, slot)| {
            let (mut n, mut selfs, mut aside) = (0usize, 0u64, Vec::new());
            let source = input.location(part);
            input.columns(part.file, Some(part.row_group), true, &mut |c| {
                let packed = pack_into(coder, slice, source, &c, &mut aside, &mut slot[n..])?;
                n += packed.edges;
                selfs += packed.self_edges;
                Ok(())
            })?;
            Ok(PartPacked {
                edges: n,
                self_edges: selfs,
                aside,
            })
        })
        .collect::<Result<_>>()?;
    // Close the gaps left by filtered rows (and by rows a footer announced but the row group
    // did not hold): part i's edges are its slot's first `edges` cells.
    let (mut write, mut read) = (0usize, 0usize);
    let mut aside = AsideTimes::default();
    let cells = array.as_mut_slice();
    for (packed, part) in filled.into_iter().zip(&parts) {
        cells.copy_within(read..read + packed.edges, write);
        write += packed.edges;
        read += part.rows;
        stats.self_edges += packed.self_edges;
        aside.0.extend(packed.aside);
    }
    let edges = &mut cells[..write];
    let aside = aside.seal();
    log::debug!(
        "friends: edges packed at {:?}, peak {} MB",
        started.elapsed(),
        peak_mb()
    );
    let pairs = sort_and_scan(edges, &aside, stats);
    drop(array);
    log::debug!(
        "friends: pairs found at {:?}, peak {} MB",
        started.elapsed(),
        peak_mb()
    );
    Ok(pairs)
}

/// The in-memory path for input partitioned by canonical pair (clean's follows): each group
/// of files holds both directions of its pairs, so it is decoded, sorted and scanned on its
/// own, a group per thread at a time, in buffers of one group's edges (small enough to stay
/// mostly in cache, where one array of all edges is sorted from memory). Each group's pairs
/// are one sorted run of the output.
fn mutual_by_pair_part(
    input: &Input,
    groups: &[Vec<usize>],
    coder: &Coder,
    slice: Slice,
    run_files: Option<&RunFiles>,
    count_codes: Option<usize>,
    stats: &mut FriendsStats,
) -> Result<(Pairs, Option<FriendCounts>)> {
    let started = std::time::Instant::now();
    // One pair of buffers per thread, reused group after group (so only the largest group's
    // pages are ever touched, and never zeroed again).
    let buffers: Vec<std::sync::Mutex<GroupBuffers>> = (0..rayon::current_num_threads())
        .map(|_| Default::default())
        .collect();
    let join = |files: &[usize]| -> Result<(ChunkScan, u64, bool)> {
        let thread = rayon::current_thread_index().unwrap_or(0) % buffers.len();
        let mut guard = buffers[thread].lock().unwrap_or_else(|e| e.into_inner());
        let buffers = &mut *guard;
        if let [file] = files[..] {
            let found = std::mem::take(&mut buffers.found);
            let scanned =
                scan_pair_ordered(input, file, coder, slice, found, &mut buffers.scratch)?;
            match scanned {
                Ok(scan) => return Ok((scan, 0, true)),
                Err(found) => buffers.found = found,
            }
        }
        let rows: usize = files.iter().map(|&f| input.metas[f].rows).sum();
        if buffers.edges.len() < rows {
            buffers.edges.resize(rows, PackedEdge::default());
        }
        let mut ends = TwoEnded::new(&mut buffers.edges[..rows]);
        let (mut selfs, mut aside) = (0u64, Vec::new());
        for &file in files {
            let source = input.files[file].location();
            input.columns(file, None, true, &mut |c| {
                selfs += ends.pack(coder, slice, source, &c, &mut aside)?;
                Ok(())
            })?;
        }
        let packed = ends.packed();
        Ok((buffers.join(rows, packed, aside), selfs, false))
    };
    // With the runs written as they are found and codes dense enough to count by code, the
    // threads file their pairs' ends by range of codes as they go, and the pairs go: no pass
    // over all the pairs is left for the end, and no pair is held until then; see
    // [`EndBuckets`].
    let ends = run_files
        .and(count_codes)
        .map(|codes| EndBuckets::new(codes as u64, buffers.len()));
    let scanned: Vec<((ChunkScan, u64, bool), u64)> = groups
        .par_iter()
        .enumerate()
        .map(|(run, files)| {
            let thread = rayon::current_thread_index().unwrap_or(0) % buffers.len();
            let mut joined = join(files)?;
            let found = joined.0.pairs.len() as u64;
            if let Some(run_files) = run_files {
                run_files.write(run, coder, &joined.0.pairs)?;
            }
            if let Some(ends) = &ends {
                if !ends.add(thread, &joined.0.pairs) {
                    return Err(Error::BadInput {
                        path: input.location_of(files).to_string(),
                        line: 0,
                        reason: "an id beyond the range the Parquet statistics announce".into(),
                    });
                }
                // Back to the thread's buffers for its next part, rather than growing a list
                // of pairs anew for every part, page by page.
                let mut buffers = buffers[thread].lock().unwrap_or_else(|e| e.into_inner());
                if joined.0.pairs.capacity() > buffers.found.capacity() {
                    buffers.found = std::mem::take(&mut joined.0.pairs);
                } else {
                    joined.0.pairs = Vec::new();
                }
            }
            Ok((joined, found))
        })
        .collect::<Result<_>>()?;
    let counts = ends.map(|ends| FriendCounts::Buckets(ends.finish()));
    log::debug!(
        "friends: {} pair parts scanned at {:?}, peak {} MB",
        groups.len(),
        started.elapsed(),
        peak_mb()
    );
    let mut pairs = Pairs::default();
    stats.pair_parts = groups.len() as u32;
    for ((scan, selfs, streamed), found) in scanned {
        stats.mutual_pairs += found;
        stats.streamed_parts += streamed as u32;
        stats.distinct_edges += scan.distinct;
        stats.duplicate_edges += scan.duplicates;
        stats.self_edges += selfs;
        pairs.0.push(scan.pairs);
    }
    Ok((pairs, counts))
}

/// A thread's buffers for the groups it joins: the group's edges (see [`TwoEnded`]), room
/// for sorting them, and for the pairs found; for [`scan_pair_ordered`], its rows kept and
/// a list for the pairs it finds, handed back once they are written.
#[derive(Default)]
struct GroupBuffers {
    edges: Vec<PackedEdge>,
    spare: Vec<PackedEdge>,
    pairs: Vec<(u64, i64)>,
    scratch: Vec<(u64, usize)>,
    found: Vec<(u64, i64)>,
}

impl GroupBuffers {
    /// The mutual pairs among a group's edges, packed by a [`TwoEnded`] into
    /// `self.edges[..rows]` (those with a time aside listed in `aside`), with the group's
    /// distinct and duplicate edges. Gives what sorting them all and [`scan_chunk`] give, in
    /// the same order.
    fn join(&mut self, rows: usize, packed: TwoEndedPacked, aside: Vec<(u64, i64)>) -> ChunkScan {
        let (front, back) = self.edges[..rows].split_at_mut(rows - packed.reverse);
        let (forward, reverse) = (&mut front[..packed.forward], back);
        // Packed from the back, so any order they came in reads backwards.
        let reverse_order = if packed.reverse_pair_order != Order::Unsorted {
            reverse.reverse();
            packed.reverse_pair_order
        } else if packed.reverse_order != Order::Unsorted {
            sort_transposed(reverse, true, &mut self.spare);
            packed.reverse_order
        } else {
            use rdst::RadixSort;
            reverse.radix_sort_builder().sort();
            Order::Unsorted
        };
        if packed.forward_order == Order::Unsorted {
            use rdst::RadixSort;
            forward.radix_sort_builder().sort();
        }
        let distinct = packed.forward_order == Order::Strict
            && reverse_order == Order::Strict
            && aside.is_empty();
        if distinct {
            scan_distinct(forward, reverse, &mut self.pairs)
        } else {
            scan_directions(forward, reverse, &AsideTimes(aside).seal())
        }
    }
}

/// The pairs of one file of follows in canonical pair order, as clean writes them (sorted
/// by `(min id, max id, follower)`, no edge twice): a pair's two directions are then
/// neighbouring rows, and one pass over the file finds them all, with no buffer and no sort.
/// The pairs go to `pairs` (emptied first), and rows kept on the way to `scratch`. The list
/// comes back as `Err` when the file turns out otherwise (an edge out of order or repeated,
/// a self-edge, an id beyond the codes) or the run is sliced or dictionary-coded: the caller
/// then joins its group in a buffer.
fn scan_pair_ordered(
    input: &Input,
    file: usize,
    coder: &Coder,
    slice: Slice,
    mut pairs: Vec<(u64, i64)>,
    scratch: &mut Vec<(u64, usize)>,
) -> Result<std::result::Result<ChunkScan, Vec<(u64, i64)>>> {
    let (Coder::Offset(base), Slice::ALL) = (coder, slice) else {
        return Ok(Err(pairs));
    };
    pairs.clear();
    // At most a pair for every two rows: reserved, not touched, so only what the pairs fill
    // is ever paged in, and the list never moves as it grows.
    pairs.reserve(input.metas[file].rows / 2 + 1);
    // The last row before the current batch: its key (0 is below any real one) and time.
    let mut last = (0u64, NO_TIME);
    let (mut ordered, mut rows) = (true, 0u64);
    input.columns(file, None, true, &mut |c| {
        if ordered {
            let times = c.times();
            let (follower, followee) = (c.follower.values(), c.followee.values());
            ordered = match times {
                None => scan_ordered_with(
                    *base,
                    follower,
                    followee,
                    |_| NO_TIME,
                    &mut last,
                    scratch,
                    &mut pairs,
                ),
                Some((ms, None)) => scan_ordered_with(
                    *base,
                    follower,
                    followee,
                    |i| ms[i],
                    &mut last,
                    scratch,
                    &mut pairs,
                ),
                Some((ms, Some(nulls))) => scan_ordered_with(
                    *base,
                    follower,
                    followee,
                    |i| {
                        if nulls.is_valid(i) {
                            ms[i]
                        } else {
                            NO_TIME
                        }
                    },
                    &mut last,
                    scratch,
                    &mut pairs,
                ),
            };
            rows += c.len() as u64;
        }
        Ok(())
    })?;
    Ok(match ordered {
        true => Ok(ChunkScan {
            pairs,
            distinct: rows,
            duplicates: 0,
        }),
        false => Err(pairs),
    })
}

/// One batch of [`scan_pair_ordered`], carrying `last` over from the batch before. Without a
/// branch per row: every row writes its pair and position, and only a row of the same pair
/// as the row before keeps them; the times are then looked up for the pairs kept alone, not
/// for every row (validity bit and all). Returns false when a row breaks the order the scan
/// relies on.
#[inline(always)]
fn scan_ordered_with(
    base: i64,
    follower: &[i64],
    followee: &[i64],
    time: impl Fn(usize) -> i64,
    last: &mut (u64, i64),
    scratch: &mut Vec<(u64, usize)>,
    out: &mut Vec<(u64, i64)>,
) -> bool {
    // At most one pair a row, whatever the rows hold (the check comes after). The scratch
    // rows are reused batch after batch: sizing the output for every row of every batch
    // would zero 16 bytes a row each time.
    if scratch.len() <= follower.len() {
        scratch.resize(follower.len() + 1, (0, 0));
    }
    let (mut found, mut broken) = (0, false);
    let mut last_key = last.0;
    for (i, (&a, &b)) in follower.iter().zip(followee).enumerate() {
        let (edge, general) = offset_edge(base, a, b, 0);
        let key = edge.key;
        // In range, no self-edge, strictly after the row before (so not the same edge).
        broken |= general | (key <= last_key);
        scratch[found] = (key >> 1, i);
        found += (key >> 1 == last_key >> 1) as usize;
        last_key = key;
    }
    out.extend(scratch[..found].iter().map(|&(pair, i)| {
        // The row before the batch's first is the last of the batch before.
        let (t, before) = (time(i), if i == 0 { last.1 } else { time(i - 1) });
        let since = if t == NO_TIME || before == NO_TIME {
            NO_TIME
        } else {
            t.max(before)
        };
        (pair, since)
    }));
    if let Some(end) = follower.len().checked_sub(1) {
        *last = (last_key, time(end));
    }
    !broken
}

/// How a list of edges came: in strictly ascending order (no edge twice), ascending, or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Strict,
    Sorted,
    Unsorted,
}

impl Order {
    fn of(ascending: bool, strictly: bool) -> Order {
        match (ascending, strictly) {
            (true, true) => Order::Strict,
            (true, false) => Order::Sorted,
            _ => Order::Unsorted,
        }
    }
}

/// Places a group's edges as they are packed, by direction: those where the small id
/// follows from the front of `cells`, the others from the back, each direction in input
/// order (the reverse one backwards), and notes the order each came in. In parts sorted by
/// `(follower, followee)` (as crawlers list follows), the forward edges then come in pair
/// order and the reverse ones in `(large, small)` order, which a stable sort by the small id alone puts
/// in pair order ([`sort_transposed`]). Without a branch per edge: the direction is a coin
/// toss, edge after edge. One buffer holds both directions, whatever their shares.
struct TwoEnded<'a> {
    cells: &'a mut [PackedEdge],
    state: TwoEndedState,
}

/// What a [`TwoEnded`] has placed so far: how many edges each way, the last of each and
/// whether they have ascended (strictly) so far. The order checks start from 0, below any
/// real value: a forward key has a large id of at least 1, a swapped pair too.
#[derive(Clone, Copy, Default)]
struct TwoEndedState {
    forward: usize,
    reverse: usize,
    last_forward: u64,
    last_reverse: u64,
    last_reverse_key: u64,
    /// Broken ascents: forward, forward strictly, reverse by `(large, small)`, the same
    /// strictly, reverse by pair, the same strictly.
    broken: [bool; 6],
}

/// What a group's packing gave: edges each way, and the order each came in (forward by
/// pair, reverse by `(large, small)`).
#[derive(Clone, Copy, Debug)]
struct TwoEndedPacked {
    forward: usize,
    reverse: usize,
    forward_order: Order,
    reverse_order: Order,
    /// Of `reverse` by pair (as in clean's parts).
    reverse_pair_order: Order,
}

impl<'a> TwoEnded<'a> {
    fn new(cells: &'a mut [PackedEdge]) -> TwoEnded<'a> {
        TwoEnded {
            cells,
            state: TwoEndedState::default(),
        }
    }

    /// Places one edge; there must be room (see [`TwoEnded::pack`]).
    #[inline(always)]
    fn place(cells: &mut [PackedEdge], st: &mut TwoEndedState, edge: PackedEdge) {
        let key = edge.key;
        let is_reverse = key & 1;
        let (fwd, rev) = (is_reverse == 0, is_reverse == 1);
        // `(large, small)`: the pair with its halves swapped.
        let swapped = (key >> 1).rotate_left(32);
        st.broken[0] |= fwd & (st.last_forward > key);
        st.broken[1] |= fwd & (st.last_forward >= key);
        st.broken[2] |= rev & (st.last_reverse > swapped);
        st.broken[3] |= rev & (st.last_reverse >= swapped);
        st.broken[4] |= rev & (st.last_reverse_key > key);
        st.broken[5] |= rev & (st.last_reverse_key >= key);
        st.last_forward = if fwd { key } else { st.last_forward };
        st.last_reverse = if rev { swapped } else { st.last_reverse };
        st.last_reverse_key = if rev { key } else { st.last_reverse_key };
        // Both free slots get the edge; only its own end moves on. With room for one more
        // edge the two slots are distinct or the same last one.
        let back = cells.len() - 1 - st.reverse;
        cells[st.forward] = edge;
        cells[back] = edge;
        st.forward += fwd as usize;
        st.reverse += rev as usize;
    }

    /// Packs the edges of a chunk (read from `source`) that fall in `slice`, as
    /// [`pack_into`] does, placing each. Returns the self-edges dropped. A chunk with more
    /// rows than room left is an input whose footer undercounted its rows.
    fn pack(
        &mut self,
        coder: &Coder,
        slice: Slice,
        source: &dyn std::fmt::Display,
        c: &EdgeChunk,
        aside: &mut Vec<(u64, i64)>,
    ) -> Result<u64> {
        let room = self.cells.len() - self.state.forward - self.state.reverse;
        if c.len() > room {
            return Err(Error::BadInput {
                path: source.to_string(),
                line: 0,
                reason: "more rows than the footer announced".into(),
            });
        }
        let (cells, state) = (&mut *self.cells, &mut self.state);
        if let (Coder::Offset(base), Slice::ALL) = (coder, slice) {
            if place_offsets(*base, c, cells, state) {
                return Ok(0);
            }
        }
        pack_chunk(coder, slice, source, c, aside, &mut |edge| {
            Self::place(cells, state, edge)
        })
    }

    fn packed(&self) -> TwoEndedPacked {
        let b = self.state.broken;
        TwoEndedPacked {
            forward: self.state.forward,
            reverse: self.state.reverse,
            forward_order: Order::of(!b[0], !b[1]),
            reverse_order: Order::of(!b[2], !b[3]),
            reverse_pair_order: Order::of(!b[4], !b[5]),
        }
    }
}

/// Bits of the small id a pass of [`sort_transposed`] sorts on: 256 counters and as many
/// write streams, few enough to stay in the first-level cache.
const DIGIT_BITS: u32 = 8;

/// Sorts edges that are in `(large, small)` order into pair order, `(small, large)`: a
/// stable sort by the small id alone keeps each small id's edges in the order of their large
/// ids. So a least-significant-digit counting sort over the small id's bits does it, in three
/// passes for ids spanning up to 16 M, fewer than a radix sort of the whole 64-bit keys
/// takes. With `backwards` the edges are in that order read from the end. `spare` is the
/// sort's second buffer.
fn sort_transposed(edges: &mut [PackedEdge], backwards: bool, spare: &mut Vec<PackedEdge>) {
    const DIGITS: usize = 32_usize.div_ceil(DIGIT_BITS as usize);
    const BUCKETS: usize = 1 << DIGIT_BITS;
    let small = |e: &PackedEdge| ({ e.key } >> 33) as usize;
    let mut counts = vec![[0usize; BUCKETS]; DIGITS];
    for e in edges.iter() {
        let s = small(e);
        for (d, count) in counts.iter_mut().enumerate() {
            count[(s >> (d as u32 * DIGIT_BITS)) & (BUCKETS - 1)] += 1;
        }
    }
    if spare.len() < edges.len() {
        spare.resize(edges.len(), PackedEdge::default());
    }
    let spare = &mut spare[..edges.len()];
    let (mut in_spare, mut backwards) = (false, backwards);
    for (d, count) in counts.iter_mut().enumerate() {
        // A digit every edge shares moves nothing.
        if count.contains(&edges.len()) {
            continue;
        }
        let mut at = 0;
        for c in count.iter_mut() {
            (*c, at) = (at, at + *c);
        }
        let (from, to): (&[PackedEdge], &mut [PackedEdge]) = if in_spare {
            (spare, edges)
        } else {
            (edges, spare)
        };
        let mut scatter = |e: &PackedEdge| {
            let bucket = (small(e) >> (d as u32 * DIGIT_BITS)) & (BUCKETS - 1);
            to[count[bucket]] = *e;
            count[bucket] += 1;
        };
        if backwards {
            from.iter().rev().for_each(&mut scatter);
        } else {
            from.iter().for_each(&mut scatter);
        }
        (in_spare, backwards) = (!in_spare, false);
    }
    if in_spare {
        edges.copy_from_slice(spare);
    }
    if backwards {
        // No digit moved anything: every edge has the same small id.
        edges.reverse();
    }
}

/// The end of the run of edges equal to `edges[i]` (one edge crawled several times).
#[inline]
fn run_end(edges: &[PackedEdge], i: usize) -> usize {
    let key = edges[i].key;
    let mut j = i + 1;
    while j < edges.len() && { edges[j].key } == key {
        j += 1;
    }
    j
}

/// The earliest known time (ms, or [`NO_TIME`]) of a run of equal edges.
#[inline]
fn run_time(run: &[PackedEdge], aside: &AsideTimes) -> i64 {
    if let [edge] = run {
        match edge.time {
            TIME_NONE => NO_TIME,
            TIME_ASIDE => aside.earliest(edge.key).unwrap_or(NO_TIME),
            s => s as i64 * 1000,
        }
    } else {
        earliest(run, aside).unwrap_or(NO_TIME)
    }
}

/// Mutual pairs of two sorted lists of edges, one per direction, found by merging them: a
/// pair is mutual when both lists hold it. Gives what [`scan_chunk`] gives on the two lists
/// sorted together.
fn scan_directions(
    forward: &[PackedEdge],
    reverse: &[PackedEdge],
    aside: &AsideTimes,
) -> ChunkScan {
    let mut pairs = Vec::with_capacity(forward.len().min(reverse.len()));
    let (mut i, mut j, mut distinct) = (0, 0, 0u64);
    while i < forward.len() && j < reverse.len() {
        let (f, r) = ({ forward[i].key } >> 1, { reverse[j].key } >> 1);
        if f == r {
            let (i_end, j_end) = (run_end(forward, i), run_end(reverse, j));
            let (tf, tr) = (
                run_time(&forward[i..i_end], aside),
                run_time(&reverse[j..j_end], aside),
            );
            let since = if tf == NO_TIME || tr == NO_TIME {
                NO_TIME
            } else {
                tf.max(tr)
            };
            pairs.push((f, since));
            distinct += 2;
            (i, j) = (i_end, j_end);
        } else if f < r {
            i = run_end(forward, i);
            distinct += 1;
        } else {
            j = run_end(reverse, j);
            distinct += 1;
        }
    }
    for (edges, mut k) in [(forward, i), (reverse, j)] {
        while k < edges.len() {
            k = run_end(edges, k);
            distinct += 1;
        }
    }
    ChunkScan {
        pairs,
        distinct,
        duplicates: (forward.len() + reverse.len()) as u64 - distinct,
    }
}

/// [`scan_directions`] for lists in which no edge repeats and no time is aside (clean's
/// parts): a merge that advances without a branch, as a pair's two directions meet about
/// once in six steps, at random. `out` is a buffer for the pairs.
fn scan_distinct(
    forward: &[PackedEdge],
    reverse: &[PackedEdge],
    out: &mut Vec<(u64, i64)>,
) -> ChunkScan {
    // Every step writes a row; only a match keeps it (moves `found` on). Matches are fewer
    // than either list, and the merge stops when one runs out, so the writes stay in bounds.
    out.clear();
    out.resize(forward.len().min(reverse.len()) + 1, (0, 0));
    let (mut i, mut j, mut found) = (0, 0, 0);
    while i < forward.len() && j < reverse.len() {
        let (f, r) = (forward[i], reverse[j]);
        let (a, b) = ({ f.key } >> 1, { r.key } >> 1);
        let (tf, tr) = (f.time, r.time);
        let since = if tf == TIME_NONE || tr == TIME_NONE {
            NO_TIME
        } else {
            tf.max(tr) as i64 * 1000
        };
        out[found] = (a, since);
        found += (a == b) as usize;
        i += (a <= b) as usize;
        j += (b <= a) as usize;
    }
    ChunkScan {
        pairs: out[..found].to_vec(),
        distinct: (forward.len() + reverse.len()) as u64,
        duplicates: 0,
    }
}

/// The out-of-core path: edges are hash-partitioned by pair into spill files (decoded in
/// parallel, one batch at a time); each partition is then read back, sorted and scanned on its
/// own, its pairs go to the sink and their two ends to a second spill, partitioned by user,
/// from which the counts are made one partition at a time. Memory: about one partition.
fn mutual_out_of_core(
    input: &Input,
    coder: &Coder,
    options: &FriendsOptions,
    partitions: u32,
    plan: CountPlan,
    stats: &mut FriendsStats,
    sink: &mut dyn FriendsSink,
) -> Result<()> {
    // Write buffers share a quarter of the budget.
    let spill = Partitions::create(
        options.spill_dir.as_deref(),
        "weibo-friends-",
        partitions,
        options.memory_budget / 4,
    )?;
    let filled: Vec<PartPacked> = input
        .parts()
        .into_par_iter()
        .map_init(
            || (Vec::new(), Scatter::default()),
            |(batch, scatter), part| {
                let (mut edges, mut selfs, mut aside) = (0usize, 0u64, Vec::new());
                let source = input.location(part);
                input.columns(part.file, Some(part.row_group), true, &mut |c| {
                    batch.clear();
                    batch.resize(c.len(), PackedEdge::default());
                    let packed = pack_into(coder, options.slice, source, &c, &mut aside, batch)?;
                    batch.truncate(packed.edges);
                    selfs += packed.self_edges;
                    edges += batch.len();
                    scatter.spill(&spill, batch)
                })?;
                Ok(PartPacked {
                    edges,
                    self_edges: selfs,
                    aside,
                })
            },
        )
        .collect::<Result<_>>()?;
    spill.finish()?;
    log::debug!("friends: edges spilled, peak {} MB", peak_mb());
    let mut aside = AsideTimes::default();
    for packed in filled {
        stats.self_edges += packed.self_edges;
        aside.0.extend(packed.aside);
    }
    let aside = aside.seal();
    let ends = Partitions::create(
        options.spill_dir.as_deref(),
        "weibo-friends-",
        plan.partitions(),
        options.memory_budget / 4,
    )?;
    let mut grouped: Vec<Vec<u8>> = vec![Vec::new(); plan.partitions() as usize];
    // One buffer serves every partition: a fresh one each time would leave the allocator
    // holding the last one's pages too.
    let largest = (0..partitions)
        .map(|p| spill.bytes(p))
        .collect::<Result<Vec<u64>>>()?
        .into_iter()
        .max()
        .unwrap_or(0);
    let mut edges: Vec<PackedEdge> = Vec::with_capacity(largest as usize / PACKED_EDGE_BYTES);
    for p in 0..partitions {
        edges.clear();
        edges.resize(spill.records(p, PACKED_EDGE_BYTES)?, PackedEdge::default());
        spill.read_exact(p, edge_bytes_mut(&mut edges))?;
        spill.remove(p)?;
        let pairs = sort_and_scan(&mut edges, &aside, stats);
        stats.mutual_pairs += pairs.len() as u64;
        log::debug!("friends: partition {p} scanned, peak {} MB", peak_mb());
        emit(
            coder,
            &pairs,
            Runs::Dealt,
            &mut CountCursor::Runs(Box::new(std::iter::empty())),
            sink,
        )?;
        for (pair, _) in pairs.iter() {
            for code in [pair >> 32, pair & 0xffff_ffff] {
                plan.spill_end(code, &mut grouped);
            }
        }
        for (q, bytes) in grouped.iter_mut().enumerate() {
            if !bytes.is_empty() {
                ends.write(q as u32, bytes)?;
                bytes.clear();
            }
        }
    }
    drop(edges);
    ends.finish()?;
    match plan {
        CountPlan::Ranges { ranges, bits } => {
            let width = 1u64 << bits;
            let mut by_code: Vec<u32> = Vec::new();
            for q in 0..ranges {
                by_code.clear();
                by_code.resize(width as usize, 0);
                ends.for_each_chunk(q, 4, &mut |bytes| {
                    for end in bytes.chunks_exact(4) {
                        let at = u32::from_le_bytes(end.try_into().expect("4 bytes"));
                        by_code[at as usize] += 1;
                    }
                })?;
                ends.remove(q)?;
                let base = q as u64 * width;
                let mut counts = CountCursor::Dense {
                    by_code: &by_code,
                    at: 0,
                    base,
                };
                stats.users_with_friends +=
                    emit(coder, &Pairs::default(), Runs::Dealt, &mut counts, sink)?;
            }
        }
        CountPlan::Hashed { partitions } => {
            let mut codes: Vec<u64> = Vec::new();
            for q in 0..partitions {
                codes.clear();
                ends.for_each_chunk(q, 8, &mut |bytes| {
                    codes.extend(
                        bytes
                            .chunks_exact(8)
                            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))),
                    )
                })?;
                ends.remove(q)?;
                // The same radix sort as the edges, faster here than rayon's pdqsort.
                rdst::RadixSort::radix_sort_builder(&mut codes)
                    .with_low_mem_tuner()
                    .sort();
                let mut counts = CountCursor::Runs(Box::new(runs_of(&codes)));
                stats.users_with_friends +=
                    emit(coder, &Pairs::default(), Runs::Dealt, &mut counts, sink)?;
            }
        }
    }
    Ok(())
}

/// How an out-of-core run counts friends per user from the pairs' two ends, spilled as the
/// pair partitions are scanned, then read back one partition at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CountPlan {
    /// Codes no sparser than the edges: partitions are ranges of `2^bits` codes, an end is
    /// stored as its 4-byte offset in its range, and each range is counted in an array of
    /// `2^bits` counters that fits half the budget. No sort, and the memory does not depend
    /// on how many ends a range gets. (A power of two, so an end's range is a shift, not a
    /// division.)
    Ranges { ranges: u32, bits: u32 },
    /// Sparse codes (offsets over a wide id span): partitions by hash, each sorted and
    /// counted in runs.
    Hashed { partitions: u32 },
}

impl CountPlan {
    fn new(codes: u64, edges: u64, partitions: u32, budget: u64) -> CountPlan {
        if codes > edges.max(1 << 20) {
            return CountPlan::Hashed { partitions };
        }
        let counters = (budget / 2 / 4).max(1 << 10);
        let mut bits = u64::BITS - 1 - counters.leading_zeros();
        // At most 4096 ranges (spill files), whatever the budget.
        while codes.div_ceil(1 << bits) > 4096 {
            bits += 1;
        }
        CountPlan::Ranges {
            ranges: codes.div_ceil(1 << bits).max(1) as u32,
            bits,
        }
    }

    fn partitions(self) -> u32 {
        match self {
            CountPlan::Ranges { ranges, .. } => ranges,
            CountPlan::Hashed { partitions } => partitions,
        }
    }

    /// Appends one pair end to its partition's buffer.
    fn spill_end(self, code: u64, grouped: &mut [Vec<u8>]) {
        match self {
            CountPlan::Ranges { bits, .. } => {
                let (q, at) = (code >> bits, (code & ((1 << bits) - 1)) as u32);
                grouped[q as usize].extend_from_slice(&at.to_le_bytes());
            }
            CountPlan::Hashed { partitions } => {
                let q = bucket(code, 0x51_7cc1_b727_220a) % partitions as u64;
                grouped[q as usize].extend_from_slice(&code.to_le_bytes());
            }
        }
    }
}

/// Reusable buffers for spilling batches of edges to their pair partitions.
#[derive(Default)]
struct Scatter {
    partition: Vec<u32>,
    placed: Vec<PackedEdge>,
    starts: Vec<usize>,
}

impl Scatter {
    /// Appends a batch of edges to their pair partitions: placed by partition (counted, then
    /// laid out, one pass each, not sorted), so each writer is locked once per batch and
    /// takes its edges as one run of bytes.
    fn spill(&mut self, spill: &Partitions, batch: &[PackedEdge]) -> Result<()> {
        let parts = spill.count() as usize;
        self.partition.clear();
        self.partition.extend(
            batch
                .iter()
                .map(|e| spill.partition_of(bucket({ e.key } >> 1, 0x2545_f491_4f6c_dd1d))),
        );
        self.starts.clear();
        self.starts.resize(parts + 1, 0);
        for &p in &self.partition {
            self.starts[p as usize + 1] += 1;
        }
        for p in 0..parts {
            self.starts[p + 1] += self.starts[p];
        }
        self.placed.clear();
        self.placed.resize(batch.len(), PackedEdge::default());
        let mut next = self.starts.clone();
        for (edge, &p) in batch.iter().zip(&self.partition) {
            self.placed[next[p as usize]] = *edge;
            next[p as usize] += 1;
        }
        for p in 0..parts {
            let (start, end) = (self.starts[p], self.starts[p + 1]);
            if start < end {
                spill.write(p as u32, edge_bytes(&self.placed[start..end]))?;
            }
        }
        Ok(())
    }
}

/// Packed edges as the bytes of their in-memory layout, the spill files' format (native
/// byte order: a spill file is read back by the process that wrote it, and only by it).
fn edge_bytes(edges: &[PackedEdge]) -> &[u8] {
    // SAFETY: PackedEdge is `repr(C, packed(4))` over a u64 and a u32: 12 bytes, no padding,
    // every byte initialised; u8 has no alignment to respect.
    unsafe { std::slice::from_raw_parts(edges.as_ptr().cast::<u8>(), std::mem::size_of_val(edges)) }
}

/// The bytes of packed edges, to be filled in place (see [`edge_bytes`]).
fn edge_bytes_mut(edges: &mut [PackedEdge]) -> &mut [u8] {
    // SAFETY: as in `edge_bytes`; and every bit pattern is a valid PackedEdge.
    unsafe {
        std::slice::from_raw_parts_mut(
            edges.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(edges),
        )
    }
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
    for file in 0..input.files.len() {
        input.columns(file, None, false, &mut |c| {
            pending.extend_from_slice(c.follower.values());
            pending.extend_from_slice(c.followee.values());
            if pending.len() >= 4 << 20 {
                merge(&mut ids, &mut pending);
            }
            Ok(())
        })?;
    }
    merge(&mut ids, &mut pending);
    Ok(ids)
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

impl FriendsSink for Friends {
    fn pairs(&mut self, _run: usize, batch: &RecordBatch) -> Result<()> {
        let (a, b, since) = pair_columns(batch);
        self.uid_a.extend_from_slice(a.values());
        self.uid_b.extend_from_slice(b.values());
        self.since.extend(since.iter());
        Ok(())
    }

    fn counts(&mut self, batch: &RecordBatch) -> Result<()> {
        let (uids, friends) = count_columns(batch);
        self.counts.extend(
            uids.values()
                .iter()
                .zip(friends.values())
                .map(|(u, n)| (*u, *n as u64)),
        );
        Ok(())
    }
}

impl Friends {
    /// Pairs sorted by `(uid_a, uid_b)`, counts by uid (batches of an out-of-core run arrive
    /// in partition order).
    fn sorted(mut self) -> Friends {
        let mut rows: Vec<(i64, i64, Option<i64>)> = self
            .uid_a
            .iter()
            .zip(&self.uid_b)
            .zip(&self.since)
            .map(|((a, b), s)| (*a, *b, *s))
            .collect();
        rows.sort_unstable();
        self.uid_a = rows.iter().map(|r| r.0).collect();
        self.uid_b = rows.iter().map(|r| r.1).collect();
        self.since = rows.iter().map(|r| r.2).collect();
        self.counts.sort_unstable();
        self
    }
}

fn batch_error(e: arrow::error::ArrowError) -> Error {
    Error::Io {
        op: "build friends batch",
        path: "-".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Writes a run's output as `<output>/friends/dt=<date>/` and
/// `<output>/friend_counts/dt=<date>/` (or their `slice=i-of-N/` sub-folders for a sliced
/// run), streamed batch by batch into staged files; [`FriendsWriter::commit`] makes both
/// partitions appear at once, and dropping the writer without committing leaves nothing.
pub struct FriendsWriter {
    fs: FileSystems,
    staged: Vec<crate::dataset::partition::Staged>,
    /// The friends files open, with the run each holds, oldest first (see [`PAIR_FILES`]).
    pairs: Vec<(usize, BackgroundParquetWriter)>,
    pairs_props: parquet::file::properties::WriterProperties,
    /// Friends files created so far (named in that order).
    pair_files: usize,
    /// Friends files written through [`RunFiles`].
    run_files: Arc<std::sync::atomic::AtomicUsize>,
    counts: Option<BackgroundParquetWriter>,
    counts_props: parquet::file::properties::WriterProperties,
    /// Counts files written through [`RunFiles`].
    count_files: Arc<std::sync::atomic::AtomicUsize>,
}

/// Each sorted run of friends rows (see [`FriendsSink`]) makes one file, encoded on a thread
/// of its own; at most this many are open at once (a new run finishes the oldest file). With
/// one file, its encoder was the last thing a run waited for: runs come two at a time so that
/// two encode at once. Every file is sorted by `(uid_a, uid_b)`.
const PAIR_FILES: usize = 2;

impl FriendsWriter {
    pub fn create(
        fs: &FileSystems,
        output: &Location,
        date: &str,
        slice: Slice,
        data_page_version: u8,
    ) -> Result<FriendsWriter> {
        use crate::dataset::partition::{self, writer_properties, Staged};
        use parquet::basic::{Compression, Encoding};
        use parquet::file::properties::EnabledStatistics;
        use parquet::schema::types::ColumnPath;
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
        // Ids and times are nearly all distinct: dictionary encoding would only cost. The
        // leading ids arrive in ascending runs and friend counts are small, so both are
        // delta-encoded. Min/max statistics are kept for the leading ids only (what a reader
        // prunes on): arrow-rs computes them value by value, worth it only there.
        // Each file is encoded on a thread of its own, beside the run that produces it.
        let props = |delta: &[&str], no_stats: &[&str]| {
            let mut props =
                partition::with_data_page_version(writer_properties(false), data_page_version);
            for column in delta {
                props = props
                    .set_column_encoding(ColumnPath::from(*column), Encoding::DELTA_BINARY_PACKED);
            }
            for column in no_stats {
                props = props.set_column_statistics_enabled(
                    ColumnPath::from(*column),
                    EnabledStatistics::None,
                );
            }
            props
        };
        // Delta-encoded and not compressed. The second ids ascend within each first id's run
        // and the times are spread over a few years: zstd gains next to nothing on them, and
        // on the leading ids and the counts too little for its share of the run; delta alone
        // is smaller than plain + zstd (docs/design/friends.md).
        let pairs_props = props(&["uid_a", "uid_b", "since"], &["uid_b", "since"])
            .set_compression(Compression::UNCOMPRESSED)
            .build();
        let counts_props = props(&["uid", "friends"], &["friends"])
            .set_compression(Compression::UNCOMPRESSED)
            .build();
        Ok(FriendsWriter {
            fs: fs.clone(),
            staged,
            pairs: Vec::new(),
            pairs_props,
            pair_files: 0,
            run_files: Default::default(),
            counts: None,
            counts_props,
            count_files: Default::default(),
        })
    }

    /// The counts file written batch by batch, opened on the first batch.
    fn counts_writer(&mut self) -> Result<&mut BackgroundParquetWriter> {
        if self.counts.is_none() {
            let writer = crate::dataset::partition::ParquetWriter::create_staged(
                &self.fs,
                &self.staged[1].tmp.join("part-00000.parquet"),
                counts_schema(),
                self.counts_props.clone(),
            )?;
            self.counts = Some(writer.in_background());
        }
        Ok(self.counts.as_mut().expect("just opened"))
    }

    /// The writer of a run's pairs: its file, opened on the run's first batch.
    fn pair_writer(&mut self, run: usize) -> Result<&mut BackgroundParquetWriter> {
        let at = match self.pairs.iter().position(|(r, _)| *r == run) {
            Some(at) => at,
            None => {
                if self.pairs.len() == PAIR_FILES {
                    self.pairs.remove(0).1.finish()?;
                }
                let part = self.pair_files;
                self.pair_files += 1;
                let location = self.staged[0].tmp.join(&format!("part-{part:05}.parquet"));
                let props = self.pairs_props.clone();
                let writer = crate::dataset::partition::ParquetWriter::create_staged(
                    &self.fs,
                    &location,
                    friends_schema(),
                    props,
                )?;
                self.pairs.push((run, writer.in_background()));
                self.pairs.len() - 1
            }
        };
        Ok(&mut self.pairs[at].1)
    }

    /// Finishes both files and commits both partitions; returns where the friends rows are.
    pub fn commit(mut self) -> Result<Location> {
        let finished = (|| -> Result<()> {
            let run_files = self.run_files.load(std::sync::atomic::Ordering::Relaxed);
            if self.pair_files + run_files == 0 {
                // No friends at all: still one (empty) file, so readers find the schema.
                self.pair_writer(0)?;
            }
            if self.counts.is_none()
                && self.count_files.load(std::sync::atomic::Ordering::Relaxed) == 0
            {
                // No user with a friend: the same.
                self.counts_writer()?;
            }
            let (pairs, counts) = (std::mem::take(&mut self.pairs), self.counts.take());
            for (_, w) in pairs {
                w.finish()?;
            }
            if let Some(w) = counts {
                w.finish()?;
            }
            crate::dataset::partition::commit(&self.fs, &self.staged)
        })();
        let target = self.staged[0].target.clone();
        match finished {
            Ok(()) => {
                self.staged.clear();
                Ok(target)
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for FriendsWriter {
    fn drop(&mut self) {
        // Not committed: the staged folders go (they are hidden in any case).
        self.pairs.clear();
        drop(self.counts.take());
        crate::dataset::partition::abandon(&self.fs, &self.staged);
    }
}

impl FriendsSink for FriendsWriter {
    fn pairs(&mut self, run: usize, batch: &RecordBatch) -> Result<()> {
        self.pair_writer(run)?.write(batch.clone())
    }

    fn run_files(&self) -> Option<RunFiles> {
        Some(RunFiles {
            fs: self.fs.clone(),
            dir: self.staged[0].tmp.clone(),
            props: self.pairs_props.clone(),
            written: self.run_files.clone(),
            counts_dir: self.staged[1].tmp.clone(),
            counts_props: self.counts_props.clone(),
            counts_written: self.count_files.clone(),
        })
    }

    fn counts(&mut self, batch: &RecordBatch) -> Result<()> {
        self.counts_writer()?.write(batch.clone())
    }
}

/// Writes an in-memory result (see [`run`]) the way a streamed run writes it.
pub fn write_output(
    fs: &FileSystems,
    output: &Location,
    date: &str,
    slice: Slice,
    result: &Friends,
) -> Result<Location> {
    let mut writer = FriendsWriter::create(
        fs,
        output,
        date,
        slice,
        crate::dataset::partition::DATA_PAGE_VERSION,
    )?;
    for (n, start) in (0..result.uid_a.len()).step_by(SINK_BATCH).enumerate() {
        let end = (start + SINK_BATCH).min(result.uid_a.len());
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(result.uid_a[start..end].to_vec())),
            Arc::new(Int64Array::from(result.uid_b[start..end].to_vec())),
            Arc::new(
                TimestampMillisecondArray::from(result.since[start..end].to_vec())
                    .with_timezone("UTC"),
            ),
        ];
        let batch = RecordBatch::try_new(friends_schema(), columns).map_err(batch_error)?;
        // One sorted sequence, dealt to two runs (as [`Runs::Dealt`]).
        writer.pairs(n % 2, &batch)?;
    }
    let schema = counts_schema();
    for chunk in result.counts.chunks(SINK_BATCH) {
        let uids = chunk.iter().map(|c| c.0).collect();
        let friends = chunk.iter().map(|c| c.1 as i64).collect();
        writer.counts(&count_batch(&schema, uids, friends)?)?;
    }
    writer.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// The definition, by brute force: pairs with both directions; since = the later of the
    /// two earliest known times.
    fn naive(edges: &[(i64, i64, Option<i64>)]) -> Vec<(i64, i64, Option<i64>)> {
        let mut first: BTreeMap<(i64, i64), Option<i64>> = BTreeMap::new();
        for &(a, b, t) in edges.iter().filter(|(a, b, _)| a != b) {
            let e = first.entry((a, b)).or_insert(t);
            *e = match (*e, t) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
        }
        let keys: BTreeSet<(i64, i64)> = first.keys().copied().collect();
        keys.iter()
            .filter(|(a, b)| a < b && keys.contains(&(*b, *a)))
            .map(|&(a, b)| {
                let since = match (first[&(a, b)], first[&(b, a)]) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    _ => None,
                };
                (a, b, since)
            })
            .collect()
    }

    /// Friends per code of `pairs`, counted the obvious way.
    fn naive_counts(pairs: &[(u64, i64)]) -> Vec<(u64, u64)> {
        let mut by_code: BTreeMap<u64, u64> = BTreeMap::new();
        for (p, _) in pairs {
            *by_code.entry(p >> 32).or_default() += 1;
            *by_code.entry(p & 0xffff_ffff).or_default() += 1;
        }
        by_code.into_iter().collect()
    }

    /// A pair of codes, its time unknown.
    fn code_pair(a: u64, b: u64) -> (u64, i64) {
        ((a << 32) | b, NO_TIME)
    }

    /// Every `(code, friends)` a cursor gives, drained `batch` users at a time through a coder
    /// that adds `base`.
    fn drain_counts(cursor: &mut CountCursor, base: i64, batch: usize) -> Vec<(u64, u64)> {
        let (mut uids, mut friends, mut all) = (vec![], vec![], vec![]);
        loop {
            cursor.next_batch(&Coder::Offset(base), &mut uids, &mut friends, batch);
            if uids.is_empty() {
                return all;
            }
            assert!(uids.len() <= batch);
            all.extend(
                uids.iter()
                    .map(|u| (*u - base) as u64)
                    .zip(friends.iter().map(|n| *n as u64)),
            );
        }
    }

    #[test]
    fn ends_counted_by_bucket_match_the_naive_count() {
        let pair = code_pair;
        let span = 1u64 << END_BUCKET_SHIFT;
        // Ends on both sides of bucket edges, the last code included, from two threads.
        let (one, two) = (
            [
                pair(0, span - 1),
                pair(5, span),
                pair(span - 1, 3 * span + 7),
            ],
            [
                pair(0, 2 * span),
                pair(span, 3 * span + 7),
                pair(4, 3 * span + 8),
            ],
        );
        let codes = 3 * span + 9;
        let ends = EndBuckets::new(codes, 2);
        assert!(ends.add(0, &one));
        assert!(ends.add(1, &two));
        assert!(ends.add(7, &[pair(5, span)]));
        let ends = ends.finish();
        assert_eq!(ends.buckets(), 4);
        let all: Vec<(u64, i64)> = one
            .iter()
            .chain(&two)
            .chain(&[pair(5, span)])
            .copied()
            .collect();
        // Whole, or in the ranges of buckets the threads write, two users at a time.
        let counts = FriendCounts::Buckets(ends);
        assert_eq!(drain_counts(&mut counts.cursor(), 0, 2), naive_counts(&all));
        let ends = EndBuckets::new(codes, 1);
        assert!(ends.add(0, &all));
        let ends = ends.finish();
        let mut split = drain_counts(&mut ends.cursor(0..1), 0, 2);
        split.extend(drain_counts(&mut ends.cursor(1..3), 0, 2));
        split.extend(drain_counts(&mut ends.cursor(3..4), 0, 2));
        assert_eq!(split, naive_counts(&all));
        // An id past the codes the footers announced is refused, not counted elsewhere.
        let ends = EndBuckets::new(codes, 1);
        assert!(!ends.add(0, &[pair(1, codes)]));
        assert!(!ends.add(0, &[pair(1, 9 * span)]));
    }

    #[test]
    fn friend_counts_are_the_same_dense_or_sorted() {
        let pair = code_pair;
        // Drained three users at a time, through a coder that adds 100.
        let drain = |counts: &FriendCounts| drain_counts(&mut counts.cursor(), 100, 3);
        // Codes close together: counted in an array.
        let close = [pair(0, 3), pair(0, 7), pair(3, 7), pair(5, 6), pair(6, 9)];
        let counts = friend_counts(&Pairs(vec![close[..2].to_vec(), close[2..].to_vec()]));
        assert!(matches!(counts, FriendCounts::Dense(_)));
        assert_eq!(drain(&counts), naive_counts(&close));
        // A few pairs among codes millions apart: the ends are sorted instead.
        let far = [pair(2, 9_000_000), pair(9_000_000, 40_000_000), pair(2, 5)];
        let counts = friend_counts(&Pairs(vec![far.to_vec()]));
        assert!(matches!(counts, FriendCounts::SortedEnds(_)));
        assert_eq!(drain(&counts), naive_counts(&far));
        assert_eq!(drain(&friend_counts(&Pairs::default())), vec![]);
    }

    /// `(key, time code)` of packed edges.
    type Keys = Vec<(u64, u32)>;

    /// `pack_into` over offset codes, every pair kept.
    fn pack_offset_chunk(
        base: i64,
        chunk: &EdgeChunk,
        cells: &mut [PackedEdge],
    ) -> Result<ChunkPacked> {
        let coder = Coder::Offset(base);
        pack_into(&coder, Slice::ALL, &"t", chunk, &mut Vec::new(), cells)
    }

    /// Packs a chunk through `pack_into` and, edge by edge, through the general path:
    /// whether the branch-free loop took it, both results and the self-edges.
    fn both_packings(base: i64, chunk: &EdgeChunk) -> (bool, Keys, Keys, u64) {
        let as_pairs = |edges: &[PackedEdge]| edges.iter().map(|e| (e.key, e.time)).collect();
        let mut cells = vec![PackedEdge::default(); chunk.len()];
        let fast = pack_offsets(base, chunk, &mut |i, e| cells[i] = e);
        let packed = pack_offset_chunk(base, chunk, &mut cells).unwrap();
        let into = &cells[..packed.edges];
        let mut general = Vec::new();
        let selfs = pack_chunk(
            &Coder::Offset(base),
            Slice::ALL,
            &"t",
            chunk,
            &mut Vec::new(),
            &mut |e| general.push(e),
        )
        .unwrap();
        assert_eq!(packed.self_edges, selfs);
        (fast, as_pairs(into), as_pairs(&general), selfs)
    }

    #[test]
    fn the_branch_free_packing_agrees_with_the_general_one() {
        let base = 1_000_000_000i64;
        let chunk = |f: Vec<i64>, g: Vec<i64>, t: Option<Vec<Option<i64>>>| EdgeChunk {
            follower: Int64Array::from(f),
            followee: Int64Array::from(g),
            time: t.map(TimestampMillisecondArray::from),
        };
        let f: Vec<i64> = (0..1000).map(|i| base + (i * 7919) % 5000).collect();
        let g: Vec<i64> = (0..1000)
            .map(|i| base + 5000 + (i * 104_729) % 7000)
            .collect();
        let secs = |i: i64| Some(1_500_000_000_000 + i * 37_000);
        let with_nulls: Vec<Option<i64>> = (0..1000)
            .map(|i| if i % 3 == 0 { None } else { secs(i) })
            .collect();
        let no_nulls: Vec<Option<i64>> = (0..1000).map(secs).collect();
        // Chunks the branch-free loop takes: times with and without nulls, or none at all;
        // forward and backward edges.
        for (f, g, t) in [
            (f.clone(), g.clone(), Some(with_nulls.clone())),
            (g.clone(), f.clone(), Some(no_nulls.clone())),
            (f.clone(), g.clone(), None),
        ] {
            let (fast, into, general, _) = both_packings(base, &chunk(f, g, t));
            assert!(fast);
            assert_eq!(into, general);
            assert_eq!(into.len(), 1000);
        }
        // One edge the general path must see: a self-edge, an odd millisecond, an id beyond
        // 2^31 codes (an error there, so checked apart) and an id below the base.
        let mut selfish = g.clone();
        selfish[500] = f[500];
        let mut odd = no_nulls.clone();
        odd[999] = Some(1_500_000_000_007);
        let (fast, into, general, selfs) =
            both_packings(base, &chunk(f.clone(), selfish, Some(no_nulls.clone())));
        assert!(!fast);
        assert_eq!((into.len(), selfs), (999, 1));
        assert_eq!(into, general);
        let (fast, into, general, _) = both_packings(base, &chunk(f.clone(), g.clone(), Some(odd)));
        assert!(!fast);
        assert_eq!(into, general);
        assert_eq!(into[999].1, TIME_ASIDE);
        for far in [base + (1 << 31), base - 1] {
            let mut beyond = g.clone();
            beyond[0] = far;
            let c = chunk(f.clone(), beyond, Some(no_nulls.clone()));
            let mut cells = vec![PackedEdge::default(); c.len()];
            assert!(!pack_offsets(base, &c, &mut |i, e| cells[i] = e));
            let err = pack_offset_chunk(base, &c, &mut cells).unwrap_err();
            assert!(err.to_string().contains("outside the range"), "{err}");
        }
        // Fewer cells than rows: the footer undercounted.
        let c = chunk(f, g, None);
        let mut cells = vec![PackedEdge::default(); 999];
        let err = pack_offset_chunk(base, &c, &mut cells).unwrap_err();
        assert!(err.to_string().contains("more rows"), "{err}");
    }

    #[test]
    fn out_of_core_counts_in_ranges_that_fit_half_the_budget_unless_codes_are_sparse() {
        // The paper graph under a 16 MiB budget: 7.5 M codes in ranges of 2 M counters.
        let plan = CountPlan::new(7_489_707, 21_105_470, 16, 16 << 20);
        assert_eq!(
            plan,
            CountPlan::Ranges {
                ranges: 4,
                bits: 21
            }
        );
        let CountPlan::Ranges { ranges, bits } = plan else {
            unreachable!()
        };
        let width = 1u64 << bits;
        assert!(width * 4 <= 8 << 20 && ranges as u64 * width >= 7_489_707);
        // Every end lands in its range at its offset.
        let mut grouped = vec![Vec::new(); ranges as usize];
        for code in [0, width - 1, width, 7_489_706] {
            plan.spill_end(code, &mut grouped);
        }
        let offsets = |q: usize| -> Vec<u32> {
            grouped[q]
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                .collect()
        };
        assert_eq!(offsets(0), [0, width as u32 - 1]);
        assert_eq!(offsets(1), [0]);
        assert_eq!(offsets(3), [(7_489_706 - 3 * width) as u32]);
        // Ten-digit ids 40 000 apart: 2^31 codes for 100 k edges are hashed.
        assert_eq!(
            CountPlan::new(1 << 31, 100_000, 8, 16 << 20),
            CountPlan::Hashed { partitions: 8 }
        );
        // A tiny budget still counts at least 1024 codes a range, in at most 4096 ranges.
        assert_eq!(
            CountPlan::new(10_000, 50_000, 2, 1),
            CountPlan::Ranges {
                ranges: 10,
                bits: 10
            }
        );
        assert_eq!(
            CountPlan::new(1 << 30, 1 << 31, 2, 1),
            CountPlan::Ranges {
                ranges: 4096,
                bits: 18
            }
        );
    }

    #[test]
    fn offset_codes_keep_id_order_and_refuse_ids_outside_the_announced_range() {
        let coder = Coder::Offset(5_000_000_000);
        let forward = pack(&coder, 5_000_000_007, 5_000_000_009).unwrap();
        let backward = pack(&coder, 5_000_000_009, 5_000_000_007).unwrap();
        assert_eq!(forward >> 1, backward >> 1);
        assert_eq!((forward & 1, backward & 1), (0, 1));
        assert_eq!(
            (
                coder.decode(forward >> 33),
                coder.decode((forward >> 1) & 0xffff_ffff)
            ),
            (5_000_000_007, 5_000_000_009)
        );
        assert!(pack(&coder, 5_000_000_007, 5_000_000_008).unwrap() < forward);
        // Below the base, or more than 2^31 above it: the footers lied; no code is made up.
        assert_eq!(pack(&coder, 4_999_999_999, 5_000_000_009), None);
        assert_eq!(pack(&coder, 5_000_000_007, 5_000_000_000 + (1 << 31)), None);
    }

    /// A group's edges as clean's parts hold them or not: `edges` follows among `users` codes
    /// spaced `spacing` apart, some answered, some crawled twice (`repeats`), some times
    /// aside; in `(follower, followee)` order when `sorted`.
    fn group_edges(
        seed: u64,
        users: u64,
        spacing: u64,
        edges: usize,
        repeats: bool,
        aside_times: bool,
        sorted: bool,
    ) -> (Vec<PackedEdge>, Vec<(u64, i64)>) {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut follows: Vec<(i64, i64, Option<i64>)> = Vec::new();
        while follows.len() < edges {
            let a = (next() % users * spacing) as i64;
            let b = (next() % users * spacing) as i64;
            if a == b {
                continue;
            }
            let time = |r: u64| match r % 6 {
                0 => None,
                1 if aside_times => Some((r >> 8) as i64 % 1_000_000 * 1000 + 3),
                _ => Some((r >> 8) as i64 % 1_000_000 * 1000),
            };
            follows.push((a, b, time(next())));
            if next() % 3 == 0 {
                follows.push((b, a, time(next())));
            }
            if repeats && next() % 5 == 0 {
                follows.push((a, b, time(next())));
            }
        }
        follows.sort_by_key(|&(a, b, _)| (a, b));
        if !repeats {
            follows.dedup_by_key(|&mut (a, b, _)| (a, b));
        }
        if !sorted {
            follows.sort_by_key(|&(a, b, t)| (a ^ b).wrapping_mul(0x9e37_79b9) ^ t.unwrap_or(0));
        }
        let mut aside = Vec::new();
        let packed = follows
            .iter()
            .map(|&(a, b, t)| {
                let key = pack(&Coder::Offset(0), a, b).unwrap();
                let time = time_code(t);
                if time == TIME_ASIDE {
                    aside.push((key, t.unwrap()));
                }
                PackedEdge { key, time }
            })
            .collect();
        (packed, aside)
    }

    #[test]
    fn joining_by_direction_agrees_with_one_sort_and_scan() {
        // (users, spacing, repeats, aside times, sorted): clean's parts (the merge without a
        // branch), edges crawled twice, times aside, shuffled input; codes of one, two and
        // three 8-bit digits (and spread so that some digits are shared by all).
        let cases = [
            (300, 1, false, false, true),
            (300, 1, true, false, true),
            (300, 1, false, true, true),
            (300, 1, true, true, false),
            (5_000, 7, false, false, true),
            (5_000, 7, false, false, false),
            (2_000, 1 << 16, false, false, true),
            (40_000, 1_000, true, false, true),
        ];
        let mut buffers = GroupBuffers::default();
        for (i, &(users, spacing, repeats, aside_times, sorted)) in cases.iter().enumerate() {
            let (edges, aside) = group_edges(
                i as u64 + 1,
                users,
                spacing,
                20_000,
                repeats,
                aside_times,
                sorted,
            );
            let mut all = edges.clone();
            let mut expected = FriendsStats::default();
            let sorted_pairs =
                sort_and_scan(&mut all, &AsideTimes(aside.clone()).seal(), &mut expected);
            assert!(
                sorted_pairs.len() > 500,
                "case {i}: {} pairs",
                sorted_pairs.len()
            );

            // Stale edges from a larger group before must not matter.
            buffers.edges.clear();
            buffers
                .edges
                .resize(edges.len() + 77, PackedEdge { key: 6, time: 0 });
            let rows = edges.len() + i % 2;
            let mut ends = TwoEnded::new(&mut buffers.edges[..rows]);
            for &edge in &edges {
                TwoEnded::place(ends.cells, &mut ends.state, edge);
            }
            let packed = ends.packed();
            assert_eq!(packed.forward_order == Order::Unsorted, !sorted, "case {i}");
            assert_eq!(packed.reverse_order == Order::Unsorted, !sorted, "case {i}");
            let joined = buffers.join(rows, packed, aside);
            let expected_pairs: Vec<(u64, i64)> = sorted_pairs.iter().copied().collect();
            assert_eq!(joined.pairs, expected_pairs, "case {i}");
            assert_eq!(joined.distinct, expected.distinct_edges, "case {i}");
            assert_eq!(joined.duplicates, expected.duplicate_edges, "case {i}");
            assert_eq!(repeats, joined.duplicates > 0, "case {i}");
        }
    }

    #[test]
    fn the_core_agrees_with_the_definition() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut edges = Vec::new();
        for _ in 0..20_000 {
            let (a, b) = ((next() % 300) as i64 + 1, (next() % 300) as i64 + 1);
            // Whole seconds, odd milliseconds (kept aside) and unknown times.
            let t = match next() % 4 {
                0 => None,
                1 => Some((next() % 1_000_000) as i64 * 1000 + 7),
                _ => Some((next() % 1_000_000) as i64 * 1000),
            };
            edges.push((a, b, t));
        }
        let (f, g, t): (Vec<i64>, Vec<i64>, Vec<Option<i64>>) =
            edges.iter().fold((vec![], vec![], vec![]), |mut acc, e| {
                acc.0.push(e.0);
                acc.1.push(e.1);
                acc.2.push(e.2);
                acc
            });
        let ours = mutual_pairs_of(&f, &g, &t);
        assert!(
            ours.len() > 100,
            "{} pairs: too few to mean much",
            ours.len()
        );
        assert_eq!(ours, naive(&edges));
    }
}

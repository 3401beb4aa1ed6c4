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
//! `--slice i/N` keeps only pairs whose hash bucket is `i`. Both produce exactly the rows
//! the single in-memory run produces (for their buckets).
//!
//! Invariants: `uid_a < uid_b` in every output row; each pair appears once; `since` is the
//! later of the two follow times when both are known (for an edge crawled several times, its
//! earliest known time).

mod carried;
mod codes;
mod counts;
pub mod hbase;
mod input;
pub mod job;
mod join;
mod output;
mod sink;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems};
use codes::{Coder, MAX_CODE, PACKED_EDGE_BYTES};
use input::Input;
pub use join::mutual_pairs_of;
use join::out_of_core::CountPlan;
pub use output::FriendsWriter;
pub use sink::{BatchWriter, FriendsSink};

pub use crate::dataset::slice::Slice;

/// Which slice of the pair space a run handles: the pairs whose bucket is the slice's.
impl Slice {
    pub(crate) fn keeps(self, pair: u64) -> bool {
        self.count == 1 || bucket(pair, SLICE_SEED) % self.count as u64 == self.index as u64
    }
}

/// Seeds the slice hash apart from the out-of-core partition hash of the same pairs.
pub(crate) const SLICE_SEED: u64 = 0x5bd1_e995;

/// A well-mixed hash of a pair (by ids, not codes, so every machine agrees on buckets
/// whatever its dictionary).
pub(crate) fn bucket(pair: u64, seed: u64) -> u64 {
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
    /// The night whose friendships this run continued from, with the follows nights since
    /// (none: a join over every night).
    pub carried_from: Option<String>,
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

/// Computes mutual follows over the given follows Parquet files (files or folders), all in
/// memory and sorted: for tests and other small callers. Jobs stream with [`run_to`].
pub fn run(fs: &FileSystems, inputs: &[String], options: &FriendsOptions) -> Result<Friends> {
    let collect = sink::Collect::default();
    let stats = run_to(fs, inputs, options, &collect)?;
    let mut friends = collect.0.into_inner().unwrap_or_else(|e| e.into_inner());
    friends.stats = stats;
    Ok(friends.sorted())
}

/// Which join a run takes: each is for one kind of input (docs/design/friends.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Clean's follows, partitioned by canonical pair: each part joined alone, in one pass
    /// when it is one date as clean wrote it, else in a buffer of that part's edges.
    PairParts,
    /// Any other input that fits the budget: every edge packed in one array, sorted, scanned.
    InMemory,
    /// Input whose packed edges exceed the budget: hash partitions spilled to disk, each
    /// sorted and scanned on its own.
    OutOfCore { partitions: u32 },
}

/// Bytes an edge of the input costs the in-memory path: the packed edge.
const IN_MEMORY_EDGE_BYTES: u64 = PACKED_EDGE_BYTES as u64;

/// Bytes an edge of the input may cost the pair-parts path beyond its buffers: the ends of
/// the pairs found, kept until every part is joined. A pair takes two edges, so there are at
/// most as many ends as edges: 4 bytes each with dense codes, 8 with sparse ones (sorted).
const fn pair_parts_edge_bytes(dense_codes: bool) -> u64 {
    if dense_codes {
        4
    } else {
        8
    }
}

/// Bytes a row of a part costs the thread joining it: its packed edge and room to sort it,
/// or the row kept by the one-pass scan, and the pair it may close.
const PAIR_PARTS_ROW_BYTES: u64 = 2 * PACKED_EDGE_BYTES as u64 + 24;

/// The join for input of `edges` rows, with `largest_part` rows in its largest pair part
/// when it is laid out by canonical pair, under `budget` bytes, on `threads` threads.
///
/// The pair-parts path is taken whenever the most it can hold fits: a thread's buffers for
/// the largest part, and the ends of at most one pair for two edges. That is far less than
/// the whole input's packed edges, so a budget that the streamed path fits in does not push
/// a run out of core, and the peak stays under it. The bound assumes the most pairs the
/// edges allow; a budget between it and what a run with fewer pairs needs goes out of core.
pub fn choose(
    edges: u64,
    largest_part: Option<u64>,
    dense_codes: bool,
    threads: u64,
    budget: u64,
) -> Strategy {
    if let Some(rows) = largest_part {
        let buffers = threads.max(1) * rows * PAIR_PARTS_ROW_BYTES;
        if buffers + edges * pair_parts_edge_bytes(dense_codes) <= budget {
            return Strategy::PairParts;
        }
    }
    let needed = edges * IN_MEMORY_EDGE_BYTES;
    if needed <= budget {
        Strategy::InMemory
    } else {
        Strategy::OutOfCore {
            partitions: needed.div_ceil(budget.max(1)).clamp(2, 4096) as u32,
        }
    }
}

/// Computes mutual follows over the given follows Parquet files (files or folders) and hands
/// the pairs and counts to `sink` as they are found. Memory: what [`choose`] counts for the
/// strategy it picks, plus the output buffers.
pub fn run_to(
    fs: &FileSystems,
    inputs: &[String],
    options: &FriendsOptions,
    sink: &dyn FriendsSink,
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
        Coder::Dictionary(input::build_dictionary(&input)?)
    };
    if let Coder::Dictionary(ids) = &coder {
        if ids.len() as u64 > MAX_CODE as u64 {
            return Err(Error::Usage(format!(
                "{} distinct users: more than 2^31 does not fit the packed pair layout",
                ids.len()
            )));
        }
    }

    let groups = input.pair_groups();
    let largest_part = groups.as_ref().map(|groups| {
        let rows = |g: &Vec<usize>| g.iter().map(|&f| metas[f].rows as u64).sum::<u64>();
        groups.iter().map(rows).max().unwrap_or(0)
    });
    // How many user codes there may be: offsets up to the largest id, or dictionary ranks.
    let codes = match &coder {
        Coder::Offset(base) => max_id.wrapping_sub(*base) as u64 + 1,
        Coder::Dictionary(ids) => ids.len() as u64,
    };
    // Codes few enough to count in place, by code (every code's counter is zeroed and read
    // once: 4 bytes a code, against the 12 bytes an edge the budget allows).
    let count_codes =
        (edges_read > 0 && codes <= 2 * edges_read + (1 << 20)).then_some(codes as usize);
    let threads = rayon::current_num_threads() as u64;
    let strategy = choose(
        edges_read,
        largest_part,
        count_codes.is_some(),
        threads,
        options.memory_budget,
    );
    log::info!(
        "friends: {edges_read} edges, {} coding, {strategy:?} for a {} MB budget",
        if matches!(coder, Coder::Offset(_)) {
            "offset"
        } else {
            "dictionary"
        },
        options.memory_budget >> 20
    );

    let mut stats = FriendsStats {
        edges_read,
        partitions: match strategy {
            Strategy::OutOfCore { partitions } => partitions,
            _ => 1,
        },
        dictionary_encoded: matches!(coder, Coder::Dictionary(_)),
        ..FriendsStats::default()
    };
    match (strategy, groups) {
        (Strategy::PairParts, Some(groups)) => {
            // Each part's pairs are written by the thread that joined it; only the ends
            // are left to count.
            let counts = join::pair_parts::mutual_by_pair_part(
                &input,
                &groups,
                &coder,
                options.slice,
                sink,
                count_codes,
                &mut stats,
            )?;
            stats.users_with_friends += counts::write_parts(sink, &coder, &counts)?;
        }
        (Strategy::OutOfCore { partitions }, _) => {
            let plan = CountPlan::new(codes, edges_read, partitions, options.memory_budget);
            join::out_of_core::mutual_out_of_core(
                &input, &coder, options, partitions, plan, &mut stats, sink,
            )?;
        }
        _ => {
            let pairs =
                join::in_memory::mutual_in_memory(&input, &coder, options.slice, &mut stats)?;
            stats.mutual_pairs = pairs.len() as u64;
            let counts = counts::friend_counts(&pairs);
            log::debug!("friends: friends counted, peak {} MB", peak_mb());
            let (written, users) = rayon::join(
                || sink::write_runs(sink, 0, &coder, &pairs),
                || counts::write_parts(sink, &coder, &counts),
            );
            written?;
            stats.users_with_friends += users?;
        }
    }
    log::debug!("friends: output handed over, peak {} MB", peak_mb());
    stats.reciprocity = if stats.distinct_edges > 0 {
        2.0 * stats.mutual_pairs as f64 / stats.distinct_edges as f64
    } else {
        0.0
    };
    log::debug!("friends: done, peak {} MB", peak_mb());
    Ok(stats)
}

pub(crate) fn peak_mb() -> u64 {
    crate::report::peak_rss_bytes().unwrap_or(0) >> 20
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

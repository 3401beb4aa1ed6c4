//! The joins that find mutual pairs, one module per input they are for, over the scan they
//! share: sorted packed edges, where a pair's two directions are neighbouring runs.
//!
//! - [`pair_parts`]: clean's follows, partitioned by canonical pair;
//! - [`in_memory`]: any other input whose packed edges fit the budget;
//! - [`out_of_core`]: input whose packed edges do not.
//!
//! Invariant: every strategy finds exactly the pairs the scan of all edges sorted finds
//! (tests compare each with a naive reference).

pub(crate) mod in_memory;
pub(crate) mod out_of_core;
pub(crate) mod pair_parts;

use arrow::array::{Int64Array, TimestampMillisecondArray};
use rayon::prelude::*;

use super::codes::{pack_into, AsideTimes, Coder, PackedEdge, NO_TIME, TIME_ASIDE, TIME_NONE};
use super::input::EdgeChunk;
use super::{FriendsStats, Slice};

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
pub(crate) fn sort_and_scan(
    edges: &mut [PackedEdge],
    aside: &AsideTimes,
    stats: &mut FriendsStats,
) -> Pairs {
    // A parallel in-place radix sort: its low-memory tuner keeps the extra memory to a small
    // fraction of the edges, and on these keys it is faster than rayon's parallel pdqsort
    // (docs/design/friends.md).
    {
        use rdst::RadixSort;
        edges.radix_sort_builder().with_low_mem_tuner().sort();
    }
    scan_sorted(edges, aside, stats)
}

/// Earliest known time (epoch ms) of a run of equal keys.
pub(crate) fn earliest(run: &[PackedEdge], aside: &AsideTimes) -> Option<i64> {
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
pub(crate) fn scan_sorted(
    edges: &[PackedEdge],
    aside: &AsideTimes,
    stats: &mut FriendsStats,
) -> Pairs {
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
pub(crate) struct Pairs(pub(crate) Vec<Vec<(u64, i64)>>);

impl Pairs {
    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(Vec::len).sum()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &(u64, i64)> + '_ {
        self.0.iter().flatten()
    }
}

/// Splits sorted edges into about `n` chunks that never cut a pair's edges apart.
pub(crate) fn pair_aligned_chunks(edges: &[PackedEdge], n: usize) -> Vec<&[PackedEdge]> {
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
pub(crate) struct ChunkScan {
    /// `(pair, since)` of each mutual pair, in key order.
    pub(crate) pairs: Vec<(u64, i64)>,
    pub(crate) distinct: u64,
    pub(crate) duplicates: u64,
}

/// One sequential scan of a pair-aligned chunk. An edge crawled once (nearly all of them)
/// takes the short path: its time is decoded from its own code, with no run to fold.
pub(crate) fn scan_chunk(edges: &[PackedEdge], aside: &AsideTimes) -> ChunkScan {
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

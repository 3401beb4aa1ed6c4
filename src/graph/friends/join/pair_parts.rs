//! Clean's follows, partitioned by canonical pair ([`crate::dataset::follows`]): each part
//! holds both directions of its pairs and is joined alone, on one thread, and its pairs are
//! written as one sorted run by that thread.
//!
//! One date as clean wrote it is read in one pass, with no buffer and no sort (a pair's two
//! directions are neighbouring rows). Several dates of a part, or a part in another order,
//! are joined in a buffer of that part's edges: each direction sorted only if it did not come
//! sorted, then one merge. The pass checks the order it relies on.

use rayon::prelude::*;

use super::{earliest, ChunkScan};
use crate::error::{Error, Result};
use crate::graph::friends::codes::*;
use crate::graph::friends::counts::{EndBuckets, FriendCounts};
use crate::graph::friends::input::EdgeChunk;
use crate::graph::friends::input::Input;
use crate::graph::friends::sink::{write_run, FriendsSink};
use crate::graph::friends::{peak_mb, FriendsStats, Slice};

/// The in-memory path for input partitioned by canonical pair (clean's follows): each group
/// of files holds both directions of its pairs, so it is decoded, sorted and scanned on its
/// own, a group per thread at a time, in buffers of one group's edges (small enough to stay
/// mostly in cache, where one array of all edges is sorted from memory). Each group's pairs
/// are one sorted run of the output.
pub(crate) fn mutual_by_pair_part(
    input: &Input,
    groups: &[Vec<usize>],
    coder: &Coder,
    slice: Slice,
    sink: &dyn FriendsSink,
    count_codes: Option<usize>,
    stats: &mut FriendsStats,
) -> Result<FriendCounts> {
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
    // The runs are written as they are found, and the threads file their pairs' ends by range
    // of codes as they go (or, with codes too sparse for that, keep the ends to sort), and
    // the pairs go: no pass over all the pairs is left for the end, and no pair is held
    // until then; see [`EndBuckets`].
    let ends = count_codes.map(|codes| EndBuckets::new(codes as u64, buffers.len()));
    let sparse_ends: std::sync::Mutex<Vec<u64>> = Default::default();
    let scanned: Vec<((ChunkScan, u64, bool), u64)> = groups
        .par_iter()
        .enumerate()
        .map(|(run, files)| {
            let thread = rayon::current_thread_index().unwrap_or(0) % buffers.len();
            let mut joined = join(files)?;
            let found = joined.0.pairs.len() as u64;
            write_run(sink, run, coder, &[&joined.0.pairs])?;
            match &ends {
                Some(ends) => {
                    if !ends.add(thread, &joined.0.pairs) {
                        return Err(Error::BadInput {
                            path: input.location_of(files).to_string(),
                            line: 0,
                            reason: "an id beyond the range the Parquet statistics announce".into(),
                        });
                    }
                }
                None => sparse_ends
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(
                        joined
                            .0
                            .pairs
                            .iter()
                            .flat_map(|(p, _)| [p >> 32, p & 0xffff_ffff]),
                    ),
            }
            // Back to the thread's buffers for its next part, rather than growing a list of
            // pairs anew for every part, page by page.
            let mut buffers = buffers[thread].lock().unwrap_or_else(|e| e.into_inner());
            if joined.0.pairs.capacity() > buffers.found.capacity() {
                buffers.found = std::mem::take(&mut joined.0.pairs);
            } else {
                joined.0.pairs = Vec::new();
            }
            Ok((joined, found))
        })
        .collect::<Result<_>>()?;
    let counts = match ends {
        Some(ends) => FriendCounts::Buckets(ends.finish()),
        None => {
            let mut sorted = sparse_ends.into_inner().unwrap_or_else(|e| e.into_inner());
            rdst::RadixSort::radix_sort_unstable(&mut sorted);
            FriendCounts::SortedEnds(sorted)
        }
    };
    log::debug!(
        "friends: {} pair parts scanned at {:?}, peak {} MB",
        groups.len(),
        started.elapsed(),
        peak_mb()
    );
    stats.pair_parts = groups.len() as u32;
    for ((scan, selfs, streamed), found) in scanned {
        stats.mutual_pairs += found;
        stats.streamed_parts += streamed as u32;
        stats.distinct_edges += scan.distinct;
        stats.duplicate_edges += scan.duplicates;
        stats.self_edges += selfs;
    }
    Ok(counts)
}

/// A thread's buffers for the groups it joins: the group's edges (see [`TwoEnded`]), room
/// for sorting them, and for the pairs found; for [`scan_pair_ordered`], its rows kept and
/// a list for the pairs it finds, handed back once they are written.
#[derive(Default)]
pub(crate) struct GroupBuffers {
    pub(crate) edges: Vec<PackedEdge>,
    pub(crate) spare: Vec<PackedEdge>,
    pub(crate) pairs: Vec<(u64, i64)>,
    pub(crate) scratch: Vec<(u64, usize)>,
    pub(crate) found: Vec<(u64, i64)>,
}

impl GroupBuffers {
    /// The mutual pairs among a group's edges, packed by a [`TwoEnded`] into
    /// `self.edges[..rows]` (those with a time aside listed in `aside`), with the group's
    /// distinct and duplicate edges. Gives what sorting them all and [`scan_chunk`] give, in
    /// the same order.
    pub(crate) fn join(
        &mut self,
        rows: usize,
        packed: TwoEndedPacked,
        aside: Vec<(u64, i64)>,
    ) -> ChunkScan {
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
pub(crate) fn scan_pair_ordered(
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
pub(crate) fn scan_ordered_with(
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
pub(crate) enum Order {
    Strict,
    Sorted,
    Unsorted,
}

impl Order {
    pub(crate) fn of(ascending: bool, strictly: bool) -> Order {
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
pub(crate) struct TwoEnded<'a> {
    pub(crate) cells: &'a mut [PackedEdge],
    pub(crate) state: TwoEndedState,
}

/// What a [`TwoEnded`] has placed so far: how many edges each way, the last of each and
/// whether they have ascended (strictly) so far. The order checks start from 0, below any
/// real value: a forward key has a large id of at least 1, a swapped pair too.
#[derive(Clone, Copy, Default)]
pub(crate) struct TwoEndedState {
    pub(crate) forward: usize,
    pub(crate) reverse: usize,
    pub(crate) last_forward: u64,
    pub(crate) last_reverse: u64,
    pub(crate) last_reverse_key: u64,
    /// Broken ascents: forward, forward strictly, reverse by `(large, small)`, the same
    /// strictly, reverse by pair, the same strictly.
    pub(crate) broken: [bool; 6],
}

/// What a group's packing gave: edges each way, and the order each came in (forward by
/// pair, reverse by `(large, small)`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TwoEndedPacked {
    pub(crate) forward: usize,
    pub(crate) reverse: usize,
    pub(crate) forward_order: Order,
    pub(crate) reverse_order: Order,
    /// Of `reverse` by pair (as in clean's parts).
    pub(crate) reverse_pair_order: Order,
}

impl<'a> TwoEnded<'a> {
    pub(crate) fn new(cells: &'a mut [PackedEdge]) -> TwoEnded<'a> {
        TwoEnded {
            cells,
            state: TwoEndedState::default(),
        }
    }

    /// Places one edge; there must be room (see [`TwoEnded::pack`]).
    #[inline(always)]
    pub(crate) fn place(cells: &mut [PackedEdge], st: &mut TwoEndedState, edge: PackedEdge) {
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
    pub(crate) fn pack(
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

    pub(crate) fn packed(&self) -> TwoEndedPacked {
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
pub(crate) const DIGIT_BITS: u32 = 8;

/// Sorts edges that are in `(large, small)` order into pair order, `(small, large)`: a
/// stable sort by the small id alone keeps each small id's edges in the order of their large
/// ids. So a least-significant-digit counting sort over the small id's bits does it, in three
/// passes for ids spanning up to 16 M, fewer than a radix sort of the whole 64-bit keys
/// takes. With `backwards` the edges are in that order read from the end. `spare` is the
/// sort's second buffer.
pub(crate) fn sort_transposed(
    edges: &mut [PackedEdge],
    backwards: bool,
    spare: &mut Vec<PackedEdge>,
) {
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
pub(crate) fn run_end(edges: &[PackedEdge], i: usize) -> usize {
    let key = edges[i].key;
    let mut j = i + 1;
    while j < edges.len() && { edges[j].key } == key {
        j += 1;
    }
    j
}

/// The earliest known time (ms, or [`NO_TIME`]) of a run of equal edges.
#[inline]
pub(crate) fn run_time(run: &[PackedEdge], aside: &AsideTimes) -> i64 {
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
pub(crate) fn scan_directions(
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
pub(crate) fn scan_distinct(
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

/// [`pack_offsets`] straight into a [`TwoEnded`]'s cells. Returns false, with the state as
/// it was, when the general path must pack the chunk (what was placed lies in free slots:
/// forgetting it is enough).
pub(crate) fn place_offsets(
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

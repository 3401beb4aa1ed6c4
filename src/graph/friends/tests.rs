//! Unit tests of the joins, the counts and the packing against naive references.

use arrow::array::{Int64Array, TimestampMillisecondArray};

use super::codes::*;
use super::counts::*;
use super::input::*;
use super::join::pair_parts::*;
use super::join::*;
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

/// The choice of join follows what each path holds: clean's pair parts stay on the
/// pair-parts path under any budget their buffers and ends fit in, far below what the
/// packed edges of the whole input take (the soc-sinaweibo-size case: 261.5 M edges in 227
/// parts of about 1.15 M rows, 2 GiB on 2 threads), and go out of core only below that.
#[test]
fn the_budget_chooses_by_what_each_path_holds() {
    const GIB: u64 = 1 << 30;
    let (edges, largest) = (261_500_000u64, 1_152_000u64);
    assert_eq!(
        choose(edges, Some(largest), true, 2, 2 * GIB),
        Strategy::PairParts
    );
    // The same edges from another writer need all of them packed: 3.1 GB.
    assert_eq!(
        choose(edges, None, true, 2, 2 * GIB),
        Strategy::OutOfCore { partitions: 2 }
    );
    assert_eq!(choose(edges, None, true, 2, 4 * GIB), Strategy::InMemory);
    // Pair parts whose bound does not fit: out of core, never over the budget.
    let bound = 2 * largest * PAIR_PARTS_ROW_BYTES + edges * 4;
    assert_eq!(
        choose(edges, Some(largest), true, 2, bound),
        Strategy::PairParts
    );
    assert!(matches!(
        choose(edges, Some(largest), true, 2, bound - 1),
        Strategy::OutOfCore { .. }
    ));
    // Sparse codes keep 8-byte ends.
    assert!(matches!(
        choose(edges, Some(largest), false, 2, bound),
        Strategy::OutOfCore { .. }
    ));
    // More threads, more buffers.
    assert!(matches!(
        choose(edges, Some(largest), true, 64, 2 * GIB),
        Strategy::OutOfCore { .. }
    ));
}

//! Out of core: edges hash-partitioned by pair into spill files ([`crate::spill`]), each
//! partition sorted and scanned on its own, its pairs written as sorted runs; the pairs' ends
//! spilled by range (or hash) of codes and counted a partition at a time. For input whose
//! packed edges exceed the memory budget.

use rayon::prelude::*;

use super::sort_and_scan;
use crate::error::Result;
use crate::graph::friends::codes::*;
use crate::graph::friends::counts::{runs_of, write_counts, CountCursor};
use crate::graph::friends::input::Input;
use crate::graph::friends::sink::{write_runs, FriendsSink};
use crate::graph::friends::{bucket, peak_mb, FriendsOptions, FriendsStats};
use crate::spill::Partitions;

/// The out-of-core path: edges are hash-partitioned by pair into spill files (decoded in
/// parallel, one batch at a time); each partition is then read back, sorted and scanned on its
/// own, its pairs go to the sink and their two ends to a second spill, partitioned by user,
/// from which the counts are made one partition at a time. Memory: about one partition.
pub(crate) fn mutual_out_of_core(
    input: &Input,
    coder: &Coder,
    options: &FriendsOptions,
    partitions: u32,
    plan: CountPlan,
    stats: &mut FriendsStats,
    sink: &dyn FriendsSink,
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
    let mut runs = 0;
    for p in 0..partitions {
        edges.clear();
        edges.resize(spill.records(p, PACKED_EDGE_BYTES)?, PackedEdge::default());
        spill.read_exact(p, edge_bytes_mut(&mut edges))?;
        spill.remove(p)?;
        let pairs = sort_and_scan(&mut edges, &aside, stats);
        stats.mutual_pairs += pairs.len() as u64;
        log::debug!("friends: partition {p} scanned, peak {} MB", peak_mb());
        // Each partition's pairs are sorted runs of their own.
        runs += write_runs(sink, runs, coder, &pairs)?;
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
                // Ranges are in code order: each is a part of the counts.
                stats.users_with_friends += write_counts(sink, q as usize, coder, &mut counts)?;
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
                stats.users_with_friends += write_counts(sink, q as usize, coder, &mut counts)?;
            }
        }
    }
    Ok(())
}

/// How an out-of-core run counts friends per user from the pairs' two ends, spilled as the
/// pair partitions are scanned, then read back one partition at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CountPlan {
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
    pub(crate) fn new(codes: u64, edges: u64, partitions: u32, budget: u64) -> CountPlan {
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

    pub(crate) fn partitions(self) -> u32 {
        match self {
            CountPlan::Ranges { ranges, .. } => ranges,
            CountPlan::Hashed { partitions } => partitions,
        }
    }

    /// Appends one pair end to its partition's buffer.
    pub(crate) fn spill_end(self, code: u64, grouped: &mut [Vec<u8>]) {
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
pub(crate) struct Scatter {
    pub(crate) partition: Vec<u32>,
    pub(crate) placed: Vec<PackedEdge>,
    pub(crate) starts: Vec<usize>,
}

impl Scatter {
    /// Appends a batch of edges to their pair partitions: placed by partition (counted, then
    /// laid out, one pass each, not sorted), so each writer is locked once per batch and
    /// takes its edges as one run of bytes.
    pub(crate) fn spill(&mut self, spill: &Partitions, batch: &[PackedEdge]) -> Result<()> {
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

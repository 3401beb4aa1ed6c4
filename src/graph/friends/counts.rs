//! Friends per user: every pair counts once for each of its two users, counted by code in
//! place when codes are dense, by sorting the ends when they are sparse, or bucket by bucket
//! once every pair part is joined (docs/design/friends.md).
//!
//! Invariants: each user with friends is in exactly one part of the output, and parts are
//! in code (so uid) order; a user without friends is not written.

use rayon::prelude::*;

use super::codes::Coder;
use super::join::Pairs;
use super::sink::{count_batch, FriendsSink, PAIR_RUNS, SINK_BATCH};
use crate::dataset::friends::counts_schema;
use crate::error::Result;

/// Friends per user code, in code order, of pairs held in memory: every pair counts once for
/// each of its two users.
pub(crate) enum FriendCounts {
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
    #[cfg(test)]
    pub(crate) fn cursor(&self) -> CountCursor<'_> {
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
pub(crate) enum CountCursor<'a> {
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
    pub(crate) fn next_batch(
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
pub(crate) fn take_counted(
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
pub(crate) const END_BUCKET_SHIFT: u32 = 15;

/// The ends of the pairs found so far, by range of user codes (a bucket), in a list per
/// thread and bucket: counted a bucket at a time once every part is joined (only then is a
/// count final), each in counters that stay in cache. Counting every end as its pair was
/// found, in atomic counters over all the codes, waited on memory at each one (the larger
/// ends land anywhere in the counters; docs/design/friends.md).
pub(crate) struct EndBuckets {
    pub(crate) codes: u64,
    pub(crate) lists: Vec<std::sync::Mutex<Vec<Vec<u32>>>>,
}

impl EndBuckets {
    pub(crate) fn new(codes: u64, threads: usize) -> EndBuckets {
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
    pub(crate) fn add(&self, thread: usize, pairs: &[(u64, i64)]) -> bool {
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

    pub(crate) fn finish(self) -> EndLists {
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
pub(crate) struct EndLists {
    pub(crate) codes: u64,
    /// By thread, then bucket.
    pub(crate) lists: Vec<Vec<Vec<u32>>>,
}

impl EndLists {
    pub(crate) fn buckets(&self) -> usize {
        self.lists.first().map_or(0, Vec::len)
    }

    /// The friends of every code of bucket `b`, in `by_code` (one count a code of the
    /// bucket); returns the bucket's first code.
    pub(crate) fn count(&self, b: usize, by_code: &mut Vec<u32>) -> u64 {
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
    pub(crate) fn cursor(&self, buckets: std::ops::Range<usize>) -> CountCursor<'_> {
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
pub(crate) fn runs_of(sorted: &[u64]) -> impl Iterator<Item = (u64, u64)> + '_ {
    sorted
        .chunk_by(|x, y| x == y)
        .map(|run| (run[0], run.len() as u64))
}

pub(crate) fn friend_counts(pairs: &Pairs) -> FriendCounts {
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

/// Writes the counts as parts of about equal ranges of codes, one per thread, in parallel;
/// each part in code order (so in uid order). Returns how many users have friends.
pub(crate) fn write_parts(
    sink: &dyn FriendsSink,
    coder: &Coder,
    counts: &FriendCounts,
) -> Result<u64> {
    let threads = rayon::current_num_threads().max(1);
    let users: Vec<u64> = match counts {
        FriendCounts::Buckets(ends) => {
            let buckets = ends.buckets();
            let step = buckets.div_ceil(threads).max(1);
            (0..buckets.div_ceil(step))
                .into_par_iter()
                .map(|part| {
                    let range = part * step..((part + 1) * step).min(buckets);
                    write_counts(sink, part, coder, &mut ends.cursor(range))
                })
                .collect::<Result<_>>()?
        }
        FriendCounts::Dense(by_code) => {
            // As the pairs: a fixed number of parts, so any machine writes the same files.
            let step = by_code.len().div_ceil(PAIR_RUNS).max(1 << 16);
            by_code
                .par_chunks(step)
                .enumerate()
                .map(|(part, chunk)| {
                    let mut cursor = CountCursor::Dense {
                        by_code: chunk,
                        at: 0,
                        base: (part * step) as u64,
                    };
                    write_counts(sink, part, coder, &mut cursor)
                })
                .collect::<Result<_>>()?
        }
        FriendCounts::SortedEnds(ends) => {
            vec![write_counts(
                sink,
                0,
                coder,
                &mut CountCursor::Runs(Box::new(runs_of(ends))),
            )?]
        }
    };
    Ok(users.iter().sum())
}

/// Writes the counts a cursor gives as part `part`. Returns how many users it held.
pub(crate) fn write_counts(
    sink: &dyn FriendsSink,
    part: usize,
    coder: &Coder,
    counts: &mut CountCursor,
) -> Result<u64> {
    let mut writer = sink.open_counts(part)?;
    let schema = counts_schema();
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

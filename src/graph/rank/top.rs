//! The top N of a list of `(uid, value)`: value descending, then uid ascending, so a board
//! is the same whatever order its candidates came in.

use std::cmp::Ordering;

use serde::Serialize;

/// One row of a board.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Ranked {
    /// 1 for the first.
    pub rank: u32,
    pub id: i64,
    pub value: i64,
}

fn order(a: &(i64, i64), b: &(i64, i64)) -> Ordering {
    b.1.cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The first `n` of `candidates` (`(uid, value)`, each uid once) in board order, ranked.
/// A selection, then a sort of the `n` only: a partition may hold millions of users.
pub fn top(mut candidates: Vec<(i64, i64)>, n: usize) -> Vec<Ranked> {
    if n == 0 {
        return Vec::new();
    }
    if candidates.len() > n {
        candidates.select_nth_unstable_by(n - 1, order);
        candidates.truncate(n);
    }
    candidates.sort_unstable_by(order);
    candidates
        .into_iter()
        .enumerate()
        .map(|(i, (id, value))| Ranked {
            rank: i as u32 + 1,
            id,
            value,
        })
        .collect()
}

/// The first `n` of candidates pushed one at a time (each uid once), in board order: what
/// [`top`] gives for the same candidates, holding `n` of them rather than all.
pub struct TopN {
    n: usize,
    /// The worst of those kept on top: `(Reverse(value), id)` is larger when ranked lower.
    kept: std::collections::BinaryHeap<(std::cmp::Reverse<i64>, i64)>,
    /// Candidates pushed.
    pub pushed: u64,
}

impl TopN {
    pub fn new(n: usize) -> TopN {
        TopN {
            n,
            kept: std::collections::BinaryHeap::with_capacity(n + 1),
            pushed: 0,
        }
    }

    pub fn push(&mut self, id: i64, value: i64) {
        self.pushed += 1;
        let key = (std::cmp::Reverse(value), id);
        if self.kept.len() < self.n {
            self.kept.push(key);
        } else if self.kept.peek().is_some_and(|worst| key < *worst) {
            self.kept.pop();
            self.kept.push(key);
        }
    }

    /// The board, rank 1 first.
    pub fn finish(self) -> Vec<Ranked> {
        self.kept
            .into_sorted_vec()
            .into_iter()
            .enumerate()
            .map(|(i, (std::cmp::Reverse(value), id))| Ranked {
                rank: i as u32 + 1,
                id,
                value,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition: sort everything, take the first n.
    fn naive(mut candidates: Vec<(i64, i64)>, n: usize) -> Vec<(i64, i64)> {
        candidates.sort_by_key(|&(id, value)| (std::cmp::Reverse(value), id));
        candidates.truncate(n);
        candidates
    }

    #[test]
    fn ties_go_to_the_smaller_id() {
        let board = top(vec![(9, 5), (3, 5), (7, 8), (1, 2)], 3);
        let rows: Vec<_> = board.iter().map(|r| (r.rank, r.id, r.value)).collect();
        assert_eq!(rows, vec![(1, 7, 8), (2, 3, 5), (3, 9, 5)]);
        assert!(top(vec![(1, 1)], 0).is_empty());
    }

    /// Candidates with distinct ids, shuffled by a multiplier so input order is not id order.
    fn shuffled(values: &[i64]) -> Vec<(i64, i64)> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| ((i as i64 * 7919) % 1009, *v))
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect()
    }

    proptest! {
        #[test]
        fn equals_a_full_sort(
            values in proptest::collection::vec(0i64..20, 0..300),
            n in 0usize..40,
        ) {
            let candidates = shuffled(&values);
            let want = naive(candidates.clone(), n);
            let got: Vec<(i64, i64)> = top(candidates, n).iter().map(|r| (r.id, r.value)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn pushed_one_at_a_time_equals_top(
            values in proptest::collection::vec(-5i64..20, 0..300),
            n in 0usize..40,
        ) {
            let candidates = shuffled(&values);
            let mut streamed = TopN::new(n);
            for &(id, value) in &candidates {
                streamed.push(id, value);
            }
            prop_assert_eq!(streamed.pushed, candidates.len() as u64);
            prop_assert_eq!(streamed.finish(), top(candidates, n));
        }

        #[test]
        fn the_top_of_partition_tops_is_the_top(
            values in proptest::collection::vec(0i64..10, 0..300),
            parts in 1u32..6,
            n in 1usize..30,
        ) {
            let all: Vec<(i64, i64)> = values.iter().enumerate().map(|(i, v)| (i as i64, *v)).collect();
            let mut merged = Vec::new();
            for p in 0..parts {
                let mine: Vec<_> = all.iter().copied().filter(|(id, _)| crate::hash::id_bucket(*id, parts) == p).collect();
                merged.extend(top(mine, n).iter().map(|r| (r.id, r.value)));
            }
            prop_assert_eq!(top(merged, n), top(all, n));
        }
    }
}

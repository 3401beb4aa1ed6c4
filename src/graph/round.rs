//! A round of hash partitions, read together: jobs that cut their keys into partitions by
//! [`crate::hash::id_bucket`] and hold one partition a thread read every input file once a
//! round, each row going to the slot of its partition (docs/design/inbox.md,
//! docs/design/cascades.md).
//!
//! Invariants: a row goes to at most one slot, the one whose partition its id hashes to, so
//! the partitions of a round are disjoint; the slots' state is behind locks that a panic on
//! another thread does not poison for the error path.

use std::sync::{Mutex, MutexGuard};

/// The slot in `round` (partition numbers of `n`) of the partition that `id` hashes to, if
/// that partition is in the round.
pub fn slot(round: &[u32], n: u32, id: i64) -> Option<usize> {
    let b = crate::hash::id_bucket(id, n);
    round.iter().position(|&p| p == b)
}

/// The lock of a slot's state. A poisoned lock is taken as it is: the panic that poisoned it
/// fails the run anyway, and its error path still reads the state.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_goes_to_the_slot_of_its_partition_or_none() {
        let n = 6;
        let round = [4, 1];
        for id in 0..1_000i64 {
            let p = crate::hash::id_bucket(id, n);
            let expected = match p {
                4 => Some(0),
                1 => Some(1),
                _ => None,
            };
            assert_eq!(slot(&round, n, id), expected, "{id} in partition {p}");
        }
    }
}

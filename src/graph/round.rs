//! A round of hash partitions, read together: jobs that cut their keys into partitions by
//! [`crate::hash::id_bucket`] and hold one partition a thread read every input file once a
//! round, each row going to the slot of its partition (docs/design/inbox.md,
//! docs/design/cascades.md).
//!
//! Invariants: a row goes to at most one slot, the one whose partition its id hashes to, so
//! the partitions of a round are disjoint; a key held in [`Newest`] is in one slot at most,
//! with its newest group's record; the slots' state is behind locks that a panic on another
//! thread does not poison for the error path.

use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;

/// Room for a partition's share of `rows` spread by the hash, and a little more, so that a
/// vector or map does not double past the budget.
pub fn share(rows: u64, n: u32) -> usize {
    let share = (rows / u64::from(n.max(1))) as usize;
    share + share / 32 + 1024
}

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

/// Per slot of a round, the newest record of each key (a mid), read group by group: a group
/// is the files of one entity and night, which hold distinct keys, so its files are merged
/// side by side. A key's record in a later group replaces the earlier one in whichever slot
/// that was, or removes it when the later record goes to no slot.
pub struct Newest<V> {
    slots: Vec<Mutex<FxHashMap<i64, V>>>,
}

impl<V> Newest<V> {
    /// `slots` maps with room for `room` keys each.
    pub fn with_room(slots: usize, room: usize) -> Self {
        let map = || FxHashMap::with_capacity_and_hasher(room, Default::default());
        Newest {
            slots: (0..slots).map(|_| Mutex::new(map())).collect(),
        }
    }

    /// Which slots hold records of earlier groups: taken before a group's files, and handed
    /// to each of their [`Newest::merge`]s (only those slots can hold a key of the group).
    pub fn holding(&self) -> Vec<bool> {
        self.slots.iter().map(|m| !lock(m).is_empty()).collect()
    }

    /// One file's records: `found[s]` go to slot `s`; their keys, and `gone` (keys whose
    /// record here goes to no slot), leave the other slots that are `holding`. One lock at
    /// a time.
    pub fn merge(&self, found: Vec<Vec<(i64, V)>>, gone: &[i64], holding: &[bool]) {
        for (t, map) in self.slots.iter().enumerate() {
            if !holding[t] {
                continue;
            }
            let mut map = lock(map);
            let moved = found
                .iter()
                .enumerate()
                .filter(|&(s, _)| s != t)
                .flat_map(|(_, rows)| rows.iter().map(|(k, _)| k));
            for k in gone.iter().chain(moved) {
                map.remove(k);
            }
        }
        for (map, rows) in self.slots.iter().zip(found) {
            lock(map).extend(rows);
        }
    }

    /// Keeps the `keys` that a slot holds: of a file's keys whose record goes to no slot,
    /// those whose earlier record must leave (the others need no [`Newest::merge`]). Sound
    /// while the file's group is merged, since its files hold distinct keys.
    pub fn retain_held(&self, keys: &mut Vec<i64>) {
        let maps: Vec<MutexGuard<'_, FxHashMap<i64, V>>> = self.slots.iter().map(lock).collect();
        keys.retain(|k| maps.iter().any(|m| m.contains_key(k)));
    }

    /// A copy of each slot's records as they stand, in slot order.
    pub fn snapshot(&self) -> Vec<FxHashMap<i64, V>>
    where
        V: Clone,
    {
        self.slots.iter().map(|m| lock(m).clone()).collect()
    }

    /// Each slot's records, in slot order.
    pub fn into_maps(self) -> Vec<FxHashMap<i64, V>> {
        self.slots
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
            .collect()
    }
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

    #[test]
    fn a_later_groups_record_replaces_or_removes_the_earlier_one() {
        let newest = Newest::with_room(2, 4);
        // Group 1: keys 1 and 2 in slot 0, 3 in slot 1.
        let holding = newest.holding();
        newest.merge(
            vec![vec![(1, "a"), (2, "b")], vec![(3, "c")]],
            &[],
            &holding,
        );
        // Group 2: 1 moves to slot 1, 3 goes nowhere, 2 is not read again; of the keys
        // that go nowhere, only 3 was held.
        let holding = newest.holding();
        assert_eq!(holding, [true, true]);
        let mut nowhere = vec![7, 3, 9];
        newest.retain_held(&mut nowhere);
        assert_eq!(nowhere, [3]);
        newest.merge(vec![vec![], vec![(1, "a2")]], &[3], &holding);
        let maps = newest.into_maps();
        let sorted = |m: &FxHashMap<i64, &'static str>| {
            let mut v: Vec<_> = m.iter().map(|(&k, &v)| (k, v)).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&maps[0]), [(2, "b")]);
        assert_eq!(sorted(&maps[1]), [(1, "a2")]);
    }
}

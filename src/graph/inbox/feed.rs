//! The order of a feed and the cell versions of an inbox: pure functions the job and
//! `query feed` share, so what is written and what is read agree on "newest".
//!
//! Invariants: newest first means `created_at` descending, then mid ascending (the order of
//! a timeline scan of the `post` table, whose rowkey holds the reversed time then the mid);
//! an author's versions strictly decrease in that order, so no two of its posts share a cell.

/// A post in a feed: when, which, by whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub created: i64,
    pub mid: i64,
    pub author: i64,
}

/// The feed order: newest first, ties by mid ascending.
pub fn newest_first(a: &Entry, b: &Entry) -> std::cmp::Ordering {
    b.created.cmp(&a.created).then(a.mid.cmp(&b.mid))
}

/// The cell versions of one author's posts, given newest first: the post's time, lowered
/// below the previous version where two posts share a millisecond (Weibo gives seconds, so
/// the shift stays inside the second and keeps the order).
pub fn versions(created_newest_first: &[i64]) -> Vec<i64> {
    let mut prev = None;
    created_newest_first
        .iter()
        .map(|&t| {
            let v = next_version(prev, t);
            prev = Some(v);
            v
        })
        .collect()
}

/// The version of a post at time `t` whose author's previous post (newer in feed order) got
/// version `prev`: [`versions`] one post at a time.
pub fn next_version(prev: Option<i64>, t: i64) -> i64 {
    match prev {
        Some(p) if t >= p => p - 1,
        _ => t,
    }
}

/// The feed of `entries` (any order, no duplicates): newest first, at most `limit`.
pub fn merge(mut entries: Vec<Entry>, limit: usize) -> Vec<Entry> {
    entries.sort_unstable_by(newest_first);
    entries.truncate(limit);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shared_milliseconds_get_versions_of_their_own() {
        assert_eq!(
            versions(&[9000, 9000, 8999, 5000]),
            vec![9000, 8999, 8998, 5000]
        );
        assert_eq!(versions(&[]), Vec::<i64>::new());
    }

    proptest! {
        /// Versions strictly decrease, never exceed the post's time, and equal it where the
        /// times are already distinct.
        #[test]
        fn versions_strictly_decrease(mut times in proptest::collection::vec(0i64..50, 0..40)) {
            times.sort_unstable_by(|a, b| b.cmp(a));
            let v = versions(&times);
            prop_assert_eq!(v.len(), times.len());
            for i in 0..v.len() {
                prop_assert!(v[i] <= times[i]);
                if i > 0 {
                    prop_assert!(v[i] < v[i - 1]);
                    if times[i] < v[i - 1] {
                        prop_assert_eq!(v[i], times[i]);
                    }
                }
            }
        }

        /// The merge is the sorted whole, cut at the limit.
        #[test]
        fn merge_is_the_sorted_prefix(
            raw in proptest::collection::btree_set((0i64..20, 0i64..1000), 0..50),
            limit in 0usize..60,
        ) {
            let entries: Vec<Entry> = raw
                .iter()
                .map(|&(created, mid)| Entry { created, mid, author: mid % 7 })
                .collect();
            let got = merge(entries.clone(), limit);
            let mut all = entries;
            all.sort_by_key(|e| (std::cmp::Reverse(e.created), e.mid));
            all.truncate(limit);
            prop_assert_eq!(got, all);
        }
    }
}

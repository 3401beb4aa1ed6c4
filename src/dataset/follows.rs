//! The follows table's pair-partitioned layout, which `friends` joins on without a shuffle.
//!
//! `clean` writes follows in `N` parts by a stable hash of the canonical pair
//! `(min id, max id)` ([`pair_part`]), so both directions of a pair are in the same part.
//! Each part's rows are sorted by [`sort_key`], `(min id, max id, follower)`, so those two
//! directions are neighbouring rows. Each file's Parquet footer says which part it is
//! ([`PAIR_PARTITION_KEY`] = `p/N`).
//!
//! Invariants: a night holds a `(follower, followee)` pair at most once (clean keeps one row
//! of each, and `inbox` counts one night's edges without holding them on that promise); a
//! reader may treat the files of one `p` as holding both directions of all
//! their pairs only when every file it reads carries the key with the same `N`; it checks the
//! order it relies on rather than trusting it. The hash is [`crate::hash::pair`], so the
//! layout is the same on every machine and in every version (docs/formats.md).

/// Footer key of a follows part: `p/N`, part `p` of `N` by canonical pair.
pub const PAIR_PARTITION_KEY: &str = "weibo_etl.pair_partition";

/// The canonical pair of an edge: `(min id, max id)`.
pub fn canonical_pair(follower: i64, followee: i64) -> (i64, i64) {
    (follower.min(followee), follower.max(followee))
}

/// The order of rows within a part: `(min id, max id, follower)`.
pub fn sort_key(follower: i64, followee: i64) -> (i64, i64, i64) {
    let (a, b) = canonical_pair(follower, followee);
    (a, b, follower)
}

/// The part of `parts` a key falls in: for follows, the key is the canonical pair; the
/// other tables are cut the same way by `(natural key, 0)`.
pub fn pair_part(key: (i64, i64), parts: usize) -> usize {
    crate::hash::bucket(crate::hash::pair(key.0 as u64, key.1 as u64), parts as u64) as usize
}

/// The [`PAIR_PARTITION_KEY`] value of part `p` of `parts`.
pub fn footer_value(p: usize, parts: usize) -> String {
    format!("{p}/{parts}")
}

/// `(p, N)` of a [`PAIR_PARTITION_KEY`] value; `None` unless it is `p/N` with `p < N`.
pub fn parse_footer_value(value: &str) -> Option<(u32, u32)> {
    let (p, n) = value.split_once('/')?;
    let (p, n): (u32, u32) = (p.parse().ok()?, n.parse().ok()?);
    (p < n).then_some((p, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_share_a_part_and_neighbour_in_order() {
        for (a, b) in [(1, 2), (7_000_000_001, 3), (42, 41)] {
            let p = pair_part(canonical_pair(a, b), 19);
            assert_eq!(p, pair_part(canonical_pair(b, a), 19));
            let (x, y) = (sort_key(a, b), sort_key(b, a));
            assert_eq!((x.0, x.1), (y.0, y.1));
            assert_ne!(x.2, y.2);
        }
        // Pinned: parts are on disk.
        assert_eq!(
            pair_part((1, 2), 19),
            (0xbeeb_8da1_658e_ec67u64 % 19) as usize
        );
    }

    #[test]
    fn footer_values_round_trip_and_refuse_nonsense() {
        assert_eq!(parse_footer_value(&footer_value(3, 8)), Some((3, 8)));
        for bad in ["8/8", "x/2", "1", "", "-1/2"] {
            assert_eq!(parse_footer_value(bad), None, "{bad}");
        }
    }
}

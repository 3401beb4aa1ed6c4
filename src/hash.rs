//! The one stable hash: splitmix64's mixer, for every choice that spreads ids over buckets.
//!
//! Clean's pair partitions of follows, friends' `--slice i/N` slices, the load's counter
//! partitions and verify's sample all pick buckets with it, and some of those choices are on
//! disk (a follows part's `p/N`, the slice a machine wrote). So it is a contract: the same
//! id gives the same bucket on every machine, in every version. Changing a constant here is
//! a change of the on-disk layout (docs/formats.md).

/// 2^64 divided by the golden ratio: splitmix64's increment, and the multiplier that folds a
/// second word into the first.
pub const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finaliser: a bijection on `u64` that spreads neighbouring inputs apart.
pub const fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// splitmix64 of one word: the generator's step then its finaliser.
pub const fn splitmix64(x: u64) -> u64 {
    mix(x.wrapping_add(GOLDEN))
}

/// A hash of two words (a pair of ids, or a value and a seed).
pub const fn pair(a: u64, b: u64) -> u64 {
    mix(a ^ b.wrapping_mul(GOLDEN))
}

/// A hash of bytes: FNV-1a (defined by its few lines, not by a crate version, so a run
/// resumed by a later build cuts the same way), then [`splitmix64`].
pub fn text(bytes: &[u8]) -> u64 {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    splitmix64(h)
}

/// The bucket of id `id` among `buckets`: how the load's counters, rank and cascades cut
/// users and roots into partitions.
pub const fn id_bucket(id: i64, buckets: u32) -> u32 {
    bucket(splitmix64(id as u64), buckets as u64) as u32
}

/// The bucket of `hash` among `buckets` (at least one).
pub const fn bucket(hash: u64, buckets: u64) -> u64 {
    hash % if buckets == 0 { 1 } else { buckets }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values are the layout: these pin them (the first is splitmix64's published first
    /// output for seed 0; the others were computed apart from this code).
    #[test]
    fn values_are_stable() {
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(pair(1, 2), 0xbeeb_8da1_658e_ec67);
        assert_eq!(pair(1 << 32 | 2, 0x5bd1_e995), 0x39bb_24b1_e3b9_3059);
        assert_eq!(bucket(7, 0), 0);
        assert_eq!(bucket(7, 4), 3);
    }

    #[test]
    fn neighbours_spread() {
        let mut counts = [0u32; 8];
        for id in 0..8000u64 {
            counts[bucket(splitmix64(id), 8) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }
}

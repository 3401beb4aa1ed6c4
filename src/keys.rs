//! Rowkey building blocks shared by every table: the hashed, fixed-length prefix and the
//! split points that pre-split a table evenly over it.
//!
//! Invariants:
//! - Every rowkey starts with [`HASH_PREFIX_LEN`] bytes of MD5 of its leading id's 8-byte
//!   big-endian form. MD5 is what the paper and the happybase scripts other teams run already
//!   use, so they can compute our keys without our code.
//! - Split points divide the prefix space into N ranges of equal width, so uniformly hashed
//!   keys land evenly on N regions. Split point `i` is `floor(i * 2^16 / N)` as two
//!   big-endian bytes; a table with N regions has N-1 split points.

use md5::{Digest, Md5};

/// Bytes of hash in front of every rowkey.
pub const HASH_PREFIX_LEN: usize = 2;

/// The most regions a table can be pre-split into: one per possible prefix value.
pub const MAX_REGIONS: u32 = 1 << (8 * HASH_PREFIX_LEN);

/// The hash prefix for an id.
pub fn hash_prefix(id: i64) -> [u8; HASH_PREFIX_LEN] {
    let digest = Md5::digest(id.to_be_bytes());
    [digest[0], digest[1]]
}

/// The hash prefix for a text key (screen names).
pub fn hash_prefix_bytes(key: &[u8]) -> [u8; HASH_PREFIX_LEN] {
    let digest = Md5::digest(key);
    [digest[0], digest[1]]
}

/// Split keys for `regions` equal ranges of the prefix space (`regions - 1` keys, ascending).
pub fn split_points(regions: u32) -> Vec<Vec<u8>> {
    let regions = regions.clamp(1, MAX_REGIONS) as u64;
    (1..regions)
        .map(|i| {
            let boundary = (i * u64::from(MAX_REGIONS) / regions) as u16;
            boundary.to_be_bytes().to_vec()
        })
        .collect()
}

/// Which of `regions` equal ranges a prefix falls into (the region index a key will go to
/// on a table pre-split with [`split_points`]).
pub fn region_of(prefix: [u8; HASH_PREFIX_LEN], regions: u32) -> u32 {
    let regions = regions.clamp(1, MAX_REGIONS) as u64;
    let value = u16::from_be_bytes(prefix) as u64;
    // Smallest i with value < split(i+1); split(i) = floor(i * 65536 / N).
    let mut i = (value * regions) / u64::from(MAX_REGIONS);
    while i + 1 < regions && value >= (i + 1) * u64::from(MAX_REGIONS) / regions {
        i += 1;
    }
    i as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_prefix_is_md5_of_big_endian_id() {
        // md5(00 00 00 00 00 00 00 01) = fa5ad9a8557e5a84cf23e52d3d3adf77
        assert_eq!(hash_prefix(1), [0xfa, 0x5a]);
        // md5("") = d41d8cd98f00b204e9800998ecf8427e
        assert_eq!(hash_prefix_bytes(b""), [0xd4, 0x1d]);
    }

    #[test]
    fn split_points_are_even_and_ascending() {
        assert!(split_points(1).is_empty());
        assert_eq!(split_points(2), vec![vec![0x80, 0x00]]);
        assert_eq!(
            split_points(8),
            (1..8u16)
                .map(|i| (i * 0x2000).to_be_bytes().to_vec())
                .collect::<Vec<_>>()
        );
        let three = split_points(3);
        assert_eq!(three, vec![vec![0x55, 0x55], vec![0xaa, 0xaa]]);
        assert_eq!(
            split_points(MAX_REGIONS + 10).len(),
            MAX_REGIONS as usize - 1
        );
    }

    #[test]
    fn region_of_agrees_with_split_points() {
        for regions in [1u32, 2, 3, 7, 8, 100] {
            let splits = split_points(regions);
            for value in (0u32..=0xffff).step_by(97).chain([0, 0xffff]) {
                let prefix = (value as u16).to_be_bytes();
                let expected = splits
                    .iter()
                    .filter(|s| s.as_slice() <= &prefix[..])
                    .count();
                assert_eq!(
                    region_of(prefix, regions) as usize,
                    expected,
                    "{regions} {value}"
                );
            }
        }
    }

    #[test]
    fn hashed_ids_spread_evenly_over_regions() {
        let mut counts = [0u32; 8];
        for id in 0..80_000i64 {
            counts[region_of(hash_prefix(id), 8) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}

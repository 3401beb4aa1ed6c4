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

/// The `user_post` relation kinds: one byte in the rowkey, so a prefix scan can ask for one
/// kind of a user's activity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Relation {
    Post = 1,
    Repost = 2,
    Mention = 3,
    Comment = 4,
}

/// Newest-first ordering: HBase scans ascending, so times are stored as `i64::MAX - ms`.
pub fn reversed(ms: i64) -> i64 {
    i64::MAX - ms
}

fn keyed(id: i64, rest: &[&[u8]]) -> Vec<u8> {
    let mut key = Vec::with_capacity(10 + rest.iter().map(|r| r.len()).sum::<usize>());
    key.extend_from_slice(&hash_prefix(id));
    key.extend_from_slice(&id.to_be_bytes());
    for r in rest {
        key.extend_from_slice(r);
    }
    key
}

/// `user`: hash(uid) + uid. 10 bytes.
pub fn user_key(uid: i64) -> Vec<u8> {
    keyed(uid, &[])
}

/// `post`: hash(uid) + uid + reversed(created_at) + mid. 26 bytes; a prefix scan on
/// `user_key(uid)` is the user's timeline, newest first.
pub fn post_key(uid: i64, created_at_ms: i64, mid: i64) -> Vec<u8> {
    keyed(
        uid,
        &[&reversed(created_at_ms).to_be_bytes(), &mid.to_be_bytes()],
    )
}

/// `post_by_mid`: hash(mid) + mid. 10 bytes.
pub fn post_by_mid_key(mid: i64) -> Vec<u8> {
    keyed(mid, &[])
}

/// `follow`: hash(follower) + follower + followee. 18 bytes; prefix `user_key(u)` = whom u follows.
pub fn follow_key(follower: i64, followee: i64) -> Vec<u8> {
    keyed(follower, &[&followee.to_be_bytes()])
}

/// `fans`: hash(followee) + followee + follower. 18 bytes; prefix `user_key(u)` = u's fans.
pub fn fans_key(followee: i64, follower: i64) -> Vec<u8> {
    keyed(followee, &[&follower.to_be_bytes()])
}

/// `friend`: hash(uid) + uid + friend. 18 bytes, written in both directions.
pub fn friend_key(uid: i64, friend: i64) -> Vec<u8> {
    keyed(uid, &[&friend.to_be_bytes()])
}

/// `user_post`: hash(uid) + uid + kind + reversed(ts) + id. 27 bytes.
pub fn user_post_key(uid: i64, kind: Relation, ts_ms: i64, id: i64) -> Vec<u8> {
    keyed(
        uid,
        &[
            &[kind as u8],
            &reversed(ts_ms).to_be_bytes(),
            &id.to_be_bytes(),
        ],
    )
}

/// `user_by_name`: hash(name) + name (UTF-8). Variable length after a fixed prefix.
pub fn user_by_name_key(screen_name: &str) -> Vec<u8> {
    let mut key = hash_prefix_bytes(screen_name.as_bytes()).to_vec();
    key.extend_from_slice(screen_name.as_bytes());
    key
}

/// `rank`: `<metric>:<yyyymmdd>:<rank>`, the rank zero-padded to six digits. Plain text,
/// so the HBase shell shows it as it is; a board is one prefix scan, ranks in order. The
/// table is small (N rows per metric and day) and not hashed: one region holds it.
pub fn rank_key(metric: &str, date: &str, rank: u32) -> Vec<u8> {
    format!("{}{rank:06}", rank_prefix(metric, date)).into_bytes()
}

/// The prefix of a day's board in `rank` (`date` as `YYYY-MM-DD`), or of every day's board
/// of `metric` when `date` is empty.
pub fn rank_prefix(metric: &str, date: &str) -> String {
    if date.is_empty() {
        return format!("{metric}:");
    }
    format!("{metric}:{}:", date.replace('-', ""))
}

/// The date (`YYYY-MM-DD`) and rank of a `rank` rowkey.
pub fn rank_key_parts(key: &[u8]) -> Option<(String, u32)> {
    let text = std::str::from_utf8(key).ok()?;
    let mut parts = text.rsplitn(3, ':');
    let rank = parts.next()?.parse().ok()?;
    let d = parts.next()?;
    if d.len() != 8 || !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((format!("{}-{}-{}", &d[..4], &d[4..6], &d[6..]), rank))
}

fn id_at(key: &[u8], offset: usize) -> Option<i64> {
    let bytes = key.get(offset..offset + 8)?;
    Some(i64::from_be_bytes(bytes.try_into().expect("8 bytes")))
}

/// The user after the leading one in a `follow`, `fans` or `friend` rowkey.
pub fn other_uid(key: &[u8]) -> Option<i64> {
    id_at(key, HASH_PREFIX_LEN + 8)
}

/// The mid of a `post` rowkey.
pub fn post_key_mid(key: &[u8]) -> Option<i64> {
    id_at(key, HASH_PREFIX_LEN + 16)
}

/// The author, time (ms) and mid of a `post` rowkey: the inverse of [`post_key`].
pub fn post_key_parts(key: &[u8]) -> Option<(i64, i64, i64)> {
    if key.len() != HASH_PREFIX_LEN + 24 {
        return None;
    }
    let uid = id_at(key, HASH_PREFIX_LEN)?;
    let created = reversed(id_at(key, HASH_PREFIX_LEN + 8)?);
    Some((uid, created, post_key_mid(key)?))
}

#[cfg(test)]
mod golden {
    //! Byte layouts other teams read with happybase, the HBase shell and Spark: any change
    //! here is a breaking change of the tables and must show up as a failing test.
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    const UID: i64 = 1_669_879_400; // 0x6388_5668
    const FAN: i64 = 5_872_301_234; // 0x1_5e04_34b2
    const MID: i64 = 4_973_000_000_000_001;
    const AT: i64 = 1_795_954_500_000; // 2026-11-29T20:15:00+08:00

    #[test]
    fn rowkeys_are_pinned() {
        let h = |id: i64| hex(&hash_prefix(id));
        assert_eq!(hex(&user_key(UID)), format!("{}0000000063885668", h(UID)));
        assert_eq!(
            hex(&post_key(UID, AT, MID)),
            format!(
                "{}0000000063885668{:016x}{:016x}",
                h(UID),
                i64::MAX - AT,
                MID
            )
        );
        assert_eq!(
            hex(&post_by_mid_key(MID)),
            format!("{}{:016x}", h(MID), MID)
        );
        assert_eq!(
            hex(&follow_key(FAN, UID)),
            format!("{}000000015e0434b20000000063885668", h(FAN))
        );
        assert_eq!(
            hex(&fans_key(UID, FAN)),
            format!("{}0000000063885668000000015e0434b2", h(UID))
        );
        assert_eq!(
            hex(&user_post_key(UID, Relation::Repost, AT, MID)),
            format!(
                "{}000000006388566802{:016x}{:016x}",
                h(UID),
                i64::MAX - AT,
                MID
            )
        );
        assert_eq!(
            hex(&user_by_name_key("何炅")),
            format!("{}e4bd95e78285", hex(&hash_prefix_bytes("何炅".as_bytes())))
        );
        assert_eq!(user_key(UID).len(), 10);
        assert_eq!(post_key(UID, AT, MID).len(), 26);
        assert_eq!(
            post_key_parts(&post_key(UID, AT, MID)),
            Some((UID, AT, MID))
        );
        assert_eq!(post_key_parts(&user_key(UID)), None);
        assert_eq!(user_post_key(UID, Relation::Post, AT, MID).len(), 27);
    }

    #[test]
    fn hash_prefixes_are_pinned() {
        // md5 of the 8-byte big-endian ids, first two bytes (python3: hashlib.md5(x.to_bytes(8,'big'))).
        assert_eq!(hex(&hash_prefix(UID)), "2546");
        assert_eq!(hex(&hash_prefix(FAN)), "0f5c");
        assert_eq!(hex(&hash_prefix(MID)), "5d42");
    }

    #[test]
    fn rank_rows_are_text_and_sort_by_rank() {
        assert_eq!(
            rank_key("new_fans", "2026-11-29", 7),
            b"new_fans:20261129:000007".to_vec()
        );
        assert!(rank_key("posts", "2026-11-29", 10) > rank_key("posts", "2026-11-29", 9));
        assert!(rank_key("posts", "2026-11-29", 1)
            .starts_with(rank_prefix("posts", "2026-11-29").as_bytes()));
        assert_eq!(rank_prefix("posts", ""), "posts:");
        assert_eq!(
            rank_key_parts(&rank_key("posts", "2026-11-29", 42)),
            Some(("2026-11-29".to_string(), 42))
        );
        assert_eq!(rank_key_parts(b"posts:2026:1"), None);
    }

    #[test]
    fn timelines_sort_newest_first() {
        let older = post_key(UID, AT - 1000, MID);
        let newer = post_key(UID, AT, MID + 1);
        assert!(newer < older);
        assert!(newer.starts_with(&user_key(UID)));
    }
}

//! The AMiner "influence locality" Weibo follow graph: `weibo_network.txt` with
//! `uidlist.txt` beside it.
//!
//! `weibo_network.txt` starts with `<users> <edges>`, then one line per user:
//! `uid k f1 flag1 ... fk flagk` over *internal* ids, the k users `uid` follows, each with a
//! flag third-party readers take as "the follow is reciprocal". `uidlist.txt` line n holds the
//! real uid of internal id n.
//!
//! Choices (the official readme is not public):
//! - Each arc is one follows record; a line that does not parse is one `malformed_row`.
//! - Whether internal ids start at 0 or 1 is taken from the ids against `uidlist.txt`'s line
//!   count n, in a first pass over the file ([`id_base`]): an id n means 1, an id 0 means 0.
//!   A file with both, with an id past n, or with neither (both bases fit: a guess) is
//!   refused: every arc is rejected as `unmapped_id`, with a warning saying why. The first
//!   user line says nothing: users who follow nobody may have no line. An id with no uid at
//!   the base is rejected as `unmapped_id`, as is every arc when `uidlist.txt` is missing
//!   (with a warning naming it); it is looked for beside the file, then one folder up (the
//!   archive's own layout, `weibo_network/weibo_network.txt`).
//! - The flags are checked, not trusted: arcs whose canonical pair hashes into a sample (1/64
//!   of pairs for files over 64 MB, else all) are kept (8 bytes each) and, at the end, each
//!   sampled flag is compared with whether the reverse arc exists; disagreements are
//!   reported as a warning with their count.
//! - The data set has no follow times: `followed_at` stays empty; `crawl_time` is the run's.
//!
//! `uidlist.txt` itself holds no records: it is read by the network reader and reported as a
//! file of format `aminer-uidlist`.

use std::io::{self, BufRead};

use super::mapping::RawRecord;
use super::{excerpt, Item};
use crate::dataset::{Entity, Reject};

/// Share of pairs whose flags are checked in a large file: 1 in `SAMPLE` (small files: all).
pub const SAMPLE: u64 = 64;

/// Internal id → uid, read from `uidlist.txt` (`None` where a line is not a number).
pub fn read_uidlist(reader: Box<dyn BufRead + Send>) -> io::Result<Vec<Option<i64>>> {
    let mut uids = Vec::new();
    for line in reader.lines() {
        let line = line?;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        uids.push(t.parse::<i64>().ok().filter(|v| *v > 0));
    }
    Ok(uids)
}

fn sampled(a: u64, b: u64, every: u64) -> bool {
    let (s, l) = if a < b { (a, b) } else { (b, a) };
    crate::hash::bucket(crate::hash::pair(s, l), every) == 0
}

/// The smallest and largest internal ids of a network file (users and the users they
/// follow), over its well-formed lines; `None` when it has none.
pub fn id_range(mut reader: Box<dyn BufRead + Send>) -> io::Result<Option<(u64, u64)>> {
    let mut range: Option<(u64, u64)> = None;
    let (mut bytes, mut line) = (Vec::new(), 0u64);
    while let Some(read) = super::next_text_line(
        &mut reader,
        &mut bytes,
        &mut line,
        Entity::Follows,
        &mut |_| {},
    )? {
        let Some(buf) = read else { continue };
        let numbers: Option<Vec<u64>> = buf
            .split_ascii_whitespace()
            .map(|t| t.parse().ok())
            .collect();
        let Some(numbers) = numbers else { continue };
        let header = line == 1 && numbers.len() == 2;
        if header || numbers.len() < 2 || !arcs_fit(numbers.len(), numbers[1]) {
            continue;
        }
        let ids = std::iter::once(numbers[0]).chain(numbers[2..].iter().step_by(2).copied());
        for id in ids {
            let (lo, hi) = range.get_or_insert((id, id));
            (*lo, *hi) = ((*lo).min(id), (*hi).max(id));
        }
    }
    Ok(range)
}

/// Where a network's internal ids start (0 or 1), or why the file is refused.
pub type IdBase = std::result::Result<u64, String>;

/// Whether a network's internal ids start at 0 or 1, from their `range` against the `listed`
/// uids: an id `listed` means 1, an id 0 means 0. Why not, when the ids do not fit the list
/// or fit it both ways.
pub fn id_base(range: Option<(u64, u64)>, listed: usize) -> IdBase {
    let n = listed as u64;
    let Some((lo, hi)) = range else {
        return Ok(0);
    };
    match (lo == 0, hi == n) {
        _ if hi > n => Err(format!(
            "ids run to {hi}, past the {n} lines of uidlist.txt: the file is refused"
        )),
        (true, true) => Err(format!(
            "ids run from 0 to {n}, one more than the {n} lines of uidlist.txt: the file is \
             refused"
        )),
        (true, false) => Ok(0),
        (false, true) => Ok(1),
        (false, false) => Err(format!(
            "ids run from {lo} to {hi}, which fits the {n} lines of uidlist.txt counted from 0 \
             or from 1: the file is refused rather than guessed"
        )),
    }
}

/// Reads `weibo_network.txt`, one follows record per arc, its internal ids mapped through
/// `uids` (`uidlist.txt`) from `base` ([`id_base`]; an `Err` refuses every arc, saying why).
/// Returns warnings for the report.
pub fn read_network(
    mut reader: Box<dyn BufRead + Send>,
    uids: Option<(&[Option<i64>], IdBase)>,
    sample_every: u64,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Vec<String>> {
    let mut warnings = Vec::new();
    let (uids, base) = match uids {
        Some((uids, Ok(base))) => (Some(uids), base),
        Some((_, Err(why))) => {
            warnings.push(why);
            (None, 0)
        }
        None => {
            warnings.push(
                "uidlist.txt not found beside the network file or one folder up: every arc is \
                 unmapped"
                    .into(),
            );
            (None, 0)
        }
    };
    let uid_of = |internal: u64| -> Option<i64> {
        let i = internal.checked_sub(base)?;
        uids?.get(i as usize).copied().flatten()
    };
    let mut bytes = Vec::new();
    let mut line = 0u64;
    // Sampled arcs: `a << 32 | b`, with the flag in the top bit.
    let mut sample: Vec<u64> = Vec::new();
    let (mut sampled_arcs, mut oversized) = (0u64, false);
    while let Some(read) =
        super::next_text_line(&mut reader, &mut bytes, &mut line, Entity::Follows, emit)?
    {
        let Some(buf) = read else { continue };
        let numbers: Option<Vec<u64>> = buf
            .split_ascii_whitespace()
            .map(|t| t.parse().ok())
            .collect();
        let reject = |reason| Item::Rejected {
            line,
            entity: Some(Entity::Follows),
            reason,
            excerpt: excerpt(buf.trim_end()),
        };
        let Some(numbers) = numbers else {
            emit(reject(Reject::MalformedRow));
            continue;
        };
        if numbers.is_empty() {
            continue;
        }
        if line == 1 && numbers.len() == 2 {
            if let (Some(u), Some(users)) = (uids, numbers.first()) {
                if u.len() as u64 != *users {
                    warnings.push(format!(
                        "header says {users} users, uidlist.txt has {} lines",
                        u.len()
                    ));
                }
            }
            continue;
        }
        let (follower, k) = match numbers.as_slice() {
            [f, k, ..] if arcs_fit(numbers.len(), *k) => (*f, *k),
            _ => {
                emit(reject(Reject::MalformedRow));
                continue;
            }
        };
        for j in 0..k as usize {
            let (followee, flag) = (numbers[2 + 2 * j], numbers[3 + 2 * j]);
            let (Some(a), Some(b)) = (uid_of(follower), uid_of(followee)) else {
                emit(Item::Rejected {
                    line,
                    entity: Some(Entity::Follows),
                    reason: Reject::UnmappedId,
                    excerpt: format!("{follower} -> {followee}"),
                });
                continue;
            };
            if follower < 1 << 31 && followee < 1 << 31 {
                if sampled(follower, followee, sample_every) {
                    sample.push(follower << 32 | followee | u64::from(flag == 1) << 63);
                    sampled_arcs += 1;
                }
            } else {
                oversized = true;
            }
            emit(Item::Record {
                line,
                entity: Entity::Follows,
                record: RawRecord::follow(a, b),
            });
        }
    }
    if uids.is_some() {
        log::info!("AMiner internal ids start at {base} (the ids against uidlist.txt)");
    }
    if !oversized && sampled_arcs > 0 {
        let disagree = flag_disagreements(&mut sample);
        if disagree > 0 {
            warnings.push(format!(
                "reciprocal flag disagrees with the reverse arc on {disagree} of {sampled_arcs} \
                 sampled arcs (1/{sample_every} of pairs checked)"
            ));
        }
    }
    Ok(warnings)
}

/// Whether a line of `len` numbers holds exactly `k` (followee, flag) pairs after `uid k`.
fn arcs_fit(len: usize, k: u64) -> bool {
    k.checked_mul(2).and_then(|n| n.checked_add(2)) == Some(len as u64)
}

/// Sampled arcs whose flag says "reciprocal" but the reverse arc is absent, or the reverse.
fn flag_disagreements(sample: &mut [u64]) -> u64 {
    const FLAG: u64 = 1 << 63;
    let arc = |v: u64| v & !FLAG;
    sample.sort_unstable_by_key(|v| arc(*v));
    let exists = |a: u64, b: u64| {
        sample
            .binary_search_by_key(&(a << 32 | b), |v| arc(*v))
            .is_ok()
    };
    sample
        .iter()
        .filter(|v| {
            let (a, b) = ((arc(**v)) >> 32, arc(**v) & 0xffff_ffff);
            (**v & FLAG != 0) != exists(b, a)
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `text` as the clean job does: the id base from a first pass, then the arcs.
    fn read(text: &str, uids: Option<&[Option<i64>]>) -> (Vec<Item>, Vec<String>) {
        let bytes = || Box::new(io::Cursor::new(text.as_bytes().to_vec()));
        let base = uids.map(|u| id_base(id_range(bytes()).unwrap(), u.len()));
        let mut items = Vec::new();
        let warnings = read_network(bytes(), uids.zip(base), 1, &mut |i| items.push(i)).unwrap();
        (items, warnings)
    }

    fn edges(items: &[Item]) -> Vec<(String, String)> {
        items
            .iter()
            .filter_map(|i| match i {
                Item::Record { record, .. } => Some((
                    record.field(0).unwrap().to_string(),
                    record.field(1).unwrap().to_string(),
                )),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn arcs_map_through_the_uid_list_at_the_detected_base() {
        let uids = [Some(100), Some(200), Some(300)];
        // 0-based: 0 follows 1 and 2; 1 follows 0.
        let (items, _) = read("3 3\n0 2 1 1 2 0\n1 1 0 1\n2 0\n", Some(&uids));
        assert_eq!(
            edges(&items),
            [("100", "200"), ("100", "300"), ("200", "100")].map(|(a, b)| (a.into(), b.into()))
        );
        // 1-based: the same graph, ids shifted.
        let (items, _) = read("3 3\n1 2 2 1 3 0\n2 1 1 1\n3 0\n", Some(&uids));
        assert_eq!(edges(&items).len(), 3);
        assert_eq!(edges(&items)[0], ("100".into(), "200".into()));
    }

    #[test]
    fn the_base_comes_from_the_ids_against_the_list_not_from_the_first_line() {
        let uids = [Some(100), Some(200), Some(300)];
        // 0-based, user 0 follows nobody and has no line: the file starts at 1.
        let (items, warnings) = read("3 2\n1 1 0 0\n2 1 0 0\n", Some(&uids));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            edges(&items),
            [("200", "100"), ("300", "100")].map(|(a, b)| (a.into(), b.into()))
        );
        // 1-based, user 1 follows nobody: the file starts at 2.
        let (items, _) = read("3 2\n2 1 1 0\n3 1 1 0\n", Some(&uids));
        assert_eq!(
            edges(&items),
            [("200", "100"), ("300", "100")].map(|(a, b)| (a.into(), b.into()))
        );
        // Ids that fit neither base, or both: refused, every arc unmapped, the reason said.
        for (text, why) in [
            ("3 1\n0 1 3 0\n", "one more than"),
            ("3 1\n1 1 4 0\n", "past the 3 lines"),
            ("3 1\n1 1 2 0\n", "rather than guessed"),
        ] {
            let (items, warnings) = read(text, Some(&uids));
            assert!(edges(&items).is_empty(), "{text}");
            assert!(
                items.iter().all(|i| matches!(
                    i,
                    Item::Rejected {
                        reason: Reject::UnmappedId,
                        ..
                    }
                )),
                "{text}"
            );
            assert!(warnings.iter().any(|w| w.contains(why)), "{warnings:?}");
        }
    }

    #[test]
    fn bad_lines_and_unknown_ids_are_rejected_with_their_line() {
        // Internal id 1's line of the list is not a uid.
        let (items, warnings) = read("2 2\n0 2 1 1\nx y\n0 1 1 0\n", Some(&[Some(100), None]));
        let rejects: Vec<(u64, Reject)> = items
            .iter()
            .filter_map(|i| match i {
                Item::Rejected { line, reason, .. } => Some((*line, *reason)),
                _ => None,
            })
            .collect();
        assert_eq!(
            rejects,
            [
                (2, Reject::MalformedRow),
                (3, Reject::MalformedRow),
                (4, Reject::UnmappedId)
            ]
        );
        assert!(warnings.is_empty());
        // 0 -> 1 flagged reciprocal, but 1 does not follow 0.
        let (_, warnings) = read("2 2\n0 1 1 1\n1 0\n", Some(&[Some(100), Some(200)]));
        assert!(
            warnings[0].contains("on 1 of 1 sampled arcs"),
            "{warnings:?}"
        );
        let (items, warnings) = read("1 0\n0 1 1 0\n", None);
        assert!(matches!(
            items[0],
            Item::Rejected {
                reason: Reject::UnmappedId,
                ..
            }
        ));
        assert!(warnings[0].contains("uidlist.txt not found"));
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic, and every line is accounted for: the header, one
        /// item per arc of a well-formed line, or one rejection.
        #[test]
        fn every_line_is_accounted_for(bytes in proptest::collection::vec(
            proptest::prop_oneof![
                4 => proptest::sample::select(b"0123 \n".to_vec()),
                1 => proptest::prelude::any::<u8>(),
            ],
            0..600,
        )) {
            let uids = [Some(10), None, Some(30)];
            let mut items = Vec::new();
            let base = id_base(id_range(Box::new(io::Cursor::new(bytes.clone()))).unwrap(), 3);
            read_network(
                Box::new(io::Cursor::new(bytes.clone())),
                Some((&uids, base)),
                1,
                &mut |i| items.push(i),
            )
            .unwrap();
            let mut expected = 0usize;
            for (n, l) in bytes.split(|b| *b == b'\n').enumerate() {
                let Ok(text) = std::str::from_utf8(l) else {
                    expected += 1;
                    continue;
                };
                let nums: Option<Vec<u64>> =
                    text.split_ascii_whitespace().map(|t| t.parse().ok()).collect();
                expected += match nums {
                    None => 1,
                    Some(v) if v.is_empty() => 0,
                    Some(v) if n == 0 && v.len() == 2 => 0,
                    Some(v) if v.len() >= 2 && arcs_fit(v.len(), v[1]) => v[1] as usize,
                    Some(_) => 1,
                };
            }
            proptest::prop_assert_eq!(items.len(), expected);
        }
    }

    #[test]
    fn flags_are_checked_against_reverse_arcs() {
        // Arcs i -> i+1 flagged reciprocal with no reverse arc: every sampled one disagrees.
        let mut sample: Vec<u64> = (0..10_000u64)
            .filter(|i| sampled(*i, i + 1, SAMPLE))
            .map(|i| i << 32 | (i + 1) | 1 << 63)
            .collect();
        let n = sample.len() as u64;
        assert!(n > 50, "sample of {n}");
        assert_eq!(flag_disagreements(&mut sample), n);
        // A true mutual pair with both flags set agrees.
        let mut pair = vec![1u64 << 32 | 2 | 1 << 63, 2u64 << 32 | 1 | 1 << 63];
        assert_eq!(flag_disagreements(&mut pair), 0);
    }

    proptest::proptest! {
        /// Arbitrary bytes, and the sample network cut anywhere: no panic, and every item
        /// names a line (a reject also a reason, by its type).
        #[test]
        fn any_bytes_or_a_cut_network_read_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1024),
            cut in 0.0f64..1.0,
        ) {
            let sample = include_str!("../../sample_data/crawlers/aminer/weibo_network.txt");
            let uids: Vec<Option<i64>> = (0..64).map(|i| Some(1_000_000_000 + i)).collect();
            let cut = &sample.as_bytes()[..(sample.len() as f64 * cut) as usize];
            for input in [&bytes[..], cut] {
                let mut items = Vec::new();
                let range = id_range(Box::new(io::Cursor::new(input.to_vec())));
                proptest::prop_assert!(range.is_ok());
                let base = id_base(range.unwrap(), uids.len());
                let read = read_network(
                    Box::new(io::Cursor::new(input.to_vec())),
                    Some((&uids, base)),
                    1,
                    &mut |i| items.push(i),
                );
                proptest::prop_assert!(read.is_ok());
                for item in &items {
                    proptest::prop_assert!(item.line() > 0);
                }
            }
        }
    }
}

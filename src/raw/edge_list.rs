//! Public follow graphs as plain edge lists: MatrixMarket coordinate files (`.mtx`, as
//! Network Repository ships soc-sinaweibo) and whitespace-separated `src dst` lists with `#`
//! or `%` comments (SNAP and most other graph dumps). Each edge is one follows record,
//! `src` following `dst`.
//!
//! Choices (docs/formats.md, "Edge lists"):
//! - The ids are the file's own: `follower` and `followee` are the ids as written (a
//!   MatrixMarket file's are 1-based, and stay so). The report says so in the file's
//!   warnings, since they are no Weibo uids.
//! - MatrixMarket: the `%%MatrixMarket matrix coordinate <field> <symmetry>` banner decides.
//!   The first line after the comments is the size line `rows cols entries`, not an edge;
//!   a value after `src dst` (a field other than `pattern`) is a weight, which follows do
//!   not carry, and is dropped. A `symmetric` matrix stands for both directions: each entry
//!   off the diagonal is two records. An entries count that differs from the edges read is
//!   a warning.
//! - A plain list line with other than two ids, or an id that is not a positive integer,
//!   is one `malformed_row`; comment and blank lines are neither records nor rejects.
//! - There are no follow times: `followed_at` stays empty.

use std::io::{self, BufRead};

use super::mapping::RawRecord;
use super::{excerpt, Item};
use crate::dataset::{Entity, Reject};

/// The two kinds of edge list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    MatrixMarket,
    Plain,
}

/// Which kind of edge list the first bytes of a file are, if any: a MatrixMarket banner, or
/// comment lines (`#`, `%`) and then lines of two positive integers (`name` ending in
/// `.mtx`, `.edges` or `.edgelist` needs only the integer lines). The evidence must be
/// whole: every data line of the sample but a cut last one has exactly two ids.
pub fn detect(base_name: &str, sample: &[u8]) -> Option<Kind> {
    let text = String::from_utf8_lossy(sample);
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with("%%MatrixMarket") {
        return Some(Kind::MatrixMarket);
    }
    let named = [".mtx", ".edges", ".edgelist"]
        .iter()
        .any(|s| base_name.ends_with(s));
    let mut lines: Vec<&str> = text.lines().collect();
    if !sample.ends_with(b"\n") && lines.len() > 1 {
        lines.pop(); // cut by the sample's end
    }
    let mut commented = false;
    let mut data = 0;
    for line in lines {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with('#') || t.starts_with('%') {
            commented |= data == 0;
            continue;
        }
        edge(t)?;
        data += 1;
    }
    ((commented || named) && data > 0).then_some(Kind::Plain)
}

/// The two ids of a plain list's data line, when it is exactly two positive integers.
fn edge(line: &str) -> Option<(i64, i64)> {
    let mut tokens = line.split_ascii_whitespace();
    let a = tokens.next()?.parse::<i64>().ok().filter(|v| *v > 0)?;
    let b = tokens.next()?.parse::<i64>().ok().filter(|v| *v > 0)?;
    tokens.next().is_none().then_some((a, b))
}

/// The banner's `symmetric` (or `skew-symmetric`, `hermitian`): each entry stands for both
/// directions.
fn symmetric(banner: &str) -> bool {
    let lower = banner.to_ascii_lowercase();
    ["symmetric", "hermitian"]
        .iter()
        .any(|s| lower.split_ascii_whitespace().any(|w| w.ends_with(s)))
}

/// Reads an edge list of `kind`, one follows record per edge. Returns warnings for the
/// report.
pub fn read(
    mut reader: Box<dyn BufRead + Send>,
    kind: Kind,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Vec<String>> {
    let mut warnings = vec![
        "ids are the file's own, as written (a public graph's numbering, not Weibo uids)"
            .to_string(),
    ];
    let mut bytes = Vec::new();
    let mut line = 0u64;
    let mut both_ways = false;
    // A MatrixMarket file's size line, once read: its entries count.
    let mut entries: Option<Option<u64>> = None;
    let mut read_entries = 0u64;
    while let Some(read) =
        super::next_text_line(&mut reader, &mut bytes, &mut line, Entity::Follows, emit)?
    {
        let Some(text) = read else { continue };
        let t = text.trim();
        if t.starts_with("%%MatrixMarket") {
            both_ways = symmetric(t);
            continue;
        }
        if t.is_empty() || t.starts_with('#') || t.starts_with('%') {
            continue;
        }
        let reject = |reason| Item::Rejected {
            line,
            entity: Some(Entity::Follows),
            reason,
            excerpt: excerpt(t),
        };
        if kind == Kind::MatrixMarket && entries.is_none() {
            let size: Vec<Option<u64>> =
                t.split_ascii_whitespace().map(|v| v.parse().ok()).collect();
            match size.as_slice() {
                [Some(_), Some(_), Some(n)] => entries = Some(Some(*n)),
                _ => {
                    entries = Some(None);
                    emit(reject(Reject::MalformedRow));
                }
            }
            continue;
        }
        // MatrixMarket entries may carry a value after the two ids: dropped (a weight).
        let pair = match kind {
            Kind::Plain => edge(t),
            Kind::MatrixMarket => {
                let mut tokens = t.split_ascii_whitespace();
                let two: String = tokens.by_ref().take(2).collect::<Vec<_>>().join(" ");
                let value_ok = tokens.count() <= 1;
                edge(&two).filter(|_| value_ok)
            }
        };
        let Some((follower, followee)) = pair else {
            emit(reject(Reject::MalformedRow));
            continue;
        };
        read_entries += 1;
        let mut arcs = vec![(follower, followee)];
        if both_ways && follower != followee {
            arcs.push((followee, follower));
        }
        for (a, b) in arcs {
            emit(Item::Record {
                line,
                entity: Entity::Follows,
                record: RawRecord::follow(a, b),
            });
        }
    }
    if let Some(Some(n)) = entries {
        if n != read_entries {
            warnings.push(format!(
                "the size line announces {n} entries, {read_entries} were read"
            ));
        }
    }
    if kind == Kind::MatrixMarket && both_ways {
        warnings.push("a symmetric matrix: each entry off the diagonal is read both ways".into());
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str, kind: Kind) -> (Vec<Item>, Vec<String>) {
        let mut items = Vec::new();
        let cursor = Box::new(io::Cursor::new(text.as_bytes().to_vec()));
        let warnings = read(cursor, kind, &mut |i| items.push(i)).unwrap();
        (items, warnings)
    }

    /// `(line, follower, followee)` of a record.
    type Seen = (u64, String, String);

    /// The records, and `(line, reason)` of the rejects.
    fn seen(items: &[Item]) -> (Vec<Seen>, Vec<(u64, Reject)>) {
        let (mut records, mut rejects) = (Vec::new(), Vec::new());
        for item in items {
            match item {
                Item::Record { line, record, .. } => {
                    let field = |name| {
                        let i = Entity::Follows.field_index(name).unwrap();
                        record.field(i).unwrap().to_string()
                    };
                    records.push((*line, field("follower"), field("followee")))
                }
                Item::Rejected { line, reason, .. } => rejects.push((*line, *reason)),
                Item::RepeatedHeader { .. } => panic!("no headers in an edge list"),
            }
        }
        (records, rejects)
    }

    #[test]
    fn matrix_market_skips_its_size_line_and_keeps_ids_as_written() {
        let text = "%%MatrixMarket matrix coordinate pattern general\n% soc-sinaweibo\n\
                    3 3 3\n1 2\n2 1\n3 1\n";
        let (items, warnings) = read_text(text, Kind::MatrixMarket);
        let (records, rejects) = seen(&items);
        let at = |l, a: &str, b: &str| (l, a.to_string(), b.to_string());
        assert_eq!(
            records,
            vec![at(4, "1", "2"), at(5, "2", "1"), at(6, "3", "1")]
        );
        assert!(rejects.is_empty());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("own"));
    }

    #[test]
    fn a_symmetric_matrix_is_read_both_ways_and_a_short_one_is_reported() {
        let text = "%%MatrixMarket matrix coordinate integer symmetric\n3 3 4\n2 1 7\n3 3 1\n";
        let (items, warnings) = read_text(text, Kind::MatrixMarket);
        let (records, _) = seen(&items);
        let pairs: Vec<(String, String)> = records.into_iter().map(|r| (r.1, r.2)).collect();
        let p = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(pairs, vec![p("2", "1"), p("1", "2"), p("3", "3")]);
        assert!(warnings
            .iter()
            .any(|w| w.contains("announces 4 entries, 2")));
        assert!(warnings.iter().any(|w| w.contains("both ways")));
    }

    #[test]
    fn a_plain_list_rejects_what_is_not_two_ids_and_skips_comments() {
        let text = "# Directed graph\n# FromNodeId\tToNodeId\n5\t7\n\n7 5\n7 5 9\nx 1\n0 3\n";
        let (items, _) = read_text(text, Kind::Plain);
        let (records, rejects) = seen(&items);
        assert_eq!(records.len(), 2);
        assert_eq!(
            rejects,
            vec![
                (6, Reject::MalformedRow),
                (7, Reject::MalformedRow),
                (8, Reject::MalformedRow)
            ]
        );
    }

    #[test]
    fn detection_wants_whole_evidence() {
        let mm = b"%%MatrixMarket matrix coordinate pattern general\n1 1 0\n";
        assert_eq!(detect("g.mtx", mm), Some(Kind::MatrixMarket));
        assert_eq!(detect("g.txt", b"# c\n1 2\n3 4\n"), Some(Kind::Plain));
        assert_eq!(detect("g.edges", b"1 2\n3 4\n5"), Some(Kind::Plain));
        // No comment and no telling name: not taken for an edge list.
        assert_eq!(detect("g.txt", b"1 2\n3 4\n"), None);
        // A line of something else: not an edge list.
        assert_eq!(detect("g.txt", b"# c\n1 2\nuid,name\n"), None);
        assert_eq!(detect("g.csv", b"# c\n1,2\n"), None);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            for kind in [Kind::Plain, Kind::MatrixMarket] {
                let mut n = 0;
                let cursor = Box::new(io::Cursor::new(bytes.clone()));
                read(cursor, kind, &mut |_| n += 1).unwrap();
            }
            let _ = detect("x.txt", &bytes);
        }
    }
}

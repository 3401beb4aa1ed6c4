//! CSV files: our own canonical raw format (§1 of the raw-format spec, a header naming the
//! canonical fields of one entity), and the crawlers' CSV layouts, each chosen by the columns
//! of its header ([`super::mapping_file`], [`super::weibo_crawler_csv`], [`super::mediacrawler`]). JSON is [`super::json`]'s.
//!
//! Invariants: every physical CSV record becomes exactly one [`Item`], at the line it starts
//! on; a CSV row with a field count its header's layout does not allow is rejected as
//! `malformed_row` (our own writers never produce one), a header row repeated inside the file
//! is counted as a duplicate.

use std::io::{self, BufRead};

use csv::ByteRecord;

use super::mapping::{convert, Dialect, Mapped, RawRecord};
use super::mapping_file::{Claim, MappingFile};
use super::{entity_from_fields, entity_from_path, excerpt, Item};
use crate::dataset::Reject;

fn record_excerpt(record: &ByteRecord) -> String {
    let joined: Vec<String> = record
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    excerpt(&joined.join(","))
}

/// Reads a canonical CSV file.
/// Returns what the header said the file is (`None` without a header we know), and what the
/// report should say about the file.
pub fn read_csv(
    reader: Box<dyn BufRead + Send>,
    path: &str,
    layouts: &MappingFile,
    emit: &mut dyn FnMut(Item),
) -> io::Result<(Option<Dialect>, Vec<String>)> {
    // A buffer as large as the one `reader` fills: once it is drained, the parser's refills
    // bypass it and the kernel copies straight into the parser's buffer (with the default
    // 8 KiB, every byte was copied once more between the two).
    let newlines = std::rc::Rc::new(std::cell::RefCell::new(Newlines::default()));
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(1 << 20)
        .from_reader(NewlineCounter {
            inner: reader,
            read: 0,
            newlines: newlines.clone(),
        });
    let mut record = ByteRecord::new();
    // The header row and what it maps to (`None`: no entity we know).
    let mut header: Option<(ByteRecord, Option<Mapped>)> = None;
    // Why a header no reader takes was refused, when a layout partly fits it.
    let mut refused = None;
    loop {
        let line = newlines.borrow_mut().line_at(csv.position().byte());
        match csv.read_byte_record(&mut record) {
            Ok(false) => {
                let mapped = header.and_then(|(_, m)| m);
                let dialect = mapped.as_ref().map(|m| m.dialect);
                let warning = mapped.and_then(|m| m.warning).or(refused);
                return Ok((dialect, warning.into_iter().collect()));
            }
            Ok(true) => {}
            Err(e) => {
                if let csv::ErrorKind::Io(_) = e.kind() {
                    return Err(io::Error::other(e.to_string()));
                }
                emit(Item::Rejected {
                    line,
                    entity: header.as_ref().and_then(|h| h.1.as_ref()).map(|m| m.entity),
                    reason: Reject::MalformedRow,
                    excerpt: excerpt(&e.to_string()),
                });
                continue;
            }
        }
        let line = record
            .position()
            .map_or(line, |p| newlines.borrow_mut().line_at(p.byte()));
        // An appending run that opens the file as `utf-8-sig` writes a BOM before its rows
        // (weibo-crawler, 2019), a header among them.
        if record.get(0).is_some_and(|f| f.starts_with(BOM)) {
            record = without_bom(&record);
        }
        let Some((head, mapped)) = &header else {
            let names: Vec<String> = record
                .iter()
                .map(|f| {
                    String::from_utf8_lossy(f)
                        .trim()
                        .trim_matches('"')
                        .to_string()
                })
                .collect();
            let mapped = match header_mapping(&names, path, layouts) {
                Ok(mapped) => Some(mapped),
                Err(why) => {
                    refused = why;
                    None
                }
            };
            // A first line no field of which could name a column (numbers and blanks) is a
            // header-less file's first record: refused with the rest, not eaten as a header.
            let number = |t: &str| t.parse::<f64>().is_ok();
            let data = names.iter().all(|n| n.split_ascii_whitespace().all(number));
            if mapped.is_none() && data {
                emit(Item::Rejected {
                    line,
                    entity: None,
                    reason: Reject::UnknownFormat,
                    excerpt: record_excerpt(&record),
                });
            }
            header = Some((record.clone(), mapped));
            continue;
        };
        let Some(mapped) = mapped else {
            emit(Item::Rejected {
                line,
                entity: None,
                reason: Reject::UnknownFormat,
                excerpt: record_excerpt(&record),
            });
            continue;
        };
        let entity = mapped.entity;
        // (Lengths first: a data row is seldom as long as the header.)
        if record.as_slice().len() == head.as_slice().len() && record == *head {
            emit(Item::RepeatedHeader { line, entity });
            continue;
        }
        let Some(mapping) = mapped.for_row(record.len(), &|i| record.get(i)) else {
            emit(Item::Rejected {
                line,
                entity: Some(entity),
                reason: Reject::MalformedRow,
                excerpt: record_excerpt(&record),
            });
            continue;
        };
        let mut bad_encoding = false;
        // One check of the whole record (vector code over a kilobyte) rather than one per
        // field (mostly a few bytes, too short for it): a field is valid text when the record
        // is and the field starts and ends on character boundaries. A record with invalid
        // bytes is checked field by field, so only its mapped fields count.
        let whole = simdutf8::basic::from_utf8(record.as_slice()).ok();
        // The usual row, valid text with nothing from the path, is copied whole, once, and
        // its fields are spans of the copy; any other gets its values one by one.
        let copied = whole.is_some() && mapped.constants.is_empty();
        let mut raw = match whole {
            Some(text) if copied => RawRecord::from_row(entity, text),
            _ => {
                let constants: usize = mapped.constants.iter().map(|(_, v)| v.len()).sum();
                let mut raw = RawRecord::with_capacity(entity, record.as_slice().len() + constants);
                for (i, value) in &mapped.constants {
                    raw.set_index(*i, value);
                }
                raw
            }
        };
        // (A short row maps only the fields it has.)
        for (f, target) in mapping.iter().enumerate().take(record.len()) {
            let Some(i) = *target else { continue };
            let Some(text) = whole else {
                match record
                    .get(f)
                    .and_then(|v| simdutf8::basic::from_utf8(v).ok())
                {
                    Some(v) => raw.set_index(i, v),
                    None => bad_encoding = true,
                }
                continue;
            };
            // An empty field sits between two others, whatever bytes surround it.
            let span = record.range(f).and_then(|r| {
                if r.is_empty() {
                    Some(0..0)
                } else {
                    text.get(r.clone()).map(|_| r)
                }
            });
            match span {
                Some(r) if copied => raw.set_span(i, r),
                Some(r) => raw.set_index(i, &text[r]),
                None => bad_encoding = true,
            }
        }
        if let Some(times) = mapped.mediacrawler {
            let cell = |i: usize| record.get(i).and_then(|v| std::str::from_utf8(v).ok());
            super::mediacrawler::fix_row(entity, times, &mut raw, &cell);
        }
        if mapped.dialect == Dialect::WeiboCrawlerPosts {
            super::weibo_crawler_json::mark_capped_counts(entity, &mut raw);
        }
        if let Err(reason) = convert(&mut raw, &mapped.conversions) {
            emit(Item::Rejected {
                line,
                entity: Some(entity),
                reason,
                excerpt: record_excerpt(&record),
            });
        } else if bad_encoding {
            emit(Item::Rejected {
                line,
                entity: Some(entity),
                reason: Reject::InvalidEncoding,
                excerpt: record_excerpt(&record),
            });
        } else {
            emit(Item::Record {
                line,
                entity,
                record: raw,
            });
        }
    }
}

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// `record` without the byte order mark its first field starts with.
fn without_bom(record: &ByteRecord) -> ByteRecord {
    let mut clean = ByteRecord::with_capacity(record.as_slice().len(), record.len());
    for (i, field) in record.iter().enumerate() {
        clean.push_field(if i == 0 { &field[BOM.len()..] } else { field });
    }
    clean.set_position(record.position().cloned());
    clean
}

/// Where the line breaks of a text are, as far as it was read, to tell the line a CSV
/// record starts on from its byte offset. The csv crate's own line count is one low after a
/// `\r\n` (Python's `csv` writes them, so every crawler's CSV has them): a record's start
/// is where the previous one's `\r` ended, before its `\n`.
#[derive(Default)]
struct Newlines {
    /// Offsets of the `\n`s read and not yet passed.
    ahead: std::collections::VecDeque<u64>,
    /// `\n`s before the first of `ahead`.
    passed: u64,
}

impl Newlines {
    /// The line of the record that starts at byte `at` (a `\n` there is the end of the
    /// previous line, not part of the record). Offsets asked for only grow.
    fn line_at(&mut self, at: u64) -> u64 {
        while self.ahead.front().is_some_and(|&n| n <= at) {
            self.ahead.pop_front();
            self.passed += 1;
        }
        self.passed + 1
    }
}

/// A reader noting where its `\n`s are ([`Newlines`]).
struct NewlineCounter<R> {
    inner: R,
    read: u64,
    newlines: std::rc::Rc<std::cell::RefCell<Newlines>>,
}

impl<R: io::Read> io::Read for NewlineCounter<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut newlines = self.newlines.borrow_mut();
        for (i, _) in buf[..n].iter().enumerate().filter(|(_, b)| **b == b'\n') {
            newlines.ahead.push_back(self.read + i as u64);
        }
        self.read += n as u64;
        Ok(n)
    }
}

/// Each column of a header with the canonical field it fills (`None`: not read).
pub type Columns = Vec<(String, Option<&'static str>)>;

/// How a CSV header row is read, for `clean --inspect`: its entity, and each column with the
/// canonical field it fills, then the fields the path gives (the uid of a crawler's
/// per-user file). `None` when no reader takes the header.
pub fn header_columns(
    names: &[String],
    path: &str,
    layouts: &MappingFile,
) -> Option<(crate::dataset::Entity, Columns)> {
    let mapped = header_mapping(names, path, layouts).ok()?;
    let fields = mapped.entity.fields();
    let mut columns: Columns = names
        .iter()
        .zip(mapped.mapping.iter().chain(std::iter::repeat(&None)))
        .map(|(name, field)| (name.clone(), field.map(|i| fields[i])))
        .collect();
    for (i, value) in &mapped.constants {
        columns.push((format!("(the path: {value})"), Some(fields[*i])));
    }
    Some((mapped.entity, columns))
}

/// What a header row maps to: a layout of the mapping file first, then weibo-crawler's
/// posts, the built-in declared layouts and MediaCrawler's, else our canonical names (the entity from the names or, failing that, from the
/// path). `Err` when no reader takes it, with why when a layout partly fits.
fn header_mapping(
    names: &[String],
    path: &str,
    layouts: &MappingFile,
) -> Result<Mapped, Option<String>> {
    match layouts.header(names, path) {
        Claim::Read(mapped) => return Ok(mapped),
        Claim::Partial(why) => return Err(Some(why)),
        Claim::None => {}
    }
    if let Some(posts) = super::weibo_crawler_csv::crawler_header(names, path) {
        return Ok(posts);
    }
    match MappingFile::built_in().header(names, path) {
        Claim::Read(mapped) => return Ok(mapped),
        // Partly a crawler's layout: not ours either (docs/formats.md, "Detection").
        Claim::Partial(why) => return Err(Some(why)),
        Claim::None => {}
    }
    if let Some(mapped) = super::mediacrawler::header(names) {
        return Ok(mapped);
    }
    let entity = entity_from_fields(names.iter().map(String::as_str))
        .or_else(|| entity_from_path(path))
        .ok_or(None)?;
    let mapping = names.iter().map(|n| entity.field_index(n)).collect();
    Ok(Mapped::columns(entity, mapping))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Entity;
    use crate::raw::mapping_file::NONE;

    /// weibo-crawler's 1000000 is its capped `100万+`; other counts pass as written.
    #[test]
    fn weibo_crawlers_million_is_the_cap() {
        let header = "id,bid,正文,头条文章url,原始图片url,视频url,位置,日期,工具,点赞数,评论数,\
                      转发数,话题,@用户,完整日期,是否原创";
        let row = "4973000000000093,NuD3W003r,破百万,,,,,2026-11-29T17:00:00,iPhone,1000000,\
                   999999,1000001,,,2026-11-29 17:00:42,True";
        let items = items_csv(
            &format!("{header}\n{row}\n"),
            "/raw/weibo/何炅/1195230310.csv",
        );
        let [Item::Record { entity, record, .. }] = &items[..] else {
            panic!("{items:?}");
        };
        let field = |name| record.field(entity.field_index(name).unwrap()).unwrap();
        assert_eq!(field("attitudes_count"), "100万+");
        assert_eq!(field("comments_count"), "999999");
        assert_eq!(field("reposts_count"), "1000001");
    }

    /// A posts file whose name is no uid says so: its posts have no author.
    #[test]
    fn a_posts_file_not_named_by_its_uid_is_reported() {
        let text = "id,bid,正文,日期,工具,点赞数,评论数,转发数,完整日期\n\
                    4973000000000093,NuD3W003r,hi,2026-11-29,iPhone,1,2,3,2026-11-29 17:00:42\n";
        let warnings = |path: &str| {
            let cursor = Box::new(io::Cursor::new(text.as_bytes().to_vec()));
            let (dialect, warnings) = read_csv(cursor, path, &NONE, &mut |_| {}).unwrap();
            assert_eq!(dialect, Some(Dialect::WeiboCrawlerPosts));
            warnings
        };
        assert!(warnings("/raw/weibo/何炅/1195230310.csv").is_empty());
        let named = warnings("/raw/weibo/何炅/何炅.csv");
        assert!(
            named.len() == 1 && named[0].contains("何炅.csv"),
            "{named:?}"
        );
    }

    /// A file with no header whose first line is data: every line is a reject, the first too.
    #[test]
    fn a_header_less_lists_first_line_is_a_record_refused_like_the_rest() {
        let items = items_csv(
            "1669879400,1195230310\n1195230310,1669879400\n",
            "/raw/x.csv",
        );
        let lines: Vec<(u64, Reject)> = items
            .iter()
            .map(|i| match i {
                Item::Rejected { line, reason, .. } => (*line, *reason),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            lines,
            [(1, Reject::UnknownFormat), (2, Reject::UnknownFormat)]
        );
        // Numbers apart by blanks (an edge list with no comment) are data too.
        assert_eq!(items_csv("1 2\n3 4\n", "/raw/x.txt").len(), 2);
        // A header we do not know is a header: its line is no record.
        let items = items_csv("a,b\n1,2\n", "/raw/x.csv");
        assert_eq!(items.len(), 1, "{items:?}");
    }

    fn items_csv(text: &str, path: &str) -> Vec<Item> {
        let mut out = Vec::new();
        read_csv(
            Box::new(io::Cursor::new(text.as_bytes().to_vec())),
            path,
            &NONE,
            &mut |i| out.push(i),
        )
        .unwrap();
        out
    }

    #[test]
    fn a_header_an_appending_run_wrote_again_after_its_bom_is_a_repeated_header() {
        let header = "id,正文,原始图片url,视频url,位置,日期,工具,点赞数,评论数,转发数,话题,@用户";
        let row = |mid: &str| format!("{mid},好,无,无,无,2019-03-01,iPhone,1,2,3,无,无");
        let text = format!(
            "\u{feff}{header}\r\n{}\r\n\u{feff}{header}\r\n\u{feff}{}\r\n",
            row("4350000000000001"),
            row("4350000000000002")
        );
        let items = items_csv(&text, "/raw/weibo/某人/1776448504.csv");
        let kinds: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Record { line, record, .. } => {
                    format!("{line}:{}", record.field(0).unwrap_or_default())
                }
                Item::RepeatedHeader { line, .. } => format!("{line}:header"),
                Item::Rejected { line, reason, .. } => format!("{line}:{reason:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            ["2:4350000000000001", "3:header", "4:4350000000000002"]
        );
    }

    #[test]
    fn rows_a_later_run_appended_are_read_by_what_their_fields_hold() {
        // weibo-crawler 2020-04 to 2021-12, a run that crawled originals only.
        let header = "id,bid,正文,头条文章url,原始图片url,视频url,位置,日期,工具,点赞数,评论数,转发数,话题,@用户";
        let base = |mid: &str| format!("{mid},Bid1,好,,,,,2021-05-01,iPhone,1,2,3,,");
        let source: Vec<String> = header.split(',').map(|_| String::new()).collect();
        let mut source = source;
        source[0] = "4600000000000009".into();
        let rows = [
            base("4600000000000001"),
            // A later run: 是否原创 alone, then a repost with its source's columns.
            format!("{},True", base("4600000000000002")),
            format!(
                "{},False,1669879400,迪丽热巴,{}",
                base("4600000000000003"),
                source.join(",")
            ),
            // 2022-04 to 2024-01: the unlabelled full time.
            format!("{},2021-05-01 12:30:00", base("4600000000000004")),
            // Neither: refused, not guessed.
            format!("{},maybe", base("4600000000000005")),
        ];
        let text = format!("{header}\n{}\n", rows.join("\n"));
        let items = items_csv(&text, "/raw/weibo/某人/1669879400.csv");
        let e = Entity::Posts;
        let got: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Record { record, .. } => {
                    let f = |name| record.field(e.field_index(name).unwrap()).unwrap_or("-");
                    format!("{} {} {}", f("mid"), f("created_at"), f("retweet_mid"))
                }
                Item::Rejected { line, reason, .. } => format!("{line}:{reason:?}"),
                Item::RepeatedHeader { .. } => "header".into(),
            })
            .collect();
        assert_eq!(
            got,
            [
                "4600000000000001 2021-05-01 -",
                "4600000000000002 2021-05-01 -",
                "4600000000000003 2021-05-01 4600000000000009",
                "4600000000000004 2021-05-01 12:30:00 -",
                "6:MalformedRow",
            ]
        );
    }

    #[test]
    fn a_records_line_is_where_it_starts_whatever_the_line_ends() {
        let lf = "follower,followee,followed_at,crawl_time\n1,2,,\n3,\"4\n\",,\nx\n5,6,,\n";
        let lines = |text: &str| -> Vec<u64> {
            items_csv(text, "/raw/f.csv")
                .iter()
                .map(Item::line)
                .collect()
        };
        // The second record spans lines 3 and 4; the malformed one is on line 5.
        assert_eq!(lines(lf), [2, 3, 5, 6]);
        assert_eq!(lines(&lf.replace('\n', "\r\n")), [2, 3, 5, 6]);
        assert_eq!(
            lines(&format!("\u{feff}{}", lf.replace('\n', "\r\n"))),
            [2, 3, 5, 6]
        );
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// Every row read from a canonical CSV equals the csv crate's reading of it: a repeated
        /// header, a malformed row (wrong length), an encoding reject exactly when a mapped
        /// field is not UTF-8 on its own (bytes of one character cut by a comma included), and
        /// otherwise the mapped fields' text, whatever order the header puts them in.
        #[test]
        fn csv_rows_equal_the_csv_crates_fields(
            header in proptest::sample::select(vec![
                "follower,followee,followed_at,crawl_time",
                "followed_at,x,followee,follower",
            ]),
            rows in proptest::collection::vec(
                proptest::collection::vec(
                    // Pieces of one character (中 is e4 b8 ad) that a comma may cut.
                    proptest::collection::vec(proptest::sample::select(vec![
                        &b"1"[..], b"a", b" ", b"\"", "中".as_bytes(), b"\xe4\xb8", b"\xad",
                        b"\xe4", b"\xb8\xad", b"\xff",
                    ]), 0..4).prop_map(|pieces| pieces.concat()),
                    3..6),
                0..20),
        ) {
            let mut bytes = format!("{header}\n").into_bytes();
            for row in &rows {
                bytes.extend(row.join(&b","[..]));
                bytes.push(b'\n');
            }
            let mut got = Vec::new();
            read_csv(Box::new(io::Cursor::new(bytes.clone())), "/raw/f.csv", &NONE, &mut |i| got.push(i))
                .unwrap();
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .from_reader(&bytes[..]);
            let records: Vec<ByteRecord> = reader.byte_records().map(Result::unwrap).collect();
            let names: Vec<&str> = header.split(',').collect();
            let entity = Entity::Follows;
            proptest::prop_assert_eq!(got.len(), records.len() - 1);
            for (item, record) in got.iter().zip(&records[1..]) {
                match item {
                    Item::RepeatedHeader { .. } => {
                        proptest::prop_assert_eq!(record, &records[0]);
                    }
                    Item::Rejected { reason: Reject::MalformedRow, .. } => {
                        proptest::prop_assert_ne!(record.len(), names.len());
                    }
                    Item::Rejected { reason: Reject::InvalidEncoding, .. } => {
                        let bad = record.iter().zip(&names).any(|(v, n)| {
                            entity.field_index(n).is_some() && std::str::from_utf8(v).is_err()
                        });
                        proptest::prop_assert!(bad, "rejected with every mapped field valid");
                    }
                    Item::Record { record: raw, .. } => {
                        proptest::prop_assert_eq!(record.len(), names.len());
                        for (v, n) in record.iter().zip(&names) {
                            if let Some(i) = entity.field_index(n) {
                                proptest::prop_assert_eq!(raw.field(i), Some(std::str::from_utf8(v).unwrap()));
                            }
                        }
                    }
                    other => proptest::prop_assert!(false, "unexpected {other:?}"),
                }
            }
        }
    }

    #[test]
    fn csv_maps_header_to_canonical_fields_and_flags_bad_rows() {
        let text = "followee,follower,crawl_time\n2,1,2026-11-29\nfollowee,follower,crawl_time\n3,\"multi\nline\",x\n9,8\n";
        let items = items_csv(text, "/raw/x.csv");
        assert_eq!(items.len(), 4, "{items:?}");
        match &items[0] {
            Item::Record {
                line,
                entity,
                record,
            } => {
                assert_eq!((*line, *entity), (2, Entity::Follows));
                assert_eq!(record.field(0), Some("1"));
                assert_eq!(record.field(1), Some("2"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(items[1], Item::RepeatedHeader { line: 3, .. }));
        assert!(matches!(items[2], Item::Record { line: 4, .. }));
        assert!(matches!(
            items[3],
            Item::Rejected {
                line: 6,
                reason: Reject::MalformedRow,
                ..
            }
        ));
    }

    #[test]
    fn csv_field_that_splits_a_character_is_invalid_even_when_the_record_is_valid() {
        // `中` is E4 B8 AD: cut after two bytes, the record's bytes without separators read as
        // valid text, yet neither field is.
        let mut bytes = b"follower,followee,followed_at,crawl_time\n1,2,x\xe4\xb8,\xad\n".to_vec();
        bytes.extend_from_slice("3,4,中,\n".as_bytes());
        let mut out = Vec::new();
        read_csv(
            Box::new(io::Cursor::new(bytes)),
            "/raw/f.csv",
            &NONE,
            &mut |i| out.push(i),
        )
        .unwrap();
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(matches!(
            out[0],
            Item::Rejected {
                line: 2,
                reason: Reject::InvalidEncoding,
                ..
            }
        ));
        match &out[1] {
            Item::Record { record, .. } => assert_eq!(record.field(2), Some("中")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn csv_of_unknown_entity_rejects_each_row() {
        let items = items_csv("a,b\n1,2\n3,4\n", "/raw/data.csv");
        assert_eq!(items.len(), 2);
        assert!(items.iter().all(|i| matches!(
            i,
            Item::Rejected {
                reason: Reject::UnknownFormat,
                entity: None,
                ..
            }
        )));
    }
}

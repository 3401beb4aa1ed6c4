//! Our own canonical raw format (§1 of the raw-format spec): CSV with a header naming the
//! canonical fields of one entity, or JSON lines whose keys are those fields. The JSON reader
//! also maps nghuyong WeiboSpider and MediaCrawler records (see [`super::nghuyong`]),
//! detected per record, and reads a file holding one JSON array (MediaCrawler's `json`
//! option) element by element; the CSV reader also maps weiboSpider post files (see
//! [`super::weibospider`]) by header.
//!
//! Invariants: every physical CSV record, every non-blank JSON line and every element of a
//! JSON array becomes exactly one [`Item`] (an array that stops being JSON, one reject for
//! the rest); a CSV row with a different field count than its header is rejected as
//! `malformed_row` (our own writers never produce one), a header row repeated inside the file
//! is counted as a duplicate.

use std::io::{self, BufRead};

use csv::ByteRecord;
use serde_json::Value;

use super::mapping::RawRecord;
use super::mapping::{value_text, Mapped};
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
/// Returns what the header said the file is (`None` without a header we know).
pub fn read_csv(
    reader: Box<dyn BufRead + Send>,
    path: &str,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Option<&'static str>> {
    // A buffer as large as the one `reader` fills: once it is drained, the parser's refills
    // bypass it and the kernel copies straight into the parser's buffer (with the default
    // 8 KiB, every byte was copied once more between the two).
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(1 << 20)
        .from_reader(reader);
    let mut record = ByteRecord::new();
    // The header row and what it maps to (`None`: no entity we know).
    let mut header: Option<(ByteRecord, Option<Mapped>)> = None;
    loop {
        let line = csv.position().line() + 1;
        match csv.read_byte_record(&mut record) {
            Ok(false) => return Ok(header.and_then(|(_, m)| m).map(|m| m.dialect)),
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
        let line = record.position().map_or(line, |p| p.line());
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
            header = Some((record.clone(), header_mapping(&names, path)));
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
        if record == *head {
            emit(Item::RepeatedHeader { line, entity });
            continue;
        }
        let Some(mapping) = mapped.for_len(record.len()) else {
            emit(Item::Rejected {
                line,
                entity: Some(entity),
                reason: Reject::MalformedRow,
                excerpt: record_excerpt(&record),
            });
            continue;
        };
        let constants: usize = mapped.constants.iter().map(|(_, v)| v.len()).sum();
        let mut raw = RawRecord::with_capacity(entity, record.as_slice().len() + constants);
        for (i, value) in &mapped.constants {
            raw.set_index(*i, value);
        }
        let mut bad_encoding = false;
        // One check of the whole record (vector code over a kilobyte) rather than one per
        // field (mostly a few bytes, too short for it): a field is valid text when the record
        // is and the field starts and ends on character boundaries. A record with invalid
        // bytes is checked field by field, so only its mapped fields count.
        let whole = simdutf8::basic::from_utf8(record.as_slice()).ok();
        // (A short row maps only the fields it has.)
        for (f, target) in mapping.iter().enumerate().take(record.len()) {
            let Some(i) = target else { continue };
            let value = match whole {
                // An empty field sits between two others, whatever bytes surround it.
                Some(text) => {
                    record
                        .range(f)
                        .and_then(|r| if r.is_empty() { Some("") } else { text.get(r) })
                }
                None => record
                    .get(f)
                    .and_then(|v| simdutf8::basic::from_utf8(v).ok()),
            };
            match value {
                Some(v) => raw.set_index(*i, v),
                None => bad_encoding = true,
            }
        }
        if let Some(times) = mapped.mediacrawler {
            let cell = |i: usize| record.get(i).and_then(|v| std::str::from_utf8(v).ok());
            super::mediacrawler::fix_row(entity, times, &mut raw, &cell);
        }
        if bad_encoding {
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

/// What a header row maps to: a crawler's known header first, else our canonical names
/// (the entity from the names or, failing that, from the path).
fn header_mapping(names: &[String], path: &str) -> Option<Mapped> {
    let crawler = super::weibospider::header(names, path)
        .or_else(|| super::weibospider::crawler_header(names, path))
        .or_else(|| super::weibospider::crawler_other_header(names))
        .or_else(|| super::mediacrawler::header(names));
    if crawler.is_some() {
        return crawler;
    }
    let entity =
        entity_from_fields(names.iter().map(String::as_str)).or_else(|| entity_from_path(path))?;
    let mapping = names.iter().map(|n| entity.field_index(n)).collect();
    Some(Mapped::columns(entity, mapping))
}

/// Reads a JSON lines file, or a file holding one JSON array of records (MediaCrawler's
/// `json` save option), whatever its line breaks.
/// Returns what the records said the file is (`None` if no record was recognised).
pub fn read_jsonl(
    mut reader: Box<dyn BufRead + Send>,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Option<&'static str>> {
    let leading = {
        let buf = reader.fill_buf()?;
        buf.iter()
            .position(|b| !b.is_ascii_whitespace() && !b"\xef\xbb\xbf".contains(b))
            .map(|i| buf[i])
    };
    if leading == Some(b'[') {
        return read_json_array(reader, emit);
    }
    let mut buf = Vec::new();
    let mut line = 0u64;
    let mut dialect = None;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return Ok(dialect);
        }
        line += 1;
        let Ok(text) = std::str::from_utf8(&buf) else {
            emit(Item::Rejected {
                line,
                entity: None,
                reason: Reject::InvalidEncoding,
                excerpt: excerpt(String::from_utf8_lossy(&buf).trim_end()),
            });
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
        if let Some(name) = emit_value(value, line, text, emit) {
            dialect.get_or_insert(name);
        }
    }
}

/// One JSON record: a record of the entity its keys (or a crawler's shape) name, or a
/// reject. Returns the name of the shape it was read as.
fn emit_value(
    value: Value,
    line: u64,
    text: &str,
    emit: &mut dyn FnMut(Item),
) -> Option<&'static str> {
    let reject = |reason| Item::Rejected {
        line,
        entity: None,
        reason,
        excerpt: excerpt(text.trim_end()),
    };
    let Value::Object(object) = value else {
        emit(reject(Reject::BadJson));
        return None;
    };
    // Known crawler shapes first (their keys would not name one of our entities).
    let crawler = super::nghuyong::map(&object)
        .map(|m| ("nghuyong-jsonl", m))
        .or_else(|| super::mediacrawler::map(&object).map(|m| ("mediacrawler-jsonl", m)));
    if let Some((name, (entity, record))) = crawler {
        emit(Item::Record {
            line,
            entity,
            record,
        });
        return Some(name);
    }
    let Some(entity) = entity_from_fields(object.keys().map(String::as_str)) else {
        emit(reject(Reject::UnknownRecord));
        return None;
    };
    let mut raw = RawRecord::new(entity);
    for (key, value) in &object {
        if let (Some(i), Some(text)) = (entity.field_index(key), value_text(value)) {
            raw.set_index(i, &text);
        }
    }
    emit(Item::Record {
        line,
        entity,
        record: raw,
    });
    Some("canonical-jsonl")
}

/// Counts the lines of what it reads, so a record of an array is told by its line.
struct LineCounter<R> {
    inner: R,
    /// Newlines read so far.
    lines: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: io::Read> io::Read for LineCounter<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let newlines = buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        self.lines.set(self.lines.get() + newlines);
        Ok(n)
    }
}

/// Reads a file holding one JSON array, one element at a time (the array is never held
/// whole). Each element is a record, at the line where it ends; a file that stops being JSON
/// is one `bad_json` reject at the line where it does, for the rest of it.
fn read_json_array(
    reader: Box<dyn BufRead + Send>,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Option<&'static str>> {
    use serde::de::{Deserializer, SeqAccess, Visitor};

    struct Elements<'a> {
        emit: &'a mut dyn FnMut(Item),
        lines: std::rc::Rc<std::cell::Cell<u64>>,
        dialect: Option<&'static str>,
    }

    impl<'de> Visitor<'de> for &mut Elements<'_> {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of JSON records")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while let Some(value) = seq.next_element::<Value>()? {
                let text = value.to_string();
                let line = self.lines.get() + 1;
                if let Some(name) = emit_value(value, line, &text, self.emit) {
                    self.dialect.get_or_insert(name);
                }
            }
            Ok(())
        }
    }

    let lines = std::rc::Rc::new(std::cell::Cell::new(0));
    let counted = LineCounter {
        inner: reader,
        lines: lines.clone(),
    };
    let mut elements = Elements {
        emit,
        lines,
        dialect: None,
    };
    let mut de = serde_json::Deserializer::from_reader(counted);
    let parsed = (&mut de)
        .deserialize_seq(&mut elements)
        .and_then(|_| de.end());
    if let Err(e) = parsed {
        if e.is_io() {
            return Err(io::Error::other(e));
        }
        (elements.emit)(Item::Rejected {
            line: e.line() as u64,
            entity: None,
            reason: Reject::BadJson,
            excerpt: excerpt(&e.to_string()),
        });
    }
    // An array's records are named for their shape, as a JSON lines file's are.
    Ok(elements.dialect.map(|d| d.strip_suffix('l').unwrap_or(d)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Entity;

    fn items_csv(text: &str, path: &str) -> Vec<Item> {
        let mut out = Vec::new();
        read_csv(
            Box::new(io::Cursor::new(text.as_bytes().to_vec())),
            path,
            &mut |i| out.push(i),
        )
        .unwrap();
        out
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
        read_csv(Box::new(io::Cursor::new(bytes)), "/raw/f.csv", &mut |i| {
            out.push(i)
        })
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

    fn items_jsonl(text: &str) -> (Vec<Item>, Option<&'static str>) {
        let mut out = Vec::new();
        let reader = Box::new(io::Cursor::new(text.as_bytes().to_vec()));
        let dialect = read_jsonl(reader, &mut |i| out.push(i)).unwrap();
        (out, dialect)
    }

    #[test]
    fn a_whole_file_json_array_is_read_element_by_element() {
        let sample = include_str!(
            "../../sample_data/crawlers/mediacrawler/json/search_contents_2026-11-29.json"
        );
        let (items, dialect) = items_jsonl(sample);
        assert_eq!(dialect, Some("mediacrawler-json"));
        let lines: Vec<u64> = items
            .iter()
            .map(|i| match i {
                Item::Record { line, entity, .. } if *entity == Entity::Posts => *line,
                other => panic!("{other:?}"),
            })
            .collect();
        // Each record at the line its element ends on.
        let ends: Vec<u64> = sample
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim_start().starts_with('}'))
            .map(|(i, _)| i as u64 + 1)
            .collect();
        assert_eq!(lines, ends);

        // Not an object: a reject; cut short: the records before, then one reject where it
        // stops being JSON.
        let (items, _) = items_jsonl(
            "[\n{\"follower\": \"1000000001\", \"followee\": \"1000000002\"},\n42,\n{\"uid\": \"10",
        );
        let kinds: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Record { line, .. } => format!("record@{line}"),
                Item::Rejected { line, reason, .. } => format!("{reason:?}@{line}"),
                Item::RepeatedHeader { .. } => "header".into(),
            })
            .collect();
        assert_eq!(kinds, ["record@2", "BadJson@3", "BadJson@4"]);
    }

    #[test]
    fn jsonl_detects_entity_per_record() {
        let text = "{\"uid\":\"1\",\"screen_name\":\"a\"}\n\nnot json\n{\"follower\":1,\"followee\":2}\n{\"x\":1}\n[1]\n";
        let mut out = Vec::new();
        read_jsonl(
            Box::new(io::Cursor::new(text.as_bytes().to_vec())),
            &mut |i| out.push(i),
        )
        .unwrap();
        assert_eq!(out.len(), 5);
        assert!(matches!(
            out[0],
            Item::Record {
                line: 1,
                entity: Entity::Users,
                ..
            }
        ));
        assert!(matches!(
            out[1],
            Item::Rejected {
                line: 3,
                reason: Reject::BadJson,
                ..
            }
        ));
        assert!(matches!(
            out[2],
            Item::Record {
                line: 4,
                entity: Entity::Follows,
                ..
            }
        ));
        assert!(matches!(
            out[3],
            Item::Rejected {
                line: 5,
                reason: Reject::UnknownRecord,
                ..
            }
        ));
        assert!(matches!(
            out[4],
            Item::Rejected {
                line: 6,
                reason: Reject::BadJson,
                ..
            }
        ));
    }
}

#[cfg(test)]
mod robustness {
    //! Arbitrary bytes into every reader: no panic, and every record accounted for.

    use super::*;
    use crate::clean::clean_record;
    use crate::dataset::Entity;
    use proptest::prelude::*;

    fn run_jsonl(bytes: &[u8]) -> Vec<Item> {
        let mut out = Vec::new();
        read_jsonl(Box::new(io::Cursor::new(bytes.to_vec())), &mut |i| {
            out.push(i)
        })
        .unwrap();
        out
    }

    fn run_csv(bytes: &[u8]) -> Vec<Item> {
        run_csv_at(bytes, "/raw/posts.csv")
    }

    /// Records the csv crate itself sees (minus the header): what `read_csv` must account for.
    fn csv_records(bytes: &[u8]) -> usize {
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(bytes);
        let mut rec = ByteRecord::new();
        let mut n = 0usize;
        while let Ok(true) = r.read_byte_record(&mut rec) {
            n += 1;
        }
        n.saturating_sub(1)
    }

    fn clean_all(items: &[Item]) {
        for item in items {
            if let Item::Record { entity, record, .. } = item {
                let _ = clean_record(*entity, record, 1_795_964_400_000);
            }
        }
    }

    /// The crawler CSV files of `sample_data/`, under paths shaped like the real ones: their
    /// dialects are chosen by header and path (the account a weibo-crawler file is of).
    const CSV_DIALECTS: &[(&str, &str)] = &[
        (
            "/raw/weibo/何炅/1195230310.csv",
            include_str!("../../sample_data/crawlers/weibo-crawler/weibo/何炅/1195230310.csv"),
        ),
        (
            "/raw/weibo/陈坤/1087770692.csv",
            include_str!("../../sample_data/crawlers/weibo-crawler/weibo/陈坤/1087770692.csv"),
        ),
        (
            "/raw/weibo/何炅/4973000000000091_comments.csv",
            include_str!(
                "../../sample_data/crawlers/weibo-crawler/weibo/何炅/4973000000000091_comments.csv"
            ),
        ),
        (
            "/raw/weibo/users.csv",
            include_str!("../../sample_data/crawlers/weibo-crawler/weibo/users.csv"),
        ),
        (
            "/raw/weiboSpider/weibo/人民日报/2803301701.csv",
            include_str!("../../sample_data/crawlers/weiboSpider/weibo/人民日报/2803301701.csv"),
        ),
        (
            "/raw/mediacrawler/detail_comments_2026-11-29.csv",
            include_str!(
                "../../sample_data/crawlers/mediacrawler/csv/detail_comments_2026-11-29.csv"
            ),
        ),
    ];

    /// The crawler JSON lines files of `sample_data/` (each record is mapped by its keys).
    const JSONL_DIALECTS: &[&str] = &[
        include_str!("../../sample_data/crawlers/nghuyong/user_20261129230000.jsonl"),
        include_str!("../../sample_data/crawlers/nghuyong/comment_20261129230000.jsonl"),
        include_str!("../../sample_data/crawlers/nghuyong/follow_20261129230000.jsonl"),
        include_str!("../../sample_data/crawlers/nghuyong/repost_20261129230000.jsonl"),
        include_str!("../../sample_data/crawlers/nghuyong/tweet_20261129230000.jsonl"),
        include_str!(
            "../../sample_data/crawlers/mediacrawler/jsonl/creator_creators_2026-11-29.jsonl"
        ),
        include_str!(
            "../../sample_data/crawlers/mediacrawler/jsonl/search_comments_2026-11-29.jsonl"
        ),
        include_str!(
            "../../sample_data/crawlers/mediacrawler/jsonl/search_contents_2026-11-29.jsonl"
        ),
    ];

    fn run_csv_at(bytes: &[u8], path: &str) -> Vec<Item> {
        let mut out = Vec::new();
        read_csv(Box::new(io::Cursor::new(bytes.to_vec())), path, &mut |i| {
            out.push(i)
        })
        .unwrap();
        out
    }

    /// A JSON value of any kind but objects (nested objects come from the samples).
    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e12f64..1e12).prop_map(Value::from),
            "[ -~\u{4e00}-\u{4e20}\u{200b}\n]{0,16}".prop_map(Value::String),
            proptest::collection::vec("[0-9a-z,#@]{0,6}", 0..3)
                .prop_map(|v| Value::Array(v.into_iter().map(Value::String).collect())),
        ]
    }

    /// An array element: a leaf, or an object whose keys are canonical fields or not.
    fn json_value() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just("uid".to_string()),
            Just("mid".to_string()),
            Just("note_id".to_string()),
            Just("follower".to_string()),
            "[a-z_]{1,8}",
        ];
        prop_oneof![
            leaf(),
            proptest::collection::btree_map(key, leaf(), 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Every crawler CSV dialect: its header (as the reader sees it, past the BOM), then
        /// rows of about the header's width with arbitrary text, quotes, commas and line
        /// breaks in the fields, so the dialects' own mappings run on rubbish, not only the
        /// field-count check.
        #[test]
        fn csv_dialects_account_for_every_record(
            file in 0..CSV_DIALECTS.len(),
            rows in proptest::collection::vec(
                (0usize..3, proptest::collection::vec("[ -~\u{4e00}-\u{4e20}\t\n\"]{0,10}", 40)),
                0..6,
            ),
        ) {
            let (path, text) = CSV_DIALECTS[file];
            let header = text.trim_start_matches('\u{feff}').lines().next().unwrap();
            let width = header.split(',').count();
            let mut input = format!("{header}\n");
            for (shift, fields) in &rows {
                // One field fewer, as many, or one more than the header.
                let n = (width + shift).saturating_sub(1).min(fields.len());
                input.push_str(&fields[..n].join(","));
                input.push('\n');
            }
            let items = run_csv_at(input.as_bytes(), path);
            prop_assert_eq!(items.len(), csv_records(input.as_bytes()));
            clean_all(&items);
        }

        /// Every crawler JSON lines shape: a sample record's keys, each with a value from any
        /// sample record of that file (nested objects included), an arbitrary value, or left
        /// out. One item per line, and cleaning it does not panic.
        #[test]
        fn jsonl_dialects_map_any_values_without_panic(
            file in 0..JSONL_DIALECTS.len(),
            picks in proptest::collection::vec((0u8..4, 0usize..8, leaf()), 40),
        ) {
            let samples: Vec<serde_json::Map<String, Value>> = JSONL_DIALECTS[file]
                .lines()
                .filter_map(|l| match serde_json::from_str(l) {
                    Ok(Value::Object(m)) => Some(m),
                    _ => None,
                })
                .collect();
            let mut object = serde_json::Map::new();
            for ((key, _), (how, which, value)) in samples[0].iter().zip(picks) {
                match how {
                    0 => {}
                    1 => {
                        object.insert(key.clone(), value);
                    }
                    _ => {
                        let sample = &samples[which % samples.len()];
                        let v = sample.get(key).cloned().unwrap_or(value);
                        object.insert(key.clone(), v);
                    }
                }
            }
            let line = format!("{}\n", Value::Object(object));
            let items = run_jsonl(line.as_bytes());
            prop_assert_eq!(items.len(), 1);
            clean_all(&items);
        }

        #[test]
        fn jsonl_accounts_for_every_nonblank_line(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            // A file opening with `[` is one JSON array (below).
            let first = bytes.iter().find(|b| !b.is_ascii_whitespace() && !b"\xef\xbb\xbf".contains(b));
            prop_assume!(first != Some(&b'['));
            let items = run_jsonl(&bytes);
            let lines = bytes
                .split(|b| *b == b'\n')
                .filter(|l| !String::from_utf8_lossy(l).trim().is_empty())
                .count();
            prop_assert_eq!(items.len(), lines);
            clean_all(&items);
        }

        #[test]
        fn a_json_array_gives_one_item_per_element(
            values in proptest::collection::vec(json_value(), 0..12),
            pretty in any::<bool>(),
        ) {
            let array = Value::Array(values.clone());
            let text = if pretty {
                serde_json::to_string_pretty(&array).unwrap()
            } else {
                array.to_string()
            };
            let items = run_jsonl(text.as_bytes());
            prop_assert_eq!(items.len(), values.len());
            let lines = text.lines().count() as u64;
            for item in &items {
                let line = match item {
                    Item::Record { line, .. } | Item::Rejected { line, .. } => *line,
                    Item::RepeatedHeader { line, .. } => *line,
                };
                prop_assert!(line >= 1 && line <= lines, "line {} of {}", line, lines);
            }
            clean_all(&items);
        }

        #[test]
        fn arbitrary_bytes_after_an_opening_bracket_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        ) {
            let mut input = b"[".to_vec();
            input.extend(bytes);
            let items = run_jsonl(&input);
            // Whatever is not an element is one reject, naming its line.
            for item in &items {
                if let Item::Rejected { line, .. } = item {
                    prop_assert!(*line >= 1);
                }
            }
            clean_all(&items);
        }

        #[test]
        fn jsonl_objects_with_arbitrary_values_clean_without_panic(
            values in proptest::collection::vec("[ -~\\u{4e00}-\\u{4e20}\\t]{0,24}", 14)
        ) {
            let fields = Entity::Posts.fields();
            let object: serde_json::Map<String, Value> = fields
                .iter()
                .zip(&values)
                .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
                .collect();
            let line = format!("{}\n", Value::Object(object));
            let items = run_jsonl(line.as_bytes());
            prop_assert_eq!(items.len(), 1);
            clean_all(&items);
        }

        #[test]
        fn csv_accounts_for_every_record(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let mut input = b"mid,uid,created_at,text,crawl_time\n".to_vec();
            input.extend_from_slice(&bytes);
            let items = run_csv(&input);
            prop_assert_eq!(items.len(), csv_records(&input));
            clean_all(&items);
        }

        #[test]
        fn csv_of_printable_noise_accounts_for_every_record(
            text in "[0-9a-z,\"\\n\\t 万+.:-]{0,512}"
        ) {
            let input = format!("follower,followee,followed_at,crawl_time\n{text}");
            let items = run_csv(input.as_bytes());
            prop_assert_eq!(items.len(), csv_records(input.as_bytes()));
            clean_all(&items);
        }
    }
}

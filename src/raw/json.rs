//! JSON files: JSON lines whose keys are our canonical fields (§1 of the raw-format spec) or a
//! crawler's (nghuyong WeiboSpider, MediaCrawler and weibo-crawler's JSON, each detected per
//! record: [`super::nghuyong`], [`super::mediacrawler`], [`super::weibo_crawler_json`]), a
//! file holding one JSON array (MediaCrawler's `json` option), or records pretty-printed one
//! after another; the last two are read one record at a time, never whole.
//!
//! Invariants: every non-blank JSON line, every element of an array and every record of a
//! stream becomes exactly one [`Item`] (an array or a stream that stops being JSON, one
//! reject for the rest).

use std::io::{self, BufRead};

use serde_json::Value;

use super::mapping::{value_text, Dialect, RawRecord};
use super::mapping_file::{Claim, MappingFile};
use super::{entity_from_fields, excerpt, Item};
use crate::dataset::Reject;

/// Reads a JSON lines file, or a file holding one JSON array of records (MediaCrawler's
/// `json` save option), whatever its line breaks.
/// Returns what the records said the file is (`None` if no record was recognised).
pub fn read_jsonl(
    mut reader: Box<dyn BufRead + Send>,
    layouts: &MappingFile,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Option<Dialect>> {
    let leading = {
        let buf = reader.fill_buf()?;
        buf.iter()
            .position(|b| !b.is_ascii_whitespace() && !b"\xef\xbb\xbf".contains(b))
            .map(|i| buf[i])
    };
    if leading == Some(b'[') {
        return read_json_array(reader, layouts, emit);
    }
    if leading == Some(b'{') && first_record_spans_lines(reader.fill_buf()?) {
        return read_json_stream(reader, layouts, emit);
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
        if let Some(name) = emit_value(value, line, text, layouts, emit) {
            dialect.get_or_insert(name);
        }
    }
}

/// Whether the first record of `buf` (the start of a file) continues past its first line: a
/// stream of pretty-printed records, `{` then a key per line. A first line that is a whole
/// record, or broken JSON of its own, is JSON lines; so is a first line longer than `buf`.
pub(crate) fn first_record_spans_lines(buf: &[u8]) -> bool {
    let buf = buf.strip_prefix(b"\xef\xbb\xbf").unwrap_or(buf);
    let mut lines = buf.split(|&b| b == b'\n');
    let Some(first) = lines.find(|l| !l.iter().all(u8::is_ascii_whitespace)) else {
        return false;
    };
    let ended = first.as_ptr() as usize + first.len() < buf.as_ptr() as usize + buf.len();
    ended && serde_json::from_slice::<Value>(first).is_err_and(|e| e.is_eof())
}

/// Reads a stream of JSON records written one after another with no array around them, each
/// spread over many lines (pretty-printed). Each record is at the line where it ends; a
/// stream that stops being JSON is one `bad_json` reject at the line where it does, for the
/// rest of it, as in an array.
fn read_json_stream(
    mut reader: Box<dyn BufRead + Send>,
    layouts: &MappingFile,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Option<Dialect>> {
    if reader.fill_buf()?.starts_with(b"\xef\xbb\xbf") {
        reader.consume(3);
    }
    let lines = std::rc::Rc::new(std::cell::Cell::new(0));
    let counted = LineCounter {
        inner: reader,
        lines: lines.clone(),
    };
    let mut dialect = None;
    for value in serde_json::Deserializer::from_reader(counted).into_iter::<Value>() {
        match value {
            Ok(value) => {
                let text = value.to_string();
                if let Some(name) = emit_value(value, lines.get() + 1, &text, layouts, emit) {
                    dialect.get_or_insert(name);
                }
            }
            Err(e) if e.is_io() => return Err(io::Error::other(e)),
            Err(e) => {
                emit(Item::Rejected {
                    line: e.line() as u64,
                    entity: None,
                    reason: Reject::BadJson,
                    excerpt: excerpt(&e.to_string()),
                });
                break;
            }
        }
    }
    Ok(dialect)
}

/// One JSON record: a record of the entity its keys (or a crawler's shape) name, or a
/// reject. Returns the name of the shape it was read as.
fn emit_value(
    value: Value,
    line: u64,
    text: &str,
    layouts: &MappingFile,
    emit: &mut dyn FnMut(Item),
) -> Option<Dialect> {
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
    // The mapping file's layouts first: the user declared them for this crawl.
    match layouts.record(&object) {
        Claim::Read((dialect, entity, Ok(record))) => {
            emit(Item::Record {
                line,
                entity,
                record,
            });
            return Some(dialect);
        }
        Claim::Read((_, entity, Err(reason))) => {
            emit(Item::Rejected {
                line,
                entity: Some(entity),
                reason,
                excerpt: excerpt(text.trim_end()),
            });
            return None;
        }
        Claim::Partial(_) => {
            emit(reject(Reject::UnknownFormat));
            return None;
        }
        Claim::None => {}
    }
    // Known crawler shapes first (their keys would not name one of our entities).
    if let Some(records) = super::weibo_crawler_json::map(&object) {
        for (entity, record) in records {
            emit(Item::Record {
                line,
                entity,
                record,
            });
        }
        return Some(Dialect::WeiboCrawlerJson);
    }
    let crawler = super::nghuyong::map(&object)
        .map(|m| (Dialect::NghuyongJsonl, m))
        .or_else(|| super::mediacrawler::map(&object).map(|m| (Dialect::MediacrawlerJsonl, m)));
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
    Some(Dialect::CanonicalJsonl)
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
    layouts: &MappingFile,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Option<Dialect>> {
    use serde::de::{Deserializer, SeqAccess, Visitor};

    struct Elements<'a> {
        emit: &'a mut dyn FnMut(Item),
        layouts: &'a MappingFile,
        lines: std::rc::Rc<std::cell::Cell<u64>>,
        dialect: Option<Dialect>,
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
                if let Some(name) = emit_value(value, line, &text, self.layouts, self.emit) {
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
        layouts,
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
    Ok(elements.dialect.map(Dialect::as_array))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Entity;
    use crate::raw::mapping_file::NONE;

    fn items_jsonl(text: &str) -> (Vec<Item>, Option<Dialect>) {
        let mut out = Vec::new();
        let reader = Box::new(io::Cursor::new(text.as_bytes().to_vec()));
        let dialect = read_jsonl(reader, &NONE, &mut |i| out.push(i)).unwrap();
        (out, dialect)
    }

    #[test]
    fn a_whole_file_json_array_is_read_element_by_element() {
        let sample = include_str!(
            "../../sample_data/crawlers/mediacrawler/json/search_contents_2026-11-29.json"
        );
        let (items, dialect) = items_jsonl(sample);
        assert_eq!(dialect, Some(Dialect::MediacrawlerJson));
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
    fn a_stream_of_pretty_records_reads_as_their_json_lines() {
        let jsonl = concat!(
            include_str!("../../sample_data/crawlers/nghuyong/follow_20261129230000.jsonl"),
            include_str!("../../sample_data/crawlers/nghuyong/tweet_20261129230000.jsonl")
        );
        let pretty: Vec<String> = jsonl
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let value: Value = serde_json::from_str(l).unwrap();
                serde_json::to_string_pretty(&value).unwrap()
            })
            .collect();
        let stream = format!("\u{feff}{}\n", pretty.join("\n"));
        let records = |items: Vec<Item>| -> Vec<(u64, Entity, RawRecord)> {
            items
                .into_iter()
                .map(|i| match i {
                    Item::Record {
                        line,
                        entity,
                        record,
                    } => (line, entity, record),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let (lines, dialect) = items_jsonl(jsonl);
        let (streamed, streamed_dialect) = items_jsonl(&stream);
        assert_eq!(streamed_dialect, dialect);
        let (lines, streamed) = (records(lines), records(streamed));
        assert!(lines.len() >= 4, "{lines:?}");
        let strip = |r: &[(u64, Entity, RawRecord)]| -> Vec<(Entity, RawRecord)> {
            r.iter().map(|(_, e, r)| (*e, r.clone())).collect()
        };
        assert_eq!(strip(&streamed), strip(&lines));
        // Each record at the line its closing brace is on.
        let ends: Vec<u64> = stream
            .lines()
            .enumerate()
            .filter(|(_, l)| l.starts_with('}'))
            .map(|(i, _)| i as u64 + 1)
            .collect();
        let at: Vec<u64> = streamed.iter().map(|(line, ..)| *line).collect();
        assert_eq!(at, ends);

        // Cut short: the records before, then one reject where it stops being JSON.
        let cut = &stream[..stream.len() - 20];
        let (items, _) = items_jsonl(cut);
        let (last, read) = items.split_last().unwrap();
        assert_eq!(read.len(), lines.len() - 1);
        assert!(
            matches!(last, Item::Rejected { reason: Reject::BadJson, line, .. }
                if *line == cut.lines().count() as u64),
            "{last:?}"
        );
        // A JSON lines file whose first line is broken is still read line by line.
        let broken = format!("{{\"uid\": 1,,}}\n{jsonl}");
        let (items, _) = items_jsonl(&broken);
        assert!(matches!(items[0], Item::Rejected { line: 1, .. }));
        assert_eq!(items.len(), lines.len() + 1);
    }

    #[test]
    fn jsonl_detects_entity_per_record() {
        let text = "{\"uid\":\"1\",\"screen_name\":\"a\"}\n\nnot json\n{\"follower\":1,\"followee\":2}\n{\"x\":1}\n[1]\n";
        let mut out = Vec::new();
        read_jsonl(
            Box::new(io::Cursor::new(text.as_bytes().to_vec())),
            &NONE,
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

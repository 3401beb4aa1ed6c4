//! What every dialect reader maps onto, below all of them: the record a reader hands the
//! cleaner ([`RawRecord`]), the mapping of a recognised CSV header ([`Mapped`]), the
//! MediaCrawler columns its row fix-up reads ([`CsvTimes`]), how a JSON value becomes a
//! field's text ([`value_text`]), how a declared value is converted ([`convert`]), and the
//! author's uid from a per-user file's name ([`uid_from_path`]).
//!
//! Invariants: nothing here knows a dialect's names; the dialects (`nghuyong`, `mediacrawler`,
//! `weibo_crawler_csv`, `weibo_crawler_json`, `mapping_file`) import this module and never one another's types, so
//! the readers form no circle (the CSV and JSON readers, `canonical` and `json`, alone call
//! the dialects, to choose among them).

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use serde::Serialize;
use serde_json::Value;

use crate::dataset::{Entity, Reject};

/// What a file was read as: the shape of one crawler (and version range) or of our own
/// formats, or a layout of the run's mapping file. Its name is what reports and `--format`
/// say (docs/formats.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Our CSV with a header (§1).
    CanonicalCsv,
    /// Our JSON lines (§1), and the same records as one JSON array.
    CanonicalJsonl,
    CanonicalJson,
    /// AMiner's `weibo_network.txt`, and its `uidlist.txt`.
    AminerNetwork,
    AminerUidlist,
    /// nghuyong WeiboSpider's JSON lines (current and 2020-2022 mongoexport), or an array.
    NghuyongJsonl,
    NghuyongJson,
    /// MediaCrawler's CSV, JSON lines, and whole-file JSON array.
    MediacrawlerCsv,
    MediacrawlerJsonl,
    MediacrawlerJson,
    /// weibo-crawler's per-user posts CSV, `users.csv` and comments export, and (since
    /// 2026-03) its per-user JSON.
    WeiboCrawlerPosts,
    WeiboCrawlerUsers,
    WeiboCrawlerComments,
    WeiboCrawlerJson,
    /// weiboSpider's per-user posts CSV.
    WeibospiderPosts,
    /// A fork's follow export, `用户id,关注者id,昵称`.
    FollowExport,
    /// dataabc/weibo-search's keyword results CSV.
    WeiboSearch,
    /// A public graph as a MatrixMarket coordinate file, or a plain `src dst` edge list.
    MatrixMarket,
    EdgeList,
    /// A layout of the mapping file (`clean --mapping`), by its name.
    Mapping(&'static str),
}

impl Serialize for Dialect {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Dialect {
    /// Every dialect we ship (a mapping file's layout may not take one of their names).
    pub const BUILT_IN: [Dialect; 19] = [
        Dialect::CanonicalCsv,
        Dialect::CanonicalJsonl,
        Dialect::CanonicalJson,
        Dialect::AminerNetwork,
        Dialect::AminerUidlist,
        Dialect::NghuyongJsonl,
        Dialect::NghuyongJson,
        Dialect::MediacrawlerCsv,
        Dialect::MediacrawlerJsonl,
        Dialect::MediacrawlerJson,
        Dialect::WeiboCrawlerPosts,
        Dialect::WeiboCrawlerUsers,
        Dialect::WeiboCrawlerComments,
        Dialect::WeiboCrawlerJson,
        Dialect::WeibospiderPosts,
        Dialect::FollowExport,
        Dialect::WeiboSearch,
        Dialect::MatrixMarket,
        Dialect::EdgeList,
    ];

    /// The kebab-case name, or the mapping layout's own.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::CanonicalCsv => "canonical-csv",
            Dialect::CanonicalJsonl => "canonical-jsonl",
            Dialect::CanonicalJson => "canonical-json",
            Dialect::AminerNetwork => "aminer-network",
            Dialect::AminerUidlist => "aminer-uidlist",
            Dialect::NghuyongJsonl => "nghuyong-jsonl",
            Dialect::NghuyongJson => "nghuyong-json",
            Dialect::MediacrawlerCsv => "mediacrawler-csv",
            Dialect::MediacrawlerJsonl => "mediacrawler-jsonl",
            Dialect::MediacrawlerJson => "mediacrawler-json",
            Dialect::WeiboCrawlerPosts => "weibo-crawler-posts",
            Dialect::WeiboCrawlerUsers => "weibo-crawler-users",
            Dialect::WeiboCrawlerComments => "weibo-crawler-comments",
            Dialect::WeiboCrawlerJson => "weibo-crawler-json",
            Dialect::WeibospiderPosts => "weibospider-posts",
            Dialect::FollowExport => "follow-export",
            Dialect::WeiboSearch => "weibo-search",
            Dialect::MatrixMarket => "matrix-market",
            Dialect::EdgeList => "edge-list",
            Dialect::Mapping(name) => name,
        }
    }

    /// The same records met as one whole-file JSON array instead of JSON lines.
    pub fn as_array(self) -> Dialect {
        match self {
            Dialect::CanonicalJsonl => Dialect::CanonicalJson,
            Dialect::NghuyongJsonl => Dialect::NghuyongJson,
            Dialect::MediacrawlerJsonl => Dialect::MediacrawlerJson,
            other => other,
        }
    }
}

/// A record as a reader hands it over: canonical fields of one entity, by position. The
/// values share one buffer (one allocation per record, not one per field: cleaning a 1 KB
/// record should not cost fourteen mallocs). Two records are equal when their fields are,
/// however their buffers were filled.
#[derive(Clone, Debug)]
pub struct RawRecord {
    buf: String,
    /// `(start, end)` of each canonical field in `buf`, [`NO_SPAN`] when the input lacks it.
    /// Kept inline (no second allocation per record); only the entity's first `fields` are
    /// used.
    spans: [(u32, u32); MAX_FIELDS],
    fields: u8,
}

/// The most canonical fields an entity has.
pub const MAX_FIELDS: usize = 14;

/// The span of a field the input lacks (no field starts there: buffers are far smaller).
const NO_SPAN: (u32, u32) = (u32::MAX, u32::MAX);

impl Default for RawRecord {
    fn default() -> Self {
        RawRecord {
            buf: String::new(),
            spans: [NO_SPAN; MAX_FIELDS],
            fields: 0,
        }
    }
}

impl PartialEq for RawRecord {
    fn eq(&self, other: &Self) -> bool {
        self.fields == other.fields
            && (0..usize::from(self.fields)).all(|i| self.field(i) == other.field(i))
    }
}

impl Eq for RawRecord {}

impl RawRecord {
    pub fn new(entity: Entity) -> Self {
        RawRecord::with_capacity(entity, 0)
    }

    /// A follows record: `follower` follows `followee`.
    pub fn follow(follower: impl ToString, followee: impl ToString) -> Self {
        let e = Entity::Follows;
        let mut r = RawRecord::new(e);
        r.set(e, "follower", follower.to_string());
        r.set(e, "followee", followee.to_string());
        r
    }

    /// A record whose fields will take about `bytes` bytes: one allocation instead of a
    /// series of regrowths (and copies) as a kilobyte-long row is filled in.
    pub fn with_capacity(entity: Entity, bytes: usize) -> Self {
        RawRecord {
            buf: String::with_capacity(bytes),
            spans: [NO_SPAN; MAX_FIELDS],
            fields: entity.fields().len() as u8,
        }
    }

    /// A record over one row's text, copied once: its fields are then set as spans of it
    /// ([`RawRecord::set_span`]) rather than copied field by field.
    pub fn from_row(entity: Entity, row: &str) -> Self {
        let mut record = RawRecord::with_capacity(entity, row.len());
        record.buf.push_str(row);
        record
    }

    /// Sets canonical field `index` (ignored when out of range) to `range` of the row the
    /// record was made [`from_row`](RawRecord::from_row) with; the range must lie on that
    /// row's character boundaries.
    pub fn set_span(&mut self, index: usize, range: std::ops::Range<usize>) {
        debug_assert!(
            self.buf.is_char_boundary(range.start) && self.buf.is_char_boundary(range.end)
        );
        if index < usize::from(self.fields) {
            self.spans[index] = (range.start as u32, range.end as u32);
        }
    }

    /// Sets canonical field `index` (ignored when out of range).
    pub fn set_index(&mut self, index: usize, value: &str) {
        if index < usize::from(self.fields) {
            let start = self.buf.len() as u32;
            self.buf.push_str(value);
            self.spans[index] = (start, self.buf.len() as u32);
        }
    }

    /// Sets a canonical field by name (ignored when the entity has no such field).
    pub fn set(&mut self, entity: Entity, name: &str, value: impl AsRef<str>) {
        if let Some(i) = entity.field_index(name) {
            self.set_index(i, value.as_ref());
        }
    }

    /// Field `i`, or `None` when the input did not have it.
    pub fn field(&self, i: usize) -> Option<&str> {
        match self.spans.get(i).copied() {
            None | Some(NO_SPAN) => None,
            Some((a, b)) => Some(&self.buf[a as usize..b as usize]),
        }
    }

    /// Field `i`, or `""` when the input did not have it.
    pub fn get(&self, i: usize) -> &str {
        self.field(i).unwrap_or("")
    }
}

/// A recognised header: the entity, the column mapping, fields that come from the path, and
/// whether short rows are normal (weibo-crawler writes fewer fields for original posts than
/// its header names when reposts are kept).
pub struct Mapped {
    pub entity: Entity,
    pub mapping: Vec<Option<usize>>,
    pub constants: Vec<(usize, String)>,
    pub short_rows_ok: bool,
    /// Other column mappings for rows longer than the header, chosen by a row's length and
    /// what a field of it holds (a header that lost a column, rows a later run appended).
    pub wider: Vec<Wider>,
    /// MediaCrawler rows need a fix-up that reads several columns.
    pub mediacrawler: Option<CsvTimes>,
    /// What the file is, for the report.
    pub dialect: Dialect,
    /// What the report should say about the whole file (a uid the path does not give).
    pub warning: Option<String>,
    /// Fields whose values are written otherwise than the cleaner reads them (a mapping
    /// file's times and ids), converted once a row is mapped.
    pub conversions: Vec<(usize, Convert)>,
}

impl Mapped {
    /// A plain column mapping: no path fields, no alternatives.
    pub fn columns(entity: Entity, mapping: Vec<Option<usize>>) -> Mapped {
        Mapped {
            entity,
            mapping,
            constants: Vec::new(),
            short_rows_ok: false,
            wider: Vec::new(),
            mediacrawler: None,
            dialect: Dialect::CanonicalCsv,
            warning: None,
            conversions: Vec::new(),
        }
    }

    /// Header columns mapped through a `(theirs, ours)` table onto `entity`'s fields.
    pub fn table_mapping(
        entity: Entity,
        names: &[String],
        table: &[(&str, &str)],
    ) -> Vec<Option<usize>> {
        names
            .iter()
            .map(|n| {
                table
                    .iter()
                    .find(|(theirs, _)| theirs == n)
                    .and_then(|(_, ours)| entity.field_index(ours))
            })
            .collect()
    }

    /// The mapping for a row of `len` fields whose field `i` is `field(i)`, if the header
    /// allows that row: its own, or the first [`Wider`] of that length whose probe holds.
    pub fn for_row<'a>(
        &self,
        len: usize,
        field: &dyn Fn(usize) -> Option<&'a [u8]>,
    ) -> Option<&[Option<usize>]> {
        if len == self.mapping.len() || (self.short_rows_ok && len < self.mapping.len() && len > 1)
        {
            return Some(&self.mapping);
        }
        self.wider
            .iter()
            .find(|w| w.mapping.len() == len && w.probe.is_none_or(|(i, p)| p.holds(field(i))))
            .map(|w| w.mapping.as_slice())
    }
}

/// A mapping for rows longer than their header, taken when the row's field at a column
/// holds what that layout writes there.
#[derive(Clone, Debug)]
pub struct Wider {
    pub mapping: Vec<Option<usize>>,
    pub probe: Option<(usize, Probe)>,
}

/// What a field must hold for a [`Wider`] mapping to be the row's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// A full time, `YYYY-MM-DD HH:MM[:SS]`.
    Time,
    /// `True` or `False` (Python's).
    Bool,
}

impl Probe {
    fn holds(self, field: Option<&[u8]>) -> bool {
        let Some(text) = field.and_then(|f| std::str::from_utf8(f).ok()) else {
            return false;
        };
        let text = text.trim();
        match self {
            Probe::Time => ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
                .iter()
                .any(|f| chrono::NaiveDateTime::parse_from_str(text, f).is_ok()),
            Probe::Bool => matches!(text, "True" | "False" | "true" | "false"),
        }
    }
}

/// Columns of a MediaCrawler CSV the row fix-up reads.
#[derive(Clone, Copy, Debug)]
pub struct CsvTimes {
    pub create_date_time: Option<usize>,
    pub create_time: Option<usize>,
    pub last_modify_ts: Option<usize>,
    pub parent_comment_id: Option<usize>,
    /// The text, which older versions wrote as the API's HTML.
    pub content: Option<usize>,
    /// A note's id and url: the mid when a spreadsheet mangled the id (`5.2412E+15`).
    pub note_id: Option<usize>,
    pub note_url: Option<usize>,
}

/// A JSON value as a field's text: strings as they are, numbers and booleans written out, a
/// list joined by commas, an object as its JSON; `null` is no value.
pub fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(value_text)
                .collect::<Vec<_>>()
                .join(","),
        ),
        Value::Object(_) => Some(v.to_string()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Canonical field `name` of a record, for the dialect readers' tests.
    pub(crate) fn field(entity: Entity, r: &RawRecord, name: &str) -> Option<String> {
        r.field(entity.field_index(name).unwrap())
            .map(str::to_string)
    }

    /// A JSON object literal, for the crawler-record tests of the dialect readers.
    pub(crate) fn obj(json: &str) -> serde_json::Map<String, Value> {
        match serde_json::from_str(json).unwrap() {
            Value::Object(m) => m,
            _ => unreachable!("not an object: {json}"),
        }
    }

    #[test]
    fn values_become_field_text() {
        let v: Value = serde_json::from_str(r#"[null, "a", 1, true, ["b", null]]"#).unwrap();
        let Value::Array(items) = v else {
            unreachable!()
        };
        let texts: Vec<Option<String>> = items.iter().map(value_text).collect();
        assert_eq!(
            texts,
            [
                None,
                Some("a".into()),
                Some("1".into()),
                Some("true".into()),
                Some("b".into())
            ]
        );
    }
}

/// How a mapped value becomes the text the cleaner reads (a mapping file declares it).
#[derive(Clone, Debug, PartialEq)]
pub enum Convert {
    /// Written as the cleaner reads it already.
    AsWritten,
    /// A time in this `strftime` format: with `%z`, an instant; else Beijing wall time.
    Time(String),
    /// A base62 bid, turned into the numeric mid even when it has only digits.
    Bid,
    /// An id that went through a spreadsheet: exact only up to 15 digits.
    Lossy,
}

/// Applies each field's conversion to `record`; `Err` is the record's reject. A value a
/// conversion cannot read is left as written, for the cleaner to reject with its reason.
pub fn convert(record: &mut RawRecord, conversions: &[(usize, Convert)]) -> Result<(), Reject> {
    for (field, how) in conversions {
        let Some(value) = record.field(*field).map(str::trim) else {
            continue;
        };
        if value.is_empty() {
            continue;
        }
        let converted = match how {
            Convert::AsWritten => None,
            Convert::Time(format) => time(value, format),
            Convert::Bid => crate::field_rules::bid_to_mid(value)
                .ok()
                .map(|m| m.to_string()),
            Convert::Lossy => {
                let digits = value.bytes().filter(u8::is_ascii_digit).count();
                // A spreadsheet keeps 15 significant digits: a longer id may have lost some.
                if digits > 15 || value.contains(['E', 'e']) {
                    return Err(Reject::LossyId);
                }
                None
            }
        };
        if let Some(text) = converted {
            record.set_index(*field, &text);
        }
    }
    Ok(())
}

/// A time written in `format`, as text the cleaner reads: an instant with its offset, or
/// wall time (Beijing's, as every naive crawler time); `None` when it does not fit.
fn time(value: &str, format: &str) -> Option<String> {
    if let Ok(t) = DateTime::parse_from_str(value, format) {
        return Some(t.to_rfc3339());
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(value, format) {
        return Some(t.format("%Y-%m-%d %H:%M:%S").to_string());
    }
    NaiveDate::parse_from_str(value, format)
        .ok()
        .map(|d| d.format("%Y-%m-%d 00:00:00").to_string())
}

/// The author's uid from a posts file's numeric stem (`<uid>.csv`, as both crawlers name
/// them), as a constant field; else none, and a warning for the report: the file's posts
/// then have no author.
pub fn uid_from_path(entity: Entity, path: &str) -> (Vec<(usize, String)>, Option<String>) {
    let name = path.rsplit('/').next().unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        let warning = format!(
            "the file name {name:?} is no uid (the crawler names a user's posts <uid>.csv): \
             its posts have no author"
        );
        return (Vec::new(), Some(warning));
    }
    let constant = entity.field_index("uid").map(|i| (i, stem.to_string()));
    (constant.into_iter().collect(), None)
}

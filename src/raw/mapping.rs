//! What every dialect reader maps onto, below all of them: the mapping of a recognised CSV
//! header ([`Mapped`]), the MediaCrawler columns its row fix-up reads ([`CsvTimes`]), and how a
//! JSON value becomes a field's text ([`value_text`]).
//!
//! Invariants: nothing here knows a dialect's names; the dialects (`canonical`, `nghuyong`,
//! `mediacrawler`, `weibospider`) import this module and never one another's types, so the
//! readers form no circle (`canonical` alone calls the dialects, to choose among them).

use serde_json::Value;

use crate::clean::Entity;

/// A recognised header: the entity, the column mapping, fields that come from the path, and
/// whether short rows are normal (weibo-crawler writes fewer fields for original posts than
/// its header names when reposts are kept).
pub struct Mapped {
    pub entity: Entity,
    pub mapping: Vec<Option<usize>>,
    pub constants: Vec<(usize, String)>,
    pub short_rows_ok: bool,
    /// Other column mappings, chosen by a row's length (a header that lost a column).
    pub wider: Vec<Vec<Option<usize>>>,
    /// MediaCrawler rows need a fix-up that reads several columns.
    pub mediacrawler: Option<CsvTimes>,
    /// What the file is, for the report (`canonical-csv`, `weibospider-posts`, ...).
    pub dialect: &'static str,
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
            dialect: "canonical-csv",
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

    /// The mapping for a row of `len` fields, if the header allows that length.
    pub fn for_len(&self, len: usize) -> Option<&[Option<usize>]> {
        if len == self.mapping.len() || (self.short_rows_ok && len < self.mapping.len() && len > 1)
        {
            return Some(&self.mapping);
        }
        self.wider
            .iter()
            .find(|m| m.len() == len)
            .map(Vec::as_slice)
    }
}

/// Columns of a MediaCrawler CSV the row fix-up reads.
#[derive(Clone, Copy, Debug)]
pub struct CsvTimes {
    pub create_date_time: Option<usize>,
    pub create_time: Option<usize>,
    pub last_modify_ts: Option<usize>,
    pub parent_comment_id: Option<usize>,
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

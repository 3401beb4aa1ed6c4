//! What a namespace already holds of a graph job's output, so that the next `--load` writes
//! only what differs: a marker, `<output>/_load/<name>`, names the night whose output was last
//! loaded into the namespace and the size of every file of that night's committed tables.
//! The next run reads that output back as its base (docs/nightly.md, "Graph outputs across
//! nights").
//!
//! Invariants: the marker is written only once the output it describes is committed, and a
//! base whose files no longer have the recorded sizes (a run without `--load` rewrote them)
//! or are gone is not trusted: the caller then writes everything. The marker names the later
//! of the base's night and the night loaded, since cells of an older night carry an older
//! timestamp and leave the newer ones in front.

use std::collections::BTreeMap;

use crate::dataset::partition;
use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

/// One job's marker: where it lives, and which tables of the output it describes.
#[derive(Clone, Debug)]
pub struct Marker {
    pub at: Location,
    output: Location,
    tables: &'static [&'static str],
}

impl Marker {
    /// The marker `<output>/_load/<name>` over `tables` (folders of `dt=` partitions under
    /// `output`).
    pub fn new(output: &Location, name: &str, tables: &'static [&'static str]) -> Marker {
        Marker {
            at: output.join("_load").join(name),
            output: output.clone(),
            tables,
        }
    }

    /// The night whose output the namespace holds, when the marker exists and every file it
    /// recorded is still there with its size; `None` (logged) otherwise.
    pub fn base(&self, fs: &FileSystems) -> Result<Option<String>> {
        let Some(doc) = self.read(fs)? else {
            return Ok(None);
        };
        let Some(date) = doc["as_of"].as_str().map(String::from) else {
            return Ok(None);
        };
        let recorded: BTreeMap<String, u64> =
            serde_json::from_value(doc["parts"].clone()).unwrap_or_default();
        if recorded.is_empty() || recorded != self.parts(fs, &date)? {
            log::warn!(
                "the output of {date} changed since it was loaded, or is gone (or {} is old): \
                 writing everything",
                self.at
            );
            return Ok(None);
        }
        Ok(Some(date))
    }

    /// The marker's document, when it exists.
    fn read(&self, fs: &FileSystems) -> Result<Option<serde_json::Value>> {
        if !fs.exists(&self.at)? {
            return Ok(None);
        }
        let doc =
            serde_json::from_slice(&fs.read_to_vec(&self.at)?).map_err(|e| Error::BadInput {
                path: self.at.to_string(),
                line: 0,
                reason: format!("reading {}: {e}", self.at),
            })?;
        Ok(Some(doc))
    }

    /// Records `date` (or the base's, when later) with the sizes of its output's files, once
    /// that output is committed.
    pub fn record(&self, fs: &FileSystems, date: &str, base: Option<&str>) -> Result<()> {
        let date = base.map_or(date, |b| b.max(date));
        let doc = serde_json::json!({ "as_of": date, "parts": self.parts(fs, date)? });
        let text = serde_json::to_vec(&doc).map_err(|e| Error::Io {
            op: "encode",
            path: self.at.to_string(),
            source: e.into(),
        })?;
        fs.write_atomic(&self.at, &text)
    }

    /// `<table>/<part>` → size, of the committed output of `date`.
    fn parts(&self, fs: &FileSystems, date: &str) -> Result<BTreeMap<String, u64>> {
        let mut parts = BTreeMap::new();
        for table in self.tables {
            let dir = self.output.join(table).join(&format!("dt={date}"));
            for f in partition::committed_parts(fs, &dir)? {
                let name = f.location.file_name().unwrap_or_default();
                parts.insert(format!("{table}/{name}"), f.len);
            }
        }
        Ok(parts)
    }
}

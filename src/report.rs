//! The per-run report every job produces: a JSON document (`--report FILE`, local or HDFS)
//! and a short human summary on stderr, built from the same values so they cannot disagree.
//!
//! Invariants: a report is written whether the job succeeded or failed (`ok` and `error`
//! say which), and it is written atomically, so cron wrappers that parse it never read half.

use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::Result;
use crate::hdfs::FileSystems;

/// The process's peak resident memory so far (Linux `VmHWM`), for reports and debug logs:
/// operators size machines by it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A job's report under construction.
#[derive(Debug)]
pub struct Report {
    job: String,
    started: Instant,
    started_at: String,
    fields: Map<String, Value>,
}

impl Report {
    pub fn new(job: &str) -> Self {
        Report {
            job: job.to_string(),
            started: Instant::now(),
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            fields: Map::new(),
        }
    }

    /// Sets a top-level field (later sets replace earlier ones).
    pub fn set(&mut self, key: &str, value: impl Serialize) {
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        self.fields.insert(key.to_string(), value);
    }

    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The finished document: job, timing, outcome, then the job's own fields.
    pub fn to_json(&self, error: Option<&str>) -> Value {
        let mut doc = Map::new();
        doc.insert("job".into(), Value::from(self.job.clone()));
        doc.insert("started_at".into(), Value::from(self.started_at.clone()));
        doc.insert(
            "seconds".into(),
            Value::from((self.seconds() * 1000.0).round() / 1000.0),
        );
        if let Some(bytes) = peak_rss_bytes() {
            doc.insert("peak_rss_mb".into(), Value::from(bytes / 1_000_000));
        }
        doc.insert("ok".into(), Value::from(error.is_none()));
        if let Some(e) = error {
            doc.insert("error".into(), Value::from(e));
        }
        for (k, v) in &self.fields {
            doc.insert(k.clone(), v.clone());
        }
        Value::Object(doc)
    }

    /// Writes the JSON report to `url` (a local path or an hdfs:// URL).
    pub fn write(&self, fs: &FileSystems, url: &str, error: Option<&str>) -> Result<()> {
        let location = fs.parse(url)?;
        let mut text = serde_json::to_string_pretty(&self.to_json(error)).unwrap_or_default();
        text.push('\n');
        fs.write_atomic(&location, text.as_bytes())
    }
}

//! Reads that report their cost: a Thrift1 connection to one namespace's tables, and the
//! latency of every call made on it, for `query` and the read paths of the jobs.

use std::time::Instant;

use serde_json::{json, Value};

use super::{Connection, Timeouts};
use crate::error::Result;

/// A connection to the tables of a namespace, and the latency of every call made on it.
pub struct Reads<'a> {
    conn: Connection,
    namespace: &'a str,
    timeouts: Timeouts,
    calls: Vec<Value>,
}

impl<'a> Reads<'a> {
    /// A connection to the gateway `thrift`, reading the tables of `namespace`.
    pub fn connect(thrift: &str, timeouts: Timeouts, namespace: &'a str) -> Result<Reads<'a>> {
        Ok(Reads {
            conn: Connection::connect(thrift, timeouts)?,
            namespace,
            timeouts,
            calls: Vec::new(),
        })
    }

    /// Every call made, in order: `{"call": name, "ms": latency}`.
    pub fn into_calls(self) -> Vec<Value> {
        self.calls
    }

    pub fn namespace(&self) -> &str {
        self.namespace
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Runs one call against the connection and records its latency.
    pub fn timed(
        &mut self,
        name: &str,
        f: &mut dyn FnMut(&mut Connection) -> Result<Value>,
    ) -> Result<Value> {
        let t = Instant::now();
        let v = f(&mut self.conn)?;
        self.calls
            .push(json!({"call": name, "ms": (t.elapsed().as_secs_f64() * 1e6).round() / 1e3}));
        Ok(v)
    }
}

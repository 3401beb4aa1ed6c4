//! HBase through its Thrift gateways: data calls over Thrift1, admin calls over Thrift2.
//!
//! [`Connection`] wraps one Thrift1 socket (buffered binary protocol, the server's default
//! `threadpool` type) with the calls the jobs use: batched puts with an explicit timestamp,
//! row gets, prefix scans and region listings. Each writer of the bulk loader, and each
//! reader (queries, verification), holds a connection of its own.
//! [`admin::Admin`] speaks Thrift2 for namespaces and pre-split table creation.
//!
//! Invariants:
//! - A gateway that refuses, resets or times out a connection yields
//!   [`Error::HbaseUnreachable`] naming the address, never a panic; callers decide whether to
//!   reconnect and retry ([`Error::is_transient`] tells them).
//! - Table names are always namespaced (`ns:table`) on the wire.

pub mod admin;
pub mod hfile;
pub mod layout;
pub mod reads;
pub mod write;

use std::collections::BTreeMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use hbase_thrift::hbase::{
    BatchMutation, HbaseSyncClient, Mutation, THbaseSyncClient, TRowResult, TScan,
};
use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol};
use thrift::transport::{
    ReadHalf, TBufferedReadTransport, TBufferedWriteTransport, TIoChannel, TTcpChannel, WriteHalf,
};

use crate::error::{Error, Result};

/// The Thrift1 gateway of the local cluster.
pub const LOCAL_THRIFT: &str = "127.0.0.1:9090";

/// How long to wait for a gateway: connecting, and any single call.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub connect: Duration,
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            call: Duration::from_secs(120),
        }
    }
}

pub(crate) fn connect_socket(addr: &str, timeouts: Timeouts) -> Result<TcpStream> {
    let unreachable = |reason: String| Error::HbaseUnreachable {
        addr: addr.to_string(),
        reason,
    };
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| unreachable(format!("cannot resolve: {e}")))?
        .collect();
    let mut last = String::from("no address");
    for sa in addrs {
        match TcpStream::connect_timeout(&sa, timeouts.connect) {
            Ok(stream) => {
                let setup = stream
                    .set_read_timeout(Some(timeouts.call))
                    .and_then(|_| stream.set_write_timeout(Some(timeouts.call)))
                    .and_then(|_| stream.set_nodelay(true));
                return setup
                    .map(|_| stream)
                    .map_err(|e| unreachable(e.to_string()));
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(unreachable(last))
}

/// Maps a Thrift failure: transport failures mean the gateway stopped answering.
pub(crate) fn thrift_error(addr: &str, op: &'static str, table: &str, e: thrift::Error) -> Error {
    match e {
        thrift::Error::Transport(t) => Error::HbaseUnreachable {
            addr: addr.to_string(),
            reason: format!("{op} on {table}: {}", t.message),
        },
        thrift::Error::User(u) => Error::Hbase {
            op,
            table: table.to_string(),
            // Server errors arrive with a Java stack trace; the first line says what happened.
            reason: u.to_string().lines().next().unwrap_or_default().to_string(),
        },
        other => Error::Hbase {
            op,
            table: table.to_string(),
            reason: other.to_string(),
        },
    }
}

type Client = HbaseSyncClient<
    TBinaryInputProtocol<TBufferedReadTransport<ReadHalf<TTcpChannel>>>,
    TBinaryOutputProtocol<TBufferedWriteTransport<WriteHalf<TTcpChannel>>>,
>;

/// One cell as read back: value and timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub value: Vec<u8>,
    pub timestamp: i64,
}

/// One row as read back, cells keyed by `family:qualifier`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Row {
    pub key: Vec<u8>,
    pub cells: BTreeMap<Vec<u8>, Cell>,
}

impl Row {
    pub fn get(&self, column: &str) -> Option<&[u8]> {
        self.cells
            .get(column.as_bytes())
            .map(|c| c.value.as_slice())
    }
}

fn row_from_thrift(r: TRowResult) -> Row {
    let mut cells = BTreeMap::new();
    for (name, cell) in r.columns.unwrap_or_default() {
        cells.insert(
            name,
            Cell {
                value: cell.value.unwrap_or_default(),
                timestamp: cell.timestamp.unwrap_or_default(),
            },
        );
    }
    for col in r.sorted_columns.unwrap_or_default() {
        if let (Some(name), Some(cell)) = (col.column_name, col.cell) {
            cells.insert(
                name,
                Cell {
                    value: cell.value.unwrap_or_default(),
                    timestamp: cell.timestamp.unwrap_or_default(),
                },
            );
        }
    }
    Row {
        key: r.row.unwrap_or_default(),
        cells,
    }
}

/// A row to write: key and `(family:qualifier, value)` cells.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Put {
    pub key: Vec<u8>,
    pub cells: Vec<(Vec<u8>, Vec<u8>)>,
    /// Columns whose cells at or before the write's timestamp go: the record the row is
    /// written from has no value there (a re-crawl that lost a field), so an older night's
    /// value must not stand (docs/hbase-layout.md, "Columns a newer record lacks").
    pub deletes: Vec<Vec<u8>>,
}

impl Put {
    pub fn new(key: impl Into<Vec<u8>>) -> Self {
        Put {
            key: key.into(),
            cells: Vec::new(),
            deletes: Vec::new(),
        }
    }

    pub fn cell(mut self, column: &str, value: impl Into<Vec<u8>>) -> Self {
        self.cells.push((column.as_bytes().to_vec(), value.into()));
        self
    }

    /// Marks `column` as having no value in this row's record.
    pub fn delete(mut self, column: &str) -> Self {
        self.deletes.push(column.as_bytes().to_vec());
        self
    }

    /// The value cells, then the delete markers (empty values), with their HBase types.
    pub fn written(&self) -> impl Iterator<Item = (&[u8], &[u8], u8)> {
        let cells = self
            .cells
            .iter()
            .map(|(c, v)| (c.as_slice(), v.as_slice(), hfile::TYPE_PUT));
        let deletes = self
            .deletes
            .iter()
            .map(|c| (c.as_slice(), &[][..], hfile::TYPE_DELETE_COLUMN));
        cells.chain(deletes)
    }

    /// Bytes this put carries (key + columns + values), for throughput figures.
    pub fn payload_bytes(&self) -> usize {
        self.key.len()
            + self
                .cells
                .iter()
                .map(|(c, v)| c.len() + v.len())
                .sum::<usize>()
    }

    fn to_thrift(&self) -> BatchMutation {
        let mutations: Vec<Mutation> = self
            .cells
            .iter()
            .map(|(column, value)| Mutation {
                is_delete: Some(false),
                column: Some(column.clone()),
                value: Some(value.clone()),
                write_to_w_a_l: Some(true),
            })
            // `mutateRowsTs` makes a delete `addColumns(family, qualifier, ts)`: every
            // version at or before the write's timestamp, as the HFile marker does.
            .chain(self.deletes.iter().map(|column| Mutation {
                is_delete: Some(true),
                column: Some(column.clone()),
                value: None,
                write_to_w_a_l: Some(true),
            }))
            .collect();
        BatchMutation::new(self.key.clone(), mutations)
    }
}

/// A region of a table as the gateway reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub start_key: Vec<u8>,
    pub end_key: Vec<u8>,
    pub name: Vec<u8>,
    pub server: String,
}

/// One Thrift1 connection.
pub struct Connection {
    addr: String,
    client: Client,
}

impl Connection {
    pub fn connect(addr: &str, timeouts: Timeouts) -> Result<Connection> {
        let stream = connect_socket(addr, timeouts)?;
        let (r, w) = TTcpChannel::with_stream(stream)
            .split()
            .map_err(|e| thrift_error(addr, "connect", "-", e))?;
        let client = HbaseSyncClient::new(
            TBinaryInputProtocol::new(TBufferedReadTransport::new(r), true),
            TBinaryOutputProtocol::new(TBufferedWriteTransport::new(w), true),
        );
        Ok(Connection {
            addr: addr.to_string(),
            client,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn err(&self, op: &'static str, table: &str) -> impl Fn(thrift::Error) -> Error + '_ {
        let table = table.to_string();
        move |e| thrift_error(&self.addr, op, &table, e)
    }

    /// Names of all tables, `ns:table` for tables outside the default namespace.
    pub fn table_names(&mut self) -> Result<Vec<String>> {
        let names = self.client.get_table_names();
        let names = names.map_err(self.err("getTableNames", "-"))?;
        Ok(names
            .into_iter()
            .map(|n| String::from_utf8_lossy(&n).into_owned())
            .collect())
    }

    /// The regions of a table, in key order.
    pub fn regions(&mut self, table: &str) -> Result<Vec<Region>> {
        let regions = self.client.get_table_regions(table.as_bytes().to_vec());
        let mut regions: Vec<Region> = regions
            .map_err(self.err("getTableRegions", table))?
            .into_iter()
            .map(|r| Region {
                start_key: r.start_key.unwrap_or_default(),
                end_key: r.end_key.unwrap_or_default(),
                name: r.name.unwrap_or_default(),
                server: String::from_utf8_lossy(&r.server_name.unwrap_or_default()).into_owned(),
            })
            .collect();
        if regions.is_empty() && !self.table_names()?.iter().any(|t| t == table) {
            return Err(Error::Hbase {
                op: "getTableRegions",
                table: table.to_string(),
                reason: "no such table".into(),
            });
        }
        regions.sort_by(|a, b| a.start_key.cmp(&b.start_key));
        Ok(regions)
    }

    /// Writes a batch of rows in one `mutateRowsTs` call (one `Table.put(List)` on the
    /// server). Every cell gets `timestamp`, so rewriting the same batch replaces the same
    /// cells instead of adding versions. Borrows the rows, so a caller can retry the same
    /// batch without keeping a copy of it.
    pub fn put(&mut self, table: &str, rows: &[Put], timestamp: i64) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let batch = rows.iter().map(Put::to_thrift).collect();
        let res = self.client.mutate_rows_ts(
            table.as_bytes().to_vec(),
            batch,
            timestamp,
            BTreeMap::new(),
        );
        res.map_err(self.err("mutateRowsTs", table))
    }

    /// One row, or `None` if it has no cells.
    pub fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Row>> {
        let rows = self
            .client
            .get_row(table.as_bytes().to_vec(), key.to_vec(), BTreeMap::new());
        let rows = rows.map_err(self.err("getRow", table))?;
        Ok(rows
            .into_iter()
            .map(row_from_thrift)
            .find(|r| !r.cells.is_empty()))
    }

    /// The rows of `keys` that exist, in one call.
    pub fn get_rows(&mut self, table: &str, keys: &[Vec<u8>]) -> Result<Vec<Row>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .client
            .get_rows(table.as_bytes().to_vec(), keys.to_vec(), BTreeMap::new());
        let rows = rows.map_err(self.err("getRows", table))?;
        Ok(rows
            .into_iter()
            .map(row_from_thrift)
            .filter(|r| !r.cells.is_empty())
            .collect())
    }

    /// Each column family of `table` with its `VERSIONS`.
    pub fn family_versions(&mut self, table: &str) -> Result<BTreeMap<String, i32>> {
        let families = self
            .client
            .get_column_descriptors(table.as_bytes().to_vec())
            .map_err(self.err("getColumnDescriptors", table))?;
        Ok(families
            .into_iter()
            .map(|(name, d)| {
                // Thrift1 names a family `name:`.
                let name = String::from_utf8_lossy(&name);
                let name = name.trim_end_matches(':').to_string();
                (name, d.max_versions.unwrap_or(1))
            })
            .collect())
    }

    /// Rows whose key starts with `prefix`, in key order, at most `limit` of them.
    pub fn scan_prefix(&mut self, table: &str, prefix: &[u8], limit: usize) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        self.scan_with(table, prefix, |row| {
            out.push(row);
            out.len() < limit
        })?;
        Ok(out)
    }

    /// Visits rows whose key starts with `prefix` (all rows for an empty prefix) in key order
    /// until `visit` returns false. Fetches 1,000 rows per round trip.
    pub fn scan_with(
        &mut self,
        table: &str,
        prefix: &[u8],
        mut visit: impl FnMut(Row) -> bool,
    ) -> Result<()> {
        let id = if prefix.is_empty() {
            self.client.scanner_open(
                table.as_bytes().to_vec(),
                Vec::new(),
                Vec::new(),
                BTreeMap::new(),
            )
        } else {
            self.client.scanner_open_with_prefix(
                table.as_bytes().to_vec(),
                prefix.to_vec(),
                Vec::new(),
                BTreeMap::new(),
            )
        };
        let id = id.map_err(self.err("scannerOpen", table))?;
        let result = (|| loop {
            let batch = self.client.scanner_get_list(id, 1000);
            let batch = batch.map_err(self.err("scannerGetList", table))?;
            if batch.is_empty() {
                return Ok(());
            }
            for r in batch {
                if !visit(row_from_thrift(r)) {
                    return Ok(());
                }
            }
        })();
        let closed = self.client.scanner_close(id);
        result?;
        closed.map_err(self.err("scannerClose", table))
    }

    /// The last row (in key order) whose key starts with `prefix`, by a reversed scan: the
    /// newest day of a table keyed by day, without reading the days before it.
    pub fn last_with_prefix(&mut self, table: &str, prefix: &[u8]) -> Result<Option<Row>> {
        // A reversed scan starts at its start row and runs down to its stop row (excluded):
        // the prefix followed by 0xff bytes is past every key our tables put under it.
        let mut start = prefix.to_vec();
        start.extend_from_slice(&[0xff; 16]);
        // Every field spelt out: the crate's `TScan::default()` sets them all (an empty filter
        // string, timestamp 0), and the gateway rejects or obeys each one that is set.
        let scan = TScan {
            start_row: Some(start),
            stop_row: Some(prefix.to_vec()),
            timestamp: None,
            columns: None,
            caching: Some(1),
            filter_string: None,
            batch_size: None,
            sort_columns: None,
            reversed: Some(true),
            cache_blocks: None,
        };
        let id = self
            .client
            .scanner_open_with_scan(table.as_bytes().to_vec(), scan, BTreeMap::new())
            .map_err(self.err("scannerOpenWithScan", table))?;
        let got = self.client.scanner_get_list(id, 1);
        let closed = self.client.scanner_close(id);
        let got = got.map_err(self.err("scannerGetList", table))?;
        closed.map_err(self.err("scannerClose", table))?;
        Ok(got
            .into_iter()
            .map(row_from_thrift)
            .find(|r| r.key.starts_with(prefix)))
    }

    /// Counts rows (and cells) of a table by a full scan.
    pub fn count_rows(&mut self, table: &str) -> Result<u64> {
        let mut n = 0u64;
        self.scan_with(table, &[], |_| {
            n += 1;
            true
        })?;
        Ok(n)
    }
}

impl Error {
    /// Whether retrying the same call on a fresh connection may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::HbaseUnreachable { .. })
    }
}

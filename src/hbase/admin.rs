//! The few admin calls Thrift1 lacks, spoken to HBase's Thrift2 gateway (`THBaseService`).
//!
//! Thrift1's `createTable` takes no split keys and Thrift1 knows nothing of namespaces, yet a
//! bulk load needs a namespace and tables pre-split over the hash space. Thrift2 has both
//! (`createNamespace`, `createTable(desc, splitKeys)`); its IDL ships inside the `hbase-thrift`
//! Maven jar (`org/apache/hadoop/hbase/thrift2/hbase.thrift`). The `hbase-thrift` crate only
//! carries Thrift1, so this module encodes the handful of Thrift2 messages itself with the
//! `thrift` crate's binary protocol, field ids taken from that IDL. One data call is here too,
//! a `get` of every version of a row (the inbox's feeds), which Thrift1 cannot make in one
//! call. Everything else (puts, gets, scans, `getTableRegions`) goes through Thrift1.
//!
//! Invariant: every call reads its reply to the end, so a connection stays usable after a
//! server-side exception (`TIOError`) is returned as an error.

use thrift::protocol::{
    TBinaryInputProtocol, TBinaryOutputProtocol, TFieldIdentifier, TInputProtocol, TListIdentifier,
    TMessageIdentifier, TMessageType, TOutputProtocol, TStructIdentifier, TType,
};
use thrift::transport::{
    ReadHalf, TBufferedReadTransport, TBufferedWriteTransport, TIoChannel, TTcpChannel, WriteHalf,
};

use super::{connect_socket, thrift_error, Timeouts};
use crate::error::{Error, Result};

/// `TCompressionAlgorithm` of the Thrift2 IDL.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gz,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    fn thrift_value(self) -> i32 {
        match self {
            Compression::Gz => 1,
            Compression::None => 2,
            Compression::Snappy => 3,
            Compression::Lz4 => 4,
            Compression::Zstd => 6,
        }
    }

    /// The name Thrift1's `ColumnDescriptor.compression` reports.
    pub fn hbase_name(self) -> &'static str {
        match self {
            Compression::None => "NONE",
            Compression::Gz => "GZ",
            Compression::Snappy => "SNAPPY",
            Compression::Lz4 => "LZ4",
            Compression::Zstd => "ZSTD",
        }
    }
}

/// One column family of a table to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilySpec {
    pub name: String,
    pub max_versions: i32,
    pub compression: Compression,
    /// Seconds; `None` keeps cells forever.
    pub ttl_seconds: Option<i32>,
}

impl FamilySpec {
    pub fn new(name: &str) -> Self {
        FamilySpec {
            name: name.to_string(),
            max_versions: 1,
            compression: Compression::None,
            ttl_seconds: None,
        }
    }

    pub fn versions(mut self, n: i32) -> Self {
        self.max_versions = n;
        self
    }

    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }
}

/// A table to create: `namespace:name` with its families.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSpec {
    pub namespace: String,
    pub name: String,
    pub families: Vec<FamilySpec>,
}

impl TableSpec {
    /// The `ns:table` form Thrift1 and happybase use.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.namespace, self.name)
    }
}

/// One version of a cell: `(family:qualifier, timestamp, value)`.
pub type VersionedCell = (Vec<u8>, i64, Vec<u8>);

type In = TBinaryInputProtocol<TBufferedReadTransport<ReadHalf<TTcpChannel>>>;
type Out = TBinaryOutputProtocol<TBufferedWriteTransport<WriteHalf<TTcpChannel>>>;

/// A connection to the Thrift2 gateway for admin calls.
pub struct Admin {
    addr: String,
    input: In,
    output: Out,
    seq: i32,
}

impl Admin {
    pub fn connect(addr: &str, timeouts: Timeouts) -> Result<Admin> {
        let stream = connect_socket(addr, timeouts)?;
        let (r, w) = TTcpChannel::with_stream(stream)
            .split()
            .map_err(|e| thrift_error(addr, "connect", "-", e))?;
        Ok(Admin {
            addr: addr.to_string(),
            input: TBinaryInputProtocol::new(TBufferedReadTransport::new(r), true),
            output: TBinaryOutputProtocol::new(TBufferedWriteTransport::new(w), true),
            seq: 0,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// All namespace names.
    pub fn list_namespaces(&mut self) -> Result<Vec<String>> {
        self.call(
            "listNamespaces",
            "-",
            |_| Ok(()),
            |i| {
                let list = i.read_list_begin()?;
                let mut out = Vec::with_capacity(list.size.max(0) as usize);
                for _ in 0..list.size {
                    out.push(i.read_string()?);
                }
                i.read_list_end()?;
                Ok(out)
            },
        )
    }

    /// Creates the namespace unless it exists. Returns whether it was created.
    pub fn ensure_namespace(&mut self, namespace: &str) -> Result<bool> {
        if self.list_namespaces()?.iter().any(|n| n == namespace) {
            return Ok(false);
        }
        self.call_void("createNamespace", namespace, |o| {
            o.write_field_begin(&TFieldIdentifier::new("namespaceDesc", TType::Struct, 1))?;
            o.write_struct_begin(&TStructIdentifier::new("TNamespaceDescriptor"))?;
            o.write_field_begin(&TFieldIdentifier::new("name", TType::String, 1))?;
            o.write_string(namespace)?;
            o.write_field_end()?;
            o.write_field_stop()?;
            o.write_struct_end()?;
            o.write_field_end()
        })?;
        Ok(true)
    }

    pub fn table_exists(&mut self, namespace: &str, table: &str) -> Result<bool> {
        let full = format!("{namespace}:{table}");
        self.call(
            "tableExists",
            &full,
            |o| write_table_name_field(o, 1, namespace, table),
            |i| i.read_bool(),
        )
    }

    /// Creates a table with the given split keys (N keys make N+1 regions).
    pub fn create_table(&mut self, spec: &TableSpec, split_keys: &[Vec<u8>]) -> Result<()> {
        self.call_void("createTable", &spec.full_name(), |o| {
            o.write_field_begin(&TFieldIdentifier::new("desc", TType::Struct, 1))?;
            o.write_struct_begin(&TStructIdentifier::new("TTableDescriptor"))?;
            write_table_name_field(o, 1, &spec.namespace, &spec.name)?;
            o.write_field_begin(&TFieldIdentifier::new("columns", TType::List, 2))?;
            o.write_list_begin(&TListIdentifier::new(
                TType::Struct,
                spec.families.len() as i32,
            ))?;
            for family in &spec.families {
                write_family(o, family)?;
            }
            o.write_list_end()?;
            o.write_field_end()?;
            o.write_field_stop()?;
            o.write_struct_end()?;
            o.write_field_end()?;
            if !split_keys.is_empty() {
                o.write_field_begin(&TFieldIdentifier::new("splitKeys", TType::List, 2))?;
                o.write_list_begin(&TListIdentifier::new(
                    TType::String,
                    split_keys.len() as i32,
                ))?;
                for key in split_keys {
                    o.write_bytes(key)?;
                }
                o.write_list_end()?;
                o.write_field_end()?;
            }
            Ok(())
        })
    }

    pub fn disable_table(&mut self, namespace: &str, table: &str) -> Result<()> {
        let full = format!("{namespace}:{table}");
        self.call_void("disableTable", &full, |o| {
            write_table_name_field(o, 1, namespace, table)
        })
    }

    pub fn delete_table(&mut self, namespace: &str, table: &str) -> Result<()> {
        let full = format!("{namespace}:{table}");
        self.call_void("deleteTable", &full, |o| {
            write_table_name_field(o, 1, namespace, table)
        })
    }

    /// Disables and deletes a table if it exists.
    pub fn drop_table(&mut self, namespace: &str, table: &str) -> Result<bool> {
        if !self.table_exists(namespace, table)? {
            return Ok(false);
        }
        self.disable_table(namespace, table)?;
        self.delete_table(namespace, table)?;
        Ok(true)
    }

    /// Up to `max_versions` versions of every cell of one row, through Thrift2's `get` (Thrift1
    /// reads one version per cell of a row): `(family:qualifier, timestamp, value)` in
    /// column order, newest version first. The only data call here; the inbox's feeds need it.
    pub fn get_versions(
        &mut self,
        table: &str,
        row: &[u8],
        max_versions: i32,
    ) -> Result<Vec<VersionedCell>> {
        self.call(
            "get",
            table,
            |o| {
                o.write_field_begin(&TFieldIdentifier::new("table", TType::String, 1))?;
                o.write_bytes(table.as_bytes())?;
                o.write_field_end()?;
                o.write_field_begin(&TFieldIdentifier::new("tget", TType::Struct, 2))?;
                o.write_struct_begin(&TStructIdentifier::new("TGet"))?;
                o.write_field_begin(&TFieldIdentifier::new("row", TType::String, 1))?;
                o.write_bytes(row)?;
                o.write_field_end()?;
                o.write_field_begin(&TFieldIdentifier::new("maxVersions", TType::I32, 5))?;
                o.write_i32(max_versions)?;
                o.write_field_end()?;
                o.write_field_stop()?;
                o.write_struct_end()?;
                o.write_field_end()
            },
            read_result_cells,
        )
    }

    fn call_void(
        &mut self,
        method: &'static str,
        target: &str,
        write_args: impl FnOnce(&mut dyn TOutputProtocol) -> thrift::Result<()>,
    ) -> Result<()> {
        self.call_inner(
            method,
            target,
            write_args,
            None::<fn(&mut dyn TInputProtocol) -> _>,
        )
        .map(|_: Option<()>| ())
    }

    fn call<T>(
        &mut self,
        method: &'static str,
        target: &str,
        write_args: impl FnOnce(&mut dyn TOutputProtocol) -> thrift::Result<()>,
        read_success: impl FnOnce(&mut dyn TInputProtocol) -> thrift::Result<T>,
    ) -> Result<T> {
        match self.call_inner(method, target, write_args, Some(read_success))? {
            Some(v) => Ok(v),
            None => Err(Error::Hbase {
                op: method,
                table: target.to_string(),
                reason: "the reply carried no result".into(),
            }),
        }
    }

    /// Sends one call and reads its reply: field 0 is the result, field 1 a `TIOError`.
    fn call_inner<T>(
        &mut self,
        method: &'static str,
        target: &str,
        write_args: impl FnOnce(&mut dyn TOutputProtocol) -> thrift::Result<()>,
        read_success: Option<impl FnOnce(&mut dyn TInputProtocol) -> thrift::Result<T>>,
    ) -> Result<Option<T>> {
        self.seq += 1;
        let seq = self.seq;
        let addr = self.addr.clone();
        let wrap = |e: thrift::Error| thrift_error(&addr, method, target, e);
        let o: &mut dyn TOutputProtocol = &mut self.output;
        (|| -> thrift::Result<()> {
            o.write_message_begin(&TMessageIdentifier::new(method, TMessageType::Call, seq))?;
            o.write_struct_begin(&TStructIdentifier::new(format!("{method}_args")))?;
            write_args(o)?;
            o.write_field_stop()?;
            o.write_struct_end()?;
            o.write_message_end()?;
            o.flush()
        })()
        .map_err(wrap)?;

        let i: &mut dyn TInputProtocol = &mut self.input;
        let reply = i.read_message_begin().map_err(wrap)?;
        if reply.message_type == TMessageType::Exception {
            let app = thrift::Error::read_application_error_from_in_protocol(i).map_err(wrap)?;
            i.read_message_end().map_err(wrap)?;
            return Err(wrap(thrift::Error::Application(app)));
        }
        let mut result = None;
        let mut io_error: Option<String> = None;
        let mut read_success = read_success;
        (|| -> thrift::Result<()> {
            i.read_struct_begin()?;
            loop {
                let field = i.read_field_begin()?;
                match (field.field_type, field.id) {
                    (TType::Stop, _) => break,
                    (_, Some(0)) if read_success.is_some() => {
                        let read = read_success.take().expect("checked is_some");
                        result = Some(read(i)?);
                    }
                    (TType::Struct, Some(1)) => io_error = Some(read_error_message(i)?),
                    (ty, _) => i.skip(ty)?,
                }
                i.read_field_end()?;
            }
            i.read_struct_end()?;
            i.read_message_end()
        })()
        .map_err(wrap)?;
        if let Some(message) = io_error {
            // Server errors arrive with a Java stack trace; the first line says what happened.
            let first_line = message.lines().next().unwrap_or_default().to_string();
            return Err(Error::Hbase {
                op: method,
                table: target.to_string(),
                reason: first_line,
            });
        }
        Ok(result)
    }
}

fn write_table_name_field(
    o: &mut dyn TOutputProtocol,
    id: i16,
    namespace: &str,
    table: &str,
) -> thrift::Result<()> {
    o.write_field_begin(&TFieldIdentifier::new("tableName", TType::Struct, id))?;
    o.write_struct_begin(&TStructIdentifier::new("TTableName"))?;
    o.write_field_begin(&TFieldIdentifier::new("ns", TType::String, 1))?;
    o.write_bytes(namespace.as_bytes())?;
    o.write_field_end()?;
    o.write_field_begin(&TFieldIdentifier::new("qualifier", TType::String, 2))?;
    o.write_bytes(table.as_bytes())?;
    o.write_field_end()?;
    o.write_field_stop()?;
    o.write_struct_end()?;
    o.write_field_end()
}

fn write_family(o: &mut dyn TOutputProtocol, family: &FamilySpec) -> thrift::Result<()> {
    o.write_struct_begin(&TStructIdentifier::new("TColumnFamilyDescriptor"))?;
    o.write_field_begin(&TFieldIdentifier::new("name", TType::String, 1))?;
    o.write_bytes(family.name.as_bytes())?;
    o.write_field_end()?;
    o.write_field_begin(&TFieldIdentifier::new("compressionType", TType::I32, 6))?;
    o.write_i32(family.compression.thrift_value())?;
    o.write_field_end()?;
    o.write_field_begin(&TFieldIdentifier::new("maxVersions", TType::I32, 10))?;
    o.write_i32(family.max_versions)?;
    o.write_field_end()?;
    if let Some(ttl) = family.ttl_seconds {
        o.write_field_begin(&TFieldIdentifier::new("timeToLive", TType::I32, 13))?;
        o.write_i32(ttl)?;
        o.write_field_end()?;
    }
    o.write_field_stop()?;
    o.write_struct_end()
}

/// Reads a `TResult` struct: its `columnValues` as `(family:qualifier, timestamp, value)`.
fn read_result_cells(i: &mut dyn TInputProtocol) -> thrift::Result<Vec<VersionedCell>> {
    let mut cells = Vec::new();
    i.read_struct_begin()?;
    loop {
        let field = i.read_field_begin()?;
        match (field.field_type, field.id) {
            (TType::Stop, _) => break,
            (TType::List, Some(2)) => {
                let list = i.read_list_begin()?;
                for _ in 0..list.size {
                    cells.push(read_column_value(i)?);
                }
                i.read_list_end()?;
            }
            // The row, binary: the crate's `skip` would read it as UTF-8.
            (TType::String, _) => drop(i.read_bytes()?),
            (ty, _) => i.skip(ty)?,
        }
        i.read_field_end()?;
    }
    i.read_struct_end()?;
    Ok(cells)
}

/// Reads a `TColumnValue` struct: family (1), qualifier (2), value (3), timestamp (4).
fn read_column_value(i: &mut dyn TInputProtocol) -> thrift::Result<VersionedCell> {
    let (mut family, mut qualifier, mut value, mut ts) = (Vec::new(), Vec::new(), Vec::new(), 0);
    i.read_struct_begin()?;
    loop {
        let field = i.read_field_begin()?;
        match (field.field_type, field.id) {
            (TType::Stop, _) => break,
            (TType::String, Some(1)) => family = i.read_bytes()?,
            (TType::String, Some(2)) => qualifier = i.read_bytes()?,
            (TType::String, Some(3)) => value = i.read_bytes()?,
            (TType::I64, Some(4)) => ts = i.read_i64()?,
            (TType::String, _) => drop(i.read_bytes()?),
            (ty, _) => i.skip(ty)?,
        }
        i.read_field_end()?;
    }
    i.read_struct_end()?;
    family.push(b':');
    family.extend_from_slice(&qualifier);
    Ok((family, ts, value))
}

/// Reads a `TIOError` struct and returns its message.
fn read_error_message(i: &mut dyn TInputProtocol) -> thrift::Result<String> {
    let mut message = String::from("unknown server error");
    i.read_struct_begin()?;
    loop {
        let field = i.read_field_begin()?;
        match (field.field_type, field.id) {
            (TType::Stop, _) => break,
            (TType::String, Some(1)) => message = i.read_string()?,
            (ty, _) => i.skip(ty)?,
        }
        i.read_field_end()?;
    }
    i.read_struct_end()?;
    Ok(message)
}

/// The default admin (Thrift2) address for a Thrift1 address: same host, port 9091.
pub fn default_admin_addr(thrift1: &str) -> String {
    let host = thrift1.rsplit_once(':').map_or(thrift1, |(h, _)| h);
    format!("{host}:9091")
}

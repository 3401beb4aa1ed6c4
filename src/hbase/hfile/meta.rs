//! The file info block and the fixed trailer.
//!
//! The file info is `PBUF` then a length-delimited `FileInfoProto` of name/value pairs,
//! sorted by name as unsigned bytes (HBase keeps them in a `TreeMap`). The trailer is the
//! magic `TRABLK"$`, a length-delimited `FileTrailerProto`, zeros up to 4,092 bytes, and
//! the version `(minor << 24) | major` = `0x03000003`. The messages are HBase's
//! `HFile.proto` and `HBase.proto`, declared here with `prost`'s derive.

use std::collections::BTreeMap;

use prost::Message;

use super::block::TRAILER_MAGIC;

/// The trailer's size in HFile v3.
pub const TRAILER_SIZE: usize = 4096;

/// Major version 3, minor version 3 (`HFileReaderImpl.MAX_MINOR_VERSION`).
pub const VERSION: u32 = (3 << 24) | 3;

/// `Compression.Algorithm.NONE`'s ordinal.
pub const COMPRESSION_NONE: u32 = 2;

/// The comparator name HBase 2 writes for `CellComparatorImpl` (its HBase 1 name, which
/// every reader since 1.x understands).
pub const COMPARATOR: &str = "org.apache.hadoop.hbase.KeyValue$KVComparator";

/// Protobuf's magic prefix for HBase metadata.
pub const PB_MAGIC: &[u8; 4] = b"PBUF";

/// File info names (`HFileInfo`, `HFileWriterImpl`, `HStoreFile`).
pub mod key {
    pub const LASTKEY: &[u8] = b"hfile.LASTKEY";
    pub const AVG_KEY_LEN: &[u8] = b"hfile.AVG_KEY_LEN";
    pub const AVG_VALUE_LEN: &[u8] = b"hfile.AVG_VALUE_LEN";
    pub const CREATE_TIME_TS: &[u8] = b"hfile.CREATE_TIME_TS";
    pub const KEY_VALUE_VERSION: &[u8] = b"KEY_VALUE_VERSION";
    pub const MAX_MEMSTORE_TS_KEY: &[u8] = b"MAX_MEMSTORE_TS_KEY";
    pub const TIMERANGE: &[u8] = b"TIMERANGE";
    pub const EARLIEST_PUT_TS: &[u8] = b"EARLIEST_PUT_TS";
    pub const BULKLOAD_TIMESTAMP: &[u8] = b"BULKLOAD_TIMESTAMP";
    pub const BULKLOAD_SOURCE_TASK: &[u8] = b"BULKLOAD_SOURCE_TASK";
    pub const MAJOR_COMPACTION_KEY: &[u8] = b"MAJOR_COMPACTION_KEY";
    pub const EXCLUDE_FROM_MINOR_COMPACTION: &[u8] = b"EXCLUDE_FROM_MINOR_COMPACTION";
}

#[derive(Clone, PartialEq, Message)]
pub struct BytesBytesPair {
    #[prost(bytes = "vec", required, tag = "1")]
    pub first: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub second: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct FileInfoProto {
    #[prost(message, repeated, tag = "1")]
    pub map_entry: Vec<BytesBytesPair>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TimeRangeTracker {
    #[prost(uint64, optional, tag = "1")]
    pub from: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    pub to: Option<u64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct FileTrailerProto {
    #[prost(uint64, optional, tag = "1")]
    pub file_info_offset: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    pub load_on_open_data_offset: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    pub uncompressed_data_index_size: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    pub total_uncompressed_bytes: Option<u64>,
    #[prost(uint32, optional, tag = "5")]
    pub data_index_count: Option<u32>,
    #[prost(uint32, optional, tag = "6")]
    pub meta_index_count: Option<u32>,
    #[prost(uint64, optional, tag = "7")]
    pub entry_count: Option<u64>,
    #[prost(uint32, optional, tag = "8")]
    pub num_data_index_levels: Option<u32>,
    #[prost(uint64, optional, tag = "9")]
    pub first_data_block_offset: Option<u64>,
    #[prost(uint64, optional, tag = "10")]
    pub last_data_block_offset: Option<u64>,
    #[prost(string, optional, tag = "11")]
    pub comparator_class_name: Option<String>,
    #[prost(uint32, optional, tag = "12")]
    pub compression_codec: Option<u32>,
}

/// The file info, sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileInfo(pub BTreeMap<Vec<u8>, Vec<u8>>);

impl FileInfo {
    pub fn set(&mut self, name: &[u8], value: impl Into<Vec<u8>>) {
        self.0.insert(name.to_vec(), value.into());
    }

    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.0.get(name).map(Vec::as_slice)
    }

    /// The file info block's data.
    pub fn encode(&self) -> Vec<u8> {
        let proto = FileInfoProto {
            map_entry: self
                .0
                .iter()
                .map(|(k, v)| BytesBytesPair {
                    first: k.clone(),
                    second: v.clone(),
                })
                .collect(),
        };
        let mut out = PB_MAGIC.to_vec();
        proto
            .encode_length_delimited(&mut out)
            .expect("a Vec grows");
        out
    }

    pub fn decode(data: &[u8]) -> Option<FileInfo> {
        let body = data.strip_prefix(PB_MAGIC)?;
        let proto = FileInfoProto::decode_length_delimited(body).ok()?;
        Some(FileInfo(
            proto
                .map_entry
                .into_iter()
                .map(|p| (p.first, p.second))
                .collect(),
        ))
    }
}

/// HBase's `Bytes.toBytes(boolean)`.
pub fn bool_bytes(b: bool) -> Vec<u8> {
    vec![if b { 0xff } else { 0 }]
}

/// `TimeRangeTracker.toByteArray`: `PBUF` then the message (not length-delimited).
pub fn time_range(min: i64, max: i64) -> Vec<u8> {
    let mut out = PB_MAGIC.to_vec();
    TimeRangeTracker {
        from: Some(min as u64),
        to: Some(max as u64),
    }
    .encode(&mut out)
    .expect("a Vec grows");
    out
}

/// The fixed trailer's 4,096 bytes.
pub fn encode_trailer(trailer: &FileTrailerProto) -> Vec<u8> {
    let mut out = Vec::with_capacity(TRAILER_SIZE);
    out.extend_from_slice(TRAILER_MAGIC);
    trailer
        .encode_length_delimited(&mut out)
        .expect("a Vec grows");
    assert!(
        out.len() <= TRAILER_SIZE - 4,
        "the trailer's fields fit in far less than 4 KiB"
    );
    out.resize(TRAILER_SIZE - 4, 0);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out
}

/// Reads back a trailer written by [`encode_trailer`].
pub fn decode_trailer(bytes: &[u8]) -> Option<FileTrailerProto> {
    if bytes.len() != TRAILER_SIZE || bytes[TRAILER_SIZE - 4..] != VERSION.to_be_bytes() {
        return None;
    }
    let body = bytes.strip_prefix(TRAILER_MAGIC.as_slice())?;
    FileTrailerProto::decode_length_delimited(body).ok()
}

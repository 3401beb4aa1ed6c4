//! HFile v3 files written from Rust, for HBase's bulk load (`load --via hfile`).
//!
//! A bulk load hands finished, sorted HFiles to the region servers, which adopt them whole:
//! no write-ahead log, no memstore, no flush. This module writes those files byte for byte
//! as HBase 2.6's `HFileWriterImpl` does for an uncompressed, unencoded column family
//! without tags or bloom filters; docs/design/hfile.md walks through the layout.
//!
//! - [`cell`]: the KeyValue encoding and HBase's cell order;
//! - [`block`]: the 33-byte block header and the CRC32C checksums per chunk;
//! - [`index`]: the root, intermediate and leaf index blocks, and the mid-key metadata;
//! - [`meta`]: the file info and the fixed 4,096-byte trailer (protobuf through `prost`);
//! - [`writer`]: [`HFileWriter`], which appends cells in order and lays the file out.
//!
//! Invariants: a file holds cells of one column family in strictly increasing cell order
//! (the writer refuses anything else, so HBase never sees an unsorted file); every block
//! carries valid checksums; the trailer's offsets and counts describe exactly what was
//! written.

pub mod block;
pub mod cell;
pub mod index;
pub mod meta;
pub mod writer;

#[cfg(test)]
pub(crate) mod reader;
#[cfg(test)]
mod tests;

pub use block::Codec;
pub use cell::{Cell, TYPE_DELETE_COLUMN, TYPE_PUT};
pub use writer::{HFileSummary, HFileWriter, WriterOptions};

/// What can go wrong while writing an HFile.
#[derive(Debug, thiserror::Error)]
pub enum HFileError {
    /// A cell that does not sort strictly after the previous one.
    #[error("cell out of order: {current} after {previous}")]
    OutOfOrder { previous: String, current: String },

    /// A cell HBase cannot hold.
    #[error("cell refused: {0}")]
    BadCell(String),

    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Hadoop's `WritableUtils.writeVLong`: one byte for -112..=127, else a length byte and
/// the big-endian bytes that are not leading zeros (of the value, or of its complement).
pub fn write_vlong(out: &mut Vec<u8>, value: i64) {
    if (-112..=127).contains(&value) {
        out.push(value as u8);
        return;
    }
    let (mut rest, mut len) = if value < 0 {
        (!value, -120i32)
    } else {
        (value, -112i32)
    };
    let magnitude = rest;
    while rest != 0 {
        rest >>= 8;
        len -= 1;
    }
    out.push(len as i8 as u8);
    let bytes = if len < -120 {
        -(len + 120)
    } else {
        -(len + 112)
    };
    for idx in (0..bytes).rev() {
        out.push((magnitude >> (idx * 8)) as u8);
    }
}

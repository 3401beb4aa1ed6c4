//! One cell as HBase stores it (a KeyValue), and the order HBase keeps cells in.
//!
//! The key is `i16 row length, row, u8 family length, family, qualifier, i64 timestamp,
//! u8 type`; in a data block it follows `i32 key length, i32 value length` and precedes the
//! value and the memstore timestamp. Order: row, family and qualifier ascending as unsigned
//! bytes, then timestamp descending, then type descending (`CellComparatorImpl`).

use std::cmp::Ordering;

use super::HFileError;

/// The KeyValue type byte of a put (`KeyValue.Type.Put`).
pub const TYPE_PUT: u8 = 4;

/// The KeyValue type byte of a column's delete marker (`KeyValue.Type.DeleteColumn`): every
/// version of the column at or before its timestamp is gone.
pub const TYPE_DELETE_COLUMN: u8 = 12;

/// Bytes of a key beside the row, family and qualifier: row length (2), family length (1),
/// timestamp (8) and type (1).
pub const KEY_INFRASTRUCTURE: usize = 12;

/// A cell (a put, or a column's delete marker), borrowed from its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell<'a> {
    pub row: &'a [u8],
    pub family: &'a [u8],
    pub qualifier: &'a [u8],
    pub timestamp: i64,
    pub value: &'a [u8],
    /// [`TYPE_PUT`] or [`TYPE_DELETE_COLUMN`].
    pub kind: u8,
}

impl<'a> Cell<'a> {
    /// The length of the serialized key.
    pub fn key_len(&self) -> usize {
        KEY_INFRASTRUCTURE + self.row.len() + self.family.len() + self.qualifier.len()
    }

    /// Refuses what HBase cannot hold: an empty row or one over 32,767 bytes, a family over
    /// 127 bytes (its length is a signed byte, `KeyValue.checkParameters`), a timestamp
    /// before the epoch (a file's time range could not be opened), or a cell over 1 GiB.
    pub fn check(&self) -> Result<(), HFileError> {
        let refuse = |reason: String| Err(HFileError::BadCell(reason));
        if self.row.is_empty() || self.row.len() > i16::MAX as usize {
            return refuse(format!("row of {} bytes", self.row.len()));
        }
        if self.family.len() > i8::MAX as usize {
            return refuse(format!("family of {} bytes", self.family.len()));
        }
        if self.timestamp < 0 {
            return refuse(format!("negative timestamp {}", self.timestamp));
        }
        if self.key_len() + self.value.len() > i32::MAX as usize / 2 {
            return refuse(format!(
                "cell of {} bytes",
                self.key_len() + self.value.len()
            ));
        }
        Ok(())
    }

    /// Appends the serialized key.
    pub fn write_key(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.row.len() as i16).to_be_bytes());
        out.extend_from_slice(self.row);
        out.push(self.family.len() as u8);
        out.extend_from_slice(self.family);
        out.extend_from_slice(self.qualifier);
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.push(self.kind);
    }

    /// Appends the cell as a data block holds it: lengths, key, value, and a memstore
    /// timestamp of 0 (one byte; the file info says `KEY_VALUE_VERSION` 1).
    pub fn write_to_block(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.key_len() as i32).to_be_bytes());
        out.extend_from_slice(&(self.value.len() as i32).to_be_bytes());
        self.write_key(out);
        out.extend_from_slice(self.value);
        out.push(0);
    }

    /// The serialized key.
    pub fn key(&self) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.key_len());
        self.write_key(&mut key);
        key
    }

    /// HBase's cell order (all cells here are puts, so the type never decides).
    pub fn cmp_order(&self, other: &Cell<'_>) -> Ordering {
        self.row
            .cmp(other.row)
            .then_with(|| self.family.cmp(other.family))
            .then_with(|| self.qualifier.cmp(other.qualifier))
            .then_with(|| other.timestamp.cmp(&self.timestamp))
            .then_with(|| other.kind.cmp(&self.kind))
    }

    /// Reads back a key written by [`Cell::write_key`] (the value is left empty).
    pub fn from_key(key: &'a [u8]) -> Option<Cell<'a>> {
        let row_len = i16::from_be_bytes(key.get(..2)?.try_into().ok()?) as usize;
        let row = key.get(2..2 + row_len)?;
        let family_len = *key.get(2 + row_len)? as usize;
        let family_at = 3 + row_len;
        let family = key.get(family_at..family_at + family_len)?;
        let qualifier_end = key.len().checked_sub(9)?;
        let qualifier = key.get(family_at + family_len..qualifier_end)?;
        let timestamp =
            i64::from_be_bytes(key.get(qualifier_end..qualifier_end + 8)?.try_into().ok()?);
        Some(Cell {
            row,
            family,
            qualifier,
            timestamp,
            value: &[],
            kind: *key.last()?,
        })
    }
}

/// A printable form of a key's row, qualifier and timestamp, for error messages.
pub fn describe(cell: &Cell<'_>) -> String {
    format!(
        "{}/{}:{}/{}",
        hex(cell.row),
        String::from_utf8_lossy(cell.family),
        String::from_utf8_lossy(cell.qualifier),
        cell.timestamp
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

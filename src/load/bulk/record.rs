//! The record a collector keeps per cell, and its key: unsigned byte order of the key is
//! the file order (table, family, region), then HBase's cell order, then the latest emission
//! first, so sorting and merging compare bytes and never parse (docs/design/bulk-load.md).

/// One cell on its way into a collector.
#[derive(Clone, Copy, Debug)]
pub(super) struct Record<'a> {
    pub(super) table: u8,
    pub(super) region: u32,
    pub(super) family: &'a [u8],
    pub(super) row: &'a [u8],
    pub(super) qualifier: &'a [u8],
    pub(super) ts: i64,
    /// `u64::MAX -` the emission number, so the latest emission sorts first.
    pub(super) seq_inv: u64,
    pub(super) value: &'a [u8],
}

/// Appends `bytes` so that byte order is kept and the end is marked: 0x00 becomes
/// 0x00 0xff and the field ends with 0x00 0x00.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Reads a field written by [`escape`] into `out`; returns the bytes consumed.
fn unescape(bytes: &[u8], out: &mut Vec<u8>) -> usize {
    out.clear();
    let mut i = 0;
    loop {
        let b = bytes[i];
        if b == 0 {
            if bytes[i + 1] == 0 {
                return i + 2;
            }
            out.push(0);
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
}

impl Record<'_> {
    /// Appends `u32 key length, key, u32 value length, value`. The key is
    /// `table, family, 0x00, region (BE), escaped row, escaped qualifier, inverted timestamp,
    /// inverted emission number`: its unsigned byte order is the file order (table, family,
    /// region), then HBase's cell order, then the latest emission first, so sorting and
    /// merging compare bytes only.
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        out.push(self.table);
        out.extend_from_slice(self.family);
        out.push(0);
        out.extend_from_slice(&self.region.to_be_bytes());
        escape(self.row, out);
        escape(self.qualifier, out);
        out.extend_from_slice(&(!((self.ts as u64) ^ (1 << 63))).to_be_bytes());
        out.extend_from_slice(&self.seq_inv.to_be_bytes());
        let key_len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&key_len.to_be_bytes());
        out.extend_from_slice(&(self.value.len() as u32).to_be_bytes());
        out.extend_from_slice(self.value);
    }
}

/// A record's key and value.
pub(super) fn split(record: &[u8]) -> (&[u8], &[u8]) {
    let key_len = u32::from_be_bytes(record[..4].try_into().unwrap()) as usize;
    let key = &record[4..4 + key_len];
    (key, &record[8 + key_len..])
}

/// The length of a key's (table, family, region) prefix: the HFile it belongs to.
pub(super) fn group_len(key: &[u8]) -> usize {
    let family_end = 1 + key[1..]
        .iter()
        .position(|&b| b == 0)
        .expect("terminated family");
    family_end + 1 + 4
}

/// The key without the emission number: equal for two emissions of one HBase cell.
pub(super) fn cell_part(key: &[u8]) -> &[u8] {
    &key[..key.len() - 8]
}

/// A key's parts, decoded into reused buffers.
#[derive(Default)]
pub(super) struct Decoded {
    pub(super) table: u8,
    pub(super) family: Vec<u8>,
    pub(super) region: u32,
    pub(super) row: Vec<u8>,
    pub(super) qualifier: Vec<u8>,
    pub(super) ts: i64,
}

impl Decoded {
    pub(super) fn read(&mut self, key: &[u8]) {
        self.table = key[0];
        let g = group_len(key);
        self.family.clear();
        self.family.extend_from_slice(&key[1..g - 5]);
        self.region = u32::from_be_bytes(key[g - 4..g].try_into().unwrap());
        let mut at = g;
        at += unescape(&key[at..], &mut self.row);
        at += unescape(&key[at..], &mut self.qualifier);
        let ts_desc = u64::from_be_bytes(key[at..at + 8].try_into().unwrap());
        self.ts = (!ts_desc ^ (1 << 63)) as i64;
    }
}

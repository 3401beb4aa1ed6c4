//! The record a collector keeps per cell, and the order of its keys: the file (table,
//! family, region), then HBase's cell order, then the latest emission first
//! (docs/design/bulk-load.md). Fields are length-prefixed, not escaped, so a record is no
//! longer than its cell; [`cmp_keys`] compares them field by field, and [`row_prefix`] lets
//! a sort settle most comparisons on one integer.

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
    /// The HBase cell type: a put, or a column's delete marker.
    pub(super) kind: u8,
}

impl Record<'_> {
    /// The bytes [`Record::encode`] appends for these field lengths.
    pub(super) fn len_of(family: usize, row: usize, qualifier: usize, value: usize) -> usize {
        4 + 1 + 1 + family + 4 + 2 + row + qualifier + 16 + 1 + 4 + value
    }

    fn encoded_len(&self) -> usize {
        Self::len_of(
            self.family.len(),
            self.row.len(),
            self.qualifier.len(),
            self.value.len(),
        )
    }

    /// Appends `u32 key length, key, u32 value length, value` (BE). The key is `table,
    /// family length (u8), family, region (u32), row length (u16), row, qualifier, inverted
    /// timestamp, inverted emission number, cell type`; [`cmp_keys`] orders it.
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        let key_len = self.encoded_len() - 8 - self.value.len();
        out.extend_from_slice(&(key_len as u32).to_be_bytes());
        out.push(self.table);
        out.push(self.family.len() as u8);
        out.extend_from_slice(self.family);
        out.extend_from_slice(&self.region.to_be_bytes());
        out.extend_from_slice(&(self.row.len() as u16).to_be_bytes());
        out.extend_from_slice(self.row);
        out.extend_from_slice(self.qualifier);
        out.extend_from_slice(&(!((self.ts as u64) ^ (1 << 63))).to_be_bytes());
        out.extend_from_slice(&self.seq_inv.to_be_bytes());
        out.push(self.kind);
        out.extend_from_slice(&(self.value.len() as u32).to_be_bytes());
        out.extend_from_slice(self.value);
    }
}

/// A key's fields, borrowed: `(table, family, region)` names its file, and the order of
/// the fields is the order of the keys.
struct Fields<'a> {
    group: &'a [u8],
    row: &'a [u8],
    qualifier: &'a [u8],
    /// Inverted timestamp and emission number, and the cell type.
    tail: &'a [u8],
}

fn fields(key: &[u8]) -> Fields<'_> {
    let g = group_len(key);
    let row_len = u16::from_be_bytes([key[g], key[g + 1]]) as usize;
    let row_end = g + 2 + row_len;
    let tail = key.len() - 17;
    Fields {
        group: &key[..g],
        row: &key[g + 2..row_end],
        qualifier: &key[row_end..tail],
        tail: &key[tail..],
    }
}

/// The order of keys: the file (table, family, region), then HBase's cell order (row,
/// qualifier, timestamp descending), then the latest emission first. Every field compares
/// as unsigned bytes, a shorter one first when it is a prefix of the other.
pub(super) fn cmp_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let (fa, fb) = (fields(a), fields(b));
    cmp_groups(fa.group, fb.group)
        .then_with(|| fa.row.cmp(fb.row))
        .then_with(|| fa.qualifier.cmp(fb.qualifier))
        .then_with(|| fa.tail.cmp(fb.tail))
}

/// The order of two files' `(table, family, region)` prefixes. The family's length comes
/// before its bytes, so compare the table, then the family as bytes, then the region.
pub(super) fn cmp_groups(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a[0].cmp(&b[0])
        .then_with(|| a[2..a.len() - 4].cmp(&b[2..b.len() - 4]))
        .then_with(|| a[a.len() - 4..].cmp(&b[b.len() - 4..]))
}

/// The first eight bytes of a key's row (zero-padded): among keys of one file, a smaller
/// prefix means a smaller key, so a sort compares whole keys only on ties.
pub(super) fn row_prefix(key: &[u8]) -> u64 {
    let row = fields(key).row;
    let mut p = [0u8; 8];
    let n = row.len().min(8);
    p[..n].copy_from_slice(&row[..n]);
    u64::from_be_bytes(p)
}

/// A record's key and value.
pub(super) fn split(record: &[u8]) -> (&[u8], &[u8]) {
    let key_len = u32::from_be_bytes(record[..4].try_into().unwrap()) as usize;
    let key = &record[4..4 + key_len];
    (key, &record[8 + key_len..])
}

/// The length of a key's (table, family, region) prefix: the HFile it belongs to.
pub(super) fn group_len(key: &[u8]) -> usize {
    2 + key[1] as usize + 4
}

/// The key without the emission number and the type: equal for two emissions of one HBase
/// cell (a put and a delete marker of one column and timestamp too: the later one stands).
pub(super) fn cell_part(key: &[u8]) -> &[u8] {
    &key[..key.len() - 9]
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
    pub(super) kind: u8,
}

impl Decoded {
    pub(super) fn read(&mut self, key: &[u8]) {
        let f = fields(key);
        let g = f.group;
        self.table = g[0];
        self.family.clear();
        self.family.extend_from_slice(&g[2..g.len() - 4]);
        self.region = u32::from_be_bytes(g[g.len() - 4..].try_into().unwrap());
        self.row.clear();
        self.row.extend_from_slice(f.row);
        self.qualifier.clear();
        self.qualifier.extend_from_slice(f.qualifier);
        let ts_desc = u64::from_be_bytes(f.tail[..8].try_into().unwrap());
        self.ts = (!ts_desc ^ (1 << 63)) as i64;
        self.kind = f.tail[16];
    }
}

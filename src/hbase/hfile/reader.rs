//! A plain reader of the files [`super::HFileWriter`] writes, for the unit tests: it
//! checks every header field and checksum, follows the trailer's offsets and decodes every
//! cell, so a test can compare a file with the cells it was given. HBase's own reader
//! checks the same files in the integration tests.

use super::block::{append_checksums, BlockType, CHECKSUM_CRC32C, HEADER_SIZE};
use super::meta::{decode_trailer, FileInfo, FileTrailerProto, TRAILER_SIZE};

/// An owned cell.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OwnedCell {
    pub row: Vec<u8>,
    pub family: Vec<u8>,
    pub qualifier: Vec<u8>,
    pub timestamp: i64,
    pub value: Vec<u8>,
    pub kind: u8,
}

/// One block as found in the file.
#[derive(Clone, Debug)]
pub struct Block {
    pub offset: u64,
    pub magic: [u8; 8],
    pub prev_offset: i64,
    pub data: Vec<u8>,
    pub on_disk_size: u32,
}

pub struct ParsedFile {
    pub trailer: FileTrailerProto,
    pub blocks: Vec<Block>,
    pub cells: Vec<OwnedCell>,
    pub info: FileInfo,
    /// (offset, on-disk size, key) of the root index.
    pub root: Vec<(u64, u32, Vec<u8>)>,
    pub root_tail: Vec<u8>,
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes(b[..4].try_into().unwrap())
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().unwrap())
}

/// Hadoop's `readVLong`.
pub fn read_vlong(b: &[u8]) -> (i64, usize) {
    let first = b[0] as i8;
    if first >= -112 {
        return (first as i64, 1);
    }
    let negative = first < -120;
    let len = if negative {
        -(first as i32 + 120)
    } else {
        -(first as i32 + 112)
    } as usize;
    let mut v: i64 = 0;
    for &byte in &b[1..=len] {
        v = (v << 8) | byte as i64;
    }
    (if negative { !v } else { v }, len + 1)
}

/// Reads the block at `offset` of a file whose trailer names codec `codec` (an ordinal).
fn read_block(file: &[u8], offset: usize, codec: u32) -> Result<Block, String> {
    let h = &file[offset..offset + HEADER_SIZE];
    let on_disk = be_i32(&h[8..]) as usize;
    let uncompressed = be_i32(&h[12..]) as usize;
    let prev = be_i64(&h[16..]);
    if h[24] != CHECKSUM_CRC32C {
        return Err(format!("checksum type {} at {offset}", h[24]));
    }
    let per = be_i32(&h[25..]) as u32;
    let with_header = be_i32(&h[29..]) as usize;
    let framed = &file[offset..offset + with_header];
    let mut sums = Vec::new();
    append_checksums(framed, per, &mut sums);
    if on_disk != with_header - HEADER_SIZE + sums.len() {
        return Err(format!("on-disk size {on_disk} at {offset}"));
    }
    let stored = &file[offset + with_header..offset + HEADER_SIZE + on_disk];
    if stored != sums.as_slice() {
        return Err(format!("checksum mismatch in block at {offset}"));
    }
    let body = &file[offset + HEADER_SIZE..offset + with_header];
    let data = match codec {
        2 => body.to_vec(),
        // BlockCompressorStream: uncompressed length, then (compressed length, frame) chunks.
        6 => {
            let total = be_i32(body) as usize;
            let mut data = Vec::with_capacity(total);
            let mut at = 4;
            while data.len() < total {
                let n = be_i32(&body[at..]) as usize;
                let chunk = zstd::bulk::decompress(&body[at + 4..at + 4 + n], total - data.len())
                    .map_err(|e| format!("zstd at {offset}: {e}"))?;
                data.extend_from_slice(&chunk);
                at += 4 + n;
            }
            if at != body.len() {
                return Err(format!("bytes after the compressed data at {offset}"));
            }
            data
        }
        other => return Err(format!("codec {other}")),
    };
    if data.len() != uncompressed {
        return Err(format!("uncompressed size {uncompressed} at {offset}"));
    }
    Ok(Block {
        offset: offset as u64,
        magic: h[..8].try_into().unwrap(),
        prev_offset: prev,
        data,
        on_disk_size: (HEADER_SIZE + on_disk) as u32,
    })
}

fn decode_cells(data: &[u8], out: &mut Vec<OwnedCell>) -> Result<(), String> {
    let mut at = 0;
    while at < data.len() {
        let klen = be_i32(&data[at..]) as usize;
        let vlen = be_i32(&data[at + 4..]) as usize;
        let key = &data[at + 8..at + 8 + klen];
        let cell = super::Cell::from_key(key).ok_or("bad key")?;
        if ![super::cell::TYPE_PUT, super::cell::TYPE_DELETE_COLUMN].contains(&cell.kind) {
            return Err(format!("cell type {}", cell.kind));
        }
        let value = &data[at + 8 + klen..at + 8 + klen + vlen];
        at += 8 + klen + vlen;
        let (mvcc, n) = read_vlong(&data[at..]);
        if mvcc != 0 {
            return Err("memstore timestamp".into());
        }
        at += n;
        out.push(OwnedCell {
            row: cell.row.to_vec(),
            family: cell.family.to_vec(),
            qualifier: cell.qualifier.to_vec(),
            timestamp: cell.timestamp,
            value: value.to_vec(),
            kind: cell.kind,
        });
    }
    Ok(())
}

/// Parses a whole file, checking it on the way.
pub fn parse(file: &[u8]) -> Result<ParsedFile, String> {
    let trailer = decode_trailer(&file[file.len() - TRAILER_SIZE..]).ok_or("bad trailer")?;
    let end = file.len() - TRAILER_SIZE;
    let mut blocks = Vec::new();
    let mut at = 0usize;
    while at < end {
        let codec = trailer.compression_codec.unwrap_or(2);
        let block = read_block(file, at, codec)?;
        at += block.on_disk_size as usize;
        blocks.push(block);
    }
    if at != end {
        return Err("blocks overrun the trailer".into());
    }
    let mut cells = Vec::new();
    for b in blocks
        .iter()
        .filter(|b| &b.magic == BlockType::Data.magic())
    {
        decode_cells(&b.data, &mut cells)?;
    }
    // The block the trailer names at `offset`, which must be of type `kind`.
    let named = |offset: Option<u64>, kind: BlockType, what: &str| {
        blocks
            .iter()
            .find(|b| b.offset == offset.unwrap_or(0) && &b.magic == kind.magic())
            .ok_or(format!("the trailer's {what} offset names no such block"))
    };
    let root = named(
        trailer.load_on_open_data_offset,
        BlockType::RootIndex,
        "root index",
    )?;
    let mut entries = Vec::new();
    let mut p = 0;
    for _ in 0..trailer.data_index_count.unwrap_or(0) {
        let offset = be_i64(&root.data[p..]) as u64;
        let size = be_i32(&root.data[p + 8..]) as u32;
        let (klen, n) = read_vlong(&root.data[p + 12..]);
        let key = root.data[p + 12 + n..p + 12 + n + klen as usize].to_vec();
        p += 12 + n + klen as usize;
        entries.push((offset, size, key));
    }
    let info_block = named(trailer.file_info_offset, BlockType::FileInfo, "file info")?;
    let info = FileInfo::decode(&info_block.data).ok_or("bad file info")?;
    Ok(ParsedFile {
        root_tail: root.data[p..].to_vec(),
        trailer,
        blocks,
        cells,
        info,
        root: entries,
    })
}

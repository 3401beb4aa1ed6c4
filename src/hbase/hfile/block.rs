//! Blocks: the 33-byte header, the data (compressed or not), and one CRC32C per
//! `bytes_per_checksum` chunk.
//!
//! Header, big-endian: magic (8 bytes), on-disk size without the header (stored data plus
//! checksums, i32), uncompressed size without the header (i32), offset of the previous
//! block of the same type (i64, -1 for none), checksum type (u8, 2 = CRC32C), bytes per
//! checksum (i32), on-disk size of header plus stored data (i32). The checksums cover the
//! header and the stored data, so a reader verifies both (`ChecksumUtil`). Every block of a
//! compressed file is compressed, index and file info too, as `HFileBlock.Writer` does.
//!
//! Invariant: [`BlockWriter`] is the only code that writes to the file, so its offset is
//! the file's length and every block it returns knows where it starts.

use std::io::{self, Write};

/// The size of a block header.
pub const HEADER_SIZE: usize = 33;

/// HBase's checksum type code for CRC32C (`ChecksumType.CRC32C`).
pub const CHECKSUM_CRC32C: u8 = 2;

/// HBase's default `hbase.hstore.bytes.per.checksum`.
pub const DEFAULT_BYTES_PER_CHECKSUM: u32 = 16 * 1024;

/// The block types this writer emits, with their magic (`BlockType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockType {
    Data,
    LeafIndex,
    IntermediateIndex,
    RootIndex,
    FileInfo,
}

impl BlockType {
    pub fn magic(self) -> &'static [u8; 8] {
        match self {
            BlockType::Data => b"DATABLK*",
            BlockType::LeafIndex => b"IDXLEAF2",
            BlockType::IntermediateIndex => b"IDXINTE2",
            BlockType::RootIndex => b"IDXROOT2",
            BlockType::FileInfo => b"FILEINF2",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// How a file's blocks are stored: the trailer's `compressionCodec`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Codec {
    #[default]
    None,
    /// zstd in the framing of HBase's own `ZstdCodec` (hbase-compression-zstd), Hadoop's
    /// `BlockCompressorStream`: uncompressed length, then compressed length and one zstd
    /// frame (u32 BE each). Hadoop's native `ZStandardCodec` frames differently, so a cluster
    /// must read ZSTD with HBase's codec (docs/hfile.md).
    Zstd { level: i32 },
}

impl Codec {
    /// `Compression.Algorithm`'s ordinal, as the trailer records it.
    pub fn ordinal(self) -> u32 {
        match self {
            Codec::None => 2,
            Codec::Zstd { .. } => 6,
        }
    }
}

/// The magic of the fixed trailer.
pub const TRAILER_MAGIC: &[u8; 8] = b"TRABLK\"$";

/// Where a written block sits and how large it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrittenBlock {
    pub offset: u64,
    /// Header, data and checksums: what an index entry records.
    pub on_disk_size_with_header: u32,
    pub uncompressed_size_without_header: u32,
}

impl WrittenBlock {
    /// Header and data, no checksums (what HBase adds to `totalUncompressedBytes`).
    pub fn uncompressed_size_with_header(&self) -> u64 {
        self.uncompressed_size_without_header as u64 + HEADER_SIZE as u64
    }
}

/// The number of checksum bytes for `len` bytes of header and data.
pub fn checksum_len(len: usize, bytes_per_checksum: u32) -> usize {
    len.div_ceil(bytes_per_checksum as usize) * 4
}

/// Builds a block's header for `stored_len` bytes on disk holding `data_len` bytes of data.
pub fn header(
    kind: BlockType,
    stored_len: usize,
    data_len: usize,
    prev_offset: i64,
    bytes_per_checksum: u32,
) -> [u8; HEADER_SIZE] {
    let with_header = HEADER_SIZE + stored_len;
    let checksums = checksum_len(with_header, bytes_per_checksum);
    let mut h = [0u8; HEADER_SIZE];
    h[..8].copy_from_slice(kind.magic());
    h[8..12].copy_from_slice(&((stored_len + checksums) as i32).to_be_bytes());
    h[12..16].copy_from_slice(&(data_len as i32).to_be_bytes());
    h[16..24].copy_from_slice(&prev_offset.to_be_bytes());
    h[24] = CHECKSUM_CRC32C;
    h[25..29].copy_from_slice(&(bytes_per_checksum as i32).to_be_bytes());
    h[29..33].copy_from_slice(&(with_header as i32).to_be_bytes());
    h
}

/// Appends one big-endian CRC32C per `bytes_per_checksum` chunk of `bytes`.
pub fn append_checksums(bytes: &[u8], bytes_per_checksum: u32, out: &mut Vec<u8>) {
    for chunk in bytes.chunks(bytes_per_checksum as usize) {
        out.extend_from_slice(&crc32c::crc32c(chunk).to_be_bytes());
    }
}

/// Writes blocks one after another, keeping the file offset and the previous offset of
/// each block type.
pub struct BlockWriter<W: Write> {
    out: W,
    offset: u64,
    prev_by_type: [i64; 5],
    bytes_per_checksum: u32,
    scratch: Vec<u8>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    compressed: Vec<u8>,
}

impl<W: Write> BlockWriter<W> {
    pub fn new(out: W, bytes_per_checksum: u32, codec: Codec) -> io::Result<Self> {
        let zstd = match codec {
            Codec::None => None,
            Codec::Zstd { level } => Some(zstd::bulk::Compressor::new(level)?),
        };
        Ok(BlockWriter {
            out,
            offset: 0,
            prev_by_type: [-1; 5],
            bytes_per_checksum,
            scratch: Vec::new(),
            zstd,
            compressed: Vec::new(),
        })
    }

    /// `data` as stored: itself, or framed and compressed.
    fn stored<'d>(&'d mut self, data: &'d [u8]) -> io::Result<&'d [u8]> {
        let Some(z) = self.zstd.as_mut() else {
            return Ok(data);
        };
        if data.is_empty() {
            // Only the length: a reader expecting no bytes reads no chunk (an empty frame
            // after it would be taken for the next length).
            self.compressed.clear();
            self.compressed.extend_from_slice(&[0; 4]);
            return Ok(&self.compressed);
        }
        let bound = zstd::zstd_safe::compress_bound(data.len());
        self.compressed.resize(8 + bound, 0);
        let n = z.compress_to_buffer(data, &mut self.compressed[8..])?;
        self.compressed[..4].copy_from_slice(&(data.len() as u32).to_be_bytes());
        self.compressed[4..8].copy_from_slice(&(n as u32).to_be_bytes());
        Ok(&self.compressed[..8 + n])
    }

    /// The file's length so far: where the next block starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Frames `data` as one block of `kind` and writes it.
    pub fn write_block(&mut self, kind: BlockType, data: &[u8]) -> io::Result<WrittenBlock> {
        let offset = self.offset;
        let (prev, per) = (self.prev_by_type[kind.slot()], self.bytes_per_checksum);
        let mut scratch = std::mem::take(&mut self.scratch);
        let stored = self.stored(data)?;
        let head = header(kind, stored.len(), data.len(), prev, per);
        // Checksum chunks run across the header/data boundary, so hash one contiguous copy.
        scratch.clear();
        scratch.extend_from_slice(&head);
        scratch.extend_from_slice(stored);
        self.scratch = scratch;
        let framed = self.scratch.len();
        let mut sums = Vec::with_capacity(checksum_len(framed, self.bytes_per_checksum));
        append_checksums(&self.scratch, self.bytes_per_checksum, &mut sums);
        self.scratch.extend_from_slice(&sums);
        self.out.write_all(&self.scratch)?;
        self.offset += self.scratch.len() as u64;
        self.prev_by_type[kind.slot()] = offset as i64;
        Ok(WrittenBlock {
            offset,
            on_disk_size_with_header: self.scratch.len() as u32,
            uncompressed_size_without_header: data.len() as u32,
        })
    }

    /// Writes bytes that are not a block (the trailer).
    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

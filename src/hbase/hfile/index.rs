//! The data block index: one entry (offset, on-disk size, first key) per data block.
//!
//! Entries collect in a leaf chunk. A chunk that reaches [`MAX_CHUNK_SIZE`] in the non-root
//! format is written between the data blocks as a leaf index block, and the root then
//! points to leaf blocks (two levels). A file whose leaf chunk never fills keeps its entries
//! in the root (one level). A root that grows past the chunk size is split into
//! intermediate blocks, level by level (`HFileBlockIndex.BlockIndexWriter`).
//!
//! Formats: the root holds `i64 offset, i32 size, vint key length, key` per entry (the count
//! is in the trailer), then, with two or more levels, the mid-key metadata. A non-root
//! block holds `i32 count`, `count + 1` i32 offsets of the entries (relative to the end of
//! that list), then `i64 offset, i32 size, key` per entry.

use std::io::{self, Write};

use super::block::{BlockType, BlockWriter, WrittenBlock};
use super::write_vlong;

/// HBase's default `hfile.index.block.max.size`.
pub const MAX_CHUNK_SIZE: usize = 128 * 1024;

/// HBase's default `hfile.index.block.min.entries`: an intermediate block takes at least
/// this many entries, so huge keys cannot make the tree deeper without end.
pub const MIN_INDEX_ENTRIES: usize = 16;

/// The mid-key metadata: leaf block offset (8), its on-disk size (4), entry within it (4).
pub const MID_KEY_METADATA_SIZE: usize = 16;

/// Entries of one index block under construction.
#[derive(Default, Debug)]
pub struct IndexChunk {
    keys: Vec<Vec<u8>>,
    offsets: Vec<u64>,
    sizes: Vec<u32>,
    /// For the root of a multi-level index: data blocks in leaf chunks 0..=i.
    cumulative: Vec<u64>,
    non_root_entries: usize,
    root_size: usize,
}

impl IndexChunk {
    pub fn add(&mut self, key: Vec<u8>, offset: u64, size: u32, cumulative: Option<u64>) {
        self.non_root_entries += 12 + key.len();
        self.root_size += 12 + vint_len(key.len()) + key.len();
        self.keys.push(key);
        self.offsets.push(offset);
        self.sizes.push(size);
        if let Some(c) = cumulative {
            self.cumulative.push(c);
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        self.keys.first().map(Vec::as_slice)
    }

    /// The chunk's size in the non-root format.
    pub fn non_root_size(&self) -> usize {
        4 + 4 * (self.keys.len() + 1) + self.non_root_entries
    }

    pub fn root_size(&self) -> usize {
        self.root_size
    }

    pub fn write_root(&self, out: &mut Vec<u8>) {
        for i in 0..self.keys.len() {
            out.extend_from_slice(&self.offsets[i].to_be_bytes());
            out.extend_from_slice(&self.sizes[i].to_be_bytes());
            write_vlong(out, self.keys[i].len() as i64);
            out.extend_from_slice(&self.keys[i]);
        }
    }

    pub fn write_non_root(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.keys.len() as i32).to_be_bytes());
        let mut at = 0usize;
        for key in &self.keys {
            out.extend_from_slice(&(at as i32).to_be_bytes());
            at += 12 + key.len();
        }
        out.extend_from_slice(&(at as i32).to_be_bytes());
        for i in 0..self.keys.len() {
            out.extend_from_slice(&self.offsets[i].to_be_bytes());
            out.extend_from_slice(&self.sizes[i].to_be_bytes());
            out.extend_from_slice(&self.keys[i]);
        }
    }

    /// Where the middle data block's entry is: the leaf block holding entry
    /// `(total - 1) / 2` of all data blocks, and its position within that leaf.
    pub fn mid_key_metadata(&self) -> io::Result<[u8; MID_KEY_METADATA_SIZE]> {
        let total = *self.cumulative.last().unwrap_or(&0);
        if total == 0 || self.cumulative.len() != self.keys.len() {
            return Err(io::Error::other(
                "mid-key metadata needs a multi-level root",
            ));
        }
        let mid = (total - 1) / 2;
        // The first leaf whose cumulative count passes `mid`.
        let entry = self.cumulative.partition_point(|&c| c <= mid);
        let before = if entry > 0 {
            self.cumulative[entry - 1]
        } else {
            0
        };
        let mut meta = [0u8; MID_KEY_METADATA_SIZE];
        meta[..8].copy_from_slice(&self.offsets[entry].to_be_bytes());
        meta[8..12].copy_from_slice(&self.sizes[entry].to_be_bytes());
        meta[12..].copy_from_slice(&((mid - before) as i32).to_be_bytes());
        Ok(meta)
    }
}

/// The length of a Hadoop vint.
fn vint_len(n: usize) -> usize {
    let mut v = Vec::with_capacity(9);
    write_vlong(&mut v, n as i64);
    v.len()
}

/// The data block index of one file, written as the file grows.
#[derive(Debug, Default)]
pub struct BlockIndexWriter {
    leaf: IndexChunk,
    root: IndexChunk,
    levels: u32,
    data_blocks: u64,
    /// Uncompressed size without headers of every index block written.
    total_uncompressed: u64,
}

/// What the trailer needs from the index once it is written.
#[derive(Clone, Copy, Debug)]
pub struct WrittenIndex {
    pub root_offset: u64,
    pub levels: u32,
    pub root_entries: u32,
    pub total_uncompressed: u64,
    /// Header plus data of every index block, for `totalUncompressedBytes`.
    pub with_headers: u64,
}

impl BlockIndexWriter {
    pub fn new() -> Self {
        BlockIndexWriter {
            levels: 1,
            ..Default::default()
        }
    }

    /// Records a data block.
    pub fn add_data_block(&mut self, first_key: Vec<u8>, block: &WrittenBlock) {
        self.leaf.add(
            first_key,
            block.offset,
            block.on_disk_size_with_header,
            None,
        );
        self.data_blocks += 1;
    }

    /// After a data block: writes the leaf chunk once it is full. Returns the bytes with
    /// headers written.
    pub fn maybe_write_leaf<W: Write>(
        &mut self,
        blocks: &mut BlockWriter<W>,
        closing: bool,
    ) -> io::Result<u64> {
        if self.leaf.is_empty() {
            return Ok(0);
        }
        if closing && self.root.is_empty() {
            // Never filled a leaf: the entries become the root (one level).
            return Ok(0);
        }
        if !closing && self.leaf.non_root_size() < MAX_CHUNK_SIZE {
            return Ok(0);
        }
        let mut data = Vec::with_capacity(self.leaf.non_root_size());
        self.leaf.write_non_root(&mut data);
        let first = self.leaf.keys[0].clone();
        let written = blocks.write_block(BlockType::LeafIndex, &data)?;
        self.total_uncompressed += written.uncompressed_size_without_header as u64;
        self.levels = 2;
        self.root.add(
            first,
            written.offset,
            written.on_disk_size_with_header,
            Some(self.data_blocks),
        );
        self.leaf = IndexChunk::default();
        Ok(written.uncompressed_size_with_header())
    }

    /// Writes the intermediate levels (if any) and the root; returns where the root starts.
    pub fn finish<W: Write>(mut self, blocks: &mut BlockWriter<W>) -> io::Result<WrittenIndex> {
        let mut with_headers = self.maybe_write_leaf(blocks, true)?;
        if self.root.is_empty() {
            self.root = std::mem::take(&mut self.leaf);
        }
        let mid_key = if self.levels > 1 {
            Some(self.root.mid_key_metadata()?)
        } else {
            None
        };
        while self.levels > 1
            && self.root.root_size() > MAX_CHUNK_SIZE
            && self.root.len() > MIN_INDEX_ENTRIES
            && self.levels < 16
        {
            let (parent, bytes) = self.write_intermediate_level(blocks)?;
            with_headers += bytes;
            self.root = parent;
            self.levels += 1;
        }
        let mut data = Vec::with_capacity(self.root.root_size() + MID_KEY_METADATA_SIZE);
        self.root.write_root(&mut data);
        if let Some(meta) = mid_key {
            data.extend_from_slice(&meta);
        }
        let written = blocks.write_block(BlockType::RootIndex, &data)?;
        self.total_uncompressed += written.uncompressed_size_without_header as u64;
        with_headers += written.uncompressed_size_with_header();
        Ok(WrittenIndex {
            root_offset: written.offset,
            levels: self.levels,
            root_entries: self.root.len() as u32,
            total_uncompressed: self.total_uncompressed,
            with_headers,
        })
    }

    fn write_intermediate_level<W: Write>(
        &mut self,
        blocks: &mut BlockWriter<W>,
    ) -> io::Result<(IndexChunk, u64)> {
        let level = std::mem::take(&mut self.root);
        let mut parent = IndexChunk::default();
        let mut chunk = IndexChunk::default();
        let mut bytes = 0;
        let n = level.len();
        for i in 0..n {
            chunk.add(
                level.keys[i].clone(),
                level.offsets[i],
                level.sizes[i],
                None,
            );
            if (i >= MIN_INDEX_ENTRIES && chunk.root_size() >= MAX_CHUNK_SIZE) || i + 1 == n {
                let mut data = Vec::with_capacity(chunk.non_root_size());
                chunk.write_non_root(&mut data);
                let written = blocks.write_block(BlockType::IntermediateIndex, &data)?;
                self.total_uncompressed += written.uncompressed_size_without_header as u64;
                bytes += written.uncompressed_size_with_header();
                let first = chunk.keys[0].clone();
                parent.add(
                    first,
                    written.offset,
                    written.on_disk_size_with_header,
                    None,
                );
                chunk = IndexChunk::default();
            }
        }
        Ok((parent, bytes))
    }
}

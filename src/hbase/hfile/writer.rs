//! [`HFileWriter`]: cells in, one HFile out.
//!
//! Cells are appended in HBase's order into a data block; once the block holds
//! [`WriterOptions::block_size`] bytes it is framed and written, its first key goes to the
//! index, and a full leaf index chunk follows it inline. `finish` writes the load-on-open
//! section (root data index, an empty meta index, the file info) and the trailer, in the
//! order `HFileWriterImpl.close` does.
//!
//! The index names each block by its first key. HBase shortens that key to any key between
//! the previous block's last and this block's first, which only saves index bytes; the real
//! first key is as valid to the reader's binary search.

use std::io::Write;

use super::block::{BlockType, BlockWriter, Codec, DEFAULT_BYTES_PER_CHECKSUM};
use super::cell::{describe, Cell};
use super::index::BlockIndexWriter;
use super::meta::{self, key, FileInfo, FileTrailerProto};
use super::HFileError;

/// How the file is cut and stamped.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Data block size before framing (the family's `BLOCKSIZE`, 64 KiB by default).
    pub block_size: usize,
    pub bytes_per_checksum: u32,
    /// `hfile.CREATE_TIME_TS` and `BULKLOAD_TIMESTAMP`, epoch ms.
    pub created_ms: i64,
    /// `BULKLOAD_SOURCE_TASK`: which job and unit wrote the file.
    pub source_task: String,
    /// How blocks are stored (the block size counts the data before compression).
    pub codec: Codec,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            block_size: 64 * 1024,
            bytes_per_checksum: DEFAULT_BYTES_PER_CHECKSUM,
            created_ms: 0,
            source_task: String::new(),
            codec: Codec::None,
        }
    }
}

/// What a finished file holds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HFileSummary {
    pub cells: u64,
    pub bytes: u64,
    pub data_blocks: u64,
    pub index_levels: u32,
    /// The first and last rows, for checking a file against region boundaries.
    #[serde(skip)]
    pub first_row: Vec<u8>,
    #[serde(skip)]
    pub last_row: Vec<u8>,
}

/// Writes one HFile to `W`.
pub struct HFileWriter<W: Write> {
    blocks: BlockWriter<W>,
    options: WriterOptions,
    index: BlockIndexWriter,
    block: Vec<u8>,
    block_first_key: Option<Vec<u8>>,
    last_key: Vec<u8>,
    first_row: Vec<u8>,
    cells: u64,
    data_blocks: u64,
    total_key_len: u64,
    total_value_len: u64,
    min_ts: i64,
    max_ts: i64,
    first_data_block: Option<u64>,
    last_data_block: u64,
    uncompressed_with_headers: u64,
}

impl<W: Write> HFileWriter<W> {
    pub fn new(out: W, options: WriterOptions) -> Result<Self, HFileError> {
        Ok(HFileWriter {
            blocks: BlockWriter::new(out, options.bytes_per_checksum, options.codec)?,
            block: Vec::with_capacity(options.block_size + 4096),
            options,
            index: BlockIndexWriter::new(),
            block_first_key: None,
            last_key: Vec::new(),
            first_row: Vec::new(),
            cells: 0,
            data_blocks: 0,
            total_key_len: 0,
            total_value_len: 0,
            min_ts: i64::MAX,
            max_ts: i64::MIN,
            first_data_block: None,
            last_data_block: 0,
            uncompressed_with_headers: 0,
        })
    }

    /// The bytes written so far plus the open block: what the file would weigh now.
    pub fn approx_len(&self) -> u64 {
        self.blocks.offset() + self.block.len() as u64
    }

    pub fn cells(&self) -> u64 {
        self.cells
    }

    /// Appends a cell that must sort strictly after the previous one.
    pub fn append(&mut self, cell: &Cell<'_>) -> Result<(), HFileError> {
        cell.check()?;
        if self.cells > 0 {
            let last = Cell::from_key(&self.last_key).expect("our own key");
            if cell.cmp_order(&last).is_le() {
                return Err(HFileError::OutOfOrder {
                    previous: describe(&last),
                    current: describe(cell),
                });
            }
        } else {
            self.first_row = cell.row.to_vec();
        }
        if self.block.len() >= self.options.block_size {
            self.finish_block()?;
        }
        if self.block_first_key.is_none() {
            self.block_first_key = Some(cell.key());
        }
        cell.write_to_block(&mut self.block);
        self.last_key.clear();
        cell.write_key(&mut self.last_key);
        self.cells += 1;
        self.total_key_len += cell.key_len() as u64;
        self.total_value_len += cell.value.len() as u64;
        self.min_ts = self.min_ts.min(cell.timestamp);
        self.max_ts = self.max_ts.max(cell.timestamp);
        Ok(())
    }

    fn finish_block(&mut self) -> Result<(), HFileError> {
        let Some(first_key) = self.block_first_key.take() else {
            return Ok(());
        };
        let written = self.blocks.write_block(BlockType::Data, &self.block)?;
        self.block.clear();
        self.first_data_block.get_or_insert(written.offset);
        self.last_data_block = written.offset;
        self.data_blocks += 1;
        self.uncompressed_with_headers += written.uncompressed_size_with_header();
        self.index.add_data_block(first_key, &written);
        self.uncompressed_with_headers += self.index.maybe_write_leaf(&mut self.blocks, false)?;
        Ok(())
    }

    /// Writes the rest of the file and returns the sink with what it holds.
    pub fn finish(mut self) -> Result<(W, HFileSummary), HFileError> {
        self.finish_block()?;
        let index = std::mem::take(&mut self.index).finish(&mut self.blocks)?;
        let mut with_headers = self.uncompressed_with_headers + index.with_headers;

        // The meta index: a root index block with no entries.
        let meta_index = self.blocks.write_block(BlockType::RootIndex, &[])?;
        with_headers += meta_index.uncompressed_size_with_header();

        let file_info_offset = self.blocks.offset();
        let file_info = self.file_info();
        let info = self
            .blocks
            .write_block(BlockType::FileInfo, &file_info.encode())?;
        with_headers += info.uncompressed_size_with_header();

        let trailer = FileTrailerProto {
            file_info_offset: Some(file_info_offset),
            load_on_open_data_offset: Some(index.root_offset),
            uncompressed_data_index_size: Some(index.total_uncompressed),
            total_uncompressed_bytes: Some(with_headers + meta::TRAILER_SIZE as u64),
            data_index_count: Some(index.root_entries),
            meta_index_count: Some(0),
            entry_count: Some(self.cells),
            num_data_index_levels: Some(index.levels),
            first_data_block_offset: Some(self.first_data_block.unwrap_or(0)),
            last_data_block_offset: Some(self.last_data_block),
            comparator_class_name: Some(meta::COMPARATOR.to_string()),
            compression_codec: Some(self.options.codec.ordinal()),
        };
        self.blocks.write_raw(&meta::encode_trailer(&trailer))?;
        let last_row = Cell::from_key(&self.last_key)
            .map(|c| c.row.to_vec())
            .unwrap_or_default();
        let summary = HFileSummary {
            cells: self.cells,
            bytes: self.blocks.offset(),
            data_blocks: self.data_blocks,
            index_levels: index.levels,
            first_row: std::mem::take(&mut self.first_row),
            last_row,
        };
        Ok((self.blocks.into_inner(), summary))
    }

    fn file_info(&self) -> FileInfo {
        let mut info = FileInfo::default();
        let avg = |total: u64| total.checked_div(self.cells).unwrap_or(0) as i32;
        if self.cells > 0 {
            info.set(key::LASTKEY, self.last_key.clone());
            info.set(key::TIMERANGE, meta::time_range(self.min_ts, self.max_ts));
            info.set(key::EARLIEST_PUT_TS, self.min_ts.to_be_bytes());
        }
        info.set(key::AVG_KEY_LEN, avg(self.total_key_len).to_be_bytes());
        info.set(key::AVG_VALUE_LEN, avg(self.total_value_len).to_be_bytes());
        info.set(key::CREATE_TIME_TS, self.options.created_ms.to_be_bytes());
        // Cells carry a memstore timestamp byte (always 0): version 1, maximum 0.
        info.set(key::KEY_VALUE_VERSION, 1i32.to_be_bytes());
        info.set(key::MAX_MEMSTORE_TS_KEY, 0i64.to_be_bytes());
        // As HFileOutputFormat2 stamps its files for completebulkload.
        info.set(
            key::BULKLOAD_TIMESTAMP,
            self.options.created_ms.to_be_bytes(),
        );
        info.set(
            key::BULKLOAD_SOURCE_TASK,
            self.options.source_task.as_bytes(),
        );
        info.set(key::MAJOR_COMPACTION_KEY, meta::bool_bytes(true));
        info.set(key::EXCLUDE_FROM_MINOR_COMPACTION, meta::bool_bytes(false));
        info
    }
}

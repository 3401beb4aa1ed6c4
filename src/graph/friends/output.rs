//! The Parquet output of a run: `<output>/friends/dt=<date>/` and
//! `<output>/friend_counts/dt=<date>/` (layout in [`crate::dataset::friends`]).
//!
//! Each sorted run of pairs becomes one file, `part-<run>.parquet`, and each part of the
//! counts one file in `friend_counts`, encoded by the thread that hands it over. Both
//! partitions are staged and appear together at [`FriendsWriter::commit`]; dropping the
//! writer without committing leaves nothing.

use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::RecordBatch;
use parquet::file::properties::WriterProperties;

use super::carried;
use super::sink::{BatchWriter, FriendsSink};
use super::Slice;
use crate::dataset::friends::{counts_schema, friends_schema, COUNTS_TABLE, PAIRS_TABLE};
use crate::dataset::parquet_io;
use crate::dataset::parquet_io::ParquetWriter;
use crate::dataset::partition::{self, Staged};
use crate::error::Result;
use crate::hdfs::{FileEntry, FileSystems, Location};

/// Writes a run's output into staged partitions (see the module's doc).
pub struct FriendsWriter {
    fs: FileSystems,
    /// The friends partition, then the counts partition.
    staged: Vec<Staged>,
    pairs_props: WriterProperties,
    counts_props: WriterProperties,
    /// Files opened so far in each.
    pair_files: AtomicUsize,
    count_files: AtomicUsize,
}

impl FriendsWriter {
    /// Stages `<output>/friends/dt=<date>/` and `<output>/friend_counts/dt=<date>/` (their
    /// `slice=i-of-N/` sub-folders for a sliced run).
    pub fn create(
        fs: &FileSystems,
        output: &Location,
        date: &str,
        slice: Slice,
        data_page_version: u8,
    ) -> Result<FriendsWriter> {
        use parquet::basic::{Compression, Encoding};
        use parquet::file::properties::EnabledStatistics;
        use parquet::schema::types::ColumnPath;
        let dt = format!("dt={date}");
        let tag = partition::run_tag();
        let stage = |table: &str| Staged::of_slice(&output.join(table), &dt, slice, &tag);
        let staged = vec![stage(PAIRS_TABLE), stage(COUNTS_TABLE)];
        // Ids and times are nearly all distinct: dictionary encoding would only cost. The
        // leading ids arrive in ascending runs and friend counts are small, so both are
        // delta-encoded. Min/max statistics are kept for the leading ids only (what a reader
        // prunes on): arrow-rs computes them value by value, worth it only there.
        let props = |delta: &[&str], no_stats: &[&str]| {
            let mut props = parquet_io::with_data_page_version(
                parquet_io::writer_properties(false),
                data_page_version,
            );
            for column in delta {
                props = props
                    .set_column_encoding(ColumnPath::from(*column), Encoding::DELTA_BINARY_PACKED);
            }
            for column in no_stats {
                props = props.set_column_statistics_enabled(
                    ColumnPath::from(*column),
                    EnabledStatistics::None,
                );
            }
            props
        };
        // Delta-encoded and not compressed. The second ids ascend within each first id's run
        // and the times are spread over a few years: zstd gains next to nothing on them, and
        // on the leading ids and the counts too little for its share of the run; delta alone
        // is smaller than plain + zstd (docs/design/friends.md).
        let pairs_props = props(&["uid_a", "uid_b", "since"], &["uid_b", "since"])
            .set_compression(Compression::UNCOMPRESSED)
            .build();
        let counts_props = props(&["uid", "friends"], &["friends"])
            .set_compression(Compression::UNCOMPRESSED)
            .build();
        Ok(FriendsWriter {
            fs: fs.clone(),
            staged,
            pairs_props,
            counts_props,
            pair_files: AtomicUsize::new(0),
            count_files: AtomicUsize::new(0),
        })
    }

    /// Opens `part-<part>.parquet` in staged folder `table` (0: pairs, 1: counts).
    fn open(&self, table: usize, part: usize) -> Result<ParquetFile> {
        let (schema, props, opened) = match table {
            0 => (friends_schema(), &self.pairs_props, &self.pair_files),
            _ => (counts_schema(), &self.counts_props, &self.count_files),
        };
        let location = self.staged[table]
            .tmp
            .join(&format!("part-{part:05}.parquet"));
        let writer = ParquetWriter::create_staged(&self.fs, &location, schema, props.clone())?;
        opened.fetch_add(1, Ordering::Relaxed);
        Ok(ParquetFile(writer))
    }

    /// The files written so far into the staged friends and counts partitions.
    pub fn staged_files(&self) -> Result<(Vec<FileEntry>, Vec<FileEntry>)> {
        let files = |staged: &Staged| -> Result<Vec<FileEntry>> {
            if !self.fs.exists(&staged.tmp)? {
                return Ok(Vec::new());
            }
            let mut files: Vec<FileEntry> = self
                .fs
                .list(&staged.tmp, false)?
                .into_iter()
                .filter(|e| {
                    e.location
                        .file_name()
                        .is_some_and(|n| n.ends_with(".parquet"))
                })
                .collect();
            files.sort_by_key(|f| f.location.to_string());
            Ok(files)
        };
        Ok((files(&self.staged[0])?, files(&self.staged[1])?))
    }

    /// Writes the run's record beside the friends partition's parts ([`carried::RECORD`]).
    pub(super) fn record(&self, record: &carried::Record) -> Result<()> {
        let text = serde_json::to_vec(record).map_err(|e| crate::error::Error::Io {
            op: "encode",
            path: carried::RECORD.into(),
            source: e.into(),
        })?;
        let at = self.staged[0].tmp.join(carried::RECORD);
        self.fs.write_atomic(&at, &text)
    }

    /// Commits both partitions; returns where the friends rows are. A run without a pair
    /// (or without a user with friends) still gets one empty file, so readers find the
    /// schema.
    pub fn commit(mut self) -> Result<Location> {
        let empty = |opened: &AtomicUsize| opened.load(Ordering::Relaxed) == 0;
        if empty(&self.pair_files) {
            self.open(0, 0)?.0.finish()?;
        }
        if empty(&self.count_files) {
            self.open(1, 0)?.0.finish()?;
        }
        partition::commit(&self.fs, &self.staged)?;
        let target = self.staged[0].target.clone();
        self.staged.clear();
        Ok(target)
    }
}

impl Drop for FriendsWriter {
    fn drop(&mut self) {
        // Not committed: the staged folders go (they are hidden in any case).
        partition::abandon(&self.fs, &self.staged);
    }
}

/// One staged Parquet file being written.
struct ParquetFile(ParquetWriter);

impl BatchWriter for ParquetFile {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.0.write(batch)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        self.0.finish()
    }
}

impl FriendsSink for FriendsWriter {
    fn open_pairs(&self, run: usize) -> Result<Box<dyn BatchWriter + '_>> {
        Ok(Box::new(self.open(0, run)?))
    }

    fn open_counts(&self, part: usize) -> Result<Box<dyn BatchWriter + '_>> {
        Ok(Box::new(self.open(1, part)?))
    }
}

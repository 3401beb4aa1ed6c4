//! The input: follows Parquet from clean or from other tools, read once, column by column.
//!
//! Each file is opened once and its footer read once; row groups are the units of decoding,
//! so one large file is decoded on every thread. Ids of any integer type are widened to
//! int64 and `followed_at` of any timestamp unit converted to milliseconds; anything else is
//! a `BadInput` naming the file.

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampMillisecondType};
use rayon::prelude::*;

use crate::dataset::follows;
use crate::dataset::parquet_io::OpenedParquet;
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

/// One chunk of edges as read: the follower/followee columns and, when asked for, the
/// follow times (Arrow arrays, so no copy is made).
pub(crate) struct EdgeChunk {
    pub(crate) follower: Int64Array,
    pub(crate) followee: Int64Array,
    pub(crate) time: Option<TimestampMillisecondArray>,
}

impl EdgeChunk {
    pub(crate) fn len(&self) -> usize {
        self.follower.len()
    }

    pub(crate) fn time(&self, i: usize) -> Option<i64> {
        self.time
            .as_ref()
            .and_then(|t| t.is_valid(i).then(|| t.value(i)))
    }

    /// The follow times (ms) and their validity, when the chunk has times. A validity bitmap
    /// with no null in it (Parquet readers give one for any optional column) is no bitmap:
    /// the packing and scanning loops then skip a bit test per row.
    pub(crate) fn times(&self) -> Option<(&[i64], Option<&arrow::buffer::NullBuffer>)> {
        self.time.as_ref().map(|t| {
            let nulls = t.nulls().filter(|n| n.null_count() > 0);
            (t.values().as_ref(), nulls)
        })
    }
}

/// Reads the follower/followee/followed_at columns of the input Parquet files, chunk by chunk.
/// Each file is opened once (its footer read once); its row groups are the units of work, so
/// one large file is decoded on every thread (by file, it would be decoded on one core).
pub(crate) struct Input {
    pub(crate) files: Vec<OpenedParquet>,
    /// Each file's footer, read when it was opened.
    pub(crate) metas: Vec<FileMeta>,
}

/// What a file's Parquet footer says: rows per row group, and the id range when statistics
/// are present.
pub(crate) struct FileMeta {
    pub(crate) rows: usize,
    pub(crate) row_groups: Vec<usize>,
    pub(crate) id_range: Option<(i64, i64)>,
    /// `(p, N)`: the file is part `p` of `N` by canonical pair, as clean writes follows
    /// (see [`follows`]).
    pub(crate) pair_partition: Option<(u32, u32)>,
}

/// One row group of one input file: a unit of decoding.
#[derive(Clone, Copy)]
pub(crate) struct Part {
    pub(crate) file: usize,
    pub(crate) row_group: usize,
    pub(crate) rows: usize,
}

impl Input {
    pub(crate) fn open(fs: &FileSystems, files: &[FileEntry]) -> Result<Input> {
        let files: Vec<OpenedParquet> = files
            .par_iter()
            .map(|f| OpenedParquet::open(fs, f))
            .collect::<Result<_>>()?;
        let metas = files.iter().map(Input::meta).collect();
        Ok(Input { files, metas })
    }

    /// Rows and id range of a file from its footer alone (the data pages are not read).
    pub(crate) fn meta(file: &OpenedParquet) -> FileMeta {
        use parquet::file::statistics::Statistics;
        let meta = file.metadata();
        let schema = meta.file_metadata().schema_descr();
        let column = |name: &str| schema.columns().iter().position(|c| c.name() == name);
        let mut range: Option<(i64, i64)> = Some((i64::MAX, i64::MIN));
        for rg in meta.row_groups() {
            for name in ["follower", "followee"] {
                let stats = column(name).and_then(|i| rg.column(i).statistics());
                match stats {
                    Some(Statistics::Int64(v)) => match (v.min_opt(), v.max_opt(), range) {
                        (Some(lo), Some(hi), Some((a, b))) => {
                            range = Some((a.min(*lo), b.max(*hi)))
                        }
                        _ => range = None,
                    },
                    _ => range = None,
                }
            }
        }
        let pair_partition = meta
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|kv| kv.key == follows::PAIR_PARTITION_KEY))
            .and_then(|kv| follows::parse_footer_value(kv.value.as_deref()?));
        FileMeta {
            rows: meta.file_metadata().num_rows().max(0) as usize,
            row_groups: file.row_group_rows(),
            id_range: range.filter(|(a, b)| a <= b),
            pair_partition,
        }
    }

    /// The files grouped by pair partition, largest group first, when every file says which
    /// part of the same `N` it is: then each group holds both directions of all its pairs
    /// (and every copy of an edge crawled on several dates), and can be joined alone. `None`
    /// for any other input (another writer's, or dates cleaned into different `N`).
    pub(crate) fn pair_groups(&self) -> Option<Vec<Vec<usize>>> {
        let n = self.metas.first()?.pair_partition?.1;
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); n as usize];
        for (file, meta) in self.metas.iter().enumerate() {
            match meta.pair_partition {
                Some((p, m)) if m == n => groups[p as usize].push(file),
                _ => return None,
            }
        }
        groups.retain(|g| !g.is_empty());
        let rows = |g: &Vec<usize>| g.iter().map(|&f| self.metas[f].rows).sum::<usize>();
        groups.sort_by_key(|g| std::cmp::Reverse(rows(g)));
        Some(groups)
    }

    /// Every row group of every file, in file order.
    pub(crate) fn parts(&self) -> Vec<Part> {
        self.metas
            .iter()
            .enumerate()
            .flat_map(|(file, m)| {
                m.row_groups
                    .iter()
                    .enumerate()
                    .map(move |(row_group, &rows)| Part {
                        file,
                        row_group,
                        rows,
                    })
            })
            .collect()
    }

    /// Where a group of files comes from, for messages: its first file.
    pub(crate) fn location_of(&self, files: &[usize]) -> &Location {
        self.files[files[0]].location()
    }

    /// Where a part comes from, for messages.
    pub(crate) fn location(&self, part: Part) -> &Location {
        self.files[part.file].location()
    }

    /// Decodes follower/followee (and followed_at when `times`) of one row group (or of a
    /// whole file when `row_group` is `None`), chunk by chunk. Without times the widest
    /// column is not decompressed at all.
    pub(crate) fn columns(
        &self,
        file: usize,
        row_group: Option<usize>,
        times: bool,
        f: &mut dyn FnMut(EdgeChunk) -> Result<()>,
    ) -> Result<()> {
        let names: &[&str] = if times {
            &["follower", "followee", "followed_at"]
        } else {
            &["follower", "followee"]
        };
        let file = &self.files[file];
        file.read_columns(row_group, names, &mut |batch| {
            f(chunk_from_batch(batch, file.location())?)
        })
    }
}

pub(crate) fn chunk_from_batch(batch: &RecordBatch, path: &Location) -> Result<EdgeChunk> {
    let missing = |name: &str| Error::BadInput {
        path: path.to_string(),
        line: 0,
        reason: format!("follows Parquet lacks an integer column {name:?}"),
    };
    let ids = |name: &str| -> Result<Int64Array> {
        let col = batch.column_by_name(name).ok_or_else(|| missing(name))?;
        // Other writers may keep ids in narrower or unsigned integers: widened to int64
        // (a u64 beyond i64 fails the cast, and is reported, rather than wrapping).
        let widened;
        let col =
            if col.data_type().is_integer() && col.data_type() != &DataType::Int64 {
                let strict = arrow::compute::CastOptions {
                    safe: false,
                    ..Default::default()
                };
                widened = arrow::compute::cast_with_options(col, &DataType::Int64, &strict)
                    .map_err(|e| Error::BadInput {
                        path: path.to_string(),
                        line: 0,
                        reason: format!("{name:?}: {e}"),
                    })?;
                &widened
            } else {
                col
            };
        let arr = col
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| missing(name))?;
        if arr.null_count() > 0 {
            return Err(Error::BadInput {
                path: path.to_string(),
                line: 0,
                reason: format!("null in {name:?}"),
            });
        }
        Ok(arr.clone())
    };
    Ok(EdgeChunk {
        follower: ids("follower")?,
        followee: ids("followee")?,
        time: follow_times(batch, path)?,
    })
}

/// The follow times of a batch in milliseconds. Ours are stored in milliseconds; DuckDB and
/// Spark write microseconds, others seconds or nanoseconds: any timestamp unit is converted
/// (finer ones truncated to the millisecond), so no input loses its times silently. A
/// `followed_at` that is not a timestamp is an error; no such column means no times.
pub(crate) fn follow_times(
    batch: &RecordBatch,
    path: &Location,
) -> Result<Option<TimestampMillisecondArray>> {
    let Some(column) = batch.column_by_name("followed_at") else {
        return Ok(None);
    };
    if let Some(ms) = column.as_primitive_opt::<TimestampMillisecondType>() {
        return Ok(Some(ms.clone()));
    }
    let bad = |reason: String| Error::BadInput {
        path: path.to_string(),
        line: 0,
        reason,
    };
    if !matches!(column.data_type(), DataType::Timestamp(..)) {
        return Err(bad(format!(
            "followed_at is {}, not a timestamp",
            column.data_type()
        )));
    }
    let ms = arrow::compute::cast(column, &DataType::Timestamp(TimeUnit::Millisecond, None))
        .map_err(|e| bad(format!("followed_at: {e}")))?;
    Ok(ms.as_primitive_opt::<TimestampMillisecondType>().cloned())
}

/// Sorted distinct ids of the input, built chunk by chunk so memory stays near the size of
/// the result.
pub(crate) fn build_dictionary(input: &Input) -> Result<Vec<i64>> {
    let mut ids: Vec<i64> = Vec::new();
    let mut pending: Vec<i64> = Vec::new();
    let merge = |ids: &mut Vec<i64>, pending: &mut Vec<i64>| {
        pending.par_sort_unstable();
        pending.dedup();
        let mut merged = Vec::with_capacity(ids.len() + pending.len());
        let (mut i, mut j) = (0, 0);
        while i < ids.len() || j < pending.len() {
            let take_left = j == pending.len() || (i < ids.len() && ids[i] <= pending[j]);
            let v = if take_left { ids[i] } else { pending[j] };
            if take_left {
                i += 1;
            } else {
                j += 1;
            }
            if merged.last() != Some(&v) {
                merged.push(v);
            }
        }
        *ids = merged;
        pending.clear();
    };
    for file in 0..input.files.len() {
        input.columns(file, None, false, &mut |c| {
            pending.extend_from_slice(c.follower.values());
            pending.extend_from_slice(c.followee.values());
            if pending.len() >= 4 << 20 {
                merge(&mut ids, &mut pending);
            }
            Ok(())
        })?;
    }
    merge(&mut ids, &mut pending);
    Ok(ids)
}

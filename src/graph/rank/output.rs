//! Writes the boards as the rank partition ([`crate::dataset::rank`]), staged and committed
//! in one step: a failed run leaves nothing a reader could take for the day's boards. Reads
//! them back, for the boards of slices to be merged.

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Int32Type, Int64Type};

use super::state::{self, Followers};
use super::{Metric, Ranked};
use crate::dataset::parquet_io;
use crate::dataset::parquet_io::ParquetWriter;
use crate::dataset::partition::{self, Staged};
use crate::dataset::rank::{schema, TABLE};
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hdfs::{FileSystems, Location};

/// Writes `boards` to `<output>/rank/dt=<date>/part-00000.parquet` (a slice's under
/// `slice=i-of-N/`) and commits it, with the `followers` state of the same night when given
/// and no newer state is committed ([`super::state`]); returns the partition's folder.
pub fn write(
    fs: &FileSystems,
    output: &Location,
    date: &str,
    slice: Slice,
    data_page_version: u8,
    boards: &[(Metric, Vec<Ranked>)],
    followers: Option<&Followers>,
) -> Result<Location> {
    let tag = partition::run_tag();
    let mut staged = vec![Staged::of_slice(
        &output.join(TABLE),
        &format!("dt={date}"),
        slice,
        &tag,
    )];
    let written = (|| {
        if let Some(followers) = followers {
            if state::is_newest(fs, output, &followers.date)? {
                staged.push(state::stage(
                    fs,
                    output,
                    followers,
                    &tag,
                    data_page_version,
                )?);
            }
        }
        let rows: Vec<(&str, &Ranked)> = boards
            .iter()
            .flat_map(|(m, board)| board.iter().map(move |r| (m.name(), r)))
            .collect();
        let columns: Vec<arrow::array::ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|(m, _)| *m))),
            Arc::new(Int32Array::from_iter_values(
                rows.iter().map(|(_, r)| r.rank as i32),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|(_, r)| r.id))),
            Arc::new(Int64Array::from_iter_values(
                rows.iter().map(|(_, r)| r.value),
            )),
        ];
        let batch = RecordBatch::try_new(schema(), columns).expect("columns of the schema");
        let props = parquet_io::with_data_page_version(
            parquet_io::writer_properties(true),
            data_page_version,
        )
        .build();
        let location = staged[0].tmp.join("part-00000.parquet");
        let mut writer = ParquetWriter::create_staged(fs, &location, schema(), props)?;
        writer.write(&batch)?;
        writer.finish()?;
        partition::commit(fs, &staged)
    })();
    if let Err(e) = written {
        partition::abandon(fs, &staged);
        return Err(e);
    }
    if staged.len() > 1 {
        state::prune(fs, output)?;
    }
    Ok(staged[0].target.clone())
}

/// The boards of a committed rank partition (or slice) at `dir`, in the file's order.
pub fn read_boards(fs: &FileSystems, dir: &Location) -> Result<Vec<(Metric, Vec<Ranked>)>> {
    let parts = partition::committed_parts(fs, dir)?;
    if parts.is_empty() {
        return Err(Error::BadInput {
            path: dir.to_string(),
            line: 0,
            reason: "no committed rank boards here".into(),
        });
    }
    let mut boards: Vec<(Metric, Vec<Ranked>)> = Vec::new();
    for file in &parts {
        let mut row = 0u64;
        let columns = ["metric", "rank", "id", "value"];
        parquet_io::read_parquet_columns(fs, file, &columns, &mut |b| {
            let bad = |row: u64, reason: String| Error::BadInput {
                path: file.location.to_string(),
                line: row,
                reason,
            };
            let column = |name: &str| {
                b.column_by_name(name)
                    .filter(|c| c.null_count() == 0)
                    .ok_or_else(|| bad(row, format!("no column {name} without nulls")))
            };
            let (metric, rank) = (column("metric")?, column("rank")?);
            let (id, value) = (column("id")?, column("value")?);
            let (Some(metric), Some(rank), Some(id), Some(value)) = (
                metric.as_string_opt::<i32>(),
                rank.as_primitive_opt::<Int32Type>(),
                id.as_primitive_opt::<Int64Type>(),
                value.as_primitive_opt::<Int64Type>(),
            ) else {
                return Err(bad(row, "columns not of the rank schema".into()));
            };
            for i in 0..b.num_rows() {
                row += 1;
                let m = Metric::from_name(metric.value(i))
                    .ok_or_else(|| bad(row, format!("unknown metric {:?}", metric.value(i))))?;
                let ranked = Ranked {
                    rank: rank.value(i) as u32,
                    id: id.value(i),
                    value: value.value(i),
                };
                match boards.last_mut() {
                    Some((last, board)) if *last == m => board.push(ranked),
                    _ => boards.push((m, vec![ranked])),
                }
            }
            Ok(())
        })?;
    }
    Ok(boards)
}

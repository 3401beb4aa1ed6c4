//! Writes the boards as the rank partition ([`crate::dataset::rank`]), staged and committed
//! in one step: a failed run leaves nothing a reader could take for the day's boards.

use std::sync::Arc;

use arrow::array::{Int32Array, Int64Array, RecordBatch, StringArray};

use super::{Metric, Ranked};
use crate::dataset::partition::{self, ParquetWriter, Staged};
use crate::dataset::rank::{schema, TABLE};
use crate::error::Result;
use crate::hdfs::{FileSystems, Location};

/// Writes `boards` to `<output>/rank/dt=<date>/part-00000.parquet` and commits it; returns
/// the partition's folder.
pub fn write(
    fs: &FileSystems,
    output: &Location,
    date: &str,
    data_page_version: u8,
    boards: &[(Metric, Vec<Ranked>)],
) -> Result<Location> {
    let staged = [Staged::new(
        &output.join(TABLE),
        &format!("dt={date}"),
        &partition::run_tag(),
    )];
    let written = (|| {
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
        let props = partition::with_data_page_version(
            partition::writer_properties(true),
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
    Ok(staged[0].target.clone())
}

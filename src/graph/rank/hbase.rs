//! The boards into HBase (`rank --load`): one row of the `rank` table per metric, date and
//! rank, holding the user, the value and the board's length. docs/hbase-layout.md.

use crate::error::Result;
use crate::hbase::layout::{cell, keys, Table};
use crate::hbase::write::{self, WriteOptions, WriteReport};
use crate::hbase::Put;

use super::Ranking;

/// Writes every board of `ranking` (of the night `hbase.date`) into the `rank` table.
pub fn write(ranking: &Ranking, hbase: &WriteOptions) -> Result<WriteReport> {
    let hbase = &WriteOptions {
        tables: vec![Table::Rank],
        ..hbase.clone()
    };
    let date = &hbase.date;
    write::write_with(hbase, &mut |put| {
        for (metric, board) in &ranking.boards {
            let of = board.len() as i64;
            for row in board {
                let key = keys::rank_key(metric.name(), date, row.rank);
                put(
                    Table::Rank,
                    Put::new(key)
                        .cell(cell::RANK_ID, row.id.to_be_bytes())
                        .cell(cell::RANK_VALUE, row.value.to_be_bytes())
                        .cell(cell::RANK_OF, of.to_be_bytes()),
                )?;
            }
        }
        Ok(())
    })
}

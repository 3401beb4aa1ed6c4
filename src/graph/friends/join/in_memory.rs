//! The general path: every edge of the input packed into one array (sized from the footers),
//! sorted in place and scanned once. For input not laid out by clean (one DuckDB file,
//! Spark output) whose packed edges fit the memory budget.

use rayon::prelude::*;

use super::{sort_and_scan, Pairs};
use crate::error::Result;
use crate::graph::friends::codes::{
    pack_into, AsideTimes, Coder, EdgeArray, PackedEdge, PartPacked,
};
use crate::graph::friends::input::Input;
use crate::graph::friends::{peak_mb, FriendsStats, Slice};

/// The in-memory path: files are decoded in parallel straight into one preallocated edge
/// array (sized from the footers, so it never reallocates), sorted in place and scanned once:
/// one decode of the input, no join for the follow times.
pub(crate) fn mutual_in_memory(
    input: &Input,
    coder: &Coder,
    slice: Slice,
    stats: &mut FriendsStats,
) -> Result<Pairs> {
    let started = std::time::Instant::now();
    let parts = input.parts();
    let total: usize = parts.iter().map(|p| p.rows).sum();
    let mut array = EdgeArray::new(total)?;
    let cells = array.as_mut_slice();
    let mut slots: Vec<&mut [PackedEdge]> = Vec::with_capacity(parts.len());
    let mut rest = &mut *cells;
    for part in &parts {
        let (head, tail) = rest.split_at_mut(part.rows);
        slots.push(head);
        rest = tail;
    }
    let filled: Vec<PartPacked> = parts
        .par_iter()
        .zip(slots)
        .map(|(&part, slot)| {
            let (mut n, mut selfs, mut aside) = (0usize, 0u64, Vec::new());
            let source = input.location(part);
            input.columns(part.file, Some(part.row_group), true, &mut |c| {
                let packed = pack_into(coder, slice, source, &c, &mut aside, &mut slot[n..])?;
                n += packed.edges;
                selfs += packed.self_edges;
                Ok(())
            })?;
            Ok(PartPacked {
                edges: n,
                self_edges: selfs,
                aside,
            })
        })
        .collect::<Result<_>>()?;
    // Close the gaps left by filtered rows (and by rows a footer announced but the row group
    // did not hold): part i's edges are its slot's first `edges` cells.
    let (mut write, mut read) = (0usize, 0usize);
    let mut aside = AsideTimes::default();
    let cells = array.as_mut_slice();
    for (packed, part) in filled.into_iter().zip(&parts) {
        cells.copy_within(read..read + packed.edges, write);
        write += packed.edges;
        read += part.rows;
        stats.self_edges += packed.self_edges;
        aside.0.extend(packed.aside);
    }
    let edges = &mut cells[..write];
    let aside = aside.seal();
    log::debug!(
        "friends: edges packed at {:?}, peak {} MB",
        started.elapsed(),
        peak_mb()
    );
    let pairs = sort_and_scan(edges, &aside, stats);
    drop(array);
    log::debug!(
        "friends: pairs found at {:?}, peak {} MB",
        started.elapsed(),
        peak_mb()
    );
    Ok(pairs)
}

//! Emission numbers: the order of a run's puts, `(unit, put within the unit, cell within the
//! put)`, whatever threads produced them. Through Thrift a later put of a cell wins because
//! it arrives later; in an HFile the higher emission number wins instead, so units run side
//! by side write exactly what one sequential run would.

use crate::error::{Error, Result};

/// Bits of an emission number: the unit, the put within it, and the cell within the put.
const UNIT_BITS: u32 = 20;
const PUT_BITS: u32 = 32;
pub const CELL_BITS: u32 = super::bulk::MAX_CELL_BITS;

/// The emission number of put `put` of unit `unit`; its cells take the next `2^CELL_BITS`.
pub fn emission(unit: u64, put: u64) -> Result<u64> {
    if unit >> UNIT_BITS != 0 || put >> PUT_BITS != 0 {
        return Err(Error::Hbase {
            op: "load",
            table: "-".into(),
            reason: format!(
                "unit {unit} emits put {put}: a run numbers at most 2^{UNIT_BITS} units of \
                 2^{PUT_BITS} puts"
            ),
        });
    }
    Ok((unit << (PUT_BITS + CELL_BITS)) | (put << CELL_BITS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emission_numbers_follow_unit_then_put_and_leave_room_for_cells() {
        let a = emission(3, 7).unwrap();
        assert!(a < emission(3, 8).unwrap());
        assert!(emission(3, u32::MAX as u64).unwrap() < emission(4, 0).unwrap());
        assert_eq!(emission(3, 8).unwrap() - a, 1 << CELL_BITS);
        assert!(emission(1 << UNIT_BITS, 0).is_err());
        assert!(emission(0, 1 << PUT_BITS).is_err());
    }
}

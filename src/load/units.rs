//! Running `load`'s units of work, in the order their emission numbers
//! ([`crate::hbase::write::emission`]) give their puts.
//!
//! Through Thrift the units run one after another: each is flushed and recorded in the
//! manifest before the next, and a later put of the same cell wins because it arrives later.
//! Through HFiles nothing is durable before the hand-over, so the units run side by side
//! ([`run_side_by_side`]), and the order of the puts is carried by their emission numbers
//! instead of their arrival: `(unit, put within the unit)`, which is exactly the order of the
//! sequential run, whatever the threads did.
//!
//! Invariant: at most one counter unit runs at a time, since each holds a partition's maps
//! sized to the counters' whole share of `--memory-budget`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

use crate::hbase::write::writers::{Router, Unit};

/// One unit to run.
pub(super) struct PendingUnit<'u, 'a> {
    /// Its place among all the run's units (skipped ones included).
    pub(super) index: usize,
    pub(super) name: &'u str,
    pub(super) unit: &'u Unit<'a>,
    /// A counter partition: heavy in memory, one at a time.
    pub(super) counters: bool,
}

/// Whether a unit named by `load` (`<tables>|<mode>|<what>`) computes a counter partition.
pub(super) fn is_counter_unit(name: &str) -> bool {
    name.split('|')
        .nth(2)
        .is_some_and(|what| what.starts_with("counters:"))
}

/// Runs `todo` on up to as many threads as the machine has cores (at least two): one thread
/// runs the counter units, one after another, and helps with the rest when they are done;
/// the others run the file units. The first error stops every thread at its next unit and is
/// returned. Returns the names of the units run.
pub(super) fn run_side_by_side(
    router: &mut Router,
    todo: &[PendingUnit<'_, '_>],
) -> Result<Vec<String>> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8);
    let files = Mutex::new(todo.iter().filter(|t| !t.counters));
    let counters = Mutex::new(todo.iter().filter(|t| t.counters));
    let failed = AtomicBool::new(false);
    let outcomes: Vec<Result<(Router, Vec<String>)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let mut r = router.fork();
                let (files, counters, failed) = (&files, &counters, &failed);
                scope.spawn(move || -> Result<(Router, Vec<String>)> {
                    let mut names = Vec::new();
                    loop {
                        if failed.load(Ordering::Relaxed) {
                            break;
                        }
                        let next = if i == 0 {
                            let c = counters.lock().unwrap_or_else(|p| p.into_inner()).next();
                            c.or_else(|| files.lock().unwrap_or_else(|p| p.into_inner()).next())
                        } else {
                            files.lock().unwrap_or_else(|p| p.into_inner()).next()
                        };
                        let Some(t) = next else { break };
                        r.start_unit(t.index);
                        if let Err(e) = (t.unit)(&mut r) {
                            failed.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        names.push(t.name.to_string());
                    }
                    Ok((r, names))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| {
                    Err(Error::Hbase {
                        op: "load",
                        table: "-".into(),
                        reason: "a unit's thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut names = Vec::new();
    let mut first_err = None;
    for outcome in outcomes {
        match outcome {
            Ok((r, n)) => {
                router.absorb(r)?;
                names.extend(n);
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(names),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Units run side by side emit numbers that sort their puts exactly as one thread
    /// running them in order would have sent them, and every put arrives once.
    #[test]
    fn side_by_side_units_number_their_puts_in_the_sequential_order() {
        use crate::hbase::layout::Table;
        use crate::hbase::Put;
        use std::collections::BTreeMap;
        use std::sync::mpsc::sync_channel;

        let (tx, rx) = sync_channel(4);
        let mut router = Router {
            senders: vec![tx],
            pending: vec![Vec::new()],
            regions: 1,
            boundaries: None,
            rows_by_table: BTreeMap::new(),
            ts: 1,
            unit: 0,
            emitted: 0,
        };
        let units: Vec<(String, Unit<'_>)> = (0..7u8)
            .map(|u| {
                let name = if u % 3 == 0 {
                    format!("t|m|counters:{u}/7")
                } else {
                    format!("t|m|posts:{u}")
                };
                let unit: Unit<'_> = Box::new(move |r: &mut Router| {
                    for j in 0..300u16 {
                        let key = [u, (j >> 8) as u8, j as u8].to_vec();
                        r.put(Table::User, Put::new(key).cell("info:n", vec![u]))?;
                    }
                    Ok(())
                });
                (name, unit)
            })
            .collect();
        // Unit 2 was done by an earlier run: it is skipped, and its number stays unused.
        let todo: Vec<PendingUnit<'_, '_>> = units
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 2)
            .map(|(index, (name, unit))| PendingUnit {
                index,
                name,
                unit,
                counters: is_counter_unit(name),
            })
            .collect();
        let received = std::thread::spawn(move || {
            let mut all = Vec::new();
            for msg in rx {
                if let crate::hbase::write::writers::Msg::Rows(puts) = msg {
                    all.extend(puts.into_iter().map(|p| (p.seq, p.put.key)));
                }
            }
            all
        });
        let mut names = run_side_by_side(&mut router, &todo).unwrap();
        drop(router);
        let mut got = received.join().unwrap();
        got.sort();
        let expected: Vec<Vec<u8>> = (0..7u8)
            .filter(|u| *u != 2)
            .flat_map(|u| (0..300u16).map(move |j| vec![u, (j >> 8) as u8, j as u8]))
            .collect();
        assert_eq!(
            got.iter().map(|g| g.1.clone()).collect::<Vec<_>>(),
            expected
        );
        names.sort();
        assert_eq!(names.len(), 6);
    }

    #[test]
    fn counter_units_are_told_by_their_name() {
        assert!(is_counter_unit(
            "user,post|split in 4|counters:0/4 as of 2026-11-29 over none"
        ));
        assert!(!is_counter_unit(
            "user,post|split in 4|posts:hdfs://x/counters:1"
        ));
        assert!(!is_counter_unit("counters:0/4"));
    }
}

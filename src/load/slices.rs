//! `load` as N slices (`--slice i/N`, the tasks of `weibo-etl yarn submit`): which units
//! a slice runs, what the submitter does before the tasks start ([`prepare`]) and after every
//! one has loaded ([`commit`]).
//!
//! Invariants (docs/design/yarn.md):
//! - The slices run disjoint units whose union is the single run's, cut the same way
//!   (split profiles and counters, at least N counter partitions), so together they write the
//!   single run's cells. Every `users` part goes to slice 0, in the single run's order: the
//!   one cell two units may share is a screen name two users hold in one night
//!   (`user_by_name`), and the later part wins there as it does in one run.
//! - A slice never creates a table and never moves the counter snapshot: the submitter
//!   creates the tables (clearing the snapshots of new ones) and resets the staged snapshot
//!   before any task starts, and commits the snapshot once every slice has written its
//!   counter partitions. Until then the previous snapshot is in force, so a failed job's
//!   rerun writes the same differences again.
//! - A retried task attempt writes the same cells again at the same timestamps (puts, or
//!   HFiles whose cells match): harmless, like `--resume` redoing a unit.

use super::{state, LoadOptions, LoadReport};
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hbase::layout::Table;
use crate::hbase::write::{ensure_tables, missing_tables, WriteReport};
use crate::hdfs::FileSystems;

/// Assigns the night's units to slices, in the order the single run lists them.
pub(super) struct Assigner {
    slice: Slice,
    /// Units other than `users` parts seen so far.
    rest: u32,
}

impl Assigner {
    pub(super) fn new(slice: Slice) -> Assigner {
        Assigner { slice, rest: 0 }
    }

    /// Whether the unit named `name` (`<entity>:<part>` or `counters:…`) is this slice's:
    /// `users` parts are slice 0's, the others go round the slices from slice 1, so slice 0
    /// does not also get the first of them.
    pub(super) fn takes(&mut self, name: &str) -> bool {
        let n = self.slice.count;
        if name.starts_with("users:") {
            return self.slice.index == 0;
        }
        let owner = (1 + self.rest) % n;
        self.rest += 1;
        owner == self.slice.index
    }
}

/// The checkpoint manifest's file name: the run's, or one per slice (they run side by side).
pub(super) fn manifest_name(namespace: &str, slice: Option<Slice>) -> String {
    match slice {
        None => format!("{namespace}.json"),
        Some(s) => format!("{namespace}.{}.json", s.folder()),
    }
}

/// A slice writes into tables that exist (the submitter created them).
pub(super) fn check_tables(options: &LoadOptions, slice: Slice) -> Result<()> {
    let missing = missing_tables(&options.write)?;
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|t| t.name()).collect();
    Err(Error::Usage(format!(
        "load --slice {slice}: {}:{} not created; a sliced load writes into existing tables \
         (`weibo-etl yarn submit -- load …` creates them before the tasks start)",
        options.write.namespace,
        names.join(",")
    )))
}

/// Before the tasks: creates the missing tables (a new `user` or `post` table clears the
/// namespace's snapshots, as in a single run) and resets the staged snapshot, unless
/// `--resume` keeps the partitions an earlier job's tasks staged. Returns the tables created.
pub fn prepare(fs: &FileSystems, options: &LoadOptions) -> Result<Vec<Table>> {
    let root = fs.parse(&options.input)?;
    let created = ensure_tables(&options.write)?;
    let state = state::State::new(&root, &options.write.namespace);
    if created.contains(&Table::User) || created.contains(&Table::Post) {
        state.clear(fs)?;
    }
    if options.write.tables.contains(&Table::User) && options.write.tables.contains(&Table::Post) {
        let as_of = state.as_of(fs, &options.write.date)?;
        // Only the staging folder's reset matters here; the tasks stage into it.
        drop(state.next(fs, &as_of, options.resume)?);
    }
    Ok(created)
}

/// After every slice loaded: the job's report from the slices' (`reports`, in slice order),
/// checked where the slices must agree, and the counter snapshot committed when the slices
/// wrote every counter (both `user` and `post` among the tables).
pub fn commit(
    fs: &FileSystems,
    options: &LoadOptions,
    reports: &[LoadReport],
) -> Result<LoadReport> {
    let Some(first) = reports.first() else {
        return Err(Error::Usage(
            "a sliced load needs at least one slice".into(),
        ));
    };
    let disagree =
        |what: &str, i: usize, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| Error::BadInput {
            path: options.input.clone(),
            line: 0,
            reason: format!(
                "the load's slices disagree on {what}: {a:?} in slice 0, {b:?} in slice {i} \
                 (did the input change while the job ran?)"
            ),
        };
    let mut merged = LoadReport {
        write: WriteReport {
            cell_timestamp: first.write.cell_timestamp,
            via: first.write.via,
            auto: first.write.auto.clone(),
            ..WriteReport::default()
        },
        counters_as_of: first.counters_as_of.clone(),
        counters_base: first.counters_base.clone(),
        history_nights: first.history_nights,
        counter_partitions: first.counter_partitions,
        ..LoadReport::default()
    };
    let mut hfiles: Option<crate::hbase::write::bulk::HandOver> = None;
    for (i, r) in reports.iter().enumerate() {
        if r.counters_as_of != first.counters_as_of {
            return Err(disagree(
                "the counters' night",
                i,
                &first.counters_as_of,
                &r.counters_as_of,
            ));
        }
        if r.counter_partitions != first.counter_partitions {
            let (a, b) = (first.counter_partitions, r.counter_partitions);
            return Err(disagree("the counter partitions", i, &a, &b));
        }
        if r.write.cell_timestamp != first.write.cell_timestamp || r.write.via != first.write.via {
            return Err(disagree(
                "the route or timestamp",
                i,
                &first.write.via,
                &r.write.via,
            ));
        }
        for (table, n) in &r.write.rows_by_table {
            *merged.write.rows_by_table.entry(table.clone()).or_default() += n;
        }
        merged.write.rows += r.write.rows;
        merged.write.bytes += r.write.bytes;
        merged.write.batches += r.write.batches;
        merged.write.retries += r.write.retries;
        merged.units_done += r.units_done;
        merged.units_skipped += r.units_skipped;
        merged.unresolved_mentions += r.unresolved_mentions;
        merged.comments_without_post += r.comments_without_post;
        merged.users_changed += r.users_changed;
        merged.posts_changed += r.posts_changed;
        // The slices ran side by side: the job took as long as its slowest.
        merged.write.seconds = merged.write.seconds.max(r.write.seconds);
        if let Some(h) = &r.write.hfiles {
            let m = hfiles.get_or_insert_with(Default::default);
            m.tables = m.tables.max(h.tables);
            m.files += h.files;
            m.cells += h.cells;
            m.bytes += h.bytes;
            m.seconds = m.seconds.max(h.seconds);
        }
    }
    merged.write.hfiles = hfiles;
    merged.write.rows_per_s = merged.write.rows as f64 / merged.write.seconds.max(1e-9);
    merged.write.mb_per_s = merged.write.bytes as f64 / 1e6 / merged.write.seconds.max(1e-9);
    let wants = |t: Table| options.write.tables.contains(&t);
    if wants(Table::User) && wants(Table::Post) {
        let root = fs.parse(&options.input)?;
        let state = state::State::new(&root, &options.write.namespace);
        // The night the slices computed the counters as of is the one they staged.
        let next = state.next(fs, &merged.counters_as_of, true)?;
        let covered = super::job::covered_as_of(fs, &root, &merged.counters_as_of)?;
        next.covering(covered)
            .commit(fs, &state, merged.counter_partitions)?;
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(names: &[&str], count: u32) -> Vec<u32> {
        let mut assigners: Vec<Assigner> = (0..count)
            .map(|index| Assigner::new(Slice { index, count }))
            .collect();
        names
            .iter()
            .map(|name| {
                let takers: Vec<u32> = assigners
                    .iter_mut()
                    .enumerate()
                    .filter_map(|(i, a)| a.takes(name).then_some(i as u32))
                    .collect();
                assert_eq!(takers.len(), 1, "{name} taken by {takers:?}");
                takers[0]
            })
            .collect()
    }

    #[test]
    fn every_unit_goes_to_one_slice_and_users_parts_stay_together() {
        let names = [
            "users:a",
            "users:b",
            "posts:a",
            "posts:b",
            "follows:a",
            "comments:a",
            "counters:0/3",
            "counters:1/3",
            "counters:2/3",
        ];
        assert_eq!(owners(&names, 3), vec![0, 0, 1, 2, 0, 1, 2, 0, 1]);
        assert_eq!(owners(&names, 1), vec![0; 9]);
        // N counter partitions over N slices: one each.
        let counters = [
            "counters:0/4",
            "counters:1/4",
            "counters:2/4",
            "counters:3/4",
        ];
        let mut got = owners(&counters, 4);
        got.sort();
        assert_eq!(got, vec![0, 1, 2, 3]);
    }

    #[test]
    fn slices_keep_manifests_of_their_own() {
        assert_eq!(manifest_name("weibo", None), "weibo.json");
        let s = Slice { index: 2, count: 4 };
        assert_eq!(manifest_name("weibo", Some(s)), "weibo.slice=2-of-4.json");
    }
}

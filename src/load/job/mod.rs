//! The `load` job itself: the night's units of work (one per Parquet part, [`parts`]; one per
//! counter partition, [`counting`]), run in order through the writers with a checkpoint
//! manifest, then the counter snapshot committed (the invariants are the module's,
//! [`super`]).

mod counting;
mod parts;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use super::{slices, state, units, LoadOptions, LoadReport};
use crate::dataset::history;
use crate::dataset::parquet_io;
use crate::dataset::partition;
use crate::error::{Error, Result};
use crate::hbase::layout::Table;
use crate::hbase::write::route::{bulk_target, choose};
use crate::hbase::write::writers::{bulk_share, queue_share, with_writers, BulkTarget, Unit};
use crate::hbase::write::{cell_timestamp, ensure_tables, Via, WriteOptions, WriteReport};
use crate::hdfs::{FileEntry, FileSystems, Location};
use crate::load::counters::{Inputs, COUNTED};
use counting::Counting;

/// What every unit of a night shares.
struct Night<'a> {
    fs: &'a FileSystems,
    tables: &'a [Table],
    /// The night's committed part files, by entity.
    files: &'a BTreeMap<&'static str, Vec<FileEntry>>,
    /// When the counters fit in one partition (and share the rows' timestamp), `user` and
    /// `post` rows are written with their counters in one put; else profiles go with their
    /// parts and counters apart (the same cells either way), so no partition re-reads the
    /// wide columns.
    merged: bool,
    /// The night's comments whose post the crawl did not record: in no list, on no post.
    comments_without_post: AtomicU64,
}

impl Night<'_> {
    fn wants(&self, t: Table) -> bool {
        self.tables.contains(&t)
    }
}

/// The units already done, as the checkpoint manifest records them.
struct Manifest {
    at: Location,
    done: BTreeSet<String>,
}

impl Manifest {
    /// The manifest of this night and namespace (or `--checkpoint`): read when resuming,
    /// deleted otherwise.
    fn open(fs: &FileSystems, root: &Location, options: &LoadOptions) -> Result<Manifest> {
        let w = &options.write;
        let at = match &options.checkpoint {
            Some(c) => fs.parse(c)?,
            None => root
                .join("_load")
                .join(&format!("dt={}", w.date))
                .join(&slices::manifest_name(&w.namespace, w.slice)),
        };
        let done = if options.resume && fs.exists(&at)? {
            serde_json::from_slice(&fs.read_to_vec(&at)?).unwrap_or_default()
        } else {
            BTreeSet::new()
        };
        if !options.resume {
            fs.delete(&at)?;
        }
        Ok(Manifest { at, done })
    }

    fn save(&self, fs: &FileSystems) -> Result<()> {
        let text = serde_json::to_vec_pretty(&self.done).unwrap_or_default();
        fs.write_atomic(&self.at, &text)
    }
}

/// Runs the load.
pub fn run(fs: &FileSystems, options: &LoadOptions) -> Result<LoadReport> {
    let started = Instant::now();
    let ts = cell_timestamp(&options.write.date)?;
    let root = fs.parse(&options.input)?;
    let files = night_files(fs, &root, &options.write.date)?;
    let auto = match options.write.via {
        Via::Auto => {
            let rows = parquet_io::parquet_rows(fs, files.values().flatten())?;
            Some(choose(fs, &root, &options.write, rows)?)
        }
        _ => None,
    };
    let resolved;
    let options = match &auto {
        Some(choice) => {
            resolved = LoadOptions {
                write: WriteOptions {
                    via: choice.chose,
                    ..options.write.clone()
                },
                ..options.clone()
            };
            &resolved
        }
        None => options,
    };
    let w = &options.write;
    // Tables first: namespace and any missing table, pre-split (by the submitter when the
    // night is loaded in slices).
    let created = match w.slice {
        None => ensure_tables(w)?,
        Some(s) => {
            slices::check_tables(options, s)?;
            Vec::new()
        }
    };
    let bulk_target = match w.via {
        Via::Hfile => Some(bulk_target(fs, &root, w, ts)?),
        _ => None,
    };
    let mut manifest = Manifest::open(fs, &root, options)?;

    let wants = |t: Table| w.tables.contains(&t);
    let counted = wants(Table::User) || wants(Table::Post) || wants(Table::UserPost);
    let state = state::State::new(&root, &w.namespace);
    let (snapshot, as_of) = counter_base(fs, &state, options, &created, counted)?;
    let mut nights_read = BTreeSet::new();
    let taken = take_counted(fs, &root, &as_of)?;
    for t in taken.values().flatten() {
        nights_read.extend(t.nights.iter().cloned());
    }
    let history: BTreeMap<&str, Vec<FileEntry>> = taken
        .iter()
        .map(|(e, t)| (*e, t.iter().flat_map(|t| t.files.clone()).collect()))
        .collect();
    let carried = match (&snapshot, counted && w.slice.is_none()) {
        (Some(s), true) => carry(fs, s, &taken, &files["posts"])?,
        _ => None,
    };
    let inputs = Inputs::of(&history, &files["posts"]);
    let partitions = match counted {
        true => counter_partitions(fs, &inputs, carried.as_ref().and(snapshot.as_ref()), w)?,
        false => 1,
    };
    // The snapshot moves on only when this run writes every counter it holds.
    let next = if counted && wants(Table::User) && wants(Table::Post) {
        // The slices stage into one folder, which the submitter reset before they started.
        let next = state.next(fs, &as_of, options.resume || w.slice.is_some())?;
        Some(match w.slice {
            None => next.covering(covered(&taken)),
            Some(_) => next,
        })
    } else {
        None
    };
    let counter_ts = cell_timestamp(&as_of)?;
    let mut report = LoadReport {
        write: WriteReport {
            cell_timestamp: ts,
            ..WriteReport::default()
        },
        counters_as_of: as_of.clone(),
        counters_base: snapshot.as_ref().map(|s| s.as_of.clone()),
        history_nights: nights_read.len(),
        counters_carried: carried.is_some(),
        ..LoadReport::default()
    };
    let night = Night {
        fs,
        tables: &w.tables,
        merged: partitions == 1 && counter_ts == ts && w.slice.is_none(),
        files: &files,
        comments_without_post: AtomicU64::new(0),
    };
    let mut counting = Counting {
        inputs,
        carried,
        snapshot,
        next,
        as_of,
        partitions,
        counter_ts,
        unresolved_mentions: AtomicU64::new(0),
        users_changed: AtomicU64::new(0),
        posts_changed: AtomicU64::new(0),
    };
    let snapshot_unit = {
        let mut units = night_units(&night, &counting, counted);
        let snapshot_unit = name_units(&mut units, &night, &counting, w.slice);
        redo_lost_counter_units(fs, &mut manifest, &units, &counting, &snapshot_unit)?;
        let (done, skipped) = execute(
            fs,
            w,
            &units,
            &mut manifest,
            bulk_target.as_ref(),
            ts,
            started,
            &mut report.write,
        )?;
        report.units_done = done;
        report.units_skipped = skipped;
        snapshot_unit
    };
    if let Some(next) = &counting.next {
        // A part may still be on its way to HDFS: a slice's task must not end before it is.
        next.wait_for_part()?;
    }
    // Every counter put is flushed: the snapshot may say so (once).
    // A slice leaves the snapshot to the submitter ([`slices::commit`]).
    if let Some(next) = counting.next.take().filter(|_| w.slice.is_none()) {
        if manifest.done.contains(&snapshot_unit) {
            next.abandon(fs);
        } else {
            next.commit(fs, &state, partitions)?;
            manifest.done.insert(snapshot_unit);
            manifest.save(fs)?;
        }
    }
    report.unresolved_mentions = counting.unresolved_mentions.into_inner();
    report.comments_without_post = night.comments_without_post.into_inner();
    report.counter_partitions = partitions;
    report.users_changed = counting.users_changed.into_inner();
    report.posts_changed = counting.posts_changed.into_inner();
    report.write.via = w.via;
    report.slice = w.slice.map(|s| s.to_string());
    report.write.auto = auto;
    if w.via == Via::Hfile {
        // The hand-over is part of the load's time.
        report.write.set_time(started);
    }
    Ok(report)
}

/// The history of each counted entity up to `as_of`, as a load takes it.
fn take_counted(
    fs: &FileSystems,
    root: &Location,
    as_of: &str,
) -> Result<BTreeMap<&'static str, Vec<history::Taken>>> {
    COUNTED
        .into_iter()
        .map(|e| Ok((e, history::take_history(fs, &root.join(e), as_of)?)))
        .collect()
}

/// The nights (and their stamps) the counters as of `as_of` cover, as the slices took them:
/// the submitter records them when it commits their snapshot.
pub(super) fn covered_as_of(
    fs: &FileSystems,
    root: &Location,
    as_of: &str,
) -> Result<state::Covered> {
    Ok(covered(&take_counted(fs, root, as_of)?))
}

/// Per counted entity, the nights read and their stamps.
fn covered(taken: &BTreeMap<&str, Vec<history::Taken>>) -> state::Covered {
    taken
        .iter()
        .map(|(e, t)| (e.to_string(), history::covered(t)))
        .collect()
}

/// What the nights since `snapshot` change in it, when it can be carried forward: it records
/// the nights it covers, they are all still there with the same stamps, and the history read
/// now splits into those nights and later ones (docs/nightly.md). `None`: compute the counters
/// over every night.
fn carry(
    fs: &FileSystems,
    snapshot: &state::Snapshot,
    taken: &BTreeMap<&str, Vec<history::Taken>>,
    mention_posts: &[FileEntry],
) -> Result<Option<super::delta::Delta>> {
    let Some(was) = &snapshot.covered else {
        return Ok(None);
    };
    let files = |items: &[history::Taken]| -> Vec<FileEntry> {
        items.iter().flat_map(|i| i.files.iter().cloned()).collect()
    };
    let mut before: BTreeMap<&str, Vec<FileEntry>> = BTreeMap::new();
    let mut since: BTreeMap<&str, Vec<FileEntry>> = BTreeMap::new();
    for (entity, items) in taken {
        let split = was
            .get(*entity)
            .and_then(|then| history::split_after(items, &snapshot.as_of, then));
        let Some(split) = split else {
            return Ok(None);
        };
        before.insert(entity, files(&items[..split]));
        since.insert(entity, files(&items[split..]));
    }
    let (history, nights) = (Inputs::of(&before, &[]), Inputs::of(&since, mention_posts));
    Ok(Some(super::delta::delta(fs, &history, &nights, snapshot)?))
}

/// The night's committed part files of every entity; an error when it has none.
fn night_files(
    fs: &FileSystems,
    root: &Location,
    date: &str,
) -> Result<BTreeMap<&'static str, Vec<FileEntry>>> {
    let mut files = BTreeMap::new();
    for entity in ["users", "posts", "follows", "comments", "reposts"] {
        let dir = root.join(entity).join(&format!("dt={date}"));
        files.insert(entity, partition::committed_parts(fs, &dir)?);
    }
    if files.values().all(Vec::is_empty) {
        return Err(Error::BadInput {
            path: root.to_string(),
            line: 0,
            reason: format!("no committed clean partitions for dt={date}"),
        });
    }
    Ok(files)
}

/// The counter snapshot the changes are taken against (none when every counter is to be
/// written), and the newest night the counters cover.
fn counter_base(
    fs: &FileSystems,
    state: &state::State,
    options: &LoadOptions,
    created: &[Table],
    counted: bool,
) -> Result<(Option<state::Snapshot>, String)> {
    // The counters readers see (the snapshot). Tables created just now hold none: their
    // snapshots are gone for good, before any put, so no later run diffs against them.
    if created.contains(&Table::User) || created.contains(&Table::Post) {
        state.clear(fs)?;
    }
    let snapshot = if counted { state.latest(fs)? } else { None };
    // Counters are those of every night up to the newest loaded; a night older than that
    // (a rerun, a late crawl) folds its difference into the newest night's cells.
    let as_of = if counted {
        state.as_of(fs, &options.write.date)?
    } else {
        options.write.date.clone()
    };
    Ok((snapshot.filter(|_| !options.rewrite_counters), as_of))
}

/// How many counter partitions keep one pass within the counters' share of the budget: a
/// pass over every night, or one carrying `carried` forward.
fn counter_partitions(
    fs: &FileSystems,
    inputs: &crate::load::counters::Inputs<'_>,
    carried: Option<&state::Snapshot>,
    w: &WriteOptions,
) -> Result<u32> {
    // Through HFiles the collectors hold half the budget while the counters compute.
    let budget = match w.via {
        Via::Thrift | Via::Auto => w.memory_budget,
        Via::Hfile => {
            let b = w.memory_budget;
            b - bulk_share(b) - queue_share(b)
        }
    };
    // Sliced, at least one counter partition per slice, so every slice shares them.
    let at_least = w.slice.map_or(1, |s| s.count);
    // Carried forward, the snapshot streams through one partition in little memory.
    let n = match carried {
        Some(_) => 1,
        None => crate::load::counters::partitions_for(fs, inputs, budget)?,
    };
    Ok(n.max(at_least))
}

/// Every unit of the night, in run order (a slice keeps its share).
fn night_units<'a>(
    night: &'a Night<'a>,
    counting: &'a Counting<'a>,
    counted: bool,
) -> Vec<(String, Unit<'a>)> {
    let mut units = parts::users(night);
    units.extend(parts::posts(night));
    units.extend(parts::follows(night));
    units.extend(parts::comments(night));
    if counted {
        units.extend(counting::units(night, counting));
    }
    units
}

/// Names every unit for the manifest and returns the name of the snapshot's commit. A unit
/// is "done" only for the tables it was run with (a resume with other --tables redoes it),
/// and for the way the work was split (merged rows carry no profile in their part units).
fn name_units(
    units: &mut Vec<(String, Unit<'_>)>,
    night: &Night<'_>,
    c: &Counting<'_>,
    slice: Option<crate::dataset::slice::Slice>,
) -> String {
    if let Some(s) = slice {
        let mut assigner = slices::Assigner::new(s);
        units.retain(|(name, _)| assigner.takes(name));
    }
    let tables: Vec<&str> = night.tables.iter().map(|t| t.name()).collect();
    let tables = tables.join(",");
    let mode = if night.merged {
        "merged".to_string()
    } else {
        format!("split in {}", c.partitions)
    };
    for (name, _) in units.iter_mut() {
        *name = format!("{tables}|{mode}|{name}");
    }
    format!(
        "{tables}|{mode}|snapshot as of {} over {}",
        c.as_of,
        c.base()
    )
}

/// A run that committed its snapshot is done; one that did not redoes any counter unit whose
/// staged partition is gone, so the snapshot it commits is whole.
fn redo_lost_counter_units(
    fs: &FileSystems,
    manifest: &mut Manifest,
    units: &[(String, Unit<'_>)],
    c: &Counting<'_>,
    snapshot_unit: &str,
) -> Result<()> {
    let (Some(next), false) = (&c.next, manifest.done.contains(snapshot_unit)) else {
        return Ok(());
    };
    for p in 0..c.partitions {
        let suffix = format!("|{}", c.unit_name(p));
        let name = units.iter().map(|(n, _)| n).find(|n| n.ends_with(&suffix));
        if let Some(name) = name {
            if manifest.done.contains(name) && !next.has_part(fs, p, c.partitions)? {
                manifest.done.remove(name);
            }
        }
    }
    Ok(())
}

/// Runs the units not done yet through the writers; returns how many ran and how many were
/// skipped. Through Thrift each unit is flushed and recorded before the next; through HFiles
/// nothing is durable before the hand-over, so the units run side by side and are recorded
/// after it.
#[allow(clippy::too_many_arguments)]
fn execute(
    fs: &FileSystems,
    w: &WriteOptions,
    units: &[(String, Unit<'_>)],
    manifest: &mut Manifest,
    bulk: Option<&BulkTarget<'_>>,
    ts: i64,
    started: Instant,
    report: &mut WriteReport,
) -> Result<(usize, usize)> {
    let (mut units_done, mut units_skipped) = (0usize, 0usize);
    let record_units = w.via == Via::Thrift;
    let written = with_writers(w, bulk, ts, started, report, &mut |router| {
        let todo: Vec<units::PendingUnit<'_, '_>> = units
            .iter()
            .enumerate()
            .filter(|(_, (name, _))| !manifest.done.contains(name))
            .map(|(index, (name, unit))| units::PendingUnit {
                index,
                name,
                unit,
                counters: units::is_counter_unit(name),
            })
            .collect();
        units_skipped = units.len() - todo.len();
        if !record_units {
            // The emission numbers order the cells: the units run side by side, without
            // barriers.
            for name in units::run_side_by_side(router, &todo)? {
                manifest.done.insert(name);
                units_done += 1;
            }
            return Ok(());
        }
        for t in &todo {
            router.start_unit(t.index);
            (t.unit)(router)?;
            router.flush()?;
            manifest.done.insert(t.name.to_string());
            units_done += 1;
            manifest.save(fs)?;
        }
        Ok(())
    });
    match bulk {
        None => written?,
        Some(target) => {
            report.hfiles = Some(target.hand_over(w, written)?);
            manifest.save(fs)?;
        }
    }
    Ok((units_done, units_skipped))
}

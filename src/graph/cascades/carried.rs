//! A night's cascades from those of an earlier night and the nights since
//! (docs/design/cascades.md, "Across nights"), in place of a build over every night.
//!
//! A cascade changes only when the nights since touch it: a new repost of its root, a new
//! record of its root or of one of its reposts, or a screen name that moved to another user
//! while a user who held it, or holds it now, reposted the root (a marker resolves to a
//! repost of the named user in the same root, or to none). Those roots are rebuilt from
//! every night, reading only their rows; every other cascade's rows are copied from the
//! base's parts, merged by root with the rebuilt ones. Memory holds the new nights' mids,
//! the touched roots and their reposts; the history and the base are read, never held.
//!
//! Invariants: the output has the rows a build over the same nights gives (tests compare
//! them night after night); a base is taken only when the nights it covered are exactly the
//! history's nights up to its date, with their stamps, and every other night is after it
//! (a late night or a night cleaned again runs the whole build), with the same number of
//! partitions. The report's figures equal the whole build's: the parents' kinds are the
//! base's, less the touched cascades as the base built them (rebuilt from the nights up to
//! the base), plus the touched cascades rebuilt. Every whole run records the nights it
//! covered, `_cascades.json` in its cascades partition, for the next night.

use arrow::array::{Array, BooleanArray, Int32Array, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use super::{
    cascades_batch, keep_top, names_of, partition_of, paths_batch, read_pass, scan_users,
    user_files, wanted, CascadesOptions, CascadesStats, Inputs, TopCascade, Watch,
    BYTES_PER_REPOST,
};
use crate::dataset::cascades::{cascades_schema, paths_schema, CASCADES_TABLE, PATHS_TABLE};
use crate::dataset::columns;
use crate::dataset::history::{self, Taken};
use crate::dataset::parquet_io::{self, ParquetWriter};
use crate::dataset::partition::{self, Staged};
use crate::dataset::slice::Slice;
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

/// The record beside a cascades partition's parts.
pub(super) const RECORD: &str = "_cascades.json";

/// Bytes a row of the new nights may cost: its mid among the new ones, its root among the
/// touched.
const BYTES_PER_NEW_ROW: u64 = 48;

/// The entities a run reads, in the order of [`Record`]'s nights.
pub(super) const ENTITIES: [&str; 3] = ["posts", "reposts", "users"];

/// What a whole run records in its partition.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Record {
    /// The posts, reposts and users nights it covered, with their stamps
    /// ([`history::covered`]).
    nights: [Vec<(String, i64)>; 3],
    /// Its number of hash partitions: its part `p` holds the roots of partition `p`.
    partitions: u32,
    stats: CascadesStats,
}

/// A whole run: the nights it covers, and the earlier night it can continue from, if any.
pub(super) struct Plan {
    covered: [Vec<(String, i64)>; 3],
    pub(super) base: Option<Base>,
}

/// The earlier night a run continues from.
pub(super) struct Base {
    date: String,
    record: Record,
    cascades: Vec<FileEntry>,
    paths: Vec<FileEntry>,
}

impl Plan {
    /// The plan of a run over `taken` (the posts, reposts and users history it reads, in
    /// [`ENTITIES`] order); `None` for a slice (it records nothing).
    pub(super) fn of(
        fs: &FileSystems,
        taken: &[Vec<Taken>; 3],
        output: &Location,
        options: &CascadesOptions,
    ) -> Result<Option<Plan>> {
        if options.slice != Slice::ALL {
            return Ok(None);
        }
        let base = Base::find(fs, taken, output, &options.date)?;
        let covered = taken.each_ref().map(|t| history::covered(t));
        Ok(Some(Plan { covered, base }))
    }

    /// Writes the record of a run of `partitions` that found `stats` into `staged`.
    pub(super) fn write_record(
        &self,
        fs: &FileSystems,
        staged: &Staged,
        partitions: u32,
        stats: &CascadesStats,
    ) -> Result<()> {
        let record = Record {
            nights: self.covered.clone(),
            partitions,
            stats: stats.clone(),
        };
        let text = serde_json::to_vec(&record).map_err(|e| Error::Io {
            op: "encode",
            path: RECORD.into(),
            source: e.into(),
        })?;
        fs.write_atomic(&staged.tmp.join(RECORD), &text)
    }
}

impl Base {
    /// Its number of partitions.
    pub(super) fn partitions(&self) -> u32 {
        self.record.partitions
    }

    /// The newest committed cascades partition before `date` that recorded its nights, when
    /// they are exactly the history's nights up to it and every other night is after it.
    fn find(
        fs: &FileSystems,
        taken: &[Vec<Taken>],
        output: &Location,
        date: &str,
    ) -> Result<Option<Base>> {
        let found = partition::newest_recorded(fs, &output.join(CASCADES_TABLE), date, RECORD)?;
        let Some((then, dir)) = found else {
            return Ok(None);
        };
        let cascades = partition::committed_parts(fs, &dir)?;
        let paths_dir = output.join(PATHS_TABLE).join(&format!("dt={then}"));
        let paths = partition::committed_parts(fs, &paths_dir)?;
        let at = dir.join(RECORD);
        let record: Record =
            serde_json::from_slice(&fs.read_to_vec(&at)?).map_err(|e| Error::BadInput {
                path: at.to_string(),
                line: 0,
                reason: format!("not a cascades record: {e}"),
            })?;
        let n = record.partitions as usize;
        if cascades.len() != n || paths.len() != n {
            return Ok(None);
        }
        let carried = taken
            .iter()
            .zip(&record.nights)
            .all(|(t, nights)| history::split_after(t, &then, nights).is_some());
        Ok(carried.then_some(Base {
            date: then,
            record,
            cascades,
            paths,
        }))
    }

    /// Part `p` of a table's files, by name.
    fn part(files: &[FileEntry], p: u32) -> Option<&FileEntry> {
        let name = format!("part-{p:05}.parquet");
        files
            .iter()
            .find(|f| f.location.file_name().is_some_and(|n| n == name))
    }
}

/// What the new nights touch.
struct Touched {
    /// Every mid the new nights hold a record of.
    mids: FxHashSet<i64>,
    /// The roots to rebuild.
    roots: FxHashSet<i64>,
    /// Reposts held to rebuild them: the new nights' and the touched cascades' in the base.
    reposts: u64,
}

/// Builds the cascades of `inputs` from `base` into `staged` (`n` partitions, the base's);
/// `None` when the touched cascades do not fit the budget (the whole build runs instead).
pub(super) fn run(
    fs: &FileSystems,
    inputs: &Inputs,
    base: &Base,
    n: u32,
    options: &CascadesOptions,
    staged: &[Staged; 2],
) -> Result<Option<CascadesStats>> {
    let Some(touched) = touched(fs, inputs, base, options.memory_budget)? else {
        return Ok(None);
    };
    log::info!(
        "cascades: continuing from {}, {} roots touched",
        base.date,
        touched.roots.len()
    );
    let room = (touched.reposts / u64::from(n)) as usize;
    let slot = |id: i64| {
        touched
            .roots
            .contains(&id)
            .then(|| crate::hash::id_bucket(id, n) as usize)
    };
    let pass = read_pass(
        fs,
        inputs,
        &Watch {
            slots: n as usize,
            room: room + room / 16,
            slot: &slot,
            split: Some(&base.date),
            mids: Some(&touched.mids),
        },
    )?;
    let before = pass.before.unwrap_or_default();
    let mut names = wanted(&pass.reads);
    names.extend(wanted(&before));
    let (named, named_before) = names_of(fs, &inputs.users, &names, Some(&base.date))?;

    let parts: Vec<(CascadesStats, CascadesStats, CascadesStats)> = pass
        .reads
        .into_par_iter()
        .zip(before)
        .enumerate()
        .map(|(p, (read, before))| {
            let p = p as u32;
            let built = partition_of(read, &named, options.top);
            let was = partition_of(before, &named_before, options.top);
            let kept = merge_part(fs, base, p, &touched.roots, &built, staged, options)?;
            Ok((built.stats, was.stats, kept))
        })
        .collect::<Result<_>>()?;

    let mut stats = CascadesStats {
        rows_read: pass.rows,
        partitions: n,
        carried_from: Some(base.date.clone()),
        ..CascadesStats::default()
    };
    let mut parents = base.record.stats.clone();
    for (built, was, kept) in &parts {
        stats.add(built);
        stats.add(kept);
        parents.add_parents(built);
        parents.sub_parents(was);
    }
    parents.reposts_without_author = parents
        .reposts_without_author
        .saturating_sub(pass.authorless_elsewhere);
    stats.sub_parents(&stats.clone());
    stats.add_parents(&parents);
    keep_top(&mut stats.top, options.top);
    Ok(Some(stats))
}

/// The new nights' mids and the roots they touch, when holding them fits `budget`.
fn touched(fs: &FileSystems, inputs: &Inputs, base: &Base, budget: u64) -> Result<Option<Touched>> {
    let new_files: Vec<&FileEntry> = inputs
        .nights
        .iter()
        .filter(|(night, _)| *night > base.date)
        .flat_map(|(_, groups)| groups.iter().flatten())
        .collect();
    let new_rows = parquet_io::parquet_rows(fs, new_files.iter().copied())?;
    if new_rows.saturating_mul(BYTES_PER_NEW_ROW) > budget {
        return Ok(None);
    }
    let mut t = Touched {
        mids: FxHashSet::default(),
        roots: FxHashSet::default(),
        reposts: 0,
    };
    for f in &new_files {
        parquet_io::read_parquet_columns(fs, f, &["mid", "retweet_mid"], &mut |b| {
            let mid = columns::ids(f, b, "mid")?;
            let rt = columns::opt_ids(b, "retweet_mid");
            for i in 0..b.num_rows() {
                let m = mid.value(i);
                t.mids.insert(m);
                if let Some(root) = columns::opt(rt, i).filter(|&r| r != m) {
                    t.roots.insert(root);
                    t.reposts += 1;
                }
            }
            Ok(())
        })?;
    }
    let moved = moved_names(fs, inputs, &base.date)?;
    for f in &base.paths {
        parquet_io::read_parquet_columns(fs, f, &["mid", "uid", "root_mid"], &mut |b| {
            let mid = columns::ids(f, b, "mid")?;
            let uid = columns::ids(f, b, "uid")?;
            let root = columns::ids(f, b, "root_mid")?;
            for i in 0..b.num_rows() {
                if t.mids.contains(&mid.value(i)) || moved.contains(&uid.value(i)) {
                    t.roots.insert(root.value(i));
                }
            }
            Ok(())
        })?;
    }
    for f in &base.cascades {
        parquet_io::read_parquet_columns(fs, f, &["root_mid", "size"], &mut |b| {
            let root = columns::ids(f, b, "root_mid")?;
            let size = columns::ids(f, b, "size")?;
            for i in 0..b.num_rows() {
                let r = root.value(i);
                if t.mids.contains(&r) {
                    t.roots.insert(r);
                }
                if t.roots.contains(&r) {
                    t.reposts += size.value(i) as u64;
                }
            }
            Ok(())
        })?;
    }
    let held = t.reposts.saturating_mul(2 * BYTES_PER_REPOST);
    Ok((held.saturating_add(new_rows * BYTES_PER_NEW_ROW) <= budget).then_some(t))
}

/// The users who held, as of the base, or hold now a screen name whose holder the new
/// nights changed (a name a new night gave, or one that a user of a new night had): a marker
/// naming it may now find another parent, in a cascade where one of them reposted.
fn moved_names(fs: &FileSystems, inputs: &Inputs, base: &str) -> Result<FxHashSet<i64>> {
    let files = user_files(&inputs.users);
    let (old, new): (Vec<_>, Vec<_>) = files.iter().partition(|(night, _)| *night <= base);
    let mut given: FxHashSet<String> = FxHashSet::default();
    let mut renamed: FxHashSet<i64> = FxHashSet::default();
    scan_users(
        fs,
        &new,
        &|uid, name| Some((uid, name.map(str::to_string))),
        &mut |_, found| {
            for (uid, name) in found {
                renamed.insert(uid);
                given.extend(name);
            }
        },
    )?;
    if renamed.is_empty() {
        // No user record in the new nights: no name moved.
        return Ok(FxHashSet::default());
    }
    // The names those users had as of the base (each one's newest record then).
    let mut had: FxHashMap<i64, Option<String>> = FxHashMap::default();
    scan_users(
        fs,
        &old,
        &|uid, name| {
            renamed
                .contains(&uid)
                .then(|| (uid, name.map(str::to_string)))
        },
        &mut |_, found| had.extend(found),
    )?;
    given.extend(had.into_values().flatten());
    let (now, then) = names_of(fs, &inputs.users, &given, Some(base))?;
    let mut moved = FxHashSet::default();
    for name in &given {
        let (a, b) = (then.get(name), now.get(name));
        if a != b {
            moved.extend(a.into_iter().chain(b).copied());
        }
    }
    Ok(moved)
}

/// Writes part `p` of both tables: the base's rows of the roots not touched, and the
/// rebuilt cascades, merged by root. Returns the figures of the rows kept.
fn merge_part(
    fs: &FileSystems,
    base: &Base,
    p: u32,
    touched: &FxHashSet<i64>,
    built: &super::Built,
    staged: &[Staged; 2],
    options: &CascadesOptions,
) -> Result<CascadesStats> {
    let missing = |table: &str| Error::BadInput {
        path: format!("{table}/dt={}", base.date),
        line: 0,
        reason: format!("no part {p} of {} partitions", base.record.partitions),
    };
    let cascades_part = Base::part(&base.cascades, p).ok_or_else(|| missing(CASCADES_TABLE))?;
    let paths_part = Base::part(&base.paths, p).ok_or_else(|| missing(PATHS_TABLE))?;
    let mut kept = CascadesStats::default();
    let mut count = |b: &RecordBatch| -> Result<()> {
        let root = columns::ids(cascades_part, b, "root_mid")?;
        let uid = columns::opt_ids(b, "root_uid");
        let size = columns::ids(cascades_part, b, "size")?;
        let depth = b
            .column_by_name("depth")
            .and_then(|c| c.as_any().downcast_ref::<Int32Array>())
            .ok_or_else(|| Error::BadInput {
                path: cascades_part.location.to_string(),
                line: 0,
                reason: "no int32 column depth".into(),
            })?;
        for i in 0..b.num_rows() {
            let root_uid = columns::opt(uid, i);
            let (size, depth) = (size.value(i) as u64, depth.value(i) as u32);
            kept.cascades += 1;
            kept.reposts += size;
            kept.roots_not_crawled += root_uid.is_none() as u64;
            kept.max_depth = kept.max_depth.max(depth);
            kept.top.push(TopCascade {
                root_mid: root.value(i),
                root_uid,
                size,
                depth,
            });
            if kept.top.len() > 4 * options.top.max(1) {
                keep_top(&mut kept.top, options.top);
            }
        }
        Ok(())
    };
    let version = options.data_page_version;
    let schema = cascades_schema();
    let mut writer = staged[0].part_writer(fs, p, schema.clone(), version)?;
    let rebuilt = cascades_batch(&built.cascades);
    merge_table(
        fs,
        cascades_part,
        &schema,
        touched,
        &rebuilt,
        &mut writer,
        &mut count,
    )?;
    writer.finish()?;
    let schema = paths_schema();
    let mut writer = staged[1].part_writer(fs, p, schema.clone(), version)?;
    let rebuilt = paths_batch(&built.placed);
    merge_table(
        fs,
        paths_part,
        &schema,
        touched,
        &rebuilt,
        &mut writer,
        &mut |_| Ok(()),
    )?;
    writer.finish()?;
    keep_top(&mut kept.top, options.top);
    Ok(kept)
}

/// Writes the rows of `base` (a part sorted by `root_mid`) whose root is not `touched`,
/// each batch of them handed to `kept` too, and the rows of `rebuilt` (sorted alike) in
/// their places.
fn merge_table(
    fs: &FileSystems,
    base: &FileEntry,
    schema: &SchemaRef,
    touched: &FxHashSet<i64>,
    rebuilt: &RecordBatch,
    writer: &mut ParquetWriter,
    kept: &mut dyn FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    let new_roots = columns::ids(base, rebuilt, "root_mid")?.clone();
    // The rebuilt rows written so far.
    let next = std::cell::Cell::new(0usize);
    // Writes the rebuilt rows whose root is below `bound` (all with `None`).
    let rebuilt_below = |bound: Option<i64>, writer: &mut ParquetWriter| -> Result<()> {
        let (from, mut end) = (next.get(), next.get());
        while end < new_roots.len() && bound.is_none_or(|b| new_roots.value(end) < b) {
            end += 1;
        }
        if end > from {
            writer.write(&rebuilt.slice(from, end - from))?;
            next.set(end);
        }
        Ok(())
    };
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let mut last: Option<i64> = None;
    parquet_io::read_parquet_columns(fs, base, &names, &mut |b| {
        let unlike = |e: arrow::error::ArrowError| Error::BadInput {
            path: base.location.to_string(),
            line: 0,
            reason: format!("not a part of this table: {e}"),
        };
        let b = RecordBatch::try_new(schema.clone(), b.columns().to_vec()).map_err(unlike)?;
        let roots = columns::ids(base, &b, "root_mid")?;
        let keep: BooleanArray = roots
            .values()
            .iter()
            .map(|r| Some(!touched.contains(r)))
            .collect();
        // Writes the kept rows of `b[from..to]`.
        let mut flush = |from: usize, to: usize, writer: &mut ParquetWriter| -> Result<()> {
            if to > from {
                let rows =
                    filter_record_batch(&b.slice(from, to - from), &keep.slice(from, to - from))
                        .map_err(unlike)?;
                if rows.num_rows() > 0 {
                    kept(&rows)?;
                    writer.write(&rows)?;
                }
            }
            Ok(())
        };
        let mut from = 0;
        for i in 0..b.num_rows() {
            let root = roots.value(i);
            if last.is_some_and(|l| root < l) {
                return Err(Error::BadInput {
                    path: base.location.to_string(),
                    line: 0,
                    reason: format!(
                        "root {root} after {} (the part is not sorted)",
                        last.unwrap_or_default()
                    ),
                });
            }
            last = Some(root);
            if next.get() < new_roots.len() && new_roots.value(next.get()) < root {
                flush(from, i, writer)?;
                from = i;
                rebuilt_below(Some(root), writer)?;
            }
        }
        flush(from, b.num_rows(), writer)
    })?;
    rebuilt_below(None, writer)
}

impl CascadesStats {
    /// Adds `o`'s parents by kind and reposts without an author.
    fn add_parents(&mut self, o: &CascadesStats) {
        self.reposts_without_author += o.reposts_without_author;
        self.parents_from_ids += o.parents_from_ids;
        self.parents_from_markers += o.parents_from_markers;
        self.parents_root_no_marker += o.parents_root_no_marker;
        self.parents_root_not_found += o.parents_root_not_found;
    }

    /// Takes `o`'s parents by kind and reposts without an author away.
    fn sub_parents(&mut self, o: &CascadesStats) {
        let sub = |a: &mut u64, b: u64| *a = a.saturating_sub(b);
        sub(&mut self.reposts_without_author, o.reposts_without_author);
        sub(&mut self.parents_from_ids, o.parents_from_ids);
        sub(&mut self.parents_from_markers, o.parents_from_markers);
        sub(&mut self.parents_root_no_marker, o.parents_root_no_marker);
        sub(&mut self.parents_root_not_found, o.parents_root_not_found);
    }
}

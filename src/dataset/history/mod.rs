//! The compacted history of a clean root: runs of consecutive committed nights, folded per
//! entity into one partition each, which the jobs that read "every night so far" take in place
//! of the nights a run covers. It keeps what those jobs read bounded by a few runs instead of
//! one folder per night (docs/nightly.md, "The history, compacted").
//!
//! A run, `<root>/<entity>/_history/run=<first>_<last>/`, holds the union of its nights
//! deduplicated by natural key, the later night's record winning, and a manifest naming each
//! night with the stamp of its `dt=` folder (its modification time, which a rerun's swap
//! changes). Follows keep the earliest known `followed_at` of a pair over the nights, as
//! `friends` and `rank` take it from several crawls; users are written in night order, so a
//! screen name that moved between users still resolves to the newest holder.
//!
//! Invariants:
//! - a reader takes a run only when its nights are exactly the table's next committed nights,
//!   each with its recorded stamp, all before the reader's own date; otherwise it reads those
//!   nights. A late night, a rerun, a swap half done or a job run for an old date never takes
//!   a run that differs from the nights it would read;
//! - the newest committed night is never compacted: the jobs of that night read it as itself;
//! - runs are written like partitions (staged, `_SUCCESS`, a journalled swap), and a run is
//!   a fixed function of its nights, so a rebuild gives the same bytes.

use serde::{Deserialize, Serialize};

use crate::dataset::{follows, parquet_io, partition, schema, Entity};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems, Location};

mod merge;

/// The folder of an entity's runs, beside its `dt=` folders.
pub const HISTORY_DIR: &str = "_history";
/// The last two items merge while the older stands for at most this many times the newer's
/// bytes: nights of one size make runs of 2, 4, 8 nights (a night is rewritten about
/// log2(nights) times, a reader takes about one run per doubling), and a large history is
/// not rewritten for small nights until they add up to about its size.
const TIER: (u64, u64) = (3, 2);
/// Entities folded at once.
const FOLD_THREADS: usize = 3;
/// Hidden, like `_SUCCESS`, so a reader of the run folder takes only its Parquet parts.
const MANIFEST: &str = "_manifest.json";
/// Parquet bytes of input per run part: a run's files stay of a size the jobs read side by
/// side (a merge streams, so this does not bound its memory).
const BYTES_PER_PART: u64 = 64 << 20;

/// A committed night as a run records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamped {
    pub date: String,
    /// The `dt=` folder's modification time, epoch ms.
    pub stamp: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Manifest {
    nights: Vec<Stamped>,
    rows: u64,
    /// The Parquet bytes of its nights: what sets the number of parts, so a run merged from
    /// runs and one merged from the same nights directly are cut alike.
    bytes: u64,
}

/// A committed run: its folder, its nights and its part files.
#[derive(Clone, Debug)]
struct Run {
    dir: Location,
    nights: Vec<Stamped>,
    bytes: u64,
    files: Vec<FileEntry>,
}

/// One step of what a reader takes: a run (labelled with its last night) or a night.
#[derive(Clone, Debug)]
pub struct Taken {
    pub date: String,
    pub folder: Location,
    pub files: Vec<FileEntry>,
    /// The nights this stands for (one for a night).
    pub nights: Vec<String>,
    /// Their stamps (the modification times of their `dt=` folders), in the same order.
    pub stamps: Vec<i64>,
}

/// The `dt=` nights of `table`, oldest first, with their folders' stamps (committed or not).
fn stamped_nights(fs: &FileSystems, table: &Location) -> Result<Vec<(Stamped, Location)>> {
    if !fs.exists(table)? {
        return Ok(Vec::new());
    }
    partition::finish_pending(fs, table)?;
    let mut nights: Vec<(Stamped, Location)> = fs
        .list(table, false)?
        .into_iter()
        .filter_map(|e| {
            let date = e.location.file_name()?.strip_prefix("dt=")?.to_string();
            chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").ok()?;
            Some((
                Stamped {
                    date,
                    stamp: e.modified,
                },
                e.location,
            ))
        })
        .collect();
    nights.sort_by(|a, b| a.0.date.cmp(&b.0.date));
    Ok(nights)
}

/// The committed runs of `table`, by first night, the longest first.
fn runs(fs: &FileSystems, table: &Location) -> Result<Vec<Run>> {
    let dir = table.join(HISTORY_DIR);
    if !fs.exists(&dir)? {
        return Ok(Vec::new());
    }
    partition::finish_pending(fs, &dir)?;
    let mut runs = Vec::new();
    for e in fs.list(&dir, false)? {
        let is_run = e
            .location
            .file_name()
            .is_some_and(|n| n.starts_with("run="));
        if !is_run || !fs.exists(&e.location.join("_SUCCESS"))? {
            continue;
        }
        let bytes = fs.read_to_vec(&e.location.join(MANIFEST))?;
        let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|err| Error::BadInput {
            path: e.location.join(MANIFEST).to_string(),
            line: 0,
            reason: format!("not a history manifest: {err}"),
        })?;
        let files = partition::committed_parts(fs, &e.location)?;
        runs.push(Run {
            dir: e.location,
            nights: manifest.nights,
            bytes: manifest.bytes,
            files,
        });
    }
    runs.sort_by(|a, b| {
        (
            a.nights.first().map(|n| &n.date),
            std::cmp::Reverse(a.nights.len()),
        )
            .cmp(&(
                b.nights.first().map(|n| &n.date),
                std::cmp::Reverse(b.nights.len()),
            ))
    });
    Ok(runs)
}

/// The longest run that stands for `nights[..k]` exactly, all of them before `before`.
fn run_at<'a>(runs: &'a [Run], nights: &[(Stamped, Location)], before: &str) -> Option<&'a Run> {
    runs.iter().find(|r| {
        r.nights.len() <= nights.len()
            && r.nights.last().is_some_and(|n| n.date.as_str() < before)
            && r.nights.iter().zip(nights).all(|(a, (b, _))| a == b)
    })
}

/// What a job dated `upto` reads of `table` (a table root of `dt=` nights), oldest first: the
/// runs that stand for its nights before `upto`, and every other committed night up to
/// `upto` as itself.
pub fn take_history(fs: &FileSystems, table: &Location, upto: &str) -> Result<Vec<Taken>> {
    let table = table.clone();
    let nights: Vec<(Stamped, Location)> = stamped_nights(fs, &table)?
        .into_iter()
        .filter(|(n, _)| n.date.as_str() <= upto)
        .collect();
    let runs = runs(fs, &table)?;
    let mut taken = Vec::new();
    let mut i = 0;
    while i < nights.len() {
        if let Some(run) = run_at(&runs, &nights[i..], upto) {
            let last = run.nights.last().expect("a run has nights");
            taken.push(Taken {
                date: last.date.clone(),
                folder: run.dir.clone(),
                files: run.files.clone(),
                nights: run.nights.iter().map(|n| n.date.clone()).collect(),
                stamps: run.nights.iter().map(|n| n.stamp).collect(),
            });
            i += run.nights.len();
            continue;
        }
        let (night, dir) = &nights[i];
        let files = partition::committed_parts(fs, dir)?;
        if !files.is_empty() {
            taken.push(Taken {
                date: night.date.clone(),
                folder: dir.clone(),
                files,
                nights: vec![night.date.clone()],
                stamps: vec![night.stamp],
            });
        }
        i += 1;
    }
    Ok(taken)
}

/// Every night `taken` stands for, with its stamp, oldest first: what a state computed from
/// it records as covered.
pub fn covered(taken: &[Taken]) -> Vec<(String, i64)> {
    taken
        .iter()
        .flat_map(|t| t.nights.iter().cloned().zip(t.stamps.iter().copied()))
        .collect()
}

/// Where the items of `taken` after the night `base` begin, when a state computed as of
/// `base` can be carried over them: the nights up to `base` are exactly `then` (the nights
/// the state covered, with the same stamps), and no item holds nights on both sides of
/// `base`. `None` otherwise (a late night, a night cleaned again, a run across `base`).
pub fn split_after(taken: &[Taken], base: &str, then: &[(String, i64)]) -> Option<usize> {
    let upto: Vec<(String, i64)> = covered(taken)
        .into_iter()
        .filter(|(date, _)| date.as_str() <= base)
        .collect();
    let first_after = taken
        .iter()
        .position(|t| t.nights.iter().any(|n| n.as_str() > base))
        .unwrap_or(taken.len());
    let straddles = taken[first_after..]
        .iter()
        .any(|t| t.nights.iter().any(|n| n.as_str() <= base));
    (upto == then && !straddles).then_some(first_after)
}

/// Which items of `taken` a state computed over `then` (nights with their stamps) has not
/// seen: an item is new when none of its nights is in `then` with the same stamp (a late
/// night, a night cleaned again, a night after the state), old when all are. `None` when an
/// item mixes both, or a night of `then` is gone: the state cannot be carried over them.
pub fn new_items(taken: &[Taken], then: &[(String, i64)]) -> Option<Vec<bool>> {
    let seen: std::collections::BTreeSet<(&str, i64)> =
        then.iter().map(|(d, s)| (d.as_str(), *s)).collect();
    let mut new = Vec::with_capacity(taken.len());
    for t in taken {
        let old = t
            .nights
            .iter()
            .zip(&t.stamps)
            .filter(|(d, s)| seen.contains(&(d.as_str(), **s)))
            .count();
        if old != 0 && old != t.nights.len() {
            return None;
        }
        new.push(old == 0);
    }
    // A night the state saw must still be there, as itself or cleaned again.
    let dates: std::collections::BTreeSet<&str> = taken
        .iter()
        .flat_map(|t| t.nights.iter().map(String::as_str))
        .collect();
    then.iter()
        .all(|(d, _)| dates.contains(d.as_str()))
        .then_some(new)
}

/// What [`compact`] did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Compacted {
    /// Runs written, over every entity.
    pub runs_written: u64,
    /// Nights those runs stand for.
    pub nights: u64,
    /// Rows written into them.
    pub rows: u64,
    /// Superseded runs deleted.
    pub runs_deleted: u64,
}

/// One item of the merge plan: an existing run, or a night read as itself.
#[derive(Clone, Debug)]
struct Item {
    nights: Vec<Stamped>,
    /// The Parquet bytes of the nights it stands for.
    bytes: u64,
    files: Vec<FileEntry>,
    /// The run folder this is, if it is one.
    run: Option<Location>,
}

/// Folds the committed nights of every entity under `root`, all but the newest, into runs:
/// existing runs that still stand for their nights are kept, the nights after them are pushed
/// one by one, and whenever the last two items are of about one size (in bytes, [`TIER`]) they
/// are merged into one run. Runs no longer taken are deleted.
pub fn compact(fs: &FileSystems, root: &Location, data_page_version: u8) -> Result<Compacted> {
    // The entities fold side by side, [`FOLD_THREADS`] at a time: a small run's cost is mostly
    // waiting on the NameNode to close its files, and each thread holds one part in memory.
    let queue = std::sync::Mutex::new(Entity::ALL.to_vec());
    let next = || queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
    let folded: Vec<Result<Compacted>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..FOLD_THREADS)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Compacted::default();
                    while let Some(entity) = next() {
                        compact_entity(fs, root, entity, data_page_version, &mut done)?;
                    }
                    Ok(done)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|h| h.join().expect("a fold thread does not panic"))
            .collect()
    });
    let mut done = Compacted::default();
    for worker in folded {
        let worker = worker?;
        done.runs_written += worker.runs_written;
        done.nights += worker.nights;
        done.rows += worker.rows;
        done.runs_deleted += worker.runs_deleted;
    }
    Ok(done)
}

/// How many of the last items (their bytes, oldest first) the merges that a push sets off
/// fold into one run (1: none): merging the last two while the older is at most [`TIER`]
/// times the newer, again and again. They are written as one run, which has the bytes the
/// chain of merges would end with.
fn items_to_merge(bytes: &[u64]) -> usize {
    let mut stack: Vec<(u64, usize)> = bytes.iter().map(|&b| (b, 1)).collect();
    while let [.., older, newer] = stack[..] {
        if older.0 * TIER.1 > newer.0 * TIER.0 {
            break;
        }
        stack.truncate(stack.len() - 2);
        stack.push((older.0 + newer.0, older.1 + newer.1));
    }
    stack.last().map_or(0, |t| t.1)
}

fn compact_entity(
    fs: &FileSystems,
    root: &Location,
    entity: Entity,
    data_page_version: u8,
    done: &mut Compacted,
) -> Result<()> {
    let table = root.join(entity.name());
    let mut nights = stamped_nights(fs, &table)?;
    // The newest night stays itself: tonight's jobs read it as the night.
    let Some((newest, _)) = nights.pop() else {
        return Ok(());
    };
    let runs = runs(fs, &table)?;
    let mut stack: Vec<Item> = Vec::new();
    let mut i = 0;
    while i < nights.len() {
        let item = match run_at(&runs, &nights[i..], &newest.date) {
            Some(run) => Item {
                nights: run.nights.clone(),
                bytes: run.bytes,
                files: run.files.clone(),
                run: Some(run.dir.clone()),
            },
            None => match night_item(fs, &nights[i])? {
                Some(item) => item,
                // Not committed (a swap half done is finished by the listing): it ends what
                // can be folded.
                None => break,
            },
        };
        i += item.nights.len();
        stack.push(item);
        let sizes: Vec<u64> = stack.iter().map(|t| t.bytes).collect();
        let take = items_to_merge(&sizes);
        if take > 1 {
            let merged = stack.split_off(stack.len() - take);
            let run = write_run(fs, &table, entity, &merged, data_page_version)?;
            done.runs_written += 1;
            done.nights += run.nights.len() as u64;
            done.rows += run.rows;
            stack.push(run.item);
        }
    }
    // Every run folder not in the stack is superseded (merged into a longer one) or stale.
    let kept: Vec<&Location> = stack.iter().filter_map(|s| s.run.as_ref()).collect();
    let dir = table.join(HISTORY_DIR);
    if fs.exists(&dir)? {
        for e in fs.list(&dir, false)? {
            let name = e.location.file_name().unwrap_or_default();
            let stale_run = name.starts_with("run=") && !kept.contains(&&e.location);
            let stale_tmp = name.starts_with("_tmp.") || name.starts_with("_old.");
            if stale_run || stale_tmp {
                fs.delete(&e.location)?;
                done.runs_deleted += stale_run as u64;
            }
        }
    }
    Ok(())
}

/// A committed night as an item of the plan; `None` when it is not committed.
fn night_item(fs: &FileSystems, (night, dir): &(Stamped, Location)) -> Result<Option<Item>> {
    let files = partition::committed_parts(fs, dir)?;
    Ok((!files.is_empty()).then(|| Item {
        nights: vec![night.clone()],
        bytes: files.iter().map(|f| f.len).sum(),
        files,
        run: None,
    }))
}

struct Written {
    item: Item,
    nights: Vec<Stamped>,
    rows: u64,
}

/// The name of the run standing for `nights`.
fn run_name(nights: &[Stamped]) -> String {
    let (first, last) = (&nights[0].date, &nights[nights.len() - 1].date);
    format!("run={first}_{last}")
}

/// Merges `items` (oldest first) into the parts and manifest of a run, written into `dir`;
/// returns its rows.
fn build_run(
    fs: &FileSystems,
    dir: &Location,
    entity: Entity,
    items: &[Item],
    data_page_version: u8,
) -> Result<u64> {
    let nights: Vec<Stamped> = items.iter().flat_map(|i| i.nights.clone()).collect();
    let bytes: u64 = items.iter().map(|i| i.bytes).sum();
    let inputs: Vec<&[FileEntry]> = items.iter().map(|i| i.files.as_slice()).collect();
    // Users stay in one part, in night order, so the newest holder of a name is read last.
    let parts = match entity {
        Entity::Users => 1,
        _ => bytes.div_ceil(BYTES_PER_PART).max(1) as usize,
    };
    let mut rows = 0;
    for p in 0..parts {
        let props = part_properties(entity, p, parts, data_page_version);
        let location = dir.join(&format!("part-{p:05}.parquet"));
        let mut writer =
            parquet_io::ParquetWriter::create_staged(fs, &location, schema::schema(entity), props)?;
        rows += merge::write_part(fs, entity, &inputs, p, parts, &mut writer)?;
        writer.finish()?;
    }
    let manifest = Manifest {
        nights,
        rows,
        bytes,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serialises");
    fs.write_atomic(&dir.join(MANIFEST), &json)?;
    Ok(rows)
}

/// Merges `items` (oldest first) into one committed run.
fn write_run(
    fs: &FileSystems,
    table: &Location,
    entity: Entity,
    items: &[Item],
    data_page_version: u8,
) -> Result<Written> {
    let nights: Vec<Stamped> = items.iter().flat_map(|i| i.nights.clone()).collect();
    let staged = partition::Staged::new(
        &table.join(HISTORY_DIR),
        &run_name(&nights),
        &partition::run_tag(),
    );
    let result = build_run(fs, &staged.tmp, entity, items, data_page_version);
    let rows = match result {
        Ok(rows) => rows,
        Err(e) => {
            partition::abandon(fs, std::slice::from_ref(&staged));
            return Err(e);
        }
    };
    partition::commit(fs, std::slice::from_ref(&staged))?;
    let files = partition::committed_parts(fs, &staged.target)?;
    Ok(Written {
        item: Item {
            nights: nights.clone(),
            bytes: items.iter().map(|i| i.bytes).sum(),
            files,
            run: Some(staged.target.clone()),
        },
        nights,
        rows,
    })
}

/// What [`check`] found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Checked {
    /// Runs rebuilt from their nights and compared.
    pub runs: u64,
    /// Runs whose files equal their rebuild, byte for byte.
    pub same: u64,
    /// Runs that differ from their rebuild: the reason, by run.
    pub differ: Vec<(String, String)>,
    /// Runs whose nights changed since they were written (a rerun, a late night): no job
    /// reads them, and the next fold replaces them.
    pub stale: Vec<String>,
}

/// Rebuilds every run of every entity under `root` from the nights it stands for, into a
/// scratch folder beside it, and compares the two byte for byte.
pub fn check(fs: &FileSystems, root: &Location, data_page_version: u8) -> Result<Checked> {
    let mut checked = Checked::default();
    for entity in Entity::ALL {
        let table = root.join(entity.name());
        let nights = stamped_nights(fs, &table)?;
        for run in runs(fs, &table)? {
            let mut items = Vec::new();
            for n in &run.nights {
                let found = nights.iter().find(|(m, _)| m == n);
                match found
                    .map(|night| night_item(fs, night))
                    .transpose()?
                    .flatten()
                {
                    Some(item) => items.push(item),
                    None => break,
                }
            }
            if items.len() != run.nights.len() {
                checked.stale.push(run.dir.to_string());
                continue;
            }
            checked.runs += 1;
            let scratch = partition::Staged::new(
                &table.join(HISTORY_DIR),
                &format!("check.{}", run_name(&run.nights)),
                &partition::run_tag(),
            );
            let compared = build_run(fs, &scratch.tmp, entity, &items, data_page_version)
                .and_then(|_| differences(fs, &run.dir, &scratch.tmp));
            let _ = fs.delete(&scratch.tmp);
            match compared? {
                None => checked.same += 1,
                Some(why) => checked.differ.push((run.dir.to_string(), why)),
            }
        }
    }
    Ok(checked)
}

/// How the files of `run` differ from those of `rebuilt`, if they do (`_SUCCESS` aside).
fn differences(fs: &FileSystems, run: &Location, rebuilt: &Location) -> Result<Option<String>> {
    let files = |dir: &Location| -> Result<Vec<(String, FileEntry)>> {
        let mut files: Vec<(String, FileEntry)> = fs
            .list(dir, false)?
            .into_iter()
            .filter_map(|e| Some((e.location.file_name()?, e)))
            .filter(|(name, _)| name != "_SUCCESS")
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    };
    let (ours, theirs) = (files(run)?, files(rebuilt)?);
    let names = |f: &[(String, FileEntry)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    if names(&ours) != names(&theirs) {
        return Ok(Some(format!(
            "files {:?}, rebuilt {:?}",
            names(&ours),
            names(&theirs)
        )));
    }
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        let same = fs.read_to_vec(&a.location)? == fs.read_to_vec(&b.location)?
            || (name.ends_with(".parquet") && merge::same_rows(fs, a, b)?);
        if !same {
            return Ok(Some(format!("{name} differs from its rebuild")));
        }
    }
    Ok(None)
}

/// Deletes every run under `root` and folds the nights again: the repair of a history that
/// is lost or suspect. Until it is done the jobs read the nights, which is always right.
pub fn rebuild(fs: &FileSystems, root: &Location, data_page_version: u8) -> Result<Compacted> {
    for entity in Entity::ALL {
        let dir = root.join(entity.name()).join(HISTORY_DIR);
        if fs.exists(&dir)? {
            fs.delete(&dir)?;
        }
    }
    compact(fs, root, data_page_version)
}

/// An entity's Parquet layout, with follows' `p/N` footer (every run part says which part of
/// the pair hash it is, as clean's do).
fn part_properties(
    entity: Entity,
    p: usize,
    parts: usize,
    data_page_version: u8,
) -> parquet::file::properties::WriterProperties {
    let props = schema::parquet_properties(entity, data_page_version);
    if entity != Entity::Follows {
        return props;
    }
    props
        .into_builder()
        .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
            follows::PAIR_PARTITION_KEY.to_string(),
            follows::footer_value(p, parts),
        )]))
        .build()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow::array::{
        new_null_array, Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch,
        StringArray, TimestampMillisecondArray,
    };
    use arrow::datatypes::{Int64Type, TimestampMillisecondType};

    use super::*;

    const DATES: [&str; 6] = [
        "2026-11-01",
        "2026-11-02",
        "2026-11-03",
        "2026-11-04",
        "2026-11-05",
        "2026-11-06",
    ];

    /// A follow as a night holds it: (follower, followee, followed_at).
    type Follow = (i64, i64, Option<i64>);
    /// Pairs as a job folds them: the earliest known follow time, the newest crawl time.
    type Folded = BTreeMap<(i64, i64), (Option<i64>, i64)>;

    fn follows_batch(rows: &[Follow], crawl: i64) -> RecordBatch {
        let schema = schema::schema(Entity::Follows);
        let tz = Some(Arc::<str>::from("UTC"));
        let ids =
            |f: fn(&Follow) -> i64| Arc::new(Int64Array::from_iter_values(rows.iter().map(f)));
        let at: TimestampMillisecondArray = rows.iter().map(|r| r.2).collect();
        let crawl = TimestampMillisecondArray::from(vec![crawl; rows.len()]);
        RecordBatch::try_new(
            schema,
            vec![
                ids(|r| r.0),
                ids(|r| r.1),
                Arc::new(at.with_timezone_opt(tz.clone())),
                Arc::new(crawl.with_timezone_opt(tz)),
            ],
        )
        .unwrap()
    }

    fn users_batch(rows: &[(i64, &str)]) -> RecordBatch {
        let schema = schema::schema(Entity::Users);
        let n = rows.len();
        let columns = schema
            .fields()
            .iter()
            .map(|f| -> ArrayRef {
                match f.name().as_str() {
                    "uid" => Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                    "screen_name" => {
                        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1)))
                    }
                    "counts_capped" => Arc::new(BooleanArray::from(vec![false; n])),
                    "crawl_time" => {
                        Arc::new(TimestampMillisecondArray::from(vec![0; n]).with_timezone("UTC"))
                    }
                    _ => new_null_array(f.data_type(), n),
                }
            })
            .collect();
        RecordBatch::try_new(schema, columns).unwrap()
    }

    /// Commits `batch` as `<root>/<entity>/dt=<date>/`, as clean commits a night.
    fn commit_night(
        fs: &FileSystems,
        root: &Location,
        entity: Entity,
        date: &str,
        batch: &RecordBatch,
    ) {
        // A rerun's folder must carry a later stamp than the one it replaces.
        std::thread::sleep(std::time::Duration::from_millis(3));
        let staged = partition::Staged::new(
            &root.join(entity.name()),
            &format!("dt={date}"),
            &partition::run_tag(),
        );
        staged.write_part(fs, 0, batch, 1).unwrap();
        partition::commit(fs, &[staged]).unwrap();
    }

    fn read_rows(fs: &FileSystems, files: &[FileEntry]) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        for f in files {
            parquet_io::read_parquet(fs, f, &mut |b| {
                out.push(b.clone());
                Ok(())
            })
            .unwrap();
        }
        out
    }

    /// What a job reads, folded as the jobs fold nights: the later step wins a pair, the
    /// earliest known follow time is kept.
    fn fold(steps: &[Vec<RecordBatch>]) -> Folded {
        let mut out = Folded::new();
        for batches in steps {
            for b in batches {
                let a = b.column(0).as_primitive::<Int64Type>();
                let e = b.column(1).as_primitive::<Int64Type>();
                let at = b.column(2).as_primitive::<TimestampMillisecondType>();
                let crawl = b.column(3).as_primitive::<TimestampMillisecondType>();
                for r in 0..b.num_rows() {
                    let t = at.is_valid(r).then(|| at.value(r));
                    let slot = out.entry((a.value(r), e.value(r))).or_insert((t, 0));
                    slot.0 = match (slot.0, t) {
                        (Some(x), Some(y)) => Some(x.min(y)),
                        (x, y) => x.or(y),
                    };
                    slot.1 = crawl.value(r);
                }
            }
        }
        out
    }

    /// The history up to `upto` as a job takes it, folded; and how many steps it took.
    fn as_taken(fs: &FileSystems, root: &Location, upto: &str) -> (Folded, Vec<usize>) {
        let taken = take_history(fs, &root.join("follows"), upto).unwrap();
        let steps: Vec<Vec<RecordBatch>> = taken.iter().map(|t| read_rows(fs, &t.files)).collect();
        (fold(&steps), taken.iter().map(|t| t.nights.len()).collect())
    }

    /// The same history from the nights alone: the reference.
    fn from_nights(nights: &BTreeMap<&str, Vec<Follow>>, upto: &str) -> Folded {
        let steps: Vec<Vec<RecordBatch>> = nights
            .iter()
            .filter(|(d, _)| **d <= upto)
            .map(|(d, rows)| vec![follows_batch(rows, crawl_of(d))])
            .collect();
        fold(&steps)
    }

    fn crawl_of(date: &str) -> i64 {
        date[8..].parse::<i64>().unwrap()
    }

    /// Nights that re-crawl pairs, with follow times that move, vanish and appear.
    fn generated(seed: u64, dates: &[&'static str]) -> BTreeMap<&'static str, Vec<Follow>> {
        let mut state = seed;
        let mut next = move || {
            state = crate::hash::splitmix64(state);
            state
        };
        dates
            .iter()
            .map(|d| {
                let mut rows: BTreeMap<(i64, i64), Option<i64>> = BTreeMap::new();
                for _ in 0..40 {
                    let (a, b) = ((next() % 12) as i64, (next() % 12) as i64);
                    let at = (next() % 3 != 0).then(|| (next() % 1000) as i64);
                    rows.insert((a, b), at);
                }
                // In clean's order, which a run's merge relies on.
                let mut rows: Vec<Follow> = rows.into_iter().map(|((a, b), t)| (a, b, t)).collect();
                rows.sort_by_key(|&(a, b, _)| follows::sort_key(a, b));
                (*d, rows)
            })
            .collect()
    }

    fn setup(nights: &BTreeMap<&str, Vec<Follow>>) -> (tempfile::TempDir, FileSystems, Location) {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let root = fs.parse(dir.path().to_str().unwrap()).unwrap();
        for (d, rows) in nights {
            commit_night(
                &fs,
                &root,
                Entity::Follows,
                d,
                &follows_batch(rows, crawl_of(d)),
            );
        }
        (dir, fs, root)
    }

    #[test]
    fn a_push_merges_the_items_its_chain_of_merges_would() {
        assert_eq!(items_to_merge(&[]), 0);
        assert_eq!(items_to_merge(&[10]), 1);
        assert_eq!(items_to_merge(&[10, 10]), 2);
        assert_eq!(items_to_merge(&[20, 10]), 1);
        // Nights of about one size: 1+1, then 2+2, then 4+4, all in one run of 8.
        assert_eq!(items_to_merge(&[40, 21, 10, 9]), 4);
        assert_eq!(items_to_merge(&[80, 20, 10, 11]), 3);
        // Pushed night by night, equal nights make runs of 2, 4, 8 nights.
        let fold = |nights: &[u64]| -> Vec<u64> {
            let mut stack: Vec<u64> = Vec::new();
            for &night in nights {
                stack.push(night);
                let take = items_to_merge(&stack);
                let merged: u64 = stack.split_off(stack.len() - take).iter().sum();
                stack.push(merged);
            }
            stack
        };
        assert_eq!(fold(&[10; 13]), [80, 40, 10]);
        // A large first night stays as it is until the small ones add up to about its size.
        let mut nights = vec![1000];
        nights.extend([10; 100]);
        assert_eq!(fold(&nights), [1000, 640, 320, 40]);
        nights.extend([10; 28]);
        assert_eq!(fold(&nights), [2280]);
    }

    #[test]
    fn runs_are_read_as_the_nights_they_stand_for() {
        for seed in 1..4 {
            let nights = generated(seed, &DATES[..5]);
            let (_dir, fs, root) = setup(&nights);
            let done = compact(&fs, &root, 1).unwrap();
            // Nights 1-4 (not the newest): a run of two, then that run and nights 3 and 4
            // in one run of four.
            assert_eq!(done.runs_written, 2, "{done:?}");
            assert_eq!(done.runs_deleted, 1, "{done:?}");
            let (got, steps) = as_taken(&fs, &root, DATES[4]);
            assert_eq!(steps, vec![4, 1]);
            assert_eq!(got, from_nights(&nights, DATES[4]), "seed {seed}");
            // A job of an older date reads its own nights.
            let (got, steps) = as_taken(&fs, &root, DATES[2]);
            assert_eq!(steps, vec![1, 1, 1]);
            assert_eq!(got, from_nights(&nights, DATES[2]));
            // Compacting again changes nothing.
            let again = compact(&fs, &root, 1).unwrap();
            assert_eq!(again.runs_written + again.runs_deleted, 0, "{again:?}");
        }
    }

    #[test]
    fn a_rerun_or_a_late_night_is_read_from_its_nights_until_folded_again() {
        let mut nights = generated(7, &[DATES[0], DATES[1], DATES[3], DATES[4], DATES[5]]);
        let (_dir, fs, root) = setup(&nights);
        compact(&fs, &root, 1).unwrap();
        assert_eq!(as_taken(&fs, &root, DATES[5]).1, vec![4, 1]);

        // A rerun of a folded night with other records.
        let rerun = generated(99, &[DATES[1]]).remove(DATES[1]).unwrap();
        commit_night(
            &fs,
            &root,
            Entity::Follows,
            DATES[1],
            &follows_batch(&rerun, 2),
        );
        nights.insert(DATES[1], rerun);
        let (got, steps) = as_taken(&fs, &root, DATES[5]);
        assert_eq!(
            steps,
            vec![1, 1, 1, 1, 1],
            "the run no longer stands for night 2"
        );
        assert_eq!(got, from_nights(&nights, DATES[5]));
        compact(&fs, &root, 1).unwrap();
        let (got, steps) = as_taken(&fs, &root, DATES[5]);
        assert_eq!(steps, vec![4, 1]);
        assert_eq!(got, from_nights(&nights, DATES[5]));

        // A late night between two folded ones.
        let late = generated(5, &[DATES[2]]).remove(DATES[2]).unwrap();
        commit_night(
            &fs,
            &root,
            Entity::Follows,
            DATES[2],
            &follows_batch(&late, 3),
        );
        nights.insert(DATES[2], late);
        let (got, steps) = as_taken(&fs, &root, DATES[5]);
        assert_eq!(steps.iter().sum::<usize>(), 6);
        assert_eq!(got, from_nights(&nights, DATES[5]));
        compact(&fs, &root, 1).unwrap();
        let (got, steps) = as_taken(&fs, &root, DATES[5]);
        assert_eq!(steps, vec![4, 1, 1]);
        assert_eq!(got, from_nights(&nights, DATES[5]));
    }

    #[test]
    fn a_rebuilt_history_has_the_same_bytes() {
        let nights = generated(3, &DATES);
        let (dir, fs, root) = setup(&nights);
        let history = dir.path().join("follows").join(HISTORY_DIR);
        let bytes = |h: &std::path::Path| -> BTreeMap<String, Vec<u8>> {
            let mut out = BTreeMap::new();
            for run in std::fs::read_dir(h).unwrap() {
                let run = run.unwrap().path();
                for f in std::fs::read_dir(&run).unwrap() {
                    let f = f.unwrap().path();
                    let name = format!(
                        "{}/{}",
                        run.file_name().unwrap().to_string_lossy(),
                        f.file_name().unwrap().to_string_lossy()
                    );
                    out.insert(name, std::fs::read(&f).unwrap());
                }
            }
            out
        };
        compact(&fs, &root, 1).unwrap();
        let first = bytes(&history);
        assert!(
            first.keys().any(|k| k.ends_with(".parquet")),
            "{:?}",
            first.keys()
        );
        std::fs::remove_dir_all(&history).unwrap();
        compact(&fs, &root, 1).unwrap();
        assert_eq!(bytes(&history), first);
    }

    #[test]
    fn check_finds_a_run_that_differs_from_its_nights_and_rebuild_mends_it() {
        let nights = generated(11, &DATES);
        let (dir, fs, root) = setup(&nights);
        compact(&fs, &root, 1).unwrap();
        let checked = check(&fs, &root, 1).unwrap();
        assert_eq!((checked.runs, checked.same), (1, 1), "{checked:?}");
        assert!(checked.differ.is_empty() && checked.stale.is_empty());

        // A run part with other rows, as a bug or a disk could leave it.
        let run = dir
            .path()
            .join("follows")
            .join(HISTORY_DIR)
            .join(format!("run={}_{}", DATES[0], DATES[3]));
        let wrong = generated(12, &[DATES[0]]).remove(DATES[0]).unwrap();
        let fs_run = fs.parse(run.to_str().unwrap()).unwrap();
        let part = fs_run.join("part-00000.parquet");
        std::fs::remove_file(run.join("part-00000.parquet")).unwrap();
        let batch = follows_batch(&wrong, 1);
        let props = schema::parquet_properties(Entity::Follows, 1);
        parquet_io::write_parquet(&fs, &part, batch.schema(), props, Some(&batch)).unwrap();
        let checked = check(&fs, &root, 1).unwrap();
        assert_eq!(checked.differ.len(), 1, "{checked:?}");
        assert!(
            checked.differ[0].1.contains("part-00000.parquet"),
            "{checked:?}"
        );

        // A rerun of one of its nights makes it stale, not wrong.
        let rerun = generated(13, &[DATES[1]]).remove(DATES[1]).unwrap();
        commit_night(
            &fs,
            &root,
            Entity::Follows,
            DATES[1],
            &follows_batch(&rerun, 2),
        );
        let checked = check(&fs, &root, 1).unwrap();
        assert_eq!((checked.runs, checked.stale.len()), (0, 1), "{checked:?}");

        rebuild(&fs, &root, 1).unwrap();
        let checked = check(&fs, &root, 1).unwrap();
        assert_eq!((checked.runs, checked.same), (1, 1), "{checked:?}");
    }

    #[test]
    fn a_long_run_merged_from_runs_has_the_bytes_of_one_merge_of_its_nights() {
        // Nights of 6,000 follows among 150 users, so pairs come back night after night and
        // the run of the first four holds more than two chunks of rows.
        let nights: BTreeMap<&str, Vec<Follow>> = DATES[..5]
            .iter()
            .enumerate()
            .map(|(n, d)| {
                let mut rows: Vec<Follow> = (0..6_000i64)
                    .map(|i| {
                        let pair = (i * 7_919 + n as i64 * 104_729) % 22_500;
                        let at = (pair % 5 != 0).then_some(pair + n as i64);
                        (pair / 150, pair % 150, at)
                    })
                    .collect();
                rows.sort_by_key(|&(a, b, _)| follows::sort_key(a, b));
                (*d, rows)
            })
            .collect();
        let (_dir, fs, root) = setup(&nights);
        compact(&fs, &root, 1).unwrap();
        let (got, steps) = as_taken(&fs, &root, DATES[4]);
        assert_eq!(steps, vec![4, 1]);
        assert!(got.len() > 2 * merge::CHUNK, "{}", got.len());
        assert_eq!(got, from_nights(&nights, DATES[4]));
        let checked = check(&fs, &root, 1).unwrap();
        assert_eq!((checked.runs, checked.same), (1, 1), "{checked:?}");
    }

    #[test]
    fn a_night_out_of_key_order_is_refused_by_name() {
        let mut nights = generated(21, &DATES[..3]);
        nights.get_mut(DATES[0]).unwrap().reverse();
        let (_dir, fs, root) = setup(&nights);
        let err = compact(&fs, &root, 1).unwrap_err().to_string();
        assert!(
            err.contains("dt=2026-11-01") && err.contains("out of clean's order"),
            "{err}"
        );
    }

    #[test]
    fn users_are_streamed_newest_row_of_each_uid_in_reading_order() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let root = fs.parse(dir.path().to_str().unwrap()).unwrap();
        // Nights of 12,000 users drawn from 40,000 uids, so uids come back night after night
        // and the run of the first four holds more than two chunks of rows.
        let nights: Vec<Vec<(i64, String)>> = (0..5u64)
            .map(|n| {
                (0..12_000u64)
                    .map(|i| {
                        let uid = (i * 7_919 + n * 104_729) % 40_000;
                        (uid as i64, format!("u{uid}-night{n}"))
                    })
                    .collect()
            })
            .collect();
        for (date, users) in DATES.iter().zip(&nights) {
            let rows: Vec<(i64, &str)> = users.iter().map(|(u, s)| (*u, s.as_str())).collect();
            commit_night(&fs, &root, Entity::Users, date, &users_batch(&rows));
        }
        compact(&fs, &root, 1).unwrap();
        let taken = take_history(&fs, &root.join("users"), DATES[4]).unwrap();
        assert_eq!(
            taken.iter().map(|t| t.nights.len()).collect::<Vec<_>>(),
            vec![4, 1]
        );
        // The naive merge: every row of the four nights in order, each uid at its last place.
        let read: Vec<&(i64, String)> = nights[..4].iter().flatten().collect();
        let last: BTreeMap<i64, usize> = read.iter().enumerate().map(|(i, r)| (r.0, i)).collect();
        let mut expected: Vec<(i64, String)> = last.values().map(|&i| read[i].clone()).collect();
        expected.sort_by_key(|r| last[&r.0]);
        let mut got = Vec::new();
        for b in read_rows(&fs, &taken[0].files) {
            let uid = b.column_by_name("uid").unwrap().as_primitive::<Int64Type>();
            let name = b.column_by_name("screen_name").unwrap().as_string::<i32>();
            for r in 0..b.num_rows() {
                got.push((uid.value(r), name.value(r).to_string()));
            }
        }
        assert!(got.len() > 2 * merge::CHUNK, "{}", got.len());
        assert_eq!(got, expected);
        // Merged from a run and two nights, it has the bytes of one merge of the four nights.
        let checked = check(&fs, &root, 1).unwrap();
        assert_eq!((checked.runs, checked.same), (1, 1), "{checked:?}");
    }

    #[test]
    fn users_are_in_night_order_so_a_moved_name_resolves_to_its_newest_holder() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FileSystems::new("file:///");
        let root = fs.parse(dir.path().to_str().unwrap()).unwrap();
        // "x" is 9's on night 1 and 2's on night 2 (a higher uid first, a lower one later),
        // and the run of nights 1-4 is merged from the run 1-2 and nights 3 and 4.
        let nights: [&[(i64, &str)]; 5] = [
            &[(9, "x"), (5, "a")],
            &[(2, "x")],
            &[(7, "b")],
            &[(8, "c")],
            &[(1, "d")],
        ];
        for (date, users) in DATES.iter().zip(nights) {
            commit_night(&fs, &root, Entity::Users, date, &users_batch(users));
        }
        compact(&fs, &root, 1).unwrap();
        let taken = take_history(&fs, &root.join("users"), DATES[4]).unwrap();
        assert_eq!(
            taken.iter().map(|t| t.nights.len()).collect::<Vec<_>>(),
            vec![4, 1]
        );
        // The same bytes as one merge of the four nights.
        let checked = check(&fs, &root, 1).unwrap();
        assert_eq!((checked.runs, checked.same), (1, 1), "{checked:?}");
        let mut holder = BTreeMap::new();
        for b in read_rows(&fs, &taken[0].files) {
            let uid = b
                .column_by_name("uid")
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone();
            let name = b
                .column_by_name("screen_name")
                .unwrap()
                .as_string::<i32>()
                .clone();
            for r in 0..b.num_rows() {
                holder.insert(name.value(r).to_string(), uid.value(r));
            }
        }
        assert_eq!(holder["x"], 2);
        assert_eq!(holder["a"], 5);
    }

    fn taken_of(nights: &[(&str, i64)]) -> Taken {
        Taken {
            date: nights.last().unwrap().0.to_string(),
            folder: Location::Local("/nowhere".into()),
            files: Vec::new(),
            nights: nights.iter().map(|n| n.0.to_string()).collect(),
            stamps: nights.iter().map(|n| n.1).collect(),
        }
    }

    #[test]
    fn items_a_state_has_not_seen_are_new_and_a_mixed_item_stops_the_carry() {
        let then = |n: &[(&str, i64)]| -> Vec<(String, i64)> {
            n.iter().map(|(d, s)| (d.to_string(), *s)).collect()
        };
        let taken = vec![
            taken_of(&[(DATES[0], 1), (DATES[1], 2)]),
            taken_of(&[(DATES[2], 3)]),
            taken_of(&[(DATES[3], 4)]),
        ];
        let seen = then(&[(DATES[0], 1), (DATES[1], 2), (DATES[2], 3)]);
        assert_eq!(new_items(&taken, &seen), Some(vec![false, false, true]));
        // A late night (3 unseen while 4 was seen), and a night cleaned again (restamped).
        let late = then(&[(DATES[0], 1), (DATES[1], 2), (DATES[3], 4)]);
        assert_eq!(new_items(&taken, &late), Some(vec![false, true, false]));
        let restamped = then(&[(DATES[0], 1), (DATES[1], 2), (DATES[2], 9)]);
        assert_eq!(new_items(&taken, &restamped), Some(vec![false, true, true]));
        // A run holding a seen and an unseen night, or a seen night gone.
        assert_eq!(new_items(&taken, &then(&[(DATES[0], 1)])), None);
        let gone = then(&[(DATES[0], 1), (DATES[1], 2), (DATES[4], 5)]);
        assert_eq!(new_items(&taken, &gone), None);
        assert_eq!(new_items(&taken, &[]), Some(vec![true, true, true]));
    }
}

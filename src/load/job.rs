//! The `load` job itself: the night's units of work (one per Parquet part, one per counter
//! partition), run in order through the writers with a checkpoint manifest, then the counter
//! snapshot committed (the invariants are the module's, [`super`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arrow::array::Array;

use super::counters::{self, PostCounts};
use super::rows::*;
use super::{slices, state, units, LoadOptions, LoadReport};
use crate::dataset::{columns, partition};
use crate::error::{Error, Result};
use crate::hbase::layout::keys::{self, Relation};
use crate::hbase::layout::{be, cell, Table};
use crate::hbase::write::route::{bulk_target, choose};
use crate::hbase::write::writers::{bulk_share, queue_share, with_writers, Router, Unit};
use crate::hbase::write::{cell_timestamp, ensure_tables, Via, WriteOptions, WriteReport};
use crate::hbase::Put;
use crate::hdfs::{FileEntry, FileSystems, Location};

/// Runs the load.
pub fn run(fs: &FileSystems, options: &LoadOptions) -> Result<LoadReport> {
    let started = Instant::now();
    let ts = cell_timestamp(&options.write.date)?;
    let root = fs.parse(&options.input)?;
    let mut files: BTreeMap<&str, Vec<FileEntry>> = BTreeMap::new();
    for entity in ["users", "posts", "follows", "comments", "reposts"] {
        files.insert(
            entity,
            partition_files(fs, &root, entity, &options.write.date)?,
        );
    }
    if files.values().all(Vec::is_empty) {
        return Err(Error::BadInput {
            path: root.to_string(),
            line: 0,
            reason: format!(
                "no committed clean partitions for dt={}",
                options.write.date
            ),
        });
    }
    let auto = match options.write.via {
        Via::Auto => {
            let rows = partition::parquet_rows(fs, files.values().flatten())?;
            Some(choose(fs, &root, &options.write, rows)?)
        }
        _ => None,
    };
    let resolved;
    let options = match &auto {
        Some(choice) => {
            log::info!("--via auto: {}", choice.because);
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

    // Tables first: namespace and any missing table, pre-split (by the submitter when the
    // night is loaded in slices).
    let slice = options.write.slice;
    let created = match slice {
        None => ensure_tables(&options.write)?,
        Some(s) => {
            slices::check_tables(options, s)?;
            Vec::new()
        }
    };
    let bulk_target = match options.write.via {
        Via::Hfile => Some(bulk_target(fs, &root, &options.write, ts)?),
        _ => None,
    };

    let manifest_loc = match &options.checkpoint {
        Some(c) => fs.parse(c)?,
        None => root
            .join("_load")
            .join(&format!("dt={}", options.write.date))
            .join(&slices::manifest_name(&options.write.namespace, slice)),
    };
    let mut done: BTreeSet<String> = if options.resume && fs.exists(&manifest_loc)? {
        serde_json::from_slice(&fs.read_to_vec(&manifest_loc)?).unwrap_or_default()
    } else {
        BTreeSet::new()
    };
    if !options.resume {
        fs.delete(&manifest_loc)?;
    }

    // The counters readers see (the snapshot). Tables created just now hold none: their
    // snapshots are gone for good, before any put, so no later run diffs against them.
    let wants = |t: Table| options.write.tables.contains(&t);
    let counted = wants(Table::User) || wants(Table::Post) || wants(Table::UserPost);
    let state = state::State::new(&root, &options.write.namespace);
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
    let counter_ts = cell_timestamp(&as_of)?;
    // What the changes are taken against: nothing when every counter is to be written.
    let snapshot = snapshot.filter(|_| !options.rewrite_counters);
    let history: BTreeMap<&str, Vec<FileEntry>> = ["users", "follows", "posts", "comments"]
        .into_iter()
        .map(|e| Ok((e, partition::history(fs, &root, e, &as_of)?)))
        .collect::<Result<_>>()?;
    let counter_inputs = counters::Inputs {
        users: &history["users"],
        follows: &history["follows"],
        posts: &history["posts"],
        comments: &history["comments"],
        mention_posts: &files["posts"],
    };
    let partitions = if counted {
        // Through HFiles the collectors hold half the budget while the counters compute.
        let budget = match options.write.via {
            Via::Thrift | Via::Auto => options.write.memory_budget,
            Via::Hfile => {
                let b = options.write.memory_budget;
                b - bulk_share(b) - queue_share(b)
            }
        };
        // Sliced, at least one counter partition per slice, so every slice shares them.
        let at_least = slice.map_or(1, |s| s.count);
        counters::partitions_for(fs, &counter_inputs, budget)?.max(at_least)
    } else {
        1
    };
    // The snapshot moves on only when this run writes every counter it holds.
    let next = if counted && wants(Table::User) && wants(Table::Post) {
        // The slices stage into one folder, which the submitter reset before they started.
        Some(state.next(fs, &as_of, options.resume || slice.is_some())?)
    } else {
        None
    };
    // When the counters fit in one partition (and share the rows' timestamp), `user` and
    // `post` rows are written with their counters in one put; else profiles go with their
    // parts and counters apart (the same cells either way), so no partition re-reads the
    // wide columns.
    let merged = partitions == 1 && counter_ts == ts && slice.is_none();
    let mut report = LoadReport {
        write: WriteReport {
            cell_timestamp: ts,
            ..WriteReport::default()
        },
        counters_as_of: as_of.clone(),
        counters_base: snapshot.as_ref().map(|s| s.as_of.clone()),
        history_nights: history_nights(&history),
        ..LoadReport::default()
    };
    let unresolved_mentions = AtomicU64::new(0);
    let snapshot_unit: String;
    let (users_changed, posts_changed) = (AtomicU64::new(0), AtomicU64::new(0));
    {
        let mut units: Vec<(String, Unit<'_>)> = Vec::new();
        let counter_inputs = &counter_inputs;
        let (snapshot, next) = (&snapshot, &next);
        let unresolved = &unresolved_mentions;
        let (users_changed, posts_changed) = (&users_changed, &posts_changed);
        let tonight_users = &files["users"];
        let tonight_posts = &files["posts"];
        for f in files["users"].clone() {
            units.push((
                format!("users:{}", f.location),
                Box::new(move |r: &mut Router| {
                    // The profile columns only when this unit writes the profiles.
                    let columns: &[&str] = if wants(Table::User) && !merged {
                        &[]
                    } else {
                        &["uid", "screen_name"]
                    };
                    read_rows(fs, &f, columns, &mut |b| {
                        let uid = columns::ids(&f, b, "uid")?;
                        for i in 0..b.num_rows() {
                            let u = uid.value(i);
                            if wants(Table::User) && !merged {
                                r.put(Table::User, user_profile_put(b, i, u))?;
                            }
                            if wants(Table::UserByName) {
                                if let Some(name) = str_val(b, "screen_name", i) {
                                    r.put(
                                        Table::UserByName,
                                        Put::new(keys::user_by_name_key(&name))
                                            .cell(cell::UID, be(u)),
                                    )?;
                                }
                            }
                        }
                        Ok(())
                    })
                }),
            ));
        }
        for f in files["posts"].clone() {
            units.push((
                format!("posts:{}", f.location),
                Box::new(move |r: &mut Router| {
                    let columns: &[&str] = if wants(Table::Post) && !merged {
                        &[]
                    } else {
                        &["mid", "uid", "created_at", "retweet_mid"]
                    };
                    read_rows(fs, &f, columns, &mut |b| {
                        let mid = columns::ids(&f, b, "mid")?;
                        let created = columns::times(&f, b, "created_at")?;
                        for i in 0..b.num_rows() {
                            let (m, at) = (mid.value(i), created.value(i));
                            let uid = columns::opt(columns::opt_ids(b, "uid"), i).unwrap_or(0);
                            let key = keys::post_key(uid, at, m);
                            let rt = columns::opt(columns::opt_ids(b, "retweet_mid"), i);
                            if wants(Table::Post) && !merged {
                                r.put(Table::Post, post_info_put(b, i, key.clone(), at))?;
                            }
                            if wants(Table::PostByMid) {
                                r.put(
                                    Table::PostByMid,
                                    Put::new(keys::post_by_mid_key(m))
                                        .cell(cell::POST, key.clone())
                                        .cell(cell::UID, be(uid)),
                                )?;
                            }
                            if wants(Table::UserPost) && uid != 0 {
                                let kind = if rt.is_some() {
                                    Relation::Repost
                                } else {
                                    Relation::Post
                                };
                                let mut p = Put::new(keys::user_post_key(uid, kind, at, m))
                                    .cell(cell::POST, key.clone());
                                if let Some(r) = rt {
                                    p = p.cell(cell::REPOST_FROM, be(r));
                                }
                                r.put(Table::UserPost, p)?;
                            }
                        }
                        Ok(())
                    })
                }),
            ));
        }
        for f in files["follows"].clone() {
            units.push((
                format!("follows:{}", f.location),
                Box::new(move |r: &mut Router| {
                    partition::read_parquet(fs, &f, &mut |b| {
                        let a = columns::ids(&f, b, "follower")?;
                        let e = columns::ids(&f, b, "followee")?;
                        let at = ts_col(b, "followed_at");
                        for i in 0..b.num_rows() {
                            let t = at
                                .filter(|c| !c.is_null(i))
                                .map(|c| be(c.value(i)))
                                .unwrap_or_default();
                            if wants(Table::Follow) {
                                r.put(
                                    Table::Follow,
                                    Put::new(keys::follow_key(a.value(i), e.value(i)))
                                        .cell(cell::FOLLOWED_AT, t.clone()),
                                )?;
                            }
                            if wants(Table::Fans) {
                                r.put(
                                    Table::Fans,
                                    Put::new(keys::fans_key(e.value(i), a.value(i)))
                                        .cell(cell::FOLLOWED_AT, t),
                                )?;
                            }
                        }
                        Ok(())
                    })
                }),
            ));
        }
        for f in files["comments"].clone() {
            units.push((
                format!("comments:{}", f.location),
                Box::new(move |r: &mut Router| {
                    if !wants(Table::UserPost) {
                        return Ok(());
                    }
                    partition::read_parquet(fs, &f, &mut |b| {
                        let cid = columns::ids(&f, b, "cid")?;
                        let mid = columns::ids(&f, b, "mid")?;
                        let created = columns::times(&f, b, "created_at")?;
                        for i in 0..b.num_rows() {
                            let Some(uid) = columns::opt(columns::opt_ids(b, "uid"), i) else {
                                continue;
                            };
                            r.put(
                                Table::UserPost,
                                Put::new(keys::user_post_key(
                                    uid,
                                    Relation::Comment,
                                    created.value(i),
                                    cid.value(i),
                                ))
                                .cell(cell::MID, be(mid.value(i)))
                                .cell(
                                    cell::COMMENT_TEXT,
                                    str_val(b, "text", i).unwrap_or_default(),
                                ),
                            )?;
                        }
                        Ok(())
                    })
                }),
            ));
        }
        let base = snapshot.as_ref().map_or("none", |s| s.as_of.as_str());
        for p in (0..partitions).filter(|_| counted) {
            units.push((
                format!("counters:{p}/{partitions} as of {as_of} over {base}"),
                Box::new(move |r: &mut Router| {
                    let c = counters::compute(fs, counter_inputs, p, partitions, &mut |m| {
                        if !wants(Table::UserPost) {
                            return Ok(());
                        }
                        r.put(
                            Table::UserPost,
                            Put::new(keys::user_post_key(
                                m.target,
                                Relation::Mention,
                                m.at,
                                m.mid,
                            ))
                            .cell(cell::POST, keys::post_key(m.by, m.at, m.mid))
                            .cell(cell::BY, be(m.by)),
                        )
                    })?;
                    unresolved.fetch_add(c.unresolved_mentions, Ordering::Relaxed);
                    let changes = match snapshot {
                        Some(s) => state::changes(
                            &c,
                            &s.users(fs, p, partitions)?,
                            &s.posts(fs, p, partitions)?,
                        ),
                        None => state::Changes {
                            users: c.users.clone(),
                            posts: c.posts.clone(),
                        },
                    };
                    if let Some(next) = next {
                        next.write_part(fs, p, partitions, &c)?;
                    }
                    drop(c);
                    if wants(Table::User) {
                        users_changed.fetch_add(changes.users.len() as u64, Ordering::Relaxed);
                    }
                    if wants(Table::Post) {
                        posts_changed.fetch_add(changes.posts.len() as u64, Ordering::Relaxed);
                    }
                    if !merged {
                        // The profiles went out with their parts: counters alone here, so no
                        // partition reads the wide columns again.
                        if wants(Table::User) {
                            for (uid, c) in &changes.users {
                                r.put_at(Table::User, user_counts_put(*uid, c), counter_ts)?;
                            }
                        }
                        if wants(Table::Post) {
                            for (mid, (uid, at, reposts, comments)) in &changes.posts {
                                let key = keys::post_key(*uid, *at, *mid);
                                let put = with_post_counts(Put::new(key), *reposts, *comments);
                                r.put_at(Table::Post, put, counter_ts)?;
                            }
                        }
                        return Ok(());
                    }
                    // One partition (so every row is this unit's): each user and post row goes
                    // out once, profile and changed counters together.
                    if wants(Table::User) {
                        let mut users = Claims::new(changes.users);
                        for f in tonight_users {
                            partition::read_parquet(fs, f, &mut |b| {
                                let uid = columns::ids(f, b, "uid")?;
                                for i in 0..b.num_rows() {
                                    let u = uid.value(i);
                                    let put = user_profile_put(b, i, u);
                                    let put = match users.claim(u, |_| true) {
                                        Some(c) => with_user_counts(put, c),
                                        None => put,
                                    };
                                    r.put(Table::User, put)?;
                                }
                                Ok(())
                            })?;
                        }
                        for (uid, c) in users.unclaimed() {
                            r.put(Table::User, user_counts_put(*uid, c))?;
                        }
                    }
                    if wants(Table::Post) {
                        let mut posts = Claims::new(changes.posts);
                        for f in tonight_posts {
                            partition::read_parquet(fs, f, &mut |b| {
                                let mid = columns::ids(f, b, "mid")?;
                                let created = columns::times(f, b, "created_at")?;
                                for i in 0..b.num_rows() {
                                    let (m, at) = (mid.value(i), created.value(i));
                                    let uid =
                                        columns::opt(columns::opt_ids(b, "uid"), i).unwrap_or(0);
                                    let put = post_info_put(b, i, keys::post_key(uid, at, m), at);
                                    // Counters go with the row only if it has their rowkey.
                                    let same_key = |c: &PostCounts| (c.0, c.1) == (uid, at);
                                    let put = match posts.claim(m, same_key) {
                                        Some((_, _, reposts, comments)) => {
                                            with_post_counts(put, *reposts, *comments)
                                        }
                                        None => put,
                                    };
                                    r.put(Table::Post, put)?;
                                }
                                Ok(())
                            })?;
                        }
                        for (mid, (uid, at, reposts, comments)) in posts.unclaimed() {
                            let key = keys::post_key(*uid, *at, *mid);
                            r.put(
                                Table::Post,
                                with_post_counts(Put::new(key), *reposts, *comments),
                            )?;
                        }
                    }
                    Ok(())
                }),
            ));
        }

        if let Some(s) = slice {
            let mut assigner = slices::Assigner::new(s);
            units.retain(|(name, _)| assigner.takes(name));
        }
        // A unit is "done" only for the tables it was run with: a resume with other --tables
        // redoes it.
        // Nor for another way of splitting the work (merged rows carry no profile in their
        // part units).
        let tables: Vec<&str> = options.write.tables.iter().map(|t| t.name()).collect();
        let tables = tables.join(",");
        let mode = if merged {
            "merged".to_string()
        } else {
            format!("split in {partitions}")
        };
        for (name, _) in units.iter_mut() {
            *name = format!("{tables}|{mode}|{name}");
        }
        // A run that committed its snapshot is done; one that did not redoes any counter unit
        // whose staged partition is gone, so the snapshot it commits is whole.
        snapshot_unit = format!("{tables}|{mode}|snapshot as of {as_of} over {base}");
        if let (Some(next), false) = (&next, done.contains(&snapshot_unit)) {
            for p in 0..partitions {
                let name = units.iter().map(|(n, _)| n).find(|n| {
                    n.ends_with(&format!(
                        "|counters:{p}/{partitions} as of {as_of} over {base}"
                    ))
                });
                if let Some(name) = name {
                    if done.contains(name) && !next.has_part(fs, p, partitions)? {
                        done.remove(name);
                    }
                }
            }
        }
        let (mut units_done, mut units_skipped) = (0usize, 0usize);
        // Through HFiles a unit's cells reach HBase only at the hand-over: the manifest
        // records the units after it.
        let record_units = options.write.via == Via::Thrift;
        let written = with_writers(
            &options.write,
            bulk_target.as_ref(),
            ts,
            started,
            &mut report.write,
            &mut |router| {
                let todo: Vec<units::Todo<'_, '_>> = units
                    .iter()
                    .enumerate()
                    .filter(|(_, (name, _))| !done.contains(name))
                    .map(|(index, (name, unit))| units::Todo {
                        index,
                        name,
                        unit,
                        counters: units::is_counter_unit(name),
                    })
                    .collect();
                units_skipped = units.len() - todo.len();
                if !record_units {
                    // Through HFiles nothing is durable before the hand-over, and the emission
                    // numbers order the cells: the units run side by side, without barriers.
                    for name in units::run_side_by_side(router, &todo)? {
                        done.insert(name);
                        units_done += 1;
                    }
                    return Ok(());
                }
                for t in &todo {
                    router.start_unit(t.index);
                    (t.unit)(router)?;
                    router.flush()?;
                    done.insert(t.name.to_string());
                    units_done += 1;
                    let text = serde_json::to_vec_pretty(&done).unwrap_or_default();
                    fs.write_atomic(&manifest_loc, &text)?;
                }
                Ok(())
            },
        );
        match &bulk_target {
            None => written?,
            Some(target) => {
                report.write.hfiles = Some(target.hand_over(&options.write, written)?);
                let text = serde_json::to_vec_pretty(&done).unwrap_or_default();
                fs.write_atomic(&manifest_loc, &text)?;
            }
        }
        report.units_done = units_done;
        report.units_skipped = units_skipped;
    }
    // Every counter put is flushed: the snapshot may say so (once).
    // A slice leaves the snapshot to the submitter ([`slices::commit`]).
    if let Some(next) = next.filter(|_| slice.is_none()) {
        if done.contains(&snapshot_unit) {
            next.abandon(fs);
        } else {
            next.commit(fs, &state, partitions)?;
            done.insert(snapshot_unit);
            let text = serde_json::to_vec_pretty(&done).unwrap_or_default();
            fs.write_atomic(&manifest_loc, &text)?;
        }
    }
    report.unresolved_mentions = unresolved_mentions.into_inner();
    report.counter_partitions = partitions;
    report.users_changed = users_changed.into_inner();
    report.posts_changed = posts_changed.into_inner();
    report.write.via = options.write.via;
    report.slice = slice.map(|s| s.to_string());
    report.write.auto = auto;
    if options.write.via == Via::Hfile {
        // The hand-over is part of the load's time.
        report.write.set_time(started);
    }
    Ok(report)
}

fn partition_files(
    fs: &FileSystems,
    root: &Location,
    entity: &str,
    date: &str,
) -> Result<Vec<FileEntry>> {
    partition::committed_parts(fs, &root.join(entity).join(&format!("dt={date}")))
}

/// How many nights the history spans (the distinct `dt=` folders of its files).
fn history_nights(history: &BTreeMap<&str, Vec<FileEntry>>) -> usize {
    history
        .values()
        .flatten()
        .filter_map(|f| f.location.parent()?.file_name())
        .collect::<BTreeSet<String>>()
        .len()
}

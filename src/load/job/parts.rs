//! The night's part units: one per Parquet part of users, posts, follows and comments, each
//! writing that part's rows into the tables the run was asked for. When the counters are
//! merged into the rows ([`Night::merged`]), the user and post profiles go out with the
//! counter unit instead, and a part unit writes only the indexes.

use std::sync::atomic::Ordering;

use arrow::array::Array;

use super::Night;
use crate::dataset::{columns, parquet_io};
use crate::hbase::layout::keys::{self, Relation};
use crate::hbase::layout::{be, cell, Table};
use crate::hbase::write::writers::{Router, Unit};
use crate::hbase::Put;
use crate::load::rows::*;

/// `users:<part>`: profiles (unless merged) and the screen-name index.
pub(super) fn users<'a>(n: &'a Night<'a>) -> Vec<(String, Unit<'a>)> {
    let (fs, merged) = (n.fs, n.merged);
    let wants = move |t: Table| n.wants(t);
    let mut units: Vec<(String, Unit<'a>)> = Vec::new();
    for f in n.files["users"].clone() {
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
                                    Put::new(keys::user_by_name_key(&name)).cell(cell::UID, be(u)),
                                )?;
                            }
                        }
                    }
                    Ok(())
                })
            }),
        ));
    }
    units
}

/// `posts:<part>`: post rows (unless merged), the mid index and the authors' post lists.
pub(super) fn posts<'a>(n: &'a Night<'a>) -> Vec<(String, Unit<'a>)> {
    let (fs, merged) = (n.fs, n.merged);
    let wants = move |t: Table| n.wants(t);
    let mut units: Vec<(String, Unit<'a>)> = Vec::new();
    for f in n.files["posts"].clone() {
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
    units
}

/// `follows:<part>`: both directions of every follow edge.
pub(super) fn follows<'a>(n: &'a Night<'a>) -> Vec<(String, Unit<'a>)> {
    let fs = n.fs;
    let wants = move |t: Table| n.wants(t);
    let mut units: Vec<(String, Unit<'a>)> = Vec::new();
    for f in n.files["follows"].clone() {
        units.push((
            format!("follows:{}", f.location),
            Box::new(move |r: &mut Router| {
                parquet_io::read_parquet(fs, &f, &mut |b| {
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
    units
}

/// `comments:<part>`: the commenters' post lists.
pub(super) fn comments<'a>(n: &'a Night<'a>) -> Vec<(String, Unit<'a>)> {
    let fs = n.fs;
    let wants = move |t: Table| n.wants(t);
    let mut units: Vec<(String, Unit<'a>)> = Vec::new();
    for f in n.files["comments"].clone() {
        units.push((
            format!("comments:{}", f.location),
            Box::new(move |r: &mut Router| {
                if !wants(Table::UserPost) {
                    return Ok(());
                }
                parquet_io::read_parquet(fs, &f, &mut |b| {
                    let cid = columns::ids(&f, b, "cid")?;
                    let mid = columns::nullable_ids(&f, b, "mid")?;
                    let created = columns::times(&f, b, "created_at")?;
                    n.comments_without_post
                        .fetch_add(mid.null_count() as u64, Ordering::Relaxed);
                    for i in 0..b.num_rows() {
                        let Some(uid) = columns::opt(columns::opt_ids(b, "uid"), i) else {
                            continue;
                        };
                        // A comment on a post the crawl did not record goes to no list.
                        let Some(mid) = columns::opt(Some(mid), i) else {
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
                            .cell(cell::MID, be(mid))
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
    units
}

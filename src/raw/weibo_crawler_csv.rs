//! weibo-crawler's (dataabc/weibo-crawler) per-user posts CSV, mapped onto our canonical post
//! fields: the one crawler CSV layout that needs code, for rows wider than their header (the
//! unlabelled full time of 2022-2024, rows appended by a later run with other settings). It
//! writes `utf-8-sig`, appends run after run, and names the file after the user
//! (`weibo/<name>/<uid>.csv`): the rows carry no user id, the file name does. The layouts a
//! declaration describes whole (weiboSpider's posts, weibo-crawler's `users.csv` and comments
//! export, a follow export, weibo-search) are in `layouts.toml` ([`super::mapping_file`]).

use super::mapping::{uid_from_path, Dialect, Mapped, Probe, Wider};
use crate::dataset::Entity;

/// weibo-crawler (dataabc/weibo-crawler) column → canonical post field. `完整日期`
/// (`%Y-%m-%d %H:%M:%S`, newer files) is preferred over `日期` when both are present.
const CRAWLER_COLUMNS: &[(&str, &str)] = &[
    ("id", "mid"),
    ("bid", "bid"),
    ("正文", "text"),
    ("原始图片url", "pics"),
    ("工具", "source"),
    ("点赞数", "attitudes_count"),
    ("评论数", "comments_count"),
    ("转发数", "reposts_count"),
    ("话题", "topics"),
    ("@用户", "at_users"),
    ("源微博id", "retweet_mid"),
    // Forks that crawl many users into one file write the author first.
    ("uid", "uid"),
];

/// Recognises a weibo-crawler posts header (`id, bid, 正文, ...`; 2019 without `bid`: `id,
/// 正文, 原始图片url, 视频url, 位置, 日期, 工具, ...`, and its forks' with the author first,
/// `uid, 用户昵称, id, 正文, ...`).
pub fn crawler_header(names: &[String], path: &str) -> Option<Mapped> {
    let has = |n: &str| names.iter().any(|x| x == n);
    if !(has("id") && has("正文") && (has("bid") || has("日期") && has("工具"))) {
        return None;
    }
    let entity = Entity::Posts;
    let full_date = has("完整日期");
    let mapping = names
        .iter()
        .map(|n| {
            let field = match n.as_str() {
                "完整日期" => Some("created_at"),
                "日期" if !full_date => Some("created_at"),
                other => CRAWLER_COLUMNS
                    .iter()
                    .find(|(theirs, _)| *theirs == other)
                    .map(|(_, ours)| *ours),
            };
            field.and_then(|f| entity.field_index(f))
        })
        .collect::<Vec<_>>();
    let mut wider = Vec::new();
    if !full_date {
        // 2022-04 to 2024-01: every row has the full time, unlabelled, as the last field of
        // the original-post part, right after `@用户` (the crawler sets it after building the
        // row), and the repost columns one to the right; `日期` then holds a date only. A row
        // one field longer than such a header takes its time from there.
        let position = |name: &str| names.iter().position(|n| n == name);
        if let (Some(day), Some(at_users)) = (position("日期"), position("@用户")) {
            let mut shifted = mapping.clone();
            let created_at = shifted[day].take();
            shifted.insert(at_users + 1, created_at);
            wider.push(Wider {
                mapping: shifted,
                probe: Some((at_users + 1, Probe::Time)),
            });
        }
        // 2020-04 to 2021-12, a header written by a run that crawled originals only, and rows
        // a later run appended with its repost columns: `是否原创` (`True`/`False`) alone, or
        // with `源用户id, 源用户昵称` and the `源微博…` copy of the header's columns, the
        // reposted post's id first.
        if !has("是否原创") {
            let n = names.len();
            let mut original = mapping.clone();
            original.push(None);
            wider.push(Wider {
                mapping: original.clone(),
                probe: Some((n, Probe::Bool)),
            });
            let mut repost = original;
            repost.extend([None, None]);
            repost.extend(names.iter().map(|name| match name.as_str() {
                "id" => entity.field_index("retweet_mid"),
                _ => None,
            }));
            wider.push(Wider {
                mapping: repost,
                probe: Some((n, Probe::Bool)),
            });
        }
    } else if !has("Live Photo视频url") {
        // Some 2025 files write `live_photo_url` in the rows but not in the header: rows one
        // (or, with repost columns, two) fields longer than the header are read with an
        // unnamed column after `视频url` (and after `源微博视频url`).
        let mut shifted = mapping.clone();
        for video in ["视频url", "源微博视频url"] {
            if let Some(i) = shifted_position(names, &shifted, video) {
                shifted.insert(i + 1, None);
                wider.push(Wider {
                    mapping: shifted.clone(),
                    probe: None,
                });
            }
        }
    }
    // The author is the file's (`<uid>.csv`), unless a column names it.
    let (constants, warning) = match has("uid") {
        true => (Vec::new(), None),
        false => uid_from_path(entity, path),
    };
    Some(Mapped {
        wider,
        short_rows_ok: true,
        dialect: Dialect::WeiboCrawlerPosts,
        constants,
        warning,
        ..Mapped::columns(entity, mapping)
    })
}

/// Where header column `name` sits in a mapping that may already have unnamed columns
/// inserted before it.
fn shifted_position(names: &[String], mapping: &[Option<usize>], name: &str) -> Option<usize> {
    let i = names.iter().position(|n| n == name)?;
    Some(i + (mapping.len() - names.len()))
}

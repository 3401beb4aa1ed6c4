//! dataabc's two crawlers' post CSVs, mapped onto our canonical post fields: weiboSpider and
//! weibo-crawler. Both write `utf-8-sig`, append run after run, and name the file after the user
//! (`weibo/<name or uid>/<uid>.csv`): the rows carry no user id, the file name does.
//!
//! weiboSpider:
//!
//! Header (`utf-8-sig`): `微博id, 微博正文, 头条文章url, 原始图片url, 被转发微博原始图片url,
//! 是否为原创微博, 微博视频url, 发布位置, 发布时间, 发布工具, 点赞数, 转发数, 评论数`. `微博id` is
//! the base62 bid (the cleaner turns it into the mid), missing values are `无` (the cleaner
//! treats them as missing), the header repeats on every appended run (a repeated header is
//! counted as a duplicate), and the rows carry no user id: the file is `<uid>.csv`.

use super::mapping::{Dialect, Mapped, Probe, Wider};
use crate::dataset::Entity;

/// Column → canonical post field.
const COLUMNS: &[(&str, &str)] = &[
    ("微博id", "mid"),
    ("微博正文", "text"),
    ("原始图片url", "pics"),
    ("发布时间", "created_at"),
    ("发布工具", "source"),
    ("点赞数", "attitudes_count"),
    ("转发数", "reposts_count"),
    ("评论数", "comments_count"),
];

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

/// weibo-crawler's `users.csv` column → canonical user field.
const CRAWLER_USER_COLUMNS: &[(&str, &str)] = &[
    ("用户id", "uid"),
    ("昵称", "screen_name"),
    ("性别", "gender"),
    ("所在地", "location"),
    ("注册时间", "created_at"),
    ("微博数", "statuses_count"),
    ("粉丝数", "followers_count"),
    ("关注数", "follow_count"),
    ("简介", "description"),
    ("是否认证", "verified"),
    ("认证类型", "verified_type"),
];

/// weibo-crawler's comments export column → canonical comment field (the export names the
/// commenter only by screen name, so `uid` stays empty).
const CRAWLER_COMMENT_COLUMNS: &[(&str, &str)] = &[
    ("id", "cid"),
    ("weibo_id", "mid"),
    ("created_at", "created_at"),
    ("text", "text"),
    ("like_count", "like_count"),
];

/// A fork's follow export, `用户id,关注者id,昵称`: `用户id` follows `关注者id` (`昵称` is the
/// followee's screen name, not a profile, so it is not read).
const FOLLOW_EXPORT_COLUMNS: &[(&str, &str)] = &[("用户id", "follower"), ("关注者id", "followee")];

/// dataabc/weibo-search's keyword results (`结果文件/<keyword>/<keyword>.csv`) column →
/// canonical post field. `id` is the mid, `发布时间` is `YYYY-MM-DD HH:MM`, `微博图片url` a
/// Python list as text (`['http://…', …]`), `retweet_id` the mid of the reposted post (the
/// crawler writes that post as a row of its own). `用户昵称` is the author's screen name, not
/// a profile, so it is not read.
const SEARCH_COLUMNS: &[(&str, &str)] = &[
    ("id", "mid"),
    ("bid", "bid"),
    ("user_id", "uid"),
    ("微博正文", "text"),
    ("艾特用户", "at_users"),
    ("话题", "topics"),
    ("转发数", "reposts_count"),
    ("评论数", "comments_count"),
    ("点赞数", "attitudes_count"),
    ("发布时间", "created_at"),
    ("发布工具", "source"),
    ("微博图片url", "pics"),
    ("retweet_id", "retweet_mid"),
];

/// A CSV layout by the header columns that identify it, all of which a file must have.
struct Layout {
    entity: Entity,
    columns: &'static [(&'static str, &'static str)],
    evidence: &'static [&'static str],
    dialect: Dialect,
}

/// weibo-crawler's `users.csv` (every version writes its id, name and three counts), its
/// comments export, a fork's follow export, and weibo-search's results. A follow export also has `用户id` and
/// `昵称`: read by the nearest layout, its edges would become profiles and overwrite real
/// ones, so each layout needs all of its evidence.
const OTHER_LAYOUTS: &[Layout] = &[
    Layout {
        entity: Entity::Users,
        columns: CRAWLER_USER_COLUMNS,
        evidence: &["用户id", "昵称", "微博数", "粉丝数", "关注数"],
        dialect: Dialect::WeiboCrawlerUsers,
    },
    Layout {
        entity: Entity::Comments,
        columns: CRAWLER_COMMENT_COLUMNS,
        evidence: &["weibo_id", "user_screen_name"],
        dialect: Dialect::WeiboCrawlerComments,
    },
    Layout {
        entity: Entity::Follows,
        columns: FOLLOW_EXPORT_COLUMNS,
        evidence: &["用户id", "关注者id"],
        dialect: Dialect::FollowExport,
    },
    Layout {
        entity: Entity::Posts,
        columns: SEARCH_COLUMNS,
        evidence: &["用户昵称", "微博正文", "发布时间", "retweet_id"],
        dialect: Dialect::WeiboSearch,
    },
];

/// Which of [`OTHER_LAYOUTS`] a header has all the evidence of, and whether it only partly
/// fits one (some of a layout's evidence, or the whole evidence of two).
pub enum OtherHeader {
    Read(Box<Mapped>),
    /// Not one of these layouts: another reader may take it.
    None,
    /// Partly one of these, or two at once: no reader may take it (`unknown_format`).
    Partial,
}

/// Recognises weibo-crawler's `users.csv` (`用户id, 昵称, ...`), its comments export
/// (`id, weibo_id, created_at, user_screen_name, text, pic_url, like_count`), or a fork's
/// follow export (`用户id,关注者id,昵称`), by all of the columns that identify each.
pub fn crawler_other_header(names: &[String]) -> OtherHeader {
    let has = |n: &&str| names.iter().any(|x| x == n);
    let whole: Vec<&Layout> = OTHER_LAYOUTS
        .iter()
        .filter(|l| l.evidence.iter().all(has))
        .collect();
    match whole[..] {
        [layout] => OtherHeader::Read(Box::new(Mapped {
            dialect: layout.dialect,
            ..Mapped::columns(
                layout.entity,
                Mapped::table_mapping(layout.entity, names, layout.columns),
            )
        })),
        [] if OTHER_LAYOUTS.iter().any(|l| l.evidence.iter().any(has)) => OtherHeader::Partial,
        [] => OtherHeader::None,
        _ => OtherHeader::Partial,
    }
}

/// The author's uid from a posts file's numeric stem (`<uid>.csv`, as both crawlers name
/// them), as a constant field; else none, and a warning for the report: the file's posts
/// then have no author.
pub(super) fn uid_from_path(entity: Entity, path: &str) -> (Vec<(usize, String)>, Option<String>) {
    let name = path.rsplit('/').next().unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        let warning = format!(
            "the file name {name:?} is no uid (the crawler names a user's posts <uid>.csv): \
             its posts have no author"
        );
        return (Vec::new(), Some(warning));
    }
    let constant = entity.field_index("uid").map(|i| (i, stem.to_string()));
    (constant.into_iter().collect(), None)
}

/// Recognises a weiboSpider header; the uid comes from a numeric file stem.
pub fn header(names: &[String], path: &str) -> Option<Mapped> {
    if !(names.iter().any(|n| n == "微博id") && names.iter().any(|n| n == "微博正文")) {
        return None;
    }
    let entity = Entity::Posts;
    let mapping = Mapped::table_mapping(entity, names, COLUMNS);
    let (constants, warning) = uid_from_path(entity, path);
    Some(Mapped {
        constants,
        warning,
        dialect: Dialect::WeibospiderPosts,
        ..Mapped::columns(entity, mapping)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(header: &str) -> Vec<String> {
        header.split(',').map(String::from).collect()
    }

    fn read(header: &str) -> Option<(Entity, Dialect, Vec<Option<usize>>)> {
        match crawler_other_header(&names(header)) {
            OtherHeader::Read(m) => Some((m.entity, m.dialect, m.mapping)),
            _ => None,
        }
    }

    #[test]
    fn each_layout_needs_all_of_its_evidence() {
        let users = "用户id,昵称,性别,所在地,微博数,粉丝数,关注数,简介";
        let (entity, dialect, _) = read(users).unwrap();
        assert_eq!(
            (entity, dialect),
            (Entity::Users, Dialect::WeiboCrawlerUsers)
        );

        let (entity, dialect, mapping) = read("用户id,关注者id,昵称").unwrap();
        assert_eq!((entity, dialect), (Entity::Follows, Dialect::FollowExport));
        let field = |f| Entity::Follows.field_index(f);
        assert_eq!(mapping, vec![field("follower"), field("followee"), None]);

        let (entity, _, _) = read("id,weibo_id,created_at,user_screen_name,text").unwrap();
        assert_eq!(entity, Entity::Comments);

        let search = "id,bid,user_id,用户昵称,微博正文,头条文章url,发布位置,艾特用户,话题,转发数,\
                      评论数,点赞数,发布时间,发布工具,微博图片url,微博视频url,retweet_id";
        let (entity, dialect, mapping) = read(search).unwrap();
        assert_eq!((entity, dialect), (Entity::Posts, Dialect::WeiboSearch));
        let field = |f| Entity::Posts.field_index(f);
        assert_eq!(mapping[2], field("uid"));
        assert_eq!(mapping[3], None, "a screen name is no profile");
        assert_eq!(mapping[12], field("created_at"));
        assert_eq!(mapping[16], field("retweet_mid"));

        // Part of a layout's evidence, or the whole of two: no layout, and no other reader.
        for partial in [
            "用户id,昵称",
            "用户id,昵称,粉丝数",
            &format!("{users},关注者id"),
        ] {
            assert!(
                matches!(crawler_other_header(&names(partial)), OtherHeader::Partial),
                "{partial}"
            );
        }
        // None of it: another reader's file (MediaCrawler's notes share only generic names).
        for other in [
            "uid,screen_name",
            "note_id,content,create_time,user_id,nickname",
        ] {
            assert!(
                matches!(crawler_other_header(&names(other)), OtherHeader::None),
                "{other}"
            );
        }
    }
}

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

use crate::clean::Entity;

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
];

/// A recognised header: the entity, the column mapping, fields that come from the path, and
/// whether short rows are normal (weibo-crawler writes fewer fields for original posts than
/// its header names when reposts are kept).
pub struct Mapped {
    pub entity: Entity,
    pub mapping: Vec<Option<usize>>,
    pub constants: Vec<(usize, String)>,
    pub short_rows_ok: bool,
}

/// Recognises a weibo-crawler posts header (`id, bid, 正文, ...`).
pub fn crawler_header(names: &[String], path: &str) -> Option<Mapped> {
    let has = |n: &str| names.iter().any(|x| x == n);
    if !(has("id") && has("bid") && has("正文")) {
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
        .collect();
    Some(Mapped {
        entity,
        mapping,
        constants: uid_from_path(entity, path),
        short_rows_ok: true,
    })
}

fn uid_from_path(entity: Entity, path: &str) -> Vec<(usize, String)> {
    let stem = path
        .rsplit('/')
        .next()
        .and_then(|f| f.split('.').next())
        .unwrap_or_default();
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return Vec::new();
    }
    entity
        .field_index("uid")
        .map(|i| vec![(i, stem.to_string())])
        .unwrap_or_default()
}

/// Recognises a weiboSpider header; the uid comes from a numeric file stem.
pub fn header(names: &[String], path: &str) -> Option<Mapped> {
    if !(names.iter().any(|n| n == "微博id") && names.iter().any(|n| n == "微博正文")) {
        return None;
    }
    let entity = Entity::Posts;
    let mapping = names
        .iter()
        .map(|n| {
            COLUMNS
                .iter()
                .find(|(theirs, _)| theirs == n)
                .and_then(|(_, ours)| entity.field_index(ours))
        })
        .collect();
    Some(Mapped {
        entity,
        mapping,
        constants: uid_from_path(entity, path),
        short_rows_ok: false,
    })
}

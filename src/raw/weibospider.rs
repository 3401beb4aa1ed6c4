//! weiboSpider (dataabc/weiboSpider) post CSVs, mapped onto our canonical post fields.
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

/// A recognised header: the entity, the column mapping, and fields that come from the path.
pub struct Mapped {
    pub entity: Entity,
    pub mapping: Vec<Option<usize>>,
    pub constants: Vec<(usize, String)>,
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
    let stem = path
        .rsplit('/')
        .next()
        .and_then(|f| f.split('.').next())
        .unwrap_or_default();
    let constants = stem
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| entity.field_index("uid").map(|i| (i, stem.to_string())))
        .flatten()
        .into_iter()
        .filter(|(_, s)| !s.is_empty())
        .collect();
    Some(Mapped {
        entity,
        mapping,
        constants,
    })
}

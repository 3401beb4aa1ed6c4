//! MediaCrawler's (NanmiCoder/MediaCrawler) Weibo output, JSON lines or CSV (`utf-8-sig`),
//! `data/weibo/{jsonl|csv}/{search|detail|creator}_{contents|comments|creators}_<date>.*`,
//! mapped onto our canonical fields:
//!
//! - notes (`note_id, content, create_time, create_date_time, liked_count, comments_count,
//!   shared_count, last_modify_ts, user_id, ...`) become posts;
//! - comments (`comment_id, note_id, create_time, create_date_time, content,
//!   comment_like_count, parent_comment_id, user_id, last_modify_ts, ...`) become comments;
//! - creators (`user_id, nickname, gender, desc, follows, fans, last_modify_ts, ...`) become
//!   users.
//!
//! Times: `create_date_time` is the post's wall clock with its `+08:00` offset and is taken
//! when present. `create_time` alone is epoch seconds, and from December 2023 to July 2026
//! MediaCrawler computed it by reading the `+0800` wall clock as UTC, 8 hours ahead; for rows
//! crawled in that window (by `last_modify_ts`) the 28,800 s are taken back. Counts come as
//! strings, which the cleaner parses like any other; `parent_comment_id` `0` means "none".

use serde_json::{Map, Value};

use super::mapping::{value_text, CsvTimes, Dialect, Mapped, RawRecord};
use crate::dataset::Entity;
use crate::field_rules::parse_crawl_time;

/// MediaCrawler field → canonical field, per entity (`created_at` is handled apart).
const NOTE: &[(&str, &str)] = &[
    ("note_id", "mid"),
    ("user_id", "uid"),
    ("content", "text"),
    ("liked_count", "attitudes_count"),
    ("comments_count", "comments_count"),
    ("shared_count", "reposts_count"),
    ("last_modify_ts", "crawl_time"),
];
const COMMENT: &[(&str, &str)] = &[
    ("comment_id", "cid"),
    ("note_id", "mid"),
    ("user_id", "uid"),
    ("content", "text"),
    ("comment_like_count", "like_count"),
    ("parent_comment_id", "reply_to_cid"),
    ("last_modify_ts", "crawl_time"),
];
const CREATOR: &[(&str, &str)] = &[
    ("user_id", "uid"),
    ("nickname", "screen_name"),
    ("gender", "gender"),
    ("desc", "description"),
    ("follows", "follow_count"),
    ("fans", "followers_count"),
    ("last_modify_ts", "crawl_time"),
];

/// The crawl-time window (epoch ms, [2023-12-01, 2026-08-01) in +08:00) in which
/// `create_time` ran 8 hours ahead.
const SKEWED_FROM_MS: i64 = 1_701_360_000_000;
const SKEWED_UNTIL_MS: i64 = 1_785_513_600_000;
const SKEW_SECONDS: i64 = 8 * 3600;

/// Which MediaCrawler record a set of field names is.
fn kind(has: &dyn Fn(&str) -> bool) -> Option<(Entity, &'static [(&'static str, &'static str)])> {
    if has("comment_id") && has("note_id") {
        Some((Entity::Comments, COMMENT))
    } else if has("note_id") && (has("liked_count") || has("shared_count") || has("note_url")) {
        Some((Entity::Posts, NOTE))
    } else if has("user_id") && has("nickname") && (has("fans") || has("follows")) {
        Some((Entity::Users, CREATOR))
    } else {
        None
    }
}

/// `create_time` corrected for the known skew when the crawl falls in its window.
fn unskewed(create_time: &str, crawl_ms: Option<i64>) -> String {
    let t = create_time.trim();
    match (t.parse::<i64>(), crawl_ms) {
        (Ok(secs), Some(crawl))
            if t.len() <= 10 && (SKEWED_FROM_MS..SKEWED_UNTIL_MS).contains(&crawl) =>
        {
            (secs - SKEW_SECONDS).to_string()
        }
        _ => t.to_string(),
    }
}

/// Fills `created_at` from `create_date_time`, else from a corrected `create_time`.
fn set_created_at(
    entity: Entity,
    record: &mut RawRecord,
    create_date_time: Option<&str>,
    create_time: Option<&str>,
    crawl: Option<&str>,
) {
    // The cleaner's own reading of a crawl time (epoch s or ms, or a date).
    let crawl_ms = crawl.and_then(|c| parse_crawl_time(c).ok());
    match (
        create_date_time.filter(|s| !s.trim().is_empty()),
        create_time,
    ) {
        (Some(dt), _) => record.set(entity, "created_at", dt),
        (None, Some(t)) => record.set(entity, "created_at", unskewed(t, crawl_ms)),
        (None, None) => {}
    }
}

fn mapped_value(theirs: &str, value: String) -> Option<String> {
    match theirs {
        // A top-level comment's parent is written as 0.
        "parent_comment_id" if value.trim() == "0" => None,
        "content" => Some(html_text(&value).unwrap_or(value)),
        _ => Some(value),
    }
}

/// The text of content written as the Weibo API's HTML (MediaCrawler's files of December
/// 2023): `<br>` is a line break, an emoticon's `<img alt="[doge]">` is its alt text, other
/// tags go, and entities are decoded. `None` when the text holds no tag (then it is kept as
/// it is, `&` and all): a lone `<` as in `<3` is text, not a tag.
pub fn html_text(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut tags = 0;
    while let Some(at) = rest.find('<') {
        let after = &rest[at + 1..];
        let is_tag = after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!');
        let end = is_tag.then(|| tag_end(after)).flatten();
        let Some(end) = end else {
            out.push_str(&rest[..at + 1]);
            rest = after;
            continue;
        };
        out.push_str(&rest[..at]);
        let tag = &after[..end];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect();
        match name.as_str() {
            "br" => out.push('\n'),
            "img" => out.push_str(&attribute(tag, "alt").unwrap_or_default()),
            _ => {}
        }
        tags += 1;
        rest = &after[end + 1..];
    }
    if tags == 0 {
        return None;
    }
    out.push_str(rest);
    Some(html_escape::decode_html_entities(&out).into_owned())
}

/// Where a tag's closing `>` is in `s` (the text after its `<`), quotes respected.
fn tag_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '>') => return Some(i),
            (None, '<') => return None,
            _ => {}
        }
    }
    None
}

/// The value of attribute `name` in a tag's text (`img alt="[doge]" src=...`), quoted or not.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name) {
        let at = from + i;
        let before_ok = lower[..at].ends_with(|c: char| c.is_ascii_whitespace());
        let value = lower[at + name.len()..].trim_start();
        if before_ok && value.starts_with('=') {
            let start = tag.len() - value.len() + 1;
            let v = tag[start..].trim_start();
            let v = match v.chars().next() {
                Some(q @ ('"' | '\'')) => v[1..].split(q).next().unwrap_or(""),
                _ => v
                    .split(|c: char| c.is_ascii_whitespace() || c == '/')
                    .next()
                    .unwrap_or(""),
            };
            return Some(html_escape::decode_html_entities(v).into_owned());
        }
        from = at + name.len();
    }
    None
}

/// The canonical record of a MediaCrawler JSON object, if it has one of the known shapes.
pub fn map(object: &Map<String, Value>) -> Option<(Entity, RawRecord)> {
    let (entity, fields) = kind(&|k| object.contains_key(k))?;
    let mut r = RawRecord::new(entity);
    for (theirs, ours) in fields {
        if let Some(v) = object.get(*theirs).and_then(value_text) {
            if let Some(v) = mapped_value(theirs, v) {
                r.set(entity, ours, v);
            }
        }
    }
    let text = |k: &str| object.get(k).and_then(value_text);
    if entity == Entity::Posts {
        if let Some(mid) = mid_from_url(text("note_id").as_deref(), text("note_url").as_deref()) {
            r.set(entity, "mid", mid);
        }
    }
    if entity != Entity::Users {
        set_created_at(
            entity,
            &mut r,
            text("create_date_time").as_deref(),
            text("create_time").as_deref(),
            text("last_modify_ts").as_deref(),
        );
    }
    Some((entity, r))
}

/// Recognises a MediaCrawler CSV header. `created_at` needs two columns and the crawl time,
/// so it is filled by [`fix_row`] rather than by the column mapping.
pub fn header(names: &[String]) -> Option<Mapped> {
    let (entity, fields) = kind(&|k| names.iter().any(|n| n == k))?;
    let mapping = Mapped::table_mapping(entity, names, fields);
    let column = |k: &str| names.iter().position(|n| n == k);
    let times = (entity != Entity::Users).then(|| CsvTimes {
        create_date_time: column("create_date_time"),
        create_time: column("create_time"),
        last_modify_ts: column("last_modify_ts"),
        parent_comment_id: column("parent_comment_id"),
        content: column("content"),
        note_id: column("note_id").filter(|_| entity == Entity::Posts),
        note_url: column("note_url").filter(|_| entity == Entity::Posts),
    });
    Some(Mapped {
        mediacrawler: times,
        dialect: Dialect::MediacrawlerCsv,
        ..Mapped::columns(entity, mapping)
    })
}

/// Completes a record read from a MediaCrawler CSV row (`cell(i)` is column `i`).
pub fn fix_row<'a>(
    entity: Entity,
    times: CsvTimes,
    record: &mut RawRecord,
    cell: &dyn Fn(usize) -> Option<&'a str>,
) {
    let get = |c: Option<usize>| c.and_then(cell);
    set_created_at(
        entity,
        record,
        get(times.create_date_time),
        get(times.create_time),
        get(times.last_modify_ts),
    );
    if get(times.parent_comment_id).is_some_and(|p| p.trim() == "0") {
        // The mapping copied the 0; a later set of the same field wins.
        record.set(entity, "reply_to_cid", "");
    }
    if let Some(text) = get(times.content).and_then(html_text) {
        record.set(entity, "text", text);
    }
    if let Some(mid) = mid_from_url(get(times.note_id), get(times.note_url)) {
        record.set(entity, "mid", mid);
    }
}

/// The mid in a note's url (`https://m.weibo.cn/detail/<mid>`), when its `note_id` was
/// mangled by a spreadsheet (`5.2412E+15`: the digits past the fourth are gone, so the id
/// alone is refused as `lossy_id`). A whole id is kept as it is.
fn mid_from_url(note_id: Option<&str>, note_url: Option<&str>) -> Option<String> {
    let lossy = note_id.is_some_and(|id| id.trim().contains(['E', 'e', '.']));
    let (_, rest) = note_url.filter(|_| lossy)?.split_once("/detail/")?;
    let mid = rest.split(['/', '?', '#']).next()?.trim();
    (!mid.is_empty() && mid.bytes().all(|b| b.is_ascii_digit())).then(|| mid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::raw::mapping::tests::{field, obj};

    #[test]
    fn notes_comments_and_creators_map_to_posts_comments_and_users() {
        let (e, r) = map(&obj(
            r#"{"note_id":"5012345678901234","content":"hi","create_time":1733000000,
                "create_date_time":"2024-12-01 04:53:20+08:00","liked_count":"1.2万",
                "comments_count":"3","shared_count":"0","last_modify_ts":1733100000000,
                "user_id":"1234567890","nickname":"n"}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Posts);
        assert_eq!(field(e, &r, "mid").as_deref(), Some("5012345678901234"));
        assert_eq!(
            field(e, &r, "created_at").as_deref(),
            Some("2024-12-01 04:53:20+08:00")
        );
        assert_eq!(field(e, &r, "attitudes_count").as_deref(), Some("1.2万"));

        let (e, r) = map(&obj(
            r#"{"comment_id":"501","note_id":"5012345678901234","content":"c","create_time":1733000000,
                "comment_like_count":"2","parent_comment_id":"0","user_id":"42","last_modify_ts":1733100000000}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Comments);
        assert_eq!(field(e, &r, "reply_to_cid"), None);
        // No create_date_time, crawled in the skew window: 8 hours taken back.
        assert_eq!(field(e, &r, "created_at").as_deref(), Some("1732971200"));

        let (e, r) = map(&obj(
            r#"{"user_id":"42","nickname":"n","gender":"f","desc":"d","follows":"10","fans":"2万","last_modify_ts":1733100000000}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Users);
        assert_eq!(field(e, &r, "followers_count").as_deref(), Some("2万"));
        assert_eq!(field(e, &r, "follow_count").as_deref(), Some("10"));
    }

    #[test]
    fn a_note_id_mangled_by_a_spreadsheet_is_recovered_from_its_url() {
        let url = "https://m.weibo.cn/detail/5241234567890123";
        assert_eq!(
            mid_from_url(Some("5.24123E+15"), Some(url)).as_deref(),
            Some("5241234567890123")
        );
        // A whole id stays; a mangled one without a url is left to be refused.
        assert_eq!(mid_from_url(Some("5241234567890124"), Some(url)), None);
        assert_eq!(mid_from_url(Some("5.24123E+15"), None), None);
        assert_eq!(
            mid_from_url(Some("5.24123E+15"), Some("https://weibo.com/u/1")),
            None
        );
        // A url holding the mangled id itself gives nothing back.
        let mangled = "https://m.weibo.cn/detail/5.24123E+15";
        assert_eq!(mid_from_url(Some("5.24123E+15"), Some(mangled)), None);
        assert_eq!(
            mid_from_url(Some("5.2E+15"), Some(&format!("{url}?from=page"))).as_deref(),
            Some("5241234567890123")
        );
        let (e, r) = map(&obj(&format!(
            r#"{{"note_id":"5.24123E+15","note_url":"{url}","content":"x","liked_count":"1",
                "user_id":"1","last_modify_ts":1733100000000}}"#
        )))
        .unwrap();
        assert_eq!(field(e, &r, "mid").as_deref(), Some("5241234567890123"));
    }

    #[test]
    fn create_time_outside_the_skew_window_is_kept() {
        assert_eq!(
            unskewed("1690000000", Some(1_690_000_100_000)),
            "1690000000"
        );
        assert_eq!(
            unskewed("1790000000", Some(1_790_000_100_000)),
            "1790000000"
        );
        assert_eq!(unskewed("1733000000", None), "1733000000");
        assert_eq!(
            unskewed("1733000000", Some(1_733_000_100_000)),
            "1732971200"
        );
    }

    #[test]
    fn api_html_becomes_text() {
        let html = "转发理由<br /><a href='/n/x'>@某人</a>:<span class=\"url-icon\"><img alt=[doge] src=\"https://h5.sinaimg.cn/m/emoticon/icon/others/d_doge.png\" style=\"width:1em\"></span> 好&amp;坏 &lt;3";
        assert_eq!(
            html_text(html).as_deref(),
            Some("转发理由\n@某人:[doge] 好&坏 <3")
        );
        assert_eq!(
            html_text("<IMG ALT=\"[笑cry]\" SRC=x>ok").as_deref(),
            Some("[笑cry]ok")
        );
        // No tag: kept as it is, entities and all.
        assert_eq!(html_text("I <3 weibo & you"), None);
        assert_eq!(html_text("a < b > c"), None);
        assert_eq!(html_text("<unclosed"), None);
    }
}

//! Records of nghuyong's WeiboSpider (JSON lines, ids as strings), mapped onto our canonical
//! fields. Only the shapes documented in §2 of the raw-format spec are recognised:
//!
//! - follow records `{_id: "<user>_<followed>", fan_id, follower_info: {_id}}`: `fan_id`
//!   follows `follower_info._id`;
//! - fan records `{_id: "<target>_<fan>", follower_id, fan_info: {_id}}`: `fan_info._id`
//!   follows `follower_id` (the naming reads backwards; the spec warns about it);
//! - the 2020 shape `{_id, fan_id, followed_id, crawl_time}`: `fan_id` follows `followed_id`;
//! - tweets `{_id (mid), mblogid (bid), created_at, content, source, reposts_count,
//!   comments_count, attitudes_count, pic_urls, user: {_id}, retweet_id, crawl_time}`; the
//!   repost spider writes the same shape for each repost (without what it reposts), so those
//!   read as posts; `tweet_spider_by_user_id` deletes `user`, and the author is then the uid
//!   in `url` (`https://weibo.com/<uid>/<bid>`);
//! - users `{_id, nick_name, gender, location, description, verified, verified_type,
//!   followers_count, friends_count, statuses_count, created_at}` and the 2020 shape
//!   `{_id, nick_name, gender, province, city, brief_introduction, tweets_num, follows_num,
//!   fans_num}`;
//! - comments `{_id, created_at, like_counts, content, comment_user: {_id}}` and the 2020 shape
//!   `{_id: "C_<cid>", weibo_id (bid), comment_user_id, content, like_num, created_at}`. The
//!   current comment spider does not record which post a comment is on: unless the record has
//!   a `mblogid`/`weibo_id`/`mid`, it is kept with a null `mid` (its text, author and time
//!   stand), counted as `without_post`, and the jobs skip it; the post is never guessed;
//! - 2020 reposts `{weibo_id (reposted bid), user_id, content, created_at}`: they have no id of
//!   their own (a `mongoexport` dump's `_id` is an ObjectId), so they are rejected as
//!   `missing_field` (mid) too;
//! - 2020-2022 tweets, as `mongoexport` dumps them `{_id (bid), weibo_url, user_id, content,
//!   tool, like_num, repost_num, comment_num, created_at, crawl_time}`; `created_at` may still
//!   be raw (`刚刚`), which the cleaner resolves against the crawl time.
//!
//! The crawl time is `crawl_time` or `crawl_ts` (by pipeline version), epoch seconds, which
//! the time parser already reads.

use serde_json::{Map, Value};

use super::mapping::value_text;
use super::mapping::RawRecord;
use crate::dataset::Entity;

fn id_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Object(o) => value_text(o.get("_id")?),
        other => value_text(other),
    }
}

fn follow(follower: String, followee: String, object: &Map<String, Value>) -> (Entity, RawRecord) {
    let e = Entity::Follows;
    let mut r = RawRecord::follow(follower, followee);
    if let Some(t) = crawl_of(object) {
        r.set(e, "crawl_time", t);
    }
    (e, r)
}

/// The crawl time the pipeline stamped: `crawl_time` in some versions, `crawl_ts` in others
/// (epoch seconds either way).
fn crawl_of(object: &Map<String, Value>) -> Option<String> {
    ["crawl_time", "crawl_ts"]
        .iter()
        .find_map(|k| object.get(*k).and_then(value_text))
}

/// The author's uid in a tweet's `url` (`https://weibo.com/<uid>/<bid>`), for the spider
/// that deletes the tweet's `user`.
fn uid_of_url(url: &str) -> Option<String> {
    let mut parts = url.trim_end_matches('/').rsplit('/');
    let (_bid, uid) = (parts.next()?, parts.next()?);
    (!uid.is_empty() && uid.bytes().all(|b| b.is_ascii_digit())).then(|| uid.to_string())
}

/// The canonical record of a WeiboSpider object, if it has one of the known shapes.
pub fn map(object: &Map<String, Value>) -> Option<(Entity, RawRecord)> {
    if let (Some(fan), Some(info)) = (object.get("fan_id"), object.get("follower_info")) {
        return Some(follow(value_text(fan)?, id_of(Some(info))?, object));
    }
    if let (Some(target), Some(info)) = (object.get("follower_id"), object.get("fan_info")) {
        return Some(follow(id_of(Some(info))?, value_text(target)?, object));
    }
    if let (Some(fan), Some(followed)) = (object.get("fan_id"), object.get("followed_id")) {
        return Some(follow(value_text(fan)?, value_text(followed)?, object));
    }
    if let Some(mapped) = comment(object)
        .or_else(|| user(object))
        .or_else(|| repost(object))
        .or_else(|| tweet_2020(object))
    {
        return Some(mapped);
    }
    if object.contains_key("mblogid") && (object.contains_key("user") || object.contains_key("url"))
    {
        let e = Entity::Posts;
        let mut r = RawRecord::new(e);
        for (ours, theirs) in [
            ("mid", "_id"),
            ("bid", "mblogid"),
            ("created_at", "created_at"),
            ("text", "content"),
            ("source", "source"),
            ("reposts_count", "reposts_count"),
            ("comments_count", "comments_count"),
            ("attitudes_count", "attitudes_count"),
            ("pics", "pic_urls"),
            ("retweet_mid", "retweet_id"),
        ] {
            if let Some(v) = object.get(theirs).and_then(value_text) {
                r.set(e, ours, v);
            }
        }
        if let Some(t) = crawl_of(object) {
            r.set(e, "crawl_time", t);
        }
        let uid = id_of(object.get("user")).or_else(|| {
            object
                .get("url")
                .and_then(value_text)
                .and_then(|u| uid_of_url(&u))
        });
        if let Some(uid) = uid {
            r.set(e, "uid", uid);
        }
        return Some((e, r));
    }
    None
}

/// Copies `(ours, theirs)` fields that are present (the first of several `theirs` wins).
fn copy(
    entity: Entity,
    r: &mut RawRecord,
    object: &Map<String, Value>,
    fields: &[(&str, &[&str])],
) {
    for (ours, theirs) in fields {
        if let Some(v) = theirs
            .iter()
            .find_map(|k| object.get(*k).and_then(value_text))
        {
            r.set(entity, ours, v);
        }
    }
}

fn comment(object: &Map<String, Value>) -> Option<(Entity, RawRecord)> {
    let user = object
        .get("comment_user")
        .and_then(|u| id_of(Some(u)))
        .or_else(|| object.get("comment_user_id").and_then(value_text))?;
    let e = Entity::Comments;
    let mut r = RawRecord::new(e);
    let cid = object.get("_id").and_then(value_text)?;
    r.set(e, "cid", cid.trim_start_matches("C_"));
    r.set(e, "uid", user);
    copy(
        e,
        &mut r,
        object,
        &[
            ("mid", &["mid", "mblogid", "weibo_id"]),
            ("created_at", &["created_at"]),
            ("text", &["content"]),
            ("like_count", &["like_counts", "like_num"]),
            ("crawl_time", &["crawl_time", "crawl_ts"]),
        ],
    );
    Some((e, r))
}

fn user(object: &Map<String, Value>) -> Option<(Entity, RawRecord)> {
    let crawler_only = ["mblogid", "fan_id", "follower_id", "content", "weibo_id"];
    if !object.contains_key("_id")
        || !object.contains_key("nick_name")
        || crawler_only.iter().any(|k| object.contains_key(*k))
    {
        return None;
    }
    let e = Entity::Users;
    let mut r = RawRecord::new(e);
    copy(
        e,
        &mut r,
        object,
        &[
            ("uid", &["_id"]),
            ("screen_name", &["nick_name"]),
            ("gender", &["gender"]),
            ("province", &["province"]),
            ("city", &["city"]),
            ("location", &["location"]),
            (
                "description",
                &["description", "desc_text", "brief_introduction"],
            ),
            ("verified", &["verified"]),
            ("verified_type", &["verified_type"]),
            ("followers_count", &["followers_count", "fans_num"]),
            ("follow_count", &["friends_count", "follows_num"]),
            ("statuses_count", &["statuses_count", "tweets_num"]),
            ("created_at", &["created_at"]),
            ("crawl_time", &["crawl_time", "crawl_ts"]),
        ],
    );
    Some((e, r))
}

/// A tweet of the 2020-2022 spider, as `mongoexport` dumps its `Tweets` collection: `_id` is
/// the bid, the author is `user_id`, counts are `like_num`, `repost_num`, `comment_num`.
fn tweet_2020(object: &Map<String, Value>) -> Option<(Entity, RawRecord)> {
    if !(object.contains_key("weibo_url") && object.contains_key("user_id")) {
        return None;
    }
    let e = Entity::Posts;
    let mut r = RawRecord::new(e);
    copy(
        e,
        &mut r,
        object,
        &[
            ("bid", &["_id"]),
            ("uid", &["user_id"]),
            ("created_at", &["created_at"]),
            ("text", &["content"]),
            ("source", &["tool"]),
            ("attitudes_count", &["like_num"]),
            ("reposts_count", &["repost_num"]),
            ("comments_count", &["comment_num"]),
            ("crawl_time", &["crawl_time", "crawl_ts"]),
        ],
    );
    Some((e, r))
}

fn repost(object: &Map<String, Value>) -> Option<(Entity, RawRecord)> {
    if !(object.contains_key("weibo_id") && object.contains_key("user_id")) {
        return None;
    }
    let e = Entity::Reposts;
    let mut r = RawRecord::new(e);
    copy(
        e,
        &mut r,
        object,
        &[
            ("mid", &["mid"]),
            ("uid", &["user_id"]),
            ("retweet_mid", &["weibo_id"]),
            ("created_at", &["created_at"]),
            ("text", &["content"]),
            ("crawl_time", &["crawl_time", "crawl_ts"]),
        ],
    );
    // An `_id` that is an id (not a mongoexport ObjectId, `{"$oid": ...}`) is the repost's.
    if let Some(id) = object
        .get("_id")
        .filter(|v| !v.is_object())
        .and_then(value_text)
    {
        r.set(e, "mid", id);
    }
    Some((e, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::raw::mapping::tests::{field, obj};

    fn edge(json: &str) -> (String, String) {
        let (e, r) = map(&obj(json)).unwrap();
        assert_eq!(e, Entity::Follows);
        (
            r.field(0).unwrap().to_string(),
            r.field(1).unwrap().to_string(),
        )
    }

    #[test]
    fn follow_and_fan_records_point_the_right_way() {
        assert_eq!(
            edge(r#"{"_id":"1_2","fan_id":"1","follower_info":{"_id":"2","nick_name":"b"}}"#),
            ("1".into(), "2".into())
        );
        // A fan record: fan_info follows follower_id.
        assert_eq!(
            edge(r#"{"_id":"2_1","follower_id":"2","fan_info":{"_id":"1","nick_name":"a"}}"#),
            ("1".into(), "2".into())
        );
        assert_eq!(
            edge(r#"{"_id":"x","fan_id":"1","followed_id":"2","crawl_time":1796000000}"#),
            ("1".into(), "2".into())
        );
        assert!(map(&obj(r#"{"uid":"1"}"#)).is_none());
    }

    #[test]
    fn users_comments_and_reposts_of_both_generations() {
        let (e, r) = map(&obj(
            r#"{"_id":"1749127163","nick_name":"n","gender":"m","location":"北京 海淀","verified":true,"verified_type":0,"followers_count":12,"friends_count":3,"statuses_count":7,"created_at":"2010-05-31 23:07:59","crawl_time":1796000000}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Users);
        assert_eq!(field(e, &r, "follow_count").as_deref(), Some("3"));
        assert_eq!(field(e, &r, "location").as_deref(), Some("北京 海淀"));
        let (e, r) = map(&obj(
            r#"{"_id":"1087770692","nick_name":"n","province":"北京","city":"东城区","tweets_num":5,"follows_num":6,"fans_num":7,"crawl_time":1796000000}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Users);
        assert_eq!(field(e, &r, "followers_count").as_deref(), Some("7"));

        let (e, r) = map(&obj(
            r#"{"_id":4871234567890123,"created_at":"2026-11-29 10:00:00","like_counts":3,"content":"c","comment_user":{"_id":"42","nick_name":"x"}}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Comments);
        assert_eq!(field(e, &r, "uid").as_deref(), Some("42"));
        assert_eq!(field(e, &r, "mid"), None);
        let (e, r) = map(&obj(
            r#"{"_id":"C_4498765432101234","weibo_id":"IDl56i8av","comment_user_id":"42","content":"c","like_num":1,"created_at":"2026-11-29 10:00"}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Comments);
        assert_eq!(field(e, &r, "cid").as_deref(), Some("4498765432101234"));
        assert_eq!(field(e, &r, "mid").as_deref(), Some("IDl56i8av"));

        let (e, r) = map(&obj(
            r#"{"weibo_id":"JtSFZ4eGg","user_id":"42","content":"//转发","created_at":"2026-11-29 10:00","crawl_time":1796000000}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Reposts);
        assert_eq!(field(e, &r, "mid"), None);
        assert_eq!(field(e, &r, "retweet_mid").as_deref(), Some("JtSFZ4eGg"));
    }

    #[test]
    fn mongoexport_tweets_of_2020_are_posts_keyed_by_bid() {
        let (e, r) = map(&obj(
            r#"{"_id":"JtSFZ4eGg","weibo_url":"https://weibo.com/1749127163/JtSFZ4eGg","user_id":"1749127163","content":"旧版","tool":"iPhone客户端","like_num":3,"repost_num":1,"comment_num":2,"created_at":"刚刚","crawl_time":1796000000}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Posts);
        assert_eq!(field(e, &r, "bid").as_deref(), Some("JtSFZ4eGg"));
        assert_eq!(field(e, &r, "uid").as_deref(), Some("1749127163"));
        assert_eq!(field(e, &r, "source").as_deref(), Some("iPhone客户端"));
        assert_eq!(field(e, &r, "reposts_count").as_deref(), Some("1"));
        assert_eq!(field(e, &r, "created_at").as_deref(), Some("刚刚"));
        // A 2020 repost with a mongoexport ObjectId is still a repost without an id.
        let (e, r) = map(&obj(
            r#"{"_id":{"$oid":"5f1e2d3c4b5a697887766554"},"weibo_id":"JtSFZ4eGg","user_id":"42","content":"//","created_at":"2026-11-29 10:00"}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Reposts);
        assert_eq!(field(e, &r, "mid"), None);
    }

    #[test]
    fn a_tweet_without_its_user_takes_the_author_from_its_url() {
        let (e, r) = map(&obj(
            r#"{"_id":"4973000000000501","mblogid":"Nk2aGxPz2","url":"https://weibo.com/1749127163/Nk2aGxPz2","created_at":"2026-11-29 10:00:00","content":"转发","retweet_id":"4973000000000001","crawl_ts":1796000000}"#,
        ))
        .unwrap();
        assert_eq!(e, Entity::Posts);
        assert_eq!(field(e, &r, "uid").as_deref(), Some("1749127163"));
        assert_eq!(
            field(e, &r, "retweet_mid").as_deref(),
            Some("4973000000000001")
        );
        assert_eq!(field(e, &r, "crawl_time").as_deref(), Some("1796000000"));
        // With its user, the user's id; a url without a uid gives none.
        let (_, r) = map(&obj(
            r#"{"_id":"1","mblogid":"b","user":{"_id":"42"},"url":"https://weibo.com/7/b"}"#,
        ))
        .unwrap();
        assert_eq!(field(e, &r, "uid").as_deref(), Some("42"));
        let (_, r) = map(&obj(
            r#"{"_id":"1","mblogid":"b","url":"https://weibo.com/detail/b"}"#,
        ))
        .unwrap();
        assert_eq!(field(e, &r, "uid"), None);
        assert_eq!(
            uid_of_url("https://weibo.com/1749127163/Nk2aGxPz2/"),
            Some("1749127163".into())
        );
    }
}

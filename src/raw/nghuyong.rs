//! Records of nghuyong's WeiboSpider (JSON lines, ids as strings), mapped onto our canonical
//! fields. Only the shapes documented in §2 of the raw-format spec are recognised:
//!
//! - follow records `{_id: "<user>_<followed>", fan_id, follower_info: {_id}}`: `fan_id`
//!   follows `follower_info._id`;
//! - fan records `{_id: "<target>_<fan>", follower_id, fan_info: {_id}}`: `fan_info._id`
//!   follows `follower_id` (the naming reads backwards; the spec warns about it);
//! - the 2020 shape `{_id, fan_id, followed_id, crawl_time}`: `fan_id` follows `followed_id`;
//! - tweets `{_id (mid), mblogid (bid), created_at, content, source, reposts_count,
//!   comments_count, attitudes_count, pic_urls, user: {_id}, crawl_time}`.
//!
//! `crawl_time` is epoch seconds there, which the time parser already reads.

use serde_json::{Map, Value};

use super::canonical::value_text;
use crate::clean::{Entity, RawRecord};

fn id_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Object(o) => value_text(o.get("_id")?),
        other => value_text(other),
    }
}

fn follow(follower: String, followee: String, object: &Map<String, Value>) -> (Entity, RawRecord) {
    let e = Entity::Follows;
    let mut r = RawRecord::new(e);
    r.set(e, "follower", follower);
    r.set(e, "followee", followee);
    if let Some(t) = object.get("crawl_time").and_then(value_text) {
        r.set(e, "crawl_time", t);
    }
    (e, r)
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
    if object.contains_key("mblogid") && object.contains_key("user") {
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
            ("crawl_time", "crawl_time"),
        ] {
            if let Some(v) = object.get(theirs).and_then(value_text) {
                r.set(e, ours, v);
            }
        }
        if let Some(uid) = id_of(object.get("user")) {
            r.set(e, "uid", uid);
        }
        return Some((e, r));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(json: &str) -> Map<String, Value> {
        match serde_json::from_str(json).unwrap() {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

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
}

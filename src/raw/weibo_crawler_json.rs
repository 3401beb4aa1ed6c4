//! weibo-crawler's (dataabc/weibo-crawler) per-user JSON, written since 2026-03 beside the CSV
//! under `weibo_data/<name>/<uid>.json`: one object per file,
//! `{"user": {...}, "weibo": [{..., "retweet": {...}}]}`.
//!
//! One object holds many records: the user, each of their posts, and the original of each
//! repost (a post of its own author, which the repost names as its `retweet_mid`). Posts take
//! `full_created_at` when the file has it (newer versions; `created_at` may then be a date
//! only). The file carries no crawl time: the run's default crawl time applies, as for the
//! same crawler's CSV.
//!
//! Invariant: every record of the object is emitted at the object's line, so each is counted
//! on its own (a user, their posts and the reposted originals).

use serde_json::{Map, Value};

use super::mapping::{value_text, RawRecord};
use crate::dataset::Entity;

/// weibo-crawler's user field → canonical user field.
const USER: &[(&str, &str)] = &[
    ("id", "uid"),
    ("screen_name", "screen_name"),
    ("gender", "gender"),
    ("location", "location"),
    ("description", "description"),
    ("verified", "verified"),
    ("verified_type", "verified_type"),
    ("followers_count", "followers_count"),
    ("follow_count", "follow_count"),
    ("statuses_count", "statuses_count"),
    ("registration_time", "created_at"),
];

/// weibo-crawler's weibo field → canonical post field (`created_at` is handled apart).
const WEIBO: &[(&str, &str)] = &[
    ("id", "mid"),
    ("bid", "bid"),
    ("user_id", "uid"),
    ("text", "text"),
    ("pics", "pics"),
    ("source", "source"),
    ("attitudes_count", "attitudes_count"),
    ("comments_count", "comments_count"),
    ("reposts_count", "reposts_count"),
    ("topics", "topics"),
    ("at_users", "at_users"),
];

/// The records of a weibo-crawler per-user object, if it is one: the user, then each post
/// followed by the original it reposts.
pub fn map(object: &Map<String, Value>) -> Option<Vec<(Entity, RawRecord)>> {
    let (Some(Value::Object(user)), Some(Value::Array(weibo))) =
        (object.get("user"), object.get("weibo"))
    else {
        return None;
    };
    let mut out = vec![(Entity::Users, fields(Entity::Users, user, USER))];
    for post in weibo {
        let Value::Object(post) = post else {
            // Not a post: kept as an empty record, which the cleaner rejects (missing mid).
            out.push((Entity::Posts, RawRecord::new(Entity::Posts)));
            continue;
        };
        let mut record = weibo_post(post);
        if let Some(Value::Object(original)) = post.get("retweet") {
            let original = weibo_post(original);
            if let Some(mid) = original.field(Entity::Posts.position("mid")) {
                let mid = mid.to_string();
                record.set(Entity::Posts, "retweet_mid", mid);
            }
            out.push((Entity::Posts, record));
            out.push((Entity::Posts, original));
        } else {
            out.push((Entity::Posts, record));
        }
    }
    Some(out)
}

fn weibo_post(post: &Map<String, Value>) -> RawRecord {
    let e = Entity::Posts;
    let mut r = fields(e, post, WEIBO);
    let created = ["full_created_at", "created_at"].iter().find_map(|k| {
        post.get(*k)
            .and_then(value_text)
            .filter(|t| !t.trim().is_empty())
    });
    if let Some(t) = created {
        r.set(e, "created_at", t);
    }
    mark_capped_counts(e, &mut r);
    r
}

fn fields(entity: Entity, object: &Map<String, Value>, table: &[(&str, &str)]) -> RawRecord {
    let mut r = RawRecord::new(entity);
    for (theirs, ours) in table {
        if let Some(v) = object.get(*theirs).and_then(value_text) {
            r.set(entity, ours, v);
        }
    }
    r
}

/// weibo-crawler (its CSV and its JSON) turns the API's capped `100万+` into 1000000 (its `string_to_int` appends
/// `0000` to `100`), so a post count of exactly that is the cap: it is written back as
/// `100万+`, which the cleaner reads as 1000000 with `counts_capped` (docs/formats.md).
pub fn mark_capped_counts(entity: Entity, record: &mut RawRecord) {
    for name in ["reposts_count", "comments_count", "attitudes_count"] {
        let Some(i) = entity.field_index(name) else {
            continue;
        };
        if record.field(i).is_some_and(|v| v.trim() == "1000000") {
            record.set_index(i, "100万+");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::mapping::tests::{field, obj};

    #[test]
    fn a_user_file_is_the_user_their_posts_and_the_originals_they_repost() {
        let records = map(&obj(
            r#"{"user":{"id":1500000031,"screen_name":"n","followers_count":"2万"},
                "weibo":[{"id":4990000000000001,"bid":"P1","user_id":1500000031,"text":"own",
                          "created_at":"2026-11-28","full_created_at":"2026-11-28 09:00:00"},
                         {"id":4990000000000002,"user_id":1500000031,"text":"rt",
                          "created_at":"2026-11-28 10:00:00",
                          "retweet":{"id":4980000000000009,"user_id":1669879400,"text":"orig",
                                     "created_at":"2026-11-20 08:00:00"}}]}"#,
        ))
        .unwrap();
        let entities: Vec<Entity> = records.iter().map(|(e, _)| *e).collect();
        assert_eq!(
            entities,
            [Entity::Users, Entity::Posts, Entity::Posts, Entity::Posts]
        );
        let (u, p) = (Entity::Users, Entity::Posts);
        assert_eq!(
            field(u, &records[0].1, "followers_count").as_deref(),
            Some("2万")
        );
        assert_eq!(
            field(p, &records[1].1, "created_at").as_deref(),
            Some("2026-11-28 09:00:00")
        );
        assert_eq!(
            field(p, &records[2].1, "retweet_mid").as_deref(),
            Some("4980000000000009")
        );
        assert_eq!(
            field(p, &records[3].1, "uid").as_deref(),
            Some("1669879400")
        );
        assert!(map(&obj(r#"{"user":{"id":1},"weibo":{}}"#)).is_none());
    }

    #[test]
    fn a_million_is_the_cap() {
        let records = map(&obj(r#"{"user":{"id":1500000031},
                "weibo":[{"id":4990000000000003,"user_id":1500000031,"text":"hot",
                          "created_at":"2026-11-28 10:00:00","attitudes_count":1000000,
                          "comments_count":1000001,"reposts_count":12}]}"#))
        .unwrap();
        let p = Entity::Posts;
        let count = |name| field(p, &records[1].1, name);
        assert_eq!(count("attitudes_count").as_deref(), Some("100万+"));
        assert_eq!(count("comments_count").as_deref(), Some("1000001"));
        assert_eq!(count("reposts_count").as_deref(), Some("12"));
    }
}

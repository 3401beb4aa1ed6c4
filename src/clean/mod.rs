//! The cleaning contract (§4 of the raw-format spec): from a raw record, whatever reader it
//! came from, to a typed row of one entity, or to a reject with a reason code.
//!
//! Readers (in [`crate::raw`]) map every format onto the canonical field list of an entity
//! ([`Entity::fields`]); the functions here see only that canonical form, so each rule is
//! applied identically to a weibo-crawler CSV row and to one of our own JSON lines.
//!
//! Invariants:
//! - [`clean_record`] returns exactly one of a row or a [`Reject`]; it never panics on any
//!   input (property-tested with every reader in `robustness`).
//! - Rows carry the natural key used for deduplication and the crawl time that decides which
//!   duplicate wins (the newest crawl).

pub mod columns;
pub mod inspect;
pub mod job;
#[cfg(test)]
mod robustness;
pub mod shuffle;

use std::borrow::Cow;

pub use crate::dataset::{Entity, Reject};
use crate::field_rules::{
    clean_content, clean_text, is_missing, parse_bool, parse_count, parse_crawl_time, parse_gender,
    parse_id, parse_mid_or_bid, parse_optional_id, parse_time, split_list, trim_value,
};
pub use crate::raw::RawRecord;

/// A raw record's canonical fields as `field=value` pairs, shortened: what a reject shows.
pub(crate) fn raw_excerpt(entity: Entity, raw: &RawRecord) -> String {
    let parts: Vec<String> = entity
        .fields()
        .iter()
        .enumerate()
        .filter_map(|(i, name)| raw.field(i).map(|v| format!("{name}={v}")))
        .collect();
    crate::raw::excerpt(&parts.join(" "))
}

/// A cleaned user.
#[derive(Clone, Debug, PartialEq)]
pub struct User<'a> {
    pub uid: i64,
    pub screen_name: Option<Cow<'a, str>>,
    pub gender: Option<&'static str>,
    pub province: Option<Cow<'a, str>>,
    pub city: Option<Cow<'a, str>>,
    pub location: Option<Cow<'a, str>>,
    pub description: Option<Cow<'a, str>>,
    pub verified: Option<bool>,
    pub verified_type: Option<i64>,
    pub followers_count: Option<i64>,
    pub follow_count: Option<i64>,
    pub statuses_count: Option<i64>,
    pub counts_capped: bool,
    pub created_at: Option<i64>,
    pub crawl_time: i64,
}

/// A cleaned post.
#[derive(Clone, Debug, PartialEq)]
pub struct Post<'a> {
    pub mid: i64,
    pub bid: Option<Cow<'a, str>>,
    pub uid: Option<i64>,
    pub created_at: i64,
    pub text: Cow<'a, str>,
    pub source: Option<Cow<'a, str>>,
    pub reposts_count: Option<i64>,
    pub comments_count: Option<i64>,
    pub attitudes_count: Option<i64>,
    pub counts_capped: bool,
    pub topics: Vec<Cow<'a, str>>,
    pub at_users: Vec<Cow<'a, str>>,
    pub pics: Vec<Cow<'a, str>>,
    pub retweet_mid: Option<i64>,
    pub is_deleted: bool,
    pub crawl_time: i64,
}

/// A cleaned follow edge: `follower` follows `followee`.
#[derive(Clone, Debug, PartialEq)]
pub struct Follow {
    pub follower: i64,
    pub followee: i64,
    pub followed_at: Option<i64>,
    pub crawl_time: i64,
}

/// A cleaned comment.
#[derive(Clone, Debug, PartialEq)]
pub struct Comment<'a> {
    pub cid: i64,
    /// The post commented on; `None` when the crawl did not record it (kept, and counted as
    /// `without_post`).
    pub mid: Option<i64>,
    pub uid: Option<i64>,
    pub created_at: i64,
    pub text: Cow<'a, str>,
    pub like_count: Option<i64>,
    pub reply_to_cid: Option<i64>,
    pub is_deleted: bool,
    pub crawl_time: i64,
}

/// A cleaned repost: post `mid` by `uid` reposts `retweet_mid`.
#[derive(Clone, Debug, PartialEq)]
pub struct Repost<'a> {
    pub mid: i64,
    pub uid: i64,
    pub retweet_mid: i64,
    pub created_at: i64,
    pub text: Cow<'a, str>,
    pub crawl_time: i64,
}

/// A cleaned row of any entity. Its text borrows from the raw record where cleaning changed
/// nothing. Users and posts, many times the size of the rest, are boxed: a chunk of cleaned
/// follows is not moved about at a post's size.
#[derive(Clone, Debug, PartialEq)]
pub enum Row<'a> {
    User(Box<User<'a>>),
    Post(Box<Post<'a>>),
    Follow(Follow),
    Comment(Comment<'a>),
    Repost(Repost<'a>),
}

impl Row<'_> {
    pub fn entity(&self) -> Entity {
        match self {
            Row::User(_) => Entity::Users,
            Row::Post(_) => Entity::Posts,
            Row::Follow(_) => Entity::Follows,
            Row::Comment(_) => Entity::Comments,
            Row::Repost(_) => Entity::Reposts,
        }
    }
}

fn text_opt(s: &str) -> Option<Cow<'_, str>> {
    if is_missing(s) {
        None
    } else {
        let t = clean_text(trim_value(s));
        (!t.is_empty()).then_some(t)
    }
}

fn count(s: &str, capped: &mut bool) -> Result<Option<i64>, Reject> {
    Ok(parse_count(s)?.map(|(v, c)| {
        *capped |= c;
        v
    }))
}

/// A cleaned record, and whether its crawl stamp was unreadable: the run's crawl time then
/// stands in, and the report counts it (`crawl_time_defaulted`).
#[derive(Debug, PartialEq)]
pub struct Cleaned<'a> {
    pub row: Row<'a>,
    pub crawl_defaulted: bool,
}

/// Cleans one raw record. `default_crawl_ms` stands in for a missing `crawl_time`, and for
/// one that does not read as a time: the stamp is the crawler's bookkeeping, not the record's
/// content, so it alone never rejects a record (a spreadsheet's `1.76522E+12`, say; the ids
/// beside it then give the reason, docs/formats.md).
pub fn clean_record(
    entity: Entity,
    raw: &RawRecord,
    default_crawl_ms: i64,
) -> Result<Cleaned<'_>, Reject> {
    // The stamp's position found at compile time (see `Entity::position`).
    let stamp = raw.get(match entity {
        Entity::Users => const { Entity::Users.position("crawl_time") },
        Entity::Posts => const { Entity::Posts.position("crawl_time") },
        Entity::Follows => const { Entity::Follows.position("crawl_time") },
        Entity::Comments => const { Entity::Comments.position("crawl_time") },
        Entity::Reposts => const { Entity::Reposts.position("crawl_time") },
    });
    let (crawl, crawl_defaulted) = if is_missing(stamp) {
        (default_crawl_ms, false)
    } else {
        match parse_crawl_time(stamp) {
            Ok(t) => (t, false),
            Err(_) => (default_crawl_ms, true),
        }
    };
    Ok(Cleaned {
        row: clean_row(entity, raw, crawl)?,
        crawl_defaulted,
    })
}

/// The row of one raw record, crawled at `crawl`.
fn clean_row(entity: Entity, raw: &RawRecord, crawl: i64) -> Result<Row<'_>, Reject> {
    // A field by name, its position found at compile time (see `Entity::position`).
    macro_rules! f {
        ($entity:ident, $name:literal) => {
            raw.get(const { Entity::$entity.position($name) })
        };
    }
    let time = |s: &str| parse_time(s, crawl);
    let optional_time = |s: &str| -> Result<Option<i64>, Reject> {
        if is_missing(s) {
            Ok(None)
        } else {
            parse_time(s, crawl).map(Some)
        }
    };
    match entity {
        Entity::Users => {
            let mut capped = false;
            Ok(Row::User(Box::new(User {
                uid: parse_id(f!(Users, "uid"))?,
                screen_name: text_opt(f!(Users, "screen_name")),
                gender: parse_gender(f!(Users, "gender")),
                province: text_opt(f!(Users, "province")),
                city: text_opt(f!(Users, "city")),
                location: text_opt(f!(Users, "location")),
                description: text_opt(f!(Users, "description")),
                verified: parse_bool(f!(Users, "verified")),
                verified_type: trim_value(f!(Users, "verified_type")).parse().ok(),
                followers_count: count(f!(Users, "followers_count"), &mut capped)?,
                follow_count: count(f!(Users, "follow_count"), &mut capped)?,
                statuses_count: count(f!(Users, "statuses_count"), &mut capped)?,
                counts_capped: capped,
                created_at: optional_time(f!(Users, "created_at"))?,
                crawl_time: crawl,
            })))
        }
        Entity::Posts => {
            let mid = if is_missing(f!(Posts, "mid")) {
                parse_mid_or_bid(f!(Posts, "bid"))?
            } else {
                parse_mid_or_bid(f!(Posts, "mid"))?
            };
            let (text, is_deleted) = clean_content(f!(Posts, "text"));
            let mut capped = false;
            let bid = trim_value(f!(Posts, "bid"));
            Ok(Row::Post(Box::new(Post {
                mid,
                bid: (!is_missing(bid)).then_some(Cow::Borrowed(bid)),
                // A deleted repost's original has no user: allowed, counted as dangling.
                uid: parse_optional_id(f!(Posts, "uid"))?,
                created_at: time(f!(Posts, "created_at"))?,
                text,
                source: text_opt(f!(Posts, "source")),
                reposts_count: count(f!(Posts, "reposts_count"), &mut capped)?,
                comments_count: count(f!(Posts, "comments_count"), &mut capped)?,
                attitudes_count: count(f!(Posts, "attitudes_count"), &mut capped)?,
                counts_capped: capped,
                topics: split_list(f!(Posts, "topics")),
                at_users: split_list(f!(Posts, "at_users")),
                pics: split_list(f!(Posts, "pics")),
                retweet_mid: if is_missing(f!(Posts, "retweet_mid")) {
                    None
                } else {
                    Some(parse_mid_or_bid(f!(Posts, "retweet_mid"))?)
                },
                is_deleted,
                crawl_time: crawl,
            })))
        }
        Entity::Follows => {
            let follower = parse_id(f!(Follows, "follower"))?;
            let followee = parse_id(f!(Follows, "followee"))?;
            if follower == followee {
                return Err(Reject::SelfFollow);
            }
            Ok(Row::Follow(Follow {
                follower,
                followee,
                followed_at: optional_time(f!(Follows, "followed_at"))?,
                crawl_time: crawl,
            }))
        }
        Entity::Comments => {
            let (text, is_deleted) = clean_content(f!(Comments, "text"));
            let mut capped = false;
            let cid = parse_id(f!(Comments, "cid"))?;
            // MediaCrawler's `parent_comment_id` is the thread's root: a top-level comment
            // names itself, which is no reply.
            let reply_to_cid =
                parse_optional_id(f!(Comments, "reply_to_cid"))?.filter(|r| *r != cid);
            Ok(Row::Comment(Comment {
                cid,
                mid: match f!(Comments, "mid") {
                    m if is_missing(m) => None,
                    m => Some(parse_mid_or_bid(m)?),
                },
                uid: parse_optional_id(f!(Comments, "uid"))?,
                created_at: time(f!(Comments, "created_at"))?,
                text,
                like_count: count(f!(Comments, "like_count"), &mut capped)?,
                reply_to_cid,
                is_deleted,
                crawl_time: crawl,
            }))
        }
        Entity::Reposts => Ok(Row::Repost(Repost {
            mid: parse_mid_or_bid(f!(Reposts, "mid"))?,
            uid: parse_id(f!(Reposts, "uid"))?,
            retweet_mid: parse_mid_or_bid(f!(Reposts, "retweet_mid"))?,
            created_at: time(f!(Reposts, "created_at"))?,
            text: clean_content(f!(Reposts, "text")).0,
            crawl_time: crawl,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compile-time lookup finds every field where the run-time one does.
    #[test]
    fn position_agrees_with_field_index() {
        for entity in Entity::ALL {
            for (i, name) in entity.fields().iter().enumerate() {
                assert_eq!(entity.position(name), i);
                assert_eq!(entity.field_index(name), Some(i));
            }
        }
    }

    const CRAWL: i64 = 1_795_964_400_000; // 2026-11-29 23:00 +08:00

    fn raw(entity: Entity, pairs: &[(&str, &str)]) -> RawRecord {
        let mut r = RawRecord::new(entity);
        for (k, v) in pairs {
            r.set(entity, k, *v);
        }
        r
    }

    #[test]
    fn index_is_the_position_in_all() {
        for (i, e) in Entity::ALL.into_iter().enumerate() {
            assert_eq!(e.index(), i, "{e:?}");
        }
    }

    #[test]
    fn every_entity_fits_a_raw_record() {
        for e in Entity::ALL {
            assert!(e.fields().len() <= crate::raw::mapping::MAX_FIELDS, "{e:?}");
            let mut r = RawRecord::new(e);
            let last = e.fields().len() - 1;
            r.set_index(last, "v");
            r.set_index(last + 1, "ignored");
            assert_eq!((r.field(last), r.field(last + 1)), (Some("v"), None));
        }
    }

    #[test]
    fn follows_reject_self_follow_and_keep_the_rest() {
        let ok = raw(Entity::Follows, &[("follower", "1"), ("followee", "2")]);
        match clean_record(Entity::Follows, &ok, CRAWL).unwrap().row {
            Row::Follow(f) => {
                assert_eq!((f.follower, f.followee, f.followed_at), (1, 2, None));
                assert_eq!(f.crawl_time, CRAWL);
            }
            other => panic!("{other:?}"),
        }
        let selfie = raw(Entity::Follows, &[("follower", "7"), ("followee", "7\t")]);
        assert_eq!(
            clean_record(Entity::Follows, &selfie, CRAWL),
            Err(Reject::SelfFollow)
        );
        let missing = raw(Entity::Follows, &[("follower", "7")]);
        assert_eq!(
            clean_record(Entity::Follows, &missing, CRAWL),
            Err(Reject::MissingField)
        );
    }

    #[test]
    fn an_unreadable_crawl_stamp_falls_back_and_leaves_the_reason_to_the_ids() {
        // A spreadsheet's stamp alone: the record is kept, at the run's crawl time.
        let follow = raw(
            Entity::Follows,
            &[
                ("follower", "7"),
                ("followee", "8"),
                ("crawl_time", "1.76522E+12"),
            ],
        );
        let cleaned = clean_record(Entity::Follows, &follow, CRAWL).unwrap();
        assert!(cleaned.crawl_defaulted);
        match cleaned.row {
            Row::Follow(f) => assert_eq!(f.crawl_time, CRAWL),
            other => panic!("{other:?}"),
        }
        // With mangled ids beside it, the ids are the reason.
        let post = raw(
            Entity::Posts,
            &[
                ("mid", "5.2412E+15"),
                ("created_at", "2026-11-29 20:30:00"),
                ("crawl_time", "1.76522E+12"),
            ],
        );
        assert_eq!(
            clean_record(Entity::Posts, &post, CRAWL),
            Err(Reject::LossyId)
        );
        // A readable stamp is the record's own.
        let stamped = raw(
            Entity::Follows,
            &[
                ("follower", "7"),
                ("followee", "8"),
                ("crawl_time", "2026-11-20 08:00:00"),
            ],
        );
        let cleaned = clean_record(Entity::Follows, &stamped, CRAWL).unwrap();
        assert!(!cleaned.crawl_defaulted);
        match cleaned.row {
            Row::Follow(f) => assert_ne!(f.crawl_time, CRAWL),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_comment_that_names_itself_as_parent_is_no_reply() {
        let comment = |parent: &str| {
            let r = raw(
                Entity::Comments,
                &[
                    ("cid", "4973100000000001"),
                    ("mid", "4973000000000001"),
                    ("created_at", "2026-11-29 20:30:00"),
                    ("reply_to_cid", parent),
                ],
            );
            match clean_record(Entity::Comments, &r, CRAWL).unwrap().row {
                Row::Comment(c) => c.reply_to_cid,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(comment("4973100000000001"), None);
        assert_eq!(comment("4973100000000000"), Some(4_973_100_000_000_000));
    }

    #[test]
    fn posts_take_a_bid_when_the_mid_is_missing_and_flag_deleted_text() {
        let bid = crate::field_rules::mid_to_bid(4_973_000_000_000_001);
        let r = raw(
            Entity::Posts,
            &[
                ("bid", bid.as_str()),
                ("uid", "1669879400"),
                ("created_at", "2小时前"),
                ("text", "抱歉，此微博已被作者删除。"),
                ("reposts_count", "1.2万"),
                ("attitudes_count", "100万+"),
                ("topics", "#a#,#b#"),
            ],
        );
        match clean_record(Entity::Posts, &r, CRAWL).unwrap().row {
            Row::Post(p) => {
                assert_eq!(p.mid, 4_973_000_000_000_001);
                assert!(p.is_deleted);
                assert_eq!(p.text, "");
                assert_eq!(p.reposts_count, Some(12_000));
                assert_eq!(p.attitudes_count, Some(1_000_000));
                assert!(p.counts_capped);
                assert_eq!(p.created_at, CRAWL - 2 * 3_600_000);
                assert_eq!(p.topics, vec!["a", "b"]);
            }
            other => panic!("{other:?}"),
        }
    }
}

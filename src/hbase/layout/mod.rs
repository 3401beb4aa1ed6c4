//! The HBase layout: every table, rowkey and cell that any job writes or reads.
//!
//! `load` writes the entity tables, `friends --load` the `friend` table and its cells in
//! `user`, `follow` and `fans`, `rank --load` the `rank` table; `verify`, `query` and the
//! demo read them back. All of them
//! name tables by [`Table`], build rowkeys with [`keys`] and name cells by the constants of
//! [`cell`], so a column is spelt in one place. The layout is documented with a worked
//! example in docs/hbase-layout.md, whose bytes the golden tests in [`keys`] pin.
//!
//! Invariants: ids, times (epoch ms) and counters are 8-byte big-endian signed integers
//! (HBase's `Increment` encoding); text is UTF-8; flags are `1` or `0`; an unknown time is
//! an empty value. [`kind`] says which a cell is, for readers that print rows.

pub mod keys;

use serde::Serialize;

use crate::hbase::admin::{Compression, FamilySpec, TableSpec};
use crate::hbase::Put;

/// The tables `load` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    User,
    Post,
    // HBase names them with underscores; the CLI takes both spellings.
    #[value(alias = "post_by_mid")]
    PostByMid,
    Follow,
    Fans,
    #[value(alias = "user_post")]
    UserPost,
    #[value(alias = "user_by_name")]
    UserByName,
    /// Written by `friends --load`, not by `load`.
    Friend,
    /// Written by `rank --load`: the daily leaderboards (not a table `load --tables` takes).
    #[value(skip)]
    Rank,
    /// Written by `inbox --load`: the home feeds, K versions per followee (created by the
    /// inbox job itself, with `VERSIONS = K`).
    #[value(skip)]
    Inbox,
}

impl Table {
    pub const ALL: [Table; 7] = [
        Table::User,
        Table::Post,
        Table::PostByMid,
        Table::Follow,
        Table::Fans,
        Table::UserPost,
        Table::UserByName,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::User => "user",
            Table::Post => "post",
            Table::PostByMid => "post_by_mid",
            Table::Follow => "follow",
            Table::Fans => "fans",
            Table::UserPost => "user_post",
            Table::UserByName => "user_by_name",
            Table::Friend => "friend",
            Table::Rank => "rank",
            Table::Inbox => "inbox",
        }
    }

    /// `<namespace>:<table>`, as HBase names it.
    pub fn in_namespace(self, namespace: &str) -> String {
        format!("{namespace}:{}", self.name())
    }

    /// Column families: `info` + `count` for the main tables, `r` for relation/index tables.
    pub fn spec(self, namespace: &str, compression: Compression) -> TableSpec {
        let fam = |n: &str| FamilySpec::new(n).compression(compression);
        let families = match self {
            Table::User | Table::Post => vec![fam("info"), fam("count")],
            // The feed entries (`f`, VERSIONS set by the job) and the celebrities followed.
            Table::Inbox => vec![fam(INBOX_FAMILY), fam(CELEBRITY_FAMILY)],
            _ => vec![fam("r")],
        };
        TableSpec {
            namespace: namespace.to_string(),
            name: self.name().to_string(),
            families,
        }
    }
}

/// `inbox`: the family of the feed entries (qualifier: the followee's uid, 8 bytes
/// big-endian; value: the post's `post` rowkey; one version per post, at its time), and the
/// family of the celebrities followed (same qualifier; value: the fan count), read from the
/// author's timeline at read time.
pub const INBOX_FAMILY: &str = "f";
pub const CELEBRITY_FAMILY: &str = "c";

/// The `family:qualifier` column of an inbox cell: `family` and the followee's uid.
pub fn inbox_column(family: &str, followee: i64) -> Vec<u8> {
    let mut column = format!("{family}:").into_bytes();
    column.extend_from_slice(&followee.to_be_bytes());
    column
}

/// Every cell qualifier, `family:column`.
pub mod cell {
    // user: profile (`info`)
    pub const SCREEN_NAME: &str = "info:screen_name";
    pub const GENDER: &str = "info:gender";
    pub const PROVINCE: &str = "info:province";
    pub const CITY: &str = "info:city";
    pub const LOCATION: &str = "info:location";
    pub const DESCRIPTION: &str = "info:description";
    pub const VERIFIED: &str = "info:verified";
    pub const VERIFIED_TYPE: &str = "info:verified_type";
    /// A user's registration, or a post's time.
    pub const CREATED_AT: &str = "info:created_at";

    // user: counters computed over every night so far (`count`)
    pub const FOLLOWERS: &str = "count:followers";
    pub const FOLLOWING: &str = "count:following";
    pub const POSTS: &str = "count:posts";
    pub const REPOSTS_RECEIVED: &str = "count:reposts_received";
    pub const COMMENTS_RECEIVED: &str = "count:comments_received";
    /// Written by `friends --load`; absent means 0.
    pub const FRIENDS: &str = "count:friends";
    // user: counters as the crawler reported them
    pub const REPORTED_FOLLOWERS: &str = "count:reported_followers";
    pub const REPORTED_FOLLOWING: &str = "count:reported_following";
    pub const REPORTED_POSTS: &str = "count:reported_posts";

    // post: content (`info`)
    pub const TEXT: &str = "info:text";
    pub const SOURCE: &str = "info:source";
    pub const TOPICS: &str = "info:topics";
    pub const AT_USERS: &str = "info:at_users";
    pub const PICS: &str = "info:pics";
    pub const RETWEET_MID: &str = "info:retweet_mid";
    pub const DELETED: &str = "info:deleted";
    // post: counters computed, and as reported
    pub const REPOSTS: &str = "count:reposts";
    pub const COMMENTS: &str = "count:comments";
    pub const REPORTED_REPOSTS: &str = "count:reported_reposts";
    pub const REPORTED_COMMENTS: &str = "count:reported_comments";
    pub const REPORTED_ATTITUDES: &str = "count:reported_attitudes";

    // relation and index tables (`r`)
    /// `post_by_mid`, `user_post`: the `post` rowkey.
    pub const POST: &str = "r:post";
    /// `post_by_mid`, `user_by_name`: the uid.
    pub const UID: &str = "r:uid";
    /// `follow`, `fans`: the follow time (empty when unknown).
    pub const FOLLOWED_AT: &str = "r:followed_at";
    /// `follow`, `fans`: `1` on both edges of a friendship (`friends --load`).
    pub const MUTUAL: &str = "r:mutual";
    /// `user_post` reposts: the post reposted.
    pub const REPOST_FROM: &str = "r:repost_from";
    /// `user_post` mentions: who mentioned.
    pub const BY: &str = "r:by";
    /// `user_post` comments: the post commented on, and the comment's text.
    pub const MID: &str = "r:mid";
    pub const COMMENT_TEXT: &str = "r:text";
    /// `friend`: the later of the two follow times (empty when unknown).
    pub const SINCE: &str = "r:since";
    /// `rank`: the user ranked, the metric's value, and the board's length.
    pub const RANK_ID: &str = "r:id";
    pub const RANK_VALUE: &str = "r:value";
    pub const RANK_OF: &str = "r:of";
}

/// How a cell's value is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// 8-byte big-endian signed integer: ids, times, counters.
    Number,
    /// A rowkey of another table (`r:post`).
    Rowkey,
    /// UTF-8 text, flags included.
    Text,
}

/// The encoding of cell `qualifier` (`family:column`).
pub fn kind(qualifier: &str) -> Kind {
    use cell::*;
    match qualifier {
        POST => Kind::Rowkey,
        CREATED_AT | RETWEET_MID | VERIFIED_TYPE | UID | FOLLOWED_AT | REPOST_FROM | MID | BY
        | SINCE | RANK_ID | RANK_VALUE | RANK_OF => Kind::Number,
        q if q.starts_with("count:") => Kind::Number,
        _ => Kind::Text,
    }
}

/// An 8-byte big-endian value.
pub fn be(v: i64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// A time cell: 8 bytes, or empty when the time is unknown.
pub fn time(ms: Option<i64>) -> Vec<u8> {
    ms.map(be).unwrap_or_default()
}

/// The six puts of friendship `(a, b)`: `friend` both ways with `r:since`, and `r:mutual`
/// on both directed edges in `follow` and in `fans`.
pub fn friendship_puts(a: i64, b: i64, since: Option<i64>) -> [(Table, Put); 6] {
    let since = time(since);
    let mutual = |table, key| (table, Put::new(key).cell(cell::MUTUAL, "1"));
    [
        (
            Table::Friend,
            Put::new(keys::friend_key(a, b)).cell(cell::SINCE, since.clone()),
        ),
        (
            Table::Friend,
            Put::new(keys::friend_key(b, a)).cell(cell::SINCE, since),
        ),
        mutual(Table::Follow, keys::follow_key(a, b)),
        mutual(Table::Fans, keys::fans_key(b, a)),
        mutual(Table::Follow, keys::follow_key(b, a)),
        mutual(Table::Fans, keys::fans_key(a, b)),
    ]
}

/// A user's friend count, in `user`.
pub fn friend_count_put(uid: i64, friends: i64) -> (Table, Put) {
    (
        Table::User,
        Put::new(keys::user_key(uid)).cell(cell::FRIENDS, be(friends)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_cell_is_a_number() {
        use cell::*;
        for q in [
            FOLLOWERS,
            FRIENDS,
            REPORTED_ATTITUDES,
            CREATED_AT,
            SINCE,
            FOLLOWED_AT,
            BY,
            RANK_ID,
            RANK_VALUE,
            RANK_OF,
        ] {
            assert_eq!(kind(q), Kind::Number, "{q}");
        }
        for q in [
            SCREEN_NAME,
            TEXT,
            VERIFIED,
            DELETED,
            MUTUAL,
            COMMENT_TEXT,
            PICS,
        ] {
            assert_eq!(kind(q), Kind::Text, "{q}");
        }
        assert_eq!(kind(POST), Kind::Rowkey);
    }

    #[test]
    fn a_friendship_is_written_both_ways() {
        let puts = friendship_puts(1, 2, None);
        let friend: Vec<_> = puts
            .iter()
            .filter(|(t, _)| *t == Table::Friend)
            .map(|(_, p)| p.key.clone())
            .collect();
        assert_eq!(friend, vec![keys::friend_key(1, 2), keys::friend_key(2, 1)]);
        let mut edges: Vec<_> = puts
            .iter()
            .filter(|(t, _)| *t != Table::Friend)
            .map(|(t, p)| (*t, p.key.clone()))
            .collect();
        edges.sort();
        let mut expected = vec![
            (Table::Follow, keys::follow_key(1, 2)),
            (Table::Follow, keys::follow_key(2, 1)),
            (Table::Fans, keys::fans_key(1, 2)),
            (Table::Fans, keys::fans_key(2, 1)),
        ];
        expected.sort();
        assert_eq!(edges, expected);
    }
}

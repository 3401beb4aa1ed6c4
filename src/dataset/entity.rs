//! The cleaned entities and their canonical raw fields (§1 of the raw formats): what every
//! reader maps a record onto, and what names each cleaned table.
//!
//! Invariants: [`Entity::fields`] is the order readers fill a raw record in;
//! an entity's name is its table's folder under the clean root.

use serde::Serialize;

/// The cleaned entities, each a Parquet table of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Entity {
    Users,
    Posts,
    Follows,
    Comments,
    Reposts,
}

impl Entity {
    pub const ALL: [Entity; 5] = [
        Entity::Users,
        Entity::Posts,
        Entity::Follows,
        Entity::Comments,
        Entity::Reposts,
    ];

    /// Position in [`Entity::ALL`], for per-entity arrays.
    pub fn index(self) -> usize {
        match self {
            Entity::Users => 0,
            Entity::Posts => 1,
            Entity::Follows => 2,
            Entity::Comments => 3,
            Entity::Reposts => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Entity::Users => "users",
            Entity::Posts => "posts",
            Entity::Follows => "follows",
            Entity::Comments => "comments",
            Entity::Reposts => "reposts",
        }
    }

    pub fn from_name(name: &str) -> Option<Entity> {
        Entity::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The canonical raw fields (§1), in order. Readers fill a record in this order.
    pub const fn fields(self) -> &'static [&'static str] {
        match self {
            Entity::Users => &[
                "uid",
                "screen_name",
                "gender",
                "province",
                "city",
                "location",
                "description",
                "verified",
                "verified_type",
                "followers_count",
                "follow_count",
                "statuses_count",
                "created_at",
                "crawl_time",
            ],
            Entity::Posts => &[
                "mid",
                "bid",
                "uid",
                "created_at",
                "text",
                "source",
                "reposts_count",
                "comments_count",
                "attitudes_count",
                "topics",
                "at_users",
                "pics",
                "retweet_mid",
                "crawl_time",
            ],
            Entity::Follows => &["follower", "followee", "followed_at", "crawl_time"],
            Entity::Comments => &[
                "cid",
                "mid",
                "uid",
                "created_at",
                "text",
                "like_count",
                "reply_to_cid",
                "crawl_time",
            ],
            Entity::Reposts => &[
                "mid",
                "uid",
                "retweet_mid",
                "created_at",
                "text",
                "crawl_time",
            ],
        }
    }

    /// Position of a canonical field.
    pub const fn field_index(self, name: &str) -> Option<usize> {
        let fields = self.fields();
        let mut i = 0;
        while i < fields.len() {
            if same_bytes(fields[i].as_bytes(), name.as_bytes()) {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// [`Entity::field_index`] of a field the entity has, for the cleaning code to look up at
    /// compile time (`const { Entity::Users.position("uid") }`: no string comparisons per
    /// record, and a misspelt name does not compile).
    pub const fn position(self, name: &str) -> usize {
        match self.field_index(name) {
            Some(i) => i,
            None => panic!("not a canonical field of this entity"),
        }
    }
}

/// `a == b`, usable in a `const fn`.
const fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

//! The Parquet layout of the cleaned tables: one schema per entity, with the column names of
//! §1 of the raw formats, the natural key each table is deduplicated on, and how each table's
//! Parquet is encoded.
//!
//! Invariants: ids and counts are `Int64`, times are `Timestamp(ms, "UTC")`, lists are
//! `List<Utf8>`; every job that reads the cleaned tables (load, friends, verify) reads these
//! names, and a reader finding a column missing or of another type says so (`BadInput`).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use super::Entity;
use crate::dataset::parquet_io;

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

fn list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

/// The output schema of an entity.
pub fn schema(entity: Entity) -> SchemaRef {
    use DataType::{Boolean, Int64, Utf8};
    let f = |name: &str, dt: DataType, nullable: bool| Field::new(name, dt, nullable);
    let fields = match entity {
        Entity::Users => vec![
            f("uid", Int64, false),
            f("screen_name", Utf8, true),
            f("gender", Utf8, true),
            f("province", Utf8, true),
            f("city", Utf8, true),
            f("location", Utf8, true),
            f("description", Utf8, true),
            f("verified", Boolean, true),
            f("verified_type", Int64, true),
            f("followers_count", Int64, true),
            f("follow_count", Int64, true),
            f("statuses_count", Int64, true),
            f("counts_capped", Boolean, false),
            f("created_at", ts(), true),
            f("crawl_time", ts(), false),
        ],
        Entity::Posts => vec![
            f("mid", Int64, false),
            f("bid", Utf8, true),
            f("uid", Int64, true),
            f("created_at", ts(), false),
            f("text", Utf8, false),
            f("source", Utf8, true),
            f("reposts_count", Int64, true),
            f("comments_count", Int64, true),
            f("attitudes_count", Int64, true),
            f("counts_capped", Boolean, false),
            f("topics", list(), false),
            f("at_users", list(), false),
            f("pics", list(), false),
            f("retweet_mid", Int64, true),
            f("is_deleted", Boolean, false),
            f("crawl_time", ts(), false),
        ],
        Entity::Follows => vec![
            f("follower", Int64, false),
            f("followee", Int64, false),
            f("followed_at", ts(), true),
            f("crawl_time", ts(), false),
        ],
        Entity::Comments => vec![
            f("cid", Int64, false),
            // Null when the crawl did not record the post (nghuyong's comment spider).
            f("mid", Int64, true),
            f("uid", Int64, true),
            f("created_at", ts(), false),
            f("text", Utf8, false),
            f("like_count", Int64, true),
            f("reply_to_cid", Int64, true),
            f("is_deleted", Boolean, false),
            f("crawl_time", ts(), false),
        ],
        Entity::Reposts => vec![
            f("mid", Int64, false),
            f("uid", Int64, false),
            f("retweet_mid", Int64, false),
            f("created_at", ts(), false),
            f("text", Utf8, false),
            f("crawl_time", ts(), false),
        ],
    };
    Arc::new(Schema::new(fields))
}

/// How an entity's Parquet files are laid out: by column type ([`parquet_io::typed_properties`]),
/// except that text distinct on nearly every row (names, bids, free text) skips the
/// dictionary, which would only hash it and overflow; free text also has no min/max
/// statistics (no reader prunes on a description, and comparing kilobyte strings slows the
/// write pass); and zstd's fastest level, which on this data gives files of the same size as
/// level 3 in a shorter write pass (docs/design/clean.md). Data pages of
/// `data_page_version` ([`parquet_io::with_data_page_version`]).
pub fn parquet_properties(entity: Entity, data_page_version: u8) -> WriterProperties {
    let (distinct_text, free_text): (&[&str], &[&str]) = match entity {
        Entity::Users => (&["screen_name", "description"], &["description"]),
        Entity::Posts => (&["bid", "text"], &["text"]),
        Entity::Follows => (&[], &[]),
        Entity::Comments | Entity::Reposts => (&["text"], &["text"]),
    };
    let mut props = parquet_io::with_data_page_version(
        parquet_io::typed_properties(&schema(entity)).set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("valid level"),
        )),
        data_page_version,
    );
    if entity == Entity::Follows {
        // Delta-encoded ids and times in canonical pair order: zstd gained little of the
        // files' size, and every reader (friends, load, DuckDB) paid to undo it
        // (docs/design/clean.md).
        for column in ["follower", "followee", "followed_at"] {
            props =
                props.set_column_compression(ColumnPath::from(column), Compression::UNCOMPRESSED);
        }
    }
    for column in distinct_text {
        props = props.set_column_dictionary_enabled(ColumnPath::from(*column), false);
    }
    for column in free_text {
        props =
            props.set_column_statistics_enabled(ColumnPath::from(*column), EnabledStatistics::None);
    }
    props.build()
}

/// Columns that form the natural key used for deduplication.
pub fn key_columns(entity: Entity) -> &'static [&'static str] {
    match entity {
        Entity::Users => &["uid"],
        Entity::Posts => &["mid"],
        Entity::Follows => &["follower", "followee"],
        Entity::Comments => &["cid"],
        Entity::Reposts => &["mid"],
    }
}

//! Arbitrary bytes into every reader, and what they give into the cleaner: no panic, and
//! every record accounted for (the readers' and the cleaner's property tests, together).

use std::io;

use csv::ByteRecord;

use crate::clean::clean_record;
use crate::dataset::Entity;
use crate::raw::canonical::read_csv;
use crate::raw::json::{first_record_spans_lines, read_jsonl};
use crate::raw::{Item, MappingFile};
use proptest::prelude::*;
use serde_json::Value;

/// The sample fork's mapping file: its layouts are tried before the built-in ones on every
/// input here, so they run on rubbish too and must not take what is not theirs.
static FORK: std::sync::LazyLock<MappingFile> = std::sync::LazyLock::new(|| {
    let text = include_str!("../../sample_data/crawlers/fork-mapped/_mapping.toml");
    MappingFile::parse(text, "_mapping.toml").unwrap()
});

fn run_jsonl(bytes: &[u8]) -> Vec<Item> {
    let mut out = Vec::new();
    read_jsonl(Box::new(io::Cursor::new(bytes.to_vec())), &FORK, &mut |i| {
        out.push(i)
    })
    .unwrap();
    out
}

fn run_csv(bytes: &[u8]) -> Vec<Item> {
    run_csv_at(bytes, "/raw/posts.csv")
}

/// Records the csv crate itself sees (minus the header): what `read_csv` must account for.
fn csv_records(bytes: &[u8]) -> usize {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut rec = ByteRecord::new();
    let mut n = 0usize;
    while let Ok(true) = r.read_byte_record(&mut rec) {
        n += 1;
    }
    n.saturating_sub(1)
}

fn clean_all(items: &[Item]) {
    for item in items {
        if let Item::Record { entity, record, .. } = item {
            let _ = clean_record(*entity, record, 1_795_964_400_000);
        }
    }
}

/// The crawler CSV files of `sample_data/`, under paths shaped like the real ones: their
/// dialects are chosen by header and path (the account a weibo-crawler file is of).
const CSV_DIALECTS: &[(&str, &str)] = &[
    (
        "/raw/weibo/何炅/1195230310.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler/weibo/何炅/1195230310.csv"),
    ),
    (
        "/raw/weibo/陈坤/1087770692.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler/weibo/陈坤/1087770692.csv"),
    ),
    (
        "/raw/weibo/何炅/4973000000000091_comments.csv",
        include_str!(
            "../../sample_data/crawlers/weibo-crawler/weibo/何炅/4973000000000091_comments.csv"
        ),
    ),
    (
        "/raw/weibo/users.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler/weibo/users.csv"),
    ),
    (
        "/raw/weiboSpider/weibo/人民日报/2803301701.csv",
        include_str!("../../sample_data/crawlers/weiboSpider/weibo/人民日报/2803301701.csv"),
    ),
    (
        "/raw/mediacrawler/detail_comments_2026-11-29.csv",
        include_str!("../../sample_data/crawlers/mediacrawler/csv/detail_comments_2026-11-29.csv"),
    ),
    (
        "/raw/weibo/王一博/1500000023.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler/weibo/王一博/1500000023.csv"),
    ),
    (
        "/raw/weibo/宋茜/1500000071.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler/weibo/宋茜/1500000071.csv"),
    ),
    (
        "/raw/weibo/何炅/何炅_comments.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler/weibo/何炅/何炅_comments.csv"),
    ),
    (
        "/raw/data/weibo/search_notes_2023-12-01.csv",
        include_str!(
            "../../sample_data/crawlers/mediacrawler/data/weibo/search_notes_2023-12-01.csv"
        ),
    ),
    (
        "/raw/mediacrawler/search_contents_2026-11-30.csv",
        include_str!("../../sample_data/crawlers/mediacrawler/csv/search_contents_2026-11-30.csv"),
    ),
    (
        "/raw/结果文件/迪丽热巴/迪丽热巴.csv",
        include_str!("../../sample_data/crawlers/weibo-search/结果文件/迪丽热巴/迪丽热巴.csv"),
    ),
    (
        "/raw/weibo/蔡徐坤/1776448504.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler-2019/weibo/蔡徐坤/1776448504.csv"),
    ),
    (
        "/raw/fork/weibo.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler-2019/fork/weibo.csv"),
    ),
    (
        "/raw/weibo/追加/1259110474.csv",
        include_str!("../../sample_data/crawlers/weibo-crawler/weibo/追加/1259110474.csv"),
    ),
    (
        "/raw/fork/weibo/1669879400.csv",
        include_str!("../../sample_data/crawlers/fork-mapped/weibo/1669879400.csv"),
    ),
];

/// The crawler JSON lines files of `sample_data/` (each record is mapped by its keys).
const JSONL_DIALECTS: &[&str] = &[
    include_str!("../../sample_data/crawlers/nghuyong/user_20261129230000.jsonl"),
    include_str!("../../sample_data/crawlers/nghuyong/comment_20261129230000.jsonl"),
    include_str!("../../sample_data/crawlers/nghuyong/follow_20261129230000.jsonl"),
    include_str!("../../sample_data/crawlers/nghuyong/repost_20261129230000.jsonl"),
    include_str!("../../sample_data/crawlers/nghuyong/tweet_20261129230000.jsonl"),
    include_str!("../../sample_data/crawlers/mediacrawler/jsonl/creator_creators_2026-11-29.jsonl"),
    include_str!("../../sample_data/crawlers/mediacrawler/jsonl/search_comments_2026-11-29.jsonl"),
    include_str!("../../sample_data/crawlers/mediacrawler/jsonl/search_contents_2026-11-29.jsonl"),
    include_str!("../../sample_data/crawlers/mediacrawler/jsonl/search_contents_2026-11-30.jsonl"),
    include_str!("../../sample_data/crawlers/mediacrawler/jsonl/search_comments_2026-11-30.jsonl"),
    include_str!("../../sample_data/crawlers/nghuyong/tweet_spider_by_user_id_20261129230000.jsonl"),
    include_str!(
        "../../sample_data/crawlers/nghuyong/search_样例_61_1_2026-11-28-0_2026-11-29-0_20261129230000.jsonl"
    ),
    include_str!("../../sample_data/crawlers/nghuyong-2020/Tweets.json"),
    include_str!("../../sample_data/crawlers/nghuyong-2020/Relationships.json"),
    include_str!("../../sample_data/crawlers/nghuyong-2020/Comments.json"),
    include_str!("../../sample_data/crawlers/nghuyong-2020/Reposts.json"),
    include_str!("../../sample_data/crawlers/nghuyong-2020/Users.json"),
    include_str!("../../sample_data/crawlers/weibo-crawler/weibo_data/王一博/1500000023.json"),
    include_str!("../../sample_data/crawlers/fork-mapped/comments.jsonl"),
];

/// A crawler's records pretty-printed one after another (a stream, not lines).
const JSON_STREAM: &str =
    include_str!("../../sample_data/crawlers/nghuyong/user_20261129230000.pretty.json");

fn run_csv_at(bytes: &[u8], path: &str) -> Vec<Item> {
    let mut out = Vec::new();
    read_csv(
        Box::new(io::Cursor::new(bytes.to_vec())),
        path,
        &FORK,
        &mut |i| out.push(i),
    )
    .unwrap();
    out
}

/// A JSON value of any kind but objects (nested objects come from the samples).
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "[ -~\u{4e00}-\u{4e20}\u{200b}\n]{0,16}".prop_map(Value::String),
        proptest::collection::vec("[0-9a-z,#@]{0,6}", 0..3)
            .prop_map(|v| Value::Array(v.into_iter().map(Value::String).collect())),
    ]
}

/// An array element: a leaf, or an object whose keys are canonical fields or not.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("uid".to_string()),
        Just("mid".to_string()),
        Just("note_id".to_string()),
        Just("follower".to_string()),
        "[a-z_]{1,8}",
    ];
    prop_oneof![
        leaf(),
        proptest::collection::btree_map(key, leaf(), 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every crawler CSV dialect: its header (as the reader sees it, past the BOM), then
    /// rows of about the header's width with arbitrary text, quotes, commas and line
    /// breaks in the fields, so the dialects' own mappings run on rubbish, not only the
    /// field-count check.
    #[test]
    fn csv_dialects_account_for_every_record(
        file in 0..CSV_DIALECTS.len(),
        rows in proptest::collection::vec(
            (0usize..3, proptest::collection::vec("[ -~\u{4e00}-\u{4e20}\t\n\"]{0,10}", 40)),
            0..6,
        ),
    ) {
        let (path, text) = CSV_DIALECTS[file];
        let header = text.trim_start_matches('\u{feff}').lines().next().unwrap();
        let width = header.split(',').count();
        let mut input = format!("{header}\n");
        for (shift, fields) in &rows {
            // One field fewer, as many, or one more than the header.
            let n = (width + shift).saturating_sub(1).min(fields.len());
            input.push_str(&fields[..n].join(","));
            input.push('\n');
        }
        let items = run_csv_at(input.as_bytes(), path);
        prop_assert_eq!(items.len(), csv_records(input.as_bytes()));
        clean_all(&items);
    }

    /// Every crawler JSON lines shape: a sample record's keys, each with a value from any
    /// sample record of that file (nested objects included), an arbitrary value, or left
    /// out. Every record is accounted for, and cleaning it does not panic.
    #[test]
    fn jsonl_dialects_map_any_values_without_panic(
        file in 0..JSONL_DIALECTS.len(),
        picks in proptest::collection::vec((0u8..4, 0usize..8, leaf()), 40),
    ) {
        let samples: Vec<serde_json::Map<String, Value>> = JSONL_DIALECTS[file]
            .lines()
            .filter_map(|l| match serde_json::from_str(l) {
                Ok(Value::Object(m)) => Some(m),
                _ => None,
            })
            .collect();
        let mut object = serde_json::Map::new();
        for ((key, _), (how, which, value)) in samples[0].iter().zip(picks) {
            match how {
                0 => {}
                1 => {
                    object.insert(key.clone(), value);
                }
                _ => {
                    let sample = &samples[which % samples.len()];
                    let v = sample.get(key).cloned().unwrap_or(value);
                    object.insert(key.clone(), v);
                }
            }
        }
        // One item per line; a weibo-crawler user object holds one record per thing in it:
        // the user, each post, and each post's reposted original.
        let expected = match (object.get("user"), object.get("weibo")) {
            (Some(Value::Object(_)), Some(Value::Array(posts))) => {
                1 + posts
                    .iter()
                    .map(|p| 1 + usize::from(matches!(p.get("retweet"), Some(Value::Object(_)))))
                    .sum::<usize>()
            }
            _ => 1,
        };
        let line = format!("{}\n", Value::Object(object));
        let items = run_jsonl(line.as_bytes());
        prop_assert_eq!(items.len(), expected);
        clean_all(&items);
    }

    #[test]
    fn jsonl_accounts_for_every_nonblank_line(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        // A file opening with `[` is one JSON array, one whose first record spans lines a
        // stream of records (below).
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace() && !b"\xef\xbb\xbf".contains(b));
        prop_assume!(first != Some(&b'['));
        prop_assume!(!(first == Some(&b'{') && first_record_spans_lines(&bytes)));
        let items = run_jsonl(&bytes);
        let lines = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !String::from_utf8_lossy(l).trim().is_empty())
            .count();
        prop_assert_eq!(items.len(), lines);
        clean_all(&items);
    }

    #[test]
    fn a_json_array_gives_one_item_per_element(
        values in proptest::collection::vec(json_value(), 0..12),
        pretty in any::<bool>(),
    ) {
        let array = Value::Array(values.clone());
        let text = if pretty {
            serde_json::to_string_pretty(&array).unwrap()
        } else {
            array.to_string()
        };
        let items = run_jsonl(text.as_bytes());
        prop_assert_eq!(items.len(), values.len());
        let lines = text.lines().count() as u64;
        for item in &items {
            let line = match item {
                Item::Record { line, .. } | Item::Rejected { line, .. } => *line,
                Item::RepeatedHeader { line, .. } => *line,
            };
            prop_assert!(line >= 1 && line <= lines, "line {} of {}", line, lines);
        }
        clean_all(&items);
    }

    #[test]
    fn a_stream_of_pretty_values_gives_one_item_per_value(
        first in proptest::collection::btree_map("[a-z_]{1,8}", leaf(), 1..5),
        values in proptest::collection::vec(json_value(), 0..12),
    ) {
        let mut all = vec![Value::Object(first.into_iter().collect())];
        all.extend(values);
        let text: Vec<String> =
            all.iter().map(|v| serde_json::to_string_pretty(v).unwrap()).collect();
        let text = text.join("\n");
        let items = run_jsonl(text.as_bytes());
        prop_assert_eq!(items.len(), all.len());
        let lines = text.lines().count() as u64;
        for item in &items {
            prop_assert!(item.line() >= 1 && item.line() <= lines, "line {} of {}", item.line(), lines);
        }
        clean_all(&items);
    }

    #[test]
    fn arbitrary_bytes_after_an_opening_brace_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut input = b"{\n".to_vec();
        input.extend(bytes);
        for item in &run_jsonl(&input) {
            prop_assert!(item.line() >= 1);
        }
    }

    #[test]
    fn arbitrary_bytes_after_an_opening_bracket_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut input = b"[".to_vec();
        input.extend(bytes);
        let items = run_jsonl(&input);
        // Whatever is not an element is one reject, naming its line.
        for item in &items {
            if let Item::Rejected { line, .. } = item {
                prop_assert!(*line >= 1);
            }
        }
        clean_all(&items);
    }

    #[test]
    fn jsonl_objects_with_arbitrary_values_clean_without_panic(
        values in proptest::collection::vec("[ -~\\u{4e00}-\\u{4e20}\\t]{0,24}", 14)
    ) {
        let fields = Entity::Posts.fields();
        let object: serde_json::Map<String, Value> = fields
            .iter()
            .zip(&values)
            .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
            .collect();
        let line = format!("{}\n", Value::Object(object));
        let items = run_jsonl(line.as_bytes());
        prop_assert_eq!(items.len(), 1);
        clean_all(&items);
    }

    #[test]
    fn csv_accounts_for_every_record(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut input = b"mid,uid,created_at,text,crawl_time\n".to_vec();
        input.extend_from_slice(&bytes);
        let items = run_csv(&input);
        prop_assert_eq!(items.len(), csv_records(&input));
        clean_all(&items);
    }

    #[test]
    fn csv_of_printable_noise_accounts_for_every_record(
        text in "[0-9a-z,\"\\n\\t 万+.:-]{0,512}"
    ) {
        let input = format!("follower,followee,followed_at,crawl_time\n{text}");
        let items = run_csv(input.as_bytes());
        prop_assert_eq!(items.len(), csv_records(input.as_bytes()));
        clean_all(&items);
    }

    /// The pretty-printed stream cut at any byte: the records before the cut, then at most
    /// one reject for the rest, each at a line of the file.
    #[test]
    fn a_json_stream_cut_anywhere_reads_without_panic(cut in 0.0f64..1.0) {
        let bytes = &JSON_STREAM.as_bytes()[..(JSON_STREAM.len() as f64 * cut) as usize];
        let items = run_jsonl(bytes);
        let lines = bytes.split(|b| *b == b'\n').count() as u64;
        let rejects = items.iter().filter(|i| matches!(i, Item::Rejected { .. })).count();
        prop_assert!(rejects <= 1, "{:?}", items);
        for item in &items {
            prop_assert!(item.line() >= 1 && item.line() <= lines);
        }
        clean_all(&items);
    }

    /// Every crawler sample, cut at any byte: the readers never panic, every record the cut
    /// file still holds is accounted for as a record or a reject, and every reject carries
    /// a line and a reason.
    #[test]
    fn every_sample_cut_anywhere_reads_without_panic(file in 0..CSV_DIALECTS.len() + JSONL_DIALECTS.len(), cut in 0.0f64..1.0) {
        let (path, text, csv) = match CSV_DIALECTS.get(file) {
            Some((path, text)) => (*path, *text, true),
            None => ("/raw/x.jsonl", JSONL_DIALECTS[file - CSV_DIALECTS.len()], false),
        };
        let bytes = &text.as_bytes()[..(text.len() as f64 * cut) as usize];
        let items = if csv { run_csv_at(bytes, path) } else { run_jsonl(bytes) };
        if csv {
            prop_assert_eq!(items.len(), csv_records(bytes));
        }
        for item in &items {
            prop_assert!(item.line() > 0);
        }
        clean_all(&items);
    }
}

//! Field-level cleaning: ids, counts, times and text, exactly as §4 of the raw-format spec
//! states them. Every function here is pure, so each rule is unit-tested in isolation and
//! applied the same way whichever reader a value came from. The readers use them too (a
//! crawl time in a file name, a bid), which is why they sit below both `raw` and `clean`.
//!
//! Invariants:
//! - A value is either turned into its typed form or refused with a [`Reject`] reason code;
//!   nothing is silently coerced (an id that lost digits to scientific notation is refused, a
//!   capped count keeps its cap flag).
//! - All Weibo wall-clock times are Asia/Shanghai (UTC+8); results are UTC milliseconds.

use std::borrow::Cow;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use unicode_normalization::UnicodeNormalization;

use crate::dataset::Reject;

/// Weibo went public on 2009-08-14 (Asia/Shanghai): earlier times are impossible.
pub fn weibo_launch_ms() -> i64 {
    // Asked for on every time cleaned: worked out once.
    static LAUNCH: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *LAUNCH.get_or_init(|| {
        shanghai(
            NaiveDate::from_ymd_opt(2009, 8, 14)
                .expect("valid date")
                .and_hms_opt(0, 0, 0)
                .expect("valid time"),
        )
    })
}

/// How far past the crawl time a timestamp may be before it is called impossible: crawler
/// and server clocks drift, and a post's minute-precision time may round up.
pub const FUTURE_SLACK_MS: i64 = 10 * 60 * 1000;

const SHANGHAI_OFFSET_SECS: i32 = 8 * 3600;

fn shanghai(naive: NaiveDateTime) -> i64 {
    // China has had no daylight saving time since 1991: a fixed +08:00 offset is exact, and
    // subtracting it from the wall clock read as UTC skips chrono's offset machinery, which
    // cost more than the parsing on every timestamp of a run.
    naive.and_utc().timestamp_millis() - i64::from(SHANGHAI_OFFSET_SECS) * 1000
}

fn to_shanghai(ms: i64) -> NaiveDateTime {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .naive_utc()
        + Duration::seconds(SHANGHAI_OFFSET_SECS as i64)
}

/// Trims what crawlers wrap ids and values in: whitespace (including the trailing TAB
/// weibo-crawler writes), quotes, and a BOM.
pub fn trim_value(s: &str) -> &str {
    let trimmed = |c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '\u{feff}';
    // Nearly every value needs no trimming: two character checks settle it, where the
    // pattern search alone was ~2 % of clean (it runs several times on every field).
    match (s.chars().next(), s.chars().next_back()) {
        (Some(first), Some(last)) if !trimmed(first) && !trimmed(last) => s,
        _ => s.trim_matches(trimmed),
    }
}

/// True for the placeholders crawlers write for "no value".
pub fn is_missing(s: &str) -> bool {
    let t = trim_value(s);
    t.is_empty() || t == "无" || t == "null" || t == "None" || t == "NULL" || t == "nan"
}

/// A numeric id. Scientific notation (Excel's `4.38E+15`) has lost digits: refused as lossy.
pub fn parse_id(s: &str) -> Result<i64, Reject> {
    let t = trim_value(s);
    if t.is_empty() {
        return Err(Reject::MissingField);
    }
    // Up to 18 digits cannot overflow an i64: read them in the one pass that checks them.
    if t.len() <= 18 {
        let digits = t.bytes().try_fold(0i64, |v, b| {
            let d = b.wrapping_sub(b'0');
            (d <= 9).then(|| v * 10 + i64::from(d))
        });
        match digits {
            Some(v) if v > 0 => return Ok(v),
            Some(_) => return Err(Reject::BadId),
            None => {}
        }
    } else if t.bytes().all(|b| b.is_ascii_digit()) {
        return match t.parse::<i64>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(Reject::BadId),
        };
    }
    if t.contains(['e', 'E']) && t.parse::<f64>().is_ok() {
        return Err(Reject::LossyId);
    }
    // "123.0" from a spreadsheet round trip is exact; anything else is not an id.
    if let Some(int) = t.strip_suffix(".0") {
        if !int.is_empty() && int.bytes().all(|b| b.is_ascii_digit()) {
            return parse_id(int);
        }
    }
    Err(Reject::BadId)
}

/// An optional numeric id: missing placeholders and `0`/`-1` mean "none".
pub fn parse_optional_id(s: &str) -> Result<Option<i64>, Reject> {
    let t = trim_value(s);
    if is_missing(t) || t == "0" || t == "-1" {
        return Ok(None);
    }
    parse_id(t).map(Some)
}

const BASE62: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

fn base62_digit(c: u8) -> Option<u64> {
    BASE62.iter().position(|&d| d == c).map(|p| p as u64)
}

/// Weibo's bid → mid: the bid is read in groups of 4 base62 characters from the right, each
/// group giving 7 decimal digits of the mid (zero-padded, except the leftmost group).
pub fn bid_to_mid(bid: &str) -> Result<i64, Reject> {
    let bid = trim_value(bid).as_bytes();
    if bid.is_empty() || bid.len() > 12 {
        return Err(Reject::BadId);
    }
    let mut digits = String::new();
    let mut end = bid.len();
    let mut groups = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(4);
        let mut value = 0u64;
        for &c in &bid[start..end] {
            value = value * 62 + base62_digit(c).ok_or(Reject::BadId)?;
        }
        groups.push((value, start > 0));
        end = start;
    }
    for (value, padded) in groups.into_iter().rev() {
        if padded || !digits.is_empty() {
            digits.push_str(&format!("{value:07}"));
        } else {
            digits.push_str(&value.to_string());
        }
    }
    parse_id(&digits)
}

/// mid → bid, the inverse of [`bid_to_mid`].
pub fn mid_to_bid(mid: i64) -> String {
    let digits = mid.to_string();
    let mut groups = Vec::new();
    let mut end = digits.len();
    while end > 0 {
        let start = end.saturating_sub(7);
        let mut value: u64 = digits[start..end].parse().unwrap_or(0);
        let mut chunk = Vec::new();
        while value > 0 {
            chunk.push(BASE62[(value % 62) as usize]);
            value /= 62;
        }
        if start > 0 {
            while chunk.len() < 4 {
                chunk.push(b'0');
            }
        }
        chunk.reverse();
        groups.push(chunk);
        end = start;
    }
    groups.reverse();
    String::from_utf8(groups.concat()).unwrap_or_default()
}

/// A post id given either as a numeric mid or as a base62 bid.
pub fn parse_mid_or_bid(s: &str) -> Result<i64, Reject> {
    let t = trim_value(s);
    match parse_id(t) {
        Ok(v) => Ok(v),
        Err(Reject::BadId) if t.bytes().all(|b| b.is_ascii_alphanumeric()) && t.len() >= 8 => {
            bid_to_mid(t)
        }
        Err(e) => Err(e),
    }
}

/// A count as crawlers print it: `1234`, `1,234`, `1.2万`, `3亿`, `100万+` (capped).
/// Returns the value and whether it was capped; `None` for a missing value.
pub fn parse_count(s: &str) -> Result<Option<(i64, bool)>, Reject> {
    let t = trim_value(s);
    if is_missing(t) {
        return Ok(None);
    }
    let (t, capped) = match t.strip_suffix('+') {
        Some(rest) => (rest.trim_end(), true),
        None => (t, false),
    };
    let (number, scale) = if let Some(n) = t.strip_suffix('万') {
        (n, 10_000f64)
    } else if let Some(n) = t.strip_suffix('亿') {
        (n, 100_000_000f64)
    } else {
        (t, 1f64)
    };
    let number = number.trim().replace(',', "");
    if number.is_empty() {
        return Err(Reject::BadCount);
    }
    if scale == 1.0 {
        return match number.parse::<i64>() {
            Ok(v) if v >= 0 => Ok(Some((v, capped))),
            _ => Err(Reject::BadCount),
        };
    }
    match number.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() && v * scale < 9.0e18 => {
            Ok(Some(((v * scale).round() as i64, capped)))
        }
        _ => Err(Reject::BadCount),
    }
}

/// Parses a time in any of the shapes crawlers write, relative forms resolved against
/// `crawl_ms`; checks it is after Weibo's launch and not beyond the crawl time.
pub fn parse_time(s: &str, crawl_ms: i64) -> Result<i64, Reject> {
    let t = trim_value(s);
    if t.is_empty() {
        return Err(Reject::MissingField);
    }
    let ms = parse_time_unchecked(t, crawl_ms).ok_or(Reject::BadTime)?;
    if ms < weibo_launch_ms() {
        return Err(Reject::TimeBeforeLaunch);
    }
    if ms > crawl_ms + FUTURE_SLACK_MS {
        return Err(Reject::TimeInFuture);
    }
    Ok(ms)
}

/// Parses a crawl time (no crawl-relative forms, no plausibility window but launch).
pub fn parse_crawl_time(s: &str) -> Result<i64, Reject> {
    let t = trim_value(s);
    let ms = parse_absolute(t).ok_or(Reject::BadTime)?;
    if ms < weibo_launch_ms() {
        return Err(Reject::TimeBeforeLaunch);
    }
    Ok(ms)
}

fn parse_time_unchecked(t: &str, crawl_ms: i64) -> Option<i64> {
    parse_absolute(t).or_else(|| parse_relative(t, crawl_ms))
}

/// `YYYY-MM-DD HH:MM:SS` (or with `T`), the shape nearly every crawler writes, without
/// going through a format-string parser.
fn parse_common_layout(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    if b.len() != 19 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if b[10] != b' ' && b[10] != b'T' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r].iter().try_fold(0u32, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
        })
    };
    let date = NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
    let time = NaiveTime::from_hms_opt(num(11..13)?, num(14..16)?, num(17..19)?)?;
    Some(shanghai(date.and_time(time)))
}

fn parse_absolute(t: &str) -> Option<i64> {
    if let Some(ms) = parse_common_layout(t) {
        return Some(ms);
    }
    // Epoch seconds or milliseconds.
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let v: i64 = t.parse().ok()?;
        return match t.len() {
            9 | 10 => Some(v * 1000),
            12 | 13 => Some(v),
            _ => None,
        };
    }
    // RFC 3339 / ISO with an explicit offset.
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Some(dt.timestamp_millis());
    }
    // Weibo API: `Tue Nov 29 21:00:00 +0800 2026`.
    if let Ok(dt) = DateTime::parse_from_str(t, "%a %b %d %H:%M:%S %z %Y") {
        return Some(dt.timestamp_millis());
    }
    for fmt in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y/%m/%d %H:%M:%S",
        "%Y/%m/%d %H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(t, fmt) {
            return Some(shanghai(naive));
        }
    }
    for fmt in ["%Y-%m-%d", "%Y/%m/%d", "%Y年%m月%d日"] {
        if let Ok(date) = NaiveDate::parse_from_str(t, fmt) {
            return Some(shanghai(date.and_time(NaiveTime::MIN)));
        }
    }
    None
}

fn parse_relative(t: &str, crawl_ms: i64) -> Option<i64> {
    let crawl = to_shanghai(crawl_ms);
    if t == "刚刚" {
        return Some(crawl_ms);
    }
    for (suffix, unit_ms) in [
        ("秒前", 1_000i64),
        ("分钟前", 60_000),
        ("小时前", 3_600_000),
        ("天前", 86_400_000),
    ] {
        if let Some(n) = t.strip_suffix(suffix) {
            let n: i64 = n.trim().parse().ok()?;
            return Some(crawl_ms - n * unit_ms);
        }
    }
    let hm = |s: &str| NaiveTime::parse_from_str(s.trim(), "%H:%M").ok();
    if let Some(rest) = t.strip_prefix("今天") {
        return Some(shanghai(crawl.date().and_time(hm(rest)?)));
    }
    if let Some(rest) = t.strip_prefix("昨天") {
        let day = crawl.date().pred_opt()?;
        return Some(shanghai(day.and_time(hm(rest)?)));
    }
    // Year missing: the crawl year, or the year before if that would be in the future.
    let year = crawl.year();
    let with_year = |month: u32, day: u32, time: NaiveTime| -> Option<i64> {
        let this_year = NaiveDate::from_ymd_opt(year, month, day)?.and_time(time);
        if this_year > crawl + Duration::days(1) {
            Some(shanghai(
                NaiveDate::from_ymd_opt(year - 1, month, day)?.and_time(time),
            ))
        } else {
            Some(shanghai(this_year))
        }
    };
    // `11月29日 21:00` or `11月29日`
    if let Some((md, rest)) = t.split_once('日') {
        let (m, d) = md.split_once('月')?;
        let time = if rest.trim().is_empty() {
            NaiveTime::MIN
        } else {
            hm(rest)?
        };
        return with_year(m.trim().parse().ok()?, d.trim().parse().ok()?, time);
    }
    // `11-29` or `11-29 21:00`
    let (date_part, time_part) = match t.split_once(' ') {
        Some((d, tm)) => (d, Some(tm)),
        None => (t, None),
    };
    let (m, d) = date_part.split_once('-')?;
    if m.len() > 2 || d.len() > 2 {
        return None;
    }
    let time = match time_part {
        Some(tm) => hm(tm)?,
        None => NaiveTime::MIN,
    };
    with_year(m.parse().ok()?, d.parse().ok()?, time)
}

/// Whether byte `b`, followed by `next` and `after` (0 past the end), can be in text needing
/// neither normalization nor removal. Admitted: printable ASCII, newline, UTF-8 continuation
/// bytes, and the lead bytes of U+00C0..U+02FF (U+0080..U+00BF holds C1 controls and the soft
/// hyphen) and of U+3000..U+9FFF (CJK), except that block's combining marks (U+302A..U+302F,
/// U+3099..U+309A: `か` + U+3099 composes to `が`); and 0xEF when it leads a full-width form
/// (U+FF00..U+FFFF: `，` `！` `？` are everywhere in Chinese text) rather than U+FEFF.
///
/// Compares only, no branches, so that [`is_plain`]'s block loop becomes vector code.
#[inline(always)]
fn plain_at(b: u8, next: u8, after: u8) -> bool {
    let admitted = (b.wrapping_sub(0x20) < 0x5f)
        | (b == 0x0a)
        | (b.wrapping_sub(0x80) < 0x40)
        | (b.wrapping_sub(0xc3) < 9)
        | (b.wrapping_sub(0xe3) < 7);
    let fullwidth = (b == 0xef) & (next.wrapping_sub(0xbc) < 4);
    let combining = (b == 0xe3)
        & (((next == 0x80) & (after.wrapping_sub(0xaa) < 6))
            | ((next == 0x82) & (after.wrapping_sub(0x99) < 2)));
    (admitted | fullwidth) & !combining
}

/// True when every byte is [`plain_at`]: [`is_plain_blocks`], in its AVX2 build when the CPU
/// has AVX2.
fn is_plain(bytes: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { is_plain_avx2(bytes) };
    }
    is_plain_blocks(bytes)
}

/// [`is_plain_blocks`] compiled for AVX2: the same compares, 32 bytes per instruction instead
/// of SSE2's 16 (the release build targets baseline x86-64, so this is chosen at run time).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn is_plain_avx2(bytes: &[u8]) -> bool {
    is_plain_blocks(bytes)
}

/// Every text field of every record passes here, so whole blocks are checked at once with no
/// early exit, the tail too: it is copied into a block padded with spaces (admitted, and as a
/// look-ahead byte no different from the end of the text), since most fields (names, places)
/// are shorter than a block and a byte-at-a-time loop over them was half of this function's
/// time.
#[inline(always)]
fn is_plain_blocks(bytes: &[u8]) -> bool {
    let mut start = 0;
    while start + BLOCK + 1 < bytes.len() {
        let window = bytes[start..start + BLOCK + 2]
            .try_into()
            .expect("BLOCK + 2 bytes");
        if !block_is_plain(window) {
            return false;
        }
        start += BLOCK;
    }
    // At most BLOCK + 1 bytes are left: two blocks of padding hold them and their look-ahead.
    // Up to BLOCK bytes (most fields: names, places) the second block is padding alone.
    let rest = &bytes[start..];
    let mut padded = [b' '; 2 * BLOCK + 2];
    padded[..rest.len()].copy_from_slice(rest);
    let (first, second) = (&padded[..BLOCK + 2], &padded[BLOCK..]);
    let first = block_is_plain(first.try_into().expect("BLOCK + 2 bytes"));
    if rest.len() <= BLOCK {
        return first;
    }
    first & block_is_plain(second.try_into().expect("BLOCK + 2 bytes"))
}

/// Bytes [`is_plain_blocks`] checks at once.
const BLOCK: usize = 32;

/// Whether the block's `BLOCK` bytes are plain; a block needs the two bytes after it, since a
/// lead byte's continuation decides. Compares only, no early exit: vector code.
#[inline(always)]
fn block_is_plain(window: &[u8; BLOCK + 2]) -> bool {
    let mut plain = true;
    for i in 0..BLOCK {
        plain &= plain_at(window[i], window[i + 1], window[i + 2]);
    }
    plain
}

/// Longest text (bytes) checked for a deleted/hidden notice.
pub const MARKER_TEXT_MAX_BYTES: usize = 512;

/// Markers crawlers store in place of deleted or hidden content.
const DELETED_MARKERS: &[&str] = &[
    "此微博已被作者删除",
    "此微博已不可见",
    "该账号因被投诉违反",
    "此微博已被删除",
    "该微博因被多人投诉",
    "根据博主设置，此内容无法访问",
];

/// Cleans the text of a post, comment or repost: [`clean_text`], and whether it is a
/// deleted/hidden notice (then the text is emptied, so the notice does not pollute the text
/// column).
pub fn clean_content(s: &str) -> (Cow<'_, str>, bool) {
    static MARKERS: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
    // A deleted or hidden post's text *is* the notice (plus a help link); a long text that
    // quotes a notice is still a post. Checking short texts only also keeps this off the hot
    // path of long ones.
    if s.len() <= MARKER_TEXT_MAX_BYTES {
        let markers = MARKERS.get_or_init(|| {
            aho_corasick::AhoCorasick::new(DELETED_MARKERS).expect("valid marker patterns")
        });
        // A repost's own words come before the chain it quotes (`//@name: ...`), or before
        // weiboSpider's `转发内容:` line (`转发理由:<own words>` first): a notice quoted from
        // the original is not this text's, and its words stay.
        let quoted = ["//@", "转发内容"].iter().filter_map(|m| s.find(m)).min();
        let own = quoted.map_or(s, |i| &s[..i]);
        if markers.is_match(own) {
            return (Cow::Borrowed(""), true);
        }
    }
    (clean_text(s), false)
}

/// Cleans text: NFC, no zero-width characters, no control characters but newline, trimmed.
/// Names, places and descriptions get this alone: a notice is only ever a post's text, and
/// looking for one in every short field was a third of the time spent on them. Text that
/// needs no change is borrowed from the input: nearly all of it, and copying every field
/// into a row of its own was a tenth of the read pass.
pub fn clean_text(s: &str) -> Cow<'_, str> {
    let removable = |c: char| {
        matches!(
            c,
            '\u{200b}'..='\u{200f}' | '\u{2060}' | '\u{feff}' | '\u{00ad}'
        ) || (c != '\n' && c.is_control())
    };
    // Fast path, taken by nearly all text: a byte scan proves there is no control character
    // and no character from a block where normalization or removal could apply (combining
    // marks, the U+2000 block's zero-width characters, Hangul, U+FExx/U+FFxx, astral).
    if is_plain(s.as_bytes()) {
        return Cow::Borrowed(s.trim());
    }
    let cleaned: String = s.nfc().filter(|&c| !removable(c)).collect();
    Cow::Owned(cleaned.trim().to_string())
}

/// Splits a joined list (`a,b`, `a，b`, `a;b`, or a JSON-ish `['a', 'b']`) into clean items.
pub fn split_list(s: &str) -> Vec<Cow<'_, str>> {
    let t = trim_value(s);
    if is_missing(t) {
        return Vec::new();
    }
    let t = t.trim_start_matches('[').trim_end_matches(']');
    t.split([',', '，', ';', '；'])
        .map(|item| match clean_text(trim_value(item)) {
            Cow::Borrowed(b) => Cow::Borrowed(list_item(b)),
            Cow::Owned(o) => Cow::Owned(list_item(&o).to_string()),
        })
        .filter(|item| !item.is_empty() && item != "无")
        .collect()
}

/// A list item without its topic `#...#` or mention `@` decoration.
fn list_item(item: &str) -> &str {
    item.trim_start_matches('#')
        .trim_end_matches('#')
        .trim_start_matches('@')
}

/// A boolean as crawlers write it.
pub fn parse_bool(s: &str) -> Option<bool> {
    match trim_value(s) {
        "true" | "True" | "TRUE" | "1" | "是" | "yes" | "y" => Some(true),
        "false" | "False" | "FALSE" | "0" | "否" | "no" | "n" => Some(false),
        _ => None,
    }
}

/// Gender as `m` / `f`, or `None`.
pub fn parse_gender(s: &str) -> Option<&'static str> {
    match trim_value(s) {
        "m" | "M" | "男" | "male" => Some("m"),
        "f" | "F" | "女" | "female" => Some("f"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    /// The plain-text rule written out independently of [`plain_at`]: a table of admitted
    /// bytes, matched one at a time, with the two look-ahead cases.
    fn is_plain_bytewise(bytes: &[u8]) -> bool {
        let admitted =
            |b: u8| matches!(b, 0x20..=0x7e | 0x0a | 0x80..=0xbf | 0xc3..=0xcb | 0xe3..=0xe9);
        (0..bytes.len()).all(|i| {
            let (b, next, after) = (bytes[i], bytes.get(i + 1), bytes.get(i + 2));
            let fullwidth = b == 0xef && matches!(next, Some(0xbc..=0xbf));
            let combining = b == 0xe3
                && matches!(
                    (next, after),
                    (Some(0x80), Some(0xaa..=0xaf)) | (Some(0x82), Some(0x99..=0x9a))
                );
            (admitted(b) || fullwidth) && !combining
        })
    }

    proptest! {
        // Mostly admitted bytes, so that a rejected one can sit anywhere in a long text:
        // inside a block, at its last byte (look-ahead into the next), or in the tail.
        #[test]
        fn block_check_agrees_with_the_table(
            bytes in prop::collection::vec(
                prop_oneof![
                    8 => prop::sample::select(vec![b'a', b' ', b'\n', 0x80, 0xbf, 0xc3, 0xe4, 0xe9, 0xbc]),
                    2 => prop::sample::select(vec![0xef, 0xbb, 0xbd, 0xff]),
                    2 => prop::sample::select(vec![0xe3, 0x82, 0x99, 0x9a, 0x80, 0xaa, 0xaf]),
                    1 => any::<u8>(),
                ],
                0..200,
            )
        ) {
            // Both builds of the block check: the one this CPU runs and the baseline one.
            prop_assert_eq!(is_plain(&bytes), is_plain_bytewise(&bytes));
            prop_assert_eq!(is_plain_blocks(&bytes), is_plain_bytewise(&bytes));
        }
    }

    #[test]
    fn combining_kana_marks_are_composed() {
        // Long enough for the block check as well as the tail.
        let text = format!("{}か\u{3099}", "平".repeat(20));
        assert_eq!(clean_text(&text), format!("{}が", "平".repeat(20)));
        let text = format!("か\u{309a}{}", "平".repeat(20));
        assert!(!is_plain(text.as_bytes()));
        assert_eq!(clean_text("か\u{3099}"), "が");
    }

    #[test]
    fn long_plain_text_passes_and_a_bom_anywhere_fails_it() {
        let text = "今天天气很好，我们去公园散步吧！Weibo 2026 ok？".repeat(5);
        assert!(is_plain(text.as_bytes()));
        for at in 0..=text.len() {
            if text.is_char_boundary(at) {
                let mut t = text.clone();
                t.insert(at, '\u{feff}');
                assert!(!is_plain(t.as_bytes()), "BOM at byte {at}");
            }
        }
    }

    fn sh(s: &str) -> i64 {
        shanghai(NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap())
    }

    #[test]
    fn ids() {
        assert_eq!(parse_id("4973000000000001\t"), Ok(4973000000000001));
        assert_eq!(parse_id(" \"1669879400\" "), Ok(1669879400));
        assert_eq!(parse_id("4.38E+15"), Err(Reject::LossyId));
        assert_eq!(parse_id("4.38e15"), Err(Reject::LossyId));
        assert_eq!(parse_id("123.0"), Ok(123));
        assert_eq!(parse_id("abc"), Err(Reject::BadId));
        assert_eq!(parse_id("yangmiblog"), Err(Reject::BadId));
        assert_eq!(parse_id(""), Err(Reject::MissingField));
        assert_eq!(parse_id("0"), Err(Reject::BadId));
        assert_eq!(parse_id("99999999999999999999"), Err(Reject::BadId));
        assert_eq!(parse_optional_id("无"), Ok(None));
        assert_eq!(parse_optional_id(""), Ok(None));
        assert_eq!(parse_optional_id("42\t"), Ok(Some(42)));
        assert_eq!(parse_id("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_id("9223372036854775808"), Err(Reject::BadId));
        assert_eq!(parse_id("000000000000000042"), Ok(42));
        assert_eq!(parse_id("12a4"), Err(Reject::BadId));
    }

    proptest! {
        /// Strings of digits (with a stray character now and then) read as the standard
        /// library reads them, whatever their length: positive ids are kept, the rest refused.
        #[test]
        fn ids_read_as_the_standard_parser_reads_them(t in "[0-9]{1,21}|[0-9]{0,10}[/:a ][0-9]{0,10}") {
            let expected = if t.trim().bytes().all(|b| b.is_ascii_digit()) && !t.trim().is_empty() {
                match t.trim().parse::<i64>() {
                    Ok(v) if v > 0 => Ok(v),
                    _ => Err(Reject::BadId),
                }
            } else if t.trim().is_empty() {
                Err(Reject::MissingField)
            } else {
                Err(Reject::BadId)
            };
            prop_assert_eq!(parse_id(&t), expected);
        }
    }

    #[test]
    fn bid_and_mid_convert_both_ways() {
        // Worked by hand: groups "1" | "0001" -> "1" + "0000001"; "z" is 35, "Z" is 61.
        assert_eq!(bid_to_mid("10001"), Ok(10_000_001));
        assert_eq!(bid_to_mid("z000Z"), Ok(35 * 10_000_000 + 61));
        assert_eq!(mid_to_bid(350_000_061), "z000Z");
        for mid in [
            1i64,
            62,
            3_500_000_000_000_000,
            4_973_000_000_000_001,
            4_000_000_000_000_007,
        ] {
            assert_eq!(bid_to_mid(&mid_to_bid(mid)), Ok(mid), "{mid}");
        }
        let bid = mid_to_bid(4_455_396_406_985_423);
        assert_eq!(bid.len(), 9);
        assert_eq!(parse_mid_or_bid(&bid), Ok(4_455_396_406_985_423));
        assert_eq!(
            parse_mid_or_bid("4455396406985423\t"),
            Ok(4_455_396_406_985_423)
        );
        assert_eq!(bid_to_mid("!!!"), Err(Reject::BadId));
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("1234"), Ok(Some((1234, false))));
        assert_eq!(parse_count("1,234"), Ok(Some((1234, false))));
        assert_eq!(parse_count("1.2万"), Ok(Some((12_000, false))));
        assert_eq!(parse_count("100万+"), Ok(Some((1_000_000, true))));
        assert_eq!(parse_count("3亿"), Ok(Some((300_000_000, false))));
        assert_eq!(parse_count("无"), Ok(None));
        assert_eq!(parse_count(""), Ok(None));
        assert_eq!(parse_count("-3"), Err(Reject::BadCount));
        assert_eq!(parse_count("lots"), Err(Reject::BadCount));
        assert_eq!(parse_count("万"), Err(Reject::BadCount));
    }

    #[test]
    fn absolute_times_in_every_shape() {
        let crawl = sh("2026-11-29 23:00:00");
        let expect = sh("2026-11-29 21:00:00");
        for s in [
            "2026-11-29 21:00:00",
            "2026-11-29T21:00:00",
            "2026-11-29 21:00",
            "Sun Nov 29 21:00:00 +0800 2026",
            "2026-11-29T13:00:00Z",
            "2026-11-29T21:00:00+08:00",
        ] {
            assert_eq!(parse_time(s, crawl), Ok(expect), "{s}");
        }
        assert_eq!(parse_time(&(expect / 1000).to_string(), crawl), Ok(expect));
        assert_eq!(parse_time(&expect.to_string(), crawl), Ok(expect));
        assert_eq!(
            parse_time("2026-11-29", crawl),
            Ok(sh("2026-11-29 00:00:00"))
        );
        // UTC is 8 hours behind Shanghai.
        assert_eq!(
            sh("2026-11-29 08:00:00"),
            Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0)
                .unwrap()
                .timestamp_millis()
        );
    }

    #[test]
    fn relative_times_resolve_against_the_crawl() {
        let crawl = sh("2026-11-29 23:00:00");
        assert_eq!(parse_time("刚刚", crawl), Ok(crawl));
        assert_eq!(parse_time("30秒前", crawl), Ok(crawl - 30_000));
        assert_eq!(parse_time("5分钟前", crawl), Ok(crawl - 300_000));
        assert_eq!(parse_time("2小时前", crawl), Ok(sh("2026-11-29 21:00:00")));
        assert_eq!(
            parse_time("今天 08:15", crawl),
            Ok(sh("2026-11-29 08:15:00"))
        );
        assert_eq!(
            parse_time("昨天 23:59", crawl),
            Ok(sh("2026-11-28 23:59:00"))
        );
        assert_eq!(parse_time("11-02", crawl), Ok(sh("2026-11-02 00:00:00")));
        assert_eq!(
            parse_time("11-02 10:30", crawl),
            Ok(sh("2026-11-02 10:30:00"))
        );
        assert_eq!(
            parse_time("11月02日 10:30", crawl),
            Ok(sh("2026-11-02 10:30:00"))
        );
        // December seen in a January crawl is last year's December.
        let jan = sh("2027-01-03 12:00:00");
        assert_eq!(
            parse_time("12-30 09:00", jan),
            Ok(sh("2026-12-30 09:00:00"))
        );
    }

    #[test]
    fn impossible_times_are_refused() {
        let crawl = sh("2026-11-29 23:00:00");
        assert_eq!(
            parse_time("2008-01-01 00:00:00", crawl),
            Err(Reject::TimeBeforeLaunch)
        );
        assert_eq!(
            parse_time("2026-11-30 09:00:00", crawl),
            Err(Reject::TimeInFuture)
        );
        assert_eq!(parse_time("not a time", crawl), Err(Reject::BadTime));
        assert_eq!(parse_time("2026-13-45 10:00", crawl), Err(Reject::BadTime));
        assert_eq!(parse_time("", crawl), Err(Reject::MissingField));
    }

    #[test]
    fn text() {
        assert_eq!(clean_text("a\u{200b}b\u{feff}c"), "abc");
        assert_eq!(clean_text("line1\r\nline2\u{7}"), "line1\nline2");
        // NFC: e + combining acute becomes é.
        assert_eq!(clean_text("e\u{301}"), "\u{e9}");
        assert_eq!(clean_text("😀 表情"), "😀 表情");
        assert_eq!(
            clean_content("抱歉，此微博已被作者删除。查看帮助：http://t.cn/x"),
            ("".into(), true)
        );
        assert_eq!(
            clean_content("抱歉，作者已设置仅展示半年内微博，此微博已不可见。"),
            ("".into(), true)
        );
        assert_eq!(
            clean_content(" 今天天气不错 "),
            ("今天天气不错".into(), false)
        );
        // Only a post's text is a notice: a profile that quotes one keeps it.
        assert_eq!(clean_text("此微博已被作者删除"), "此微博已被作者删除");
        // A repost quoting the original's notice keeps its own words, and is not deleted.
        let quoting = "转发理由 //@某人: 抱歉，此微博已被作者删除。查看帮助：http://t.cn/x";
        assert_eq!(clean_content(quoting), (quoting.into(), false));
        let only_the_chain = "//@某人: 抱歉，此微博已被作者删除";
        assert_eq!(
            clean_content(only_the_chain),
            (only_the_chain.into(), false)
        );
        // weiboSpider's repost of a deleted original: its own words, then the original's.
        let spider = "转发理由:说得好\n转发内容: 抱歉，此微博已被作者删除。查看帮助：http://t.cn/x";
        assert_eq!(clean_content(spider), (spider.into(), false));
        // A notice of its own, before a chain, is still one.
        assert_eq!(
            clean_content("抱歉，此微博已被作者删除 //@某人: 原文"),
            ("".into(), true)
        );
    }

    #[test]
    fn lists_and_small_fields() {
        assert_eq!(
            split_list("#花絮#,@何炅，大数据"),
            vec!["花絮", "何炅", "大数据"]
        );
        assert_eq!(split_list("['a', 'b']"), vec!["a", "b"]);
        assert!(split_list("无").is_empty());
        assert_eq!(parse_bool("是"), Some(true));
        assert_eq!(parse_bool("False"), Some(false));
        assert_eq!(parse_gender("女"), Some("f"));
        assert_eq!(parse_gender("?"), None);
    }
}

#[cfg(test)]
mod fast_path {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Trimming's shortcut (no trimmable character at either end) changes nothing.
        #[test]
        fn trim_value_agrees_with_trimming_everywhere(s in "[ \"'\u{feff}\u{3000}\t]{0,2}\\PC{0,6}[ \"'\u{feff}\u{3000}\n]{0,2}") {
            let full = s.trim_matches(|c: char| {
                c.is_whitespace() || c == '"' || c == '\'' || c == '\u{feff}'
            });
            prop_assert_eq!(trim_value(&s), full);
        }

        /// The byte-scan fast path must agree with the full NFC + filter path on any text.
        #[test]
        fn fast_path_agrees_with_full_normalization(s in "\\PC{0,40}|[\\u{0}-\\u{3ff}\\u{2000}-\\u{2070}\\u{3000}-\\u{3010}\\u{4e00}-\\u{4e10}\\u{fe00}-\\u{ffff}]{0,40}") {
            let fast = clean_text(&s);
            let full: String = s
                .nfc()
                .filter(|&c| {
                    !matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}' | '\u{feff}' | '\u{00ad}')
                        && (c == '\n' || !c.is_control())
                })
                .collect();
            prop_assert_eq!(fast, full.trim().to_string());
        }
    }
}

//! Readers for raw crawled files: decompression, encoding detection, format detection, and
//! the mapping of each format onto the canonical fields of an entity.
//!
//! A reader streams one file and emits one [`Item`] per input record: either a record of a
//! known entity, or a rejection (undecodable bytes, a broken CSV row, a line that is not
//! JSON, a file whose format is unknown). It never drops a record silently and never holds
//! more than one record (plus I/O buffers) in memory.
//!
//! Invariants:
//! - `.gz` and `.zst` files are decompressed on the fly; GBK/GB18030 files are detected from
//!   their first 64 KiB and transcoded to UTF-8 as they stream.
//! - Line numbers are 1-based and count physical lines of the decoded text, so a rejected
//!   record can be found with `sed -n Np` on the decompressed file.

pub mod aminer;
pub mod canonical;
pub mod edge_list;
pub mod json;
pub mod mapping;
pub mod mapping_file;
pub mod mediacrawler;
pub mod nghuyong;
pub mod weibo_crawler_csv;
pub mod weibo_crawler_json;

use std::io::{self, BufRead, BufReader, Read};

use serde::Serialize;

pub use mapping::{Dialect, RawRecord};
pub use mapping_file::MappingFile;

use crate::dataset::{Entity, Reject};
use crate::error::{Error, Result};
use crate::hdfs::{FileEntry, FileSystems};

/// The file formats the readers understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Our own CSV with a header (§1): one entity per file, detected from the header.
    CanonicalCsv,
    /// Our own JSON lines (§1): the entity is detected per record from its keys.
    CanonicalJsonl,
    /// AMiner's `weibo_network.txt` follow graph (ids through `uidlist.txt` beside it).
    AminerNetwork,
    /// AMiner's `uidlist.txt`: a lookup table for the network file, no records of its own.
    AminerUidlist,
    /// A MatrixMarket coordinate file (`.mtx`): follows, one per entry, ids as written.
    MatrixMarket,
    /// A whitespace-separated `src dst` list with `#` or `%` comments: follows, ids as
    /// written.
    EdgeList,
}

impl Format {
    /// What a file read by this reader is, before its records say more.
    pub fn dialect(self) -> Dialect {
        match self {
            Format::CanonicalCsv => Dialect::CanonicalCsv,
            Format::CanonicalJsonl => Dialect::CanonicalJsonl,
            Format::AminerNetwork => Dialect::AminerNetwork,
            Format::AminerUidlist => Dialect::AminerUidlist,
            Format::MatrixMarket => Dialect::MatrixMarket,
            Format::EdgeList => Dialect::EdgeList,
        }
    }
}

/// One input record's fate at the reader.
#[derive(Debug)]
pub enum Item {
    Record {
        line: u64,
        entity: Entity,
        record: RawRecord,
    },
    Rejected {
        line: u64,
        /// The entity, when the reader knows it (a CSV file's entity is known from its header).
        entity: Option<Entity>,
        reason: Reject,
        excerpt: String,
    },
    /// A repeated header row inside a CSV file: counted as a duplicate.
    RepeatedHeader { line: u64, entity: Entity },
}

/// Longest raw excerpt kept with a reject.
pub const EXCERPT_CHARS: usize = 200;

/// Cuts text to [`EXCERPT_CHARS`] characters.
pub fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(EXCERPT_CHARS).collect();
    if s.chars().nth(EXCERPT_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// What was found out about a file while reading it.
#[derive(Clone, Debug, Serialize)]
pub struct FileSummary {
    pub path: String,
    pub format: Option<Dialect>,
    pub encoding: &'static str,
    pub compression: &'static str,
    pub bytes: u64,
    /// Why the file was not read: a crawler's sidecar that is not data (weiboSpider's `.txt`
    /// summary, weibo-crawler's markdown). Its lines are neither records nor rejects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<&'static str>,
    /// Why the file's records stop short: a compressed stream that breaks off, read with
    /// `--skip-corrupt-files` (one `corrupt_file` reject stands for the rest of it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<String>,
    /// What the reader noticed about the file as a whole (AMiner flags, a missing uid list).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What became of its records (filled by `clean`).
    #[serde(flatten)]
    pub counts: FileCounts,
}

/// What became of one file's records: `records_in == records_out + rejected + duplicates`,
/// as for an entity (docs/formats.md, "Per-file accounting").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FileCounts {
    pub records_in: u64,
    pub records_out: u64,
    pub rejected: u64,
    pub rejected_by_reason: std::collections::BTreeMap<String, u64>,
    /// Records that lost to a newer record of their key, and repeated header rows.
    pub duplicates: u64,
}

impl FileCounts {
    /// Whether every record is accounted for.
    pub fn balances(&self) -> bool {
        self.records_in == self.records_out + self.rejected + self.duplicates
    }
}

/// The compression a file's name says (`gzip`, `zstd` or `none`), and the name without its
/// suffix: what the rest of the name says about the format.
fn compression_of(name: &str) -> (&'static str, &str) {
    for (suffix, compression) in [(".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd")] {
        if let Some(base) = name.strip_suffix(suffix) {
            return (compression, base);
        }
    }
    ("none", name)
}

/// Opens a file decompressed and decoded to UTF-8 (invalid bytes are left for the reader to
/// reject). Returns the stream and the names of the compression and encoding found.
pub fn open_text(
    fs: &FileSystems,
    file: &FileEntry,
) -> Result<(Box<dyn BufRead + Send>, &'static str, &'static str)> {
    let raw = fs.open(&file.location)?;
    let name = file.location.file_name().unwrap_or_default();
    let compression = compression_of(&name).0;
    let decompressed: Box<dyn Read + Send> = match compression {
        "gzip" => Box::new(flate2::read::MultiGzDecoder::new(raw)),
        "zstd" => Box::new(
            zstd::stream::read::Decoder::new(raw).map_err(|e| Error::Io {
                op: "open zstd",
                path: file.location.to_string(),
                source: e,
            })?,
        ),
        _ => raw,
    };
    let mut buffered = BufReader::with_capacity(1 << 20, decompressed);
    let sample = fill_sample(&mut buffered, 64 * 1024).map_err(|e| Error::Io {
        op: "read",
        path: file.location.to_string(),
        source: e,
    })?;
    let encoding = sniff_encoding(&sample);
    let reader: Box<dyn BufRead + Send> = match encoding {
        "gb18030" => Box::new(BufReader::with_capacity(
            1 << 20,
            encoding_rs_io::DecodeReaderBytesBuilder::new()
                .encoding(Some(encoding_rs::GB18030))
                .build(buffered),
        )),
        _ => Box::new(StripBom::new(buffered)),
    };
    Ok((reader, compression, encoding))
}

/// Makes sure the buffer holds up to `want` bytes (or the whole stream) and returns a copy.
fn fill_sample<R: Read>(reader: &mut BufReader<R>, want: usize) -> io::Result<Vec<u8>> {
    // BufReader only refills when empty; read through a peek of its current buffer plus a
    // bounded look-ahead kept in a side buffer would need a custom reader, so settle for what
    // one fill gives (1 MiB capacity: far more than the 64 KiB sniff needs for plain files).
    let buf = reader.fill_buf()?;
    Ok(buf[..buf.len().min(want)].to_vec())
}

/// `utf-8` when the sample is valid UTF-8 (a character cut at the end is fine); `gb18030` when
/// it is not but decodes cleanly as GB18030; else `utf-8` and invalid bytes are rejected.
pub fn sniff_encoding(sample: &[u8]) -> &'static str {
    match std::str::from_utf8(sample) {
        Ok(_) => "utf-8",
        Err(e) if e.error_len().is_none() => "utf-8",
        Err(_) => {
            // Decoded as a stream that goes on (`last = false`): a character the sample's end
            // cuts in two is held back, not taken for an error, as with UTF-8 above.
            let mut decoder = encoding_rs::GB18030.new_decoder_without_bom_handling();
            let mut out = vec![0u8; sample.len() * 3 + 16];
            let (result, _, _) =
                decoder.decode_to_utf8_without_replacement(sample, &mut out, false);
            match result {
                encoding_rs::DecoderResult::Malformed(..) => "utf-8",
                _ => "gb18030",
            }
        }
    }
}

/// Drops a leading UTF-8 byte-order mark (weibo-crawler and weiboSpider write `utf-8-sig`).
struct StripBom<R> {
    inner: R,
    checked: bool,
}

impl<R: BufRead> StripBom<R> {
    fn new(inner: R) -> Self {
        StripBom {
            inner,
            checked: false,
        }
    }

    fn check(&mut self) -> io::Result<()> {
        if !self.checked {
            self.checked = true;
            let buf = self.inner.fill_buf()?;
            if buf.starts_with(b"\xef\xbb\xbf") {
                self.inner.consume(3);
            }
        }
        Ok(())
    }
}

impl<R: BufRead> Read for StripBom<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.check()?;
        self.inner.read(out)
    }
}

impl<R: BufRead> BufRead for StripBom<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.check()?;
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt)
    }
}

/// Why a file is a crawler's sidecar rather than data, from its name and first bytes: the
/// markdown page weibo-crawler writes per user, and weiboSpider's `.txt` summary per user
/// (it opens with `用户信息`, "user info").
pub fn sidecar(name: &str, sample: &[u8]) -> Option<&'static str> {
    let base = compression_of(name).1;
    if base.ends_with(".md") || base.ends_with(".markdown") {
        return Some("markdown, not data (weibo-crawler writes one per user)");
    }
    let text = sample
        .strip_prefix(b"\xef\xbb\xbf".as_slice())
        .unwrap_or(sample);
    if base.ends_with(".txt") && text.starts_with("用户信息".as_bytes()) {
        return Some("a per-user summary, not data (weiboSpider's .txt writer)");
    }
    None
}

/// Picks the format of a file from its name and first bytes.
pub fn detect_format(name: &str, sample: &[u8]) -> Option<Format> {
    let base = compression_of(name).1;
    if base == "weibo_network.txt" || base.ends_with("/weibo_network.txt") {
        return Some(Format::AminerNetwork);
    }
    if base == "uidlist.txt" || base.ends_with("/uidlist.txt") {
        return Some(Format::AminerUidlist);
    }
    match edge_list::detect(base, sample) {
        Some(edge_list::Kind::MatrixMarket) => return Some(Format::MatrixMarket),
        Some(edge_list::Kind::Plain) => return Some(Format::EdgeList),
        None => {}
    }
    let first = sample
        .iter()
        .position(|b| !b.is_ascii_whitespace() && *b != 0xef && *b != 0xbb && *b != 0xbf)
        .map(|i| sample[i]);
    if base.ends_with(".jsonl")
        || base.ends_with(".json")
        || first == Some(b'{')
        || first == Some(b'[')
    {
        return Some(Format::CanonicalJsonl);
    }
    if base.ends_with(".csv") || base.ends_with(".tsv") || base.ends_with(".txt") {
        return Some(Format::CanonicalCsv);
    }
    None
}

/// How to read the input files.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOptions<'a> {
    /// The layouts of a mapping file (`clean --mapping`), tried before the built-in ones.
    pub layouts: Option<&'a MappingFile>,
    /// The reader to use for every file; `None`: detected per file.
    pub format: Option<Format>,
    /// A compressed file that breaks off (truncated or corrupt `.gz`/`.zst`) becomes one
    /// `corrupt_file` reject at the line where it broke, after the records read before it,
    /// instead of failing the run (Spark's `ignoreCorruptFiles`).
    pub skip_corrupt_files: bool,
    /// Read only this many bytes of each file's text (`clean --inspect`); the record the
    /// cut falls in may come out broken.
    pub head_bytes: Option<u64>,
}

/// Whether a read error of a compressed file is its own corruption (a truncated or damaged
/// stream) rather than the storage failing.
fn is_corruption(compression: &str, e: &io::Error) -> bool {
    use io::ErrorKind::*;
    compression != "none" && matches!(e.kind(), UnexpectedEof | InvalidData | InvalidInput | Other)
}

/// Reads one file, emitting one [`Item`] per record.
pub fn read_file(
    fs: &FileSystems,
    file: &FileEntry,
    options: ReadOptions<'_>,
    emit: &mut dyn FnMut(Item),
) -> Result<FileSummary> {
    let layouts = options.layouts.unwrap_or(&mapping_file::NONE);
    let name = file.location.file_name().unwrap_or_default();
    let path_hint = file.location.to_string();
    let summary = |compression, encoding| FileSummary {
        path: path_hint.clone(),
        format: None,
        encoding,
        compression,
        bytes: file.len,
        skipped: None,
        corrupt: None,
        warnings: Vec::new(),
        counts: FileCounts::default(),
    };
    // The last line handed over, for where a corrupt stream broke off.
    let last_line = std::cell::Cell::new(0u64);
    let mut emit = |item: Item| {
        last_line.set(last_line.get().max(item.line()));
        emit(item)
    };
    let corrupt = |e: &io::Error, line: u64, emit: &mut dyn FnMut(Item)| {
        let reason = format!("the stream breaks off: {e}");
        log::warn!("{path_hint}: skipped from line {line}, {reason}");
        emit(Item::Rejected {
            line,
            entity: None,
            reason: Reject::CorruptFile,
            excerpt: excerpt(&reason),
        });
        reason
    };
    let named_compression = compression_of(&name).0;
    let opened = open_text(fs, file).map(|(reader, compression, encoding)| {
        (head(reader, options.head_bytes), compression, encoding)
    });
    let (mut reader, compression, encoding) = match opened {
        Ok(opened) => opened,
        Err(Error::Io { source, .. })
            if options.skip_corrupt_files && is_corruption(named_compression, &source) =>
        {
            let reason = corrupt(&source, 1, &mut emit);
            return Ok(FileSummary {
                corrupt: Some(reason),
                ..summary(named_compression, "unknown")
            });
        }
        Err(e) => return Err(e),
    };
    let sample = reader.fill_buf().map_err(|e| Error::Io {
        op: "read",
        path: path_hint.clone(),
        source: e,
    })?;
    // A sidecar is reported, not read, unless the format was forced.
    let skipped = options
        .format
        .is_none()
        .then(|| sidecar(&name, sample))
        .flatten();
    let format = match (options.format, skipped) {
        (Some(f), _) => Some(f),
        (None, Some(_)) => None,
        (None, None) => detect_format(&name, sample),
    };
    if let Some(reason) = skipped {
        log::info!("{path_hint}: skipped, {reason}");
        return Ok(FileSummary {
            skipped: Some(reason),
            ..summary(compression, encoding)
        });
    }
    let mut warnings = Vec::new();
    // What the header or the records said the file is, more precisely than its format.
    let read: io::Result<Option<Dialect>> = match format {
        Some(Format::CanonicalCsv) => canonical::read_csv(reader, &path_hint, layouts, &mut emit)
            .map(|(dialect, w)| {
                for w in &w {
                    log::warn!("{path_hint}: {w}");
                }
                warnings = w;
                dialect
            }),
        Some(Format::CanonicalJsonl) => json::read_jsonl(reader, layouts, &mut emit),
        Some(Format::AminerNetwork) => {
            let uids = aminer_uidlist(fs, file)?;
            // The id base takes a first pass over the file: its ids against the list.
            let base = match &uids {
                Some(uids) => {
                    let first_pass = head(open_text(fs, file)?.0, options.head_bytes);
                    let range = aminer::id_range(first_pass).map_err(|e| Error::Io {
                        op: "read",
                        path: path_hint.clone(),
                        source: e,
                    })?;
                    Some(aminer::id_base(range, uids.len()))
                }
                None => None,
            };
            let every = if file.len < 64 << 20 {
                1
            } else {
                aminer::SAMPLE
            };
            let ids = uids.as_deref().zip(base);
            aminer::read_network(reader, ids, every, &mut emit).map(|w| {
                for w in &w {
                    log::warn!("{path_hint}: {w}");
                }
                warnings = w;
                None
            })
        }
        Some(Format::AminerUidlist) => Ok(None),
        Some(kind @ (Format::MatrixMarket | Format::EdgeList)) => {
            let kind = match kind {
                Format::MatrixMarket => edge_list::Kind::MatrixMarket,
                _ => edge_list::Kind::Plain,
            };
            edge_list::read(reader, kind, &mut emit).map(|w| {
                warnings = w;
                None
            })
        }
        None => reject_every_line(reader, Reject::UnknownFormat, &mut emit).map(|()| None),
    };
    let (dialect, corrupted) = match read {
        Ok(dialect) => (dialect, None),
        Err(e) if options.skip_corrupt_files && is_corruption(compression, &e) => {
            let line = last_line.get() + 1;
            (None, Some(corrupt(&e, line, &mut emit)))
        }
        Err(e) => {
            return Err(Error::Io {
                op: "read",
                path: path_hint.clone(),
                source: e,
            })
        }
    };
    // A CSV or JSON file is what its header or records said, or unknown: never our canonical
    // format by default.
    let format = match format {
        Some(Format::CanonicalCsv | Format::CanonicalJsonl) => dialect,
        other => dialect.or(other.map(Format::dialect)),
    };
    Ok(FileSummary {
        format,
        corrupt: corrupted,
        warnings,
        ..summary(compression, encoding)
    })
}

impl Item {
    /// The line the item is at.
    pub fn line(&self) -> u64 {
        match self {
            Item::Record { line, .. }
            | Item::Rejected { line, .. }
            | Item::RepeatedHeader { line, .. } => *line,
        }
    }
}

/// The first `bytes` of a text, or all of it.
fn head(reader: Box<dyn BufRead + Send>, bytes: Option<u64>) -> Box<dyn BufRead + Send> {
    match bytes {
        Some(n) => Box::new(reader.take(n)),
        None => reader,
    }
}

/// The uid list of an AMiner network file (plain or compressed), if there is one: beside it,
/// else one folder up (the archive unpacks as `uidlist.txt` beside `weibo_network/`).
fn aminer_uidlist(fs: &FileSystems, network: &FileEntry) -> Result<Option<Vec<Option<i64>>>> {
    let Some(beside) = network.location.parent() else {
        return Ok(None);
    };
    let up = beside.parent();
    let names = ["uidlist.txt", "uidlist.txt.gz", "uidlist.txt.zst"];
    let candidates = std::iter::once(&beside)
        .chain(up.as_ref())
        .flat_map(|dir| names.iter().map(move |name| (dir, *name)));
    for (dir, name) in candidates {
        let location = dir.join(name);
        if let Some(entry) = fs.status(&location)? {
            let (reader, _, _) = open_text(fs, &entry)?;
            let uids = aminer::read_uidlist(reader).map_err(|e| Error::Io {
                op: "read",
                path: location.to_string(),
                source: e,
            })?;
            return Ok(Some(uids));
        }
    }
    Ok(None)
}

/// Reads the next line of `reader` into `bytes` as text; a line that is not UTF-8 is one
/// `invalid_encoding` reject of `entity` and comes back as `Some(None)`. `None` at the end.
pub(crate) fn next_text_line<'a>(
    reader: &mut dyn BufRead,
    bytes: &'a mut Vec<u8>,
    line: &mut u64,
    entity: Entity,
    emit: &mut dyn FnMut(Item),
) -> io::Result<Option<Option<&'a str>>> {
    bytes.clear();
    if reader.read_until(b'\n', bytes)? == 0 {
        return Ok(None);
    }
    *line += 1;
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(Some(Some(text))),
        Err(_) => {
            emit(Item::Rejected {
                line: *line,
                entity: Some(entity),
                reason: Reject::InvalidEncoding,
                excerpt: excerpt(String::from_utf8_lossy(bytes).trim_end()),
            });
            Ok(Some(None))
        }
    }
}

/// Rejects each line of a file that cannot be read as records.
fn reject_every_line(
    mut reader: Box<dyn BufRead + Send>,
    reason: Reject,
    emit: &mut dyn FnMut(Item),
) -> io::Result<()> {
    let mut line = Vec::new();
    let mut n = 0u64;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        n += 1;
        emit(Item::Rejected {
            line: n,
            entity: None,
            reason,
            excerpt: excerpt(String::from_utf8_lossy(&line).trim_end()),
        });
    }
}

/// The entity a path names, from a folder or file name (`.../follows/part-1.csv`): the
/// right-most entity word wins; "post" inside "repost" does not count as posts.
pub fn entity_from_path(path: &str) -> Option<Entity> {
    let lower = path.to_ascii_lowercase();
    let mut best: Option<(usize, Entity)> = None;
    for entity in Entity::ALL {
        let singular = entity.name().trim_end_matches('s');
        let found = lower
            .match_indices(singular)
            .map(|(pos, _)| pos)
            .filter(|&pos| entity != Entity::Posts || !lower[..pos].ends_with("re"))
            .last();
        if let Some(pos) = found {
            if best.is_none_or(|(p, _)| pos > p) {
                best = Some((pos, entity));
            }
        }
    }
    best.map(|(_, e)| e)
}

/// The entity a set of canonical field names describes (a CSV header, a JSON object's keys).
pub fn entity_from_fields<'a>(names: impl IntoIterator<Item = &'a str> + Clone) -> Option<Entity> {
    let has = |n: &str| names.clone().into_iter().any(|k| k == n);
    if has("follower") && has("followee") {
        return Some(Entity::Follows);
    }
    if has("cid") {
        return Some(Entity::Comments);
    }
    let post_only = [
        "bid",
        "reposts_count",
        "comments_count",
        "attitudes_count",
        "source",
        "topics",
        "pics",
    ];
    if has("mid") || has("bid") {
        if post_only.iter().any(|n| has(n)) {
            return Some(Entity::Posts);
        }
        if has("retweet_mid") {
            return Some(Entity::Reposts);
        }
        return Some(Entity::Posts);
    }
    if has("uid") && (has("screen_name") || has("followers_count") || has("follow_count")) {
        return Some(Entity::Users);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_utf8_and_gb18030() {
        assert_eq!(sniff_encoding("用户,数据".as_bytes()), "utf-8");
        let (gbk, _, _) = encoding_rs::GB18030.encode("用户,数据\n迪丽热巴");
        assert_eq!(sniff_encoding(&gbk), "gb18030");
        // A UTF-8 character cut by the sample boundary is still UTF-8.
        let cut = &"数据".as_bytes()[..4];
        assert_eq!(sniff_encoding(cut), "utf-8");
    }

    #[test]
    fn a_gb18030_character_cut_by_the_sample_end_is_still_gb18030() {
        // Two-byte characters, and a four-byte one (U+20000 is four bytes in GB18030).
        let text = "uid,screen_name\n1000000001,迪丽热巴𠀀何炅\n";
        let (gb, _, _) = encoding_rs::GB18030.encode(text);
        assert!(std::str::from_utf8(&gb).is_err());
        // From the end of the first whole character on (ASCII alone is UTF-8 too).
        let first = gb.iter().position(|b| !b.is_ascii()).unwrap() + 2;
        for end in first..=gb.len() {
            assert_eq!(
                sniff_encoding(&gb[..end]),
                "gb18030",
                "sample cut at byte {end}"
            );
        }
        // Bytes that are not GB18030 anywhere stay UTF-8 (and are rejected by the reader).
        assert_eq!(sniff_encoding(b"uid\n\x80\xff\x80\xff"), "utf-8");
    }

    #[test]
    fn detects_formats_and_entities_from_names() {
        assert_eq!(
            detect_format("a.jsonl.gz", b""),
            Some(Format::CanonicalJsonl)
        );
        assert_eq!(
            detect_format("x.dat", b"  {\"a\":1}"),
            Some(Format::CanonicalJsonl)
        );
        assert_eq!(
            detect_format("users.csv.zst", b""),
            Some(Format::CanonicalCsv)
        );
        assert_eq!(detect_format("blob.bin", b"\x00\x01"), None);
        assert_eq!(
            entity_from_path("/raw/follows/part-0.csv"),
            Some(Entity::Follows)
        );
        assert_eq!(entity_from_path("/raw/x/users.csv"), Some(Entity::Users));
        assert_eq!(
            entity_from_path("/raw/x/comments_2026.csv"),
            Some(Entity::Comments)
        );
        assert_eq!(entity_from_path("/raw/x/data.csv"), None);
        assert_eq!(
            entity_from_path("/raw/reposts/r.csv"),
            Some(Entity::Reposts)
        );
        assert_eq!(
            entity_from_path("/raw/reposts/posts.csv"),
            Some(Entity::Posts)
        );
        assert_eq!(
            entity_from_fields(["uid", "screen_name"]),
            Some(Entity::Users)
        );
        assert_eq!(
            entity_from_fields(["mid", "uid", "retweet_mid"]),
            Some(Entity::Reposts)
        );
        assert_eq!(
            entity_from_fields(["mid", "bid", "retweet_mid"]),
            Some(Entity::Posts)
        );
        assert_eq!(
            entity_from_fields(["follower", "followee"]),
            Some(Entity::Follows)
        );
        assert_eq!(entity_from_fields(["a", "b"]), None);
    }
}

//! Why a record was refused: the reason codes of `_rejects/dt=<date>/rejects.jsonl` and of
//! every report. Readers and the cleaner both give them; the codes are a contract with the
//! operators' alerting, so a code once written keeps its name.

use serde::Serialize;

/// Why a record was refused. The snake_case name is the reason code in rejects and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reject {
    /// A required field is empty or absent.
    MissingField,
    /// An id is not a positive 64-bit integer (or a bid that decodes to one).
    BadId,
    /// An id lost digits to scientific notation (`4.38E+15`).
    LossyId,
    /// A time matches none of the known shapes.
    BadTime,
    /// A time before Weibo's launch (2009-08-14).
    TimeBeforeLaunch,
    /// A time later than the crawl that saw it.
    TimeInFuture,
    /// A count that is neither a number nor a `万`/`亿`/`+` form.
    BadCount,
    /// A user following themself.
    SelfFollow,
    /// A row the CSV reader could not split, or with the wrong number of fields.
    MalformedRow,
    /// A line that is not a JSON object.
    BadJson,
    /// Bytes that are not text in any supported encoding.
    InvalidEncoding,
    /// A record of a kind the reader recognises but that holds no entity we keep.
    UnknownRecord,
    /// A file whose format could not be recognised; each of its lines is rejected.
    UnknownFormat,
    /// An internal id with no real uid (AMiner graph: outside `uidlist.txt`, or no list).
    UnmappedId,
    /// The rest of a compressed file that breaks off (`--skip-corrupt-files`): one reject at
    /// the line where it broke.
    CorruptFile,
}

impl Reject {
    pub fn code(self) -> &'static str {
        match self {
            Reject::MissingField => "missing_field",
            Reject::BadId => "bad_id",
            Reject::LossyId => "lossy_id",
            Reject::BadTime => "bad_time",
            Reject::TimeBeforeLaunch => "time_before_launch",
            Reject::TimeInFuture => "time_in_future",
            Reject::BadCount => "bad_count",
            Reject::SelfFollow => "self_follow",
            Reject::MalformedRow => "malformed_row",
            Reject::UnmappedId => "unmapped_id",
            Reject::BadJson => "bad_json",
            Reject::InvalidEncoding => "invalid_encoding",
            Reject::UnknownRecord => "unknown_record",
            Reject::UnknownFormat => "unknown_format",
            Reject::CorruptFile => "corrupt_file",
        }
    }
}

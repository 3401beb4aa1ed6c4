//! Layouts as declarations (TOML): the crawler CSV layouts we ship that a declaration
//! describes whole ([`MappingFile::built_in`], `layouts.toml` beside this file), and a user's
//! mapping file (`clean --mapping FILE`) for layouts we do not ship, so that a fork's CSV or
//! JSON is read without code (docs/formats.md, "Your own layout"). Each layout names its
//! entity, the columns (CSV) or keys (JSON, `a.b` for a nested key) that identify it, the
//! canonical field each column fills, how a time or an id in it is written, and whether the
//! author's uid is the file's name.
//!
//! Invariants: a layout reads a file (or a JSON record) only when every one of its evidence
//! columns is there; a file with some of them, or with the whole evidence of two layouts, is
//! `unknown_format`, never read by the nearest one. A value a conversion cannot read is
//! handed on as written, so the cleaner rejects it with its own reason; an id that went
//! through a spreadsheet is refused as `lossy_id`, never guessed. A layout's name is its
//! dialect in the report, and may not be a built-in dialect's.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::mapping::{convert, uid_from_path, value_text, Convert, Dialect, Mapped, RawRecord};
use crate::dataset::{Entity, Reject};
use crate::error::{Error, Result};
use crate::hdfs::FileSystems;

/// The layouts of one mapping file, in the file's order.
#[derive(Clone, Debug, Default)]
pub struct MappingFile {
    layouts: Vec<Layout>,
}

/// No mapping file: only the built-in layouts.
pub static NONE: MappingFile = MappingFile {
    layouts: Vec::new(),
};

#[derive(Clone, Debug)]
struct Layout {
    /// A built-in dialect, or [`Dialect::Mapping`] with the user's name (leaked once per
    /// run, so that a dialect stays `Copy`).
    dialect: Dialect,
    entity: Entity,
    evidence: Vec<String>,
    /// Their column (or key path) → our field.
    columns: Vec<(String, usize)>,
    /// Our fields whose values are written otherwise than the cleaner reads them.
    conversions: Vec<(usize, Convert)>,
    /// The author's uid is a CSV file's numeric name.
    uid_from_path: bool,
}

/// What a layout makes of a header or a record.
pub enum Claim<T> {
    Read(T),
    /// No layout's evidence is there: the built-in readers may take it.
    None,
    /// Part of a layout's evidence, or the whole of two: `unknown_format`, and why.
    Partial(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    layout: Vec<LayoutSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LayoutSpec {
    name: String,
    entity: String,
    evidence: Vec<String>,
    columns: BTreeMap<String, ColumnSpec>,
    #[serde(default)]
    uid_from_path: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ColumnSpec {
    Field(String),
    Full {
        field: String,
        #[serde(default)]
        time: Option<String>,
        #[serde(default)]
        id: Option<IdKind>,
    },
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum IdKind {
    Mid,
    Uid,
    Bid,
    Lossy,
}

/// Fields that hold an id, and those that hold a time, by entity.
fn is_id(field: &str) -> bool {
    matches!(
        field,
        "uid" | "mid" | "cid" | "retweet_mid" | "reply_to_cid" | "follower" | "followee"
    )
}

fn is_time(field: &str) -> bool {
    matches!(field, "created_at" | "followed_at" | "crawl_time")
}

impl MappingFile {
    /// Reads a mapping file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<MappingFile> {
        MappingFile::parse_as(text, path, false)
    }

    /// The crawler CSV layouts we ship as declarations (`layouts.toml`), tried after a
    /// user's and after the layouts that need code.
    pub fn built_in() -> &'static MappingFile {
        static BUILT_IN: std::sync::LazyLock<MappingFile> = std::sync::LazyLock::new(|| {
            MappingFile::parse_as(include_str!("layouts.toml"), "layouts.toml", true)
                .expect("the built-in layouts parse (a unit test holds it)")
        });
        &BUILT_IN
    }

    /// `built_in`: the names are our dialects' (else they may not be).
    fn parse_as(text: &str, path: &str, built_in: bool) -> Result<MappingFile> {
        let bad = |reason: String| Error::Usage(format!("mapping file {path}: {reason}"));
        let spec: FileSpec = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        let mut layouts: Vec<Layout> = Vec::new();
        for l in spec.layout {
            let layout = Layout::of(l, built_in).map_err(&bad)?;
            if layouts.iter().any(|o| o.dialect == layout.dialect) {
                let name = layout.dialect.name();
                return Err(bad(format!("two layouts are named {name:?}")));
            }
            layouts.push(layout);
        }
        Ok(MappingFile { layouts })
    }

    /// Reads the mapping file at `url` (local or HDFS: a YARN task reads it where it runs).
    pub fn load(fs: &FileSystems, url: &str) -> Result<MappingFile> {
        let bytes = fs.read_to_vec(&fs.parse(url)?)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::Usage(format!("mapping file {url}: not UTF-8 text")))?;
        MappingFile::parse(&text, url)
    }

    /// The layout whose evidence a CSV header has, as a column mapping.
    pub fn header(&self, names: &[String], path: &str) -> Claim<Mapped> {
        let has = |n: &str| names.iter().any(|x| x == n);
        self.claim(&has).map(|l| {
            let mapping = names
                .iter()
                .map(|n| l.columns.iter().find(|c| c.0 == *n).map(|c| c.1))
                .collect();
            let (constants, warning) = match l.uid_from_path {
                true => uid_from_path(l.entity, path),
                false => (Vec::new(), None),
            };
            Mapped {
                dialect: l.dialect,
                constants,
                warning,
                conversions: l.conversions.clone(),
                ..Mapped::columns(l.entity, mapping)
            }
        })
    }

    /// The layout whose evidence a JSON record has, and the record it maps to (`Err`: its
    /// reject); the uid from the path is not offered for JSON.
    pub fn record(
        &self,
        object: &Map<String, Value>,
    ) -> Claim<(Dialect, Entity, std::result::Result<RawRecord, Reject>)> {
        let has = |k: &str| key(object, k).is_some();
        self.claim(&has).map(|l| {
            let mut r = RawRecord::new(l.entity);
            for (theirs, field) in &l.columns {
                if let Some(v) = key(object, theirs).and_then(value_text) {
                    r.set_index(*field, &v);
                }
            }
            let converted = convert(&mut r, &l.conversions).map(|()| r);
            (l.dialect, l.entity, converted)
        })
    }

    fn claim(&self, has: &dyn Fn(&str) -> bool) -> Claim<&Layout> {
        let whole: Vec<&Layout> = self
            .layouts
            .iter()
            .filter(|l| l.evidence.iter().all(|e| has(e)))
            .collect();
        match whole[..] {
            [layout] => Claim::Read(layout),
            [] => match self
                .layouts
                .iter()
                .find(|l| l.evidence.iter().any(|e| has(e)))
            {
                Some(l) => {
                    let missing: Vec<&str> = l
                        .evidence
                        .iter()
                        .filter(|e| !has(e))
                        .map(String::as_str)
                        .collect();
                    Claim::Partial(format!(
                        "partly the layout {}: no {}",
                        l.dialect.name(),
                        missing.join(", ")
                    ))
                }
                None => Claim::None,
            },
            _ => {
                let names: Vec<&str> = whole.iter().map(|l| l.dialect.name()).collect();
                Claim::Partial(format!(
                    "the whole evidence of the layouts {}",
                    names.join(" and ")
                ))
            }
        }
    }
}

impl<T> Claim<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Claim<U> {
        match self {
            Claim::Read(t) => Claim::Read(f(t)),
            Claim::None => Claim::None,
            Claim::Partial(why) => Claim::Partial(why),
        }
    }
}

impl Layout {
    fn of(spec: LayoutSpec, built_in: bool) -> std::result::Result<Layout, String> {
        let name = spec.name.trim();
        let ours = Dialect::BUILT_IN.into_iter().find(|d| d.name() == name);
        let dialect = match (ours, built_in) {
            (Some(d), true) => d,
            (None, false) if !name.is_empty() => {
                Dialect::Mapping(Box::leak(name.to_string().into_boxed_str()))
            }
            (None, true) => return Err(format!("{name:?} is none of our dialects")),
            _ => {
                return Err(format!(
                    "{name:?} is no name for a layout (empty or built in)"
                ))
            }
        };
        let entity = Entity::ALL
            .into_iter()
            .find(|e| e.name() == spec.entity)
            .ok_or_else(|| format!("layout {name:?}: no entity {:?}", spec.entity))?;
        if spec.evidence.is_empty() {
            return Err(format!("layout {name:?}: no evidence columns"));
        }
        let (mut columns, mut conversions) = (Vec::new(), Vec::new());
        for (theirs, column) in spec.columns {
            let (field, time, id) = match column {
                ColumnSpec::Field(f) => (f, None, None),
                ColumnSpec::Full { field, time, id } => (field, time, id),
            };
            let at = |what: &str| format!("layout {name:?}, column {theirs:?}: {what}");
            let index = entity
                .field_index(&field)
                .ok_or_else(|| at(&format!("{} have no field {field:?}", entity.name())))?;
            let convert = match (time, id) {
                (Some(_), Some(_)) => return Err(at("a time or an id, not both")),
                (Some(_), None) if !is_time(&field) => return Err(at("a time for no time")),
                (None, Some(_)) if !is_id(&field) => return Err(at("an id kind for no id")),
                (Some(format), None) => {
                    check_time_format(&format).map_err(|e| at(&e))?;
                    Convert::Time(format)
                }
                (None, Some(IdKind::Bid)) => Convert::Bid,
                (None, Some(IdKind::Lossy)) => Convert::Lossy,
                (None, Some(IdKind::Mid | IdKind::Uid) | None) => Convert::AsWritten,
            };
            if convert != Convert::AsWritten {
                conversions.push((index, convert));
            }
            columns.push((theirs, index));
        }
        if spec.uid_from_path && entity.field_index("uid").is_none() {
            return Err(format!("layout {name:?}: {} have no uid", entity.name()));
        }
        Ok(Layout {
            dialect,
            entity,
            evidence: spec.evidence,
            columns,
            conversions,
            uid_from_path: spec.uid_from_path,
        })
    }
}

/// A `strftime` format chrono can read with.
fn check_time_format(format: &str) -> std::result::Result<(), String> {
    use chrono::format::{Item, StrftimeItems};
    if StrftimeItems::new(format).any(|i| matches!(i, Item::Error)) {
        return Err(format!("{format:?} is no strftime format"));
    }
    Ok(())
}

/// A key of `object`, `a.b` for key `b` of object `a`.
fn key<'a>(object: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut value = object.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value).filter(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORK: &str = r#"
[[layout]]
name = "fork-posts"
entity = "posts"
evidence = ["微博编号", "内容", "发布于"]
uid_from_path = true

[layout.columns]
"微博编号" = { field = "mid", id = "bid" }
"内容" = "text"
"发布于" = { field = "created_at", time = "%Y年%m月%d日 %H:%M" }
"赞" = "attitudes_count"
"#;

    fn names(header: &str) -> Vec<String> {
        header.split(',').map(String::from).collect()
    }

    #[test]
    fn a_layout_reads_a_header_with_all_of_its_evidence_only() {
        let m = MappingFile::parse(FORK, "m.toml").unwrap();
        let Claim::Read(mapped) = m.header(&names("微博编号,内容,发布于,赞,其他"), "/w/123.csv")
        else {
            panic!("not read");
        };
        let field = |f| Entity::Posts.field_index(f);
        assert_eq!(mapped.dialect.name(), "fork-posts");
        let want = vec![
            field("mid"),
            field("text"),
            field("created_at"),
            field("attitudes_count"),
            None,
        ];
        assert_eq!(mapped.mapping, want);
        assert_eq!(
            mapped.constants,
            vec![(field("uid").unwrap(), "123".to_string())]
        );
        assert!(matches!(
            m.header(&names("微博编号,内容"), "/w/1.csv"),
            Claim::Partial(_)
        ));
        assert!(matches!(
            m.header(&names("uid,text"), "/w/1.csv"),
            Claim::None
        ));
    }

    fn built_in(header: &str) -> Option<(Entity, Dialect, Vec<Option<usize>>)> {
        match MappingFile::built_in().header(&names(header), "/w/2803301701.csv") {
            Claim::Read(m) => Some((m.entity, m.dialect, m.mapping)),
            _ => None,
        }
    }

    #[test]
    fn built_in_layouts_each_need_all_of_their_evidence() {
        let users = "用户id,昵称,性别,所在地,微博数,粉丝数,关注数,简介";
        let (entity, dialect, _) = built_in(users).unwrap();
        assert_eq!(
            (entity, dialect),
            (Entity::Users, Dialect::WeiboCrawlerUsers)
        );

        let (entity, dialect, mapping) = built_in("用户id,关注者id,昵称").unwrap();
        assert_eq!((entity, dialect), (Entity::Follows, Dialect::FollowExport));
        let field = |f| Entity::Follows.field_index(f);
        assert_eq!(mapping, vec![field("follower"), field("followee"), None]);

        let (entity, _, _) = built_in("id,weibo_id,created_at,user_screen_name,text").unwrap();
        assert_eq!(entity, Entity::Comments);

        let search = "id,bid,user_id,用户昵称,微博正文,头条文章url,发布位置,艾特用户,话题,转发数,\
                      评论数,点赞数,发布时间,发布工具,微博图片url,微博视频url,retweet_id";
        let (entity, dialect, mapping) = built_in(search).unwrap();
        assert_eq!((entity, dialect), (Entity::Posts, Dialect::WeiboSearch));
        let field = |f| Entity::Posts.field_index(f);
        assert_eq!(mapping[2], field("uid"));
        assert_eq!(mapping[3], None, "a screen name is no profile");
        assert_eq!(mapping[12], field("created_at"));
        assert_eq!(mapping[16], field("retweet_mid"));

        // weiboSpider shares 微博正文 and 发布时间 with weibo-search: its whole evidence decides.
        let spider = "微博id,微博正文,头条文章url,原始图片url,发布位置,发布时间,发布工具,点赞数,转发数,评论数";
        let (entity, dialect, mapping) = built_in(spider).unwrap();
        assert_eq!(
            (entity, dialect),
            (Entity::Posts, Dialect::WeibospiderPosts)
        );
        assert_eq!(mapping[0], field("mid"));

        // Part of a layout's evidence, or the whole of two: no layout, and no other reader.
        for partial in [
            "用户id,昵称",
            "用户id,昵称,粉丝数",
            &format!("{users},关注者id"),
        ] {
            let claim = MappingFile::built_in().header(&names(partial), "/w/u.csv");
            assert!(matches!(claim, Claim::Partial(_)), "{partial}");
        }
        // None of it: another reader's file (MediaCrawler's notes share only generic names).
        for other in [
            "uid,screen_name",
            "note_id,content,create_time,user_id,nickname",
        ] {
            let claim = MappingFile::built_in().header(&names(other), "/w/u.csv");
            assert!(matches!(claim, Claim::None), "{other}");
        }
    }

    #[test]
    fn conversions_read_times_bids_and_refuse_lossy_ids() {
        let e = Entity::Posts;
        let (mid, at) = (
            e.field_index("mid").unwrap(),
            e.field_index("created_at").unwrap(),
        );
        let mut r = RawRecord::new(e);
        r.set_index(mid, "NuD3W001j");
        r.set_index(at, "2026年11月29日 19:40");
        let conversions = [
            (mid, Convert::Bid),
            (at, Convert::Time("%Y年%m月%d日 %H:%M".into())),
        ];
        convert(&mut r, &conversions).unwrap();
        assert_eq!(r.get(at), "2026-11-29 19:40:00");
        assert_eq!(
            r.get(mid),
            crate::field_rules::bid_to_mid("NuD3W001j")
                .unwrap()
                .to_string()
        );
        // A time that does not fit is handed on as written (the cleaner rejects it).
        r.set_index(at, "昨天");
        convert(&mut r, &conversions[1..]).unwrap();
        assert_eq!(r.get(at), "昨天");

        let lossy = [(mid, Convert::Lossy)];
        for (value, ok) in [
            ("497300000000009", true),
            ("4973000000000090", false),
            ("4.973E+15", false),
        ] {
            r.set_index(mid, value);
            assert_eq!(convert(&mut r, &lossy).is_ok(), ok, "{value}");
        }
    }

    #[test]
    fn json_records_by_nested_keys() {
        let text = r#"
[[layout]]
name = "fork-comments"
entity = "comments"
evidence = ["comment_id", "author.id"]
[layout.columns]
comment_id = "cid"
"author.id" = "uid"
body = "text"
"#;
        let m = MappingFile::parse(text, "m.toml").unwrap();
        let object: Map<String, Value> =
            serde_json::from_str(r#"{"comment_id": 7, "author": {"id": "42"}, "body": "好"}"#)
                .unwrap();
        let Claim::Read((dialect, entity, Ok(r))) = m.record(&object) else {
            panic!("not read");
        };
        assert_eq!(
            (dialect.name(), entity),
            ("fork-comments", Entity::Comments)
        );
        let field = |f| Entity::Comments.field_index(f).unwrap();
        assert_eq!(
            (
                r.get(field("cid")),
                r.get(field("uid")),
                r.get(field("text"))
            ),
            ("7", "42", "好")
        );
        let partial: Map<String, Value> = serde_json::from_str(r#"{"comment_id": 7}"#).unwrap();
        assert!(matches!(m.record(&partial), Claim::Partial(_)));
    }

    #[test]
    fn a_wrong_mapping_is_refused_with_its_reason() {
        for (text, says) in [
            ("[[layout]]\nname='canonical-csv'\nentity='posts'\nevidence=['a']\n[layout.columns]\na='text'", "built in"),
            ("[[layout]]\nname='x'\nentity='tweets'\nevidence=['a']\n[layout.columns]\na='text'", "no entity"),
            ("[[layout]]\nname='x'\nentity='posts'\nevidence=['a']\n[layout.columns]\na='texts'", "no field"),
            ("[[layout]]\nname='x'\nentity='posts'\nevidence=['a']\n[layout.columns]\na={field='text',time='%Y'}", "a time for no time"),
            ("[[layout]]\nname='x'\nentity='posts'\nevidence=['a']\n[layout.columns]\na={field='created_at',time='%Q'}", "no strftime"),
            ("[[layout]]\nname='x'\nentity='follows'\nevidence=['a']\nuid_from_path=true\n[layout.columns]\na='follower'", "no uid"),
            ("[[layout]]\nname='x'\nentity='posts'\nevidence=[]\n[layout.columns]\na='text'", "no evidence"),
        ] {
            let err = MappingFile::parse(text, "m.toml").unwrap_err().to_string();
            assert!(err.contains(says) && err.contains("m.toml"), "{err}");
        }
    }
}

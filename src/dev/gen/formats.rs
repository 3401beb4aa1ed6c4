//! The raw formats `gen` writes, and the files of one output part.
//!
//! Each generated record is rendered in one of the requested formats that can carry it
//! without losing anything the truth counts; records no requested format can carry are
//! written in the canonical format (and counted, so a run can say so). What each crawler
//! format can carry (the shapes themselves are in docs/formats.md):
//!
//! | entity   | canonical | nghuyong | mediacrawler | weibo-crawler | weibospider | aminer |
//! |----------|-----------|----------|--------------|---------------|-------------|--------|
//! | users    | yes | user records | creators | `users.csv` | | |
//! | follows  | yes | follow + fan records | | | | network + uidlist |
//! | posts    | yes | plain tweets | plain notes | crawled accounts | their plain posts | |
//! | comments | yes | 2020 comments (bid) | comments | comments export | | |
//! | reposts  | yes | | | | | |
//!
//! ("plain": neither reposts nor mentions anyone; those links only the canonical format and
//! weibo-crawler record.)
//!
//! weibo-crawler and weiboSpider crawl the timelines of a configured list of accounts into one
//! file per account (`<name>/<uid>.csv`: the rows carry no user id), so only the posts of the
//! [`CRAWLED_ACCOUNTS`] most active authors go to them: weibo-crawler carries reposts (`源微博id`)
//! and mentions (`@用户`); weiboSpider (bid ids, `无`, minute times, its header repeated on every
//! run) carries neither. Left out on purpose: nghuyong's current comment and repost records do
//! not name the post (the cleaner rejects them), and reposts as records of their own are
//! canonical only.
//!
//! Invariants: the choice of format is a pure function of (seed, entity, record index), so
//! a data set is the same bytes for a seed whatever the thread count; a record and its dirty
//! variants go to the same format; every file of a part is committed together or not at all.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::json;

use crate::hdfs::{AtomicFile, FileSystems, Location};

/// A raw format `gen` can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OutFormat {
    Canonical,
    Nghuyong,
    MediaCrawler,
    WeiboCrawler,
    WeiboSpider,
    Aminer,
}

/// Accounts the timeline crawlers (weibo-crawler, weiboSpider) follow: the first user indices
/// among authors, the likeliest to post.
pub const CRAWLED_ACCOUNTS: u64 = 64;

impl OutFormat {
    pub const ALL: [OutFormat; 6] = [
        OutFormat::Canonical,
        OutFormat::Nghuyong,
        OutFormat::MediaCrawler,
        OutFormat::WeiboCrawler,
        OutFormat::WeiboSpider,
        OutFormat::Aminer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OutFormat::Canonical => "canonical",
            OutFormat::Nghuyong => "nghuyong",
            OutFormat::MediaCrawler => "mediacrawler",
            OutFormat::WeiboCrawler => "weibo-crawler",
            OutFormat::WeiboSpider => "weibospider",
            OutFormat::Aminer => "aminer",
        }
    }

    /// The names `--formats` takes.
    pub fn names() -> Vec<&'static str> {
        OutFormat::ALL.iter().map(|f| f.name()).collect()
    }

    pub fn parse(name: &str) -> Option<OutFormat> {
        OutFormat::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether this format has a record kind for `entity` at all.
    pub fn carries(self, entity: &str) -> bool {
        use OutFormat::*;
        matches!(
            (self, entity),
            (Canonical, _)
                | (Nghuyong, "users" | "follows" | "posts" | "comments")
                | (MediaCrawler, "users" | "posts" | "comments")
                | (WeiboCrawler, "users" | "posts" | "comments")
                | (WeiboSpider, "posts")
                | (Aminer, "follows")
        )
    }

    /// Whether this format can carry post `p` without losing what the truth counts.
    pub fn carries_post(self, author: u64, reposts: bool, mentions: bool) -> bool {
        let plain = !reposts && !mentions;
        match self {
            OutFormat::Canonical => true,
            OutFormat::Nghuyong | OutFormat::MediaCrawler => plain,
            OutFormat::WeiboCrawler => author < CRAWLED_ACCOUNTS,
            OutFormat::WeiboSpider => plain && author < CRAWLED_ACCOUNTS,
            OutFormat::Aminer => false,
        }
    }

    /// Formats that write one file per crawled account.
    pub fn per_account(self) -> bool {
        matches!(self, OutFormat::WeiboCrawler | OutFormat::WeiboSpider)
    }
}

impl serde::Serialize for OutFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Picks the format of record `index` of `entity` among `formats` (those that carry it).
pub fn pick(formats: &[OutFormat], seed: u64, stream: u64, index: u64) -> OutFormat {
    match formats.len() {
        0 => OutFormat::Canonical,
        1 => formats[0],
        n => {
            // splitmix64: a well-mixed hash, so neighbouring records spread over the formats.
            let x =
                crate::hash::splitmix64(seed ^ stream.wrapping_mul(crate::hash::GOLDEN) ^ index);
            formats[crate::hash::bucket(x, n as u64) as usize]
        }
    }
}

/// Shanghai wall-clock text of epoch seconds.
pub fn shanghai_text(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs + 8 * 3600, 0)
        .unwrap_or_default()
        .naive_utc()
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// A user as generated; counts are text so dirt can put unreadable ones in.
pub struct User<'a> {
    pub uid: i64,
    pub screen_name: &'a str,
    pub male: bool,
    pub province: &'a str,
    pub city: &'a str,
    pub description: &'a str,
    pub verified: bool,
    pub followers: &'a str,
    pub following: &'a str,
    pub statuses: &'a str,
    pub created: i64,
    pub crawl: i64,
}

pub struct Follow {
    pub follower: i64,
    pub followee: i64,
    pub followed_at: Option<i64>,
    pub crawl: i64,
}

/// A post; `mid` and `created` are text so dirt can make them unreadable.
pub struct Post<'a> {
    pub mid: &'a str,
    pub bid: &'a str,
    pub uid: i64,
    /// The retweeted post's bid (weibo-crawler writes it beside the mid).
    pub retweet_bid: &'a str,
    pub created: &'a str,
    pub text: &'a str,
    pub source: &'a str,
    pub attitudes: u64,
    pub topics: &'a str,
    pub at_users: &'a str,
    pub retweet: Option<i64>,
    pub crawl: i64,
}

pub struct Comment<'a> {
    pub cid: i64,
    pub mid: i64,
    pub bid: &'a str,
    pub uid: i64,
    pub screen_name: &'a str,
    pub created: i64,
    pub text: &'a str,
    pub likes: u64,
    pub crawl: i64,
}

fn line(w: &mut dyn Write, value: serde_json::Value) -> io::Result<()> {
    serde_json::to_writer(&mut *w, &value)?;
    w.write_all(b"\n")
}

/// A CSV field, quoted when it must be.
pub(super) fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

const UTF8_BOM: &str = "\u{feff}";

impl User<'_> {
    pub fn write(&self, format: OutFormat, w: &mut dyn Write) -> io::Result<()> {
        let gender = if self.male { "m" } else { "f" };
        match format {
            OutFormat::Nghuyong => {
                let mut o = json!({
                    "_id": self.uid.to_string(),
                    "nick_name": self.screen_name,
                    "verified": self.verified,
                    "description": self.description,
                    "followers_count": count_json(self.followers),
                    "friends_count": count_json(self.following),
                    "statuses_count": count_json(self.statuses),
                    "gender": gender,
                    "location": format!("{} {}", self.province, self.city).trim(),
                    "created_at": shanghai_text(self.created),
                    "crawl_time": self.crawl,
                });
                if self.verified {
                    o["verified_type"] = 0.into();
                }
                line(w, o)
            }
            OutFormat::MediaCrawler => line(
                w,
                json!({
                    "user_id": self.uid.to_string(),
                    "nickname": self.screen_name,
                    "gender": gender,
                    "avatar": "",
                    "desc": self.description,
                    "ip_location": self.province,
                    "follows": self.following,
                    "fans": self.followers,
                    "tag_list": "{}",
                    "last_modify_ts": self.crawl * 1000,
                }),
            ),
            OutFormat::WeiboCrawler => writeln!(
                w,
                "{},{},{},,{},IP属地：{},,,{},,{},{},{},{},https://weibo.com/u/{},,,,,{},{},,",
                self.uid,
                field(self.screen_name),
                if self.male { "男" } else { "女" },
                field(format!("{} {}", self.province, self.city).trim()),
                self.province,
                &shanghai_text(self.created)[..10],
                field(self.statuses),
                field(self.followers),
                field(self.following),
                field(self.description),
                self.uid,
                if self.verified { "True" } else { "False" },
                if self.verified { "0" } else { "-1" },
            ),
            OutFormat::Canonical | OutFormat::WeiboSpider | OutFormat::Aminer => writeln!(
                w,
                "{},{},{},{},{},{},\"{}\",{},{},{},{},{},{},{}",
                self.uid,
                field(self.screen_name),
                gender,
                self.province,
                self.city,
                format!("{} {}", self.province, self.city).trim(),
                self.description.replace('"', "\"\""),
                self.verified,
                if self.verified { 0 } else { -1 },
                field(self.followers),
                field(self.following),
                field(self.statuses),
                shanghai_text(self.created),
                shanghai_text(self.crawl)
            ),
        }
    }
}

/// A count as JSON: a number when it is one (as the crawler writes it), else the text.
fn count_json(text: &str) -> serde_json::Value {
    text.parse::<u64>()
        .map(Into::into)
        .unwrap_or_else(|_| text.into())
}

impl Follow {
    /// Writes one edge; nghuyong alternates its follow and fan records (`index` parity), whose
    /// fields name the two sides the opposite ways round.
    pub fn write(&self, format: OutFormat, index: u64, w: &mut dyn Write) -> io::Result<()> {
        let (a, b) = (self.follower.to_string(), self.followee.to_string());
        match format {
            OutFormat::Nghuyong if index % 2 == 0 => line(
                w,
                json!({
                    "_id": format!("{a}_{b}"),
                    "fan_id": a,
                    "follower_info": {"_id": b},
                    "crawl_time": self.crawl,
                }),
            ),
            OutFormat::Nghuyong => line(
                w,
                json!({
                    "_id": format!("{b}_{a}"),
                    "follower_id": b,
                    "fan_info": {"_id": a},
                    "crawl_time": self.crawl,
                }),
            ),
            _ => writeln!(
                w,
                "{a},{b},{},{}",
                self.followed_at.map(shanghai_text).unwrap_or_default(),
                shanghai_text(self.crawl)
            ),
        }
    }
}

impl Post<'_> {
    pub fn write(&self, format: OutFormat, w: &mut dyn Write) -> io::Result<()> {
        match format {
            OutFormat::WeiboCrawler => {
                // Ids carry a trailing TAB (so Excel keeps their digits); `日期` has a `T`,
                // `完整日期` (which the reader prefers) a space; originals stop after `是否原创`.
                let iso = self.created.replacen(' ', "T", 1);
                write!(
                    w,
                    "{}\t,{},{},,,,,,{iso},{},{},0,0,{},{},{},False,0,{}",
                    self.mid,
                    self.bid,
                    field(self.text),
                    field(self.source),
                    self.attitudes,
                    field(self.topics),
                    field(self.at_users),
                    self.created,
                    if self.retweet.is_some() {
                        "False"
                    } else {
                        "True"
                    },
                )?;
                if let Some(r) = self.retweet {
                    write!(w, ",,,{r}\t,{},", self.retweet_bid)?;
                }
                writeln!(w)
            }
            OutFormat::WeiboSpider => {
                // Minutes only, `无` for what is missing.
                let minute = self.created.get(..16).unwrap_or(self.created);
                writeln!(
                    w,
                    "{},{},无,无,无,True,无,无,{minute},{},{},0,0",
                    self.bid,
                    field(self.text),
                    field(self.source),
                    self.attitudes
                )
            }
            OutFormat::Nghuyong => line(
                w,
                json!({
                    "_id": self.mid,
                    "mblogid": self.bid,
                    "created_at": self.created,
                    "ip_location": "发布于 北京",
                    "reposts_count": 0,
                    "comments_count": 0,
                    "attitudes_count": self.attitudes,
                    "source": self.source,
                    "content": self.text,
                    "pic_urls": [],
                    "pic_num": 0,
                    "isLongText": false,
                    "user": {"_id": self.uid.to_string()},
                    "crawl_time": self.crawl,
                }),
            ),
            OutFormat::MediaCrawler => {
                // `create_time` is epoch seconds of the same instant (no skew after Jul 2026).
                let epoch =
                    chrono::NaiveDateTime::parse_from_str(self.created, "%Y-%m-%d %H:%M:%S")
                        .map(|t| (t.and_utc().timestamp() - 8 * 3600).to_string())
                        .unwrap_or_else(|_| self.created.to_string());
                line(
                    w,
                    json!({
                        "note_id": self.mid,
                        "content": self.text,
                        "create_time": epoch,
                        "create_date_time": format!("{}+08:00", self.created),
                        "liked_count": self.attitudes.to_string(),
                        "comments_count": "0",
                        "shared_count": "0",
                        "last_modify_ts": self.crawl * 1000,
                        // The url keeps the whole mid where a spreadsheet mangled the id.
                        "note_url": format!(
                            "https://m.weibo.cn/detail/{}",
                            crate::field_rules::bid_to_mid(self.bid)
                                .map_or_else(|_| self.mid.to_string(), |m| m.to_string())
                        ),
                        "ip_location": "发布于 北京",
                        "user_id": self.uid.to_string(),
                        "source_keyword": self.topics,
                    }),
                )
            }
            _ => line(
                w,
                json!({
                    "mid": self.mid,
                    "bid": self.bid,
                    "uid": self.uid.to_string(),
                    "created_at": self.created,
                    "text": self.text,
                    "source": self.source,
                    "reposts_count": "0",
                    "comments_count": "0",
                    "attitudes_count": self.attitudes.to_string(),
                    "topics": self.topics,
                    "at_users": self.at_users,
                    "pics": "",
                    "retweet_mid": self.retweet.map(|r| r.to_string()).unwrap_or_default(),
                    "crawl_time": shanghai_text(self.crawl),
                }),
            ),
        }
    }
}

impl Comment<'_> {
    pub fn write(&self, format: OutFormat, w: &mut dyn Write) -> io::Result<()> {
        let created = shanghai_text(self.created);
        match format {
            OutFormat::Nghuyong => line(
                w,
                json!({
                    "_id": format!("C_{}", self.cid),
                    "weibo_id": self.bid,
                    "comment_user_id": self.uid.to_string(),
                    "content": self.text,
                    "like_num": self.likes,
                    "created_at": created,
                    "crawl_time": self.crawl,
                }),
            ),
            OutFormat::MediaCrawler => line(
                w,
                json!({
                    "comment_id": self.cid.to_string(),
                    "create_time": self.created,
                    "create_date_time": format!("{created}+08:00"),
                    "note_id": self.mid.to_string(),
                    "content": self.text,
                    "sub_comment_count": "0",
                    "comment_like_count": self.likes.to_string(),
                    "last_modify_ts": self.crawl * 1000,
                    "ip_location": "来自北京",
                    "parent_comment_id": "0",
                    "user_id": self.uid.to_string(),
                    "nickname": self.screen_name,
                }),
            ),
            OutFormat::WeiboCrawler => writeln!(
                w,
                "{},{},{created},{},{},,{}",
                self.cid,
                self.mid,
                field(self.screen_name),
                field(self.text),
                self.likes
            ),
            _ => writeln!(
                w,
                "{},{},{},{created},{},{},,{}",
                self.cid,
                self.mid,
                self.uid,
                field(self.text),
                self.likes,
                shanghai_text(self.crawl)
            ),
        }
    }
}

/// One AMiner arc as generated: user indices, and whether the reverse arc is in the same file.
pub struct NetworkArc {
    pub follower: u64,
    pub followee: u64,
    pub reciprocal: bool,
}

/// Writes `weibo_network.txt` (0-based internal ids, a line for every id so the base reads
/// right) and its `uidlist.txt` for the arcs of one part, which come grouped by follower.
pub fn write_aminer(
    arcs: &[NetworkArc],
    uid: impl Fn(u64) -> i64,
    network: &mut dyn Write,
    uidlist: &mut dyn Write,
) -> io::Result<()> {
    let mut users: Vec<u64> = arcs.iter().flat_map(|a| [a.follower, a.followee]).collect();
    users.sort_unstable();
    users.dedup();
    let internal = |u: u64| users.binary_search(&u).expect("listed");
    for &u in &users {
        writeln!(uidlist, "{}", uid(u))?;
    }
    writeln!(network, "{} {}", users.len(), arcs.len())?;
    let mut by_follower: BTreeMap<usize, Vec<&NetworkArc>> = BTreeMap::new();
    for a in arcs {
        by_follower.entry(internal(a.follower)).or_default().push(a);
    }
    for id in 0..users.len() {
        let out = by_follower.get(&id).map(Vec::as_slice).unwrap_or_default();
        write!(network, "{id} {}", out.len())?;
        for a in out {
            write!(
                network,
                " {} {}",
                internal(a.followee),
                u8::from(a.reciprocal)
            )?;
        }
        writeln!(network)?;
    }
    Ok(())
}

/// The files of one output part of one entity, opened on first use (with their header) and
/// committed together.
pub struct PartFiles<'a> {
    fs: &'a FileSystems,
    dir: &'a Location,
    entity: &'static str,
    part: u64,
    date: &'a str,
    open: BTreeMap<(OutFormat, String), (AtomicFile, u64)>,
    /// Records written per format (dirty variants included).
    pub records: BTreeMap<OutFormat, u64>,
}

impl<'a> PartFiles<'a> {
    pub fn new(
        fs: &'a FileSystems,
        dir: &'a Location,
        entity: &'static str,
        part: u64,
        date: &'a str,
    ) -> Self {
        PartFiles {
            fs,
            dir,
            entity,
            part,
            date,
            open: BTreeMap::new(),
            records: BTreeMap::new(),
        }
    }

    /// The writer for `format`'s file of this part, counting one record.
    pub fn record(&mut self, format: OutFormat) -> io::Result<&mut dyn Write> {
        self.record_in(format, "")
    }

    /// The writer for file `name` of `format` (an account's `<name>/<uid>.csv` for the
    /// timeline crawlers), counting one record.
    pub fn record_in(&mut self, format: OutFormat, name: &str) -> io::Result<&mut dyn Write> {
        *self.records.entry(format).or_default() += 1;
        let (file, records) = self.open_file(format, name)?;
        *records += 1;
        Ok(file)
    }

    /// Records written so far to file `name` of `format`.
    pub fn file_records(&self, format: OutFormat, name: &str) -> u64 {
        self.open
            .get(&(format, name.to_string()))
            .map_or(0, |(_, n)| *n)
    }

    /// The file `name` of `format` in this part (`""`: the format's only file).
    pub fn file(&mut self, format: OutFormat, name: &str) -> io::Result<&mut dyn Write> {
        Ok(self.open_file(format, name)?.0)
    }

    fn open_file(
        &mut self,
        format: OutFormat,
        name: &str,
    ) -> io::Result<(&mut AtomicFile, &mut u64)> {
        let key = (format, name.to_string());
        if !self.open.contains_key(&key) {
            let location = self.location(format, name);
            let mut file = self.fs.create_atomic(&location).map_err(io::Error::other)?;
            if let Some(header) = header(format, self.entity) {
                // dataabc's crawlers write `utf-8-sig`.
                if matches!(format, OutFormat::WeiboCrawler | OutFormat::WeiboSpider) {
                    file.write_all(UTF8_BOM.as_bytes())?;
                }
                file.write_all(header.as_bytes())?;
            }
            self.open.insert(key.clone(), (file, 0));
        }
        let (file, n) = self.open.get_mut(&key).expect("just opened");
        Ok((file, n))
    }

    fn location(&self, format: OutFormat, name: &str) -> Location {
        let (entity, part, date) = (self.entity, self.part, self.date);
        let spider = |s: &str| format!("{s}_{date}_{part:05}.jsonl");
        let file = match format {
            OutFormat::Canonical => {
                let ext = if entity == "posts" { "jsonl" } else { "csv" };
                return self.dir.join(&format!("{entity}-{part:05}.{ext}"));
            }
            OutFormat::Nghuyong => spider(match entity {
                "users" => "user",
                "follows" => "follow",
                "posts" => "tweet",
                _ => "comment",
            }),
            OutFormat::MediaCrawler => spider(match entity {
                "users" => "creator_creators",
                "posts" => "search_contents",
                _ => "search_comments",
            }),
            OutFormat::WeiboCrawler | OutFormat::WeiboSpider if entity == "posts" => {
                return self
                    .dir
                    .join(&format!("{}-{part:05}", format.name()))
                    .join(name);
            }
            OutFormat::WeiboCrawler | OutFormat::WeiboSpider => format!("{entity}_{part:05}.csv"),
            OutFormat::Aminer => {
                return self.dir.join(&format!("aminer-{part:05}")).join(name);
            }
        };
        self.dir.join(format.name()).join(&file)
    }

    pub fn commit(self) -> crate::error::Result<()> {
        for (_, (file, _)) in self.open {
            file.commit()?;
        }
        Ok(())
    }
}

/// The header a new file of `format` for `entity` starts with (after a BOM for dataabc's).
pub fn header(format: OutFormat, entity: &str) -> Option<&'static str> {
    match (format, entity) {
        (OutFormat::Canonical, "users") => Some("uid,screen_name,gender,province,city,location,description,verified,verified_type,followers_count,follow_count,statuses_count,created_at,crawl_time\n"),
        (OutFormat::Canonical, "follows") => Some("follower,followee,followed_at,crawl_time\n"),
        (OutFormat::Canonical, "comments") => Some("cid,mid,uid,created_at,text,like_count,reply_to_cid,crawl_time\n"),
        (OutFormat::Canonical, "reposts") => Some("mid,uid,retweet_mid,created_at,text,crawl_time\n"),
        (OutFormat::WeiboCrawler, "users") => Some("用户id,昵称,性别,生日,所在地,IP属地,学习经历,公司,注册时间,阳光信用,微博数,粉丝数,关注数,简介,主页,头像,高清头像,微博等级,会员等级,是否认证,认证类型,认证信息,上次记录微博信息\n"),
        (OutFormat::WeiboCrawler, "posts") => Some("id,bid,正文,头条文章url,原始图片url,视频url,Live Photo视频url,位置,日期,工具,点赞数,评论数,转发数,话题,@用户,完整日期,是否编辑过,编辑次数,是否原创,源用户id,源用户昵称,源微博id,源微博bid,源微博正文\n"),
        (OutFormat::WeiboCrawler, "comments") => Some("id,weibo_id,created_at,user_screen_name,text,pic_url,like_count\n"),
        (OutFormat::WeiboSpider, "posts") => Some("微博id,微博正文,头条文章url,原始图片url,被转发微博原始图片url,是否为原创微博,微博视频url,发布位置,发布时间,发布工具,点赞数,转发数,评论数\n"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_is_stable_and_spreads() {
        let formats = [OutFormat::Canonical, OutFormat::Nghuyong, OutFormat::Aminer];
        let mut seen = BTreeMap::new();
        for i in 0..3_000 {
            let f = pick(&formats, 7, 11, i);
            assert_eq!(f, pick(&formats, 7, 11, i));
            *seen.entry(f).or_insert(0) += 1;
        }
        assert_eq!(seen.len(), 3);
        assert!(seen.values().all(|&n| n > 800), "{seen:?}");
        assert_eq!(pick(&[], 1, 1, 1), OutFormat::Canonical);
    }

    #[test]
    fn aminer_lists_every_internal_id_in_order() {
        let arcs = [
            NetworkArc {
                follower: 9,
                followee: 4,
                reciprocal: true,
            },
            NetworkArc {
                follower: 4,
                followee: 9,
                reciprocal: true,
            },
            NetworkArc {
                follower: 9,
                followee: 2,
                reciprocal: false,
            },
        ];
        let (mut net, mut list) = (Vec::new(), Vec::new());
        write_aminer(&arcs, |u| 100 + u as i64, &mut net, &mut list).unwrap();
        assert_eq!(String::from_utf8(list).unwrap(), "102\n104\n109\n");
        assert_eq!(
            String::from_utf8(net).unwrap(),
            "3 3\n0 0\n1 1 2 1\n2 2 1 1 0 0\n"
        );
    }
}

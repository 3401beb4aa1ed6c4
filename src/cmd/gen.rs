//! `weibo-etl gen`: synthetic Weibo data at any scale, with `truth.json`.

use anyhow::Result;
use weibo_etl::dev::gen::formats::OutFormat;
use weibo_etl::dev::gen::{self, GenSpec};
use weibo_etl::report::Report;

use super::Context;

const EXAMPLES: &str = "\
Examples:
  weibo-etl gen --out /tmp/weibo-tiny --preset tiny
  weibo-etl gen --out hdfs:///weibo/raw/dt=2026-11-29 --preset small --seed 7
  weibo-etl gen --out data/paper --preset paper --noise 0
  weibo-etl gen --out data/users1g --users 1100000 --part-rows 100000000   # one ~1 GB users CSV
  weibo-etl gen --out hdfs:///weibo/raw --nights 30 --preset small --date 2026-11-01

Presets: tiny (200 users, for tests), small (100,000 users), paper (7,489,707 users,
21,105,470 follows, 4,067,183 posts, 32,958,308 user-post edges). --users N scales the paper's
ratios to N users. Output: <out>/{users,follows,comments,reposts}/*.csv, <out>/posts/*.jsonl (the
canonical raw format) and <out>/_truth.json: what clean and friends must report (the leading _
keeps it out of the data, as Hadoop does with _SUCCESS).

Formats: with --formats, records are spread over the chosen crawler formats, each under
<out>/<entity>/<format>/ (AMiner: <out>/follows/aminer-NNNNN/{weibo_network.txt,uidlist.txt}):
users as nghuyong user records, MediaCrawler creators or weibo-crawler users.csv; follows as
nghuyong follow/fan records or AMiner arcs; posts that neither repost nor mention as nghuyong
tweets or MediaCrawler notes, and the posts of the 64 most active authors (the accounts a
timeline crawler follows) as weibo-crawler or weiboSpider files, one per account
(<out>/posts/<format>-NNNNN/<name>/<uid>.csv; weiboSpider only those that neither repost nor
mention); comments as nghuyong 2020 comments, MediaCrawler comments or the weibo-crawler
export. Other posts, and reposts as records of their own, stay canonical. The truth is the same
whatever the formats; _truth.json says how many records went to each.
  weibo-etl gen --out /tmp/mixed --preset tiny --formats canonical,nghuyong,mediacrawler,weibo-crawler,weibospider,aminer

Nights: --nights N writes <out>/dt=<date>/ for N days from --date, each a night's increment in
the canonical format (tiny: 40 users, 180 follows, 45 posts, 60 comments a night; small and
paper: their data set spread over 7 days), 10 % of it earlier records crawled again, and
<out>/dt=<date>/_truth.json: the union so far, friend pairs, and an MD5 over every counter
(u <uid> <followers> <following> <posts> <reposts_received> <comments_received> <friends> by
uid, then p <mid> <reposts> <comments> by mid, one line each); up to 20,000 users it lists
every counter too.";

/// Generate realistic synthetic Weibo data (power-law follows, ~30 % reciprocity, zombies,
/// repost chains, mentions, comments) with dirt at a controlled rate and its ground truth.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Folder to write into (local or hdfs://)
    #[arg(long, value_name = "URL")]
    out: String,
    /// Preset sizes: tiny, small or paper
    #[arg(long, conflicts_with = "users", value_parser = ["tiny", "small", "paper"])]
    preset: Option<String>,
    /// Users, with the paper's ratios for everything else
    #[arg(long)]
    users: Option<u64>,
    /// Random seed: the same seed gives the same bytes
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Share of extra dirty records per entity (duplicates, unreadable counts and times,
    /// lossy ids, self-follows)
    #[arg(long, default_value_t = 0.01)]
    noise: f64,
    /// Days the posts are spread over, ending on --date
    #[arg(long, default_value_t = 7)]
    days: u32,
    /// The run date, YYYY-MM-DD (Asia/Shanghai)
    #[arg(long, default_value = "2026-11-29")]
    date: String,
    /// Rows per output file
    #[arg(long, default_value_t = 1_000_000)]
    part_rows: u64,
    /// Write only these entities (comma-separated: users,follows,posts,comments,reposts)
    #[arg(long, value_delimiter = ',', value_parser = ["users", "follows", "posts", "comments", "reposts"])]
    only: Vec<String>,
    /// Raw formats to write (comma-separated: canonical, nghuyong, mediacrawler,
    /// weibo-crawler, weibospider, aminer). Each record goes to one of those that can carry it without
    /// losing what the truth counts; the rest stay canonical. See "Formats" below
    #[arg(long, value_delimiter = ',', default_value = "canonical",
          value_parser = clap::builder::PossibleValuesParser::new(OutFormat::names()))]
    formats: Vec<String>,
    /// Consecutive nights of raw increments instead of one data set: <out>/dt=<night>/ from
    /// --date on, at the preset's daily volume (new and re-crawled users, follows and posts,
    /// new comments), each with _truth.json, the counters after that night (see "Nights")
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=3650),
          conflicts_with_all = ["users", "noise", "days", "part_rows", "only", "formats"])]
    nights: Option<u32>,
}

pub fn run(ctx: &Context, args: Args) -> Result<()> {
    if let Some(n) = args.nights {
        return nights(ctx, &args, n);
    }
    let mut spec = match (&args.preset, args.users) {
        (Some(p), _) => GenSpec::preset(p).expect("validated by clap"),
        (None, Some(n)) => GenSpec::scaled(n),
        (None, None) => anyhow::bail!(weibo_etl::Error::Usage("give --preset or --users".into())),
    };
    spec.seed = args.seed;
    spec.noise = args.noise;
    spec.days = args.days;
    spec.date = args.date;
    spec.part_rows = args.part_rows;
    spec.only = args.only;
    spec.formats = args
        .formats
        .iter()
        .filter_map(|f| OutFormat::parse(f))
        .collect();
    let out = ctx.fs.parse(&args.out)?;
    let mut report = Report::new("gen");
    let truth = gen::generate(&ctx.fs, &out, &spec)?;
    for (entity, t) in &truth.entities {
        eprintln!(
            "{entity:<9} records {:>10}  clean {:>10}  rejected {:>7}  duplicates {:>7}",
            t.records_in,
            t.records_out,
            t.rejected.values().sum::<u64>(),
            t.duplicates
        );
    }
    eprintln!(
        "friend pairs {}, reciprocity {:.3}, user-post edges {}; truth in {}",
        truth.friend_pairs,
        truth.reciprocity,
        truth.user_post_edges,
        out.join("_truth.json")
    );
    report.set("truth", &truth);
    ctx.finish_report(&report, None)
}

/// `--nights N`: consecutive nights of increments with their cumulative truth.
fn nights(ctx: &Context, args: &Args, n: u32) -> Result<()> {
    let preset = args.preset.as_deref().unwrap_or("tiny");
    let spec = weibo_etl::dev::gen::nights::NightsSpec {
        nights: n,
        first: args.date.clone(),
        seed: args.seed,
        ..weibo_etl::dev::gen::nights::NightsSpec::preset(preset).expect("validated by clap")
    };
    let out = ctx.fs.parse(&args.out)?;
    let mut report = Report::new("gen");
    let truths = weibo_etl::dev::gen::nights::generate(&ctx.fs, &out, &spec)?;
    for t in &truths {
        eprintln!(
            "{}: {} users, {} follows, {} posts, {} comments in the night; {} friend pairs so far",
            t.date,
            t.night_records["users"],
            t.night_records["follows"],
            t.night_records["posts"],
            t.night_records["comments"],
            t.friend_pairs
        );
    }
    report.set("nights", &spec);
    ctx.finish_report(&report, None)
}

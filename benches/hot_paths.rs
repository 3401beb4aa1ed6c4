//! Criterion benches of the hot paths: raw parsing, time normalisation, text cleaning, rowkey
//! encoding and friend grouping. `cargo bench --bench hot_paths`.

use std::hint::black_box;
use std::io::Cursor;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use weibo_etl::field_rules::{clean_text, parse_count, parse_time};
use weibo_etl::graph::friends::mutual_pairs_of;
use weibo_etl::hbase::layout::keys;
use weibo_etl::raw::canonical::read_csv;

const CRAWL: i64 = 1_795_964_400_000;

fn users_csv(rows: usize) -> Vec<u8> {
    let mut s = String::from("uid,screen_name,gender,province,city,location,description,verified,verified_type,followers_count,follow_count,statuses_count,created_at,crawl_time\n");
    for i in 0..rows {
        s.push_str(&format!(
            "{},用户{i},m,北京,海淀,北京 海淀,\"热爱生活，喜欢旅行和摄影，数据工程师，每天进步一点点\",false,-1,1.2万,{},{},2018-05-05 10:00:00,2026-11-29 20:00:00\n",
            1_000_000_000 + i,
            i % 500,
            i % 90
        ));
    }
    s.into_bytes()
}

fn parsing(c: &mut Criterion) {
    let data = users_csv(10_000);
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("canonical_csv_users", |b| {
        b.iter(|| {
            let mut n = 0usize;
            read_csv(
                Box::new(Cursor::new(data.clone())),
                "users.csv",
                &weibo_etl::raw::mapping_file::NONE,
                &mut |_| n += 1,
            )
            .unwrap();
            black_box(n)
        })
    });
    g.finish();
}

fn values(c: &mut Criterion) {
    let mut g = c.benchmark_group("values");
    let times = [
        "2026-11-29 21:00:00",
        "Sun Nov 29 21:00:00 +0800 2026",
        "3小时前",
        "昨天 21:15",
        "11月27日 18:00",
    ];
    g.throughput(Throughput::Elements(times.len() as u64));
    g.bench_function("parse_time_mixed", |b| {
        b.iter(|| {
            times
                .iter()
                .map(|t| parse_time(black_box(t), CRAWL).unwrap())
                .sum::<i64>()
        })
    });
    g.bench_function("parse_count", |b| {
        b.iter(|| parse_count(black_box("1.2万")).unwrap())
    });
    let text = "热爱生活，喜欢旅行和摄影，数据工程师，每天进步一点点。".repeat(20);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("clean_text_plain_1kb", |b| {
        b.iter(|| clean_text(black_box(&text)))
    });
    // Most text fields are short (names, places): all tail, no whole block.
    let fields = [
        "用户0000001",
        "北京 海淀",
        "数据工程师",
        "Weibo_fan_42",
        "广东 深圳",
    ];
    g.throughput(Throughput::Bytes(
        fields.iter().map(|f| f.len() as u64).sum(),
    ));
    g.bench_function("clean_text_plain_short_fields", |b| {
        b.iter(|| {
            for f in fields {
                black_box(clean_text(black_box(f)));
            }
        })
    });
    g.finish();
}

fn rowkeys(c: &mut Criterion) {
    let mut g = c.benchmark_group("rowkeys");
    g.throughput(Throughput::Elements(1));
    g.bench_function("user_key", |b| {
        b.iter(|| keys::user_key(black_box(1_669_879_400)))
    });
    g.bench_function("post_key", |b| {
        b.iter(|| {
            keys::post_key(
                black_box(1_669_879_400),
                black_box(CRAWL),
                black_box(4_973_000_000_000_001),
            )
        })
    });
    g.finish();
}

fn friends(c: &mut Criterion) {
    // 1 M edges over 100 k users, about a third answered.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut follower, mut followee, mut at) = (Vec::new(), Vec::new(), Vec::new());
    let mut push = |a: i64, b: i64, t: u64| {
        follower.push(a);
        followee.push(b);
        // Most follow times known, in whole seconds, as the cleaned data has them.
        at.push((t % 5 != 0).then_some(1_600_000_000_000 + (t % 100_000_000) as i64 * 1000));
    };
    let mut n = 0;
    while n < 1_000_000 {
        let (a, b) = ((next() % 100_000) as i64 + 1, (next() % 100_000) as i64 + 1);
        if a != b {
            push(a, b, next());
            n += 1;
            if next() % 3 == 0 {
                push(b, a, next());
                n += 1;
            }
        }
    }
    let mut g = c.benchmark_group("friends");
    g.sample_size(10);
    g.throughput(Throughput::Elements(follower.len() as u64));
    // The job's own in-memory core: pack to 12-byte edges, parallel sort, one scan with since.
    g.bench_function("pack_sort_scan_1m_edges", |b| {
        b.iter(|| black_box(mutual_pairs_of(&follower, &followee, &at).len()))
    });
    g.finish();
}

criterion_group!(benches, parsing, values, rowkeys, friends);
criterion_main!(benches);

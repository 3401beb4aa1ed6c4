#!/usr/bin/env python3
"""Inbox peer: the home feeds as DuckDB window queries over the cleaned Parquet.

    duckdb_inbox.py CLEAN_ROOT DATE K THRESHOLD OUT.csv [FEED_UIDS FEED_LIMIT FEEDS.csv]

Reads every committed night (dt=<night>/ with _SUCCESS) of CLEAN_ROOT's follows and posts up
to DATE and computes what docs/design/inbox.md defines: each mid's newest night's record,
without deleted posts or posts without author; each author's newest K (`row_number() over
(partition by uid order by created_at desc, mid)`); for every distinct follow edge to an author
with at most THRESHOLD fans, those K. Writes OUT.csv (`uid,followee,mid`, sorted; or, when
OUT ends with .parquet, a Parquet file as `inbox` writes, unsorted) and, given
FEED_UIDS (comma-separated), FEEDS.csv (`uid,rank,mid`): each user's feed, the newest K of
every followee, celebrities included, merged newest first, at most FEED_LIMIT. Prints one JSON
line: peer, job, rows, seconds, peak_rss_mb, and with OUT.csv (untimed) how the distinct edges
are served, under the inbox report's names.
"""
import json
import os
import resource
import sys
import time

import duckdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from duckdb_rank import nights, union  # noqa: E402  (the same reading of the nights)


def main(argv):
    if len(argv) not in (5, 8):
        sys.exit(__doc__)
    clean, date, k, threshold, target = argv[:5]
    k, threshold = int(k), int(threshold)
    db = duckdb.connect()
    db.execute("SET threads = 2")
    db.execute("SET TimeZone = 'UTC'")
    started = time.perf_counter()
    follows = union(nights(clean, "follows", date), "follower, followee")
    posts = union(nights(clean, "posts", date), "mid, uid, created_at, is_deleted")
    if not follows or not posts:
        sys.exit(f"no committed follows or posts under {clean} up to {date}")
    db.execute(f"CREATE TEMP TABLE edges AS SELECT DISTINCT follower, followee FROM ({follows})")
    db.execute(f"""
        CREATE TEMP TABLE newest AS
        SELECT uid, mid, epoch_ms(CAST(created_at AS TIMESTAMP)) AS created FROM (
            SELECT *, row_number() OVER (PARTITION BY uid ORDER BY created_at DESC, mid) AS r
            FROM (
                SELECT * FROM (
                    SELECT *, row_number() OVER (PARTITION BY mid ORDER BY night DESC) AS n
                    FROM ({posts}))
                WHERE n = 1 AND uid IS NOT NULL AND created_at IS NOT NULL
                  AND NOT coalesce(is_deleted, false)))
        WHERE r <= {k}""")
    db.execute("CREATE TEMP TABLE fans AS SELECT followee, count(*) AS n FROM edges GROUP BY followee")
    entries = f"""
        SELECT e.follower AS uid, e.followee, p.mid, p.created
        FROM edges e JOIN fans f USING (followee) JOIN newest p ON p.uid = e.followee
        WHERE f.n <= {threshold}"""
    if target.endswith(".parquet"):
        db.execute(f"COPY ({entries}) TO '{target}' (FORMAT parquet, COMPRESSION zstd)")
        rows = db.execute(f"SELECT count(*) FROM read_parquet('{target}')").fetchone()[0]
    else:
        found = db.execute(f"SELECT uid, followee, mid FROM ({entries}) ORDER BY 1, 2, 3").fetchall()
        rows = len(found)
        with open(target, "w") as out:
            out.write("uid,followee,mid\n")
            for r in found:
                out.write(f"{r[0]},{r[1]},{r[2]}\n")
    if len(argv) == 8:
        uids = [int(u) for u in argv[5].split(",") if u]
        limit = int(argv[6])
        with open(argv[7], "w") as out:
            out.write("uid,rank,mid\n")
            for uid in uids:
                feed = db.execute(f"""
                    SELECT p.mid FROM edges e JOIN newest p ON p.uid = e.followee
                    WHERE e.follower = {uid}
                    ORDER BY p.created DESC, p.mid LIMIT {limit}""").fetchall()
                for rank, (mid,) in enumerate(feed, 1):
                    out.write(f"{uid},{rank},{mid}\n")
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"peer": "duckdb", "job": "inbox", "rows": rows,
              "seconds": round(elapsed, 3), "peak_rss_mb": round(peak, 1)}
    if not target.endswith(".parquet"):
        # For the tests, not timed: how the distinct edges are served. A followee with no
        # post to serve is neither fanned out nor a celebrity.
        row = db.execute(f"""
            SELECT count(*),
                   count(*) FILTER (WHERE p.uid IS NOT NULL AND f.n <= {threshold}),
                   count(*) FILTER (WHERE p.uid IS NOT NULL AND f.n > {threshold}),
                   count(*) FILTER (WHERE p.uid IS NULL),
                   count(DISTINCT e.followee) FILTER (WHERE p.uid IS NOT NULL AND f.n > {threshold})
            FROM edges e JOIN fans f USING (followee)
            LEFT JOIN (SELECT DISTINCT uid FROM newest) p ON p.uid = e.followee""").fetchone()
        keys = ["edges", "edges_fanned_out", "edges_to_celebrities", "edges_without_posts",
                "celebrities_skipped"]
        result["edges"] = dict(zip(keys, row))
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])

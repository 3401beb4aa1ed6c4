#!/usr/bin/env python3
"""Rank peer: the day's leaderboards as DuckDB window queries over the cleaned Parquet.

    duckdb_rank.py CLEAN_ROOT FRIENDS_OUTPUT DATE TOP OUT.csv [THREADS [MEMORY_LIMIT]]

Reads every committed night (dt=<night>/ with _SUCCESS) of CLEAN_ROOT up to DATE and the
friend counts of FRIENDS_OUTPUT/friend_counts/dt=DATE (or its slice=*/ folders), computes the
metrics as docs/design/rank.md defines them, and ranks each with
`row_number() over (partition by metric order by value desc, id)`. Writes OUT.csv
(`metric,rank,id,value`, by metric and rank) and prints one JSON line: peer, job, rows,
seconds, peak_rss_mb, threads.
"""
import datetime
import json
import os
import resource
import sys
import time

import duckdb

DAY_MS = 86_400_000
SHANGHAI_MS = 8 * 3_600_000


def sql_text(value):
    """A SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def day_number(date):
    return (datetime.date.fromisoformat(date) - datetime.date(1970, 1, 1)).days


def committed_parts(folder):
    if not os.path.exists(os.path.join(folder, "_SUCCESS")):
        return []
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".parquet"))


def nights(root, entity, date):
    """(day number, part files) of each committed night up to date, oldest first."""
    base = os.path.join(root, entity)
    found = []
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if not name.startswith("dt="):
            continue
        night = name[3:]
        try:
            day = day_number(night)
        except ValueError:
            continue
        files = committed_parts(os.path.join(base, name))
        if night <= date and files:
            found.append((day, files))
    return found


def union(entity_nights, columns):
    """One relation over every night's files, with the night's day number as `night`."""
    parts = [
        f"SELECT {columns}, {day} AS night FROM read_parquet([{', '.join(map(sql_text, files))}])"
        for day, files in entity_nights
    ]
    if not parts:
        return None
    return " UNION ALL ".join(parts)


def day_of(column):
    """The Asia/Shanghai day number of a timestamp column."""
    return f"CAST(floor((epoch_ms(CAST({column} AS TIMESTAMP)) + {SHANGHAI_MS}) / {DAY_MS}) AS INTEGER)"


def main(argv):
    if len(argv) not in (5, 6, 7):
        sys.exit(__doc__)
    clean, friends_out, date, top, target = argv[:5]
    threads = int(argv[5]) if len(argv) > 5 else 2
    top = int(top)
    today = day_number(date)

    db = duckdb.connect()
    db.execute(f"SET threads = {threads}")
    db.execute("SET TimeZone = 'UTC'")
    if len(argv) > 6:
        db.execute(f"SET memory_limit = {sql_text(argv[6])}")

    boards = []
    follows = union(nights(clean, "follows", date), "follower, followee, followed_at")
    if follows:
        db.execute(f"""
            CREATE TEMP VIEW pairs AS
            SELECT followee AS id, follower,
                   min(least(coalesce({day_of('followed_at')}, night), night)) AS first
            FROM ({follows}) GROUP BY followee, follower""")
        boards.append("SELECT 'followers' AS metric, id, count(*) AS value FROM pairs GROUP BY id")
        boards.append(f"SELECT 'new_fans', id, count(*) FROM pairs WHERE first = {today} GROUP BY id")
    posts = union(nights(clean, "posts", date), "mid, uid, retweet_mid, created_at")
    if posts:
        # Each mid's newest night's record.
        db.execute(f"""
            CREATE TEMP VIEW p AS
            SELECT mid, uid, retweet_mid, {day_of('created_at')} AS d FROM (
                SELECT *, row_number() OVER (PARTITION BY mid ORDER BY night DESC) AS k
                FROM ({posts})) WHERE k = 1""")
        boards.append(f"SELECT 'posts', uid, count(*) FROM p WHERE d = {today} AND uid IS NOT NULL GROUP BY uid")
        boards.append(f"""
            SELECT 'reposts_received', t.uid, count(*) FROM p r JOIN p t ON t.mid = r.retweet_mid
            WHERE r.d = {today} AND t.uid IS NOT NULL GROUP BY t.uid""")
        comments = union(nights(clean, "comments", date), "cid, mid, created_at")
        if comments:
            db.execute(f"""
                CREATE TEMP VIEW c AS
                SELECT cid, mid, {day_of('created_at')} AS d FROM (
                    SELECT *, row_number() OVER (PARTITION BY cid ORDER BY night DESC) AS k
                    FROM ({comments})) WHERE k = 1""")
            boards.append(f"""
                SELECT 'comments_received', t.uid, count(*) FROM c JOIN p t ON t.mid = c.mid
                WHERE c.d = {today} AND t.uid IS NOT NULL GROUP BY t.uid""")
    counts = os.path.join(friends_out, "friend_counts", f"dt={date}")
    files = committed_parts(counts)
    if not files and os.path.isdir(counts):
        for name in sorted(os.listdir(counts)):
            if name.startswith("slice="):
                files += committed_parts(os.path.join(counts, name))
    if files:
        listed = ", ".join(map(sql_text, files))
        boards.append(f"SELECT 'friends', uid, sum(friends) FROM read_parquet([{listed}]) GROUP BY uid")

    query = f"""
        SELECT metric, rank, id, value FROM (
            SELECT metric, id, value,
                   row_number() OVER (PARTITION BY metric ORDER BY value DESC, id) AS rank
            FROM ({' UNION ALL '.join(boards)}) WHERE value > 0)
        WHERE rank <= {top} ORDER BY metric, rank"""
    started = time.perf_counter()
    rows = db.execute(query).fetchall()
    elapsed = time.perf_counter() - started
    with open(target, "w") as out:
        out.write("metric,rank,id,value\n")
        for metric, rank, uid, value in rows:
            out.write(f"{metric},{rank},{uid},{value}\n")

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({
        "peer": "duckdb",
        "job": "rank",
        "rows": len(rows),
        "seconds": round(elapsed, 3),
        "peak_rss_mb": round(peak_kib / 1024, 1),
        "threads": threads,
    }))


if __name__ == "__main__":
    main(sys.argv[1:])

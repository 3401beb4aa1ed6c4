#!/usr/bin/env python3
"""Friends peer: mutual follows found by a DuckDB self-join of the follows table.

    duckdb_friends.py FOLLOWS.parquet OUT.parquet [THREADS]

FOLLOWS may be one Parquet file or a glob (`dir/*.parquet`) with int64 columns `follower`
and `followee`. OUT gets one row per mutual pair, columns `uid_a`, `uid_b` with
uid_a < uid_b (self-follows and repeated edges give no extra rows). Prints one JSON line:
peer, job, pairs, seconds, peak_rss_mb, threads.
"""
import json
import resource
import sys
import time

import duckdb


def sql_text(value):
    """A SQL string literal for a path."""
    return "'" + str(value).replace("'", "''") + "'"


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    follows, target = argv[0], argv[1]
    threads = int(argv[2]) if len(argv) == 3 else 2

    db = duckdb.connect()
    db.execute(f"SET threads = {threads}")
    edges = f"read_parquet({sql_text(follows)})"
    query = f"""
        SELECT DISTINCT fwd.follower AS uid_a, fwd.followee AS uid_b
        FROM {edges} AS fwd
        JOIN {edges} AS back
          ON back.follower = fwd.followee AND back.followee = fwd.follower
        WHERE fwd.follower < fwd.followee
    """
    started = time.perf_counter()
    written = db.execute(f"COPY ({query}) TO {sql_text(target)} (FORMAT parquet)").fetchone()[0]
    elapsed = time.perf_counter() - started

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({
        "peer": "duckdb",
        "job": "friends",
        "pairs": int(written),
        "seconds": round(elapsed, 3),
        "peak_rss_mb": round(peak_kib / 1024, 1),
        "threads": threads,
    }))


if __name__ == "__main__":
    main(sys.argv[1:])

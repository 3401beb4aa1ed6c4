#!/usr/bin/env python3
"""Cascades peer doing the whole job: DuckDB reads the `//@` markers itself.

    duckdb_cascades_full.py CLEAN_ROOT DATE OUT_DIR

The same rules as `weibo-etl cascades` (docs/design/cascades.md), in SQL: the newest night's
record of each mid among posts and reposts (a later record without a root removes it); the
first marker's screen name (`regexp_extract`), resolved to the newest night's holder of that
name; the parent is that user's latest repost of the same root made before this one in
(created_at, mid) order (an ASOF join), else the root; then a recursive CTE walks every
repost down from its root (`duckdb_cascades.walk`), giving its depth and its path (uids
from the repost back to the root's author). Writes OUT_DIR/cascades.parquet (`root_mid, size,
depth`) and OUT_DIR/paths.parquet (`mid, depth, path`), and prints one JSON line: peer, job,
rows, seconds, peak_rss_mb.
"""
import json
import os
import resource
import sys
import time

import duckdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from duckdb_cascades import walk  # noqa: E402
from duckdb_rank import nights, union  # noqa: E402

# The first `//@name:` whose name has 1 to 30 characters, none a colon, `@`, `/` or space.
MARKER = r"//@([^:：@/\s]{1,30})[:：]"


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    clean, date, out = argv
    os.makedirs(out, exist_ok=True)
    db = duckdb.connect()
    db.execute("SET threads = 2")
    started = time.perf_counter()
    cols = "mid, uid, created_at, retweet_mid, text"
    posts = union(nights(clean, "posts", date), cols)
    reposts = union(nights(clean, "reposts", date), cols)
    users = union(nights(clean, "users", date), "uid, screen_name")
    # Records of one night: posts before reposts, as the job reads them.
    db.execute(f"""
        CREATE TEMP TABLE latest AS SELECT mid, uid, created_at, retweet_mid, text FROM (
            SELECT *, row_number() OVER (PARTITION BY mid ORDER BY night DESC, ent DESC) AS n
            FROM (SELECT *, 0 AS ent FROM ({posts}) UNION ALL SELECT *, 1 AS ent FROM ({reposts})))
        WHERE n = 1""")
    db.execute("""
        CREATE TEMP TABLE authors AS SELECT mid, uid FROM latest""")
    db.execute(f"""
        CREATE TEMP TABLE names AS SELECT screen_name, uid FROM (
            SELECT *, row_number() OVER (PARTITION BY screen_name ORDER BY night DESC) AS n
            FROM ({users}) WHERE screen_name IS NOT NULL)
        WHERE n = 1""")
    db.execute(f"""
        CREATE TEMP TABLE rp AS
        SELECT r.mid, r.uid, r.retweet_mid AS root_mid, r.created_at,
               row_number() OVER (ORDER BY r.created_at, r.mid) AS ord,
               nm.uid AS named
        FROM latest r
        LEFT JOIN names nm
          ON nm.screen_name = nullif(regexp_extract(r.text, '{MARKER}', 1), '')
        WHERE r.retweet_mid IS NOT NULL AND r.retweet_mid <> r.mid AND r.uid IS NOT NULL""")
    db.execute("""
        CREATE TEMP TABLE edges AS
        SELECT r.mid, r.uid, r.root_mid, coalesce(p.mid, r.root_mid) AS parent_mid
        FROM rp r ASOF LEFT JOIN rp p
          ON p.root_mid = r.root_mid AND p.uid = r.named AND p.ord < r.ord""")
    rows = walk(db, out)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peer": "duckdb", "job": "cascades-full", "rows": rows,
                      "seconds": round(elapsed, 3), "peak_rss_mb": round(peak, 1)}))


if __name__ == "__main__":
    main(sys.argv[1:])

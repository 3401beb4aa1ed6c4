#!/usr/bin/env python3
"""Cascades peer: depth, size and paths by a DuckDB recursive CTE over direct-parent edges.

    duckdb_cascades.py EDGES_DIR CLEAN_ROOT DATE OUT_DIR

DuckDB has no reading of `//@` markers, so it is given the parents: EDGES_DIR holds Parquet
with `mid, uid, root_mid, parent_mid` (the repost_paths that `weibo-etl cascades` wrote, which
is where parents are direct). The posts of CLEAN_ROOT's committed nights up to DATE give the
roots' authors. A recursive CTE walks every repost down from its root, giving its depth and its
path (uids from the repost back to the root's author); the cascades are grouped from it.
Writes OUT_DIR/cascades.parquet (`root_mid, size, depth`) and OUT_DIR/paths.parquet (`mid,
depth, path`), and prints one JSON line: peer, job, rows, seconds, peak_rss_mb.
"""
import json
import os
import resource
import sys
import time

import duckdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from duckdb_rank import nights, union  # noqa: E402


def walk(db, out):
    """Walks the temp table `edges` (mid, uid, root_mid, parent_mid) down from each root, the
    roots' authors from `authors` (mid, uid); writes OUT/paths.parquet and
    OUT/cascades.parquet, and returns the reposts placed."""
    db.execute("""
        CREATE TEMP TABLE walked AS
        WITH RECURSIVE walk(mid, root_mid, depth, path) AS (
            SELECT e.mid, e.root_mid, 1,
                   CASE WHEN a.uid IS NULL THEN [e.uid] ELSE [e.uid, a.uid] END
            FROM edges e LEFT JOIN authors a ON a.mid = e.root_mid
            WHERE e.parent_mid = e.root_mid
            UNION ALL
            SELECT e.mid, e.root_mid, w.depth + 1, list_prepend(e.uid, w.path)
            FROM edges e JOIN walk w ON e.parent_mid = w.mid AND e.parent_mid <> e.root_mid)
        SELECT * FROM walk""")
    db.execute(f"""COPY (SELECT mid, depth, path FROM walked)
                   TO '{out}/paths.parquet' (FORMAT parquet, COMPRESSION zstd)""")
    db.execute(f"""COPY (SELECT root_mid, count(*) AS size, max(depth) AS depth FROM walked
                         GROUP BY root_mid)
                   TO '{out}/cascades.parquet' (FORMAT parquet, COMPRESSION zstd)""")
    return db.execute("SELECT count(*) FROM walked").fetchone()[0]


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    edges_dir, clean, date, out = argv
    os.makedirs(out, exist_ok=True)
    db = duckdb.connect()
    db.execute("SET threads = 2")
    started = time.perf_counter()
    posts = union(nights(clean, "posts", date), "mid, uid")
    db.execute(f"""
        CREATE TEMP TABLE authors AS SELECT mid, uid FROM (
            SELECT *, row_number() OVER (PARTITION BY mid ORDER BY night DESC) AS n FROM ({posts}))
        WHERE n = 1""")
    db.execute(f"""
        CREATE TEMP TABLE edges AS
        SELECT mid, uid, root_mid, parent_mid FROM read_parquet('{edges_dir}/*.parquet')""")
    rows = walk(db, out)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peer": "duckdb", "job": "cascades", "rows": rows,
                      "seconds": round(elapsed, 3), "peak_rss_mb": round(peak, 1)}))


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Clean peer: CSV with a header, one row kept per KEY, written as zstd Parquet by DuckDB.

    duckdb_clean_csv.py IN OUT.parquet KEY[,KEY...] [THREADS] [MEMORY_LIMIT]

IN is a file or a glob of files. Rows whose first KEY is empty (NULL) are dropped; of rows
sharing the KEY columns, DuckDB keeps one. MEMORY_LIMIT is DuckDB's `memory_limit` (`1GB`).
Prints one JSON line: peer, job, input_mb, seconds, mb_per_s, peak_rss_mb, threads.
"""
import glob
import json
import os
import resource
import sys
import time

import duckdb


def sql_text(value):
    """A SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_name(value):
    """A quoted SQL identifier."""
    return '"' + str(value).replace('"', '""') + '"'


def main(argv):
    if len(argv) not in (3, 4, 5):
        sys.exit(__doc__)
    source, target, keys = argv[0], argv[1], argv[2].split(",")
    threads = int(argv[3]) if len(argv) >= 4 else 2

    db = duckdb.connect()
    db.execute(f"SET threads = {threads}")
    if len(argv) == 5:
        db.execute(f"SET memory_limit = {sql_text(argv[4])}")
    columns = ", ".join(sql_name(k) for k in keys)
    query = (f"SELECT DISTINCT ON ({columns}) * FROM read_csv({sql_text(source)}, header = true) "
             f"WHERE {sql_name(keys[0])} IS NOT NULL")
    started = time.perf_counter()
    db.execute(f"COPY ({query}) TO {sql_text(target)} (FORMAT parquet, COMPRESSION zstd)")
    elapsed = time.perf_counter() - started

    input_mb = sum(os.path.getsize(f) for f in glob.glob(source)) / 1e6
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({
        "peer": "duckdb",
        "job": "clean",
        "input_mb": round(input_mb, 1),
        "seconds": round(elapsed, 3),
        "mb_per_s": round(input_mb / elapsed, 1),
        "peak_rss_mb": round(peak_kib / 1024, 1),
        "threads": threads,
    }))


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Clean peer: a CSV with a header, one row kept per KEY, written as zstd Parquet by DuckDB.

    duckdb_clean_csv.py IN.csv OUT.parquet KEY [THREADS]

Rows whose KEY is empty (NULL) are dropped; of rows sharing a KEY, DuckDB keeps one.
Prints one JSON line: peer, job, input_mb, seconds, mb_per_s, peak_rss_mb, threads.
"""
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
    if len(argv) not in (3, 4):
        sys.exit(__doc__)
    source, target, key = argv[0], argv[1], argv[2]
    threads = int(argv[3]) if len(argv) == 4 else 2

    db = duckdb.connect()
    db.execute(f"SET threads = {threads}")
    column = sql_name(key)
    query = (f"SELECT DISTINCT ON ({column}) * FROM read_csv({sql_text(source)}, header = true) "
             f"WHERE {column} IS NOT NULL")
    started = time.perf_counter()
    db.execute(f"COPY ({query}) TO {sql_text(target)} (FORMAT parquet, COMPRESSION zstd)")
    elapsed = time.perf_counter() - started

    input_mb = os.path.getsize(source) / 1e6
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

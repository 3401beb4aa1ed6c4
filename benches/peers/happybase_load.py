#!/usr/bin/env python3
"""Load peer: every row of a Parquet file put into HBase through the Thrift1 gateway with
happybase batches, the way a data engineer would script it.

    happybase_load.py --parquet FILE --key COL --table NS:TABLE
                      [--host H --port P --threads N --batch N]

Rowkey: the first 2 bytes of MD5(key as text), then the key as text. One cell per field,
`info:<field>`, holding the value as UTF-8 text ("" for null). The table is created with
family `info` when missing (its namespace must exist). Rows are split into --threads
contiguous slices, one connection per thread. Prints one JSON line: peer, job, rows,
seconds, rows_per_s, mb_per_s (rowkey + value bytes), threads.
"""
import argparse
import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor

import happybase
import pyarrow.parquet as pq


def parse_args():
    ap = argparse.ArgumentParser(description="Load a Parquet file into HBase with happybase.")
    ap.add_argument("--parquet", required=True, help="input Parquet file")
    ap.add_argument("--key", required=True, help="column whose text makes the rowkey")
    ap.add_argument("--table", required=True, help="namespace:table (created with family 'info' if missing)")
    ap.add_argument("--host", default="127.0.0.1", help="Thrift1 gateway host")
    ap.add_argument("--port", type=int, default=9090, help="Thrift1 gateway port")
    ap.add_argument("--threads", type=int, default=4, help="parallel writers, one connection each")
    ap.add_argument("--batch", type=int, default=1000, help="puts per happybase batch")
    return ap.parse_args()


def rowkey(key_value):
    text = str(key_value).encode("utf-8")
    return hashlib.md5(text).digest()[:2] + text


def as_cell(value):
    return b"" if value is None else str(value).encode("utf-8")


def ensure_table(args):
    conn = happybase.Connection(args.host, args.port)
    try:
        if args.table.encode("utf-8") not in conn.tables():
            conn.create_table(args.table, {"info": {}})
    finally:
        conn.close()


def write_slice(args, records):
    """Puts one slice of rows; returns (rows, bytes of rowkeys and values)."""
    conn = happybase.Connection(args.host, args.port)
    rows = payload = 0
    try:
        with conn.table(args.table).batch(batch_size=args.batch) as batch:
            for record in records:
                key = rowkey(record[args.key])
                cells = {b"info:" + name.encode("utf-8"): as_cell(value) for name, value in record.items()}
                batch.put(key, cells)
                rows += 1
                payload += len(key) + sum(len(v) for v in cells.values())
    finally:
        conn.close()
    return rows, payload


def main():
    args = parse_args()
    records = pq.read_table(args.parquet).to_pylist()
    ensure_table(args)

    threads = max(1, args.threads)
    size = -(-len(records) // threads) or 1
    slices = [records[i:i + size] for i in range(0, len(records), size)]

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        done = list(pool.map(lambda part: write_slice(args, part), slices))
    elapsed = time.perf_counter() - started

    rows = sum(r for r, _ in done)
    payload = sum(b for _, b in done)
    print(json.dumps({
        "peer": "happybase",
        "job": "load",
        "rows": rows,
        "seconds": round(elapsed, 3),
        "rows_per_s": round(rows / elapsed),
        "mb_per_s": round(payload / 1e6 / elapsed, 2),
        "threads": args.threads,
    }))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Bulk-load peer: HBase's own MapReduce bulk load, the way a data engineer would run it:
`ImportTsv -Dimporttsv.bulk.output=DIR` writes HFiles from a TSV, then `completebulkload`
hands them to the table.

    importtsv_load.py --tsv FILE --columns info:a,info:b --table NS:TABLE --staging hdfs://…/DIR
                      [--bin weibo-etl]

The TSV's first field is the rowkey, the others the columns, in order. The table is created
first (family `info`, zstd, one region, as a peer's table is made); ImportTsv runs in
Hadoop's local job runner through `weibo-etl cluster importtsv` (the local cluster has no
YARN) and writes HFiles with the family's compression; `weibo-etl cluster bulkload` is the
same hand-over `load --via hfile` uses. Bad lines fail the job (importtsv.skip.bad.lines is
off), so every line became a row. Prints one JSON line: peer, rows, seconds, import_s,
bulkload_s.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def run(cmd):
    p = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-3000:]}")
    return p


def main():
    ap = argparse.ArgumentParser(description="Load a TSV into HBase with ImportTsv and completebulkload.")
    ap.add_argument("--tsv", required=True, help="input TSV: rowkey, then one field per column")
    ap.add_argument("--columns", required=True, help="family:qualifier of each field after the rowkey")
    ap.add_argument("--table", required=True, help="namespace:table, created here")
    ap.add_argument("--staging", required=True, help="HDFS folder for the HFiles")
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "weibo-etl"))
    args = ap.parse_args()
    ns, name = args.table.split(":")
    rows = sum(1 for _ in open(args.tsv, "rb"))
    t = time.time()
    run([args.bin, "-q", "--namespace", ns, "tables", "create", name, "--family", "info",
         "--regions", "1", "--compression", "zstd"])
    run([args.bin, "cluster", "importtsv", "--",
         f"-Dimporttsv.columns=HBASE_ROW_KEY,{args.columns}",
         f"-Dimporttsv.bulk.output={args.staging}", "-Dimporttsv.skip.bad.lines=false",
         args.table, f"file://{Path(args.tsv).resolve()}"])
    imported = time.time()
    run([args.bin, "cluster", "bulkload", args.staging, args.table])
    end = time.time()
    print(json.dumps({"peer": "importtsv", "rows": rows, "seconds": end - t,
                      "import_s": imported - t, "bulkload_s": end - imported}))


if __name__ == "__main__":
    main()

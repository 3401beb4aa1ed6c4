#!/usr/bin/env python3
"""`inbox --load` through each route: feed cells written per second into HBase's inbox table,
Thrift puts against HFiles, on one cleaned data set, on the local cluster.

    python3 benches/inbox_load.py --preset small                     # both routes, a few minutes
    python3 benches/inbox_load.py --clean /data/clean-paper --via hfile

For each route: `inbox --k K --load --regions R` into a fresh namespace (the job creates its
table, as a first night does), timed from start to exit, then the table is dropped. It prints
and writes to <out>/inbox-load.json the cells, the wall time, cells per second, peak RSS and
(for HFiles) the files handed over; with both routes, their ratio. It measures; it asserts
nothing but the exit codes and the same cell count on both routes.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analytics import cleaned  # noqa: E402
from bench import BIN, DATE, ROOT, measured  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench-out" / "inbox-load"), help="work and results folder")
    ap.add_argument("--clean", help="a clean root to use (default: generate --preset)")
    ap.add_argument("--preset", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--via", default="thrift,hfile", help="comma-separated routes: thrift, hfile")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--regions", type=int, default=4)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    clean = Path(args.clean) if args.clean else cleaned(out, args.preset)
    up = subprocess.run([BIN, "cluster", "up"], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"cluster up failed: {up.stderr}")
    started_here = "already running" not in up.stdout
    hdfs = "hdfs://127.0.0.1:9000"
    rows = []
    try:
        for via in args.via.split(","):
            ns = f"inboxload{via[0]}{int(time.time())}"
            report = out / f"inbox-{via}.json"
            route = []
            if via == "hfile":
                route = ["--via", "hfile", "--staging", f"{hdfs}/bench/{ns}",
                         "--bulkload-cmd", f"{BIN} cluster bulkload"]
            cmd = [BIN, "-q", "--namespace", ns, "--report", report, "inbox", "--input", clean,
                   "--output", out / f"graph-{via}", "--date", DATE, "--k", args.k, "--load",
                   "--regions", args.regions, *route]
            m = measured(cmd)
            r = json.loads(report.read_text())
            load = r["load"]
            row = {"via": via, "cells": load["rows"], "seconds": round(m["seconds"], 2),
                   "cells_per_s": round(load["rows"] / m["seconds"]),
                   "peak_rss_mb": round(m["rss_mb"]), "entries": r["inbox"]["entries"],
                   "hfiles": (load.get("hfiles") or {}).get("files")}
            print(f"{via:>6}: {row['cells']:>11,} cells in {row['seconds']:8.1f} s = "
                  f"{row['cells_per_s']:>9,} cells/s, {row['peak_rss_mb']:.0f} MB", flush=True)
            rows.append(row)
            subprocess.run([BIN, "tables", "drop", f"{ns}:inbox"], capture_output=True, check=True)
    finally:
        if started_here:
            subprocess.run([BIN, "cluster", "down"], capture_output=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv), "clean": str(clean),
           "k": args.k, "regions": args.regions, "routes": rows}
    if len(rows) == 2:
        if rows[0]["cells"] != rows[1]["cells"]:
            sys.exit(f"the routes wrote different cell counts: {rows}")
        doc["hfile_over_thrift"] = round(rows[1]["cells_per_s"] / rows[0]["cells_per_s"], 2)
        print(f"hfile/thrift: {doc['hfile_over_thrift']}x")
    path = out / "inbox-load.json"
    path.write_text(json.dumps(doc, indent=2))
    print(f"results: {path}")


if __name__ == "__main__":
    main()

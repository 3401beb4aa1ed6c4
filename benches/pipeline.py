#!/usr/bin/env python3
"""The whole nightly chain on one generated data set, stage by stage, on the local cluster.

    python3 benches/pipeline.py --preset small      # ~100 k users: a few minutes
    python3 benches/pipeline.py --preset paper --drop-raw   # the paper's sizes: outside CI, long
    python3 benches/pipeline.py --preset small --formats canonical,nghuyong,mediacrawler,weibo-crawler,aminer
    python3 benches/pipeline.py --preset paper --via both   # the load through Thrift, then HFiles

Stages: gen -> clean -> load (every table; --via thrift, hfile, or both into two namespaces,
the same data in the same run) -> friends --load. Each stage runs as the CLI a cron
job would run, with --report; this script prints, per stage, the wall time, the records it
handled, the throughput and the peak RSS (from the report), and writes them to
<out>/pipeline-<preset>.json. It measures; it asserts nothing but the exit codes, and reports
whether clean's counts and friends' pairs equal the generator's _truth.json. The data is
regenerated unless --reuse is given and the cleaned partition exists.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "weibo-etl"
DATE = "2026-11-29"


def stage(name, cmd, report):
    print(f"== {name}: {' '.join(map(str, cmd))}", flush=True)
    t = time.time()
    p = subprocess.run(list(map(str, cmd)), stderr=subprocess.PIPE, text=True)
    secs = time.time() - t
    if p.returncode != 0:
        sys.exit(f"{name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    doc = json.loads(Path(report).read_text()) if report and Path(report).exists() else {}
    return secs, doc, p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--out", default=str(ROOT / "bench-out"), help="work and results folder")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--regions", type=int, default=8)
    ap.add_argument("--compression", default="zstd", choices=["none", "snappy", "gz", "zstd"],
                    help="block compression of the created tables (the paper preset needs it for disk)")
    ap.add_argument("--hfile-compression", default="zstd", choices=["none", "zstd"],
                    help="block compression of the HFiles of --via hfile (zstd: as the tables')")
    ap.add_argument("--formats", default="canonical",
                    help="raw formats gen writes (comma-separated; see weibo-etl gen --help)")
    ap.add_argument("--via", default="thrift", choices=["thrift", "hfile", "both"],
                    help="the load's route; both loads the same cleaned data twice, into two namespaces")
    ap.add_argument("--reuse", action="store_true", help="reuse generated and cleaned data when present")
    ap.add_argument("--no-friends", action="store_true", help="stop after the load stage")
    ap.add_argument("--drop-raw", action="store_true",
                    help="delete the raw data once cleaned (the paper preset's 12.6 GB, for disk)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    raw, clean, graph = out / f"raw-{args.preset}", out / f"clean-{args.preset}", out / f"graph-{args.preset}"
    ns = f"pipe{args.preset}{int(time.time())}"
    rows = []
    truth_check = {}

    up = subprocess.run([BIN, "cluster", "up"], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"cluster up failed: {up.stderr}")
    started_here = "already running" not in up.stdout
    try:
        done = (clean / "users" / f"dt={DATE}" / "_SUCCESS").exists()
        if not (args.reuse and done):
            for d in (raw, clean, graph):
                shutil.rmtree(d, ignore_errors=True)
            secs, _, err = stage("gen", [BIN, "-q", "gen", "--out", raw, "--preset", args.preset,
                                         "--formats", args.formats], None)
            truth = json.loads((raw / "_truth.json").read_text())
            records = sum(e["records_in"] for e in truth["entities"].values())
            mb = sum(f.stat().st_size for f in raw.rglob("*") if f.is_file()) / 1e6
            rows.append({"stage": "gen", "seconds": secs, "records": records, "mb": mb})

            report = out / f"clean-{args.preset}.json"
            secs, doc, _ = stage("clean", [BIN, "-q", "--report", report, "clean", "--input", raw,
                                           "--output", clean, "--date", DATE], report)
            c = doc["clean"]
            records = sum(e["records_in"] for e in c["entities"].values())
            truth_check["clean"] = all(
                c["entities"][e][k] == t[k] for e, t in truth["entities"].items()
                for k in ("records_in", "records_out", "duplicates")
            ) and all(c["entities"][e]["rejected_by_reason"] == t["rejected"] for e, t in truth["entities"].items())
            truth_check["friend_pairs"] = truth["friend_pairs"]
            rows.append({"stage": "clean", "seconds": secs, "records": records,
                         "mb": c["bytes_in"] / 1e6, "peak_rss_mb": doc.get("peak_rss_mb")})
            if args.drop_raw:
                shutil.rmtree(raw, ignore_errors=True)

        routes = ["thrift", "hfile"] if args.via == "both" else [args.via]
        for via in routes:
            target = ns if via == routes[0] else f"{ns}h"
            report = out / f"load-{args.preset}-{via}.json"
            extra = []
            if via == "hfile":
                extra = ["--via", "hfile", "--staging", f"hdfs://127.0.0.1:9000/bench/{target}",
                         "--bulkload-cmd", f"{BIN} cluster bulkload",
                         "--hfile-compression", args.hfile_compression]
            name = "load" if via == "thrift" else "load --via hfile"
            secs, doc, _ = stage(name, [BIN, "-q", "--namespace", target, "--report", report, "load",
                                        "--input", clean, "--date", DATE, "--regions", args.regions,
                                        "--writers", args.writers, "--compression", args.compression, *extra],
                                 report)
            l = doc["load"]
            rows.append({"stage": name, "seconds": secs, "records": l["rows"], "mb": l["bytes"] / 1e6,
                         "peak_rss_mb": doc.get("peak_rss_mb"), "rows_by_table": l.get("rows_by_table"),
                         "hfiles": l.get("hfiles")})

        if not args.no_friends:
            report = out / f"friends-{args.preset}.json"
            secs, doc, _ = stage("friends --load", [BIN, "-q", "--namespace", ns, "--report", report, "friends",
                                                    "--input", clean / "follows", "--output", graph, "--date", DATE,
                                                    "--load", "--regions", args.regions],
                                 report)
            f = doc["friends"]
            if "friend_pairs" in truth_check:
                truth_check["friends"] = f["mutual_pairs"] == truth_check.pop("friend_pairs")
            rows.append({"stage": "friends --load", "seconds": secs, "records": f["edges_read"],
                         "pairs": f["mutual_pairs"], "puts": doc.get("load", {}).get("rows"),
                         "peak_rss_mb": doc.get("peak_rss_mb")})
    finally:
        if started_here:
            subprocess.run([BIN, "cluster", "down"], capture_output=True)

    print()
    print(f"{'stage':<16} {'seconds':>9} {'records':>13} {'records/s':>11} {'MB':>9} {'MB/s':>7} {'peak MB':>8}")
    for r in rows:
        mb = r.get("mb")
        print(f"{r['stage']:<16} {r['seconds']:>9.1f} {r['records']:>13,} {r['records'] / r['seconds']:>11,.0f} "
              f"{mb if mb is not None else float('nan'):>9.1f} "
              f"{(mb or float('nan')) / r['seconds']:>7.1f} {r.get('peak_rss_mb') or 0:>8}")
    loads = {r["stage"]: r["seconds"] for r in rows if r["stage"].startswith("load")}
    if len(loads) == 2:
        print(f"load --via hfile: {loads['load'] / loads['load --via hfile']:.2f}x the Thrift route")
    if truth_check:
        print("equal to _truth.json: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in truth_check.items()))
    doc = {"preset": args.preset, "formats": args.formats, "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": " ".join(sys.argv), "stages": rows, "equal_to_truth": truth_check}
    path = out / f"pipeline-{args.preset}.json"
    path.write_text(json.dumps(doc, indent=2))
    print(f"results: {path}")


if __name__ == "__main__":
    main()

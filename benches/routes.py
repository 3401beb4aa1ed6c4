#!/usr/bin/env python3
"""Where the bulk load starts to pay: `load --via thrift` against `--via hfile` on nights of
growing size, the same cleaned data loaded both ways in the same run, on the local cluster.

    python3 benches/routes.py                          # 500 to 100,000 users: a few minutes
    python3 benches/routes.py --users 2000,20000

For each size: gen --users N --noise 0, clean, then a load through Thrift into a fresh
namespace and one through HFiles into another (each creates its tables, as a first load
does), then both namespaces' tables are dropped. It prints and writes to
benches/results/routes.json, per size, the input rows (what `load --via auto` counts before
it starts), the puts, and the wall time of each route. It measures; it asserts nothing but
the exit codes.
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
TABLES = ["user", "user_by_name", "post", "post_by_mid", "user_post", "follow", "fans"]


def run(cmd):
    p = subprocess.run(list(map(str, cmd)), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p


def load(clean, ns, via, report):
    extra = []
    if via == "hfile":
        extra = ["--via", "hfile", "--staging", f"hdfs://127.0.0.1:9000/bench/{ns}",
                 "--bulkload-cmd", f"{BIN} cluster bulkload", "--hfile-compression", "zstd"]
    t = time.time()
    run([BIN, "-q", "--namespace", ns, "--report", report, "load", "--input", clean, "--date", DATE,
         "--compression", "zstd", *extra])
    secs = time.time() - t
    return secs, json.loads(Path(report).read_text())["load"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", default="500,2000,5000,20000,100000",
                    help="comma-separated user counts (the paper's ratios for the rest)")
    ap.add_argument("--out", default=str(ROOT / "bench-out" / "routes"), help="work folder")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    up = run([BIN, "cluster", "up"])
    started_here = "already running" not in up.stdout
    rows = []
    try:
        for n in [int(u) for u in args.users.split(",")]:
            raw, clean = out / f"raw-{n}", out / f"clean-{n}"
            for d in (raw, clean):
                shutil.rmtree(d, ignore_errors=True)
            run([BIN, "-q", "gen", "--out", raw, "--users", n, "--noise", "0"])
            report = out / f"clean-{n}.json"
            run([BIN, "-q", "--report", report, "clean", "--input", raw, "--output", clean, "--date", DATE])
            c = json.loads(report.read_text())["clean"]
            input_rows = sum(e["records_out"] for e in c["entities"].values())
            stamp = int(time.time())
            row = {"users": n, "input_rows": input_rows}
            for via in ("thrift", "hfile"):
                ns = f"routes{n}{via[0]}{stamp}"
                secs, l = load(clean, ns, via, out / f"load-{n}-{via}.json")
                row[via] = {"seconds": secs, "puts": l["rows"]}
                run([BIN, "tables", "drop", *[f"{ns}:{t}" for t in TABLES]])
            row["thrift_over_hfile"] = row["thrift"]["seconds"] / row["hfile"]["seconds"]
            print(f"{n:>8} users {input_rows:>10,} input rows {row['thrift']['puts']:>10,} puts: "
                  f"thrift {row['thrift']['seconds']:6.1f} s, hfile {row['hfile']['seconds']:6.1f} s "
                  f"({row['thrift_over_hfile']:.2f}x)", flush=True)
            rows.append(row)
    finally:
        if started_here:
            subprocess.run([BIN, "cluster", "down"], capture_output=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv), "sizes": rows}
    path = ROOT / "benches" / "results" / "routes.json"
    path.write_text(json.dumps(doc, indent=2))
    print(f"results: {path}")


if __name__ == "__main__":
    main()

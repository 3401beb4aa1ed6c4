#!/usr/bin/env python3
"""clean night after night on local disk: does a night's fold of the history cost what the
night costs, or what the run it writes holds?

    python3 benches/folds.py                        # 64 nights at the small preset's daily volume
    python3 benches/folds.py --bin /tmp/other-build # the same nights through another binary

It generates N consecutive nights (`weibo-etl gen --nights N`, reused when present under
<out>/raw), then runs `weibo-etl clean` for each night in order into a fresh local folder: each
clean commits its night and folds the older ones into runs (docs/nightly.md, "The history,
compacted"). It prints each night's wall time and peak RSS, the nights whose fold wrote the
longest runs, and the peak over all nights, and writes <out>/folds-<preset>.json. No cluster:
the fold is local work, and on HDFS its time is mostly file commits. It measures; it asserts
nothing but the exit codes.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import measured  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIRST = "2026-11-01"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nights", type=int, default=64)
    ap.add_argument("--preset", default="small", choices=["tiny", "small"])
    ap.add_argument("--out", default=str(ROOT / "bench-out"), help="work and results folder")
    ap.add_argument("--bin", help="the weibo-etl binary [default: this checkout's release build]")
    args = ap.parse_args()
    if args.bin:
        binary = Path(args.bin)
    else:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
        binary = ROOT / "target" / "release" / "weibo-etl"
    out = Path(args.out)
    raw = out / f"folds-{args.preset}-{args.nights}" / "raw"
    if not (raw / "_done").exists():
        shutil.rmtree(raw, ignore_errors=True)
        subprocess.run([binary, "-q", "gen", "--out", raw, "--nights", str(args.nights),
                        "--preset", args.preset, "--date", FIRST], check=True)
        (raw / "_done").touch()
    clean = raw.parent / "clean"
    shutil.rmtree(clean, ignore_errors=True)
    dates = sorted(p.name[3:] for p in raw.iterdir() if p.name.startswith("dt="))
    rows = []
    print(f"{'night':>5} {'date':<10} {'seconds':>8} {'peak MB':>8} {'longest run':>12}")
    for i, date in enumerate(dates, 1):
        m = measured([binary, "-q", "clean", "--input", raw / f"dt={date}", "--output", clean,
                      "--date", date])
        # Runs are named run=<first>_<last>: the nights of the longest one now folded.
        spans = [p.name[4:].split("_") for p in (clean / "follows" / "_history").glob("run=*")]
        longest = max((sum(first <= d <= last for d in dates) for first, last in spans), default=0)
        rows.append({"date": date, "seconds": round(m["seconds"], 3), "rss_mb": round(m["rss_mb"]),
                     "longest_run_nights": longest})
        print(f"{i:>5} {date:<10} {m['seconds']:>8.2f} {m['rss_mb']:>8.0f} {longest:>12}", flush=True)
    top = sorted(rows, key=lambda r: -r["rss_mb"])[:5]
    print("highest peaks: " + ", ".join(f"{r['date']} {r['rss_mb']} MB" for r in top))
    result = {"preset": args.preset, "nights": args.nights, "date_run": time.strftime("%Y-%m-%d"),
              "command": " ".join(sys.argv), "binary": str(binary),
              "peak_rss_mb": max(r["rss_mb"] for r in rows),
              "median_seconds": sorted(r["seconds"] for r in rows)[len(rows) // 2], "rows": rows}
    target = out / f"folds-{args.preset}.json"
    target.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {target}")


if __name__ == "__main__":
    main()

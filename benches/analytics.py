#!/usr/bin/env python3
"""The analytics jobs against DuckDB on one cleaned data set: `rank` against the window query.

    python3 benches/analytics.py --clean /data/clean-paper              # a cleaned paper preset
    python3 benches/analytics.py --preset small --repeat 3              # generated and cleaned here

Runs `friends` once (rank's friends board reads its counts), then `weibo-etl rank` and
`benches/peers/duckdb_rank.py` (2 threads) in turn, `--repeat` times each after `--warmup`
pairs, and keeps each side's median run. Both boards must be equal row for row. Prints the
times, the ratio and each side's peak RSS; results go to <out>/analytics.json. It measures; it
asserts nothing but equal answers.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import BIN, DATE, PEERS, ROOT, interleaved, measured  # noqa: E402


def cleaned(out, preset):
    """A cleaned data set of `preset`, generated and cleaned once, then reused."""
    clean = out / f"clean-{preset}"
    if not (clean / "users" / f"dt={DATE}" / "_SUCCESS").exists():
        raw = out / f"raw-{preset}"
        shutil.rmtree(raw, ignore_errors=True)
        subprocess.run([BIN, "-q", "gen", "--out", raw, "--preset", preset], check=True)
        subprocess.run([BIN, "-q", "clean", "--input", raw, "--output", clean, "--date", DATE,
                        "--max-reject-ratio", "0.5"], check=True)
        shutil.rmtree(raw, ignore_errors=True)
    return clean


def our_board(graph):
    import pyarrow.parquet as pq
    t = pq.read_table(graph / "rank" / f"dt={DATE}").to_pydict()
    return sorted(zip(t["metric"], t["rank"], t["id"], t["value"]))


def duck_board(csv):
    rows = []
    for line in csv.read_text().splitlines()[1:]:
        m, r, i, v = line.split(",")
        rows.append((m, int(r), int(i), int(v)))
    return sorted(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench-out" / "analytics"), help="work and results folder")
    ap.add_argument("--clean", help="a clean root to use (default: generate --preset)")
    ap.add_argument("--preset", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--top", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    clean = Path(args.clean) if args.clean else cleaned(out, args.preset)
    graph = out / "graph"
    if not (graph / "friend_counts" / f"dt={DATE}" / "_SUCCESS").exists():
        measured([BIN, "-q", "friends", "--input", clean / "follows", "--output", graph, "--date", DATE])
    report, csv = out / "rank-report.json", out / "duck-rank.csv"
    ours, peer = interleaved(
        [BIN, "-q", "--report", report, "rank", "--input", clean, "--output", graph, "--date", DATE,
         "--top", str(args.top)],
        [sys.executable, PEERS / "duckdb_rank.py", clean, graph, DATE, str(args.top), csv, "2"],
        args.repeat, args.warmup)
    if our_board(graph) != duck_board(csv):
        sys.exit("the boards differ between weibo-etl and DuckDB")
    stats = json.loads(report.read_text())["rank"]
    result = {
        "job": "rank", "clean": str(clean), "top": args.top,
        "rows": {k: stats[k] for k in ("follow_rows", "post_rows", "comment_rows", "friend_count_rows")},
        "partitions": stats["partitions"],
        "ours_s": round(ours["seconds"], 3), "peer_s": round(peer["seconds"], 3),
        "ours_all_s": ours["all_seconds"], "peer_all_s": peer["all_seconds"],
        "ours_rss_mb": round(ours["rss_mb"]), "peer_rss_mb": round(peer["rss_mb"]),
        "speedup": round(peer["seconds"] / ours["seconds"], 2),
    }
    print(f"rank: weibo-etl {result['ours_s']:.2f} s ({result['ours_rss_mb']} MB), DuckDB "
          f"{result['peer_s']:.2f} s ({result['peer_rss_mb']} MB): {result['speedup']}x, same boards")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv)}
    (out / "analytics.json").write_text(json.dumps({"meta": meta, "results": [result]}, indent=2))
    print(f"results: {out / 'analytics.json'}")


if __name__ == "__main__":
    main()

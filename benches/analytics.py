#!/usr/bin/env python3
"""The analytics jobs against DuckDB on one cleaned data set.

    python3 benches/analytics.py --clean /data/clean-paper              # a cleaned paper preset
    python3 benches/analytics.py --preset small --repeat 3              # generated and cleaned here
    python3 benches/analytics.py --preset small --jobs inbox,cascades

- `rank` against `tests/reference/duckdb_rank.py`, the window query (after one `friends` run:
  rank's friends board reads its counts). Both boards must be equal row for row.
- `inbox` (Parquet only, `--k`, `--celebrity-threshold`) against
  `tests/reference/duckdb_inbox.py` writing the same entries to Parquet. Both entry sets must be
  equal.
- `cascades` against `benches/peers/duckdb_cascades.py`, a recursive CTE handed the parent
  edges from our `repost_paths` (the case where the parents are direct), which only walks
  them; and against `benches/peers/duckdb_cascades_full.py`, which does the whole job in SQL
  (markers by `regexp_extract`, names joined to users, parents by an ASOF join, then the same
  walk). Sizes, depths and paths must be equal to ours for both.

Each pair runs in turn (2 threads for DuckDB), `--repeat` times after `--warmup` pairs, and each
side's median run is kept. Prints the times, the ratio and each side's peak RSS; results go to
<out>/analytics.json. It measures; it asserts nothing but equal answers.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import BIN, DATE, PEERS, REFERENCES, ROOT, interleaved, measured  # noqa: E402


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



def side(result, ours, peer):
    """The common fields of a result, and its line."""
    result.update({
        "ours_s": round(ours["seconds"], 3), "peer_s": round(peer["seconds"], 3),
        "ours_all_s": ours["all_seconds"], "peer_all_s": peer["all_seconds"],
        "ours_rss_mb": round(ours["rss_mb"]), "peer_rss_mb": round(peer["rss_mb"]),
        "speedup": round(peer["seconds"] / ours["seconds"], 2),
    })
    print(f"{result['job']}: weibo-etl {result['ours_s']:.2f} s ({result['ours_rss_mb']} MB), DuckDB "
          f"{result['peer_s']:.2f} s ({result['peer_rss_mb']} MB): {result['speedup']}x, same answer",
          flush=True)
    return result


def budget(args):
    """Our jobs' --memory-budget, when one is asked for."""
    return ["--memory-budget", args.memory_budget] if args.memory_budget else []


def rank_bench(args, out, clean, graph):
    if not (graph / "friend_counts" / f"dt={DATE}" / "_SUCCESS").exists():
        measured([BIN, "-q", "friends", "--input", clean / "follows", "--output", graph, "--date", DATE])
    report, csv = out / "rank-report.json", out / "duck-rank.csv"
    ours, peer = interleaved(
        [BIN, "-q", "--report", report, "rank", "--input", clean, "--output", graph, "--date", DATE,
         "--top", str(args.top), *budget(args)],
        [sys.executable, REFERENCES / "duckdb_rank.py", clean, graph, DATE, str(args.top), csv, "2"],
        args.repeat, args.warmup)
    if our_board(graph) != duck_board(csv):
        sys.exit("the boards differ between weibo-etl and DuckDB")
    stats = json.loads(report.read_text())["rank"]
    result = {
        "job": "rank", "clean": str(clean), "top": args.top,
        "rows": {k: stats[k] for k in ("follow_rows", "post_rows", "comment_rows", "friend_count_rows")},
        "partitions": stats["partitions"],
    }
    return side(result, ours, peer)


def same_rows(query_a, query_b):
    """Whether two DuckDB relations hold the same rows (as multisets)."""
    import duckdb
    db = duckdb.connect()
    diff = db.execute(f"SELECT count(*) FROM (({query_a} EXCEPT ALL {query_b}) UNION ALL "
                      f"({query_b} EXCEPT ALL {query_a}))").fetchone()[0]
    return diff == 0


def inbox_bench(args, out, clean, graph):
    report, target = out / "inbox-report.json", out / "duck-inbox.parquet"
    ours, peer = interleaved(
        [BIN, "-q", "--report", report, "inbox", "--input", clean, "--output", graph, "--date", DATE,
         "--k", str(args.k), "--celebrity-threshold", str(args.celebrity_threshold),
         *budget(args)],
        [sys.executable, REFERENCES / "duckdb_inbox.py", clean, DATE, str(args.k),
         str(args.celebrity_threshold), str(target)],
        args.repeat, args.warmup)
    mine = f"SELECT uid, followee, mid FROM read_parquet('{graph}/inbox/dt={DATE}/*.parquet')"
    theirs = f"SELECT uid, followee, mid FROM read_parquet('{target}')"
    if not same_rows(mine, theirs):
        sys.exit("the inbox entries differ between weibo-etl and DuckDB")
    stats = json.loads(report.read_text())["inbox"]
    result = {"job": "inbox", "clean": str(clean), "k": args.k,
              "celebrity_threshold": args.celebrity_threshold,
              "edges": stats["edges"], "entries": stats["entries"],
              "celebrities_skipped": stats["celebrities_skipped"], "partitions": stats["partitions"]}
    return side(result, ours, peer)


def cascades_bench(args, out, clean, graph):
    report, peer_out = out / "cascades-report.json", out / "duck-cascades"
    ours_cmd = [BIN, "-q", "--report", report, "cascades", "--input", clean, "--output", graph,
                "--date", DATE, *budget(args)]
    measured(ours_cmd)  # the parent edges the peer is handed
    edges = out / "cascade-edges"
    shutil.rmtree(edges, ignore_errors=True)
    shutil.copytree(graph / "repost_paths" / f"dt={DATE}", edges)
    ours, peer = interleaved(
        ours_cmd,
        [sys.executable, PEERS / "duckdb_cascades.py", edges, clean, DATE, peer_out],
        args.repeat, args.warmup)
    paths = f"read_parquet('{graph}/repost_paths/dt={DATE}/*.parquet')"
    cascades = f"read_parquet('{graph}/cascades/dt={DATE}/*.parquet')"
    if not (same_rows(f"SELECT mid, depth, path FROM {paths}",
                      f"SELECT mid, depth, path FROM read_parquet('{peer_out}/paths.parquet')")
            and same_rows(f"SELECT root_mid, size, depth FROM {cascades}",
                          f"SELECT root_mid, size, depth FROM read_parquet('{peer_out}/cascades.parquet')")):
        sys.exit("the cascades differ between weibo-etl and DuckDB")
    stats = json.loads(report.read_text())["cascades"]
    facts = {"clean": str(clean), "reposts": stats["reposts"], "cascades": stats["cascades"],
             "max_depth": stats["max_depth"], "partitions": stats["partitions"]}
    walk = side({"job": "cascades", **facts}, ours, peer)
    full_out = out / "duck-cascades-full"
    ours, peer = interleaved(
        ours_cmd,
        [sys.executable, PEERS / "duckdb_cascades_full.py", clean, DATE, full_out],
        args.repeat, args.warmup)
    if not (same_rows(f"SELECT mid, depth, path FROM {paths}",
                      f"SELECT mid, depth, path FROM read_parquet('{full_out}/paths.parquet')")
            and same_rows(f"SELECT root_mid, size, depth FROM {cascades}",
                          f"SELECT root_mid, size, depth FROM read_parquet('{full_out}/cascades.parquet')")):
        sys.exit("the cascades differ between weibo-etl and DuckDB's whole job")
    return [walk, side({"job": "cascades-full", **facts}, ours, peer)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench-out" / "analytics"), help="work and results folder")
    ap.add_argument("--clean", help="a clean root to use (default: generate --preset)")
    ap.add_argument("--preset", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--jobs", default="rank,inbox,cascades", help="comma-separated: rank, inbox, cascades")
    ap.add_argument("--top", type=int, default=100)
    ap.add_argument("--k", type=int, default=10, help="inbox: posts per followee")
    ap.add_argument("--celebrity-threshold", type=int, default=10000, help="inbox: fans above which no fan-out")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--memory-budget", help="our jobs' --memory-budget (default: each job's own)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    clean = Path(args.clean) if args.clean else cleaned(out, args.preset)
    graph = out / "graph"
    results = []
    for job in args.jobs.split(","):
        result = {"rank": rank_bench, "inbox": inbox_bench, "cascades": cascades_bench}[job](
            args, out, clean, graph)
        results.extend(result if isinstance(result, list) else [result])
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv)}
    (out / "analytics.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"results: {out / 'analytics.json'}")


if __name__ == "__main__":
    main()

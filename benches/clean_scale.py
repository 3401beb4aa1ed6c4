#!/usr/bin/env python3
"""clean at two input sizes: does its cost per row depend on the input's total size?

    python3 benches/clean_scale.py                      # ~1.2 GB and ~8 GB of follows CSV
    python3 benches/clean_scale.py --small-users 2000000 --factor 6
    python3 benches/clean_scale.py --sizes 92800000 --friends   # soc-sinaweibo size, then friends

Generates follows only (`weibo-etl gen --only follows --noise 0`, reused when present) at two
sizes, the large `--factor` times the small, then cleans each with weibo-etl and with DuckDB
(`SELECT DISTINCT ON (follower, followee)`, 2 threads, `memory_limit='1GB'`), one after the
other, `--repeat` times each, each run with its input warm in the page cache. Prints MB/s at
each size, the large/small ratio of our MB/s, the ratio to DuckDB and each side's peak RSS;
results go to <out>/results.json. With `--friends`, each side then finds the friendships in
its own cleaned output (`weibo-etl friends`; DuckDB's self-join, 2 threads), and the whole of
clean + friends is compared too. Nothing here asserts a time: it measures.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import BIN, DATE, PEERS, REFERENCES, ROOT, interleaved  # noqa: E402


def ensure_follows(data, users):
    """Follows of `users` generated users, as raw CSV; returns the folder and its MB."""
    raw = data / f"follows-{users}"
    done = raw / "_done"
    if not done.exists():
        shutil.rmtree(raw, ignore_errors=True)
        print(f"generating follows of {users:,} users ...", flush=True)
        subprocess.run([BIN, "-q", "gen", "--out", raw, "--users", str(users), "--only", "follows",
                        "--noise", "0"], check=True)
        done.write_text("")
    files = [f for f in raw.rglob("*.csv")]
    return raw, sum(f.stat().st_size for f in files) / 1e6


def warm(raw):
    """Reads every input file once, untimed, so each run starts with its input in the page
    cache: the other side's spill and output evict some of it, and a run that reads part of
    its input from disk measured the disk (an 8 GB clean took 38 s warm, 63 s cold)."""
    for f in sorted(raw.rglob("*.csv")):
        with open(f, "rb") as src:
            while src.read(1 << 24):
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench-out" / "clean-scale"), help="work and results folder")
    ap.add_argument("--small-users", type=int, default=7_300_000,
                    help="users of the small input (7.3 M: about 1.2 GB of follows)")
    ap.add_argument("--factor", type=int, default=7, help="the large input is this many times the small")
    ap.add_argument("--sizes", help="users of each input, comma-separated, instead of --small-users "
                    "and --factor (92800000: soc-sinaweibo's 261.5 M follows, about 15 GB)")
    ap.add_argument("--friends", action="store_true",
                    help="also run friends on each side's cleaned output, and compare clean + friends")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each side at each size (medians kept)")
    args = ap.parse_args()
    sizes = ([int(u) for u in args.sizes.split(",")] if args.sizes
             else [args.small_users, args.small_users * args.factor])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    spill = out / "spill"
    spill.mkdir(exist_ok=True)
    results = []
    for users in sizes:
        raw, mb = ensure_follows(out / "data", users)
        ours_out, duck_out, report = out / "clean-out", out / "duck.parquet", out / "report.json"

        def clear():
            shutil.rmtree(ours_out, ignore_errors=True)
            duck_out.unlink(missing_ok=True)
            warm(raw)

        ours, peer = interleaved(
            [BIN, "-q", "--report", report, "clean", "--input", raw, "--output", ours_out, "--date", DATE,
             "--spill-dir", spill],
            [sys.executable, PEERS / "duckdb_clean_csv.py", f"{raw}/**/*.csv", duck_out, "follower,followee",
             "2", "1GB"],
            args.repeat, 0, before=clear)
        clean = json.loads(report.read_text())["clean"]
        follows = clean["entities"]["follows"]
        results.append({
            "users": users, "input_mb": round(mb, 1), "rows": follows["records_in"],
            "ours_s": round(ours["seconds"], 2), "peer_s": round(peer["seconds"], 2),
            "ours_all_s": ours["all_seconds"], "peer_all_s": peer["all_seconds"],
            "ours_mb_s": round(mb / ours["seconds"], 1), "peer_mb_s": round(mb / peer["seconds"], 1),
            "ours_rss_mb": round(ours["rss_mb"]), "peer_rss_mb": round(peer["rss_mb"]),
        })
        if args.friends:
            # Each side's friends reads what its own clean wrote last (kept by the last run).
            ours_friends, duck_friends = out / "friends-out", out / "friends-duck.parquet"

            def clear_friends():
                shutil.rmtree(ours_friends, ignore_errors=True)
                duck_friends.unlink(missing_ok=True)

            f_ours, f_peer = interleaved(
                [BIN, "-q", "friends", "--input", ours_out / "follows" / f"dt={DATE}", "--output",
                 ours_friends, "--date", DATE],
                [sys.executable, REFERENCES / "duckdb_friends.py", duck_out, duck_friends, "2"],
                args.repeat, 0, before=clear_friends)
            r = results[-1]
            r.update({
                "friends_ours_s": round(f_ours["seconds"], 2), "friends_peer_s": round(f_peer["seconds"], 2),
                "friends_ours_all_s": f_ours["all_seconds"], "friends_peer_all_s": f_peer["all_seconds"],
                "friends_ours_rss_mb": round(f_ours["rss_mb"]), "friends_peer_rss_mb": round(f_peer["rss_mb"]),
                "both_ours_s": round(r["ours_s"] + f_ours["seconds"], 2),
                "both_peer_s": round(r["peer_s"] + f_peer["seconds"], 2),
            })
            r["both_speedup"] = round(r["both_peer_s"] / r["both_ours_s"], 2)
            clear_friends()
        clear()
    print()
    print(f"{'input MB':>9} {'rows':>12} {'ours s':>8} {'ours MB/s':>10} {'duckdb s':>9} {'duckdb MB/s':>12} "
          f"{'speed x':>8} {'ours RSS':>9} {'duckdb RSS':>11}")
    for r in results:
        r["speedup"] = round(r["peer_s"] / r["ours_s"], 2)
        print(f"{r['input_mb']:>9.0f} {r['rows']:>12,} {r['ours_s']:>8.2f} {r['ours_mb_s']:>10.1f} "
              f"{r['peer_s']:>9.2f} {r['peer_mb_s']:>12.1f} {r['speedup']:>8.2f} {r['ours_rss_mb']:>9} "
              f"{r['peer_rss_mb']:>11}")
    for r in results:
        if "both_speedup" in r:
            print(f"{r['input_mb']:>9.0f} MB, clean + friends: ours {r['both_ours_s']:.2f} s "
                  f"(friends {r['friends_ours_s']:.2f} s), DuckDB {r['both_peer_s']:.2f} s "
                  f"(friends {r['friends_peer_s']:.2f} s): {r['both_speedup']:.2f}x")
    summary = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv)},
               "results": results}
    if len(results) > 1:
        scale = results[-1]["ours_mb_s"] / results[0]["ours_mb_s"]
        print(f"ours at the largest size / at the smallest size: {scale:.2f} of the MB/s")
        summary["large_over_small"] = round(scale, 3)
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    print(f"results: {out / 'results.json'}")


if __name__ == "__main__":
    main()

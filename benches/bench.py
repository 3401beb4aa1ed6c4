#!/usr/bin/env python3
"""End-to-end benchmark: each weibo-etl stage against its peer, same data, same run.

    python3 benches/bench.py                 # ~1 GB users CSV for clean, paper-size follows for friends
    python3 benches/bench.py --small         # a quick pass (100 k users, small follows)

It builds the release binary, generates the data with `weibo-etl gen` (reused when present),
runs every stage and its peer from benches/peers/ one after the other (each stage
--repeat times each, interleaved, keeping each side's median run), and prints a table of
time, throughput, peak RSS and the ratios. Results go to <out>/results.json and, when
matplotlib is installed, <out>/results.png. Nothing here asserts a time: it measures.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "benches" / "peers"
# The peers the tests also take as their references live with the tests.
REFERENCES = ROOT / "tests" / "reference"
BIN = ROOT / "target" / "release" / "weibo-etl"
DATE = "2026-11-29"


def measured(cmd):
    """Runs cmd under a fresh Python wrapper so RUSAGE_CHILDREN is this command's alone."""
    wrapper = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.time()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "secs = time.time() - t\n"
        "sys.stderr.write(p.stderr)\n"
        "print(json.dumps({'rc': p.returncode, 'seconds': secs, 'stdout': p.stdout,\n"
        "  'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", wrapper, *map(str, cmd)], capture_output=True, text=True)
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        sys.exit(f"failed to run {cmd}: {proc.stderr[-2000:]}")
    if out["rc"] != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stderr[-2000:]}")
    return out


def shuffled_follows(out, follows):
    """The follows as one Parquet file in a fixed pseudo-random order, written by DuckDB (made
    once, then reused)."""
    # follows is <data>/follows-<preset>-clean/follows/dt=<date>
    target = follows.parents[1].with_name(follows.parents[1].name + "-shuffled") / "follows.parquet"
    if not target.exists():
        import duckdb
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        duckdb.connect().execute(
            f"COPY (SELECT follower, followee, followed_at FROM read_parquet('{follows}/*.parquet') "
            f"ORDER BY hash(follower, followee)) TO '{tmp}' (FORMAT parquet)")
        tmp.rename(target)
    return target


def side_by_side(ours, peer):
    """The fields every result row has: each side's median seconds, every run, peak RSS."""
    return {"ours_s": ours["seconds"], "peer_s": peer["seconds"],
            "ours_all_s": ours["all_seconds"], "peer_all_s": peer["all_seconds"],
            "ours_rss_mb": ours["rss_mb"], "peer_rss_mb": peer["rss_mb"]}


def friends_vs_duckdb(args, out, ours_input, peer_input, fr_out, report, expect_pairs=None):
    """friends and the DuckDB self-join on the same follows, interleaved; both must find the
    same number of pairs (and `expect_pairs`, when given). Returns both medians and our report."""
    ours, peer = interleaved(
        [BIN, "-q", "--report", report, "friends", "--input", ours_input, "--output", fr_out, "--date", DATE],
        [sys.executable, REFERENCES / "duckdb_friends.py", peer_input, out / "duck-friends.parquet"],
        args.repeat, args.warmup, before=lambda: shutil.rmtree(fr_out, ignore_errors=True))
    stats = json.loads(report.read_text())["friends"]
    peer_pairs = json.loads(peer["stdout"].strip().splitlines()[-1])["pairs"]
    if peer_pairs != stats["mutual_pairs"] or expect_pairs not in (None, peer_pairs):
        sys.exit(f"pair counts differ: ours {stats['mutual_pairs']}, duckdb {peer_pairs}, expected {expect_pairs}")
    return ours, peer, stats


def median_run(runs):
    """The run of median time (its own RSS), with every time kept for the record."""
    ordered = sorted(runs, key=lambda r: r["seconds"])
    mid = dict(ordered[len(ordered) // 2])
    mid["all_seconds"] = [round(r["seconds"], 3) for r in runs]
    return mid


def interleaved(ours_cmd, peer_cmd, repeat, warmup, before=lambda: None):
    """Runs ours and the peer in turn, `repeat` times each, and keeps each side's median run:
    this box drifts by a third from minute to minute, so one pair is a sample, not a ratio.
    A command may be a function of the run's index (runs that need places of their own);
    each run records its index. `warmup` pairs run first and are not kept (hyperfine's
    --warmup): DuckDB's first run after a data set was generated was the slowest of five
    (7.98 s, then 6.08 down to 4.82 s, 2026-12-01 02:20), which measured the box, not DuckDB."""
    command = lambda cmd, i: cmd(i) if callable(cmd) else cmd
    for w in range(warmup):
        before()
        measured(command(ours_cmd, f"w{w}"))
        measured(command(peer_cmd, f"w{w}"))
    ours, peer = [], []
    for i in range(repeat):
        before()
        ours.append(dict(measured(command(ours_cmd, i)), index=i))
        peer.append(dict(measured(command(peer_cmd, i)), index=i))
    return median_run(ours), median_run(peer)


def ensure_data(out, args):
    data = out / "data"
    users = data / "users1g" / "users" / "users-00000.csv"
    if not users.exists():
        print(f"generating {args.clean_users} users (~1 KB each) ...", flush=True)
        subprocess.run([BIN, "-q", "gen", "--out", data / "users1g", "--users", str(args.clean_users),
                        "--only", "users", "--part-rows", "1000000000"], check=True)
    follows_raw = data / f"follows-{args.follows}"
    follows_clean = data / f"follows-{args.follows}-clean"
    if not (follows_clean / "follows" / f"dt={DATE}" / "_SUCCESS").exists():
        print(f"generating {args.follows} follows and cleaning them to Parquet ...", flush=True)
        shutil.rmtree(follows_raw, ignore_errors=True)
        subprocess.run([BIN, "-q", "gen", "--out", follows_raw, "--preset", args.follows, "--only", "follows",
                        "--part-rows", "5000000", "--noise", "0"], check=True)
        subprocess.run([BIN, "-q", "clean", "--input", follows_raw, "--output", follows_clean,
                        "--date", DATE], check=True)
    return users, follows_clean / "follows" / f"dt={DATE}"


def load_rows(out, args, results, stages):
    data = out / "data" / f"load-users-{args.load_users}"
    clean = out / "data" / f"load-users-{args.load_users}-clean"
    if not (clean / "users" / f"dt={DATE}" / "_SUCCESS").exists():
        subprocess.run([BIN, "-q", "gen", "--out", data, "--users", str(args.load_users), "--only", "users",
                        "--noise", "0", "--part-rows", "1000000000"], check=True)
        subprocess.run([BIN, "-q", "clean", "--input", data, "--output", clean, "--date", DATE], check=True)
    parts = sorted((clean / "users" / f"dt={DATE}").glob("*.parquet"))
    # One Parquet file for the peer: our clean writes one part per key partition.
    import pyarrow.parquet as pq
    import pyarrow as pa
    single = out / "load-users.parquet"
    pq.write_table(pa.concat_tables([pq.read_table(p) for p in parts]), single)
    rows = pq.read_metadata(single).num_rows
    up = subprocess.run([BIN, "cluster", "up"], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"cluster up failed: {up.stderr}")
    started_here = "already running" not in up.stdout
    try:
        if "load" in stages:
            load_against_happybase(out, args, results, clean, single, rows)
        if "bulk" in stages:
            bulk_against_importtsv(out, args, results, clean, single, rows)
    finally:
        if started_here:
            subprocess.run([BIN, "cluster", "down"], capture_output=True)


def load_against_happybase(out, args, results, clean, single, rows):
    """Ours and happybase in turn, --repeat times each, every run into tables of its own; each
    side's median run is kept. The cluster JVM starts cold and its tables fill as runs go on:
    the first load of a fresh cluster ran at half the speed of the second (2026-11-30 19:17),
    so a single pair would mostly measure which side ran first."""
    stamp = str(int(time.time()))
    ns = lambda i: f"bench{stamp}r{i}"
    report = lambda i: out / f"load-report-{i}.json"
    ours, peer = interleaved(
        lambda i: [BIN, "-q", "--namespace", ns(i), "--report", report(i), "load", "--input", clean,
                   "--date", DATE, "--tables", "user", "--regions", "8", "--writers", str(args.writers)],
        lambda i: [sys.executable, PEERS / "happybase_load.py", "--parquet", single, "--key", "uid",
                   "--table", f"{ns(i)}:peer_users", "--threads", str(args.writers)],
        args.repeat, args.warmup)
    ours["mb_per_s"] = json.loads(report(ours["index"]).read_text())["load"]["mb_per_s"]
    peer["mb_per_s"] = json.loads(peer["stdout"].strip().splitlines()[-1])["mb_per_s"]
    results.append({"stage": "load (user table)", "input": f"{rows:,} users, {args.writers} writers",
                    "peer": "happybase", **side_by_side(ours, peer),
                    "ours_rows_s": rows / ours["seconds"], "peer_rows_s": rows / peer["seconds"],
                    "ours_mb_s": ours["mb_per_s"], "peer_mb_s": peer["mb_per_s"]})
    anchor = java_anchor(out, args, single, f"bench{stamp}r0:anchor_users")
    if anchor:
        results[-1]["anchor"] = anchor


def bulk_against_importtsv(out, args, results, clean, single, rows):
    """`load --via hfile` against HBase's MapReduce bulk load (ImportTsv, then
    completebulkload) on the same users, in turn, every run into tables of its own. The peer
    reads a TSV written here beforehand (not timed: it favours the peer), one field per
    cleaned column; ours reads the cleaned Parquet and writes its own 17 cells."""
    import pyarrow.parquet as pq
    table_rows = pq.read_table(single).to_pylist()
    names = list(table_rows[0].keys()) if table_rows else []
    text = lambda v: "" if v is None else str(v).replace("\t", " ").replace("\n", " ").replace("\r", " ")
    tsv = out / "bulk-users.tsv"
    import hashlib
    with open(tsv, "w") as f:
        for r in table_rows:
            key = hashlib.md5(str(r["uid"]).encode()).hexdigest()[:4] + str(r["uid"])
            f.write("\t".join([key] + [text(r[n]) for n in names]) + "\n")
    stamp = str(int(time.time()))
    ns = lambda i: f"bulk{stamp}r{i}"
    report = lambda i: out / f"bulk-report-{i}.json"
    hdfs = "hdfs://127.0.0.1:9000"
    ours, peer = interleaved(
        lambda i: [BIN, "-q", "--namespace", ns(i), "--report", report(i), "load", "--input", clean,
                   "--date", DATE, "--tables", "user", "--regions", "8", "--writers", str(args.writers),
                   "--compression", "zstd", "--via", "hfile", "--hfile-compression", "zstd",
                   "--staging", f"{hdfs}/bench/{ns(i)}", "--bulkload-cmd", f"{BIN} cluster bulkload"],
        lambda i: [sys.executable, PEERS / "importtsv_load.py", "--tsv", tsv,
                   "--columns", ",".join(f"info:{n}" for n in names),
                   "--table", f"{ns(i)}:peer_users", "--staging", f"{hdfs}/bench/{ns(i)}-peer"],
        args.repeat, args.warmup)
    peer_doc = json.loads(peer["stdout"].strip().splitlines()[-1])
    if peer_doc["rows"] != rows:
        sys.exit(f"importtsv loaded {peer_doc['rows']} rows, expected {rows}")
    ours_doc = json.loads(report(ours["index"]).read_text())["load"]
    results.append({"stage": "load --via hfile (user table)", "input": f"{rows:,} users",
                    "peer": "importtsv + completebulkload", **side_by_side(ours, peer),
                    "ours_rows_s": rows / ours["seconds"], "peer_rows_s": rows / peer["seconds"],
                    "ours_cells": ours_doc["hfiles"]["cells"],
                    "peer_import_s": peer_doc["import_s"], "peer_bulkload_s": peer_doc["bulkload_s"]})


JAVA_FLAGS = ["--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
              "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
              "--add-opens=java.base/java.util=ALL-UNNAMED",
              "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED"]


def java_anchor(out, args, single, table):
    """HBase's native Java client (BufferedMutator, no Thrift) writing the peer's rows: the upper anchor."""
    state = ROOT / "target" / "local-cluster"
    zk = state / "data" / "zookeeper-port"
    if not zk.exists():
        print("(no zookeeper-port file: restart the cluster to measure the Java anchor)")
        return None
    import base64
    import pyarrow.parquet as pq
    table_rows = pq.read_table(single).to_pylist()
    tsv = out / "load-users.tsv"
    enc = lambda v: base64.b64encode(("" if v is None else str(v)).encode()).decode()
    with open(tsv, "w") as f:
        names = list(table_rows[0].keys()) if table_rows else []
        f.write("\t".join(["uid"] + names) + "\n")
        for r in table_rows:
            f.write("\t".join([enc(r["uid"])] + [enc(r[n]) for n in names]) + "\n")
    classpath = f"{ROOT / 'cluster' / 'target' / 'classes'}:{(state / 'classpath.txt').read_text().strip()}"
    run = measured(["java", *JAVA_FLAGS, "-cp", classpath, "weibo.cluster.MutatorAnchor",
                    "--zookeeper-port", zk.read_text().strip(), "--table", table, "--tsv", tsv,
                    "--threads", str(args.writers)])
    r = json.loads(run["stdout"].strip().splitlines()[-1])
    r["rss_mb"] = run["rss_mb"]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench-out"), help="work and results folder")
    ap.add_argument("--small", action="store_true", help="small data: a quick pass, not the targets")
    ap.add_argument("--clean-users", type=int, default=1_100_000, help="users in the clean benchmark CSV")
    ap.add_argument("--follows", default="paper", choices=["small", "paper"], help="follow graph preset")
    ap.add_argument("--load-users", type=int, default=100_000, help="users (~1 KB rows) in the load benchmark")
    ap.add_argument("--writers", type=int, default=4, help="parallel writers / threads for both loaders")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each stage and its peer, interleaved (each side's median is reported)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="unrecorded runs of each side before the measured ones (default 1)")
    ap.add_argument("--stages", default="clean,friends,load,bulk",
                    help="comma-separated stages to run (clean, friends, load: through Thrift "
                         "against happybase, bulk: through HFiles against ImportTsv)")
    args = ap.parse_args()
    stages = set(args.stages.split(","))
    if not stages <= {"clean", "friends", "load", "bulk"}:
        sys.exit(f"--stages: unknown stage in {args.stages!r}")
    if args.small:
        args.clean_users, args.follows = 100_000, "small"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    # The clean and friends inputs only when those stages run (a 1 GB CSV, the paper's follows).
    users_csv, follows = ensure_data(out, args) if stages & {"clean", "friends"} else (None, None)
    spill = out / "spill"
    spill.mkdir(exist_ok=True)
    results = []

    if "clean" in stages:
        # clean: CSV -> dedupe by key -> Parquet (zstd)
        mb = users_csv.stat().st_size / 1e6
        clean_out = out / "clean-out"
        duck_out = out / "duck-clean.parquet"
        ours, peer = interleaved(
            [BIN, "-q", "clean", "--input", users_csv, "--output", clean_out, "--date", DATE, "--spill-dir", spill],
            [sys.executable, PEERS / "duckdb_clean_csv.py", users_csv, duck_out, "uid"],
            args.repeat, args.warmup, before=lambda: shutil.rmtree(clean_out, ignore_errors=True))
        results.append({"stage": "clean", "input": f"users CSV {mb:.0f} MB", "peer": "duckdb",
                        **side_by_side(ours, peer),
                        "ours_mb_s": mb / ours["seconds"], "peer_mb_s": mb / peer["seconds"]})

    if "friends" in stages:
        # friends: follows Parquet -> mutual pairs Parquet
        fr_out = out / "friends-out"
        report = out / "friends-report.json"
        ours, peer, stats = friends_vs_duckdb(args, out, follows, f"{follows}/*.parquet", fr_out, report)
        edges = stats["edges_read"]
        results.append({"stage": "friends", "input": f"{edges:,} follow edges", "peer": "duckdb",
                        **side_by_side(ours, peer), "pairs": stats["mutual_pairs"]})

        # friends out of core: a memory budget of a tenth of the packed edges
        budget = max(edges * 8 // 10, 1 << 20)
        ooc_runs = []
        for _ in range(args.repeat):
            shutil.rmtree(fr_out, ignore_errors=True)
            ooc_runs.append(measured([BIN, "-q", "--report", report, "friends", "--input", follows, "--output",
                                      fr_out, "--date", DATE, "--memory-budget", f"{budget}B", "--spill-dir", spill]))
        ooc = median_run(ooc_runs)
        ooc_stats = json.loads(report.read_text())["friends"]
        results.append({"stage": "friends (out of core)", "input": f"budget {budget / 2**20:.0f} MiB, "
                        f"{ooc_stats['partitions']} partitions", "peer": "duckdb",
                        **side_by_side(ooc, peer), "pairs": ooc_stats["mutual_pairs"]})

        # friends on the same edges as one file in random order, written by DuckDB (its row
        # groups, microsecond times): the spec's measurement (a synthetic graph, Parquet in)
        # and what arrives from other tools, where ours above is sorted and split in parts.
        shuffled = shuffled_follows(out, follows)
        ours, peer, shuffled_stats = friends_vs_duckdb(args, out, shuffled.parent, shuffled, fr_out, report,
                                                       expect_pairs=stats["mutual_pairs"])
        results.append({"stage": "friends (one shuffled file)", "input": f"{edges:,} edges, DuckDB-written",
                        "peer": "duckdb", **side_by_side(ours, peer), "pairs": shuffled_stats["mutual_pairs"]})

    if stages & {"load", "bulk"}:
        # load: the same users Parquet into HBase through the same Thrift server, and as
        # HFiles against HBase's MapReduce bulk load
        load_rows(out, args, results, stages)

    print()
    print(f"{'stage':<24} {'input':<30} {'ours s':>8} {'peer s':>8} {'speed x':>8} "
          f"{'ours MB':>8} {'peer MB':>8} {'RSS x':>6}")
    for r in results:
        r["speedup"] = r["peer_s"] / r["ours_s"]
        r["rss_ratio"] = r["ours_rss_mb"] / r["peer_rss_mb"]
        print(f"{r['stage']:<24} {r['input']:<30} {r['ours_s']:>8.2f} {r['peer_s']:>8.2f} "
              f"{r['speedup']:>8.2f} {r['ours_rss_mb']:>8.0f} {r['peer_rss_mb']:>8.0f} {r['rss_ratio']:>6.2f}")
    for r in results:
        if "ours_all_s" in r:
            print(f"{r['stage']}: every run, ours {r['ours_all_s']} s, peer {r['peer_all_s']} s (medians above)")
        if "ours_rows_s" in r:
            print(f"{r['stage']}: ours {r['ours_rows_s']:.0f} input rows/s, peer {r['peer_rows_s']:.0f} rows/s")
        if "anchor" in r:
            a = r["anchor"]
            print(f"{r['stage']}: Java BufferedMutator anchor (no Thrift) {a['rows_per_s']} rows/s, "
                  f"{a['mb_per_s']} MB/s; ours = {r['ours_rows_s'] / a['rows_per_s']:.2f} of the anchor")
        if "ours_mb_s" in r:
            print(f"{r['stage']}: ours {r['ours_mb_s']:.1f} MB/s, peer {r['peer_mb_s']:.1f} MB/s")
    meta = {"machine": os.uname().nodename, "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M"),
            "command": " ".join(sys.argv)}
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 3.5))
        names = [r["stage"] for r in results]
        ax.barh(names, [r["speedup"] for r in results], color="#3b7dd8")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel("speed vs peer (x, higher is better)")
        ax.set_title("weibo-etl vs peers, same data, same run")
        fig.tight_layout()
        fig.savefig(out / "results.png", dpi=110)
        print(f"chart: {out / 'results.png'}")
    except ImportError:
        print("(matplotlib not installed: no chart; pip install matplotlib)")
    print(f"results: {out / 'results.json'}")


if __name__ == "__main__":
    main()

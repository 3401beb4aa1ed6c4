#!/usr/bin/env python3
"""What the engine costs: each job run on one machine and through the local cluster's YARN
(`cluster up --yarn`, `yarn submit --submitter local`), on the same data on HDFS, in the same
run.

    python3 benches/yarn.py                          # 100,000 users, 1 and 4 tasks: ~10 min
    python3 benches/yarn.py --users 1000000 --tasks 4 --jobs friends,clean

The data: gen --users N --noise 0 --seed 3, put on HDFS. Then, per job:
- clean of the raw files (one machine, then YARN: a map job and a reduce job);
- friends of the cleaned follows;
- cascades of the cleaned posts and reposts;
- inbox of the cleaned follows and posts (K = 10);
- rank of the cleaned night, every metric (friends from a friends run made beforehand);
- load of the cleaned night through Thrift, and load through HFiles, each into a fresh
  namespace whose tables are dropped afterwards (so every load creates its tables).
For every run it records the wall time, the submitter's peak RSS, and, through YARN, each
slice's own time and peak RSS (from the slices' reports), so the engine's share is the wall
time less the slowest slice. It prints a table and writes benches/results/yarn-<users>.json
(the runs of the jobs it ran replace theirs in that file; the other jobs' are kept).
It measures; it asserts nothing but the exit codes.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "weibo-etl"
HDFS = "hdfs://127.0.0.1:9000"
DATE = "2026-11-29"
TABLES = ["user", "user_by_name", "post", "post_by_mid", "user_post", "follow", "fans"]
JOBS = ["clean", "friends", "cascades", "inbox", "rank", "load-thrift", "load-hfile"]


def run(cmd, env=None):
    p = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p


def timed(global_args, job_args, report):
    """Runs `weibo-etl <global> --report <report> <job args>`; returns its figures."""
    t = time.time()
    run([BIN, "-q", *global_args, "--report", report, *job_args])
    secs = time.time() - t
    r = json.loads(Path(report).read_text())
    slices = [{"seconds": s.get("seconds"), "peak_rss_mb": s.get("peak_rss_mb")}
              for s in r.get("slices", [])]
    return {"seconds": round(secs, 3), "peak_rss_mb": r.get("peak_rss_mb"), "slices": slices}


def job_args(job, base, out_tag, ns_hfile_staging):
    """The job's own arguments, writing under `out_tag`."""
    clean = f"{base}/clean"
    if job == "clean":
        return ["clean", "--input", f"{base}/raw", "--output", f"{base}/clean-{out_tag}",
                "--date", DATE]
    if job == "cascades":
        return ["cascades", "--input", clean, "--output", f"{base}/graph-{out_tag}", "--date", DATE]
    if job == "inbox":
        return ["inbox", "--input", clean, "--output", f"{base}/graph-{out_tag}", "--date", DATE]
    if job == "rank":
        return ["rank", "--input", clean, "--output", f"{base}/graph-{out_tag}", "--date", DATE,
                "--friends", f"{base}/friends-for-rank"]
    if job == "friends":
        return ["friends", "--input", f"{clean}/follows", "--output", f"{base}/graph-{out_tag}",
                "--date", DATE]
    load = ["load", "--input", clean, "--date", DATE]
    if job == "load-hfile":
        load += ["--via", "hfile", "--staging", ns_hfile_staging,
                 "--bulkload-cmd", f"{BIN} cluster bulkload"]
    return load


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=100_000, help="gen --users (the paper's ratios for the rest)")
    ap.add_argument("--tasks", default="1,4", help="comma-separated task counts for the YARN runs")
    ap.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {','.join(JOBS)}")
    ap.add_argument("--memory", type=int, default=2048, help="yarn submit --memory (MB)")
    ap.add_argument("--out", default=str(ROOT / "bench-out" / "yarn"), help="local work folder")
    args = ap.parse_args()
    jobs = args.jobs.split(",")
    tasks = [int(t) for t in args.tasks.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    # A cluster this script starts, it stops; one found running is left running.
    started_here = "already running" not in run([BIN, "cluster", "up", "--yarn"]).stdout
    stamp = int(time.time())
    base = f"{HDFS}/bench/yarn-{stamp}"
    raw = out / f"raw-{args.users}"
    if not raw.exists():
        run([BIN, "-q", "gen", "--out", raw, "--users", args.users, "--noise", "0", "--seed", "3"])
    run([BIN, "-q", "fs", "put", raw, f"{base}/raw"])
    run([BIN, "-q", "clean", "--input", f"{base}/raw", "--output", f"{base}/clean", "--date", DATE])
    if "rank" in jobs:
        run([BIN, "-q", "friends", "--input", f"{base}/clean/follows", "--output",
             f"{base}/friends-for-rank", "--date", DATE])
    results = {
        "what": f"each job on one machine and through the local YARN, gen --users {args.users} "
                f"--noise 0 --seed 3 on HDFS; yarn submit --submitter local --memory {args.memory}",
        "runs": {},
    }
    print("| job | run | wall s | slowest slice s | engine s |")
    print("|---|---|---|---|---|")
    try:
        for job in jobs:
            for mode in ["local", *[f"yarn{t}" for t in tasks]]:
                tag = f"{job}-{mode}"
                ns = f"byarn{stamp}{job.replace('-', '')[:6]}{mode}"
                staging = f"{base}/hfiles-{tag}"
                own = job_args(job, base, tag, staging)
                global_args = ["--namespace", ns] if job.startswith("load") else []
                if mode == "local":
                    figures = timed(global_args, own, out / f"{tag}.json")
                else:
                    n = int(mode[len("yarn"):])
                    submit = ["yarn", "submit", "--submitter", "local", "--tasks", n,
                              "--memory", args.memory, "--", *own]
                    figures = timed(global_args, submit, out / f"{tag}.json")
                if job.startswith("load"):
                    run([BIN, "tables", "drop", *[f"{ns}:{t}" for t in TABLES]])
                results["runs"][tag] = figures
                slowest = max((s["seconds"] or 0 for s in figures["slices"]), default=None)
                engine = None if slowest is None else figures["seconds"] - slowest
                print(f"| {job} | {mode} | {figures['seconds']:.1f} | "
                      f"{'' if slowest is None else f'{slowest:.1f}'} | "
                      f"{'' if engine is None else f'{engine:.1f}'} |", flush=True)
    finally:
        subprocess.run([str(BIN), "-q", "fs", "rm", base], capture_output=True)
        if started_here:
            subprocess.run([str(BIN), "cluster", "down"], capture_output=True)
    dest = ROOT / "benches" / "results" / f"yarn-{args.users}.json"
    if dest.exists():
        kept = json.loads(dest.read_text())
        if kept.get("what") == results["what"]:
            results["runs"] = {**kept["runs"], **results["runs"]}
    dest.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()

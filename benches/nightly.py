#!/usr/bin/env python3
"""Night after night: does a night's cost follow its delta, or the history behind it?

    python3 benches/nightly.py                       # 30 nights at the small preset's daily volume
    python3 benches/nightly.py --nights 5 --preset tiny    # a quick pass

It generates N consecutive nights (`weibo-etl gen --nights N`), then runs
`weibo-etl run jobs/nightly.toml` for each night in order on the local cluster, local files
under <out>, tables in a namespace of their own. From each night's run.json it takes every
stage's wall time and peak RSS, and the load's puts and changed counters; it prints one row
per night, compares the last night with the first (the deltas are the same size by
construction), checks that the counters after the last night equal the generator's truth
digest (through Thrift), and writes <out>/nightly-<preset>.json. It measures; it asserts
nothing but the exit codes.
"""
import argparse
import hashlib
import json
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "weibo-etl"
FIRST = "2026-11-01"


def night_rows(run):
    """The figures of one night's run.json: per stage seconds and peak RSS."""
    row = {"date": run["date"], "seconds": run["seconds"]}
    for s in run["stages"]:
        rep = s.get("report") or {}
        row[f"{s['stage']}_s"] = s["seconds"]
        row[f"{s['stage']}_rss_mb"] = rep.get("peak_rss_mb")
        if s["stage"] == "load":
            load = rep.get("load", {})
            row["load_puts"] = load.get("rows")
            row["users_changed"] = load.get("users_changed")
            row["history_nights"] = load.get("history_nights")
        if s["stage"] == "friends":
            row["friends_puts"] = rep.get("load", {}).get("rows")
    return row


def digest_in_hbase(ns):
    """The truth's counters digest (weibo-etl gen --help, "Nights") over what HBase holds."""
    import happybase
    conn = happybase.Connection("127.0.0.1", 9090)
    cols = [b"count:followers", b"count:following", b"count:posts",
            b"count:reposts_received", b"count:comments_received", b"count:friends"]
    num = lambda row, c: struct.unpack(">q", row[c])[0] if c in row else 0
    users = sorted((struct.unpack(">q", k[2:10])[0], [num(r, c) for c in cols])
                   for k, r in conn.table(f"{ns}:user").scan())
    posts = sorted((struct.unpack(">q", k[18:26])[0],
                    [num(r, b"count:reposts"), num(r, b"count:comments")])
                   for k, r in conn.table(f"{ns}:post").scan())
    h = hashlib.md5()
    for uid, c in users:
        h.update(("u %d %s\n" % (uid, " ".join(map(str, c)))).encode())
    for mid, c in posts:
        h.update(("p %d %s\n" % (mid, " ".join(map(str, c)))).encode())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--preset", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--out", default=str(ROOT / "bench-out"), help="work and results folder")
    ap.add_argument("--regions", type=int, default=8)
    ap.add_argument("--writers", type=int, default=4)
    args = ap.parse_args()
    out = Path(args.out)
    work = out / f"nightly-{args.preset}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    subprocess.run([BIN, "cluster", "up"], check=True)
    raw = work / "raw"
    subprocess.run([BIN, "-q", "gen", "--out", raw, "--nights", str(args.nights),
                    "--preset", args.preset, "--date", FIRST], check=True)
    ns = f"nightly{args.preset}{int(time.time())}"
    base = [BIN, "-q", "run", ROOT / "jobs" / "nightly.toml",
            "--set", f"root={work}", "--set", f"raw={raw}/dt={{date}}", "--set", f"namespace={ns}",
            "--set", f"load.regions={args.regions}", "--set", f"load.writers={args.writers}",
            "--set", f"friends.regions={args.regions}"]
    dates = sorted(p.name[3:] for p in raw.iterdir() if p.name.startswith("dt="))
    rows = []
    print(f"{'night':>5} {'date':<10} {'total s':>8} {'clean s':>8} {'load s':>7} {'load MB':>8} "
          f"{'puts':>8} {'changed':>8} {'friends s':>9} {'fr puts':>8}")
    for i, date in enumerate(dates, 1):
        p = subprocess.run(list(map(str, base + ["--date", date])), capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"night {date} failed ({p.returncode}):\n{p.stdout}{p.stderr[-3000:]}")
        run = json.loads((work / "_runs" / ns / f"dt={date}" / "run.json").read_text())
        r = night_rows(run)
        rows.append(r)
        print(f"{i:>5} {date:<10} {r['seconds']:>8.2f} {r['clean_s']:>8.2f} {r['load_s']:>7.2f} "
              f"{r['load_rss_mb'] or 0:>8} {r['load_puts'] or 0:>8} {r['users_changed'] or 0:>8} "
              f"{r['friends_s']:>9.2f} {r['friends_puts'] or 0:>8}", flush=True)
    first, last = rows[0], rows[-1]
    ratio = {k: round(last[k] / first[k], 3) for k in ["seconds", "load_s", "friends_s", "clean_s"]
             if first.get(k)}
    truth = json.loads((raw / f"dt={dates[-1]}" / "_truth.json").read_text())
    digest_ok = digest_in_hbase(ns) == truth["digest"]
    print(f"night {len(rows)} / night 1: " + ", ".join(f"{k} {v}x" for k, v in ratio.items()))
    print(f"counters after night {len(rows)} equal the truth: {digest_ok}")
    result = {"preset": args.preset, "nights": args.nights, "namespace": ns,
              "date_run": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv),
              "last_over_first": ratio, "counters_equal_truth": digest_ok, "rows": rows}
    target = out / f"nightly-{args.preset}.json"
    target.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {target}")


if __name__ == "__main__":
    main()

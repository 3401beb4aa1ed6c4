#!/usr/bin/env python3
"""Night after night: does a night's cost follow its delta, or the history behind it?

    python3 benches/nightly.py                       # 100 nights at the small preset's daily volume
    python3 benches/nightly.py --nights 5 --preset tiny    # a quick pass

It generates N consecutive nights (`weibo-etl gen --nights N`), then runs
`weibo-etl run jobs/nightly.toml` for each night in order on the local cluster, raw files
under <out>, outputs on the cluster's HDFS (so `--via auto` may bulk-load, as in production),
tables in a namespace of their own. From each night's run.json it takes every
stage's wall time, peak RSS and HBase cells written; it prints one row per night, then for
every stage the slope (seconds added per night, a least-squares fit over nights 2..N) and the
last night over night 2 (the deltas are the same size by construction; night 1 creates the
tables). It checks that the counters after the last night equal the generator's truth digest
(through Thrift), and writes <out>/nightly-<preset>.json. It measures; it asserts nothing but
the exit codes.

    python3 benches/nightly.py --large-history paper     # a small night on a paper-size history

With --large-history it times one small night twice, in two namespaces: after a first night
that is the whole paper preset (`gen --preset paper`), and after a first night of the small
preset's daily volume. The small night is the same bytes in both (night 2 of `gen --nights 2
--preset small`). It prints both second nights per stage and their ratio, and writes
<out>/nightly-history-<preset>.json.
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "weibo-etl"
FIRST = "2026-11-01"


STAGES = ["clean", "load", "friends", "rank", "inbox", "cascades"]


def night_rows(run):
    """The figures of one night's run.json: per stage seconds, peak RSS and cells written."""
    row = {"date": run["date"], "seconds": run["seconds"]}
    for s in run["stages"]:
        rep = s.get("report") or {}
        name = s["stage"]
        row[f"{name}_s"] = s["seconds"]
        row[f"{name}_rss_mb"] = rep.get("peak_rss_mb")
        written = rep.get("load") or {}
        row[f"{name}_cells"] = written.get("rows")
        if name == "load":
            row["users_changed"] = written.get("users_changed")
            row["history_nights"] = written.get("history_nights")
    row["peak_rss_mb"] = max((row.get(f"{n}_rss_mb") or 0) for n in STAGES)
    return row


def slope(ys):
    """Least-squares seconds added per night over nights 2.. (index 1..)."""
    pts = [(i, y) for i, y in enumerate(ys, 1) if i >= 2 and y is not None]
    if len(pts) < 2:
        return None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


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


def run_night(base, raw_night, date, report, env):
    """One night of the job, its raw partition at `raw_night`; the figures of its run.json."""
    cmd = base + ["--set", f"raw={raw_night}", "--date", date, "--report", report]
    p = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"night {date} failed ({p.returncode}):\n{p.stdout}{p.stderr[-3000:]}")
    return night_rows(json.loads(Path(report).read_text()))


def large_history(args, work, base_of, env):
    """A small night after a large first night, against the same night after a small one."""
    big, small = work / "raw-large", work / "raw-small"
    second = "2026-11-02"
    subprocess.run([BIN, "-q", "gen", "--out", big / f"dt={FIRST}", "--preset",
                    args.large_history, "--date", FIRST], check=True)
    subprocess.run([BIN, "-q", "gen", "--out", small, "--nights", "2", "--preset", "small",
                    "--date", FIRST], check=True)
    reports = work / "runs"
    reports.mkdir()
    result = {}
    for name, first in [("small", small), ("large", big)]:
        ns = f"history{name}{int(time.time())}"
        base = base_of(ns)
        t0 = time.time()
        one = run_night(base, first / f"dt={FIRST}", FIRST, reports / f"{name}-1.json", env)
        print(f"{name} history: night 1 in {one['seconds']:.1f} s "
              f"(wall {time.time() - t0:.1f} s)", flush=True)
        two = run_night(base, small / f"dt={second}", second, reports / f"{name}-2.json", env)
        print(f"{name} history: night 2 in {two['seconds']:.2f} s: "
              + ", ".join(f"{n} {two.get(n + '_s') or 0:.2f} s" for n in STAGES)
              + f"; peak {two['peak_rss_mb']} MB", flush=True)
        result[name] = {"namespace": ns, "night_1": one, "night_2": two}
    keys = ["seconds"] + [f"{n}_s" for n in STAGES]
    s, l = result["small"]["night_2"], result["large"]["night_2"]
    ratio = {k: round(l[k] / s[k], 3) for k in keys if s.get(k) and l.get(k) is not None}
    print("night 2 on the large history / on the small one: "
          + ", ".join(f"{k} {v}x" for k, v in ratio.items()))
    result.update({"large_history": args.large_history, "date_run": time.strftime("%Y-%m-%d"),
                   "command": " ".join(sys.argv), "large_over_small": ratio})
    target = Path(args.out) / f"nightly-history-{args.large_history}.json"
    target.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {target}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large-history", choices=["small", "paper"],
                    help="time a small night on a history of this preset instead (above)")
    ap.add_argument("--nights", type=int, default=100)
    ap.add_argument("--preset", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--out", default=str(ROOT / "bench-out"), help="work and results folder")
    ap.add_argument("--regions", type=int, default=8)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--root", help="where the nightly job writes [default: a fresh folder on the "
                    "local cluster's HDFS]")
    args = ap.parse_args()
    out = Path(args.out)
    work = out / (f"nightly-history-{args.large_history}" if args.large_history
                  else f"nightly-{args.preset}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    subprocess.run([BIN, "cluster", "up"], check=True)
    # The outputs on the cluster's HDFS, as in production: --via auto bulk-loads only from
    # there; the local cluster hands HFiles over through this binary (no `hbase` script).
    env = dict(os.environ, WEIBO_ETL_BULKLOAD_CMD=f"{BIN} cluster bulkload")

    def base_of(ns):
        root = args.root or f"hdfs://127.0.0.1:9000/bench/{ns}"
        if args.root and args.large_history:
            root = f"{args.root}/{ns}"  # two namespaces, two roots
        return [BIN, "-q", "run", ROOT / "jobs" / "nightly.toml",
                "--set", f"root={root}", "--set", f"namespace={ns}",
                "--set", f"load.regions={args.regions}", "--set", f"load.writers={args.writers}",
                "--set", f"friends.regions={args.regions}"]

    if args.large_history:
        return large_history(args, work, base_of, env)
    raw = work / "raw"
    subprocess.run([BIN, "-q", "gen", "--out", raw, "--nights", str(args.nights),
                    "--preset", args.preset, "--date", FIRST], check=True)
    ns = f"nightly{args.preset}{int(time.time())}"
    reports = work / "runs"
    reports.mkdir()
    base = base_of(ns) + ["--set", f"raw={raw}/dt={{date}}"]
    dates = sorted(p.name[3:] for p in raw.iterdir() if p.name.startswith("dt="))
    rows = []
    print(f"{'night':>5} {'date':<10} {'total s':>8} " + " ".join(f"{n[:8] + ' s':>10}" for n in STAGES)
          + f" {'peak MB':>8} {'load cells':>10} {'inbox cells':>11}")
    for i, date in enumerate(dates, 1):
        report = reports / f"{date}.json"
        p = subprocess.run(list(map(str, base + ["--date", date, "--report", report])),
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            sys.exit(f"night {date} failed ({p.returncode}):\n{p.stdout}{p.stderr[-3000:]}")
        run = json.loads(report.read_text())
        r = night_rows(run)
        rows.append(r)
        print(f"{i:>5} {date:<10} {r['seconds']:>8.2f} "
              + " ".join(f"{r.get(n + '_s') or 0:>10.2f}" for n in STAGES)
              + f" {r['peak_rss_mb']:>8} {r.get('load_cells') or 0:>10} {r.get('inbox_cells') or 0:>11}",
              flush=True)
    keys = ["seconds"] + [f"{n}_s" for n in STAGES]
    second, last = rows[min(1, len(rows) - 1)], rows[-1]
    ratio = {k: round(last[k] / second[k], 3) for k in keys if second.get(k) and last.get(k) is not None}
    slopes = {k: (None if (v := slope([r.get(k) for r in rows])) is None else round(v, 4)) for k in keys}
    rss = {"night_2": second["peak_rss_mb"], "last": last["peak_rss_mb"]}
    truth = json.loads((raw / f"dt={dates[-1]}" / "_truth.json").read_text())
    digest_ok = digest_in_hbase(ns) == truth["digest"]
    print(f"night {len(rows)} / night 2: " + ", ".join(f"{k} {v}x" for k, v in ratio.items()))
    print("slope, seconds added per night over nights 2..: "
          + ", ".join(f"{k} {v:+.4f}" for k, v in slopes.items() if v is not None))
    print(f"peak RSS, night 2 and night {len(rows)}: {rss['night_2']} MB, {rss['last']} MB")
    print(f"counters after night {len(rows)} equal the truth: {digest_ok}")
    result = {"preset": args.preset, "nights": args.nights, "namespace": ns,
              "date_run": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv),
              "last_over_night_2": ratio, "slope_s_per_night": slopes, "peak_rss_mb": rss,
              "counters_equal_truth": digest_ok, "rows": rows}
    target = out / f"nightly-{args.preset}.json"
    target.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {target}")


if __name__ == "__main__":
    main()

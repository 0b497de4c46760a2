#!/usr/bin/env python3
"""Reads the per-CTA timelines an op writes with SYNCOPATE_OPS_TRACE_DIR set (ops/launch_trace.h)
and says where each fused launch's time went: when it started against the launch before it on
the same rank (a gap of more than --idle-ms marks a launch after idle: a first run), how long it
ran, how far apart its CTAs started, and how long its CTAs waited for peers' chunks. The clock
(%globaltimer) is one for every process on a GPU, so ranks' launches line up: the `skew` column
is this rank's start minus the earliest rank's start of the same launch.

    launch_trace_summary.py DIR [--idle-ms 0.5] [--per-launch]

Prints, per file (one op on one rank), the medians of launches after idle and of launches back
to back, then (with --per-launch) every launch."""
import argparse
import collections
import csv
import glob
import os
import statistics
import sys


def read(path):
    launches = collections.defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f):
            launches[int(row["launch"])].append({k: int(v) for k, v in row.items()})
    return launches


def describe(ctas):
    ran = [c for c in ctas if c["start_ns"] != 0]  # records start zeroed: 0 never ran
    if len(ran) < len(ctas):
        print(f"note: launch {ctas[0]['launch']}: {len(ctas) - len(ran)} CTAs left no record",
              file=sys.stderr)
    ctas = ran
    starts = sorted(c["start_ns"] for c in ctas)
    start, end = starts[0], max(c["end_ns"] for c in ctas)
    comm = [c for c in ctas if c["comm"]]
    compute = [c for c in ctas if not c["comm"] and not c.get("control", 0)]
    def max_wait(group):
        return max((c["wait_ns"] for c in group), default=0) / 1e6
    # Late: started after a tenth of the launch had passed (not resident at its start: seen in
    # first runs after idle, when one rank's last CTAs waited for the peer's to leave).
    late = sum(1 for s in starts if s - start > (end - start) / 10)
    compute_end = statistics.median(c["end_ns"] for c in compute) if compute else end
    return {
        "bucket_m": ctas[0]["bucket_m"], "m": ctas[0]["m"], "start": start, "end": end,
        "ms": (end - start) / 1e6,
        "spread_p90": (starts[int(0.9 * (len(starts) - 1))] - start) / 1e6,
        "spread_max": (starts[-1] - start) / 1e6,
        "comm_wait": max_wait(comm), "compute_wait": max_wait(compute),
        "compute_end_spread": (max(c["end_ns"] for c in compute) -
                               min(c["end_ns"] for c in compute)) / 1e6 if compute else 0.0,
        "late_ctas": late,
        # How long the comm CTAs ran on after the compute CTAs' median end: the transfers left
        # to them alone.
        "comm_tail": (max(c["end_ns"] for c in comm) - compute_end) / 1e6 if comm else 0.0,
    }


COLUMNS = ["ms", "gap", "skew", "spread_p90", "spread_max", "late_ctas", "comm_tail", "comm_wait",
           "compute_wait", "compute_end_spread"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--idle-ms", type=float, default=0.5,
                    help="a gap after the launch before longer than this marks a launch after idle")
    ap.add_argument("--per-launch", action="store_true")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "*.csv")))
    if not files:
        sys.exit(f"no trace files in {a.dir}")
    per_file = {}
    for path in files:
        launches = read(path)
        rows, previous_end = {}, None
        for launch in sorted(launches):
            if not any(c["start_ns"] for c in launches[launch]):
                continue  # a launch none of whose CTAs wrote a record
            d = describe(launches[launch])
            d["gap"] = (d["start"] - previous_end) / 1e6 if previous_end is not None else float("nan")
            previous_end = d["end"]
            rows[launch] = d
        per_file[os.path.basename(path)] = rows
    # Skew: against the earliest start of the same launch among the files of the same op.
    by_op = collections.defaultdict(list)
    for name in per_file:
        by_op[name.rsplit("_rank", 1)[0]].append(name)
    for names in by_op.values():
        for launch in set().union(*(per_file[n].keys() for n in names)):
            starts = [per_file[n][launch]["start"] for n in names if launch in per_file[n]]
            for n in names:
                if launch in per_file[n]:
                    per_file[n][launch]["skew"] = (per_file[n][launch]["start"] - min(starts)) / 1e6
    ranks_of = {n: names for names in by_op.values() for n in names}
    print("file,kind_of_launch,bucket_m,launches," + ",".join(COLUMNS) +
          "  # medians, ms (late_ctas a count); +late: some rank of the op had late CTAs")
    for name, rows in per_file.items():
        groups = collections.defaultdict(list)
        for launch, d in rows.items():
            if d["gap"] != d["gap"]:
                continue  # the first launch kept: no launch before it to compare
            kind = "after_idle" if d["gap"] > a.idle_ms else "back_to_back"
            # Whether some rank of the op started CTAs late in this launch.
            late = any(per_file[n].get(launch, {}).get("late_ctas", 0) for n in ranks_of[name])
            groups[(kind + ("+late" if late else ""), d["bucket_m"])].append(d)
        for (kind, bucket), ds in sorted(groups.items()):
            med = [statistics.median(d[c] for d in ds) for c in COLUMNS]
            print(f"{name},{kind},{bucket},{len(ds)}," + ",".join(f"{v:.3f}" for v in med))
    if a.per_launch:
        print("file,launch,bucket_m,m," + ",".join(COLUMNS))
        for name, rows in per_file.items():
            for launch, d in sorted(rows.items()):
                print(f"{name},{launch},{d['bucket_m']},{d['m']}," +
                      ",".join(f"{d[c]:.3f}" for c in COLUMNS))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Reads the per-CTA timelines an op writes with SYNCOPATE_OPS_TRACE_DIR set (ops/launch_trace.h)
and says where each fused launch's time went: when it started against the launch before it on
the same rank (a gap of more than --idle-ms marks a launch after idle: a first run), how long it
ran, how far apart its CTAs started and how many started late (after a tenth of the launch: not
resident at its start), how long the comm CTAs ran on after the compute CTAs (the transfers left
to them alone), and how long its CTAs waited for peers' chunks. The clock
(%globaltimer) is one for every process on a GPU, so ranks' launches line up: the `skew` column
is this rank's start minus the earliest rank's start of the same launch.

    launch_trace_summary.py DIR [--idle-ms 0.5] [--per-launch]
    launch_trace_summary.py --self-test

Prints, per file (one op on one rank), the medians of launches after idle and of launches back
to back, each split by whether some rank of the op started CTAs late ("+late"), then (with
--per-launch) every launch. --self-test checks all that on made-up traces (a CTest test)."""
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


def load(directory):
    """Per file (one op on one rank): {launch: description}, with each launch's gap after the
    one before on that rank and its skew against the op's earliest rank."""
    files = sorted(glob.glob(os.path.join(directory, "*.csv")))
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
    return per_file, ranks_of


def grouped(per_file, ranks_of, idle_ms):
    """[(file, kind_of_launch, bucket_m, [descriptions])]: launches after idle (a gap over
    idle_ms) or back to back, "+late" where some rank of the op started CTAs late."""
    out = []
    for name, rows in per_file.items():
        groups = collections.defaultdict(list)
        for launch, d in rows.items():
            if d["gap"] != d["gap"]:
                continue  # the first launch kept: no launch before it to compare
            kind = "after_idle" if d["gap"] > idle_ms else "back_to_back"
            late = any(per_file[n].get(launch, {}).get("late_ctas", 0) for n in ranks_of[name])
            groups[(kind + ("+late" if late else ""), d["bucket_m"])].append(d)
        for (kind, bucket), ds in sorted(groups.items()):
            out.append((name, kind, bucket, ds))
    return out


def write_trace(path, launches):
    """A made-up trace file: launches is [(launch, [(comm, start_ns, end_ns)])]."""
    with open(path, "w") as f:
        f.write("launch,bucket_m,m,cta,comm,control,smid,start_ns,end_ns,wait_ns,waits\n")
        for launch, ctas in launches:
            for cta, (comm, start, end) in enumerate(ctas):
                f.write(f"{launch},8192,8192,{cta},{comm},0,{cta},{start},{end},0,0\n")


def self_test():
    import tempfile
    ms = 1_000_000
    with tempfile.TemporaryDirectory() as d:
        # Launch 0 (kept as the base), launch 1 after 2 ms idle: rank 1's last 2 CTAs start 4.9 ms
        # late and both ranks' comm CTAs run 2.5 ms past the compute CTAs; launch 2 back to back
        # (0.1 ms gap), every CTA at the start, comm CTAs 0.1 ms past; launch 3: no CTA ran.
        def launch(t0, late, tail):
            t0 += 1000 * ms  # the clock never reads 0 (0: no record)
            ctas = [(1, t0, t0 + 5 * ms + tail)] * 2 + [(0, t0, t0 + 5 * ms)] * 4
            return ctas + [(0, t0 + 49 * ms // 10, t0 + 53 * ms // 10)] * late
        for rank in (0, 1):
            late = 2 if rank == 1 else 0
            write_trace(os.path.join(d, f"job_matmul_all_reduce_rank{rank}.csv"), [
                (0, launch(0, 0, 0)),
                (1, launch(12 * ms, late, 25 * ms // 10)),
                (2, launch(12 * ms + 75 * ms // 10 + ms // 10, 0, ms // 10)),
                (3, [(1, 0, 0)] * 6)])
        per_file, ranks_of = load(d)
        assert len(per_file) == 2, per_file.keys()
        assert set(per_file["job_matmul_all_reduce_rank0.csv"]) == {0, 1, 2}, "launch 3 left out"
        groups = {(f, k): ds for f, k, _, ds in grouped(per_file, ranks_of, 0.5)}
        r0, r1 = "job_matmul_all_reduce_rank0.csv", "job_matmul_all_reduce_rank1.csv"
        # Rank 0 had no late CTA of its own, but its peer did: "+late" for both ranks.
        assert set(k for f, k in groups if f == r0) == {"after_idle+late", "back_to_back"}, groups
        idle1 = groups[(r1, "after_idle+late")][0]
        assert idle1["late_ctas"] == 2, idle1
        assert abs(idle1["comm_tail"] - 2.5) < 1e-6, idle1
        assert abs(idle1["ms"] - 7.5) < 1e-6, idle1
        b2b0 = groups[(r0, "back_to_back")][0]
        assert b2b0["late_ctas"] == 0 and abs(b2b0["comm_tail"] - 0.1) < 1e-6, b2b0
        assert abs(b2b0["gap"] - 0.1) < 1e-6, b2b0
    print("launch_trace_summary: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--idle-ms", type=float, default=0.5,
                    help="a gap after the launch before longer than this marks a launch after idle")
    ap.add_argument("--per-launch", action="store_true")
    ap.add_argument("--self-test", action="store_true",
                    help="check the summary on made-up traces and exit")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return
    if a.dir is None:
        ap.error("DIR is required")
    per_file, ranks_of = load(a.dir)
    if not per_file:
        sys.exit(f"no trace files in {a.dir}")
    print("file,kind_of_launch,bucket_m,launches," + ",".join(COLUMNS) +
          "  # medians, ms (late_ctas a count); +late: some rank of the op had late CTAs")
    for name, kind, bucket, ds in grouped(per_file, ranks_of, a.idle_ms):
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

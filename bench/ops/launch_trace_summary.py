#!/usr/bin/env python3
"""Reads per-CTA timelines (%globaltimer: one clock for every process on a GPU, so ranks'
launches line up) from either writer:
  - the ops with SYNCOPATE_OPS_TRACE_DIR set (ops/launch_trace.h): DIR/<job>_<kind>_rank<r>.csv,
    many launches a file, columns launch,bucket_m,m,cta,comm,control,smid,start_ns,end_ns,
    wait_ns,waits;
  - syncopate_tp_bench --trace DIR (impl/trace.cuh): DIR/<tag>_rank<r>.csv, one launch a file,
    without the launch, bucket_m, m and control columns (read as 0).

    launch_trace_summary.py DIR [--idle-ms 0.5] [--per-launch]
    launch_trace_summary.py --timeline [TAG_SUBSTRING] DIR
    launch_trace_summary.py --self-test

Default: where each fused launch's time went, as medians per file (one op on one rank) of
launches after idle (a gap after the launch before of more than --idle-ms: first runs) and of
launches back to back, each split by whether some rank of the op started CTAs late ("+late":
after a tenth of the launch, not resident at its start); --per-launch adds every launch. `skew`
is this rank's start minus the earliest rank's start of the same launch; comm_tail how long the
comm CTAs ran on after the compute CTAs (the transfers left to them alone).

--timeline: per tag (the file name less _rank<r>.csv) and launch, one line a rank, in us from the
launch's earliest CTA start: CTA start and end first/median/last (a late last start: CTAs that
were not resident), the tile waits summed and the largest, when the comm CTAs ended, and how
many SMs more than one rank used.

--self-test checks both modes on made-up traces (a CTest test)."""
import argparse
import collections
import csv
import glob
import os
import re
import statistics
import sys


# The tp bench's files hold one launch and no op geometry: absent columns read as these.
ABSENT = {"launch": 0, "bucket_m": 0, "m": 0, "control": 0}


def read(path):
    launches = collections.defaultdict(list)
    with open(path) as f:
        for row in csv.DictReader(f):
            cta = dict(ABSENT, **{k: int(v) for k, v in row.items()})
            launches[cta["launch"]].append(cta)
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


def timeline(directory, want=""):
    """[(header, {rank: numbers}, SMs more than one rank used, SMs used)], a launch a tag whose
    name holds want; times in us from the launch's earliest CTA start on any rank."""
    tags = collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(directory, "*_rank*.csv"))):
        m = re.match(r"(.*)_rank(\d+)\.csv$", os.path.basename(path))
        if m and want in m.group(1):
            tags[m.group(1)][int(m.group(2))] = read(path)
    out = []
    for tag, ranks in sorted(tags.items()):
        launches = sorted(set().union(*ranks.values()))
        for launch in launches:
            ran = {rank: [c for c in per_launch.get(launch, []) if c["start_ns"]]
                   for rank, per_launch in sorted(ranks.items())}
            ran = {rank: ctas for rank, ctas in ran.items() if ctas}
            if not ran:
                continue  # a launch none of whose CTAs wrote a record
            t0 = min(c["start_ns"] for ctas in ran.values() for c in ctas)
            def us(ns):
                return (ns - t0) / 1000.0
            numbers, users = {}, collections.defaultdict(set)
            for rank, ctas in ran.items():
                starts = sorted(us(c["start_ns"]) for c in ctas)
                ends = sorted(us(c["end_ns"]) for c in ctas)
                waits = [c["wait_ns"] / 1000.0 for c in ctas]
                comm_ends = [us(c["end_ns"]) for c in ctas if c["comm"]]
                for c in ctas:
                    users[c["smid"]].add(rank)
                numbers[rank] = {
                    "ctas": len(ctas), "sms": len({c["smid"] for c in ctas}),
                    "start": (starts[0], statistics.median(starts), starts[-1]),
                    "end": (ends[0], statistics.median(ends), ends[-1]),
                    "wait_sum": sum(waits), "wait_max": max(waits),
                    "comm_end": (min(comm_ends), max(comm_ends)) if comm_ends else None}
            header = f"== {tag}" + (f" launch {launch}" if len(launches) > 1 else "")
            shared = sum(1 for rs in users.values() if len(rs) > 1)
            out.append((header, numbers, shared, len(users)))
    return out


def timeline_lines(launches):
    lines = []
    for header, numbers, shared, sms in launches:
        lines.append(header)
        for rank, n in numbers.items():
            (s0, s1, s2), (e0, e1, e2) = n["start"], n["end"]
            comm = f"{n['comm_end'][0]:8.1f}-{n['comm_end'][1]:8.1f}" if n["comm_end"] else "-"
            lines.append(f"  rank {rank}: {n['ctas']} CTAs on {n['sms']} SMs | start {s0:8.1f} "
                         f"{s1:8.1f} {s2:8.1f} | end {e0:8.1f} {e1:8.1f} {e2:8.1f} | wait sum "
                         f"{n['wait_sum']:9.1f} max {n['wait_max']:8.1f} | comm end {comm}")
        lines.append(f"  SMs used by more than one rank in this launch: {shared} of {sms}")
    return lines


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
        # --timeline on the ops' files: a header a launch that left records (3 left none).
        assert [t[0] for t in timeline(d)] == [
            f"== job_matmul_all_reduce launch {n}" for n in (0, 1, 2)], timeline(d)
    with tempfile.TemporaryDirectory() as d:
        # The tp bench's files: one launch, no launch/bucket_m/m/control columns. Rank 1's last
        # CTA started 700 us late; its CTA 3 never ran (record zeroed, SM 0 as read back).
        t = 10**12
        for rank, ctas in ((0, [(1, 0, 0, 50_000, 0), (0, 1, 1_000, 30_000, 2_000),
                                (0, 2, 2_000, 40_000, 3_000)]),
                           (1, [(1, 2, 500, 60_000, 0), (0, 3, 1_500, 35_000, 1_000),
                                (0, 4, 700_000, 720_000, 500), None])):
            with open(os.path.join(d, f"ag_dynamic_rank{rank}.csv"), "w") as f:
                f.write("cta,comm,smid,start_ns,end_ns,wait_ns,waits\n")
                for cta, c in enumerate(ctas):
                    comm, smid, start, end, wait = c or (0, 0, -t, -t, 0)
                    f.write(f"{cta},{comm},{smid},{t + start},{t + end},{wait},{wait // 500}\n")
        rows = read(os.path.join(d, "ag_dynamic_rank1.csv"))
        assert list(rows) == [0] and len(rows[0]) == 4, rows
        assert all(c["control"] == 0 and c["bucket_m"] == 0 for c in rows[0]), rows
        [(header, numbers, shared, sms)] = timeline(d, "ag_")
        assert header == "== ag_dynamic", header
        r0, r1 = numbers[0], numbers[1]
        assert (r0["ctas"], r0["sms"], r1["ctas"], r1["sms"]) == (3, 3, 3, 3), numbers
        assert r0["start"] == (0.0, 1.0, 2.0) and r0["end"] == (30.0, 40.0, 50.0), r0
        assert r1["start"] == (0.5, 1.5, 700.0) and r1["end"] == (35.0, 60.0, 720.0), r1
        assert (r0["wait_sum"], r0["wait_max"], r1["wait_sum"], r1["wait_max"]) == (
            5.0, 3.0, 1.5, 1.0), numbers
        assert r0["comm_end"] == (50.0, 50.0) and r1["comm_end"] == (60.0, 60.0), numbers
        assert (shared, sms) == (1, 5), (shared, sms)  # SM 2; the unrun CTA's SM 0 not counted
        assert timeline(d, "rs_") == []
        lines = timeline_lines(timeline(d))
        assert lines[1] == ("  rank 0: 3 CTAs on 3 SMs | start      0.0      1.0      2.0 | end "
                            "    30.0     40.0     50.0 | wait sum       5.0 max      3.0 | "
                            "comm end     50.0-    50.0"), lines
        assert lines[3] == "  SMs used by more than one rank in this launch: 1 of 5", lines
    print("launch_trace_summary: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--idle-ms", type=float, default=0.5,
                    help="a gap after the launch before longer than this marks a launch after idle")
    ap.add_argument("--per-launch", action="store_true")
    ap.add_argument("--timeline", nargs="?", const="", metavar="TAG_SUBSTRING",
                    help="per tag and launch, one line a rank: when its CTAs started and ended")
    ap.add_argument("--self-test", action="store_true",
                    help="check the summary on made-up traces and exit")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return
    if a.dir is None and a.timeline:
        a.dir, a.timeline = a.timeline, ""  # `--timeline DIR`: the optional value took DIR
    if a.dir is None:
        ap.error("DIR is required")
    if a.timeline is not None:
        launches = timeline(a.dir, a.timeline)
        if not launches:
            sys.exit(f"no trace files matching '{a.timeline}' in {a.dir}")
        print("\n".join(timeline_lines(launches)))
        return
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

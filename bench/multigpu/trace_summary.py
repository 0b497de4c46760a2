#!/usr/bin/env python3
"""Summarises the per-CTA traces of syncopate_tp_bench --trace DIR (impl/trace.cuh).

For each traced row (all ranks' CSVs of one tag), one line per rank, times in microseconds from
the earliest CTA start of any rank (the ranks share one GPU, so %globaltimer is one clock):
  start: first / median / last CTA start (a late last start: CTAs that were not resident)
  end:   first / median / last CTA end    (the last end is the kernel's end)
  wait:  tile waits summed over the CTAs, and the largest one CTA spent
  comm:  when the comm CTAs ended (their program plus, when they join, their tiles)
Usage: trace_summary.py DIR [TAG_SUBSTRING]
"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict


def load(path):
    with open(path) as f:
        return [{k: int(v) for k, v in row.items()} for row in csv.DictReader(f)]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    want = sys.argv[2] if len(sys.argv) > 2 else ""
    tags = defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*_rank*.csv"))):
        m = re.match(r"(.*)_rank(\d+)\.csv$", os.path.basename(path))
        if m and want in m.group(1):
            tags[m.group(1)][int(m.group(2))] = load(path)
    for tag, ranks in sorted(tags.items()):
        t0 = min(r["start_ns"] for rows in ranks.values() for r in rows if r["start_ns"])
        us = lambda ns: (ns - t0) / 1000.0
        print(f"== {tag}")
        for rank, rows in sorted(ranks.items()):
            rows = [r for r in rows if r["start_ns"]]
            starts = sorted(us(r["start_ns"]) for r in rows)
            ends = sorted(us(r["end_ns"]) for r in rows)
            waits = [r["wait_ns"] / 1000.0 for r in rows]
            comm_ends = [us(r["end_ns"]) for r in rows if r["comm"]]
            sms = len({r["smid"] for r in rows})
            print(f"  rank {rank}: {len(rows)} CTAs on {sms} SMs | start {starts[0]:8.1f} "
                  f"{statistics.median(starts):8.1f} {starts[-1]:8.1f} | end {ends[0]:8.1f} "
                  f"{statistics.median(ends):8.1f} {ends[-1]:8.1f} | wait sum {sum(waits):9.1f} "
                  f"max {max(waits):8.1f} | comm end "
                  + (f"{min(comm_ends):8.1f}-{max(comm_ends):8.1f}" if comm_ends else "-"))
        shared = defaultdict(set)
        for rank, rows in ranks.items():
            for r in rows:
                if r["start_ns"]:
                    shared[r["smid"]].add(rank)
        both = sum(1 for s in shared.values() if len(s) > 1)
        print(f"  SMs used by more than one rank in this launch: {both} of {len(shared)}")


if __name__ == "__main__":
    main()

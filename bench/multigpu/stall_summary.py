#!/usr/bin/env python3
"""Counts issue 16's stall goal from syncopate_tp_bench CSVs: per (mode, world, backend, chunks),
how many launches ran and whether any row of that variant stopped (check "error": a bounded wait
expired, the rank that did not deliver named in the note) or computed wrong elements ("fail").

  stall_summary.py --launches 10000 OUT/stall_ts_8_w4.csv ...   # file names give mode and world
  stall_summary.py --self-test

A variant's launches are its comm-only, fused and unfused rows (each `launches` reps); the local
GEMM and cuBLAS rows have no protocol and are left out, and so are "unsupported" rows (a plan
the backend cannot run, e.g. a reduction on the copy engine: nothing was launched). Prints a markdown table; exits 1 when any
variant stalled or failed, 0 when every one passed.
"""
import argparse
import csv
import os
import re
import sys
import tempfile

PROTOCOL_IMPLS = {"comm-only", "syncopate", "unfused"}
NAME = re.compile(r"stall_(?P<mode>[a-z]+_\d+)_w(?P<world>\d+)\.csv$")


def summarize(paths, launches):
    """{(mode, world, backend, chunks): [rows, passed, stalled, failed, first_problem]}"""
    out = {}
    for path in paths:
        m = NAME.search(os.path.basename(path))
        if not m:
            raise ValueError(f"{path}: want a name like stall_mps_8_w4.csv")
        mode, world = m["mode"].replace("_", ":"), int(m["world"])
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["impl"] not in PROTOCOL_IMPLS or r["check"] == "unsupported":
                    continue
                key = (mode, world, r["backend"], int(r["chunks"]))
                s = out.setdefault(key, [0, 0, 0, 0, ""])
                s[0] += 1
                check = r["check"]
                if check == "pass":
                    s[1] += 1
                elif check == "fail":
                    s[3] += 1
                else:
                    s[2] += 1
                if check not in ("pass", "skip") and not s[4]:
                    s[4] = f'{r["impl"]} {r["workload"]}: {r["note"][:160]}'
    return out


def table(summary, launches):
    lines = ["| mode | world | backend | chunks | launches | stalled rows | wrong rows | first problem |",
             "|---|---|---|---|---|---|---|---|"]
    bad = False
    for (mode, world, backend, chunks), (rows, passed, stalled, failed, first) in sorted(
            summary.items()):
        bad |= stalled > 0 or failed > 0
        lines.append(f"| {mode} | {world} | {backend} | {chunks} | {rows * launches} | "
                     f"{stalled} | {failed} | {first} |")
    return "\n".join(lines), bad


def self_test():
    header = "impl,workload,model,tokens,m,n,k,world,backend,chunks,time_ms,check,note\n"
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "stall_mps_8_w4.csv")
        with open(p, "w") as f:
            f.write(header)
            f.write("local-gemm,ag,m,2048,1,1,1,4,-,0,1.0,pass,\n")
            f.write("comm-only,ag,m,2048,1,1,1,4,ce,1,1.0,pass,\n")
            f.write("syncopate,ag,m,2048,1,1,1,4,ce,1,-1,error,rank 0 waited 2000 ms\n")
            f.write("syncopate,ag,m,2048,1,1,1,4,sm,2,1.0,pass,\n")
            f.write("unfused,rs,m,2048,1,1,1,4,sm,2,1.0,fail,3 wrong elements\n")
            f.write("comm-only,rs,m,2048,1,1,1,4,ce,1,,unsupported,copy-engine backend moves copies only\n")
        s = summarize([p], 10)
        assert set(s) == {("mps:8", 4, "ce", 1), ("mps:8", 4, "sm", 2)}, s
        assert s[("mps:8", 4, "ce", 1)][:4] == [2, 1, 1, 0], s
        assert s[("mps:8", 4, "ce", 1)][4].startswith("syncopate ag: rank 0 waited"), s
        assert s[("mps:8", 4, "sm", 2)][:4] == [2, 1, 0, 1], s
        text, bad = table(s, 10)
        assert bad and "| mps:8 | 4 | ce | 1 | 20 | 1 | 0 |" in text, text
        good = os.path.join(d, "stall_ts_1_w2.csv")
        with open(good, "w") as f:
            f.write(header + "comm-only,ag,m,2048,1,1,1,2,sm,1,1.0,pass,\n")
        assert not table(summarize([good], 5), 5)[1]
        try:
            summarize([os.path.join(d, "other.csv")], 1)
            raise AssertionError("a badly named file was accepted")
        except ValueError:
            pass
    print("stall_summary: self-test passed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=10000, help="reps per row (the bench's --reps)")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("csv", nargs="*")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    text, bad = table(summarize(a.csv, a.launches), a.launches)
    print(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

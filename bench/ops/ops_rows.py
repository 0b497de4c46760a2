#!/usr/bin/env python3
"""Turns the logs of bench/ops/ops_vs_torch.sh (one per model: ops_bench's table, then
torch_ops_check.py's timing) into rows of bench/results/concurrent_tp.csv, printed to stdout.

  ops_rows.py --date 2026-12-07 --note "H100, MPS 50% x2, connections 8" MODEL.log [...]
  ops_rows.py --self-test

The model is the log's file name without ".log" unless --model names it (for one log such as
ar_first_run_ab.sh's check.log). Rows, per (op, M):
  syncopate-op    ops_bench's run ms (events around repeated runs), max over ranks; backend and
                  chunks from its table, the path (fused or unfused) in the note;
  syncopate-py    the op from Python: the median of single timed runs, max over ranks;
  torch-async-tp  torch.ops.symm_mem's fused op (for ar: matmul + one_shot_all_reduce).
A Python row is "pass" only when the log says "output ok"; a missing or failed time is "error"
with no time. The backend is the one ops_bench was asked for (its header line), which is the one
it ran only when named: ops_vs_torch.sh always passes --backend sm. (n, k) are per rank, as in the rest of the file: Python's `create` line gives them.
"""
import argparse
import csv
import io
import os
import re
import sys
import tempfile

HEADER = ["date", "workload", "model", "m", "n", "k", "tp", "impl", "backend", "chunks",
          "time_ms", "check", "note"]
OP_OF_BENCH = {"all_gather_matmul": "ag", "matmul_reduce_scatter": "rs",
               "matmul_all_reduce": "ar"}
PY_IMPL = {"syncopate": "syncopate-py", "symm_mem": "torch-async-tp"}

BENCH_HEADER = re.compile(r"^(\w+) world (\d+), N=(\d+) K=(\d+) per rank, path \S+, backend (\S+)")
BENCH_ROW = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+(fused|unfused)\s+(\d+)\s+([\d.]+)\s")
PY_WORLD = re.compile(r"syncopate \S+ \S+ ABI \d+; world (\d+)")
PY_CREATE = re.compile(r"^PASS create (\w+): max_m=\d+ n=(\d+) k=(\d+)")
PY_TIME = re.compile(r"^time,(\w+),(\d+),(syncopate|symm_mem),(\S+)\s*#(.*)$")


def parse(lines):
    """The measurements of one log: ops_bench's rows keyed by (op, M) with their shape, and
    Python's rows as (op, M, impl, ms or None, ok, note)."""
    bench, shapes, py = {}, {}, []
    op = world = None
    py_world = None
    for line in lines:
        line = line.rstrip("\n")
        if m := BENCH_HEADER.match(line):
            op, world = OP_OF_BENCH.get(m[1]), int(m[2])
            if op:
                shapes[op] = (int(m[3]), int(m[4]), world)
            backend = m[5]
        elif (m := BENCH_ROW.match(line)) and op:
            key = (op, int(m[2]))
            run_ms = float(m[6])
            prev = bench.get(key)
            if prev is None or run_ms > prev["ms"]:
                bench[key] = {"ms": run_ms, "path": m[4], "chunks": int(m[5]), "backend": backend,
                              "world": world}
        elif m := PY_WORLD.search(line):
            py_world = int(m[1])
        elif m := PY_CREATE.match(line):
            shapes.setdefault(m[1], (int(m[2]), int(m[3]), py_world))
        elif m := PY_TIME.match(line):
            ms = None if m[4] == "nan" else float(m[4])
            ok = ms is not None and "output ok" in m[5]
            py.append((m[1], int(m[2]), PY_IMPL[m[3]], ms, ok, m[5].strip()))
    return bench, shapes, py


def convert(date, note, model, lines, out):
    """Writes the rows of one log to the csv writer `out`."""
    bench, shapes, py = parse(lines)
    for (op, m), b in sorted(bench.items()):
        n, k, world = shapes[op]
        row_note = "; ".join(x for x in (note, "ops_bench run ms, max over ranks",
                                         b["path"] + " path") if x)
        out.writerow([date, op, model, m, n, k, world, "syncopate-op", b["backend"], b["chunks"],
                      f"{b['ms']:.4f}", "pass", row_note])
    for op, m, impl, ms, ok, detail in py:
        if op not in shapes:
            continue
        n, k, world = shapes[op]
        b = bench.get((op, m))
        mine = impl == "syncopate-py"
        backend, chunks = (b["backend"], b["chunks"]) if mine and b else ("-", 0)
        how = ("torch_ops_check.py, median of single timed runs per rank, max over ranks"
               if mine else "torch.ops.symm_mem in torch_ops_check.py, same call")
        check = "pass" if ok else ("error" if ms is None else "fail")
        extra = "" if ok else detail[:200]
        row_note = "; ".join(x for x in (note, how, extra) if x)
        out.writerow([date, op, model, m, n, k, world, impl, backend, chunks,
                      "" if ms is None else f"{ms:.4f}", check, row_note])


SAMPLE = """matmul_all_reduce world 2, N=8192 K=14336 per rank, path auto, backend sm
rank M      bucket  path     chunks     run ms  cuBLAS ms run/cuBLAS   host us/call   graph ms  graph/run
1    8192   8192    unfused  1          5.999      5.292      1.134           18.7      6.169      1.008
0    8192   8192    unfused  1          5.990      5.552      1.080           21.1      6.169      1.008
0    2048   2048    fused    2          1.639      1.311      1.250           20.8      1.680      1.021
torch 2.11.0+cu130 cuda 13.0; NVIDIA H100 80GB HBM3, SMs seen per rank [66, 66]; syncopate 0.1.0 /x/libsyncopate.so ABI 1; world 2
PASS create ag: max_m=8192 n=14336 k=8192 in 1.5 s
PASS create ar: max_m=8192 n=8192 k=14336 in 0.1 s
time,op,M,impl,ms  # symm_mem ar: no fused matmul+all_reduce exists in torch.ops.symm_mem
time,ar,8192,syncopate,6.2471  # rank medians [6.2471, 6.2138]; output ok
time,ar,8192,syncopate-back-to-back,6.1410  # rank ms [6.141, 6.1407]; events
time,ar,8192,symm_mem,6.1380  # rank medians [6.138, 6.1257]; output ok
time,ar,8192,cublas,5.6868  # rank medians [5.6868, 4.9621]
time,ar,2048,syncopate,1.7000  # rank medians [1.7, 1.6]; output WRONG: max_abs=9
time,ar,2048,symm_mem,nan  # error: out of memory
time,ag,8192,syncopate,3.0  # rank medians [3.0, 2.9]; output ok
"""


def self_test():
    text = io.StringIO()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "llama3.1-70b.log")
        with open(path, "w") as f:
            f.write(SAMPLE)
        with open(path) as f:
            convert("2026-12-07", "H100", model_of(path, None), f, csv.writer(text))
    got = list(csv.reader(io.StringIO(text.getvalue())))
    assert all(len(r) == len(HEADER) for r in got), got
    impls = [(r[1], r[3], r[7]) for r in got]
    assert impls == [("ar", "2048", "syncopate-op"), ("ar", "8192", "syncopate-op"),
                     ("ar", "8192", "syncopate-py"), ("ar", "8192", "torch-async-tp"),
                     ("ar", "2048", "syncopate-py"), ("ar", "2048", "torch-async-tp"),
                     ("ag", "8192", "syncopate-py")], impls
    op_8192 = got[1]
    # The slower rank's run ms; ops_bench's (N, K); the table's path and chunks.
    assert op_8192[2:7] == ["llama3.1-70b", "8192", "8192", "14336", "2"], op_8192
    assert op_8192[8:12] == ["sm", "1", "5.9990", "pass"], op_8192
    assert op_8192[12].endswith("unfused path"), op_8192
    assert got[0][9] == "2" and got[0][12].endswith("fused path"), got[0]
    py_8192 = got[2]
    assert py_8192[8:12] == ["sm", "1", "6.2471", "pass"], py_8192  # backend from the table
    assert got[3][8:12] == ["-", "0", "6.1380", "pass"], got[3]
    assert got[4][11] == "fail" and "WRONG" in got[4][12], got[4]  # a wrong output never passes
    assert got[5][10:12] == ["", "error"] and "out of memory" in got[5][12], got[5]
    # ag: Python's create line gives the shape; no ops_bench table, so no backend.
    assert got[6][4:10] == ["14336", "8192", "2", "syncopate-py", "-", "0"], got[6]
    print("ops_rows: self-test passed")


def model_of(path, given):
    return given or os.path.basename(path).removesuffix(".log")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--date")
    ap.add_argument("--note", default="")
    ap.add_argument("--model", help="the model of every log (default: each log's file name)")
    ap.add_argument("--header", action="store_true", help="print the CSV header first")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("logs", nargs="*")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.date or not a.logs:
        ap.error("--date and at least one log are required")
    out = csv.writer(sys.stdout, lineterminator="\n")
    if a.header:
        out.writerow(HEADER)
    for path in a.logs:
        with open(path) as f:
            convert(a.date, a.note, model_of(path, a.model), f, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

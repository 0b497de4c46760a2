#!/usr/bin/env python3
"""Turns one device call's syncopate_tp_bench CSV and torch_mps_baseline.py CSV into rows of
bench/results/concurrent_tp.csv (issue 16's header), printed to stdout.

  concurrent_rows.py --date 2026-12-05 --note "H200, MPS, connections 8" TP_CSV [TORCH_CSV]
  concurrent_rows.py --date ... --torch-only TP_CSV TORCH_CSV   (PyTorch's rows only; TP_CSV
                                                                  names their models)
  concurrent_rows.py --self-test

Bench impls map to local-gemm, cublas, comm-only, syncopate, unfused ("select" rows are left out:
they repeat a measured row). PyTorch's gemm/serial/comm/fused become torch-gemm, torch-serial,
torch-comm, torch-async-tp, with the per-rank (n, k) of the bench's problems (the script takes the
full FFN size) and the model of the bench row with the same per-rank shape.
"""
import argparse
import csv
import io
import os
import sys
import tempfile

HEADER = ["date", "workload", "model", "m", "n", "k", "tp", "impl", "backend", "chunks",
          "time_ms", "check", "note"]
BENCH_IMPL = {"local-gemm": "local-gemm", "cublas-gemm": "cublas", "comm-only": "comm-only",
              "syncopate": "syncopate", "unfused": "unfused"}
TORCH_IMPL = {"gemm": "torch-gemm", "serial": "torch-serial", "comm": "torch-comm",
              "fused": "torch-async-tp"}


def convert(date, note, tp_csv, torch_csv, out, torch_only=False):
    """Writes the rows of `tp_csv` (unless `torch_only`; it still names the models) and of
    `torch_csv`, if given, to the csv writer `out`."""
    models = {}
    with open(tp_csv, newline="") as f:
        for r in csv.DictReader(f):
            if r["impl"] not in BENCH_IMPL:
                continue
            models[(r["workload"], r["m"], r["n"], r["k"], r["world"])] = r["model"]
            if torch_only:
                continue
            row_note = "; ".join(x for x in (note, r["note"][:200]) if x)
            time = r["time_ms"] if r["time_ms"] not in ("", "-1") else ""
            out.writerow([date, r["workload"], r["model"], r["m"], r["n"], r["k"], r["world"],
                          BENCH_IMPL[r["impl"]], r["backend"], r["chunks"], time, r["check"],
                          row_note])
    if not torch_csv:
        return
    with open(torch_csv, newline="") as f:
        for r in csv.DictReader(f):
            if r["impl"] not in TORCH_IMPL:
                continue
            world = int(r["world"])
            n, k = int(r["n"]), int(r["k"])
            # ag: [M, K] x [K, N/P]; rs (the script's default --rs-nk swap): [M, F/P] x [F/P, H].
            n, k = (n // world, k) if r["workload"] == "ag" else (n, k // world)
            key = (r["workload"], r["m"], str(n), str(k), str(world))
            check = "pass" if r["rel_err"] in ("nan", "") or float(r["rel_err"]) < 1e-2 else "fail"
            row_note = "; ".join(x for x in (note, "PyTorch, same call") if x)
            out.writerow([date, r["workload"], models.get(key, "?"), r["m"], n, k, world,
                          TORCH_IMPL[r["impl"]], "-", 0, r["time_ms"], check, row_note])


def self_test():
    bench_header = ("impl,workload,model,tokens,m,n,k,world,backend,chunks,time_ms,tflops,"
                    "t_gemm_local_ms,t_comm_ms,bound_ms,ratio_to_bound,rel_err,check,out_sum,"
                    "out_sq,note\n")
    rows = [
        'local-gemm,rs,"llama3.1-8b",2048,2048,4096,3584,4,-,0,0.32,1,0.32,0.17,0.32,1,0,pass,0,0,'
        '"checked, own partial"',
        'cublas-gemm,rs,"llama3.1-8b",2048,2048,4096,3584,4,-,0,0.28,1,0,0,0,0,-1,skip,0,0,""',
        'comm-only,rs,"llama3.1-8b",2048,2048,4096,3584,4,sm,1,0.18,0,0,0,0,0,0,pass,0,0,"grid 31"',
        'syncopate,rs,"llama3.1-8b",2048,2048,4096,3584,4,sm,1,-1,0,0,0,0,0,0,error,0,0,"timed out"',
        'select,rs,"llama3.1-8b",2048,2048,4096,3584,4,sm,1,0.5,0,0,0,0,0,0,pass,0,0,"repeat"',
    ]
    torch_rows = [
        "serial,rs,2048,4096,14336,4,0.58,0,",
        "gemm,rs,2048,4096,14336,4,0.38,nan,",
        "fused,rs,2048,4096,14336,4,0.94,0.5,",
        "other,rs,2048,4096,14336,4,1.0,0,",
        "comm,ag,8192,14336,4096,2,0.25,0,",
    ]
    with tempfile.TemporaryDirectory() as d:
        tp, torch = os.path.join(d, "tp.csv"), os.path.join(d, "torch.csv")
        with open(tp, "w") as f:
            f.write(bench_header + "\n".join(rows) + "\n")
        with open(torch, "w") as f:
            f.write("impl,workload,m,n,k,world,time_ms,rel_err,note\n" + "\n".join(torch_rows) + "\n")
        text = io.StringIO()
        convert("2026-12-06", "H200, MPS 25% x4", tp, torch, csv.writer(text, lineterminator="\n"))
        got = list(csv.reader(io.StringIO(text.getvalue())))
    impls = [r[7] for r in got]
    assert impls == ["local-gemm", "cublas", "comm-only", "syncopate", "torch-serial",
                     "torch-gemm", "torch-async-tp", "torch-comm"], impls
    assert all(len(r) == len(HEADER) for r in got), got
    assert got[0][12] == "H200, MPS 25% x4; checked, own partial", got[0]
    assert got[3][10] == "" and got[3][11] == "error", got[3]  # no time for a failed row
    # PyTorch's rs (n, k) are the full FFN's: per rank (4096, 14336 / 4), the bench row's model.
    assert got[4][2:7] == ["llama3.1-8b", "2048", "4096", "3584", "4"], got[4]
    assert got[4][11] == "pass" and got[5][11] == "pass" and got[6][11] == "fail", got[4:7]
    # ag: (n / world, k); no bench row of that shape, so no model.
    assert got[7][2:7] == ["?", "8192", "7168", "4096", "2"], got[7]
    assert got[7][12] == "H200, MPS 25% x4; PyTorch, same call", got[7]
    text = io.StringIO()
    with tempfile.TemporaryDirectory() as d:
        tp, torch = os.path.join(d, "tp.csv"), os.path.join(d, "torch.csv")
        with open(tp, "w") as f:
            f.write(bench_header + "\n".join(rows) + "\n")
        with open(torch, "w") as f:
            f.write("impl,workload,m,n,k,world,time_ms,rel_err,note\n" + torch_rows[0] + "\n")
        convert("d", "", tp, torch, csv.writer(text, lineterminator="\n"), torch_only=True)
    only = list(csv.reader(io.StringIO(text.getvalue())))
    assert [r[7] for r in only] == ["torch-serial"] and only[0][2] == "llama3.1-8b", only
    print("concurrent_rows: self-test passed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--date")
    ap.add_argument("--note", default="")
    ap.add_argument("--torch-only", action="store_true",
                    help="PyTorch's rows only (TP_CSV still names their models)")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("tp_csv", nargs="?")
    ap.add_argument("torch_csv", nargs="?")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.date or not a.tp_csv or (a.torch_only and not a.torch_csv):
        ap.error("--date and TP_CSV are required (and TORCH_CSV with --torch-only)")
    convert(a.date, a.note, a.tp_csv, a.torch_csv, csv.writer(sys.stdout, lineterminator="\n"),
            a.torch_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Turns one device call's syncopate_tp_bench CSV and torch_mps_baseline.py CSV into rows of
bench/results/concurrent_tp.csv (issue 16's header), printed to stdout.

  concurrent_rows.py --date 2026-12-05 --note "H200, MPS, connections 8" TP_CSV [TORCH_CSV]

Bench impls map to local-gemm, cublas, comm-only, syncopate, unfused ("select" rows are left out:
they repeat a measured row). PyTorch's gemm/serial/comm/fused become torch-gemm, torch-serial,
torch-comm, torch-async-tp, with the per-rank (n, k) of the bench's problems (the script takes the
full FFN size) and the model of the bench row with the same per-rank shape.
"""
import argparse
import csv
import sys

HEADER = ["date", "workload", "model", "m", "n", "k", "tp", "impl", "backend", "chunks",
          "time_ms", "check", "note"]
BENCH_IMPL = {"local-gemm": "local-gemm", "cublas-gemm": "cublas", "comm-only": "comm-only",
              "syncopate": "syncopate", "unfused": "unfused"}
TORCH_IMPL = {"gemm": "torch-gemm", "serial": "torch-serial", "comm": "torch-comm",
              "fused": "torch-async-tp"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--date", required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("tp_csv")
    ap.add_argument("torch_csv", nargs="?")
    a = ap.parse_args()
    out = csv.writer(sys.stdout, lineterminator="\n")
    models = {}
    for r in csv.DictReader(open(a.tp_csv, newline="")):
        if r["impl"] not in BENCH_IMPL:
            continue
        models[(r["workload"], r["m"], r["n"], r["k"], r["world"])] = r["model"]
        note = "; ".join(x for x in (a.note, r["note"][:200]) if x)
        time = r["time_ms"] if r["time_ms"] not in ("", "-1") else ""
        out.writerow([a.date, r["workload"], r["model"], r["m"], r["n"], r["k"], r["world"],
                      BENCH_IMPL[r["impl"]], r["backend"], r["chunks"], time, r["check"], note])
    if not a.torch_csv:
        return
    for r in csv.DictReader(open(a.torch_csv, newline="")):
        if r["impl"] not in TORCH_IMPL:
            continue
        world = int(r["world"])
        n, k = int(r["n"]), int(r["k"])
        # ag: [M, K] x [K, N/P]; rs (the script's default --rs-nk swap): [M, F/P] x [F/P, H].
        n, k = (n // world, k) if r["workload"] == "ag" else (n, k // world)
        key = (r["workload"], r["m"], str(n), str(k), str(world))
        check = "pass" if r["rel_err"] in ("nan", "") or float(r["rel_err"]) < 1e-2 else "fail"
        note = "; ".join(x for x in (a.note, "PyTorch, same call") if x)
        out.writerow([a.date, r["workload"], models.get(key, "?"), r["m"], n, k, world,
                      TORCH_IMPL[r["impl"]], "-", 0, r["time_ms"], check, note])


if __name__ == "__main__":
    main()

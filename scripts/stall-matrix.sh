#!/usr/bin/env bash
# On the lent GPU machine (after scripts/gpu-run.sh, with .device/bin carried): issue 16's stall
# goal, LAUNCHES launches per (backend, chunks, world), in each concurrency mode. One
# syncopate_tp_bench run per (mode, world, backend) measures every variant with --reps LAUNCHES
# (a stall is a row whose bounded wait expired: check "error", the absent rank named), then
# bench/multigpu/stall_summary.py tables them; exits 1 if any variant stalled or was wrong.
#
#   MODES="ts:8 mps:8" WORLDS="2 4" LAUNCHES=2000 scripts/stall-matrix.sh
#
# Defaults: MODES "ts:1 ts:8 ts:32 mps:1 mps:8 mps:32", WORLDS "2 3 4 8" (under MPS each rank gets
# 100/world percent of the SMs), CHUNKS 1,2,4,8, BACKENDS ce,sm (each its own bench run,
# appending to the one CSV), WORKLOADS ag,rs, LAUNCHES 10000, TOKENS 2048, MODEL llama3.1-8b;
# EXTRA: more syncopate_tp_bench flags (e.g. "--transfers-compute-ctas 1"). Logs and CSVs under
# $OUT (or ./gpu-out). The whole matrix is many device calls: about 50 rows x LAUNCHES launches
# per (mode, world), so pick MODES and WORLDS per call.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-modes.sh  # bin, out, library path, in_mode
export STEP_TIMEOUT=${STEP_TIMEOUT:-560}  # one (mode, world, backend) run; a call allows 600 s
launches=${LAUNCHES:-10000}
csvs=()
no_rows=0
for mode in ${MODES:-ts:1 ts:8 ts:32 mps:1 mps:8 mps:32}; do
  for world in ${WORLDS:-2 3 4 8}; do
    name="stall_${mode/:/_}_w$world"
    # One bench run per backend, appending to one CSV: a stalled launch breaks the group and ends
    # its run, so a stall on one backend must not leave the other's rows unrun.
    backends=${BACKENDS:-ce,sm}
    for backend in ${backends//,/ }; do
      echo "== $name $backend"
      MPS_PCT=$((100 / world)) in_mode "$mode" "$bin/syncopate_tp_bench" --gpus 1 \
        --ranks-per-gpu "$world" --tp "$world" --workloads "${WORKLOADS:-ag,rs}" \
        --models "${MODEL:-llama3.1-8b}" --tokens "${TOKENS:-2048}" --chunks "${CHUNKS:-1,2,4,8}" \
        --backends "$backend" --reps "$launches" --warmup 0 --timeout-ms 2000 \
        --csv "$out/$name.csv" --cache-dir "$out/cache" ${EXTRA:-} >"$out/$name.$backend.log" 2>&1
      echo "   exit $?"
    done
    if [[ -f $out/$name.csv ]]; then
      csvs+=("$out/$name.csv")
    else
      echo "   no rows at all (see $name.*.log)"; no_rows=1
    fi
  done
done
python3 bench/multigpu/stall_summary.py --launches "$launches" "${csvs[@]}" | tee "$out/stall.md"
summary=$?
# A (mode, world) that produced no row proves nothing: a failure, not a clean table.
exit $((summary != 0 || no_rows))

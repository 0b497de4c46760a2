#!/usr/bin/env bash
# On the lent GPU machine, from the repository root with .device/bin carried (scripts/gpu-run.sh
# built it): the GPU tests in every concurrency mode, then the GPU and control-plane benchmarks,
# each log in $OUT/logs.tgz (or ./gpu-out; a device call brings back only a few files), the GPU's
# name and the concurrent_tp.csv rows beside it. Runs everything even when one fails; exits 1 if
# any did.
#
# Modes (MODES, default all): ts:<c> runs the ranks time-sliced, mps:<c> as concurrent MPS clients
# (each at MPS_PCT percent of the SMs, default 50), both with CUDA_DEVICE_MAX_CONNECTIONS=<c>.
# MPS runs with private pipe/log folders and is always stopped at the end (trap); no device
# setting is changed. TESTS: the gtest filter of cuda_gpu_test per mode (default: the launch
# protocol's tests); the full binary runs once, time-sliced (SKIP_FULL=1: not at all).
# The ops' tests (ops_gpu_test) run in OPS_MODES (default ts:8 mps:8; SKIP_OPS=1: not at all).
# The copy engine's tests run again with 4 ranks at 25% each in QUARTER_MODES (default mps:8
# when MODES is not set, else none; the ops' part obeys SKIP_OPS).
# SKIP_BENCH=1: tests only. The benches include the ops from C++ and Python beside torch
# (ops_py_vs_cpp) and syncopate_tp_bench (tp_mps), both under MPS.
set -uo pipefail
cd "$(dirname "$0")/.."
# bin, out, the library path; MPS around a command and the concurrency modes (ts:<c>, mps:<c>).
source scripts/gpu-modes.sh
export UCX_MODULE_DIR=$bin/ucx SYNCOPATED=$bin/syncopated
failed=()
passed=()
step() {  # step NAME COMMAND...: runs it, logs to $out/NAME.log, keeps going
  local name=$1; shift
  echo "== $name: $*"
  local run=(timeout "${STEP_TIMEOUT:-300}") started=$SECONDS
  if declare -F "$1" >/dev/null; then run=(); fi  # a function applies the timeout itself
  if "${run[@]}" "$@" >"$out/$name.log" 2>&1; then
    tail -n 2 "$out/$name.log"; passed+=("$name ($((SECONDS - started)) s)")
  else
    echo "   FAILED (exit $?) after $((SECONDS - started)) s; last lines:"
    tail -n 25 "$out/$name.log"; failed+=("$name ($((SECONDS - started)) s)")
  fi
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
protocol_tests=${TESTS:-'Fused*:*FusedWorkload*:*WgmmaWorkload*:WgmmaDynamicTiles*:SymmetricMemory*:*InterNode*'}
if [[ -z ${SKIP_FULL:-} ]]; then
  step cuda_unit_test "$bin/cuda_unit_test"
  step cuda_gpu_test "$bin/cuda_gpu_test"
fi
if [[ -z ${SKIP_OPS:-} ]]; then
  for mode in ${OPS_MODES:-ts:8 mps:8}; do
    # Time-sliced ranks take every launch in turns: fewer capture replays there (the test's
    # default of 1,000 took 125 s at world 4 alone); concurrent (MPS) runs keep 1,000.
    export SYNCOPATE_OPS_REPLAYS=1000
    [[ $mode == ts:* ]] && SYNCOPATE_OPS_REPLAYS=${TS_REPLAYS:-150}
    step "ops_${mode/:/_}" in_mode "$mode" "$bin/ops_gpu_test"
  done
fi
for mode in ${MODES:-ts:1 ts:32 mps:1 mps:8 mps:32}; do
  step "protocol_${mode/:/_}" in_mode "$mode" "$bin/cuda_gpu_test" --gtest_filter="$protocol_tests"
done
# Four ranks with a quarter of the SMs each, as on the stall matrix's 4-rank rows: the copy
# engine's tests (bench/RESULTS.md, tenth session, says why). QUARTER_MODES: default mps:8 in a
# full run, none when MODES picks the modes (a targeted call asks for them by name).
quarter_default=mps:8
[[ -n ${MODES+set} ]] && quarter_default=""
for mode in ${QUARTER_MODES-$quarter_default}; do
  MPS_PCT=25 step "copy_engine_quarter_${mode/:/_}" in_mode "$mode" "$bin/cuda_gpu_test" \
    --gtest_filter='FusedCopyEngineTest.*'
  if [[ -z ${SKIP_OPS:-} ]]; then
    SYNCOPATE_OPS_REPLAYS=1000 MPS_PCT=25 step "ops_copy_engine_quarter_${mode/:/_}" in_mode \
      "$mode" "$bin/ops_gpu_test" --gtest_filter='*ce*w4*:*w4_ce*'
  fi
done
# Fused AllGather+GEMM and GEMM+ReduceScatter with the ranks as MPS clients, static against
# dynamic tile dealing, with a per-CTA trace of each fused row (bench/ops/launch_trace_summary.py
# --timeline $out/tp-trace reads them); PyTorch on the same shapes in the same MPS session where
# torch is installed; both as concurrent_tp.csv rows in $out/concurrent_rows.csv.
tp_mps() {
  mps_start || { echo "   MPS did not start"; return 1; }
  mkdir -p "$out/tp-trace"
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout "${STEP_TIMEOUT:-300}" "$bin/syncopate_tp_bench" \
    --gpus 1 --ranks-per-gpu 2 --tp 2 --workloads ag,rs --models llama3.1-8b \
    --tokens 8192,2048,128 --chunks 1,2 --backends sm --tile-dealing static,dynamic --reps 10 \
    --warmup 3 --csv "$out/tp.csv" --cache-dir "$out/tp-cache" --trace "$out/tp-trace"
  local rc=$?
  local torch_csv=""
  if [[ -f $bin/torch_mps_baseline.py ]] && python3 -c 'import torch' 2>/dev/null; then
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout "${STEP_TIMEOUT:-300}" python3 \
      "$bin/torch_mps_baseline.py" --world 2 --m 8192 --n 14336 --k 4096 --out "$out/torch.csv" \
      && torch_csv=$out/torch.csv
  fi
  mps_stop
  python3 "$bin/concurrent_rows.py" --date "$(date +%F)" \
    --note "$(head -c 60 "$out/gpu.txt"), MPS 50% x2" "$out/tp.csv" $torch_csv \
    > "$out/concurrent_rows.csv" || rc=1
  return $rc
}
# The ops from C++ (ops_bench) and from Python beside torch.ops.symm_mem (torch_ops_check.py),
# LLaMA-3.1-8B at TP=2 under MPS, each M its own bucket in both: issue 19's Python-against-C++
# and Syncopate-against-symm_mem figures from one call. Python against C++: the check's
# `syncopate-back-to-back` rows against ops_bench's `run ms` (both events around 20 runs issued
# back to back); its plain `syncopate` rows are medians of single lined-up runs, as torch's are.
ops_py_vs_cpp() {
  local rc=0 kind
  for kind in "ag --n 7168 --k 4096" "rs --n 4096 --k 7168" "ar --n 4096 --k 7168"; do
    in_mode mps:8 "$bin/ops_bench" --kind $kind --world 2 --max-m 8192 --m 8192,2048 \
      --backend sm --cache-dir "$out/ops-cache" || rc=1
  done
  # The run call's host time with no copy at all (shard in the workspace, output in place).
  in_mode mps:8 "$bin/ops_bench" --kind ag --n 7168 --k 4096 --world 2 --max-m 8192 \
    --m 8192,2048,128 --backend sm --shard-in-workspace --cache-dir "$out/ops-cache" || rc=1
  if [[ -f $bin/python/torch_ops_check.py ]] && python3 -c 'import torch' 2>/dev/null; then
    in_mode mps:8 python3 "$bin/python/torch_ops_check.py" --lib "$bin/libsyncopate.so" \
      --world 2 --parts ops,timing,graph --ms 8192,2048 --time-ms 8192,2048 \
      --buckets 8192,2048 --cache-dir "$out/ops-cache" || rc=1
  fi
  return $rc
}
if [[ -z ${SKIP_BENCH:-} ]]; then
  step ops_py_vs_cpp ops_py_vs_cpp
  step tp_bench_mps tp_mps
  step demo "$bin/syncopate" demo --quiet-timeline --cache-dir="$out/demo-cache"
  step gpu_overlap_bench "$bin/gpu_overlap_bench"
  step inter_node_bench "$bin/inter_node_bench"
fi
pack_out gpu.txt concurrent_rows.csv  # every log in $out/logs.tgz
# One line each at the end, where a truncated output keeps them.
echo "passed: ${passed[*]:-none}"
if ((${#failed[@]})); then echo "failed: ${failed[*]}"; exit 1; fi
echo "all GPU checks passed"

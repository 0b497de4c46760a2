#!/usr/bin/env bash
# On the lent GPU machine, from the repository root with .device/bin carried
# (scripts/gpu-run.sh): the ReduceScatter plans side by side, ranks as MPS clients, with
# PyTorch's copies-then-GEMM in the same call (bench/RESULTS.md, thirteenth session, predicts
# reducescatter.direct_inplace: 4-rank transfers 0.14-0.16 ms against direct's 0.196).
#   - 4 ranks at 25% of the SMs, LLaMA-3.1-8B, M=2048, and 2 ranks at 50%, M=8192, chunks 1,2:
#     local GEMM, transfers alone, fused and unfused per plan in PLANS (default
#     "reducescatter.direct reducescatter.direct_inplace"), each with SYNCOPATE_NVRTC_OPTIONS as
#     set by the caller (e.g. -DSYNCOPATE_PLAIN_REDUCE=1 for the plain sums' A/B);
#   - torch_mps_baseline.py's RS rows on the same shapes where torch is installed;
#   - the reductions' fused workload tests (cuda_gpu_test '*FusedWorkload*rs_*') under MPS and
#     time-sliced, connections 8.
# PUSH (default "0"): "0 1" runs each plan twice, the second with --push-tiles (the fused GEMM
# reduces each tile's part of a chunk as it finishes, jit KernelSpec::push_tiles): its A/B. In
# the wgmma GEMM's staged epilogue idle producer warps move the parts from shared memory; "2"
# adds a run with the parts moved by the consumer warps from global memory instead
# (-DSYNCOPATE_TILE_PARTS_IN_CONSUMERS=1, as before 2026-12-07's eighteenth session).
# TORCH=0 leaves out the torch rows, TESTS=0 the workload tests (gpu-owed.sh's push_ab step).
# Rows for bench/results/concurrent_tp.csv in $OUT/concurrent_rows.csv (each row's note names its
# plan), the logs and raw CSVs in $OUT/logs.tgz. About 3 minutes with the
# kernels in .device/cache (gpu-run.sh WARM_ARGS="--gpus 1 --ranks-per-gpu 4 --tp 4 --workloads
# rs --rs-plan <plan> --models llama3.1-8b --tokens 2048 --chunks 1,2 --backends sm", per plan).
set -u
cd "$(dirname "$0")/../.." || exit 1
source scripts/gpu-modes.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
mkdir -p "$out/cache"
[[ -d .device/cache ]] && cp -r .device/cache/. "$out/cache/"
rc=0
rows() { grep -E '^(local-gemm|comm-only|syncopate|unfused) ' "$1" | cut -c1-150; }
# shape: ranks percent tokens
for shape in "4 25 2048" "2 50 8192"; do
  read -r ranks pct tokens <<<"$shape"
  for plan in ${PLANS:-reducescatter.direct reducescatter.direct_inplace}; do
    for push in ${PUSH:-0}; do
      variant=${plan#reducescatter.}
      push_flag=()
      nvrtc_options=${SYNCOPATE_NVRTC_OPTIONS:-}
      if ((push)); then variant+=_push_tiles; push_flag=(--push-tiles); fi
      if ((push == 2)); then
        variant+=_in_consumers
        push_flag+=(in consumers)  # the label only: removed below before the bench sees it
        nvrtc_options+=" -DSYNCOPATE_TILE_PARTS_IN_CONSUMERS=1"
      fi
      log="$out/rs_${ranks}_${variant}.log"
      s=$SECONDS
      SYNCOPATE_NVRTC_OPTIONS=$nvrtc_options \
      MPS_PCT=$pct STEP_TIMEOUT=90 in_mode mps:8 "$bin/syncopate_tp_bench" --gpus 1 \
        --ranks-per-gpu "$ranks" --tp "$ranks" --workloads rs --rs-plan "$plan" \
        --models llama3.1-8b --tokens "$tokens" --chunks 1,2 --backends sm --reps 20 \
        --warmup 3 --timeout-ms 10000 --csv "${log%.log}.csv" --cache-dir "$out/cache" \
        "${push_flag[@]:0:1}" > "$log" 2>&1 || rc=1
      echo "== $plan${push_flag:+ ${push_flag[*]}}, $ranks ranks at $pct%, M=$tokens:" \
        "$((SECONDS - s)) s"
      rows "$log"
      python3 "$bin/concurrent_rows.py" --date "$(date +%F)" \
        --note "$(head -c 40 "$out/gpu.txt"), MPS ${pct}% x${ranks}, conn 8; plan $plan${push_flag:+ ${push_flag[*]}}" \
        "${log%.log}.csv" >> "$out/concurrent_rows.csv" || rc=1
    done
  done
  if [[ ${TORCH:-1} != 0 && -f $bin/torch_mps_baseline.py ]] && python3 -c 'import torch' 2>/dev/null; then
    MPS_PCT=$pct STEP_TIMEOUT=90 in_mode mps:8 python3 "$bin/torch_mps_baseline.py" \
      --world "$ranks" --m "$tokens" --n 14336 --k 4096 --workloads rs \
      --out "$out/torch_${ranks}.csv" > "$out/torch_${ranks}.log" 2>&1 || rc=1
    grep -E '^rs (gemm|serial|comm|fused)' "$out/torch_${ranks}.log"
    # The torch rows only (a bench CSV of the shape names their model).
    bench_csvs=("$out/rs_${ranks}_"*.csv)
    python3 "$bin/concurrent_rows.py" --date "$(date +%F)" --torch-only \
      --note "$(head -c 40 "$out/gpu.txt"), MPS ${pct}% x${ranks}, conn 8" \
      "${bench_csvs[0]}" "$out/torch_${ranks}.csv" >> "$out/concurrent_rows.csv" || rc=1
  fi
done
rm -rf "$out/cache"
for mode in mps:8 ts:8; do
  [[ ${TESTS:-1} == 0 ]] && break
  STEP_TIMEOUT=150 in_mode "$mode" "$bin/cuda_gpu_test" --gtest_filter='*FusedWorkload*rs_*' \
    > "$out/rs_tests_${mode/:/_}.log" 2>&1 || rc=1
  echo "== rs workload tests $mode:"; grep -E '^\[  (PASSED|FAILED) |FAILED  \]' "$out/rs_tests_${mode/:/_}.log"
done
pack_out gpu.txt concurrent_rows.csv  # the logs and raw CSVs in $out/logs.tgz
exit $rc

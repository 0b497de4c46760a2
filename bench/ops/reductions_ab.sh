#!/usr/bin/env bash
# On the lent GPU machine, from the repository root with .device/bin carried
# (scripts/gpu-run.sh): where the unfused reductions' extra 0.7 ms at M=8192 went
# (bench/RESULTS.md, 2026-12-06 seventh session: GEMM+ReduceScatter 1.695 -> 2.403 ms,
# GEMM+AllReduce 1.808 -> 2.529 ms against 945c870, torch and AllGather unchanged).
# The two changes on that path, each turned off in the same call, two ranks as MPS clients:
#   A. the caller's A read in place at a bucket's own M (e09fb92): M=8192 takes bucket 8192 in
#      place, M=8190 the same bucket's kernels with A copied into the workspace (as 945c870 did);
#      from Python (torch_ops_check.py) and from C++ (ops_bench --buckets).
#      In place innocent: 8190 slower by about the copy (0.05-0.1 ms). Guilty: 8190 faster.
#   B. the segment mover out of line (GroupMoveSegments __noinline__): the same runs with the
#      kernels built with -DSYNCOPATE_MOVER_INLINE=1 (SYNCOPATE_NVRTC_OPTIONS; another cache key).
#   C. the unfused pair's parts from the tp bench: local GEMM and comm-only rows (history:
#      local-gemm 1.20-1.48 ms, comm-only 0.213 ms at 8B TP=2 M=8192).
# Logs under $OUT; about 3 minutes.
# Run in session 8 (bench/RESULTS.md): neither A nor B. The local GEMM dealt its tiles statically,
# and beside a concurrent rank a late CTA's share ran after everyone else's (ca04411: tiles
# claimed from a counter). Kept as the A/B for this path; SYNCOPATE_OPS_IN_PLACE=0 copies A at
# the bucket's own M too, for an A/B without changing M.
set -u
cd "$(dirname "$0")/../.."
source scripts/gpu-modes.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
started=$SECONDS
check() {  # check NAME [ENV=VALUE...]: the Python ops' timings at 8192 (in place) and 8190 (copy)
  local name=$1; shift
  echo "== $name $*"
  (
    (($#)) && export "$@"
    STEP_TIMEOUT=240 in_mode mps:8 python3 "$bin/python/torch_ops_check.py" \
      --lib "$bin/libsyncopate.so" --world 2 --timeout-s 220 --parts timing --ms 8192 \
      --time-ms 8192,8190 --buckets 8192 --cache-dir "$out/cache-$name"
  ) > "$out/$name.log" 2>&1
  grep -E "^time,(rs|ar),.*,syncopate|^time,(rs|ar),8192,(symm_mem|cublas)|FAIL" "$out/$name.log"
  echo "   ($((SECONDS - started)) s)"
}
check out_of_line
check inlined SYNCOPATE_NVRTC_OPTIONS=-DSYNCOPATE_MOVER_INLINE=1
echo "== the same from C++: ops_bench, M 8192 (in place) and 8190 (copied), bucket 8192"
for kind in rs ar; do
  STEP_TIMEOUT=200 in_mode mps:8 "$bin/ops_bench" --kind $kind --n 4096 --k 7168 --world 2 \
    --max-m 8192 --m 8192,8190 --buckets 8192 --backend sm --cache-dir "$out/cache-cpp" \
    > "$out/ops_bench_$kind.log" 2>&1
  grep -E "^[0-9]+ +81" "$out/ops_bench_$kind.log"
done
echo "   ($((SECONDS - started)) s)"
echo "== C: syncopate_tp_bench rs,ar, 8B, TP=2, M=8192 (the unfused pair's parts)"
STEP_TIMEOUT=200 in_mode mps:8 "$bin/syncopate_tp_bench" --gpus 1 --ranks-per-gpu 2 --tp 2 \
  --workloads rs,ar --models llama3.1-8b --tokens 8192 --chunks 1 --backends sm --reps 10 \
  --warmup 3 --timeout-ms 10000 --csv "$out/ab_tp.csv" --cache-dir "$out/cache-tp" \
  > "$out/tp.log" 2>&1
grep -E "^(local-gemm|comm-only|unfused|syncopate|cublas) " "$out/tp.log" | cut -c1-160
echo "total $((SECONDS - started)) s"

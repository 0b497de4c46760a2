#!/usr/bin/env bash
# On the lent GPU machine, from the repository root with .device carried (scripts/gpu-run.sh,
# OPS_FILL=1 for the default kernels): the ops' GEMM+AllReduce first run after a line-up against
# its second, with per-CTA traces (SYNCOPATE_OPS_TRACE_DIR, bench/ops/launch_trace_summary.py),
# once per joined-CTA peer wait in JOIN_US (microseconds; -DSYNCOPATE_JOIN_PEER_WAIT_US through
# SYNCOPATE_NVRTC_OPTIONS, impl/pieces.cuh; default "200 2000"). 2 ranks as MPS clients at 50%
# each, connections 8, MODEL "hidden,ffn" (default LLaMA-3.1-70B), M=8192.
#
# Why (bench/RESULTS.md, nineteenth session): after a line-up one rank's kernel gets about 6 of
# its 66 CTAs only when the peer's compute CTAs leave, so its GEMM ends about 0.25 ms after the
# peer's. The peer's joined CTAs wait for its steps 200 us, then leave the AllReduce's remaining
# transfers to the 2 comm CTAs: a 2.3-2.9 ms tail (0.16 back to back). Prediction with 2000 us:
# the first run's kernel from about 7.7 ms to about 5.4, back to back unchanged.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source scripts/gpu-modes.sh
export MPS_PCT=50
model=${MODEL:-8192,28672}
for us in ${JOIN_US:-200 2000}; do
  dir=$out/join_$us
  mkdir -p "$dir/trace" "$dir/cache"
  [[ -d .device/ops-cache/llama3.1-70b ]] && cp -r .device/ops-cache/llama3.1-70b/. "$dir/cache/"
  SYNCOPATE_NVRTC_OPTIONS="-DSYNCOPATE_JOIN_PEER_WAIT_US=$us" SYNCOPATE_OPS_TRACE_DIR=$dir/trace \
    STEP_TIMEOUT=${STEP_TIMEOUT:-150} in_mode mps:8 python3 "$bin/python/torch_ops_check.py" \
    --lib "$bin/libsyncopate.so" --world 2 --model "$model" --parts timing --time-ms 8192 \
    --buckets 8192 --time-kinds ar --cache-dir "$dir/cache" >"$dir/check.log" 2>&1
  echo "== join peer wait $us us: exit $?"
  grep -E "^pair|^time|^RESULT" "$dir/check.log" | cut -c1-100
  python3 bench/ops/launch_trace_summary.py "$dir/trace" | grep -E "^file|all_reduce"
  rm -rf "$dir/cache"
done
tar czf "$out/ar_first_run.tgz" -C "$out" $(cd "$out" && ls -d join_*) && rm -rf "$out"/join_*

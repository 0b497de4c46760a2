#!/usr/bin/env bash
# On the lent GPU machine, from the repository root with .device/bin carried (scripts/gpu-run.sh
# built it): every GPU test, then the GPU and control-plane benchmarks, each log under $OUT (or
# ./gpu-out). Runs everything even when one fails; exits 1 if any did. Budget: one device call
# (under 10 minutes); set SKIP_BENCH=1 for the tests alone.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/.device/bin
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UCX_MODULE_DIR=$bin/ucx SYNCOPATED=$bin/syncopated
failed=()
step() {  # step NAME COMMAND...: runs it, logs to $out/NAME.log, keeps going
  local name=$1; shift
  echo "== $name: $*"
  if timeout "${STEP_TIMEOUT:-300}" "$@" >"$out/$name.log" 2>&1; then
    tail -n 3 "$out/$name.log"
  else
    echo "   FAILED (exit $?); last lines:"; tail -n 20 "$out/$name.log"; failed+=("$name")
  fi
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
step cuda_unit_test "$bin/cuda_unit_test"
step cuda_gpu_test "$bin/cuda_gpu_test"
step demo "$bin/syncopate" demo --quiet-timeline --cache-dir="$out/demo-cache"
if [[ -z ${SKIP_BENCH:-} ]]; then
  step gpu_overlap_bench "$bin/gpu_overlap_bench"
  step staged_ucx_bench "$bin/staged_ucx_bench"
  step inter_node_bench "$bin/inter_node_bench"
  step control_plane_bench "$bin/control_plane_bench" --rounds=3000 --seconds=5 \
    --syncopated="$bin/syncopated"
fi
if ((${#failed[@]})); then echo "failed: ${failed[*]}"; exit 1; fi
echo "all GPU checks passed"

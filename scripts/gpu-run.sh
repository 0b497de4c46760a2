#!/usr/bin/env bash
# Builds the GPU runtime's test and benchmark binaries (and the daemon the GPU tests and the
# control-plane bench start) and bundles them with their libraries into .device/bin for the lent
# GPU machine (see ../shared/DEVICE.md). Then one device call runs them all:
#   run(command: "scripts/gpu-checks.sh", carry: [".device/bin"])
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-cuda}
targets=(cuda_unit_test cuda_gpu_test ops_gpu_test ops_bench gpu_overlap_bench staged_ucx_bench syncopated
         control_plane_bench syncopate syncopate_tp_bench inter_node_bench syncopate_shared)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"${JOBS:-$(scripts/jobs.sh)}" --target "${targets[@]}"
rm -rf .device/bin
../shared/tools/device-bundle .device/bin "$build/tests/cuda/cuda_unit_test" \
  "$build/tests/cuda/cuda_gpu_test" "$build/tests/ops/ops_gpu_test" "$build/bench/ops/ops_bench" \
  "$build/bench/cuda/gpu_overlap_bench" \
  "$build/bench/cuda/staged_ucx_bench" "$build/server/syncopated" \
  "$build/bench/server/control_plane_bench" "$build/client/cli/syncopate" \
  "$build/bench/multigpu/syncopate_tp_bench" "$build/bench/cuda/inter_node_bench"
# PyTorch's figures on the same setup, for gpu-checks.sh's same-call reference (../shared does not
# travel to the GPU machine), and the script that turns both CSVs into concurrent_tp.csv rows.
if [[ -f ../shared/tools/torch_mps_baseline.py ]]; then
  cp ../shared/tools/torch_mps_baseline.py .device/bin/
fi
cp bench/multigpu/concurrent_rows.py .device/bin/
# The Python package's GPU check (ops/python/tests/gpu/README.md): libsyncopate.so with its
# libraries, the package and the script, which finds both beside itself.
# The package goes under python/ (.device/bin/syncopate is the CLI); the check takes --lib.
../shared/tools/device-bundle .device/bin "$build/ops/libsyncopate.so"
mkdir -p .device/bin/python/syncopate
cp ops/python/syncopate/*.py .device/bin/python/syncopate/
cp ops/python/tests/gpu/torch_ops_check.py .device/bin/python/
# WARM_ARGS: syncopate_tp_bench problem flags (e.g. "--gpus 4 --tp 4 --workloads ag --models
# llama3.1-8b --tokens 2048 --chunks 1,2,4,8") whose kernels are compiled here, for the H100/H200
# (sm_90a), into .device/cache, which stall-matrix.sh seeds its cache from: the ranks on the GPU
# then load them instead of compiling (device time is the scarce part). Mind the carry limit
# (64 MiB with the bundle): a cubin is 0.1-0.3 MB.
rm -rf .device/cache .device/ops-cache
# OPS_FILL=1: the kernels of bench/ops/ops_vs_torch.sh's ops (MODELS, WORLD as there), compiled
# here into .device/ops-cache/<model>, which that script seeds each model's cache from (about
# 1.4 MB a model, 5 MB for the default three: the bundle with it stays under the 64 MiB carry).
if [[ -n ${OPS_FILL:-} ]]; then
  FILL=.device/ops-cache bash bench/ops/ops_vs_torch.sh
  echo "ops kernel cache: $(du -sh .device/ops-cache | cut -f1) in .device/ops-cache"
fi
if [[ -n ${WARM_ARGS:-} ]]; then
  # shellcheck disable=SC2086  # WARM_ARGS is a list of flags
  "$build/bench/multigpu/syncopate_tp_bench" --arch sm_90a \
    --fill-cache .device/cache $WARM_ARGS
  echo "kernel cache: $(du -sh .device/cache | cut -f1) in .device/cache"
fi

#!/usr/bin/env bash
# Builds the GPU runtime's test and benchmark binaries and bundles them (with their libraries)
# into .device/bin for the lent GPU machine (see ../shared/DEVICE.md). Then, on the device:
#   export LD_LIBRARY_PATH=$PWD/.device/bin SYNCOPATED=$PWD/.device/bin/syncopated
#   .device/bin/cuda_gpu_test; .device/bin/gpu_overlap_bench
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-cuda}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target cuda_unit_test cuda_gpu_test gpu_overlap_bench \
  syncopated
rm -rf .device/bin
../shared/tools/device-bundle .device/bin "$build/tests/cuda/cuda_unit_test" \
  "$build/tests/cuda/cuda_gpu_test" "$build/runtime/cuda/gpu_overlap_bench" \
  "$build/server/syncopated"

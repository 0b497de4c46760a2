#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (coverage + ASan + UBSan everywhere) in build-fuzz/ and
# runs each for FUZZ_SECONDS (default 60) from the seed corpus. CI runs this; a crash fails the
# script and libFuzzer prints the crashing input's path. Benchmarks stay configured (bench/ links
# Google Benchmark unconditionally) but are not built. --as-needed: CUDA::nvrtc drags in the
# toolkit's stub libcuda, which Debian's gcc drops by default and clang does not; the daemon
# code never calls the driver.
# usage: scripts/fuzz.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${FUZZ_SECONDS:-60}}
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--as-needed" \
  -DSYNCOPATE_BUILD_BENCH=ON -DSYNCOPATE_FUZZ_SECONDS="$seconds"
cmake --build build-fuzz -j"$(scripts/jobs.sh)" --target request_fuzzer c_config_fuzzer msccl_import_fuzzer
ctest --test-dir build-fuzz -L fuzz --output-on-failure

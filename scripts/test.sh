#!/usr/bin/env bash
# The test command: install what is missing, build everything, run every test.
# GPU tests skip with a reason on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Fails at once on an include that crosses the layers the wrong way (also a ctest).
python3 scripts/check_layering.py
# Fails at once on a C++ line changed since HEAD~1 that clang-format would change (also a ctest).
python3 scripts/check_format.py
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(scripts/jobs.sh)"
ctest --test-dir build --output-on-failure -j"$(scripts/jobs.sh)" "$@"
# The request decoder + validator under libFuzzer (clang, ASan, UBSan) for a fixed time.
scripts/fuzz.sh "${FUZZ_SECONDS:-60}"

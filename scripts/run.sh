#!/usr/bin/env bash
# The main job: install what is missing, build the CLI, and run the end-to-end demo on an
# embedded default (no daemon to start): an AllGather+GEMM for 4 ranks — plan, validation,
# simulation, timeline, the fused kernel compiled through NVRTC and the kernel cache, and, where a
# GPU is present, a run checked against a reference.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(scripts/jobs.sh)" --target syncopate >/dev/null
exec build/client/cli/syncopate demo "$@"

#!/usr/bin/env bash
# scripts/gpu-modes.sh's pack_out: a device call brings back only a few files, so the GPU-machine
# scripts pack every log under $OUT into logs.tgz and keep only the files they name beside it;
# kernel caches are dropped, not packed. No GPU needed: sourcing gpu-modes.sh only defines
# functions and sets paths.
# usage: pack_out_test.sh <repository root>
set -euo pipefail
root=$1
work=$(mktemp -d)
cd "$work"  # gpu-modes.sh takes .device/bin under the current folder
export OUT=$work/out
source "$root/scripts/gpu-modes.sh"
trap 'mps_stop; rm -rf "$work"' EXIT  # after the source: gpu-modes.sh sets its own trap
fail() { echo "FAIL: $*"; ls -laR "$out"; exit 1; }

mkdir -p "$out/tp-trace" "$out/cache" "$out/ops-cache"
echo "NVIDIA H200" > "$out/gpu.txt"
echo "row" > "$out/concurrent_rows.csv"
echo "log" > "$out/step.log"
echo "trace" > "$out/tp-trace/rank0.csv"
echo "cubin" > "$out/cache/k.cubin"
echo "cubin" > "$out/ops-cache/k.cubin"
pack_out gpu.txt concurrent_rows.csv not-written.txt

[[ $(ls -A "$out" | sort | tr '\n' ' ') == "concurrent_rows.csv gpu.txt logs.tgz " ]] \
  || fail "expected exactly gpu.txt, concurrent_rows.csv and logs.tgz in \$OUT"
[[ $(cat "$out/gpu.txt") == "NVIDIA H200" ]] || fail "gpu.txt changed"
packed=$(tar tzf "$out/logs.tgz" | sed 's|^\./||' | grep -v '/$' | grep . | sort | tr '\n' ' ')
[[ $packed == "step.log tp-trace/rank0.csv " ]] || fail "logs.tgz holds '$packed'"
echo "pack_out: OK"

#!/bin/sh
# syncopate_tp_bench --fill-cache DIR (implies --plan-only --nvrtc) fills a kernel cache without
# a GPU: run twice into one fresh folder, the second run must find both kernels (the GEMM and
# comm_only) and their local variants there. Prints "N kernels cached" (ctest expects 2).
# $1: the bench binary.
set -u
bench=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {
  "$bench" --arch sm_80 --gpus 2 --workloads ag --models llama3.1-8b --tp 2 \
    --chunks 1 --tokens 256 --fill-cache "$dir/cache"
}
run >/dev/null || { echo "first run failed"; exit 1; }
run >"$dir/second" || { echo "second run failed"; cat "$dir/second"; exit 1; }
echo "$(grep -c 'cached, local cached' "$dir/second") kernels cached"
cat "$dir/second"

#!/usr/bin/env bash
# `syncopate tune` as a user meets it: bad flags are usage errors (exit 2) naming the flag; on a
# machine without a GPU it exits 1 saying it needs one and why, and stores nothing. (On a GPU
# the tuner itself is tested by cuda_gpu_test's GemmTunerGpuTest.)
# usage: tune_test.sh <syncopate>
set -euo pipefail
syncopate=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

run() {  # run <want exit> <want stderr fixed string> <args...>
  local want=$1 text=$2; shift 2
  set +e
  "$syncopate" tune "$@" --cache-dir="$dir/cache" >"$dir/out.txt" 2>&1
  local got=$?
  set -e
  [[ $got == "$want" ]] || { echo "tune $*: exit $got, want $want"; cat "$dir/out.txt"; exit 1; }
  grep -qF -- "$text" "$dir/out.txt" || { echo "tune $*: missing '$text'"; cat "$dir/out.txt"; exit 1; }
}

run 2 "--m is required" --n 64 --k 64
run 2 "--k must be a multiple of 8" --m 64 --n 64 --k 63
run 2 "unknown flag --bogus" --m 64 --n 64 --k 64 --bogus 1
run 2 "--min-gain-pct must be in" --m 64 --n 64 --k 64 --min-gain-pct 90
if "$syncopate" tune --m 64 --n 64 --k 64 --cache-dir="$dir/cache" >"$dir/out.txt" 2>&1; then
  grep -qF "stored " "$dir/out.txt" || { echo "tune passed without storing"; cat "$dir/out.txt"; exit 1; }
else
  grep -qF "needs a GPU: " "$dir/out.txt" || grep -qF "sm_90" "$dir/out.txt" \
    || { echo "tune failed without saying why"; cat "$dir/out.txt"; exit 1; }
  [[ ! -d "$dir/cache/tuning" ]] || { echo "a failed tune stored something"; exit 1; }
fi
echo "tune CLI: ok"

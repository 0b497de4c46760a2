#!/usr/bin/env bash
# `syncopate ops tune` as a user meets it: bad flags and configs the ops refuse are usage errors
# (exit 2) naming the flag or field, before any GPU is touched; without a GPU it exits 1 saying it
# needs one, and writes no table. With a GPU it tunes a small AllReduce at 2 ranks and the table
# it writes is the one `syncopate ops path --cache-dir` then applies.
# usage: ops_tune_test.sh <syncopate>
set -euo pipefail
syncopate=$1
unset SYNCOPATE_OPS_ALLREDUCE_PLAN  # the developer knob keys the table apart
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

fail() { echo "ops tune: $*"; cat "$dir/out.txt"; exit 1; }
run() {  # run <want exit> <want output, fixed string> <args...>
  local want=$1 text=$2; shift 2
  set +e
  "$syncopate" ops tune "$@" >"$dir/out.txt" 2>&1
  local got=$?
  set -e
  [[ $got == "$want" ]] || fail "$*: exit $got, want $want"
  grep -qF -- "$text" "$dir/out.txt" || fail "$*: missing '$text'"
}

op=(--kind ar --world 2 --max-m 256 --n 256 --k 256 --buckets "128,256")
run 2 "--cache-dir is required" "${op[@]}"
run 2 "--kind is required" --world 2 --max-m 256 --n 256 --k 256 --cache-dir "$dir/c"
run 2 "--kind: ag, rs or ar" --kind xx --world 2 --max-m 256 --n 256 --k 256 --cache-dir "$dir/c"
run 2 "max_m 255 must be a positive multiple of the world size 2" \
  --kind ar --world 2 --max-m 255 --n 256 --k 256 --cache-dir "$dir/c"
run 2 "gpus 3 is not in 0..world (2" "${op[@]}" --cache-dir "$dir/c" --gpus 3
run 2 "rounds 0 must be at least 1" "${op[@]}" --cache-dir "$dir/c" --rounds 0
run 2 "unknown flag --bogus" "${op[@]}" --cache-dir "$dir/c" --bogus 1
[[ ! -e $dir/c ]] || fail "a refused tune wrote $dir/c"

if "$syncopate" ops tune "${op[@]}" --cache-dir "$dir/c" --gpus 1 --reps 2 --rounds 2 \
  >"$dir/out.txt" 2>&1
then
  grep -qE '^128 +(fused|unfused) sm x[12] ' "$dir/out.txt" || fail "no row for bucket 128"
  grep -qE '^256 +(fused|unfused) sm x[12] ' "$dir/out.txt" || fail "no row for bucket 256"
  table=$(sed -n 's/^stored //p' "$dir/out.txt")
  [[ -f $table ]] || fail "the table it names ($table) is not there"
  arch=$(basename "$table" | cut -d. -f3)
  "$syncopate" ops path "${op[@]}" --cache-dir "$dir/c" --arch "$arch" >"$dir/out.txt" 2>&1 ||
    fail "ops path after the tune"
  grep -qF "tuning: $table (2 measured buckets)" "$dir/out.txt" || fail "ops path ignored it"
  grep -qE "measured [0-9.e+-]+ ms against unfused [0-9.e+-]+ ms \(" "$dir/out.txt" ||
    fail "no bucket took the measured path"
else
  grep -qF "needs a GPU: " "$dir/out.txt" || fail "failed without saying it needs a GPU"
  [[ ! -d $dir/c/tuning ]] || fail "a failed tune wrote a table"
fi
echo "ops tune CLI: ok"

#!/usr/bin/env bash
# `syncopate ops path` as a user meets it: each bucket's path and plan as the ops choose them
# (the AllReduce's plan by its bucket's C), a measured tuning file changing a bucket as Create
# applies it, and errors naming the flag, the config field or the tuning file's line.
# usage: ops_path_test.sh <syncopate>
set -euo pipefail
syncopate=$1
unset SYNCOPATE_OPS_ALLREDUCE_PLAN  # the developer knob would take one AllReduce plan for all
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

fail() { echo "ops path: $*"; cat "$dir/out.txt"; exit 1; }
run() {  # run <want exit> <args...>: output in $dir/out.txt
  local want=$1; shift
  set +e
  "$syncopate" ops path "$@" >"$dir/out.txt" 2>&1
  local got=$?
  set -e
  [[ $got == "$want" ]] || fail "$*: exit $got, want $want"
}
has() { grep -qE -- "$1" "$dir/out.txt" || fail "missing /$1/"; }
lacks() { ! grep -qE -- "$1" "$dir/out.txt" || fail "unexpected /$1/"; }
one_row() { [[ $(grep -cE '^[0-9]' "$dir/out.txt") == 1 ]] || fail "not one row"; }

# LLaMA-3.1-70B's AllReduce shape at 2 ranks: fused from 4096 rows per rank, else unfused.
ar=(--kind ar --world 2 --max-m 8192 --n 8192 --k 3584)
run 0 "${ar[@]}"
has '^8192 +8192 +fused +sm +2 +no +allreduce\.direct +fused: an AllReduce at 2 ranks'
has '^2048 +2048 +unfused +sm +1 +no +allreduce\.direct '
has '^tuning: none'
# A bucket of at most 2 MiB of C takes allreduce.direct_out (128 x 8192 bf16: 2 MiB).
run 0 "${ar[@]}" --buckets 128,4096 --m 100
has '^100 +128 +unfused +sm +1 +no +allreduce\.direct_out '
one_row
# A ReduceScatter fuses in tile parts at 4 ranks from 512 rows per rank; whole chunks asked for.
run 0 --kind rs --world 4 --max-m 8192 --n 8192 --k 1024 --m 2048
has '^2048 +2048 +fused +sm +1 +yes +reducescatter\.direct '
run 0 --kind rs --world 4 --max-m 8192 --n 8192 --k 1024 --m 2048 --tile-parts=false
has '^2048 +2048 +unfused +sm +1 +no +reducescatter\.direct '

# Usage errors name what is wrong.
run 2 --world 2 --max-m 8192 --n 8192 --k 3584
has '--kind is required'
run 2 --kind xx --world 2 --max-m 8192 --n 8192 --k 3584
has '--kind: ag, rs or ar'
run 2 --kind ag --world 3 --max-m 8192 --n 8192 --k 1024
has 'op\.max_m 8192 must be a positive multiple of the world size 3'
run 2 "${ar[@]}" --m 8193
has 'm 8193 is not a positive multiple of the world size 2'
lacks '^m +bucket'  # an M the op refuses prints no table
run 2 "${ar[@]}" --bogus 1
has 'unknown flag --bogus'

# A measured tuning file (ops_bench --tune's format) changes its bucket, as in Op::Create.
run 0 "${ar[@]}" --cache-dir "$dir/cache"
has '^tuning: .*/tuning/op\.matmul_all_reduce\.sm_90a\.bf16\.w2\.8192x3584\.tune \(0 measured'
tune_file=$(sed -nE 's/^tuning: (.*\.tune) \(.*/\1/p' "$dir/out.txt")
mkdir -p "$(dirname "$tune_file")"
printf 'format 1\nbucket 2048 fused sm 2 1.5 1.75\n' >"$tune_file"
run 0 "${ar[@]}" --cache-dir "$dir/cache"
has '\(1 measured buckets\)'
has '^2048 +2048 +fused +sm +2 +no +allreduce\.direct +fused: measured 1\.5 ms against unfused 1\.75 ms'
run 0 "${ar[@]}" --cache-dir "$dir/cache" --path unfused
has 'not used: --path is set'
has '^2048 +2048 +unfused '
printf 'format 1\nbucket 2048 sideways sm 2 1.5 1.75\n' >"$tune_file"
run 1 "${ar[@]}" --cache-dir "$dir/cache"
has '\.tune:2: '
echo "ops path CLI: ok"

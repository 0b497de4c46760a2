#!/usr/bin/env bash
# On the lent GPU machine, from the repository root with .device carried (scripts/gpu-run.sh):
# issue 19's comparison on every model of bench/multigpu, one device call. Per model (MODELS,
# default the LLaMA-3.1-8B, LLaMA-3.1-70B and Qwen2-72B rows of tp_config.cc) at TP=WORLD (2),
# the ranks as MPS clients at 100/WORLD percent each:
#   - the ops from C++: ops_bench for AllGather+GEMM, GEMM+ReduceScatter and GEMM+AllReduce at
#     M=8192 and 2048 (each M its own bucket; run ms, graph replays, host time per call);
#   - the same ops from Python beside torch.ops.symm_mem in the same MPS session
#     (torch_ops_check.py --parts timing, the same buckets): Syncopate / symm_mem per op and M,
#     and Python's back-to-back time against ops_bench's run ms;
# then the run call's host time at M=128 with the AllGather shard already in the workspace, and
# the AllReduce's with the caller's tensors in place (issue 19: at most 10 us). Logs in
# $OUT/logs.tgz, with rows.csv: the runs as rows of bench/results/concurrent_tp.csv
# (bench/ops/ops_rows.py); the summary lines on stdout. About 40 s a model once its kernels are
# built (the ranks compile them: 2-3 s each).
# Run with: run(command: "bash bench/ops/ops_vs_torch.sh", carry: [".device"]).
# On the build host, FILL=DIR compiles those kernels instead (ops_bench --fill-cache, no GPU)
# into DIR/<model> and runs nothing (scripts/gpu-run.sh does it with OPS_FILL=1); on the GPU
# machine each model's cache then starts as a copy of .device/ops-cache/<model>.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source scripts/gpu-modes.sh
world=${WORLD:-2}
kinds=${KINDS:-ag,rs,ar}  # the ops timed (ops_bench and Python), e.g. KINDS=ar
# A fused ReduceScatter's tile parts (OpConfig::tile_parts, on by default): TILE_PARTS=0 moves
# whole chunks instead, TILE_PARTS=1 asks for parts explicitly. The build host's fill follows it.
parts_flags=() py_parts_flags=()
case ${TILE_PARTS:-} in
  1) parts_flags=(--tile-parts) py_parts_flags=(--tile-parts) ;;
  0) parts_flags=(--tile-parts=false) py_parts_flags=(--whole-chunks) ;;
esac
# TUNE=1: per model and op, `ops_bench --tune` first (every path timed per M, the fastest stored
# in the model's cache folder), which the C++ and Python runs after it then take; the build
# host's fill then compiles every path it times.
tune_flags=()
[[ ${TUNE:-0} == 1 ]] && tune_flags=(--tune)
models=${MODELS:-"llama3.1-8b:4096,14336 llama3.1-70b:8192,28672 qwen2-72b:8192,29568"}
fill=${FILL:-}
# "name:hidden,ffn" (a MODELS entry) into name, hidden and ffn.
parse_model() {
  name=${1%%:*} hidden=${1#*:}
  ffn=${hidden#*,} hidden=${hidden%,*}
}
# The three ops of the model parse_model read: kind, per-rank N, per-rank K.
op_shapes() {
  echo "ag $((ffn / world)) $hidden"
  echo "rs $hidden $((ffn / world))"
  echo "ar $hidden $((ffn / world))"
}
if [[ -n $fill ]]; then
  for entry in $models; do
    parse_model "$entry"
    while read -r k n kk; do
      [[ ,$kinds, == *,$k,* ]] || continue
      "$bin/ops_bench" --fill-cache "$fill/$name" --kind "$k" --n "$n" --k "$kk" --world "$world" \
        --max-m 8192 --m 8192,2048 --backend sm "${parts_flags[@]}" "${tune_flags[@]}" || exit 1
    done < <(op_shapes)
  done
  "$bin/ops_bench" --fill-cache "$fill/host" --kind ag --n $((14336 / world)) --k 4096 \
    --world "$world" --max-m 8192 --m 8192,2048,128 --backend sm || exit 1
  "$bin/ops_bench" --fill-cache "$fill/host" --kind ar --n 4096 --k $((14336 / world)) \
    --world "$world" --max-m 8192 --m 8192,2048,128 --backend sm || exit 1
  exit 0
fi
# A model's kernel cache, from the build host's when it compiled them (FILL above).
seed_cache() {
  local dst=$out/ops-cache-$1
  mkdir -p "$dst/entries"
  if [[ -d .device/ops-cache/$1 ]]; then cp -r ".device/ops-cache/$1/." "$dst/"; fi
}
cached_kernels() { find "$out/ops-cache-$1/entries" -type f | wc -l; }
final_out=$out
out=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
# Where this machine's toolkit headers really are (the cache key once held this path).
echo "toolkit headers: $(readlink -f /usr/local/cuda/include) CUDA_HOME=${CUDA_HOME:-unset}"
export MPS_PCT=$((100 / world))
for entry in $models; do
  parse_model "$entry"
  log=$out/$name.log
  seed_cache "$name"
  entries_before=$(cached_kernels "$name")
  echo "== $name (hidden $hidden, ffn $ffn), $world ranks"
  while read -r k n kk; do
    [[ ,$kinds, == *,$k,* ]] || continue
    if ((${#tune_flags[@]})); then
      STEP_TIMEOUT=120 in_mode mps:8 "$bin/ops_bench" --tune --kind "$k" --n "$n" --k "$kk" \
        --world "$world" --max-m 8192 --m 8192,2048 --backend sm \
        --cache-dir "$out/ops-cache-$name" "${parts_flags[@]}" >>"$log" 2>&1 ||
        echo "   ops_bench --tune $k failed (exit $?)"
      grep -A2 "^M .*fastest" "$log" | tail -3
    fi
    STEP_TIMEOUT=120 in_mode mps:8 "$bin/ops_bench" --kind "$k" --n "$n" --k "$kk" --world "$world" \
      --max-m 8192 --m 8192,2048 --backend sm --cache-dir "$out/ops-cache-$name" \
      "${parts_flags[@]}" >>"$log" 2>&1 ||
      echo "   ops_bench $k failed (exit $?)"
  done < <(op_shapes)
  after_cpp=$(cached_kernels "$name")
  STEP_TIMEOUT=240 in_mode mps:8 python3 "$bin/python/torch_ops_check.py" --lib "$bin/libsyncopate.so" \
    --world "$world" --model "$hidden,$ffn" --parts timing --time-ms 8192,2048 \
    --buckets 8192,2048 --time-kinds "$kinds" --cache-dir "$out/ops-cache-$name" \
    "${py_parts_flags[@]}" >>"$log" 2>&1 ||
    echo "   torch_ops_check failed (exit $?)"
  grep -E "^(ratio|time),.*(symm_mem|back-to-back)|^host,.*,syncopate,|^pair,|^RESULT" "$log" |
    cut -c1-110
  grep -E "^[0-9]+ +[0-9]+ +[0-9]+ +(fused|unfused)" "$log" | cut -c1-120
  # Kernels the ranks compiled: 0 when the build host's were all they needed. On 2026-12-07
  # every one was compiled again (10 of 10 a model): the key held the toolkit's include path,
  # which may canonicalise differently there; it now holds the headers' content.
  echo "   cache entries: $entries_before from the build host, compiled on the GPU:" \
    "$((after_cpp - entries_before)) by ops_bench, $(($(cached_kernels "$name") - after_cpp)) by Python"
  # Every key at the end, for a comparison with .device/ops-cache/<model> on the build host.
  find "$out/ops-cache-$name/entries" -type f -printf '%f\n' | sort >"$out/${name}_keys.txt"
  rm -rf "$out/ops-cache-$name"
done
seed_cache host
if [[ ,$kinds, == *,ag,* ]]; then
  echo "== host time per run call, M=128, shard in the workspace (llama3.1-8b AllGather)"
  STEP_TIMEOUT=120 in_mode mps:8 "$bin/ops_bench" --kind ag --n $((14336 / world)) --k 4096 \
    --world "$world" --max-m 8192 --m 8192,2048,128 --backend sm --shard-in-workspace \
    --cache-dir "$out/ops-cache-host" >"$out/host_time.log" 2>&1 || echo "   failed (exit $?)"
  grep -E "^[0-9]+ +[0-9]+ " "$out/host_time.log" | cut -c1-120
fi
if [[ ,$kinds, == *,ar,* ]]; then
  # The AllReduce at a bucket's M takes the caller's A and C in place (at M=128 the plan is
  # allreduce.direct_out, as for every bucket of at most 2 MiB of C): the GEMM and the
  # transfers, two launches and no copy.
  echo "== host time per run call, M=128 (llama3.1-8b AllReduce, the caller's A and C in place)"
  STEP_TIMEOUT=120 in_mode mps:8 "$bin/ops_bench" --kind ar --n 4096 --k $((14336 / world)) \
    --world "$world" --max-m 8192 --m 8192,2048,128 --backend sm \
    --cache-dir "$out/ops-cache-host" >"$out/host_time_ar.log" 2>&1 || echo "   failed (exit $?)"
  grep -E "^[0-9]+ +[0-9]+ " "$out/host_time_ar.log" | cut -c1-120
fi
# The runs as rows of bench/results/concurrent_tp.csv (bench/ops/ops_rows.py), in the logs.
model_logs=()
for entry in $models; do
  parse_model "$entry"
  [[ -f $out/$name.log ]] && model_logs+=("$out/$name.log")
done
row_note="$(head -1 "$out/gpu.txt"), MPS $MPS_PCT% x$world, connections 8; bench/ops/ops_vs_torch.sh"
[[ ${TUNE:-0} == 1 ]] && row_note+=", TUNE=1 (ops_bench --tune first)"
[[ -n ${SYNCOPATE_OPS_ALLREDUCE_PLAN:-} ]] && row_note+=", plan $SYNCOPATE_OPS_ALLREDUCE_PLAN"
[[ -n ${TILE_PARTS:-} ]] && row_note+=", TILE_PARTS=$TILE_PARTS"
if ((${#model_logs[@]})); then
  python3 bench/ops/ops_rows.py --date "$(date +%F)" --header --note "$row_note" \
    "${model_logs[@]}" >"$out/rows.csv" || echo "   ops_rows.py failed (exit $?)"
  echo "   $(($(wc -l <"$out/rows.csv") - 1)) rows for bench/results/concurrent_tp.csv in rows.csv"
fi
rm -rf "$out"/ops-cache-*
tar czf "$final_out/logs.tgz" -C "$out" . && rm -rf "$out"

#!/usr/bin/env bash
# On the lent GPU machine, from the repository root with .device carried (scripts/gpu-run.sh):
# the checks owed by code that has not run on a GPU yet, most important first, each only if it
# still fits in BUDGET seconds (default 570: one device call), so a session whose device starts
# are scarce gets the most from the one call it may get:
#   run(command: "bash scripts/gpu-owed.sh", carry: [".device"], timeout_s: 595)
# STEPS (default below) picks and orders them:
#   ops_mps_8       ops_gpu_test, ranks as MPS clients, connections 8 (1,000 capture replays);
#                   ops_<ts|mps>_<connections> any other mode (100 replays time-sliced)
#   protocol_mps_8  the launch-protocol suite (cuda_gpu_test's filter of gpu-checks.sh), MPS, 8
#   push_ab         the fused direct ReduceScatter with and without tile parts (--push-tiles),
#                   the parts moved by idle warps and by the consumers, 2 ranks at M=8192 and 4
#                   at M=2048 (bench/multigpu/rs_plans_ab.sh, PUSH="0 1 2")
#   ops_vs_torch    bench/ops/ops_vs_torch.sh (the ops beside torch.ops.symm_mem, every model)
#   ops_ts_8        ops_gpu_test time-sliced at 8 (100 capture replays)
#   protocol_ts_1   the launch-protocol suite time-sliced at 1
#   protocol_mps_1  the launch-protocol suite under MPS at 1; protocol_<ts|mps>_<c> any mode
#                   (at 32: 230 s under MPS, 310 s time-sliced, twentieth session)
#   ar_join         the ops' AllReduce first run after a line-up, traced: the joined CTAs' wait
#                   following the peers' tile progress (the default) against a fixed 200 and
#                   2000 us (bench/ops/ar_first_run_ab.sh)
#   ar_late_45      the same with MPS_PCT=45 and the default rule only: are the late CTAs the two
#                   clients' overlapping SM sets? (predicted: none late, first run as the second)
#   trace_test      ops_gpu_test's OpsTraceGpuTest under MPS at 8 (fixed after its first GPU run)
#   stall_ring_oversubscribed  the ring ReduceScatter (its steps wait for peers, so compute CTAs
#                   join them and wait) at 4 ranks as MPS clients at 50% each, oversubscribing
#                   the GPU: the case the joined CTAs' bound exists for, now that they follow the
#                   peers' tile progress; 500 launches per chunk count, SM backend, 0 stalls expected
#                   (scripts/stall-matrix.sh)
#   ops_ar_out      ops_gpu_test's AllReduce cases (*ar_*) under MPS at 8 with
#                   SYNCOPATE_OPS_ALLREDUCE_PLAN=allreduce.direct_out for every bucket
#   ar_plan_direct, ar_plan_direct_out  the ops' AllReduce beside torch.ops.symm_mem on every
#                   model (ops_vs_torch.sh, KINDS=ar): the default plans (allreduce.direct,
#                   direct_out for buckets of at most 2 MiB of C) and direct_out everywhere
#                   (fill the build host's cache with the knob too). Measured (twenty-second
#                   session, H100): direct_out 4-7% slower fused at M=8192, 9-16% unfused at 2048
#   ar_2048_plans   the AllReduce at M=2048 on the unfused path (LLaMA-3.1-70B, ops_bench, 2
#                   ranks as MPS clients at 50%): each plan at the transfers' default comm CTAs
#                   and at 48 (twenty-second session: direct 1.673 / 1.625 ms, direct_out 1.774 /
#                   1.707)
#   ar_tuned        ar_plan_direct with TUNE=1: `ops_bench --tune` picks each bucket's path
#                   first and the C++ and Python runs take it (fill the build host's cache with
#                   TUNE=1 KINDS=ar too). Twenty-fifth session (paths timed one after the
#                   other): unfused for 70B at both Ms, the fused direct not faster at M=2048
#                   (the prediction for the default plan missed); the rounds since, above
#   cli_ops_tune    tests/cli/ops_tune_test.sh with the bundle's `syncopate` under MPS at 8: the
#                   CLI's `ops tune` tunes a small AllReduce at 2 ranks and `ops path` applies
#                   the table it wrote (keep .device/bin/syncopate in the bundle)
#   ar_plan_traces  the AllReduce at M=8192 (70B) traced with each plan (ar_first_run_ab.sh, MPS
#                   at 45% each). Twenty-fifth session: direct_out's kernel 3-6% longer than
#                   direct's, its run without the copy after the kernel a tie single-run, 2%
#                   faster back to back, 2% slower per graph replay
# A step runs when its usual length (NEEDS below, from bench/RESULTS.md) fits in what is left,
# and is cut at what is left. Summaries on stdout; logs in $OUT/logs.tgz (ops_vs_torch's in
# $OUT/ops_logs.tgz, the traces of ar_join and ar_late_45 in $OUT/<step>.tgz).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
start=$SECONDS
budget=${BUDGET:-570}
left() { echo $((budget - (SECONDS - start))); }
source scripts/gpu-modes.sh  # bin, out, the library path, in_mode
export UCX_MODULE_DIR=$bin/ucx SYNCOPATED=$bin/syncopated
final_out=$out
out=$(mktemp -d)
protocol='Fused*:*FusedWorkload*:*WgmmaWorkload*:WgmmaDynamicTiles*:SymmetricMemory*:*InterNode*'
declare -A needs=([ops_mps_8]=140 [protocol_mps_8]=215 [push_ab]=170 [ops_vs_torch]=160
                  [ops_ts_8]=260 [protocol_ts_1]=90 [protocol_mps_1]=120 [ops_mps_1]=100 [ops_mps_32]=100
                  [ops_ts_1]=150 [ops_ts_32]=260 [protocol_mps_32]=230 [protocol_ts_8]=200
                  [protocol_ts_32]=310 [ar_join]=70 [trace_test]=20
                  [stall_ring_oversubscribed]=150 [ar_late_45]=40 [ar_plan_direct]=70
                  [ar_plan_direct_out]=70 [ar_tuned]=140 [ar_2048_plans]=80
                  [ops_ar_out]=70 [ar_plan_traces]=90 [cli_ops_tune]=60)
summary() {
  grep -E '^\[  (FAILED|PASSED) |^\[  SKIPPED \] [0-9]|^\[  FAILED  \] [A-Za-z]' "$1" | head -14
}
# Runs `bash SCRIPT` with OUT=$final_out/SUB and the given variables, cut at LIMIT (a cut run's
# MPS daemon, started in a session of its own, may outlive it: stopped here). Keeps the script's
# logs.tgz and concurrent_rows.csv as $final_out/SUB_logs.tgz and SUB_rows.csv.
scripted_step() {  # scripted_step SUB LIMIT SCRIPT [VAR=value ...]
  local sub=$1 limit=$2 script=$3
  shift 3
  local dir=$final_out/$sub
  mkdir -p "$dir"
  env "$@" OUT="$dir" timeout "$limit" bash "$script"
  local rc=$?
  if ((rc == 124)); then
    mps_kill_strays
  fi
  [[ -f $dir/logs.tgz ]] && mv "$dir/logs.tgz" "$final_out/${sub}_logs.tgz"
  [[ -f $dir/concurrent_rows.csv ]] && mv "$dir/concurrent_rows.csv" "$final_out/${sub}_rows.csv"
  rm -rf "$dir"
  return $rc
}
run_step() {  # run_step NAME LIMIT
  local name=$1 limit=$2
  case $name in
    ops_vs_torch) scripted_step ops "$limit" bench/ops/ops_vs_torch.sh ;;
    ar_plan_direct) scripted_step "$name" "$limit" bench/ops/ops_vs_torch.sh KINDS=ar ;;
    ar_plan_direct_out)
      scripted_step "$name" "$limit" bench/ops/ops_vs_torch.sh KINDS=ar \
        SYNCOPATE_OPS_ALLREDUCE_PLAN=allreduce.direct_out
      ;;
    ops_ar_out)
      SYNCOPATE_OPS_ALLREDUCE_PLAN=allreduce.direct_out STEP_TIMEOUT=$limit in_mode mps:8 \
        "$bin/ops_gpu_test" --gtest_filter='*ar_*'
      ;;
    ar_2048_plans)
      local plan ctas cache=$out/ar_2048_cache
      for plan in allreduce.direct allreduce.direct_out; do
        for ctas in 0 48; do
          echo "-- $plan, comm CTAs $ctas (0: the default)"
          rm -rf "$cache" && mkdir -p "$cache" && cp -r .device/ops-cache/llama3.1-70b/. "$cache/"
          SYNCOPATE_OPS_ALLREDUCE_PLAN=$plan STEP_TIMEOUT=$((limit / 4)) in_mode mps:8 \
            "$bin/ops_bench" --kind ar --n 8192 --k 14336 --world 2 --max-m 2048 --m 2048 \
            --backend sm --comm-ctas "$ctas" --cache-dir "$cache" 2>&1 |
            grep -E "^[0-9]+ +[0-9]+ |^rank|fail|rror"
        done
      done
      rm -rf "$cache"
      ;;
    ar_tuned) scripted_step "$name" "$limit" bench/ops/ops_vs_torch.sh KINDS=ar TUNE=1 ;;
    ar_plan_traces)
      local plan dir
      for plan in allreduce.direct allreduce.direct_out; do
        echo "-- $plan"
        dir=$final_out/${name}_${plan#allreduce.}
        mkdir -p "$dir"
        SYNCOPATE_OPS_ALLREDUCE_PLAN=$plan MPS_PCT=45 VARIANTS=200:0:1 OUT="$dir" \
          timeout $((limit / 2)) bash bench/ops/ar_first_run_ab.sh
        (($? == 124)) && mps_kill_strays
        [[ -f $dir/ar_first_run.tgz ]] && mv "$dir/ar_first_run.tgz" "$dir.tgz"
        rm -rf "$dir"
      done
      ;;
    push_ab)  # the fused direct ReduceScatter with and without tile parts, same call
      scripted_step push "$limit" bench/multigpu/rs_plans_ab.sh PLANS=reducescatter.direct \
        PUSH="0 1 2" TORCH=0 TESTS=0
      ;;
    ar_join | ar_late_45)
      local env=() dir=$final_out/$name
      [[ $name == ar_late_45 ]] && env=(MPS_PCT=45 VARIANTS=200:0:1)
      mkdir -p "$dir"
      env "${env[@]}" OUT="$dir" timeout "$limit" bash bench/ops/ar_first_run_ab.sh
      local rc=$?
      if ((rc == 124)); then  # cut: what the variants that ran left, packed as the script does
        mps_kill_strays
        local left
        left=$(cd "$dir" && ls -d join_* 2>/dev/null)
        # shellcheck disable=SC2086  # one folder name per word
        [[ -n $left ]] && tar czf "$dir/ar_first_run.tgz" -C "$dir" $left
      fi
      [[ -f $dir/ar_first_run.tgz ]] && mv "$dir/ar_first_run.tgz" "$final_out/$name.tgz"
      rm -rf "$dir"
      return $rc
      ;;
    stall_ring_oversubscribed)
      scripted_step stall "$limit" scripts/stall-matrix.sh MODES=mps:8 WORLDS=4 PCT=50 \
        WORKLOADS=rs BACKENDS=sm LAUNCHES=500 EXTRA="--rs-plan reducescatter.ring" \
        STEP_TIMEOUT=$((limit - 10))
      ;;
    cli_ops_tune)
      STEP_TIMEOUT=$limit in_mode mps:8 bash tests/cli/ops_tune_test.sh "$bin/syncopate"
      ;;
    trace_test)
      STEP_TIMEOUT=$limit in_mode mps:8 "$bin/ops_gpu_test" --gtest_filter='OpsTraceGpuTest.*'
      ;;
    ops_*)  # 1,000 capture replays under MPS, 100 time-sliced (each replay is a whole slice)
      local mode=${name#ops_} replays=1000
      [[ $mode == ts_* ]] && replays=100
      SYNCOPATE_OPS_REPLAYS=$replays STEP_TIMEOUT=$limit in_mode "${mode/_/:}" "$bin/ops_gpu_test"
      ;;
    protocol_*)
      local mode=${name#protocol_}
      STEP_TIMEOUT=$limit in_mode "${mode/_/:}" "$bin/cuda_gpu_test" --gtest_filter="$protocol"
      ;;
    *) echo "unknown step $name"; return 2 ;;
  esac
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
# The default (about 460 s): the tuner's rounds (c8236df: every path's op made first, timed in
# rounds whose order rotates, each path at its slowest rank), the same tuner as the installed
# CLI's `syncopate ops tune`, then the ops' tests time-sliced at
# 8 (everything since 4c5f8cc passed under MPS at 1, 8 and 32 and time-sliced at 1 in the
# twenty-fifth session). Predicted for ar_tuned: LLaMA-3.1-70B at M=8192 now takes a fused path
# (1-3% below unfused at the slowest rank; the old tuner took unfused from 5.653 ms and the run
# after it measured 5.999), and the runs after the table within 3% of the tuned figures; M=2048
# stays unfused for 70B and 8B, Qwen2-72B within 1% either way.
# The recipe: OPS_FILL=1 scripts/gpu-run.sh, then the fill of TUNE=1 KINDS=ar
#   (FILL=.device/ops-cache bash bench/ops/ops_vs_torch.sh).
# Still owed after it: ops_ts_32, then the stall matrix at 8 ranks, world 3 and time-sliced
# (scripts/stall-matrix.sh). The stall step's kernels can be compiled on the build host:
#   WARM_ARGS="--gpus 4 --tp 4 --workloads rs --rs-plan reducescatter.ring --models llama3.1-8b
#   --tokens 2048 --chunks 1,2,4,8" scripts/gpu-run.sh
# The protocol suite at 32 takes 220 s under MPS (only its 2- and 3-rank cases fit) and 310 s
# time-sliced.
for name in ${STEPS:-ar_tuned cli_ops_tune ops_ts_8}; do
  l=$(left)
  if ((l < ${needs[$name]:-60})); then echo "== $name: not run ($l s left)"; continue; fi
  s=$SECONDS
  run_step "$name" "$l" >"$out/$name.log" 2>&1
  echo "== $name: exit $? after $((SECONDS - s)) s"
  if [[ $name == ops_vs_torch || $name == push_ab || $name == ar_* || $name == stall_* ||
        $name == cli_* ]]; then
    cat "$out/$name.log"
  else
    summary "$out/$name.log"
  fi
  tar czf "$final_out/logs.tgz" -C "$out" .  # what ran so far, should the call be cut
done
rm -rf "$out"

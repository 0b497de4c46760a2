#!/usr/bin/env bash
# On the lent GPU machine (after scripts/gpu-run.sh, with .device/bin carried): issue 16's stall
# goal, LAUNCHES launches per (backend, chunks, world), in each concurrency mode. One
# syncopate_tp_bench run per (mode, world, backend) measures every variant with --reps LAUNCHES
# (a stall is a row whose bounded wait expired: check "error", the absent rank named), then
# bench/multigpu/stall_summary.py tables them; exits 1 if any variant stalled or was wrong.
#
#   MODES="ts:8 mps:8" WORLDS="2 4" LAUNCHES=2000 scripts/stall-matrix.sh
#
# Defaults: MODES "ts:1 ts:8 ts:32 mps:1 mps:8 mps:32", WORLDS "2 3 4 8" (under MPS each rank gets
# 100/world percent of the SMs), CHUNKS 1,2,4,8, BACKENDS ce,sm (each its own bench run,
# appending to the one CSV), WORKLOADS ag,rs, LAUNCHES 10000, TOKENS 2048 and MODEL llama3.1-8b
# (world 3: qwen2-72b at 2046 tokens, the shapes that split 3 ways; its GEMM is about 5x the 8B
# world-4 one, so give it fewer LAUNCHES or a longer STEP_TIMEOUT; TOKENS and MODEL, when set,
# apply to every world, and a world they do not split runs nothing and fails);
# PCT: every rank's MPS share of the SMs instead of 100/world (e.g. 50 at world 4: ranks that
# oversubscribe the GPU, where a joined CTA may hold a slot a peer's CTAs need);
# EXTRA: more syncopate_tp_bench flags (e.g. "--transfers-compute-ctas 1"). Logs and CSVs under
# $OUT (or ./gpu-out). STEP_TIMEOUT bounds each bench run (default 560 s over the backends). The
# whole matrix is many device calls: about 50 rows x LAUNCHES launches per (mode, world), so pick
# MODES, WORLDS and BACKENDS per call. A backend run that writes no row fails the script.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-modes.sh  # bin, out, library path, in_mode
backends=${BACKENDS:-ce,sm}
backends=${backends//,/ }
read -ra backend_list <<<"$backends"
# One (mode, world, backend) run each; a device call allows 600 s for them all.
export STEP_TIMEOUT=${STEP_TIMEOUT:-$((560 / ${#backend_list[@]}))}
launches=${LAUNCHES:-10000}
# Kernels compiled on the build host (WARM_ARGS of gpu-run.sh): the ranks load them, so the step
# limits time launches, not compiles.
if [[ -d .device/cache ]]; then mkdir -p "$out/cache" && cp -r .device/cache/. "$out/cache/"; fi
csvs=()
no_rows=0
rows_in() { [[ -f $1 ]] && wc -l <"$1" || echo 0; }
for mode in ${MODES:-ts:1 ts:8 ts:32 mps:1 mps:8 mps:32}; do
  for world in ${WORLDS:-2 3 4 8}; do
    name="stall_${mode/:/_}_w$world"
    model=${MODEL:-llama3.1-8b} tokens=${TOKENS:-2048}
    if ((world == 3)); then model=${MODEL:-qwen2-72b} tokens=${TOKENS:-2046}; fi
    rm -f "$out/$name.csv"  # no rows of an earlier run (other flags) in this one's table
    # One bench run per backend, appending to one CSV: a stalled launch breaks the group and ends
    # its run, so a stall on one backend must not leave the other's rows unrun.
    for backend in "${backend_list[@]}"; do
      echo "== $name $backend"
      before=$(rows_in "$out/$name.csv")
      MPS_PCT=${PCT:-$((100 / world))} in_mode "$mode" "$bin/syncopate_tp_bench" --gpus 1 \
        --ranks-per-gpu "$world" --tp "$world" --workloads "${WORKLOADS:-ag,rs}" \
        --models "$model" --tokens "$tokens" --chunks "${CHUNKS:-1,2,4,8}" \
        --backends "$backend" --reps "$launches" --warmup 0 --timeout-ms 2000 \
        --csv "$out/$name.csv" --cache-dir "$out/cache" ${EXTRA:-} >"$out/$name.$backend.log" 2>&1
      echo "   exit $?"
      # A run that wrote no row (killed at the step's limit, crashed) proves nothing: a failure.
      if (($(rows_in "$out/$name.csv") == before)); then
        echo "   no rows from $backend (see $name.$backend.log)"; no_rows=1
      fi
    done
    [[ -f $out/$name.csv ]] && csvs+=("$out/$name.csv")
  done
done
python3 bench/multigpu/stall_summary.py --launches "$launches" "${csvs[@]}" | tee "$out/stall.md"
summary=$?
pack_out stall.md  # the logs and CSVs in $out/logs.tgz
exit $((summary != 0 || no_rows))

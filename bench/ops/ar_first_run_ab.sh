#!/usr/bin/env bash
# On the lent GPU machine, from the repository root with .device carried (scripts/gpu-run.sh,
# OPS_FILL=1 for the default kernels): the ops' GEMM+AllReduce first run after a line-up against
# its second, with per-CTA traces (SYNCOPATE_OPS_TRACE_DIR, bench/ops/launch_trace_summary.py),
# once per VARIANTS entry "JOIN_US:COMPUTE_CTAS:FOLLOWS" (default "200:0:1 200:0:0 2000:0:0"):
# the joined CTAs' peer wait in microseconds (-DSYNCOPATE_JOIN_PEER_WAIT_US through
# SYNCOPATE_NVRTC_OPTIONS, impl/pieces.cuh; 200 is the default), the fused kernel's compute CTAs
# (SYNCOPATE_OPS_COMPUTE_CTAS; 0: every slot, 64 at 50% of an H100's or H200's SMs) and whether
# that wait restarts while the peers waited for draw tiles (-DSYNCOPATE_JOIN_FOLLOWS_PEERS; 1,
# the default since the twentieth session). 2 ranks as MPS clients at 50% each, connections 8,
# MODEL "hidden,ffn" (default LLaMA-3.1-70B), M=8192. The kernels of other knobs can be compiled
# on the build host too, beside the default's:
#   SYNCOPATE_NVRTC_OPTIONS="-DSYNCOPATE_JOIN_FOLLOWS_PEERS=0" MODELS=llama3.1-70b:8192,28672 \
#     FILL=.device/ops-cache bash bench/ops/ops_vs_torch.sh
#
# Why (bench/RESULTS.md, nineteenth and twentieth sessions): after a line-up one rank's kernel
# gets about 6 of its 66 CTAs only when the peer's compute CTAs leave, so its GEMM ends about
# 0.25 ms after the peer's. With a fixed 200 us wait the peer's joined CTAs then left the
# AllReduce's remaining transfers to the 2 comm CTAs: first-run kernel 7.6-7.7 ms against 5.2
# back to back. Measured in the twentieth session (H100): a fixed 2,000 us took it to 5.9-6.0,
# following the peers' tile progress to 5.95 (predicted: as 2,000 us within 3%) with the same
# back-to-back time per run; 58 compute CTAs (no late CTAs) and every 4th joined CTA staying to
# the deadline (a knob since removed) also to about 5.8, the first with every kernel 11% slower.
# 58 compute CTAs and 2 comm CTAs are the 60 CTAs the late rank gets at once.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source scripts/gpu-modes.sh
# MPS_PCT: each rank's share (50 by default). The late CTAs always belong to the rank whose
# kernel started second, always 6 of them (twentieth session's traces): the two clients' SM sets
# at 50% may overlap by 6 SMs. Predicted at 45 (59 SMs each, 118 of 132): no late CTAs.
export MPS_PCT=${MPS_PCT:-50}
model=${MODEL:-8192,28672}
# Kernel caches apart from $out (a cut run leaves no cache there); seeded from the build host's.
# (No trap of its own: gpu-modes.sh's EXIT trap stops MPS.)
caches=$(mktemp -d /tmp/syncopate-ar-ab.XXXXXX)
for variant in ${VARIANTS:-200:0:1 200:0:0 2000:0:0}; do
  IFS=: read -r us ctas follows <<<"$variant"
  follows=${follows:-1}
  dir=$out/join_${us}_ctas_${ctas}_follows_$follows cache=$caches/$variant
  mkdir -p "$dir/trace" "$cache"
  [[ -d .device/ops-cache/llama3.1-70b ]] && cp -r .device/ops-cache/llama3.1-70b/. "$cache/"
  # The NVRTC options enter the kernel cache's key: none for the defaults, so those kernels
  # load from the build host's cache; other knobs compile the op's kernels here (a few s).
  nvrtc=""
  ((us != 200)) && nvrtc+=" -DSYNCOPATE_JOIN_PEER_WAIT_US=$us"
  ((follows != 1)) && nvrtc+=" -DSYNCOPATE_JOIN_FOLLOWS_PEERS=$follows"
  if [[ -n $nvrtc ]]; then export SYNCOPATE_NVRTC_OPTIONS=${nvrtc# }; else unset SYNCOPATE_NVRTC_OPTIONS; fi
  SYNCOPATE_OPS_COMPUTE_CTAS=$ctas SYNCOPATE_OPS_TRACE_DIR=$dir/trace \
    STEP_TIMEOUT=${STEP_TIMEOUT:-150} in_mode mps:8 python3 "$bin/python/torch_ops_check.py" \
    --lib "$bin/libsyncopate.so" --world 2 --model "$model" --parts timing --time-ms 8192 \
    --buckets 8192 --time-kinds ar --cache-dir "$cache" >"$dir/check.log" 2>&1
  echo "== joined CTAs' peer wait $us us, compute CTAs $ctas (0: all)," \
    "following peers' tile progress $follows: exit $?"
  grep -E "^pair|^time|^RESULT" "$dir/check.log" | cut -c1-100
  python3 bench/ops/launch_trace_summary.py "$dir/trace" | grep -E "^file|all_reduce"
  rm -rf "$cache"
done
rm -rf "$caches"
tar czf "$out/ar_first_run.tgz" -C "$out" $(cd "$out" && ls -d join_*) && rm -rf "$out"/join_*

# Sourced by the GPU-machine scripts (gpu-checks.sh, stall-matrix.sh): MPS started and always
# stopped around a command, with private pipe/log folders and nothing else on the device changed,
# and the concurrency modes of issue 16: ts:<c> runs the ranks time-sliced, mps:<c> as concurrent
# MPS clients at MPS_PCT percent of the SMs each (default 50), both with
# CUDA_DEVICE_MAX_CONNECTIONS=<c>. STEP_TIMEOUT (default 300 s) bounds each command. Run from the
# repository root: sets bin (the bundle, .device/bin, on the library path) and out ($OUT or
# ./gpu-out, created).
bin=$PWD/.device/bin
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mps_up=0
mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d /tmp/syncopate-mps-pipe.XXXXXX)
  export CUDA_MPS_LOG_DIRECTORY=$(mktemp -d /tmp/syncopate-mps-log.XXXXXX)
  nvidia-cuda-mps-control -d && mps_up=1 && sleep 1
}
mps_stop() {
  if ((mps_up)); then echo quit | nvidia-cuda-mps-control; mps_up=0; sleep 1; fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
}
trap mps_stop EXIT
# After a step cut by `timeout`: its MPS daemon (started in a session of its own) may outlive it.
# By full command line: a process name is cut at 15 characters, which `pkill -x` would never match.
mps_kill_strays() {
  pkill -f '(^|/)nvidia-cuda-mps-(control|server)( |$)'
  sleep 1
}
# in_mode MODE COMMAND...: the command with the mode's environment (MPS started around it).
in_mode() {
  local mode=$1; shift
  local kind=${mode%%:*} conns=${mode##*:}
  if [[ $kind == mps ]]; then
    mps_start || { echo "   MPS did not start"; return 1; }
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=${MPS_PCT:-50} CUDA_DEVICE_MAX_CONNECTIONS=$conns \
      timeout "${STEP_TIMEOUT:-300}" "$@"
    local rc=$?
    mps_stop
    return $rc
  fi
  CUDA_DEVICE_MAX_CONNECTIONS=$conns timeout "${STEP_TIMEOUT:-300}" "$@"
}

# pack_out KEEP...: a device call brings back only a few files from $OUT, so everything under it
# but the files named (relative to $out) goes into $out/logs.tgz; kernel caches (cache,
# *-cache) are dropped first.
pack_out() {
  local keep f tmp
  tmp=$(mktemp -d)
  rm -rf "$out/cache" "$out"/*-cache
  for keep in "$@"; do [[ -e $out/$keep ]] && mv "$out/$keep" "$tmp/"; done
  tar czf "$tmp/logs.tgz" -C "$out" . && find "$out" -mindepth 1 -delete
  for f in "$tmp"/*; do mv "$f" "$out/"; done
  rmdir "$tmp"
}

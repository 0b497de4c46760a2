#!/usr/bin/env bash
# Prints how many build and test jobs this machine can run at once: the CPUs we may use (the
# affinity mask from nproc, lowered to a cgroup CPU quota where one is set, since nproc does not
# see quotas) and at most one job per 2 GiB of memory (a fused-kernel NVRTC compile or a heavy
# translation unit takes about that much; oversubscribing memory gets tests OOM-killed).
set -euo pipefail

cpus=$(nproc)

quota_cpus() {
  local quota period
  if [[ -r /sys/fs/cgroup/cpu.max ]]; then  # cgroup v2: "max 100000" or "200000 100000"
    read -r quota period < /sys/fs/cgroup/cpu.max
  elif [[ -r /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then  # cgroup v1
    quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)
    period=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)
  else
    return 1
  fi
  [[ "$quota" =~ ^[0-9]+$ && "$period" =~ ^[0-9]+$ && "$period" -gt 0 ]] || return 1
  echo $(( (quota + period - 1) / period ))
}

if q=$(quota_cpus) && (( q > 0 && q < cpus )); then cpus=$q; fi

mem_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
if [[ "$mem_kib" =~ ^[0-9]+$ ]] && (( mem_kib > 0 )); then
  by_mem=$(( mem_kib / (2 * 1024 * 1024) ))
  (( by_mem < 1 )) && by_mem=1
  (( by_mem < cpus )) && cpus=$by_mem
fi

echo "$cpus"

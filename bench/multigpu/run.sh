#!/usr/bin/env bash
# Runs the multi-GPU overlap benchmark of issue 8 on a device machine: syncopate_tp_bench (C++,
# Syncopate's fused kernels, their parts alone, the fallback selection) and baselines.py
# (PyTorch: cuBLAS+NCCL back to back, async-TP) on the same problems and the same seeded inputs,
# then merges both CSVs into a markdown table (merge_results.py). See README.md.
#
#   bench/multigpu/run.sh bundle            # here (no GPU): build the target, bundle .device/mg
#   bench/multigpu/run.sh [options] [-- extra syncopate_tp_bench flags]   # on the device machine
#
# Options: --dry-run (one GPU: C++ with 2 ranks sharing GPU 0, Python at world size 1; one small
# shape), --gpus N, --tp LIST, --workloads LIST, --models LIST, --tokens LIST, --chunks LIST,
# --reps N, --warmup N, --out DIR (default ${OUT:-.}/multigpu), --skip-syncopate,
# --skip-baselines. Output: DIR/syncopate.csv, DIR/baselines.csv, DIR/results.md, DIR/*.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

if [[ "${1:-}" == "bundle" ]]; then
  set -e
  build=${BUILD_DIR:-build-mg}
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"${JOBS:-2}" --target syncopate_tp_bench
  ../shared/tools/device-bundle .device/mg "$build/bench/multigpu/syncopate_tp_bench"
  exit 0
fi

# NVLink multicast stays off (a program that uses it can take the host's shared GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

dry=0 gpus="" tp="" workloads="ag,rs,ar" models="" tokens="8192,2048,1024" chunks="1,2,4,8"
reps=10 warmup=3 out="${OUT:-.}/multigpu" skip_cpp=0 skip_py=0 extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --gpus) gpus=$2; shift ;;
    --tp) tp=$2; shift ;;
    --workloads) workloads=$2; shift ;;
    --models) models=$2; shift ;;
    --tokens) tokens=$2; shift ;;
    --chunks) chunks=$2; shift ;;
    --reps) reps=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --out) out=$2; shift ;;
    --skip-syncopate) skip_cpp=1 ;;
    --skip-baselines) skip_py=1 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"

bin=${SYNCOPATE_TP_BENCH:-}
if [[ -z "$bin" ]]; then
  for b in .device/mg/syncopate_tp_bench build-mg/bench/multigpu/syncopate_tp_bench; do
    [[ -x "$b" ]] && { bin=$b; break; }
  done
fi
[[ -d .device/mg ]] && export LD_LIBRARY_PATH="$root/.device/mg:${LD_LIBRARY_PATH:-}"

if [[ -z "$gpus" ]]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [[ "$gpus" =~ ^[0-9]+$ && "$gpus" -gt 0 ]] || gpus=1
fi

if [[ $dry == 1 ]]; then
  # Under 3 minutes on one H200: one small shape, 2 chunk counts, few reps.
  models=${models:-llama3.1-8b}
  [[ "$tokens" == "8192,2048,1024" ]] && tokens=1024
  [[ "$chunks" == "1,2,4,8" ]] && chunks=1,4
  reps=5 warmup=2
  cpp_ranks=(--gpus 1 --ranks-per-gpu 2 --tp 2 --run-timeout-s 150)
  py_tp=(--dry-run)
else
  tp=${tp:-$gpus}
  cpp_ranks=(--gpus "$gpus" --tp "$tp")
  py_tp=(--tp "$tp")
fi
common=(--workloads "$workloads" --tokens "$tokens" --reps "$reps" --warmup "$warmup")
[[ -n "$models" ]] && common+=(--models "$models")

status=0
if [[ $skip_cpp == 0 ]]; then
  if [[ -z "$bin" ]]; then
    echo "run.sh: syncopate_tp_bench not found (build and bundle it first: run.sh bundle)" >&2
    status=1
  else
    echo "== syncopate_tp_bench ${cpp_ranks[*]} ${common[*]} --chunks $chunks ${extra[*]}"
    "$bin" "${cpp_ranks[@]}" "${common[@]}" --chunks "$chunks" --csv "$out/syncopate.csv" \
      "${extra[@]}" 2>&1 | tee "$out/syncopate.log"
    rc=${PIPESTATUS[0]}
    [[ $rc != 0 ]] && { echo "run.sh: syncopate_tp_bench exited $rc" >&2; status=1; }
  fi
fi
if [[ $skip_py == 0 ]]; then
  echo "== baselines.py ${py_tp[*]} ${common[*]}"
  python3 "$here/baselines.py" "${py_tp[@]}" "${common[@]}" --csv "$out/baselines.csv" 2>&1 |
    tee "$out/baselines.log"
  rc=${PIPESTATUS[0]}
  [[ $rc != 0 ]] && { echo "run.sh: baselines.py exited $rc" >&2; status=1; }
fi
python3 "$here/merge_results.py" "$out/syncopate.csv" "$out/baselines.csv" > "$out/results.md"
cat "$out/results.md"
exit $status

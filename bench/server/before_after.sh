#!/usr/bin/env bash
# Cached Compile throughput of several syncopated builds, measured by the same client code
# (control_plane_bench --compile_only) back to back in one invocation: REPS rounds, the order of
# the builds rotating per round so drift on a shared machine favours none; each run starts its
# own daemon. Prints every run's rates and a table of medians, each build against the first.
#
# usage: before_after.sh BENCH REPS SECONDS CLIENTS LABEL=SYNCOPATED LABEL=SYNCOPATED...
#   e.g. before_after.sh build/bench/server/control_plane_bench 3 5 16,64 \
#          before=/old/build/server/syncopated after=build/server/syncopated
# Warns when a build (ninja) runs at the start or end: the figures are then not comparable.
set -euo pipefail
bench=$1 reps=$2 seconds=$3 clients=$4
shift 4
labels=() binaries=()
for pair in "$@"; do
  labels+=("${pair%%=*}")
  binaries+=("${pair#*=}")
done
n=${#labels[@]}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

busy() { if pgrep -x ninja > /dev/null; then echo "WARNING: a build (ninja) is running $1"; fi; }
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
busy "at the start"
for rep in $(seq 1 "$reps"); do
  for k in $(seq 0 $((n - 1))); do
    i=$(( (k + rep - 1) % n ))
    label=${labels[$i]}
    cmd=("$bench" --compile_only "--clients=$clients" "--seconds=$seconds" "--syncopated=${binaries[$i]}")
    echo "run $rep $label: ${cmd[*]}"
    "${cmd[@]}" > "$out/$rep-$label.txt"
    # "| cached Compile RPC, 16 clients, full plan, cubin ... | 1234 req/s |" -> rows of the summary
    sed -nE "s/^\| (cached Compile RPC|empty RPC[^,]*), ([0-9]+) clients(, |: )([^|]*[^ ]) \| ([0-9]+) req\/s.*/$label $rep \2 \1\3\4|\5/p" \
      "$out/$rep-$label.txt" >> "$out/rows.txt"
  done
done
busy "at the end"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out/rows.txt" "${labels[@]}" <<'EOF'
import collections, re, statistics, sys
labels = sys.argv[2:]
runs = collections.defaultdict(list)
cubin = collections.defaultdict(set)  # the builds' kernels may differ in size
for line in open(sys.argv[1]):
    head, rate = line.rstrip("\n").rsplit("|", 1)
    label, rep, clients, what = head.split(" ", 3)
    size = re.search(r" \((\d+) B\)", what)
    if size:
        cubin[label].add(size.group(1))
        what = what.replace(size.group(0), "")
    runs[(int(clients), what, label)].append(int(rate))
for label in labels:
    print(f"cubin size, {label}: {', '.join(sorted(cubin[label]))} B")
keys = sorted({(c, w) for c, w, _ in runs})
print("| clients | request | " + " | ".join(f"{l} (req/s: median, each run)" for l in labels) + " | "
      + " | ".join(f"{l} / {labels[0]}" for l in labels[1:]) + " |")
print("|---|---|" + "---|" * (2 * len(labels) - 1))
for clients, what in keys:
    med = {l: statistics.median(runs[(clients, what, l)]) for l in labels}
    cells = [f"{med[l]:,.0f} ({', '.join(f'{x:,}' for x in runs[(clients, what, l)])})" for l in labels]
    ratios = [f"{med[l] / med[labels[0]]:.3f}" for l in labels[1:]]
    print(f"| {clients} | {what} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
EOF

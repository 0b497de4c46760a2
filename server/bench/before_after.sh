#!/usr/bin/env bash
# Cached Compile throughput of two syncopated builds, measured by the same client code
# (control_plane_bench --compile_only) back to back in one invocation: REPS rounds, the order of
# the two daemons alternating per round so drift on a shared machine does not favour one; each
# run starts its own daemon. Prints every run's rates and a table of medians with after/before.
#
# usage: before_after.sh BENCH BEFORE_SYNCOPATED AFTER_SYNCOPATED [REPS=3] [SECONDS=5]
#                        [CLIENTS=16,64]
# Warns when a build (ninja) runs at the start or end: the figures are then not comparable.
set -euo pipefail
bench=$1 before=$2 after=$3 reps=${4:-3} seconds=${5:-5} clients=${6:-16,64}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

busy() { if pgrep -x ninja > /dev/null; then echo "WARNING: a build (ninja) is running $1"; fi; }
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
busy "at the start"
for rep in $(seq 1 "$reps"); do
  if (( rep % 2 )); then order="before after"; else order="after before"; fi
  for which in $order; do
    binary=$before
    [[ $which == after ]] && binary=$after
    cmd=("$bench" --compile_only "--clients=$clients" "--seconds=$seconds" "--syncopated=$binary")
    echo "run $rep $which: ${cmd[*]}"
    "${cmd[@]}" > "$out/$rep-$which.txt"
    # "| cached Compile RPC, 16 clients, full plan, cubin ... | 1234 req/s |" -> rows of the summary
    sed -nE "s/^\| (cached Compile RPC|empty RPC[^,]*), ([0-9]+) clients(, |: )([^|]*[^ ]) \| ([0-9]+) req\/s.*/$which $rep \2 \1\3\4|\5/p" \
      "$out/$rep-$which.txt" >> "$out/rows.txt"
  done
done
busy "at the end"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out/rows.txt" <<'EOF'
import collections, re, statistics, sys
runs = collections.defaultdict(list)
cubin = collections.defaultdict(set)  # the two builds' kernels may differ in size
for line in open(sys.argv[1]):
    head, rate = line.rstrip("\n").rsplit("|", 1)
    which, rep, clients, what = head.split(" ", 3)
    size = re.search(r" \((\d+) B\)", what)
    if size:
        cubin[which].add(size.group(1))
        what = what.replace(size.group(0), "")
    runs[(int(clients), what, which)].append(int(rate))
for which in ("before", "after"):
    print(f"cubin size, {which}: {', '.join(sorted(cubin[which]))} B")
keys = sorted({(c, w) for c, w, _ in runs}, key=lambda k: (k[0], k[1]))
print("| clients | request | before (req/s, each run) | after (req/s, each run) | median after / before |")
print("|---|---|---|---|---|")
for clients, what in keys:
    b, a = runs[(clients, what, "before")], runs[(clients, what, "after")]
    mb, ma = statistics.median(b), statistics.median(a)
    print(f"| {clients} | {what} | {mb:,.0f} ({', '.join(f'{x:,}' for x in b)}) | "
          f"{ma:,.0f} ({', '.join(f'{x:,}' for x in a)}) | {ma / mb:.3f} |")
EOF

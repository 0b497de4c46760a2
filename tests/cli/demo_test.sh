#!/usr/bin/env bash
# The main job (`syncopate demo`, what scripts/run.sh runs) end to end on a fresh kernel cache:
# every step prints its result and the run exits 0; the step through the embedded daemon agrees
# on step 1's plan and hands the runtime the daemon's binary for its own key; a second run is
# served from the cache; a bad flag is a usage error (exit 2) that names the flag.
# Without a GPU the GPU step must say why it is skipped (with one, it must pass).
# usage: demo_test.sh <syncopate>
set -euo pipefail
syncopate=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

expect() {  # expect <file> <fixed string>
  grep -qF -- "$2" "$1" || { echo "missing: $2"; cat "$1"; exit 1; }
}

"$syncopate" demo --quiet-timeline --cache-dir="$dir/cache" >"$dir/first.txt" 2>&1 \
  || { echo "demo failed (exit $?)"; cat "$dir/first.txt"; exit 1; }
for step in "== 1. chunk plan" "== 2. validation" "  OK: postcondition holds" \
            "== 3. simulation" "== 5. lowering" "== 6. fused and local kernels" \
            "(cache: compiled)" "(cache: memory)" "== 7. the same through syncopated" \
            "(step 1's hash)" "daemon compile by plan hash" \
            "took the daemon's binary for its own key" "== 8. run on the GPU"; do
  expect "$dir/first.txt" "$step"
done
# The daemon found the kernel the CLI built: one cache key for every builder.
expect "$dir/first.txt" "cache hit (the kernel step 6 built"
if ! grep -q "every output element matches the reference" "$dir/first.txt"; then
  expect "$dir/first.txt" "  skipped: "
fi

"$syncopate" demo --quiet-timeline --cache-dir="$dir/cache" >"$dir/second.txt" 2>&1 \
  || { echo "second demo failed"; cat "$dir/second.txt"; exit 1; }
grep -q "(cache: compiled)" "$dir/second.txt" && { echo "second run compiled again"; \
  cat "$dir/second.txt"; exit 1; }
expect "$dir/second.txt" "(cache: disk)"

set +e
"$syncopate" demo --world=banana >"$dir/bad.txt" 2>&1
code=$?
set -e
[[ $code == 2 ]] || { echo "bad flag: exit $code, want 2"; cat "$dir/bad.txt"; exit 1; }
expect "$dir/bad.txt" "world"
echo "demo: OK"

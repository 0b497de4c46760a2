#!/usr/bin/env bash
# `syncopate compile --daemon`: against a real syncopated (temp dir, ephemeral port) the binary
# comes from the daemon for the key the CLI derives, lands in the CLI's cache (a second run finds
# it there without asking), and is byte for byte what a local NVRTC compile writes; a daemon that
# is not there is an error naming it.
# usage: compile_daemon_test.sh <syncopate> <syncopated>
set -euo pipefail
syncopate=$1
syncopated=$2
source "$(dirname "$0")/../testing/daemon.sh"  # $dir, start_daemon, cleanup at exit
expect() {  # expect <file> <fixed string>
  grep -qF -- "$2" "$1" || { echo "missing: $2"; cat "$1"; exit 1; }
}

start_daemon "$syncopated" "$dir/d.sock" --unix_socket="$dir/d.sock" --listen= \
  --node_name=cli-test --cache_dir="$dir/daemon-cache"

common=(--workload ag_gemm --m 256 --n 128 --k 64 --world 2)
"$syncopate" compile "${common[@]}" --daemon "$dir/d.sock" --cache-dir "$dir/cli-cache" \
  --out "$dir/fetched.cubin" >"$dir/first.txt" 2>&1 || { cat "$dir/first.txt"; exit 1; }
expect "$dir/first.txt" "cache: fetched"
expect "$dir/first.txt" "daemon   binary from the daemon (same key)"

"$syncopate" compile "${common[@]}" --daemon "$dir/d.sock" --cache-dir "$dir/cli-cache" \
  --out "$dir/again.cubin" >"$dir/second.txt" 2>&1 || { cat "$dir/second.txt"; exit 1; }
expect "$dir/second.txt" "cache: disk"
expect "$dir/second.txt" "not asked: the local cache had the kernel"

"$syncopate" compile "${common[@]}" --no-cache --out "$dir/local.cubin" >"$dir/local.txt" 2>&1 \
  || { cat "$dir/local.txt"; exit 1; }
cmp "$dir/fetched.cubin" "$dir/local.cubin" || { echo "daemon's cubin differs from NVRTC's"; exit 1; }

set +e
"$syncopate" compile "${common[@]}" --daemon "$dir/nobody.sock" >"$dir/missing.txt" 2>&1
code=$?
set -e
[[ $code == 1 ]] || { echo "missing daemon: exit $code, want 1"; cat "$dir/missing.txt"; exit 1; }
expect "$dir/missing.txt" "nobody.sock"

kill -TERM "$daemon_pid"
wait "$daemon_pid"
daemon_pid=""
echo "compile --daemon: OK"

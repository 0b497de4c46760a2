#!/usr/bin/env bash
# ctest driver for trainer.py: starts a real syncopated (temp dir, ephemeral port), runs two
# trainer ranks against it (join, agree, compile), checks they got the same plan, checks a bad
# request's error, server reflection and health, then stops the daemon with SIGTERM and checks it
# exits 0.
# usage: run_example_test.sh <syncopated> <python3>
set -euo pipefail
syncopated=$1
python=$2
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
daemon_pid=""
cleanup() {
  [[ -n $daemon_pid ]] && kill -KILL "$daemon_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

"$syncopated" --unix_socket="$dir/d.sock" --listen=127.0.0.1:0 --port_file="$dir/port" \
  --token=example-token --node_name=example --cache_dir="$dir/cache" 2>"$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 300); do [[ -s $dir/port ]] && break; sleep 0.1; done
[[ -s $dir/port ]] || { echo "daemon did not start"; cat "$dir/daemon.log"; exit 1; }

cat >"$dir/kernel.cu" <<'CU'
#include <cuda_bf16.h>
#include <syncopate/device.cuh>

namespace test_kernels {
// Y = 2 X, one tile = 16 rows.
template <class Schedule>
__device__ void scale_rows(Schedule& s, const __nv_bfloat16* X, __nv_bfloat16* Y, int cols) {
  for (int i = s.first(); i < s.num_tiles(); i += s.stride()) {
    const syncopate::Tile t = s.tile(i);
    if (!s.wait(t)) return;
    for (int c = threadIdx.x; c < 16 * cols; c += blockDim.x) {
      const long long at = static_cast<long long>(t.m) * 16 * cols + c;
      Y[at] = __float2bfloat16_rn(2.f * __bfloat162float(X[at]));
    }
    s.done(t);
  }
}
}  // namespace test_kernels
CU
cat >"$dir/kernel.spec" <<'SPEC'
name = scale
entry = test_kernels::scale_rows
problem_m = 64
problem_n = 1
tile_m = 16
tile_n = 1
block_threads = 128
operand = X bf16 consumed data 64x32 16*m:16 *
operand = Y bf16 local - 64x32 16*m:16 *
scalar = cols i32 32
SPEC

for rank in 0 1; do
  "$python" "$here/trainer.py" --socket "$dir/d.sock" --job py-example --world 2 --rank $rank \
    --template allgather.ring --shape 64,32 --source "$dir/kernel.cu" --spec "$dir/kernel.spec" \
    --timeout 30 >"$dir/rank$rank.json" &
done
wait %2 %3 || { cat "$dir"/rank*.json "$dir/daemon.log"; exit 1; }
cat "$dir/rank0.json" "$dir/rank1.json"
"$python" - "$dir/rank0.json" "$dir/rank1.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["ok"] and b["ok"], (a, b)
assert a["plan_hash"] == b["plan_hash"] and len(a["plan_hash"]) == 64, (a, b)
assert a["group_id"] == b["group_id"] and a["members"] == 2, (a, b)
assert a["cubin_bytes"] > 0 and b["cubin_bytes"] > 0, (a, b)
PY

# A failing call reports the daemon's code and message.
if "$python" "$here/trainer.py" --socket "$dir/d.sock" --job bad --world 2 --rank 5 \
     --timeout 5 >"$dir/bad.json"; then
  echo "expected rank 5 of 2 to fail"; exit 1
fi
grep -q '"code": "INVALID_ARGUMENT"' "$dir/bad.json" && grep -q 'rank: 5' "$dir/bad.json" \
  || { cat "$dir/bad.json"; exit 1; }

# Server reflection lists the services; health says SERVING (raw calls: no extra stubs needed).
"$python" - "$dir/d.sock" <<'PY'
import grpc, sys
channel = grpc.insecure_channel("unix:" + sys.argv[1])
raw = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
reflection = channel.stream_stream(
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", **raw)
listing = b"".join(reflection(iter([b"\x3a\x00"]), timeout=10))  # list_services: ""
for name in (b"syncopate.v1.Rendezvous", b"syncopate.v1.Compiler", b"syncopate.v1.Daemon",
             b"grpc.health.v1.Health"):
    assert name in listing, (name, listing)
health = channel.unary_unary("/grpc.health.v1.Health/Check", **raw)(b"", timeout=10)
assert health == b"\x08\x01", health  # SERVING
PY

kill -TERM "$daemon_pid"
wait "$daemon_pid"
daemon_pid=""
echo "python example: OK"

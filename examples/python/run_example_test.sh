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
kernels=$here/../kernels  # scale_rows.cuh and .spec: Y = 2 X over the gathered "data"
source "$here/../../tests/testing/daemon.sh"  # $dir, start_daemon, cleanup at exit

start_daemon "$syncopated" "$dir/port" --unix_socket="$dir/d.sock" --listen=127.0.0.1:0 \
  --port_file="$dir/port" --token=example-token --node_name=example --cache_dir="$dir/cache"

for rank in 0 1; do
  "$python" "$here/trainer.py" --socket "$dir/d.sock" --job py-example --world 2 --rank $rank \
    --template allgather.ring --shape 64,32 --source "$kernels/scale_rows.cuh" \
    --spec "$kernels/scale_rows.spec" \
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

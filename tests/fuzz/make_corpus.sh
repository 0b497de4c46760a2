#!/usr/bin/env bash
# Encodes the seed requests (seeds/*.textproto, first line "# selector N: <message type>") into
# fuzzer inputs: one selector byte, then the message's wire encoding.
# Also raw seeds, see the end.
# usage: make_corpus.sh <proto root> <output dir>
set -euo pipefail
proto_root=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for seed in "$here"/seeds/*.textproto; do
  header=$(head -1 "$seed")
  selector=$(sed -E 's/^# selector ([0-9]+): .*/\1/' <<<"$header")
  type=$(sed -E 's/^# selector [0-9]+: ([A-Za-z0-9_.]+).*/\1/' <<<"$header")
  name=$(basename "$seed" .textproto)
  { printf "\\x$(printf %02x "$selector")"
    tail -n +2 "$seed" | protoc --proto_path="$proto_root" --encode="$type" syncopate/v1/service.proto
  } >"$out/$name"
done
# Raw seeds (seeds/*.raw, first line "# selector N: raw ..."): the selector byte, then the rest of
# the file as it is (text the scanner and the log filter read directly).
for seed in "$here"/seeds/*.raw; do
  [ -e "$seed" ] || continue
  selector=$(head -1 "$seed" | sed -E 's/^# selector ([0-9]+): .*/\1/')
  { printf "\\x$(printf %02x "$selector")"; tail -n +2 "$seed"; } >"$out/$(basename "$seed" .raw)"
done

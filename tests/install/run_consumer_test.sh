#!/usr/bin/env bash
# Installs a Syncopate build into a fresh prefix and uses it as a consumer would: (a) the project
# tests/install/consumer/ through find_package(Syncopate) (a C++ program over syncopate/ops.h and
# a C program over syncopate/syncopate_ops.h), (b) the C program compiled with nothing but
# `pkg-config --cflags --libs syncopate`. Each program checks the API's behaviour and exits 1
# naming a mismatch; this script stops at the first failing step and says which.
# usage: run_consumer_test.sh <build dir> <source dir>
# Environment: CMAKE (default cmake), CC (default cc).
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 <build dir> <source dir>" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
cmake=${CMAKE:-cmake}
cc=${CC:-cc}
consumer_src=$source/tests/install/consumer

work=$(mktemp -d "${TMPDIR:-/tmp}/syncopate-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

step() { echo "install.consumer: $*"; }
fail() {
  echo "install.consumer: FAIL: $*" >&2
  exit 1
}
# run <log> <what> <command...>: runs the command with its output in <log>; on failure prints
# the log and fails naming <what>.
run() {
  local log=$1 what=$2
  shift 2
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$what (exit status of: $*)"
  fi
}

step "installing $build into $prefix"
run "$work/install.log" "cmake --install" "$cmake" --install "$build" --prefix "$prefix"
pc=$(find "$prefix" -path '*/pkgconfig/syncopate.pc' | head -n 1)
[[ -n $pc ]] || fail "no pkgconfig/syncopate.pc under $prefix"
libdir=$(dirname "$(dirname "$pc")")
for file in "$libdir/libsyncopate.so" "$libdir/libsyncopate.so.0" \
            "$libdir/cmake/Syncopate/SyncopateConfig.cmake" \
            "$libdir/cmake/Syncopate/SyncopateConfigVersion.cmake" \
            "$libdir/cmake/Syncopate/SyncopateTargets.cmake" \
            "$prefix/include/syncopate/ops.h" "$prefix/include/syncopate/syncopate_ops.h" \
            "$prefix/include/syncopate/status.h"; do
  [[ -e $file ]] || fail "the install lacks $file"
done
# The CLI an engine's deployment uses beside the library (`ops path`, `ops tune`), run from the
# prefix: the ops' paths need no GPU.
[[ -x $prefix/bin/syncopate ]] || fail "the install lacks $prefix/bin/syncopate"
run "$work/cli.log" "the installed syncopate ops path" \
  "$prefix/bin/syncopate" ops path --kind ar --world 2 --max-m 8192 --n 4096 --k 7168
grep -qE '^8192 +8192 +fused ' "$work/cli.log" || fail "the installed ops path printed no fused 8192 row"
# The installed library must not point back into the build tree.
if command -v readelf >/dev/null; then
  if readelf -d "$libdir/libsyncopate.so.0" | grep -E 'RPATH|RUNPATH' | grep -qF "$build"; then
    fail "the installed libsyncopate.so.0 keeps a run path into the build tree $build"
  fi
fi

# (a) find_package(Syncopate).
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cuda_root=()
cuda_bin=$(sed -n 's/^CUDAToolkit_BIN_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
if [[ -n $cuda_bin ]]; then cuda_root=(-DCUDAToolkit_ROOT="$(dirname "$cuda_bin")"); fi
step "configuring $consumer_src with CMAKE_PREFIX_PATH=$prefix"
run "$work/configure.log" "configuring the find_package consumer" \
  "$cmake" -S "$consumer_src" -B "$work/consumer" "${generator[@]}" "${cuda_root[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc"
step "building the find_package consumer"
run "$work/build.log" "building the find_package consumer" \
  "$cmake" --build "$work/consumer" -j 2
for program in consumer consumer_c; do
  step "running $program (find_package)"
  "$work/consumer/$program" || fail "$program (built through find_package) failed"
done

# (b) pkg-config, and nothing else, for the C program.
export PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
flags=$(pkg-config --cflags --libs syncopate) || fail "pkg-config --cflags --libs syncopate failed"
step "pkg-config --cflags --libs syncopate: $flags"
# shellcheck disable=SC2086  # the flags are words
run "$work/cc.log" "compiling consumer_c.c with pkg-config's flags" \
  "$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$consumer_src/consumer_c.c" \
  -o "$work/consumer_c_pkgconfig" $flags -Wl,-rpath,"$libdir"
step "running consumer_c (pkg-config)"
"$work/consumer_c_pkgconfig" || fail "consumer_c (built through pkg-config) failed"

# (c) the Python package installed beside the library finds it with no hint (no
# SYNCOPATE_LIBRARY), and its pure calls work.
if command -v python3 >/dev/null; then
  step "importing the installed Python package"
  env -u SYNCOPATE_LIBRARY PYTHONPATH="$libdir/python3/site-packages" PYTHONDONTWRITEBYTECODE=1 \
    python3 - "$libdir" <<'PY' || fail "the installed Python package did not work"
import os, sys, syncopate
assert syncopate.abi_version() == 1, syncopate.abi_version()
found = os.path.realpath(syncopate.library_path())
assert found.startswith(os.path.realpath(sys.argv[1])), found
p = syncopate.choose_path("all_gather_matmul", 2, 8192, 1024, 1024, 4096)
assert p.bucket_m >= 4096 and p.reason, p
print("python: abi 1, library", found, "| m=4096:", p.reason)
PY
fi

step "PASS"

#!/usr/bin/env bash
# Installs, with apt-get, whatever of Syncopate's build and test dependencies is missing.
# Idempotent: a second run installs nothing. The CUDA toolkit is expected at /usr/local/cuda.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config ccache clang clang-format clang-tidy
  libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libspdlog-dev libfmt-dev libucx-dev ucx-utils libgtest-dev libgmock-dev libbenchmark-dev
  python3-grpcio python3-protobuf python3-grpc-tools python3-yaml
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: everything present"
fi
if [[ ! -d /usr/local/cuda/include ]]; then
  echo "install-deps: CUDA toolkit not found at /usr/local/cuda (needed for NVRTC and headers)" >&2
  exit 1
fi

#!/usr/bin/env bash
# Emulates the lazy NTT register passes of shaders/cuda/lde.cu on the host (no GPU) and checks
# that the lean forms (radix 32 and 16) and the power-of-two form give the plain radix-32 form's
# bytes (scripts/lde_emulate.cpp).
# Needs g++ with C++20 (std::barrier). About a minute on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The two CUDA-only constructs: the dynamic shared tile becomes the host array, and the
# kernels lose `extern "C"` (C linkage is irrelevant here and `__global__` is empty).
sed -e 's/extern __shared__ u64 tile\[\];/u64* tile = tile_mem;/' \
    -e 's/^extern "C" __global__/__global__/' \
    "$root/shaders/cuda/lde.cu" > "$work/lde_host.cu"
cp "$root/shaders/cuda/common.cuh" "$work/"
g++ -std=c++20 -O1 -w -pthread -I"$work" -DLDE_HOST_SOURCE='"lde_host.cu"' \
    "$root/scripts/lde_emulate.cpp" -o "$work/lde_emulate"
"$work/lde_emulate"

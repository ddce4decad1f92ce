#!/usr/bin/env bash
# Emulates the NTT passes of shaders/cuda/lde.cu on the host (no GPU) and checks that the radix-16
# register kernel gives the shared-memory kernel's values (lde_emulate.cpp says what is checked).
# Needs g++ with C++20 (std::barrier). About 3 minutes on 2 cores: a block of 1024 threads is
# 1024 host threads meeting at every barrier.
#
#   lab/cuda-probes/emulate/lde_emulate.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The two CUDA-only constructs: the dynamic shared tile becomes the host array, and the
# kernels lose `extern "C"` (C linkage is irrelevant here and `__global__` is empty).
sed -e 's/extern __shared__ u64 tile\[\];/u64* tile = tile_mem;/' \
    -e 's/^extern "C" __global__/__global__/' \
    "$root/shaders/cuda/lde.cu" > "$work/lde_host.cu"
cp "$root/shaders/cuda/common.cuh" "$work/"
g++ -std=c++20 -O1 -w -pthread -I"$work" -DLDE_HOST_SOURCE='"lde_host.cu"' \
    "$here/lde_emulate.cpp" -o "$work/lde_emulate"
"$work/lde_emulate"

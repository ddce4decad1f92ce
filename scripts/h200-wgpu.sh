#!/usr/bin/env bash
# The wgpu backend's H200 verification and benchmark (BENCHMARKS.md, "wgpu backend on the H200").
#
#   scripts/h200-wgpu.sh pack   # here (Rust toolchain): build release binaries into .device-wgpu/
#                               # and .device/cuda/ (both git-ignored), fetch the Vulkan loader
#                               # packages into .gl/ once
#   scripts/h200-wgpu.sh run    # there (the device tool, carry .gl .device-wgpu .device): unpack
#                               # the loader, then field self-test, wgpu and CUDA benches in the
#                               # same call, the wgpu suites, production parity; log to $OUT/log.txt
set -euo pipefail
cd "$(dirname "$0")/.."
B="--log-rows 21 --cols 316 --blowup 2"

pack() {
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
    local r=$CARGO_TARGET_DIR/release
    cargo build --release -p backend-wgpu --example bench
    cargo bench -p backend-cuda --bench cuda_ops --no-run
    cargo test --release -p backend-wgpu --no-run
    cargo test --release -p conformance --features wgpu --no-run
    mkdir -p .device-wgpu .device/cuda
    newest() { ls -t "$r"/deps/"$1"-* | grep -v '\.d$' | head -1; }
    cp "$r/examples/bench" .device-wgpu/bench
    cp "$(newest cuda_ops)" .device/cuda/bench
    cp "$(newest backend_wgpu)" .device-wgpu/unit
    for t in kernels wgpu parity_wgpu reliability_wgpu; do cp "$(newest $t)" .device-wgpu/$t; done
    strip .device-wgpu/{bench,unit,kernels,wgpu,parity_wgpu,reliability_wgpu} .device/cuda/bench
    if ! ls .gl/*.deb >/dev/null 2>&1; then
        mkdir -p .gl /tmp/amd64/partial
        local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
        apt-get $o update -qq
        (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    fi
    du -sh .device-wgpu .device .gl
}

run() {
    set +e +o pipefail # report every step, whatever the previous one did
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    export REQUIRE_WGPU=1 RUST_BACKTRACE=1
    local d=.device-wgpu
    step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
        step field self-test; timeout 60 $d/unit --nocapture 2>&1 | grep -E "self-test|result|panicked"
        step wgpu bench, native u64; timeout 200 $d/bench $B --iters 5
        step wgpu LDE, portable; timeout 100 $d/bench $B --iters 3 --portable --only coset_lde | tail -1
        step cuda bench, same call; timeout 150 .device/cuda/bench --log-rows 22 --cols 316 --reps 3
        step kernels; timeout 60 $d/kernels --test-threads=1 2>&1 | grep -E "^test |result"
        step conformance suite; timeout 120 $d/wgpu --test-threads=1 2>&1 | grep -E "result|FAIL|panicked"
        step reliability suite; timeout 120 $d/reliability_wgpu --test-threads=1 2>&1 | grep -E "result|FAIL|panicked"
        step production parity; timeout 240 $d/parity_wgpu --include-ignored --nocapture 2>&1 | grep -E "result|2097152|panicked"
        step end
    } 2>&1 | tee "${OUT:-.}/log.txt"
}

case "${1:-}" in
    pack) pack ;;
    run) run ;;
    *) echo "usage: $0 pack|run" >&2; exit 2 ;;
esac

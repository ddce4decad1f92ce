# Sourced by a lane's run.sh on the GPU machine, from the repository root, with LANE set to the
# lane's directory: unpacks the lane, makes the paths the tests were built with resolve, and
# defines run_test. Every GPU test must find its device (REQUIRE_CUDA=1, REQUIRE_WGPU=1).
set -u
: "${OUT:?set OUT to the directory the logs and summary.txt go to}"
# Vulkan loaders carried as .deb files under .gl/ (a machine without them), unpacked in place.
if [ -d .gl ]; then
  for f in .gl/*.deb; do dpkg -x "$f" / >/dev/null 2>&1; done
  ldconfig
fi
tar xJf "$LANE/pack.tar.xz" -C "$LANE"
# The tests that run the workspace's executables name them by the path they were built at.
mkdir -p target/release "$OUT/logs"
cp "$LANE"/rel/* target/release/ 2>/dev/null || true
if [ ! -e /work/main ] && [ "$PWD" != /work/main ]; then mkdir -p /work && ln -s "$PWD" /work/main; fi
export REQUIRE_CUDA=1 REQUIRE_WGPU=1 RUST_BACKTRACE=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } \
  > "$OUT/summary.txt" 2>&1

# run_test FILE [SECONDS]: one packed test binary under a time limit; one line in summary.txt
# (exit status, seconds, SKIPPED lines, the test result, the first failures).
run_test() {
  local b=$1 limit=${2:-240} start
  start=$(date +%s)
  timeout "$limit" "./$LANE/bin/$b" > "$OUT/logs/$b.log" 2>&1
  local rc=$?
  local result fails skips
  result=$(grep -E "^test result:" "$OUT/logs/$b.log" | tail -1)
  fails=$(grep -E "^test .* FAILED$" "$OUT/logs/$b.log" | head -5 | tr '\n' ' ')
  skips=$(grep -c "SKIPPED" "$OUT/logs/$b.log")
  echo "$b rc=$rc $(( $(date +%s) - start ))s skipped=$skips ${result#test result: } $fails" >> "$OUT/summary.txt"
}

# finish: the logs as one archive (a device machine may return only a few files).
finish() {
  (cd "$OUT" && tar czf logs.tar.gz logs && rm -rf logs)
  cat "$OUT/summary.txt"
}

#!/usr/bin/env bash
# The adapter lane: plonky3-adapter's test binaries two at a time, then the prove bench's
# statements named by PROVE_* (default: the virtual machine's batch at 2^21 on CUDA, ours through
# plonky3_adapter::prove_batch, then through p3-batch-stark's with PROVE_HOST_QUOTIENT=1).
cd "$(dirname "$0")/../.." && LANE=.device/adapter
source "$LANE/run_common.sh"
deadline=$(( $(date +%s) + ${BUDGET:-560} ))
while read -r b kind _; do
  [ "$kind" = bench ] && continue
  run_test "$b" 200 &
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 1; done
done < "$LANE/tests.txt"
wait
bench=$(awk '$2 == "bench" {print $1}' "$LANE/tests.txt")
for host in 0 1; do
  left=$(( deadline - $(date +%s) ))
  [ "$left" -gt 30 ] || { echo "bench PROVE_HOST_QUOTIENT=$host not run (deadline)" >> "$OUT/summary.txt"; continue; }
  (cd plonky3-adapter && PROVE_HOST_QUOTIENT=$host PROVE_LOG_ROWS=${PROVE_LOG_ROWS-} KECCAK_HASHES=${KECCAK_HASHES-} \
    PROVE_POSEIDON2_LOG_ROWS=${PROVE_POSEIDON2_LOG_ROWS-} PROVE_BATCH_LOG_ROWS=${PROVE_BATCH_LOG_ROWS-21} \
    BENCH_BACKENDS=${BENCH_BACKENDS:-cuda} BENCH_REPS=${BENCH_REPS:-2} timeout "$left" "../$LANE/bin/$bench" --bench) \
    > "$OUT/logs/bench_host_quotient_$host.log" 2>&1
  echo "bench PROVE_HOST_QUOTIENT=$host rc=$?" >> "$OUT/summary.txt"
  grep -E "^(PAIRED|PROOF|RUNS|STATS)" "$OUT/logs/bench_host_quotient_$host.log" >> "$OUT/summary.txt"
done
finish

#!/usr/bin/env bash
# The suites lane: every other test binary, two at a time, the ones FIRST names (target names)
# first, until BUDGET seconds have passed; what is left is listed as not run.
cd "$(dirname "$0")/../.." && LANE=.device/suites
source "$LANE/run_common.sh"
deadline=$(( $(date +%s) + ${BUDGET:-560} ))
first=${FIRST:-}
order=$( (for n in $first; do awk -v n="$n" '$3 == n {print $1}' "$LANE/tests.txt"; done
          awk '{print $1}' "$LANE/tests.txt") | awk '!seen[$0]++')
for b in $order; do
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt 20 ]; then echo "not run (deadline): $b" >> "$OUT/summary.txt"; continue; fi
  run_test "$b" $(( left < 300 ? left : 300 )) &
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 1; done
done
wait
finish

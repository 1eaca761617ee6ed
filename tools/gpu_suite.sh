#!/bin/bash
# tools/gpu_suite.sh — the whole ember_tests suite in SHARDS processes at once (GoogleTest
# sharding), each stopped after SECONDS, with a summary a short device session can act on:
# per shard the tests run, passed, failed and skipped, the failed tests by name, and for a shard
# that crashed or was stopped the test it was running (its last "[ RUN ]" line without an
# "[ OK ]" or "[ FAILED ]"). Made for the GPU machine (docs/cuda.md, "Tests"), where one process
# takes longer than a call may last; it runs anywhere.
#
#   tools/gpu_suite.sh [BUILD_DIR] [OUT_DIR] [SHARDS] [SECONDS] [FILTER]
#
# The full logs stay in OUT_DIR (shard_<k>.log). Exit status 0 only when every shard finished
# and nothing failed.
set -u
build=${1:-build}
out=${2:-gpu_suite}
shards=${3:-4}
seconds=${4:-330}
filter=${5:-*}
mkdir -p "$out"
start=$(date +%s)
for ((s = 0; s < shards; ++s)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$s timeout "$seconds" \
    "$build/tests/ember_tests" --gtest_filter="$filter" >"$out/shard_$s.log" 2>&1 &
done
status=0
for ((s = 0; s < shards; ++s)); do
  wait -n || true
done
wait
echo "gpu_suite: $shards shards in $(($(date +%s) - start)) s"
for ((s = 0; s < shards; ++s)); do
  f="$out/shard_$s.log"
  run=$(grep -c '^\[ RUN      \]' "$f")
  ok=$(grep -c '^\[       OK \]' "$f")
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$f")
  failed=$(grep -c '^\[  FAILED  \] .*(' "$f")
  finished=$(grep -c '^\[==========\] .* ran\.' "$f")
  printf 'shard %d: run %d, passed %d, skipped %d, failed %d%s\n' "$s" "$run" "$ok" "$skipped" \
    "$failed" "$([ "$finished" -gt 0 ] || echo ', DID NOT FINISH')"
  grep '^\[  FAILED  \] .*(' "$f" | sed 's/^/  /'
  if [ "$finished" -eq 0 ]; then
    status=1
    # The running test: the last RUN line not followed by its own OK or FAILED line.
    last=$(grep '^\[ RUN      \]' "$f" | tail -1 | sed 's/^\[ RUN      \] //')
    echo "  stopped or crashed in: $last"
    tail -3 "$f" | sed 's/^/  | /'
  fi
  [ "$failed" -gt 0 ] && status=1
done
exit $status

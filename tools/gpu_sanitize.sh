#!/bin/bash
# tools/gpu_sanitize.sh — compute-sanitizer's racecheck, initcheck and synccheck (and
# memcheck) over ember's GPU tests, on a machine with a CUDA device (docs/cuda.md, "Tests").
#
#   tools/gpu_sanitize.sh [BUILD_DIR] [OUT_DIR] [SHARDS] [SECONDS]
#
# Each tool runs over the GPU tests (names with Cuda/cuda/Gpu/GPU/Device) in SHARDS
# processes at once (gtest sharding), each stopped after SECONDS; the tools run one after
# another. Only ember's own kernels are instrumented (--kernel-name kns=ember): cuBLASLt's
# and cuDNN's Hopper kernels synchronise through TMA and mbarriers, which racecheck reports as
# hazards and synccheck overflows on (seen on the H200 with 2025.3.1), and instrumenting
# them makes a run ten times slower. Left out: death tests (fork under the tool) and the
# tests that start worker processes (the tool follows them and they time out).
# Run it alone (not beside tools/gpu_suite.sh): the tools' processes reserve much device memory
# each, and beside the suite's shards they filled an 80 GB H100 (docs/cuda.md, "Tests").
# Prints, per tool and shard, the tests run, passed and failed and the tool's error summary;
# the logs stay in OUT_DIR.
set -u
build=${1:-build}
out=${2:-sanitize}
shards=${3:-1}
seconds=${4:-600}
mkdir -p "$out"
# EXCLUDE: more gtest patterns to leave out (':'-separated), e.g. the tests that launch bf16
# cuBLASLt or cuDNN kernels, at which racecheck's process dies on Hopper (docs/cuda.md).
# KERNELS=all instruments every kernel, NVIDIA's too (initcheck then sees cuBLASLt's writes;
# about ten times slower).
filter="*Cuda*:*cuda*:*Gpu*:*GPU*:*Device*-*DeathTest*:*TwoProcesses*:*Distributed*:*Process*${EXCLUDE:+:$EXCLUDE}"
for tool in ${TOOLS:-racecheck initcheck synccheck memcheck}; do
  extra=()
  [ "${KERNELS:-ember}" = ember ] && extra+=(--kernel-name kns=ember)
  [ "$tool" = synccheck ] && extra+=(--num-cuda-barriers 65536)
  for ((s = 0; s < shards; ++s)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$s EMBER_NUM_THREADS=2 \
      timeout "$seconds" compute-sanitizer --tool "$tool" \
      --print-limit 20 "${extra[@]}" "$build/tests/ember_tests" --gtest_filter="$filter" \
      >"$out/${tool}_$s.log" 2>&1 &
  done
done
wait
for tool in ${TOOLS:-racecheck initcheck synccheck memcheck}; do
  for ((s = 0; s < shards; ++s)); do
    f="$out/${tool}_$s.log"
    printf '%s shard %d: run %d, ok %d, failed %d, %s%s\n' "$tool" "$s" \
      "$(grep -c '^\[ RUN' "$f")" "$(grep -c '^\[       OK' "$f")" \
      "$(grep -c '^\[  FAILED  \] .*(' "$f")" \
      "$(grep -m1 'ERROR SUMMARY' "$f" || echo 'no summary (stopped)')" \
      "$(grep -q 'test suites ran' "$f" && echo '' || echo ', did not finish')"
  done
done

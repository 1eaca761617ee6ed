#!/bin/bash
# tools/gpu_sanitize.sh — compute-sanitizer's racecheck, initcheck and synccheck (and
# memcheck) over ember's GPU tests, on a machine with a CUDA device (docs/cuda.md, "Tests").
#
#   tools/gpu_sanitize.sh [BUILD_DIR] [OUT_DIR] [SHARDS] [SECONDS]
#
# Each tool runs over the GPU tests (names with Cuda/cuda/Gpu/GPU/Device) in SHARDS
# processes at once (the test list dealt round-robin), each shard stopped after SECONDS; the
# tools in TOOLS run at the same time, each in its own SHARDS processes. Only ember's own
# kernels are instrumented (--kernel-name kns=ember): cuBLASLt's and cuDNN's Hopper kernels
# synchronise through TMA and mbarriers, which racecheck reports as hazards and synccheck
# overflows on (seen on the H200 with 2025.3.1), and instrumenting them makes a run ten times
# slower. Left out: death tests (fork under the tool) and the tests that start worker processes
# (the tool follows them and they time out).
#
# A shard whose process dies under the tool (racecheck's "failed to handle a hardware
# exception" at a bf16 cuBLASLt or cuDNN kernel on Hopper, seen on the H100 in 2026-12) goes
# on: the test it was running is recorded as the tool's crash, and a new process runs the
# shard's tests that have not run yet. The summary names every crash.
# Run it alone (not beside tools/gpu_suite.sh): the tools' processes reserve much device memory
# each, and beside the suite's shards they filled an 80 GB H100 (docs/cuda.md, "Tests").
# Prints, per tool and shard, the tests run, passed and failed, the tool's error summaries and
# the crashes; the logs stay in OUT_DIR.
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
# The full names of the tests the filter selects (gtest's listing: "Suite." then "  name"), or
# those TESTS names (a file of full names, one a line: e.g. what an earlier run left not run).
if [ -n "${TESTS:-}" ]; then
  grep -v '^$' "$TESTS" >"$out/all_tests.txt.new" && mv "$out/all_tests.txt.new" "$out/all_tests.txt"
else
  "$build/tests/ember_tests" --gtest_list_tests --gtest_filter="$filter" |
    awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }' >"$out/all_tests.txt"
fi

# One shard of one tool: run the shard's tests; after a crash, run those not yet run.
run_shard() {
  local tool=$1 s=$2 log="$out/${tool}_$s.log" todo="$out/${tool}_$s.todo"
  local results="$out/${tool}_$s.results"  # a line a test: OK|SKIPPED|FAILED|CRASH and its name
  local extra=() deadline=$(($(date +%s) + seconds))
  [ "${KERNELS:-ember}" = ember ] && extra+=(--kernel-name kns=ember)
  [ "$tool" = synccheck ] && extra+=(--num-cuda-barriers 65536)
  awk -v n="$shards" -v s="$s" '(NR - 1) % n == s' "$out/all_tests.txt" >"$todo"
  : >"$log"
  : >"$results"
  while [ -s "$todo" ]; do
    local left=$((deadline - $(date +%s)))
    [ "$left" -gt 5 ] || break
    local part="$out/${tool}_$s.part"
    EMBER_NUM_THREADS=2 timeout "$left" compute-sanitizer --tool "$tool" --print-limit 20 \
      "${extra[@]}" "$build/tests/ember_tests" --gtest_filter="$(paste -sd: "$todo")" 2>&1 |
      awk '{ print } /Internal Sanitizer Error/ { exit }' >"$part"  # its exit ends a lost process
    cat "$part" >>"$log"
    # The tests that ran before the tool's first internal error ("failed to handle a hardware
    # exception": the context is lost and every later test of the process fails) are done; the
    # one running then, or when the process died or was stopped, is the tool's crash.
    rm -f "$part.done" "$part.crash"
    awk -v done="$part.done" -v crash="$part.crash" '
      /Internal Sanitizer Error/ && !lost { lost = 1; if (cur != "") print cur > crash }
      lost { next }
      /^\[ RUN      \]/ { cur = $4 }
      /^\[       OK \]|^\[  SKIPPED \] .*\(|^\[  FAILED  \] .*\(/ { print $2, $4 > done; cur = "" }
      /test suites ran/ { finished = 1 }
      END { if (!lost && !finished && cur != "") print cur > crash }' "$part"
    touch "$part.done" "$part.crash"
    cat "$part.done" >>"$results"
    if ! [ -s "$part.crash" ] && grep -q 'test suites ran' "$part"; then : >"$todo"; break; fi
    if [ "$(date +%s)" -lt "$deadline" ]; then
      sed 's/^/CRASH /' "$part.crash" >>"$results"
      sed 's/^/CRASHED UNDER THE TOOL: /' "$part.crash" >>"$log"
    fi
    awk '{ print $2 }' "$results" | cat - "$part.crash" | sort -u >"$part.names"  # all that ran
    grep -vxF -f "$part.names" "$todo" >"$todo.next"
    if cmp -s "$todo" "$todo.next"; then break; fi  # nothing ran: give up on this shard
    mv "$todo.next" "$todo"
  done
  rm -f "$out/${tool}_$s".part* "$out/${tool}_$s.todo.next"
}

for tool in ${TOOLS:-racecheck initcheck synccheck memcheck}; do
  for ((s = 0; s < shards; ++s)); do run_shard "$tool" "$s" & done
done
wait
for tool in ${TOOLS:-racecheck initcheck synccheck memcheck}; do
  for ((s = 0; s < shards; ++s)); do
    f="$out/${tool}_$s.log"
    r="$out/${tool}_$s.results"
    printf '%s shard %d: %d tests, ok %d, skipped %d, failed %d, tool crashes %d, not run %d; %s\n' \
      "$tool" "$s" "$(awk -v n="$shards" -v s="$s" '(NR - 1) % n == s' "$out/all_tests.txt" | wc -l)" \
      "$(grep -c '^OK ' "$r")" "$(grep -c '^SKIPPED ' "$r")" "$(grep -c '^FAILED ' "$r")" \
      "$(grep -c '^CRASH ' "$r")" "$(wc -l <"$out/${tool}_$s.todo" 2>/dev/null || echo 0)" \
      "$(grep 'ERROR SUMMARY\|RACECHECK SUMMARY' "$f" | sort | uniq -c | tr -s ' ' | paste -sd, -)"
    grep '^FAILED ' "$r" | sed 's/^/  /'
    grep '^CRASHED UNDER THE TOOL' "$f" | sed 's/^/  /'
  done
done

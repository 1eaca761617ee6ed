#!/bin/bash
# tests/gpu_sanitize_test.sh — tools/gpu_sanitize.sh's bookkeeping, with a stand-in for
# compute-sanitizer (none runs without a GPU): the stand-in runs ember_tests as the tool would,
# loses the CUDA context at one test (the tool's "failed to handle a hardware exception", after
# which every later test of the process fails) and kills the process at another. The script
# must name both as the tool's crashes, run every other test once in new processes, and count
# them all.
#
#   tests/gpu_sanitize_test.sh SCRIPT BUILD_DIR
set -u
script=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat >"$work/bin/compute-sanitizer" <<'FAKE'
#!/bin/bash
while [ "${1#--}" != "$1" ]; do
  case $1 in --tool | --print-limit | --kernel-name | --num-cuda-barriers) shift 2 ;; *) shift ;; esac
done
"$@" 2>&1 | awk '
  /^\[ RUN .*Views\.TransposeAndPermute/ { print; print "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."; lost = 1; next }
  /^\[ RUN .*Factories\.Randint/ { print; exit 3 }
  lost && /^\[       OK \]/ { sub(/OK \]/, "FAILED  ]"); print; next }
  { print }'
echo "========= ERROR SUMMARY: 0 errors"
FAKE
chmod +x "$work/bin/compute-sanitizer"
"$build/tests/ember_tests" --gtest_list_tests --gtest_filter='Views.*:Factories.*' |
  awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }' >"$work/tests.txt"
total=$(wc -l <"$work/tests.txt")
if ! grep -q 'Views\.TransposeAndPermute' "$work/tests.txt" || ! grep -q 'Factories\.Randint' "$work/tests.txt" ||
  [ "$total" -lt 6 ]; then
  echo "gpu_sanitize_test: the tests it needs (Views.TransposeAndPermute, Factories.Randint) are missing"
  exit 1
fi
PATH="$work/bin:$PATH" TESTS="$work/tests.txt" TOOLS=racecheck \
  bash "$script" "$build" "$work/out" 2 120 >"$work/summary.txt" 2>&1
cat "$work/summary.txt"
status=0
expect() {  # expect DESCRIPTION COMMAND...
  if ! "${@:2}"; then
    echo "gpu_sanitize_test: FAILED: $1"
    status=1
  fi
}
results=$(cat "$work"/out/racecheck_*.results)
expect "a crash at the lost context" grep -q 'CRASHED UNDER THE TOOL: Views\.TransposeAndPermute' "$work/summary.txt"
expect "a crash at the killed process" grep -q 'CRASHED UNDER THE TOOL: Factories\.Randint' "$work/summary.txt"
expect "every test once" [ "$(echo "$results" | awk '{ print $2 }' | sort | uniq -d | wc -l)" -eq 0 ]
expect "every test counted" [ "$(echo "$results" | wc -l)" -eq "$total" ]
expect "no failure (the lost process's later tests are run again)" \
  [ "$(echo "$results" | grep -c '^FAILED ')" -eq 0 ]
expect "nothing left" [ "$(cat "$work"/out/racecheck_*.todo | wc -l)" -eq 0 ]
exit $status

#!/usr/bin/env bash
# bench/run_all.sh — runs every benchmark and collects their JSON lines.
#
#   bench/run_all.sh [BUILD_DIR]        (default: build; `make bench` calls it via CMake)
#
# Runs each executable BUILD_DIR/bench/bench_* (bench_checkpoint among them), then each
# bench/*.py (checkpoint_torch.py among them) with /usr/bin/python3
# (when present; the scripts get EMBER_BUILD_DIR and EMBER_SOURCE_DIR in the environment).
# Everything they print goes to the terminal; lines that start with `{` are JSON results and
# are also written to BUILD_DIR/bench.jsonl, after one leading line describing the run
# ({"kind": "run_info", ...}: date, commit, host, CPU). A benchmark that fails gets a line
# {"kind": "failure", ...}; the script runs the rest and exits 1 at the end.
# EMBER_BENCH_TIMEOUT (seconds, default 1800) bounds each program.
set -euo pipefail

source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$(cd "${1:-build}" && pwd)"
out="${build_dir}/bench.jsonl"
tmp="${out}.tmp"
per_bench_timeout="${EMBER_BENCH_TIMEOUT:-1800}"
export EMBER_BUILD_DIR="${build_dir}" EMBER_SOURCE_DIR="${source_dir}"

json_string() {  # prints $1 as a JSON string literal
  local s="${1//\\/\\\\}"
  s="${s//\"/\\\"}"
  s="${s//$'\t'/ }"
  s="${s//$'\n'/ }"
  printf '"%s"' "$s"
}

commit="$(git -C "${source_dir}" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "${source_dir}" status --porcelain 2>/dev/null || true)" ]]; then
  commit="${commit}-dirty"
fi
cpu="$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)"
{
  printf '{"kind": "run_info", "date": %s, "commit": %s, "host": %s, "cpu": %s, "nproc": %s}\n' \
    "$(json_string "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" "$(json_string "${commit}")" \
    "$(json_string "$(hostname 2>/dev/null || echo unknown)")" "$(json_string "${cpu:-unknown}")" \
    "$(nproc 2>/dev/null || echo 0)"
} >"${tmp}"

programs=()
for exe in "${build_dir}"/bench/bench_*; do
  # bench_checkpoint_ember is bench_checkpoint without libtorch, run by checkpoint_torch.py.
  [[ "$(basename "${exe}")" == bench_checkpoint_ember ]] && continue
  [[ -f "${exe}" && -x "${exe}" ]] && programs+=("${exe}")
done
if [[ -x /usr/bin/python3 ]]; then
  for script in "${source_dir}"/bench/*.py; do
    [[ -f "${script}" ]] && programs+=("${script}")
  done
fi

failed=0
for program in "${programs[@]+"${programs[@]}"}"; do
  name="$(basename "${program}")"
  echo "=== ${name}"
  if [[ "${program}" == *.py ]]; then
    cmd=(/usr/bin/python3 "${program}")
  else
    cmd=("${program}")
  fi
  log="$(mktemp)"
  status=0
  timeout "${per_bench_timeout}" "${cmd[@]}" 2>&1 | tee "${log}" || status="${PIPESTATUS[0]}"
  grep '^{' "${log}" >>"${tmp}" || true
  rm -f "${log}"
  if [[ "${status}" != 0 ]]; then
    echo "=== ${name} FAILED (exit ${status})" >&2
    printf '{"kind": "failure", "bench": %s, "exit_code": %s}\n' "$(json_string "${name}")" \
      "${status}" >>"${tmp}"
    failed=$((failed + 1))
  fi
done

mv "${tmp}" "${out}"
echo "bench: ${#programs[@]} program(s), ${failed} failed; results in ${out}"
[[ "${failed}" == 0 ]]

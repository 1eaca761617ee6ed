#!/usr/bin/env bash
# Runs llm.c's train_gpt2cu (built here by bench/llmc/build.sh) on one GPU as the speed
# anchor of the GPT-2 benchmark (issue 28, item 6): GPT-2 124M from random init
# (-e d12), B=16, T=1024, bf16, cuDNN attention, no ZeRO, no validation, sampling or
# checkpoints during the timed steps. Prints llm.c's log to stderr and, last, one JSON
# line on stdout with medians over the steps after the warm-up.
#
#   bench/llmc/run.sh [options] DATA [-- extra train_gpt2cu flags]
#
# DATA is a token file in llm.c's format (256 int32 header: 20240520, 1, count; then
# uint16 tokens) or any other file, which is turned into byte-level tokens first
# (bench/llmc/make_tokens.py, repeated to cover every step without reuse), e.g.
#   bench/llmc/run.sh /usr/share/common-licenses/GPL-3
# Options:
#   --build DIR    folder holding train_gpt2cu (default <repo>/build-llmc)
#   --steps N      optimizer steps (default 60)
#   --warmup N     leading steps left out of the medians (default 10)
#   -b N / -t N    micro-batch and sequence length (default 16 / 1024)
#   --log FILE     also keep llm.c's full output in FILE
# The pip package nvidia-cudnn-cu13 supplies libcudnn.so.9 (its lib folder goes first on
# LD_LIBRARY_PATH); cuBLASLt and NVRTC come from the system or pip's CUDA 13 packages.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/llmc
BUILD=$ROOT/build-llmc
STEPS=60 WARMUP=10 B=16 T=1024 LOG=
DATA=
EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    -b) B=$2; shift 2 ;;
    -t) T=$2; shift 2 ;;
    --log) LOG=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) [[ -z "$DATA" ]] || { echo "run.sh: one DATA file only" >&2; exit 2; }; DATA=$1; shift ;;
  esac
done
[[ -n "$DATA" ]] || { sed -n '2,22p' "$0" >&2; exit 2; }

fail() {
  echo "run.sh: $*" >&2
  python3 -c 'import json,sys; print(json.dumps({"bench":"gpt2","impl":"llmc","error":sys.argv[1]}))' "$*"
  exit 1
}

BIN=$(cd "$BUILD" 2>/dev/null && pwd)/train_gpt2cu
[[ -x "$BIN" ]] || fail "no train_gpt2cu in $BUILD (run bench/llmc/build.sh here, carry build-llmc)"
DATA=$(cd "$(dirname "$DATA")" && pwd)/$(basename "$DATA")
[[ -f "$DATA" ]] || fail "no data file $DATA"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/llmc-run.XXXXXX")
SMI_PIDS=()
LLMC_PID=
cleanup() {
  local p
  [[ -z "$LLMC_PID" ]] || kill "$LLMC_PID" 2>/dev/null || true
  for p in "${SMI_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- libraries: pip's cuDNN first, then whatever else the loader cannot find ----------
PY_SITES=$(python3 - <<'PY' 2>/dev/null || true
import site, sys
paths = []
try:
    paths += site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    pass
paths += [p for p in sys.path if p]
try:
    import nvidia.cudnn as m  # may be a namespace package (no __file__)
    paths += [p + "/../.." for p in list(getattr(m, "__path__", []))]
except Exception:
    pass
print("\n".join(dict.fromkeys(paths)))
PY
)
CAND_DIRS=()
while IFS= read -r s; do
  [[ -d "$s/nvidia" ]] || continue
  for d in "$s"/nvidia/cudnn*/lib "$s"/nvidia/cu13/lib "$s"/nvidia/*/lib; do
    [[ -d "$d" ]] && CAND_DIRS+=("$(cd "$d" && pwd)")
  done
done <<<"$PY_SITES"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
  [[ -d "$d" ]] && CAND_DIRS+=("$d")
done
find_lib() { local d; for d in "${CAND_DIRS[@]}"; do [[ -e "$d/$1" ]] && { echo "$d"; return 0; }; done; return 1; }

CUDNN_DIR=
for d in "${CAND_DIRS[@]}"; do
  [[ "$d" == */nvidia/cudnn*/lib && -e "$d/libcudnn.so.9" ]] && { CUDNN_DIR=$d; break; }
done
[[ -n "$CUDNN_DIR" ]] || CUDNN_DIR=$(find_lib libcudnn.so.9) || fail "no libcudnn.so.9 (pip nvidia-cudnn-cu13) found"
export LD_LIBRARY_PATH=$CUDNN_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for lib in $(ldd "$BIN" 2>/dev/null | awk '/not found/{print $1}' || true); do
  d=$(find_lib "$lib") || fail "$lib not found (looked in ${CAND_DIRS[*]})"
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
missing=$( (ldd "$BIN" 2>/dev/null || true) | awk '/not found/{print $1}' | tr '\n' ' ')
[[ -z "$missing" ]] || fail "libraries still missing: $missing"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >&2
ldd "$BIN" | grep -E 'cudnn|cublas|nvrtc|cudart' >&2 || true
CUDNN_PIP=$(python3 -c 'import importlib.metadata as m; print(m.version("nvidia-cudnn-cu13"))' 2>/dev/null || echo "")

# ---- data --------------------------------------------------------------------------
magic=$(od -An -t d4 -N 4 "$DATA" | tr -d ' ')
if [[ "$magic" == 20240520 ]]; then
  TOK=$DATA
else
  TOK=$WORK/tokens.bin
  python3 "$HERE/make_tokens.py" -o "$TOK" --min-tokens $(( (STEPS + 1) * B * T + 1 )) "$DATA" ||
    fail "could not make tokens from $DATA"
fi
NTOK=$(od -An -t d4 -j 8 -N 4 "$TOK" | tr -d ' ')

# ---- run ---------------------------------------------------------------------------
# -v: validation only at step 0 and after the last step (it cannot be switched off;
#     -v 0 divides by zero), one batch (-m 1), both outside llm.c's timed region.
# -s 0: no sampling; -n 0: no checkpoints; no -o: no log files; -h 0: no HellaSwag.
# It runs in an empty folder, so no gpt2_tokenizer.bin is found (optional: llm.c only
# warns; it would decode samples, which are off).
ARGS=(-i "$TOK" -j "$TOK" -e d12 -b "$B" -t "$T" -d $((B * T)) -x "$STEPS"
      -z 0 -l 6e-4 -u 0 -c 0.1 -v 1000000 -m 1 -s 0 -n 0 -h 0 -y 0 "${EXTRA[@]}")
echo "$BIN ${ARGS[*]}" >&2

# Memory: llm.c prints cudaMemGetInfo once after allocating its state; the peak comes
# from nvidia-smi, sampled every 100 ms during the run (the process's used_memory, or the
# GPU's memory.used above its value before the run where per-process rows are absent).
BASE_MIB=
if command -v nvidia-smi >/dev/null; then
  BASE_MIB=$(nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' ' || true)
  nvidia-smi -i 0 --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 100 >"$WORK/apps.csv" 2>/dev/null &
  SMI_PIDS+=($!)
  nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$WORK/gpu.csv" 2>/dev/null &
  SMI_PIDS+=($!)
fi
set +e
(cd "$WORK" && exec "$BIN" "${ARGS[@]}") >"$WORK/llmc.log" 2>&1 &
LLMC_PID=$!
wait "$LLMC_PID"
rc=$?
set -e
sleep 0.3
for p in "${SMI_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
SMI_PIDS=()
cat "$WORK/llmc.log" >&2
[[ -z "$LOG" ]] || cp "$WORK/llmc.log" "$LOG"
[[ $rc -eq 0 ]] || fail "train_gpt2cu exited with $rc"

python3 - "$WORK" "$B" "$T" "$STEPS" "$WARMUP" "$NTOK" "${BASE_MIB:-}" "$CUDNN_PIP" "$BUILD" "$LLMC_PID" <<'PY'
import json, os, re, statistics, sys
work, B, T, steps, warmup, ntok, base, cudnn_pip, build, pid = sys.argv[1:11]
B, T, steps, warmup, ntok = int(B), int(T), int(steps), int(warmup), int(ntok)
log = open(os.path.join(work, "llmc.log"), errors="replace").read()
step_re = re.compile(r"^step\s+(\d+)/(\d+) \| loss (\S+) \(.*?\| (\S+) ms \| (\S+)% bf16 MFU \| (\d+) tok/s", re.M)
rows = [(int(m[1]), float(m[3]), float(m[4]), float(m[5]), float(m[6])) for m in step_re.finditer(log)]
out = {"bench": "gpt2", "impl": "llmc"}
if len(rows) < steps:
    out["error"] = f"parsed {len(rows)} step lines of {steps}"
timed = [r for r in rows if r[0] > warmup]
if not timed:
    out.setdefault("error", "no steps after the warm-up")
    print(json.dumps(out)); sys.exit(1)
ms = [r[2] for r in timed]
tps = [B * T * 1000.0 / x for x in ms]
out.update({
    "tokens_per_s": round(statistics.median(tps)),
    "ms_step": round(statistics.median(ms), 3),
    "ms_step_min": min(ms), "ms_step_max": max(ms),
    "mfu_pct": statistics.median(r[3] for r in timed),
    "llmc_ema_tokens_per_s": int(rows[-1][4]),
    "steps": len(rows), "timed_steps": len(timed), "warmup": warmup,
    "B": B, "T": T, "precision": "bf16", "attention": "cudnn",
    "loss_first": rows[0][1], "loss_last": rows[-1][1], "data_tokens": ntok,
})
peak_mib, src = None, None
try:
    rows_smi = [[f.strip() for f in l.split(",")] for l in open(os.path.join(work, "apps.csv"))]
    rows_smi = [(r[0], int(r[1])) for r in rows_smi if len(r) == 2 and r[1].isdigit()]
    mine = [m for p, m in rows_smi if p == pid]
    if mine:
        peak_mib, src = max(mine), "nvidia-smi compute-apps used_memory of llm.c's pid (incl. CUDA context)"
    elif rows_smi:  # pids not comparable (another pid namespace): the largest process on GPU 0
        peak_mib, src = max(m for _, m in rows_smi), "nvidia-smi compute-apps used_memory, largest process (incl. CUDA context)"
except OSError:
    pass
if peak_mib is None and base:
    try:
        used = [int(l) for l in open(os.path.join(work, "gpu.csv")) if l.strip().isdigit()]
        if used:
            peak_mib, src = max(used) - int(base), "nvidia-smi memory.used minus before-run value"
    except OSError:
        pass
m = re.search(r"device memory usage: (\d+) MiB / (\d+) MiB", log)
if m:
    out["llmc_device_memory_mib"] = int(m[1])
    if peak_mib is None:
        peak_mib, src = int(m[1]), "llm.c's cudaMemGetInfo print after allocating its state"
if peak_mib is not None:
    out["peak_memory_gb"] = round(peak_mib * 1048576 / 1e9, 2)  # GB = 1e9 bytes
    out["peak_memory_mib"] = peak_mib
    out["peak_memory_source"] = src
for key, pat in (("device", r"\| device\s+\| (.*?)\s+\|"), ("num_parameters", r"\| num_parameters\s+\| (\d+)")):
    m = re.search(pat, log)
    if m:
        out[key] = int(m[1]) if key == "num_parameters" else m[1]
try:
    info = open(os.path.join(build, "BUILD_INFO.txt")).read()
    m = re.search(r"^llm\.c:\s+(\w+)", info, re.M)
    if m:
        out["llmc_commit"] = m[1][:12]
except OSError:
    pass
if cudnn_pip:
    out["cudnn_pip"] = cudnn_pip
print(json.dumps(out))
sys.exit(1 if "error" in out else 0)
PY

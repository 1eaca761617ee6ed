#!/usr/bin/env bash
# Builds karpathy/llm.c's train_gpt2cu (GPT-2 trainer, bf16, cuDNN attention, one GPU)
# for sm_90 with this machine's CUDA 13 toolkit, as a speed anchor for bench_gpt2
# (issue 28, item 6). llm.c itself is not part of ember: its sources and those of
# NVIDIA/cudnn-frontend (headers only) are read from local git snapshots, copied to a
# temporary folder, edited there for CUDA 13 and built; nothing is downloaded and
# nothing of llm.c is kept but the binary.
#
#   bench/llmc/build.sh            # -> build-llmc/train_gpt2cu (+ BUILD_INFO.txt)
#
# Environment (all optional):
#   LLMC_GIT      git dir of karpathy/llm.c        (default /work/.mirror/karpathy+llm.c/repo)
#   CUDNN_FE_GIT  git dir of NVIDIA/cudnn-frontend (default /work/.mirror/NVIDIA+cudnn-frontend/repo)
#   LLMC_REF, CUDNN_FE_REF   commits or tags to build (default HEAD of each)
#   LLMC_OUT      output folder (default <repo>/build-llmc, ignored by git)
#   LLMC_SM       compute capability without the dot (default 90)
#   CUDA_HOME     CUDA toolkit (default /usr/local/cuda)
#   EMBER_BUILD_LOCK  lock file serialising builds on this machine (default /tmp/ember-build.lock)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MIRROR=${MIRROR:-/work/.mirror}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT=${LLMC_OUT:-$ROOT/build-llmc}
SM=${LLMC_SM:-90}
LOCK=${EMBER_BUILD_LOCK:-/tmp/ember-build.lock}
LLMC_REF=${LLMC_REF:-HEAD}
FE_REF=${CUDNN_FE_REF:-HEAD}

die() { echo "build.sh: $*" >&2; exit 1; }

# A snapshot is a bare git dir; accept <mirror>/<name>/repo or <mirror>/<name> itself.
find_git() {
  local d
  for d in "$@"; do
    [[ -n "$d" ]] || continue
    if git --git-dir="$d" rev-parse --git-dir >/dev/null 2>&1; then echo "$d"; return 0; fi
  done
  return 1
}
LLMC_GIT=$(find_git "${LLMC_GIT:-}" "$MIRROR/karpathy+llm.c/repo" "$MIRROR/karpathy+llm.c") ||
  die "no git snapshot of karpathy/llm.c (set LLMC_GIT)"
FE_GIT=$(find_git "${CUDNN_FE_GIT:-}" "$MIRROR/NVIDIA+cudnn-frontend/repo" "$MIRROR/NVIDIA+cudnn-frontend") ||
  die "no git snapshot of NVIDIA/cudnn-frontend (set CUDNN_FE_GIT)"
NVCC=$CUDA_HOME/bin/nvcc
[[ -x "$NVCC" ]] || die "no nvcc at $NVCC (set CUDA_HOME)"
[[ -f "$CUDA_HOME/include/cudnn.h" || -f /usr/include/cudnn.h ]] || die "no cudnn.h (cuDNN 9 headers are needed)"

LLMC_COMMIT=$(git --git-dir="$LLMC_GIT" rev-parse "$LLMC_REF^{commit}")
FE_COMMIT=$(git --git-dir="$FE_GIT" rev-parse "$FE_REF^{commit}")
FE_DESC=$(git --git-dir="$FE_GIT" describe --tags --always "$FE_COMMIT" 2>/dev/null || echo "$FE_COMMIT")

TMP=$(mktemp -d "${TMPDIR:-/tmp}/llmc-build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SRC=$TMP/llm.c
# llm.c's Makefile looks for cudnn-frontend/include beside itself (or in $HOME)
FE=$SRC/cudnn-frontend
mkdir -p "$SRC" "$FE"
git --git-dir="$LLMC_GIT" archive "$LLMC_COMMIT" | tar -x -C "$SRC"
git --git-dir="$FE_GIT" archive "$FE_COMMIT" include | tar -x -C "$FE"

# ---- CUDA 13 edits, applied to the temporary copy only -----------------------------
# edit FILE PERL-SUBSTITUTION DESCRIPTION: applies the substitution and fails if it
# changed nothing (so a changed llm.c is noticed instead of silently built unpatched).
EDITS=()
edit() {
  local file=$SRC/$1 expr=$2 what=$3
  local before
  before=$(md5sum "$file")
  perl -0pi -e "$expr" "$file"
  [[ "$(md5sum "$file")" != "$before" ]] || die "edit did not apply to $1: $what"
  EDITS+=("$1: $what")
}
# 1. cudaMemAdvise takes a cudaMemLocation in CUDA 13 (the int-device overload is gone).
#    The only call is llm.c's fallback to managed memory when cudaMalloc runs out; the
#    fallback is removed, so an out-of-memory is a plain cudaMalloc error (no managed
#    memory on the GPU machine, as its notes ask).
edit llmc/cuda_utils.cuh \
  's/if\(err == cudaErrorMemoryAllocation\) \{\n(.*?)\n\s*cudaCheck_\(cudaMallocManaged\(out, bytes\), file, line\);\n\s*cudaCheck_\(cudaMemAdvise\([^\n]*\n/if(false) { \/\/ ember bench: managed-memory fallback removed (CUDA 13 cudaMemAdvise API)\n$1\n/s' \
  "cudaMallocConditionallyManaged: managed-memory fallback (cudaMallocManaged + cudaMemAdvise) removed; OOM is a cudaMalloc error"
# 2. libnvidia-ml: llm.c uses NVML only if <nvml.h> exists (it does not in this toolkit,
#    and the GPU machine's driver library is not for linking here): drop -lnvidia-ml.
edit Makefile 's/^\s*NVCC_LDFLAGS \+= -lnvidia-ml\s*\n//m' \
  "-lnvidia-ml dropped (NVML is compiled out without nvml.h)"
# 3. cudnn-frontend >= 1.1x calls NVRTC (its experimental OSS engines) unless built
#    with dynamic loading: link -lnvrtc.
edit Makefile 's/^NVCC_LDFLAGS = -lcublas -lcublasLt$/NVCC_LDFLAGS = -lcublas -lcublasLt -lnvrtc/m' \
  "-lnvrtc added (cudnn-frontend references NVRTC)"
# (further CUDA-13 edits, if a newer toolkit or llm.c needs them, go here)

# ---- build ------------------------------------------------------------------------
MAKE_VARS=(
  USE_CUDNN=1 "CUDNN_FRONTEND_PATH=$FE/include"
  NO_MULTI_GPU=1 NO_USE_MPI=1 PRECISION=BF16
  "GPU_COMPUTE_CAPABILITY=$SM" "NVCC=$NVCC"
)
echo "llm.c $LLMC_COMMIT, cudnn-frontend $FE_DESC ($FE_COMMIT), sm_$SM"
echo "make train_gpt2cu ${MAKE_VARS[*]}"
start=$(date +%s)
# One build at a time on this machine (others build ember beside it).
PATH=$CUDA_HOME/bin:$PATH flock "$LOCK" make -C "$SRC" train_gpt2cu "${MAKE_VARS[@]}"
echo "built in $(( $(date +%s) - start )) s"

mkdir -p "$OUT"
rm -f "$OUT/train_gpt2cu"
cp "$SRC/train_gpt2cu" "$OUT/train_gpt2cu"
strip "$OUT/train_gpt2cu"
{
  echo "train_gpt2cu built by bench/llmc/build.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "llm.c:          $LLMC_COMMIT"
  echo "cudnn-frontend: $FE_DESC $FE_COMMIT"
  echo "nvcc:           $("$NVCC" --version | tail -1)"
  echo "cuDNN headers:  $(awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{printf "%s%s", sep, $3; sep="."}' "$CUDA_HOME/include/cudnn_version.h" 2>/dev/null)"
  echo "target:         sm_$SM (+ compute_$SM PTX), bf16, cuDNN attention, no NCCL/MPI"
  echo "make vars:      ${MAKE_VARS[*]}" | sed "s#$TMP#<tmp>#g"
  echo "edits:"
  for e in "${EDITS[@]}"; do echo "  - $e"; done
} >"$OUT/BUILD_INFO.txt"

echo "---- $OUT/train_gpt2cu"
ls -l "$OUT/train_gpt2cu"
du -h "$OUT/train_gpt2cu"
echo "---- ldd"
ldd "$OUT/train_gpt2cu" || true
echo "---- NEEDED"
readelf -d "$OUT/train_gpt2cu" | awk '/NEEDED/{print $NF}'
echo "---- BUILD_INFO.txt"
cat "$OUT/BUILD_INFO.txt"

// src/cuda/linalg.cpp — batched GEMM through cuBLASLt, with bias and ReLU/GELU epilogues.
//
// C[b] = act(alpha · op(A[b]) · op(B[b]) + beta · C[b] (+ bias on every row)), row-major, f32
// (FP32 compute: no TF32, so results stay within f32 rounding of the CPU's; TF32 tensor cores,
// CUBLAS_COMPUTE_32F_FAST_TF32, when set_float32_matmul_precision("high") allows them), f64, and
// f16/bf16 (tensor cores, f32 accumulation, C and the bias in the 16-bit type; autocast's GEMMs).
// cuBLASLt is column-major: a row-major [m, n] matrix is the column-major [n, m] matrix with
// the same leading dimension, so we compute Cᵀ = op(B)ᵀ · op(A)ᵀ, passing B first and the
// transposes as flags (nothing is copied). The bias (length n) then runs along Cᵀ's rows,
// which is what CUBLASLT_EPILOGUE_BIAS adds; the activation is CUBLASLT_EPILOGUE_RELU(_BIAS)
// or CUBLASLT_EPILOGUE_GELU(_BIAS), cuBLASLt's tanh-approximate GELU (GemmEpilogue::gelu_tanh).
// Batches use strided-batch layouts (a stride of 0 broadcasts one matrix). Descriptors and the
// heuristic's algorithm are cached per problem; when cuBLASLt offers no algorithm (a layout it
// refuses), the batch is run one matrix at a time and the bias and activation applied by separate
// kernels.
//
// Note [Measured GEMM algorithms]
// With EMBER_GEMM_AUTOTUNE=1 the first call of each problem times the heuristic's first
// kTuneCandidates algorithms on the call's own operands (beta = 0 only: C is overwritten,
// never accumulated; never while a stream is being captured) and keeps the fastest, as
// PyTorch's TunableOp does. The heuristic's first pick often splits K over several blocks
// and adds a reduction kernel, which costs more than it saves on the small GEMMs of a small
// model. Off by default: the choice then follows timing noise, so two runs may round GEMMs
// differently (within a process every call of a problem uses the same algorithm). Ignored in
// deterministic mode (set_deterministic), whose plans are cached apart: the heuristic's first
// algorithm, which cuBLAS runs with the same bits every time on one GPU given one stream and
// our own workspace (the cuBLAS guide, "Results reproducibility"); its split-K reductions are
// ordered (CUBLASLT_REDUCTION_SCHEME_INPLACE uses counters "to guarantee the sequentiality",
// the others reduce the workspace in a separate kernel).
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "cuda/kernels.cuh"
#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // per device, for cuBLASLt's split-K etc.

[[noreturn]] void throw_cublas_error(const char* call, cublasStatus_t status, const char* file,
                                     int line) {
  throw Error(detail::concat("cuBLASLt call failed: ", call, " returned ",
                             cublasLtGetStatusName(status), " (", cublasLtGetStatusString(status),
                             ") at ", file, ":", line));
}

#define EMBER_CUBLAS_CHECK(call)                                           \
  do {                                                                     \
    const cublasStatus_t ember_cublas_status_ = (call);                    \
    if (ember_cublas_status_ != CUBLAS_STATUS_SUCCESS)                     \
      throw_cublas_error(#call, ember_cublas_status_, __FILE__, __LINE__); \
  } while (0)

// Note [One cuBLASLt call at a time]
// A cached Plan's descriptor is shared by every thread that runs its problem, and run_algo
// writes the call's bias and auxiliary pointers into it before cublasLtMatmul reads it; and one
// call may queue several kernels (a split-K GEMM whose counters or partial sums live in the
// device's one workspace, then its reduction). Two threads calling at once interleaved both:
// a GEMM read another thread's pointers, or found the workspace's split-K counters holding the
// other call's partial sums and spun forever (ThreadsCuda.SharedEvalModelGivesEveryThread...
// hung in a cuBLAS xmma kernel on an H100, 2026-12-05, seen with cuda-gdb). So each device's
// calls take `launch`, from setting the descriptor until the call has queued its kernels; the
// stream then runs them in that order.
struct DeviceBlas {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::mutex launch;  // Note [One cuBLASLt call at a time]
};

// One handle and workspace per device, created on first use; leaked at exit on purpose (the
// CUDA runtime may already be shut down when static destructors run).
DeviceBlas& blas(int device) {
  static std::mutex mutex;
  static std::array<DeviceBlas, 64> devices;
  std::lock_guard<std::mutex> lock(mutex);
  DeviceBlas& d = devices[static_cast<size_t>(device)];
  if (!d.handle) {
    stream(device);  // makes the device current
    EMBER_CUBLAS_CHECK(cublasLtCreate(&d.handle));
    EMBER_CUDA_CHECK(cudaMalloc(&d.workspace, kWorkspaceBytes));
  }
  return d;
}

// Everything that decides the descriptors and the algorithm.
using Key = std::tuple<int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, int, bool, uint32_t, uint32_t, uint32_t,
                       bool, bool, bool>;

// Note [cuBLASLt alignment]
// The heuristic assumes 256-byte aligned operands unless told otherwise, and views (slices,
// one matrix of a batch) need not be. Each operand's alignment — that of its pointer and of
// its batch stride, at most 256 bytes — goes into the preference and the cache key.
uint32_t alignment_of(const void* ptr, int64_t batch_stride_bytes) {
  const uint64_t bits =
      reinterpret_cast<uintptr_t>(ptr) | static_cast<uint64_t>(batch_stride_bytes) | uint64_t{256};
  return static_cast<uint32_t>(bits & (~bits + 1));  // lowest set bit
}

// Epilogues with a bias vector: read (bias) or written (BGRADB: GemmArgs::bias_grad;
// DRELU_BGRAD: GemmArgs::relu_bias_grad).
bool has_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_BGRADB ||
         e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DRELU_BGRAD ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

// Epilogues with GELU's pre-activation: written (GELU_AUX) or read (DGELU).
bool has_pre(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

// Epilogues with a ReLU mask (Note [ReLU masks]): written (RELU_AUX) or read (DRELU).
bool has_mask(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_RELU_AUX || e == CUBLASLT_EPILOGUE_RELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DRELU || e == CUBLASLT_EPILOGUE_DRELU_BGRAD;
}

// A mask or bias-gradient pointer cuBLASLt may be given: the heuristic plans for aligned ones.
bool epilogue_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 256 == 0; }

// cuBLASLt's epilogue for a bias (or none) followed by `act`; `mask`: ReLU also writes its
// mask (GemmArgs::relu_mask_out).
cublasLtEpilogue_t epilogue_for(bool bias, backend::GemmEpilogue act, bool mask = false) {
  switch (act) {
    case backend::GemmEpilogue::relu:
      if (mask) return bias ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_AUX;
      return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case backend::GemmEpilogue::gelu_tanh:
      return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// The operands' type: f32, f64, and f16/bf16 with f32 accumulation and f32 alpha/beta.
cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::f64: return CUDA_R_64F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A (= our B), B, C
  cublasLtMatmulAlgo_t algo{};
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool found = false;
  int32_t splits = 1;  // the algorithm's split-K count (CUBLASLT_ALGO_CONFIG_SPLITK_NUM)
};

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t batch, int64_t batch_stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                        &count, sizeof(count)));
    EMBER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride, sizeof(batch_stride)));
  }
  return layout;
}

// Algorithms timed per problem (Note [Measured GEMM algorithms]).
constexpr int kTuneCandidates = 8;

bool autotune() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_GEMM_AUTOTUNE");
    return v && v[0] == '1';
  }();
  return on;
}

bool capturing(int device) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EMBER_CUDA_CHECK(cudaStreamIsCapturing(stream(device), &status));
  return status != cudaStreamCaptureStatusNone;
}

// Runs one algorithm of `p` on the call's operands (bias included).
cublasStatus_t run_algo(int device, const GemmArgs& g, const Plan& p,
                        const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, void* c);

// The fastest of `count` candidates: each run once to warm up, then the best of three timed
// runs (Note [Measured GEMM algorithms]). Candidates that fail are skipped.
cublasLtMatmulAlgo_t fastest(int device, const GemmArgs& g, const Plan& p,
                             const cublasLtMatmulHeuristicResult_t* candidates, int count,
                             const void* a, const void* b, const void* c) {
  const cudaStream_t st = stream(device);
  cudaEvent_t start = nullptr, stop = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreate(&start));
  EMBER_CUDA_CHECK(cudaEventCreate(&stop));
  cublasLtMatmulAlgo_t best = candidates[0].algo;
  float best_ms = 1e30f;
  for (int i = 0; i < count; ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
    void* out = const_cast<void*>(c);
    if (run_algo(device, g, p, candidates[i].algo, a, b, out) != CUBLAS_STATUS_SUCCESS) continue;
    float ms = 1e30f;
    for (int r = 0; r < 3; ++r) {
      EMBER_CUDA_CHECK(cudaEventRecord(start, st));
      (void)run_algo(device, g, p, candidates[i].algo, a, b, out);
      EMBER_CUDA_CHECK(cudaEventRecord(stop, st));
      EMBER_CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0.0f;
      EMBER_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms = std::min(ms, t);
    }
    if (ms < best_ms) {
      best_ms = ms;
      best = candidates[i].algo;
    }
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return best;
}

// Builds (once per key) the descriptors for one problem and asks the heuristic for an
// algorithm. `epilogue` is cuBLASLt's (CUBLASLT_EPILOGUE_DEFAULT: none).
const Plan& plan_for(int device, const GemmArgs& g, int64_t batch, cublasLtEpilogue_t epilogue,
                     const void* a, const void* b, const void* c) {
  static std::mutex mutex;
  static std::map<Key, Plan>* cache = new std::map<Key, Plan>();  // leaked, as blas()
  const bool beta_zero = g.beta == 0.0;
  const int64_t es = static_cast<int64_t>(element_size(g.dtype));
  const int64_t many = batch > 1 ? 1 : 0;
  const uint32_t align_a = alignment_of(a, many * g.batch_stride_a * es);
  const uint32_t align_b = alignment_of(b, many * g.batch_stride_b * es);
  const int64_t ces = g.c_f32 ? int64_t{4} : es;  // C's element size
  const uint32_t align_c = alignment_of(c, many * g.batch_stride_c * ces);
  const bool det = deterministic();  // Note [Measured GEMM algorithms]
  // f32 operands in TF32 (set_float32_matmul_precision): another compute type, another plan.
  const bool tf32 = g.dtype == DType::f32 && detail::allow_tf32();
  const Key key{device,
                static_cast<int>(g.dtype),
                g.trans_a,
                g.trans_b,
                g.m,
                g.n,
                g.k,
                g.lda,
                g.ldb,
                g.ldc,
                batch,
                g.batch_stride_a,
                g.batch_stride_b,
                g.batch_stride_c,
                static_cast<int>(epilogue),
                beta_zero,
                align_a,
                align_b,
                align_c,
                det,
                g.c_f32,
                tf32};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  const bool f64 = g.dtype == DType::f64;
  const cudaDataType_t type = data_type(g.dtype);
  const cudaDataType_t c_type = g.c_f32 ? CUDA_R_32F : type;  // C, D and a bias gradient
  const cublasComputeType_t compute = f64    ? CUBLAS_COMPUTE_64F
                                      : tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                             : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale_type = f64 ? CUDA_R_64F : CUDA_R_32F;  // alpha, beta
  Plan p;
  p.epilogue = epilogue;
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, scale_type));
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // our B
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // our A
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                                    sizeof(op_first)));
  EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                                    sizeof(op_second)));
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                      &epilogue, sizeof(epilogue)));
  if (has_bias(epilogue)) {
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                      &c_type, sizeof(c_type)));
  }
  if (has_mask(epilogue) || has_pre(epilogue)) {
    // The mask's in bits, the pre-activation's in elements: C's column-major rows are our n.
    const int64_t ld = has_mask(epilogue) ? backend::relu_mask_ld(g.n) : g.n;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                      &ld, sizeof(ld)));
  }
  // Column-major views: our B is [k, n] row-major = [n, k] column-major (transposed: [k, n]).
  p.a = g.trans_b ? make_layout(type, g.k, g.n, g.ldb, batch, g.batch_stride_b)
                  : make_layout(type, g.n, g.k, g.ldb, batch, g.batch_stride_b);
  p.b = g.trans_a ? make_layout(type, g.m, g.k, g.lda, batch, g.batch_stride_a)
                  : make_layout(type, g.k, g.m, g.lda, batch, g.batch_stride_a);
  p.c = make_layout(c_type, g.n, g.m, g.ldc, batch, g.batch_stride_c);
  cublasLtMatmulPreference_t pref = nullptr;
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes, sizeof(kWorkspaceBytes)));
  // cuBLASLt's A is our B (Note [cuBLASLt alignment]).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
  for (const auto& [attr, value] : alignments)
    EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
  std::array<cublasLtMatmulHeuristicResult_t, kTuneCandidates> results{};
  int found = 0;
  const bool tune = autotune() && !det && beta_zero && !capturing(device);
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(blas(device).handle, p.desc, p.a, p.b, p.c, p.c, pref,
                                     tune ? kTuneCandidates : 1, results.data(), &found);
  EMBER_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (status == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = results[0].algo;
    p.found = true;
    if (tune && found > 1) p.algo = fastest(device, g, p, results.data(), found, a, b, c);
    if (cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &p.splits,
                                             sizeof(p.splits), nullptr) != CUBLAS_STATUS_SUCCESS)
      p.splits = 1;
  } else if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_SUCCESS) {
    throw_cublas_error("cublasLtMatmulAlgoGetHeuristic", status, __FILE__, __LINE__);
  }
  return cache->emplace(key, p).first->second;
}

cublasStatus_t run_algo(int device, const GemmArgs& g, const Plan& p,
                        const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, void* c) {
  DeviceBlas& d = blas(device);
  std::lock_guard<std::mutex> launch(d.launch);  // Note [One cuBLASLt call at a time]
  if (has_bias(p.epilogue)) {
    const void* vector = p.epilogue == CUBLASLT_EPILOGUE_BGRADB        ? g.bias_grad
                         : p.epilogue == CUBLASLT_EPILOGUE_DRELU_BGRAD ? g.relu_bias_grad
                         : p.epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD ? g.gelu_bias_grad
                                                                       : g.bias;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &vector, sizeof(vector)));
  }
  if (has_mask(p.epilogue) || has_pre(p.epilogue)) {
    const void* aux = has_pre(p.epilogue) ? (g.gelu_pre_in ? g.gelu_pre_in : g.gelu_pre_out)
                      : g.relu_mask_in    ? g.relu_mask_in
                                          : g.relu_mask_out;
    EMBER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
  }
  const float alpha_f = static_cast<float>(g.alpha), beta_f = static_cast<float>(g.beta);
  const bool f64 = g.dtype == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&g.alpha) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&g.beta) : &beta_f;
  return cublasLtMatmul(d.handle, p.desc, alpha, b, p.a, a, p.b, beta, c, p.c, c, p.c, &algo,
                        d.workspace, kWorkspaceBytes, stream(device));
}

// Runs the plan; false when cuBLASLt has no algorithm for it.
bool run_plan(int device, const GemmArgs& g, int64_t batch, cublasLtEpilogue_t epilogue,
              const void* a, const void* b, void* c) {
  const Plan& p = plan_for(device, g, batch, epilogue, a, b, c);
  if (!p.found) return false;
  EMBER_CUBLAS_CHECK(run_algo(device, g, p, p.algo, a, b, c));
  return true;
}

#include "kernels/gelu_gemm.inc"

// GemmArgs::gelu_pre_out / gelu_pre_in in cuBLASLt's GELU_AUX(_BIAS) / DGELU(_BGRAD) epilogue;
// false when it has no algorithm or the operands do not suit it (then gelu_gemm_unfused).
bool gelu_epilogue(const GemmArgs& g) {
  const void* pre = g.gelu_pre_out ? g.gelu_pre_out : g.gelu_pre_in;
  if (g.k == 0 || g.ldc != g.n || g.n % 8 != 0 || !epilogue_aligned(pre) ||
      reinterpret_cast<uintptr_t>(g.bias) % 16 != 0 ||
      (g.gelu_bias_grad && !epilogue_aligned(g.gelu_bias_grad)))
    return false;
  const cublasLtEpilogue_t e =
      g.gelu_pre_out ? (g.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                     : (g.gelu_bias_grad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU);
  return run_plan(g.device, g, 1, e, g.a, g.b, g.c);
}

}  // namespace

// Note [ReLU masks] on the GPU: the forward's mask comes from the RELU_AUX(_BIAS) epilogue,
// and only when cuBLASLt runs it inside the GEMM: an algorithm that splits K applies such an
// epilogue in a kernel of its own after the reduction (measured on the H200: 3.2-3.5 µs per
// layer of the 784-256-256-10 MLP at batch 128, as much as the fold saves in the backward),
// so there the mask is not written and the caller keeps the plain path. ReLU's backward uses
// DRELU(_BGRAD) when cuBLASLt has an algorithm for it; otherwise the product runs plain and
// relu_mask_apply (elementwise.cu) and the reduce slot do the same afterwards.
void gemm(const GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0 || g.batch <= 0) return;
  EMBER_ASSERT(is_floating(g.dtype), "gemm: the CUDA kernel supports f32, f64, f16 and bf16 (got ",
               dtype_name(g.dtype), ")");
  EMBER_ASSERT(!(g.relu_mask_out || g.relu_mask_in) || g.batch == 1,
               "gemm: ReLU masks are for one product");
  EMBER_ASSERT(!g.relu_mask_in || (!g.bias && !g.bias_grad && !g.relu_mask_out &&
                                   g.epilogue == backend::GemmEpilogue::none),
               "gemm: ReLU's backward is for one plain product");
  EMBER_ASSERT(!g.c_f32 || ((g.dtype == DType::f16 || g.dtype == DType::bf16) && !g.bias &&
                            g.epilogue == backend::GemmEpilogue::none && !g.relu_mask_out &&
                            !g.relu_mask_in),
               "gemm: an f32 C is for one plain product of f16/bf16 operands");
  if (g.residual) {  // GemmArgs::residual: in the few-rows kernel, else copied into C first
    EMBER_ASSERT(backend::residual_fits(g), "gemm: a residual is for one plain product");
    if (g.k > 0 && few_rows_gemm(g)) return;
    const size_t row = static_cast<size_t>(g.ldc) * element_size(g.dtype);
    EMBER_CUDA_CHECK(cudaMemcpy2DAsync(
        g.c, row, g.residual, row, static_cast<size_t>(g.n) * element_size(g.dtype),
        static_cast<size_t>(g.m), cudaMemcpyDeviceToDevice, stream(g.device)));
    return gemm(backend::accumulating_into_residual(g));
  }
  if (g.gelu_pre_out || g.gelu_pre_in) {
    EMBER_ASSERT(g.batch == 1 && g.ldc == g.n && !g.c_f32 && !g.relu_mask_out && !g.relu_mask_in &&
                     !g.bias_grad &&
                     (g.gelu_pre_out ? g.epilogue == backend::GemmEpilogue::gelu_tanh
                                     : g.epilogue == backend::GemmEpilogue::none && !g.bias),
                 "gemm: GELU's pre-activation is for one product with that epilogue");
    if (!gelu_epilogue(g)) gelu_gemm_unfused(g);
    return;
  }
  if (g.k > 0 && few_rows_gemm(g)) return;  // Note [Products of a few rows]
  const int device = g.device;
  const size_t es = element_size(g.dtype);
  const DType c_dtype = g.c_f32 ? DType::f32 : g.dtype;
  const size_t ces = element_size(c_dtype);
  bool bias_done = false, act_done = false;
  if (g.k == 0) {  // C = beta · C (+ bias): no product to form
    const View c{g.c, c_dtype, g.device, Shape{g.batch, g.m, g.n},
                 Shape{g.batch_stride_c, g.ldc, 1}};
    if (g.beta == 0.0)
      fill(c, 0.0);
    else
      unary(UnaryOp::affine, c, c, g.beta, 0.0);
  } else {
    EMBER_ASSERT(
        g.ldc >= g.n && g.lda >= (g.trans_a ? g.m : g.k) && g.ldb >= (g.trans_b ? g.k : g.n),
        "gemm: leading dimensions too small");
    bool done = false;
    // Note [Bias gradient in the epilogue]: cuBLASLt's operand B is our A, so BGRADB sums
    // op(A) over k, writing the m sums beside dW in the same kernel (when it has an
    // algorithm for it; else the reduce slot does it after the product).
    if (g.bias_grad) {
      EMBER_ASSERT(g.batch == 1 && !g.bias && g.epilogue == backend::GemmEpilogue::none,
                   "gemm: bias_grad is for one plain product");
      if (reinterpret_cast<uintptr_t>(g.bias_grad) % 16 == 0 &&
          run_plan(device, g, 1, CUBLASLT_EPILOGUE_BGRADB, g.a, g.b, g.c))
        return;
    }
    if (g.relu_mask_in && epilogue_aligned(g.relu_mask_in) &&
        (!g.relu_bias_grad || epilogue_aligned(g.relu_bias_grad))) {
      const cublasLtEpilogue_t e =
          g.relu_bias_grad ? CUBLASLT_EPILOGUE_DRELU_BGRAD : CUBLASLT_EPILOGUE_DRELU;
      if (run_plan(device, g, 1, e, g.a, g.b, g.c)) return;
    }
    // The epilogue reads the bias with vector loads: only offer it an aligned one (an
    // unaligned bias runs bias and activation as separate kernels, in that order).
    const bool aligned = reinterpret_cast<uintptr_t>(g.bias) % 16 == 0;
    const bool with_mask = g.relu_mask_out && epilogue_aligned(g.relu_mask_out);
    if (aligned && with_mask) {
      const cublasLtEpilogue_t e = epilogue_for(g.bias != nullptr, g.epilogue, true);
      const Plan& p = plan_for(device, g, 1, e, g.a, g.b, g.c);
      if (p.found && p.splits <= 1) {
        EMBER_CUBLAS_CHECK(run_algo(device, g, p, p.algo, g.a, g.b, g.c));
        bias_done = act_done = done = true;
        if (g.relu_mask_written) *g.relu_mask_written = true;
      }
    }
    const cublasLtEpilogue_t fused =
        aligned ? epilogue_for(g.bias != nullptr, g.epilogue) : CUBLASLT_EPILOGUE_DEFAULT;
    if (!done && fused != CUBLASLT_EPILOGUE_DEFAULT &&
        run_plan(device, g, g.batch, fused, g.a, g.b, g.c)) {
      bias_done = act_done = done = true;
    }
    if (!done && !run_plan(device, g, g.batch, CUBLASLT_EPILOGUE_DEFAULT, g.a, g.b, g.c)) {
      for (int64_t i = 0; i < g.batch; ++i) {  // one matrix at a time
        const bool ok = run_plan(device, g, 1, CUBLASLT_EPILOGUE_DEFAULT,
                                 static_cast<const char*>(g.a) + i * g.batch_stride_a * es,
                                 static_cast<const char*>(g.b) + i * g.batch_stride_b * es,
                                 static_cast<char*>(g.c) + i * g.batch_stride_c * ces);
        EMBER_CHECK(ok, "gemm: cuBLASLt has no algorithm for m=", g.m, " n=", g.n, " k=", g.k, " (",
                    dtype_name(g.dtype), ")");
      }
    }
  }
  if (g.bias_grad && g.c_f32) {
    sum_rows_f32(device, g.dtype, g.a, g.trans_a, g.m, g.k, g.lda, g.bias_grad);
  } else if (g.bias_grad) {
    const auto [out, in] = backend::gemm_bias_grad_views(g);
    reduce(ReduceOp::sum, out, in);
  }
  // The epilogue was not used: bias, then activation, as separate kernels.
  if (g.bias && !bias_done)
    add_bias_rows(device, g.dtype, g.c, g.bias, g.batch, g.batch_stride_c, g.m, g.n, g.ldc);
  if (g.epilogue != backend::GemmEpilogue::none && !act_done) {
    const View c{g.c, g.dtype, g.device, Shape{g.batch, g.m, g.n},
                 Shape{g.batch_stride_c, g.ldc, 1}};
    unary(g.epilogue == backend::GemmEpilogue::relu ? UnaryOp::relu : UnaryOp::gelu_tanh, c, c, 0.0,
          0.0);
  }
  if (g.relu_mask_in) relu_mask_apply(device, g.dtype, g.c, g.ldc, g.m, g.n, g.relu_mask_in);
  if (g.relu_bias_grad) {
    const auto [out, in] = backend::gemm_column_sum_views(g, g.relu_bias_grad);
    reduce(ReduceOp::sum, out, in);
  }
}

}  // namespace ember::cuda

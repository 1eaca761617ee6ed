// src/cpu/gemm_onednn.cpp — f16/bf16 GEMMs through oneDNN's matmul primitive
// (gemm_onednn.hpp), opened at run time (onednn_loader.hpp).
//
// Shape letters are GemmArgs's: op(A) [m, k], op(B) [k, n], C [m, n], row-major with leading
// dimensions lda, ldb, ldc, `batch` products with per-operand batch strides (0 broadcasts one
// matrix). oneDNN takes them as they lie: a transpose is a swap of the two strides of the
// operand's memory descriptor, a batch a third, leading dimension; nothing is copied by ember.
// Its brgemm kernels (AMX tiles or AVX512-BF16 where the CPU has them) read the 16-bit
// operands directly and accumulate in f32; the bias (in C's dtype), beta·C (a `sum` post-op),
// alpha (output scales) and the activation (an `eltwise` post-op: relu or gelu_tanh) are
// applied to the f32 accumulator before C is rounded once.
//
// Note [16-bit GEMMs through oneDNN]
// OpenBLAS here has no sbgemm, so the gemm slot's own 16-bit path widens both operands to f32
// and calls sgemm (linalg.cpp's gemm_wide): three passes over memory and an f32 product on
// every call. oneDNN's bf16 matmul is 3x faster than that sgemm on the GPT-2 classifier's
// [2048, 256]·[256, 50304] (brg:avx512_core_amx_bf16, 2 threads: 77 ms against 250 ms).
// Primitives are built once per argument set and kept (Note [oneDNN primitives are built
// once] in conv_onednn.cpp), keyed also by ember's thread count (Note [oneDNN's threads are
// ember's]): with the split fixed at creation, the same inputs give the same bits on every
// call. oneDNN declines are remembered too: a case whose only implementation is oneDNN's
// reference kernel ("ref:any"; f16 on CPUs without AVX512-FP16 support in oneDNN 2.6) takes
// the widening path, as does everything when oneDNN is absent (EMBER_ONEDNN_LIBRARY naming a
// missing file: the sanitizer run) or switched off (set_gemm_onednn_enabled).
// Batches where both operands are broadcast, or that oneDNN declines as one 3-d primitive,
// run as a loop of one 2-d primitive over the batch.
#include "cpu/gemm_onednn.hpp"

#include <atomic>
#include <bit>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu/onednn_loader.hpp"
#include "cpu/parallel.hpp"
#include "cpu/pass_buffer.hpp"

namespace ember::cpu {
namespace {

std::atomic<bool> g_enabled{true};
thread_local std::string t_last;

}  // namespace

bool set_gemm_onednn_enabled(bool on) { return g_enabled.exchange(on); }

// Note [f32 GEMMs: OpenBLAS or oneDNN]
// Measured on this 2-core AVX-512 machine (2026-12-05; linear forward + backward, f32, ms, the
// three GEMMs and the bias gradient of one call, OpenBLAS 0.3.21 against oneDNN 2.6.3):
//   m×k×n            1 thread: OpenBLAS  oneDNN     2 threads: OpenBLAS  oneDNN
//   128×784×256                 1.205     1.047                 0.764     1.068
//   128×256×256                 0.392     0.314                 0.318     0.382
//   128×256×10                  0.030     0.028                 0.037     0.043
//   64×64×64                    0.016     0.022                 0.017     0.223
//   2048×256×768               18.50     16.26                 10.00      8.53
//   2048×1024×256              24.41     21.73                 12.26     11.22
// oneDNN's kernels are 10-25 % faster once a product has some millions of multiply-adds, but
// with more than one thread each call also wakes oneDNN's OpenMP team (OMP_WAIT_POLICY=PASSIVE,
// Note [oneDNN's threads are ember's]), which costs 0.05-0.2 ms: so one thread takes oneDNN from
// 2^22 multiply-adds, several threads only from 2^28, and OpenBLAS below.
bool f32_gemm_prefers_onednn(const GemmArgs& g) {
  const double work = static_cast<double>(g.m) * static_cast<double>(g.n) *
                      static_cast<double>(g.k) * static_cast<double>(g.batch);
  return work >= (num_threads() == 1 ? 4194304.0 : 268435456.0);
}

std::string gemm_onednn_last() { return t_last; }

#if defined(EMBER_HAVE_ONEDNN_HEADERS)
namespace {

using backend::GemmEpilogue;

// A built matmul, or the reason oneDNN declined it.
struct Matmul {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{}, bias{}, scratchpad{};
  size_t scratchpad_bytes = 0;
  bool per_product = false;  // one 2-d primitive run batch times
  std::string impl;          // "brg:avx512_core_amx_bf16", ...
  std::string error;         // non-empty: declined
};

// A [rows, cols] operand (op(X), with `trans` meaning X is stored [cols, rows]) with leading
// dimension ld; with batch > 1 a leading batch dimension of stride bs (1 and unused when 0).
dnnl_memory_desc_t operand_md(int64_t batch, int64_t bs, int64_t rows, int64_t cols, int64_t ld,
                              bool trans, dnnl_data_type_t type) {
  dnnl_memory_desc_t d{};
  dnnl_dims_t dims{}, strides{};
  int nd = 0;
  if (batch > 1) {
    dims[nd] = bs == 0 ? 1 : batch;
    strides[nd++] = bs == 0 ? rows * cols : bs;
  }
  dims[nd] = rows;
  strides[nd++] = trans ? 1 : ld;
  dims[nd] = cols;
  strides[nd++] = trans ? ld : 1;
  onednn_check(onednn().memory_desc_init_by_strides(&d, nd, dims, type, strides),
               "dnnl_memory_desc_init_by_strides");
  return d;
}

// Builds `p` for g; `batch` is g.batch, or 1 for a per-product primitive.
void build(Matmul& p, const GemmArgs& g, int64_t batch) {
  const OnednnApi& api = onednn();
  const dnnl_data_type_t t = onednn_dtype(g.dtype);
  p.a = operand_md(batch, g.batch_stride_a, g.m, g.k, g.lda, g.trans_a, t);
  p.b = operand_md(batch, g.batch_stride_b, g.k, g.n, g.ldb, g.trans_b, t);
  p.c = operand_md(batch, g.batch_stride_c, g.m, g.n, g.ldc, false, g.c_f32 ? dnnl_f32 : t);
  if (g.bias) {
    dnnl_dims_t dims{}, strides{};
    const int nd = batch > 1 ? 3 : 2;
    for (int i = 0; i < nd; ++i) dims[i] = 1;
    dims[nd - 1] = g.n;
    strides[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; --i) strides[i] = g.n;
    onednn_check(api.memory_desc_init_by_strides(&p.bias, nd, dims, t, strides), "bias descriptor");
  }
  OnednnAttr attr;
  onednn_check(api.attr_create(&attr.attr), "dnnl_primitive_attr_create");
  onednn_check(api.attr_set_scratchpad_mode(attr.attr, dnnl_scratchpad_mode_user),
               "scratchpad mode");
  if (g.alpha != 1.0) {
    const float alpha = static_cast<float>(g.alpha);
    onednn_check(api.attr_set_output_scales(attr.attr, 1, 0, &alpha), "output scales");
  }
  if (g.beta != 0.0 || g.epilogue != GemmEpilogue::none) {
    onednn_check(api.post_ops_create(&attr.ops), "dnnl_post_ops_create");
    if (g.beta != 0.0)
      onednn_check(api.post_ops_append_sum(attr.ops, static_cast<float>(g.beta)), "sum post-op");
    if (g.epilogue == GemmEpilogue::relu)
      onednn_check(api.post_ops_append_eltwise(attr.ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f),
                   "relu post-op");
    else if (g.epilogue == GemmEpilogue::gelu_tanh)
      onednn_check(api.post_ops_append_eltwise(attr.ops, 1.0f, dnnl_eltwise_gelu_tanh, 0.0f, 0.0f),
                   "gelu_tanh post-op");
    onednn_check(api.attr_set_post_ops(attr.attr, attr.ops), "post ops");
  }
  dnnl_matmul_desc_t desc{};
  onednn_check(api.matmul_desc_init(&desc, &p.a, &p.b, g.bias ? &p.bias : nullptr, &p.c),
               "matmul descriptor");
  OnednnPd pd;
  onednn_check(api.primitive_desc_create(&pd.pd, &desc, attr.attr, api.engine, nullptr), "matmul");
  const char* impl = nullptr;
  onednn_check(api.primitive_desc_query(pd.pd, dnnl_query_impl_info_str, 0, &impl), "impl query");
  p.impl = impl ? impl : "?";
  if (p.impl.rfind("ref", 0) == 0)
    throw OnednnDeclined{"only oneDNN's reference kernel (" + p.impl + ") for this product"};
  p.scratchpad = *api.primitive_desc_query_md(pd.pd, dnnl_query_scratchpad_md, 0);
  p.scratchpad_bytes = api.memory_desc_get_size(&p.scratchpad);
  onednn_check(api.primitive_create(&p.prim, pd.pd), "primitive");
}

// Why g cannot go to oneDNN at all ("" when it may).
std::string precheck(const GemmArgs& g) {
  if (!g_enabled.load(std::memory_order_relaxed)) return "switched off";
  std::string why;
  if (!onednn_api(&why)) return why;
  if (g.dtype != DType::bf16 && g.dtype != DType::f16 && g.dtype != DType::f32)
    return "dtype " + std::string(dtype_name(g.dtype)) + " (this path is for f32, f16 and bf16)";
  if (g.k == 0) return "an empty inner dimension (k = 0)";
  if (g.bias && g.alpha != 1.0) return "a bias with alpha != 1";
  if (g.batch > 1 && g.batch_stride_c == 0) return "a batch writing one C";
  return "";
}

std::vector<int64_t> key_of(const GemmArgs& g) {
  const bool batched = g.batch > 1;
  return {static_cast<int64_t>(g.dtype),
          g.c_f32,
          g.trans_a,
          g.trans_b,
          g.m,
          g.n,
          g.k,
          g.batch,
          g.lda,
          g.ldb,
          g.ldc,
          batched ? g.batch_stride_a : 0,
          batched ? g.batch_stride_b : 0,
          batched ? g.batch_stride_c : 0,
          g.bias != nullptr,
          static_cast<int64_t>(g.epilogue),
          std::bit_cast<int64_t>(g.alpha),
          std::bit_cast<int64_t>(g.beta),
          num_threads()};
}

// The cached matmul for g (built on first use); never null (its error says when declined).
const Matmul& matmul_for(const GemmArgs& g) {
  auto& c = OnednnCache<Matmul>::get();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::unique_ptr<Matmul>& slot = c.entries[key_of(g)];
  if (slot) return *slot;
  slot = std::make_unique<Matmul>();
  const bool both_broadcast = g.batch > 1 && g.batch_stride_a == 0 && g.batch_stride_b == 0;
  if (g.batch > 1 && !both_broadcast) {
    try {
      build(*slot, g, g.batch);
      return *slot;
    } catch (const OnednnDeclined&) {
      *slot = Matmul{};  // try one product at a time
    }
  }
  try {
    build(*slot, g, 1);
    slot->per_product = g.batch > 1;
  } catch (const OnednnDeclined& d) {
    slot->error = d.why;
  }
  return *slot;
}

void run(const Matmul& p, const GemmArgs& g) {
  onednn_take_threads();
  PassBuffer scratch(p.scratchpad_bytes);
  std::unique_ptr<OnednnMemory> scratch_mem;
  if (p.scratchpad_bytes)
    scratch_mem = std::make_unique<OnednnMemory>(p.scratchpad, scratch.get(), "gemm");
  const size_t in_size = g.dtype == DType::f32 ? 4 : 2, c_size = g.c_f32 ? 4 : in_size;
  const int64_t products = p.per_product ? g.batch : 1;
  for (int64_t i = 0; i < products; ++i) {
    const auto* a = static_cast<const char*>(g.a) + i * g.batch_stride_a * in_size;
    const auto* b = static_cast<const char*>(g.b) + i * g.batch_stride_b * in_size;
    auto* c = static_cast<char*>(g.c) + i * g.batch_stride_c * c_size;
    OnednnMemory ma(p.a, const_cast<char*>(a), "gemm"), mb(p.b, const_cast<char*>(b), "gemm"),
        mc(p.c, c, "gemm");
    std::vector<dnnl_exec_arg_t> args = {
        {DNNL_ARG_SRC, ma.get()}, {DNNL_ARG_WEIGHTS, mb.get()}, {DNNL_ARG_DST, mc.get()}};
    std::unique_ptr<OnednnMemory> mbias;
    if (g.bias) {
      mbias = std::make_unique<OnednnMemory>(p.bias, const_cast<void*>(g.bias), "gemm");
      args.push_back({DNNL_ARG_BIAS, mbias->get()});
    }
    if (scratch_mem) args.push_back({DNNL_ARG_SCRATCHPAD, scratch_mem->get()});
    onednn_execute(p.prim, args, "gemm", "matmul");
  }
  onednn().stream_wait(onednn_thread_stream());
}

}  // namespace

bool gemm_onednn(const GemmArgs& g) {
  if (std::string why = precheck(g); !why.empty()) {
    t_last = why;
    return false;
  }
  const Matmul& p = matmul_for(g);
  if (!p.error.empty()) {
    t_last = "oneDNN declined: " + p.error;
    return false;
  }
  run(p, g);
  t_last = "oneDNN " + p.impl;
  return true;
}

#else  // built without oneDNN's headers

bool gemm_onednn(const GemmArgs&) {
  t_last = "ember was built without oneDNN's headers (oneapi/dnnl/dnnl.h)";
  return false;
}

#endif

}  // namespace ember::cpu

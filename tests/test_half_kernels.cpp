// tests/test_half_kernels.cpp — softmax, log_softmax, layer_norm and embedding in f16 and bf16,
// forward and backward, on the CPU and on CUDA: each 16-bit result is the f32 computation on
// the widened inputs, rounded once to the 16-bit dtype.
//
//   bitwise   the 16-bit kernels compute exactly as the f32 ones (Note [16-bit softmax] in
//             src/kernels/softmax.hpp, Note [16-bit layer norm] in src/kernels/norm.hpp,
//             Note [16-bit index_add] in src/kernels/index.hpp), so a 16-bit result must equal,
//             bit for bit, the f32 kernel of the same device run on the widened inputs (for a
//             backward: the widened grad and the 16-bit forward's widened output or input) and
//             rounded once. Embedding's backward on CUDA is compared with the CPU's f32 sum
//             (CUDA's f32 index_add adds with atomics, in no fixed order; the 16-bit one sorts).
//   1 ulp     CUDA against the CPU in the same 16-bit dtype: within 1 ulp of that dtype, or
//             within 1e-5 of the tensor's largest magnitude where the two devices' f32
//             computations differ by more than their rounding after cancellation (FMA on the
//             GPU, x̂·w + b with b ≈ -x̂·w); f32 results (the mixed layer norm's parameter
//             gradients) within 1e-5 relative to the largest magnitude.
//   errors    a weight or bias dtype layer_norm does not take is an ember::Error naming the op,
//             the dtype that came and the one expected.
// The CUDA tests skip without a device (SKIP_WITHOUT_CUDA).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::floats;

const DType kHalves[] = {DType::bf16, DType::f16};

std::string shape_str(const Shape& s) { return s.to_string(); }

// ---- comparisons ----
std::vector<uint16_t> bits16(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<uint16_t> v(static_cast<size_t>(c.numel()));
  if (!v.empty()) std::memcpy(v.data(), c.data_ptr(), v.size() * sizeof(uint16_t));
  return v;
}
std::vector<uint32_t> bits32(const Tensor& t) {
  const std::vector<float> f = t.to(Device::cpu()).contiguous().to_vector<float>();
  std::vector<uint32_t> v(f.size());
  if (!v.empty()) std::memcpy(v.data(), f.data(), v.size() * sizeof(uint32_t));
  return v;
}

// got == want bit for bit (both f16/bf16, or both f32), naming the first mismatches.
::testing::AssertionResult same_bits(const Tensor& got, const Tensor& want,
                                     const std::string& what) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure()
           << what << ": got " << dtype_name(got.dtype()) << " " << shape_str(got.shape())
           << ", expected " << dtype_name(want.dtype()) << " " << shape_str(want.shape());
  const bool wide = got.dtype() == DType::f32;
  const std::vector<uint32_t> a = wide ? bits32(got) : [&] {
    std::vector<uint16_t> b = bits16(got);
    return std::vector<uint32_t>(b.begin(), b.end());
  }();
  const std::vector<uint32_t> b = wide ? bits32(want) : [&] {
    std::vector<uint16_t> c = bits16(want);
    return std::vector<uint32_t>(c.begin(), c.end());
  }();
  const std::vector<float> fa = floats(got), fb = floats(want);
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && ++bad <= 5)
      first << "\n  [" << i << "] got " << fa[i] << " (0x" << std::hex << a[i] << std::dec
            << "), expected " << fb[i] << " (0x" << std::hex << b[i] << std::dec << ")";
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << " " << dtype_name(got.dtype()) << " " << shape_str(got.shape()) << ": " << bad
         << " of " << a.size() << " values differ" << first.str();
}

// A 16-bit value's position on the number line (adjacent values differ by 1).
int32_t ordinal(uint16_t b) { return (b & 0x8000u) ? -static_cast<int32_t>(b & 0x7fffu) : b; }

// got within 1 ulp of want (16-bit) or within 1e-5 of max|want| (see the file comment).
::testing::AssertionResult within_ulp(const Tensor& got, const Tensor& want,
                                      const std::string& what) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << what << ": dtype or shape differs";
  const std::vector<float> fa = floats(got), fb = floats(want);
  double scale = 0;
  for (float v : fb)
    if (std::isfinite(v)) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  const bool wide = got.dtype() == DType::f32;
  const std::vector<uint16_t> a = wide ? std::vector<uint16_t>() : bits16(got);
  const std::vector<uint16_t> b = wide ? std::vector<uint16_t>() : bits16(want);
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < fa.size(); ++i) {
    const bool same_nan = std::isnan(fa[i]) && std::isnan(fb[i]);
    const double diff = std::fabs(static_cast<double>(fa[i]) - fb[i]);
    const bool ok = same_nan || fa[i] == fb[i] || diff <= 1e-5 * scale ||
                    (!wide && std::abs(ordinal(a[i]) - ordinal(b[i])) <= 1 && std::isfinite(fb[i]));
    if (!ok && ++bad <= 5) first << "\n  [" << i << "] got " << fa[i] << ", expected " << fb[i];
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << " " << dtype_name(got.dtype()) << " " << shape_str(got.shape()) << ": " << bad
         << " of " << fa.size() << " values off" << first.str();
}

// ---- the f32 kernels, called through the backend (the reference of a backward) ----
backend::View view(const Tensor& t, const Shape& shape) {
  Shape strides = shape;
  int64_t s = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
  return {t.data_ptr(), t.dtype(), t.device().index, shape, strides};
}
backend::View view(const Tensor& t) { return view(t, t.shape()); }
backend::View none(DType dtype, Device device) {
  return {nullptr, dtype, device.index, Shape{0}, Shape{1}};
}
Tensor widened(const Tensor& t) { return t.detach().to(DType::f32).contiguous(); }
int wrap(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + rank : dim); }

// The f32 softmax backward of g and y (both widened), on their device.
Tensor f32_softmax_grad(const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const Tensor g32 = widened(g), y32 = widened(y);
  Tensor gin = empty(y32.shape(), {.dtype = DType::f32, .device = y32.device()});
  backend::backend_for(y32.device())
      .softmax_backward(view(gin), view(g32), view(y32), wrap(dim, y32.dim()), log);
  return gin;
}

// ---- softmax / log_softmax ----
struct SoftmaxCase {
  Shape shape;
  int64_t dim;
};
// Short rows (< 16: the CPU's fused loop), vector rows, rows past a warp's 1024 (a block each
// on CUDA), columns (I = 3; I = 130: a 64-column block and a remainder), dim 0.
const std::vector<SoftmaxCase> kSoftmaxCases = {{{6, 10}, 1},    {{7, 33}, -1},    {{3, 2000}, 1},
                                                {{4, 70, 3}, 1}, {{2, 5, 130}, 1}, {{9, 4, 2}, 0}};

Tensor softmax_input(const SoftmaxCase& c, DType dtype, Device device, uint64_t seed) {
  manual_seed(seed);
  Tensor x = randn(c.shape) * 3.0;
  // A masked slice as attention makes: -inf entries (exp gives 0).
  x = masked_fill(x, lt(rand(c.shape), 0.1), -INFINITY);
  return x.to(dtype).to(device);
}

// softmax or log_softmax of `dtype` on `device` against the f32 kernel of that device.
void check_softmax_bitwise(Device device) {
  uint64_t seed = 10;
  for (const DType dtype : kHalves)
    for (const bool log : {false, true})
      for (const SoftmaxCase& c : kSoftmaxCases) {
        const std::string what = std::string(log ? "log_softmax" : "softmax") + " dim " +
                                 std::to_string(c.dim) + " on " + device.str();
        Tensor x = softmax_input(c, dtype, device, seed++).requires_grad_();
        Tensor y = log ? log_softmax(x, c.dim) : softmax(x, c.dim);
        ASSERT_EQ(y.dtype(), dtype) << what;
        const Tensor y32 = log ? log_softmax(widened(x), c.dim) : softmax(widened(x), c.dim);
        EXPECT_TRUE(same_bits(y, y32.to(dtype), what + " forward"));
        const Tensor g = (randn(c.shape) * 2.0).to(dtype).to(device);
        y.backward(g);
        ASSERT_EQ(x.grad().dtype(), dtype) << what;
        EXPECT_TRUE(
            same_bits(x.grad(), f32_softmax_grad(g, y, c.dim, log).to(dtype), what + " backward"));
      }
}

TEST(HalfKernels, SoftmaxCpuIsTheF32KernelRoundedOnce) { check_softmax_bitwise(Device::cpu()); }

TEST(HalfKernels, SoftmaxCudaIsTheF32KernelRoundedOnce) {
  SKIP_WITHOUT_CUDA();
  check_softmax_bitwise(Device::cuda());
}

TEST(HalfKernels, SoftmaxCudaMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 40;
  for (const DType dtype : kHalves)
    for (const bool log : {false, true})
      for (const SoftmaxCase& c : kSoftmaxCases) {
        const std::string what = std::string(log ? "log_softmax" : "softmax") + " dim " +
                                 std::to_string(c.dim) + " cuda against cpu";
        const Tensor base = softmax_input(c, dtype, Device::cpu(), seed++);
        const Tensor g = (randn(c.shape) * 2.0).to(dtype);
        Tensor xc = base.clone().requires_grad_(), xg = base.to(Device::cuda()).requires_grad_();
        Tensor yc = log ? log_softmax(xc, c.dim) : softmax(xc, c.dim);
        Tensor yg = log ? log_softmax(xg, c.dim) : softmax(xg, c.dim);
        EXPECT_TRUE(within_ulp(yg, yc, what + " forward"));
        yc.backward(g);
        yg.backward(g.to(Device::cuda()));
        EXPECT_TRUE(within_ulp(xg.grad(), xc.grad(), what + " backward"));
      }
}

// ---- layer_norm ----
enum class Affine { none, both, weight_only };
struct NormCase {
  Shape shape;       // x
  Shape normalized;  // its trailing dims
  Affine affine;
};
// On CUDA: register rows of 4-element packs (768, 1000), unvectorised rows (n = 5, 250), the
// general path (3000), two normalized dims.
const std::vector<NormCase> kNormCases = {
    {{6, 768}, {768}, Affine::both},  {{5, 1000}, {1000}, Affine::weight_only},
    {{9, 5}, {5}, Affine::both},      {{3, 3000}, {3000}, Affine::both},
    {{37, 250}, {250}, Affine::none}, {{4, 2, 64}, {2, 64}, Affine::both},
    {{3, 3000}, {3000}, Affine::none}};

struct NormData {
  Tensor x, w, b, g;  // in the dtypes asked, on the device asked; w/b undefined when absent
};

NormData norm_data(const NormCase& c, DType dtype, DType param_dtype, Device device,
                   uint64_t seed) {
  manual_seed(seed);
  NormData d;
  d.x = (randn(c.shape) * 2.0 + 3.0).to(dtype).to(device);  // an offset mean: centring matters
  if (c.affine != Affine::none) d.w = (randn(c.normalized) * 0.5 + 1.0).to(param_dtype).to(device);
  if (c.affine == Affine::both) d.b = (randn(c.normalized) * 0.5).to(param_dtype).to(device);
  d.g = randn(c.shape).to(dtype).to(device);
  return d;
}

// The f32 slots on the widened inputs: y, mean, rstd, then grad_x, grad_w, grad_b from g.
struct NormRef {
  Tensor y, mean, rstd, gx, gw, gb;
};

NormRef f32_layer_norm(const NormData& d, const Shape& normalized, double eps) {
  const Device dev = d.x.device();
  const TensorOptions o{.dtype = DType::f32, .device = dev};
  const int64_t n = normalized.numel(), rows = d.x.numel() / n;
  const Shape flat{rows, n}, vec{n};
  const Tensor x = widened(d.x), g = widened(d.g);
  const Tensor w = d.w.defined() ? widened(d.w) : Tensor(),
               b = d.b.defined() ? widened(d.b) : Tensor();
  auto vv = [&](const Tensor& t) { return t.defined() ? view(t, vec) : none(DType::f32, dev); };
  NormRef r{empty(d.x.shape(), o),
            empty({rows}, o),
            empty({rows}, o),
            empty(d.x.shape(), o),
            w.defined() ? empty({n}, o) : Tensor(),
            b.defined() ? empty({n}, o) : Tensor()};
  const backend::Backend& be = backend::backend_for(dev);
  be.layer_norm_forward(view(r.y, flat), backend::View{}, view(r.mean), view(r.rstd), view(x, flat),
                        vv(w), vv(b), eps);
  be.layer_norm_backward(view(r.gx, flat), backend::View{}, vv(r.gw), vv(r.gb), view(g, flat),
                         view(x, flat), view(r.mean), view(r.rstd), vv(w), false);
  return r;
}

void check_layer_norm_bitwise(Device device, bool mixed) {
  uint64_t seed = 100;
  for (const DType dtype : kHalves)
    for (const NormCase& c : kNormCases) {
      const DType pt = mixed ? DType::f32 : dtype;
      const std::string what = "layer_norm " + shape_str(c.shape) + " params " +
                               std::string(dtype_name(pt)) + " on " + device.str();
      const NormData d = norm_data(c, dtype, pt, device, seed++);
      Tensor x = d.x.clone().requires_grad_();
      Tensor w = d.w.defined() ? d.w.clone().requires_grad_() : Tensor();
      Tensor b = d.b.defined() ? d.b.clone().requires_grad_() : Tensor();
      Tensor y = layer_norm(x, c.normalized, w, b);
      y.backward(d.g);
      const NormRef r = f32_layer_norm(d, c.normalized, 1e-5);
      ASSERT_EQ(y.dtype(), dtype) << what;
      EXPECT_TRUE(same_bits(y, r.y.to(dtype), what + " y"));
      EXPECT_TRUE(same_bits(x.grad(), r.gx.to(dtype), what + " grad x"));
      if (w.defined()) {
        ASSERT_EQ(w.grad().dtype(), pt) << what;
        EXPECT_TRUE(same_bits(w.grad(), r.gw.reshape(c.normalized).to(pt), what + " grad w"));
      }
      if (b.defined()) {
        EXPECT_TRUE(same_bits(b.grad(), r.gb.reshape(c.normalized).to(pt), what + " grad b"));
      }
    }
}

TEST(HalfKernels, LayerNormCpuIsTheF32KernelRoundedOnce) {
  check_layer_norm_bitwise(Device::cpu(), false);
}
TEST(HalfKernels, LayerNormCpuWithF32ParamsIsTheF32Kernel) {
  check_layer_norm_bitwise(Device::cpu(), true);
}
TEST(HalfKernels, LayerNormCudaIsTheF32KernelRoundedOnce) {
  SKIP_WITHOUT_CUDA();
  check_layer_norm_bitwise(Device::cuda(), false);
}
TEST(HalfKernels, LayerNormCudaWithF32ParamsIsTheF32Kernel) {
  SKIP_WITHOUT_CUDA();
  check_layer_norm_bitwise(Device::cuda(), true);
}

// The slots themselves: mean and rstd are f32 and the f32 kernel's; grad_x += ... (the residual
// path, Note [Fused layer norm]) rounds widened(old) + d once; the column sums alone.
void check_layer_norm_slots(Device device) {
  uint64_t seed = 200;
  for (const DType dtype : kHalves)
    for (const NormCase& c : {kNormCases[0], kNormCases[2], kNormCases[3]}) {
      const std::string what = "layer_norm slots " + shape_str(c.shape) + " on " + device.str();
      const NormData d = norm_data(c, dtype, dtype, device, seed++);
      const NormRef r = f32_layer_norm(d, c.normalized, 1e-5);
      const int64_t n = c.normalized.numel(), rows = d.x.numel() / n;
      const Shape flat{rows, n}, vec{n};
      const TensorOptions o16{.dtype = dtype, .device = device};
      const TensorOptions o32{.dtype = DType::f32, .device = device};
      const backend::Backend& be = backend::backend_for(device);
      Tensor y = empty(d.x.shape(), o16), mean = empty({rows}, o32), rstd = empty({rows}, o32);
      be.layer_norm_forward(view(y, flat), backend::View{}, view(mean), view(rstd), view(d.x, flat),
                            view(d.w, vec), view(d.b, vec), 1e-5);
      EXPECT_TRUE(same_bits(mean, r.mean, what + " mean"));
      EXPECT_TRUE(same_bits(rstd, r.rstd, what + " rstd"));
      // grad_x += d into a 16-bit buffer, against the f32 slot adding into its widened copy.
      manual_seed(seed + 1000);
      const Tensor pending = randn(d.x.shape()).to(dtype).to(device);
      Tensor gx = pending.clone(), gx32 = widened(pending);
      be.layer_norm_backward(view(gx, flat), backend::View{}, none(dtype, device),
                             none(dtype, device), view(d.g, flat), view(d.x, flat), view(mean),
                             view(rstd), view(d.w, vec), true);
      be.layer_norm_backward(view(gx32, flat), backend::View{}, none(DType::f32, device),
                             none(DType::f32, device), view(widened(d.g), flat),
                             view(widened(d.x), flat), view(r.mean), view(r.rstd),
                             view(widened(d.w), vec), true);
      EXPECT_TRUE(same_bits(gx, gx32.to(dtype), what + " grad x accumulated"));
      // Only the column sums (grad_x not wanted).
      Tensor gw = empty({n}, o16), gb = empty({n}, o16);
      be.layer_norm_backward(none(dtype, device), backend::View{}, view(gw), view(gb),
                             view(d.g, flat), view(d.x, flat), view(mean), view(rstd),
                             view(d.w, vec), false);
      EXPECT_TRUE(same_bits(gw, r.gw.to(dtype), what + " grad w alone"));
      EXPECT_TRUE(same_bits(gb, r.gb.to(dtype), what + " grad b alone"));
    }
}

TEST(HalfKernels, LayerNormSlotsCpu) { check_layer_norm_slots(Device::cpu()); }
TEST(HalfKernels, LayerNormSlotsCuda) {
  SKIP_WITHOUT_CUDA();
  check_layer_norm_slots(Device::cuda());
}

TEST(HalfKernels, LayerNormCudaMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 300;
  for (const DType dtype : kHalves)
    for (const bool mixed : {false, true})
      for (const NormCase& c : kNormCases) {
        const DType pt = mixed ? DType::f32 : dtype;
        const std::string what = "layer_norm " + shape_str(c.shape) + " params " +
                                 std::string(dtype_name(pt)) + " cuda against cpu";
        const NormData d = norm_data(c, dtype, pt, Device::cpu(), seed++);
        struct Run {
          Tensor y, gx, gw, gb;
        };
        auto run = [&](Device dev) {
          Tensor x = d.x.detach().to(dev).requires_grad_();
          Tensor w = d.w.defined() ? d.w.detach().to(dev).requires_grad_() : Tensor();
          Tensor b = d.b.defined() ? d.b.detach().to(dev).requires_grad_() : Tensor();
          Tensor y = layer_norm(x, c.normalized, w, b);
          y.backward(d.g.to(dev));
          return Run{y, x.grad(), w.defined() ? w.grad() : Tensor(),
                     b.defined() ? b.grad() : Tensor()};
        };
        const Run cpu = run(Device::cpu()), gpu = run(Device::cuda());
        EXPECT_TRUE(within_ulp(gpu.y, cpu.y, what + " y"));
        EXPECT_TRUE(within_ulp(gpu.gx, cpu.gx, what + " grad x"));
        if (cpu.gw.defined()) {
          EXPECT_TRUE(within_ulp(gpu.gw, cpu.gw, what + " grad w"));
        }
        if (cpu.gb.defined()) {
          EXPECT_TRUE(within_ulp(gpu.gb, cpu.gb, what + " grad b"));
        }
      }
}

// Dtypes layer_norm does not take are refused before any kernel, naming the op, what came and
// what was expected.
TEST(HalfKernels, LayerNormRefusesParamDtypesItDoesNotTake) {
  using test_util::error_of;
  const Tensor x32 = randn({2, 4}), w32 = ones({4});
  std::string m = error_of([&] { layer_norm(x32, {4}, w32.to(DType::f64)); }, "f64 weight");
  EXPECT_NE(m.find("layer_norm: weight dtype f64 for input dtype f32 (expected f32 as the input; "
                   "convert with .to(DType))"),
            std::string::npos)
      << m;
  m = error_of([&] { layer_norm(x32.to(DType::f64), {4}, w32); }, "f32 weight of f64 input");
  EXPECT_NE(m.find("layer_norm: weight dtype f32 for input dtype f64 (expected f64 as the input; "
                   "convert with .to(DType))"),
            std::string::npos)
      << m;
  m = error_of([&] { layer_norm(x32.to(DType::bf16), {4}, w32.to(DType::f16)); }, "f16 weight");
  EXPECT_NE(
      m.find(
          "layer_norm: weight dtype f16 for input dtype bf16 (expected bf16 as the input, or f32)"),
      std::string::npos)
      << m;
  m = error_of([&] { layer_norm(x32.to(DType::f16), {4}, Tensor(), w32.to(DType::f64)); },
               "f64 bias");
  EXPECT_NE(
      m.find("layer_norm: bias dtype f64 for input dtype f16 (expected f16 as the input, or f32)"),
      std::string::npos)
      << m;
  m = error_of([&] { layer_norm(x32.to(DType::bf16), {4}, w32, w32.to(DType::bf16)); },
               "mixed weight and bias");
  EXPECT_NE(m.find("layer_norm: bias dtype bf16 differs from weight dtype f32 (expected one "
                   "dtype for both)"),
            std::string::npos)
      << m;
  m = error_of([&] { layer_norm(x32.to(DType::i32), {4}); }, "i32 input");
  EXPECT_NE(m.find("layer_norm: unsupported dtype i32"), std::string::npos) << m;
  // What it takes: the input's dtype, or f32 for a 16-bit input.
  EXPECT_EQ(layer_norm(x32.to(DType::bf16), {4}, w32, w32).dtype(), DType::bf16);
  EXPECT_EQ(layer_norm(x32.to(DType::f16), {4}, w32.to(DType::f16)).dtype(), DType::f16);
}

TEST(HalfKernels, CatalogueClaimsTheHalfDtypes) {
  for (const Op op : {Op::softmax, Op::log_softmax, Op::layer_norm, Op::embedding})
    for (const DType dtype : kHalves) {
      EXPECT_TRUE(supports(op, dtype, Device::cpu())) << op_name(op) << " " << dtype_name(dtype);
      EXPECT_EQ(supports(op, dtype, Device::cuda()), ember_test::cuda_built())
          << op_name(op) << " " << dtype_name(dtype);
    }
  const std::string m = test_util::error_of(
      [] {
        softmax(randn({2, 3}).to(DType::i32), 1);
      },
      "i32 softmax");
  EXPECT_NE(m.find("softmax: unsupported dtype i32"), std::string::npos) << m;
}

// ---- embedding (and index_add, its backward) ----
struct EmbeddingData {
  Tensor weight, index, g;
};

// Indices drawn from the first 10 of 50 rows: repeats, which the backward adds up.
EmbeddingData embedding_data(DType dtype, DType index_dtype, uint64_t seed) {
  manual_seed(seed);
  EmbeddingData d;
  d.weight = randn({50, 24}).to(dtype);
  d.index = randint(0, 10, {3, 7}).to(index_dtype);
  d.g = randn({3, 7, 24}).to(dtype);
  return d;
}

// The f32 embedding on the CPU: the output and the weight's gradient (an f32 index_add).
std::pair<Tensor, Tensor> f32_embedding(const EmbeddingData& d) {
  Tensor w = widened(d.weight).requires_grad_();
  Tensor out = embedding(w, d.index);
  out.backward(widened(d.g));
  return {out.detach(), w.grad()};
}

void check_embedding(Device device) {
  uint64_t seed = 500;
  for (const DType dtype : kHalves)
    for (const DType index_dtype : {DType::i64, DType::i32}) {
      const std::string what = "embedding " + std::string(dtype_name(dtype)) + " index " +
                               std::string(dtype_name(index_dtype)) + " on " + device.str();
      const EmbeddingData d = embedding_data(dtype, index_dtype, seed++);
      Tensor w = d.weight.to(device).requires_grad_();
      Tensor out = embedding(w, d.index.to(device));
      out.backward(d.g.to(device));
      const auto [out32, grad32] = f32_embedding(d);
      ASSERT_EQ(out.device(), device) << what;
      EXPECT_TRUE(same_bits(out, out32.to(dtype), what + " forward"));
      ASSERT_EQ(w.grad().dtype(), dtype) << what;
      EXPECT_TRUE(same_bits(w.grad(), grad32.to(dtype), what + " backward"));
      // index_add into a 16-bit tensor that is not zero: widened(old) + the rows, rounded once.
      const Tensor src = d.g.reshape({21, 24});
      const Tensor flat = d.index.reshape({21});
      const Tensor got = index_add(d.weight.to(device), 0, flat.to(device), src.to(device));
      const Tensor want = index_add(widened(d.weight), 0, flat, widened(src)).to(dtype);
      EXPECT_TRUE(same_bits(got, want, what + " index_add"));
    }
}

TEST(HalfKernels, EmbeddingCpuIsTheF32KernelRoundedOnce) { check_embedding(Device::cpu()); }

TEST(HalfKernels, EmbeddingCudaIsTheCpuF32SumRoundedOnce) {
  SKIP_WITHOUT_CUDA();
  check_embedding(Device::cuda());
  // The 16-bit sums do not depend on deterministic mode: the same bits either way.
  const EmbeddingData d = embedding_data(DType::bf16, DType::i64, 9);
  auto grad_of = [&] {
    Tensor w = d.weight.to(Device::cuda()).requires_grad_();
    embedding(w, d.index.to(Device::cuda())).backward(d.g.to(Device::cuda()));
    return w.grad();
  };
  const bool was = deterministic();
  set_deterministic(false);
  const Tensor loose = grad_of();
  set_deterministic(true);
  const Tensor strict = grad_of();
  set_deterministic(was);
  EXPECT_TRUE(same_bits(loose, strict, "embedding bf16 backward, deterministic mode"));
}

}  // namespace

// tests/test_cpu_kernels.cpp — the CPU backend's kernels against naive loops.
//
// White-box: calls the kernel table (backend::cpu_backend()) on raw buffers, plus the CPU
// thread pool, allocator size classes and Philox directly. Each test names the kernel and
// the shapes so a failure says which path (contiguous, broadcast, strided, parallel) broke.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/backend.hpp"
#include "backend/device_runtime.hpp"
#include "core/thread_pool.hpp"
#include "cpu/kernels.hpp"
#include "cpu/vec_math.hpp"
#include "ember/error.hpp"
#include "ember/runtime.hpp"
#include "kernels/random.hpp"

namespace ember {
namespace {

using backend::BinaryOp;
using backend::GemmArgs;
using backend::ReduceOp;
using backend::ScatterOp;
using backend::UnaryOp;
using backend::View;

const backend::Backend& cpu() { return backend::cpu_backend(); }
const backend::DeviceRuntime& cpu_runtime() { return backend::cpu_runtime(); }

template <typename T>
View view_of(std::vector<T>& data, const Shape& shape, const Shape& strides) {
  View v;
  v.data = data.data();
  v.dtype = dtype_of<T>();
  v.shape = shape;
  v.strides = strides;
  return v;
}
template <typename T>
View view_of(std::vector<T>& data, const Shape& shape) {
  return view_of(data, shape, contiguous_strides(shape));
}

// A view of `data` read as `dtype` (bool, f16 and bf16 buffers are stored as bytes/bits).
template <typename T>
View view_as(std::vector<T>& data, DType dtype, const Shape& shape) {
  View v;
  v.data = data.data();
  v.dtype = dtype;
  v.shape = shape;
  v.strides = contiguous_strides(shape);
  return v;
}

std::vector<float> ramp(int64_t n, float scale = 0.37f, float shift = -3.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = std::sin(static_cast<float>(i) * scale) * 4.0f + shift * 0.1f;
  return v;
}

// ---- binary / unary / where / fill / copy ----

TEST(CpuKernels, BinaryContiguousAndScalarBroadcast) {
  std::vector<float> a = ramp(37), b = ramp(37, 0.11f, 2.0f), out(37);
  cpu().binary(BinaryOp::add, view_of(out, {37}), view_of(a, {37}), view_of(b, {37}));
  for (int i = 0; i < 37; ++i) EXPECT_EQ(out[i], a[i] + b[i]) << "add at " << i;
  std::vector<float> s = {2.5f};
  cpu().binary(BinaryOp::sub, view_of(out, {37}), view_of(a, {37}), view_of(s, {37}, {0}));
  for (int i = 0; i < 37; ++i) EXPECT_EQ(out[i], a[i] - 2.5f) << "sub scalar b at " << i;
  cpu().binary(BinaryOp::div, view_of(out, {37}), view_of(s, {37}, {0}), view_of(b, {37}));
  for (int i = 0; i < 37; ++i) EXPECT_EQ(out[i], 2.5f / b[i]) << "div scalar a at " << i;
}

TEST(CpuKernels, BinaryRowColumnAndStridedBroadcast) {
  const int m = 5, n = 7;
  std::vector<double> a(m * n), row(n), col(m), out(m * n);
  for (int i = 0; i < m * n; ++i) a[i] = i * 0.5 - 3;
  for (int j = 0; j < n; ++j) row[j] = j + 1;
  for (int i = 0; i < m; ++i) col[i] = 10.0 * (i + 1);
  cpu().binary(BinaryOp::mul, view_of(out, {m, n}), view_of(a, {m, n}),
               view_of(row, {m, n}, {0, 1}));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) EXPECT_EQ(out[i * n + j], a[i * n + j] * row[j]);
  cpu().binary(BinaryOp::add, view_of(out, {m, n}), view_of(col, {m, n}, {1, 0}),
               view_of(a, {m, n}));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) EXPECT_EQ(out[i * n + j], col[i] + a[i * n + j]);
  // a transposed view ([n, m] with strides (1, n)) minus a row broadcast, into a [n, m] out
  std::vector<double> out_t(n * m), row_m(m);
  for (int i = 0; i < m; ++i) row_m[i] = i * 0.25;
  cpu().binary(BinaryOp::sub, view_of(out_t, {n, m}), view_of(a, {n, m}, {1, n}),
               view_of(row_m, {n, m}, {0, 1}));
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) EXPECT_EQ(out_t[j * m + i], a[i * n + j] - row_m[i]);
}

TEST(CpuKernels, BinaryLargeParallelMatchesNaive) {
  const int64_t m = 300, n = 1001;  // > grain: runs on the pool
  std::vector<float> a = ramp(m * n), b = ramp(n, 0.7f), out(m * n);
  cpu().binary(BinaryOp::maximum, view_of(out, {m, n}), view_of(a, {m, n}),
               view_of(b, {m, n}, {0, 1}));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(out[i * n + j], std::max(a[i * n + j], b[j]));
}

TEST(CpuKernels, InPlaceOutputs) {
  const int64_t n = 100003;  // parallel path
  std::vector<float> a = ramp(n), b = ramp(n, 0.3f), ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = std::tanh(a[i] * b[i]);
  cpu().binary(BinaryOp::mul, view_of(a, {n}), view_of(a, {n}), view_of(b, {n}));
  cpu().unary(UnaryOp::tanh, view_of(a, {n}), view_of(a, {n}), 0, 0);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], ref[i], 1e-6f) << "in-place at " << i;
  std::vector<float> x = ramp(300), y(300);
  cpu().softmax(view_of(y, {10, 30}), view_of(x, {10, 30}), 1, false);
  cpu().softmax(view_of(x, {10, 30}), view_of(x, {10, 30}), 1, false);
  EXPECT_EQ(x, y) << "softmax in place";
}

TEST(CpuKernels, BinaryComparisonsIntegersAndNaN) {
  std::vector<int32_t> a = {1, -7, 9, std::numeric_limits<int32_t>::min(), 5};
  std::vector<int32_t> b = {1, 2, -3, -1, 0};
  std::vector<int32_t> q(5);
  cpu().binary(BinaryOp::div, view_of(q, {5}), view_of(a, {5}), view_of(b, {5}));
  EXPECT_EQ(q, (std::vector<int32_t>{1, -3, -3, std::numeric_limits<int32_t>::min(), 0}));
  std::vector<uint8_t> lt(5);
  View out = view_of(lt, {5});
  out.dtype = DType::boolean;
  cpu().binary(BinaryOp::lt, out, view_of(a, {5}), view_of(b, {5}));
  EXPECT_EQ(lt, (std::vector<uint8_t>{0, 1, 0, 1, 0}));
  std::vector<uint8_t> x = {0, 1, 1}, y = {0, 0, 1}, ne(3);
  View bx = view_of(x, {3}), by = view_of(y, {3}), bo = view_of(ne, {3});
  bx.dtype = by.dtype = bo.dtype = DType::boolean;
  cpu().binary(BinaryOp::ne, bo, bx, by);
  EXPECT_EQ(ne, (std::vector<uint8_t>{0, 1, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> f = {nan, 1.0f, 2.0f}, g = {0.0f, nan, 1.0f}, mx(3), mn(3);
  cpu().binary(BinaryOp::maximum, view_of(mx, {3}), view_of(f, {3}), view_of(g, {3}));
  cpu().binary(BinaryOp::minimum, view_of(mn, {3}), view_of(f, {3}), view_of(g, {3}));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]) && mx[2] == 2.0f);
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]) && mn[2] == 1.0f);
  std::vector<float> p(3);
  std::vector<float> base = {2.0f, 9.0f, 0.5f}, expo = {3.0f, 0.5f, -1.0f};
  cpu().binary(BinaryOp::pow, view_of(p, {3}), view_of(base, {3}), view_of(expo, {3}));
  EXPECT_EQ(p, (std::vector<float>{8.0f, 3.0f, 2.0f}));
}

// Every unary kernel entry (the catalogue's and the kernel-only ones, so a new op needs no
// line here): the f32 kernel, vectorised, against the f64 kernel on the same inputs, over
// [-6, 6] with one scalar pair that suits every entry. Points outside an op's domain (NaN in
// f64: log, sqrt, asin and erfinv beyond ±1, a fractional power of a negative) are skipped. The
// values themselves are checked against PyTorch by the op driver (tests/test_catalogue.cpp).
TEST(CpuKernels, UnaryEveryOpF32AgreesWithF64) {
  const int n = 203;
  std::vector<double> x64(n), o64(n);
  std::vector<float> xf(n), of(n);
  for (int i = 0; i < n; ++i) {
    xf[i] = static_cast<float>(-6.0 + 12.0 * i / (n - 1));
    x64[i] = xf[i];
  }
  const double a = 1.5, b = 2.0;  // pow 1.5, affine 1.5x + 2, clamp [1.5, 2], softplus β, θ
  int checked_ops = 0;
  for (int op_i = 0; op_i < static_cast<int>(UnaryOp::logical_not); ++op_i) {
    const auto op = static_cast<UnaryOp>(op_i);
    cpu().unary(op, view_of(of, {n}), view_of(xf, {n}), a, b);
    cpu().unary(op, view_of(o64, {n}), view_of(x64, {n}), a, b);
    int points = 0;
    for (int i = 0; i < n; ++i) {
      if (std::isnan(o64[i])) continue;
      ++points;
      if (static_cast<double>(of[i]) == o64[i]) continue;  // exact, or the same infinity
      EXPECT_NEAR(of[i], o64[i], 2e-6 * std::max(1.0, std::fabs(o64[i])))
          << "unary op " << op_i << " x=" << xf[i];
    }
    EXPECT_GT(points, n / 8) << "unary op " << op_i << " is NaN almost everywhere";
    ++checked_ops;
  }
  EXPECT_EQ(checked_ops, static_cast<int>(UnaryOp::logical_not));
}

TEST(CpuKernels, UnaryEdgeCasesAndStrided) {
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.0f, -0.0f, -200.0f, 200.0f, nan, inf, -inf, 89.0f, -100.0f}, o(9);
  cpu().unary(UnaryOp::sign, view_of(o, {9}), view_of(x, {9}), 0, 0);
  EXPECT_EQ(o[0], 0.0f);
  EXPECT_EQ(o[1], 0.0f);
  cpu().unary(UnaryOp::sigmoid, view_of(o, {9}), view_of(x, {9}), 0, 0);
  EXPECT_EQ(o[2], 0.0f);
  EXPECT_EQ(o[3], 1.0f);
  EXPECT_TRUE(std::isnan(o[4]));
  cpu().unary(UnaryOp::exp, view_of(o, {9}), view_of(x, {9}), 0, 0);
  EXPECT_EQ(o[0], 1.0f);
  EXPECT_TRUE(std::isinf(o[3]) && std::isnan(o[4]) && std::isinf(o[5]) && o[6] == 0.0f);
  EXPECT_TRUE(std::isinf(o[7]));
  EXPECT_NEAR(o[8], std::exp(-100.0f), 1e-44f);  // subnormal result
  cpu().unary(UnaryOp::relu, view_of(o, {9}), view_of(x, {9}), 0, 0);
  EXPECT_TRUE(std::isnan(o[4]));
  // exp accuracy over the normal range, against libm
  std::vector<float> xs(4001), es(4001);
  for (int i = 0; i < 4001; ++i) xs[i] = -87.0f + 175.0f * i / 4000.0f;
  cpu().unary(UnaryOp::exp, view_of(es, {4001}), view_of(xs, {4001}), 0, 0);
  for (int i = 0; i < 4001; ++i)
    ASSERT_NEAR(es[i], std::exp(static_cast<double>(xs[i])),
                3e-7 * std::exp(static_cast<double>(xs[i])))
        << "exp(" << xs[i] << ")";
  // strided: the transpose of a [3, 4] into a contiguous [4, 3]
  std::vector<float> m = ramp(12), t(12);
  cpu().unary(UnaryOp::square, view_of(t, {4, 3}), view_of(m, {4, 3}, {1, 4}), 0, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(t[j * 3 + i], m[i * 4 + j] * m[i * 4 + j]);
  // logical_not: bool in, bool out
  std::vector<uint8_t> bin = {0, 1, 1, 0}, bout(4);
  View vi = view_of(bin, {4}), vo = view_of(bout, {4});
  vi.dtype = vo.dtype = DType::boolean;
  cpu().unary(UnaryOp::logical_not, vo, vi, 0, 0);
  EXPECT_EQ(bout, (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST(CpuKernels, VectorClonesMatchScalarMath) {
  // Whichever clone (AVX-512, AVX2, baseline) runs here must give the scalar code's bits.
  const int64_t n = 10007;
  std::vector<float> x(n), e(n), t(n), s(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -110.0f + 220.0f * static_cast<float>(i) / (n - 1);
  cpu().unary(UnaryOp::exp, view_of(e, {n}), view_of(x, {n}), 0, 0);
  cpu().unary(UnaryOp::tanh, view_of(t, {n}), view_of(x, {n}), 0, 0);
  cpu().unary(UnaryOp::sigmoid, view_of(s, {n}), view_of(x, {n}), 0, 0);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(e[i], cpu::exp_of(x[i])) << "exp(" << x[i] << ")";
    ASSERT_EQ(t[i], cpu::tanh_of(x[i])) << "tanh(" << x[i] << ")";
    ASSERT_EQ(s[i], 1.0f / (1.0f + cpu::exp_of(-x[i]))) << "sigmoid(" << x[i] << ")";
  }
  // dropout's vectorised mask equals the scalar Philox decision
  std::vector<float> ones(n, 1.0f), out(n), mask(n);
  cpu().dropout(view_of(out, {n}), view_of(mask, {n}), view_of(ones, {n}), 0.5, 3, 0);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(mask[i] != 0.0f, philox::dropout_keep(philox::block_for(3, i), 0.5)) << i;
}

TEST(CpuKernels, WhereFillAndCopyCasts) {
  std::vector<uint8_t> cond = {1, 0, 1};
  std::vector<int64_t> a = {1, 2, 3}, b = {10, 20, 30}, out(6);
  View c = view_of(cond, {2, 3}, {0, 1});  // cond [3] broadcast over 2 rows
  c.dtype = DType::boolean;
  cpu().where(view_of(out, {2, 3}), c, view_of(a, {2, 3}, {0, 1}), view_of(b, {2, 3}, {0, 0}));
  EXPECT_EQ(out, (std::vector<int64_t>{1, 10, 3, 1, 10, 3}));

  std::vector<double> d(10);
  cpu().fill(view_of(d, {5}, {2}), 2.5);  // every other element
  for (int i = 0; i < 10; ++i) EXPECT_EQ(d[i], i % 2 == 0 ? 2.5 : 0.0);
  std::vector<uint16_t> h(4);
  View hv = view_as(h, DType::f16, {4});
  cpu().fill(hv, 1.5);
  EXPECT_EQ(h[0], 0x3E00);  // 1.5 in binary16
  hv.dtype = DType::bf16;
  cpu().fill(hv, -2.0);
  EXPECT_EQ(h[3], 0xC000);  // -2 in bfloat16

  // f32 -> f16 -> f32 and f32 -> bf16 -> f32 round trips of representable values
  std::vector<float> src = {0.0f,         1.0f, -2.5f, 65504.0f, 6.103515625e-05f,
                            0.099975586f, 3.0f, -0.5f};
  std::vector<uint16_t> half(8);
  std::vector<float> back(8);
  View half_view = view_as(half, DType::f16, {8});
  cpu().copy(half_view, view_of(src, {8}));
  cpu().copy(view_of(back, {8}), half_view);
  EXPECT_EQ(back, src);
  half_view.dtype = DType::bf16;
  std::vector<float> bsrc = {0.0f, 1.0f, -2.5f, 3.0f, -0.5f, 256.0f, 1.0f / 64, 1e30f};
  for (float& v : bsrc) v = static_cast<float>(BFloat16(v));
  cpu().copy(half_view, view_of(bsrc, {8}));
  cpu().copy(view_of(back, {8}), half_view);
  EXPECT_EQ(back, bsrc);
  // f64 -> i32 truncates, -> bool is != 0, -> u8 wraps; bool -> f32 is 0/1
  std::vector<double> f = {-2.7, 0.0, 3.9, -1.0};
  std::vector<int32_t> i32(4);
  cpu().copy(view_of(i32, {4}), view_of(f, {4}));
  EXPECT_EQ(i32, (std::vector<int32_t>{-2, 0, 3, -1}));
  std::vector<uint8_t> bo(4), u8(4);
  View bv = view_of(bo, {4});
  bv.dtype = DType::boolean;
  cpu().copy(bv, view_of(f, {4}));
  EXPECT_EQ(bo, (std::vector<uint8_t>{1, 0, 1, 1}));
  cpu().copy(view_of(u8, {4}), view_of(f, {4}));
  EXPECT_EQ(u8[3], 255);
  std::vector<float> fb(4);
  cpu().copy(view_of(fb, {4}), bv);
  EXPECT_EQ(fb, (std::vector<float>{1, 0, 1, 1}));
  // strided copy with a cast: transpose of i64 [2, 3] into f64 [3, 2]
  std::vector<int64_t> mi = {1, 2, 3, 4, 5, 6};
  std::vector<double> mt(6);
  cpu().copy(view_of(mt, {3, 2}), view_of(mi, {3, 2}, {1, 3}));
  EXPECT_EQ(mt, (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST(CpuKernels, CopyTransposesInTiles) {
  // [3, 70, 45] read through a permutation whose last dim is strided (the tiled path)
  const int64_t a = 3, b = 45, c = 70;  // source is contiguous [a, c, b]
  std::vector<float> src = ramp(a * b * c, 0.017f);
  std::vector<double> dst(a * b * c);
  cpu().copy(view_of(dst, {a, b, c}), view_of(src, {a, b, c}, {c * b, 1, b}));
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k)
        ASSERT_EQ(dst[(i * b + j) * c + k], static_cast<double>(src[(i * c + k) * b + j]))
            << "copy transpose at " << i << "," << j << "," << k;
  // the leading dim transposed with the last: [c, b, a] from contiguous [a, b, c]
  std::vector<float> dst2(a * b * c);
  cpu().copy(view_of(dst2, {c, b, a}), view_of(src, {c, b, a}, {1, c, b * c}));
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < a; ++k)
        ASSERT_EQ(dst2[(i * b + j) * a + k], src[(k * b + j) * c + i]);
}

// ---- reductions ----

// Naive reduction of a contiguous [d0, d1, d2] tensor over the dims in `mask`.
std::vector<double> naive_reduce(const std::vector<float>& x, const int64_t (&shape)[3],
                                 const bool (&mask)[3], ReduceOp op) {
  int64_t oshape[3];
  for (int d = 0; d < 3; ++d) oshape[d] = mask[d] ? 1 : shape[d];
  std::vector<double> acc(static_cast<size_t>(oshape[0] * oshape[1] * oshape[2]));
  std::vector<int64_t> count(acc.size(), 0);
  const double init = op == ReduceOp::max    ? -INFINITY
                      : op == ReduceOp::min  ? INFINITY
                      : op == ReduceOp::prod ? 1.0
                                             : 0.0;
  std::fill(acc.begin(), acc.end(), init);
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      for (int64_t k = 0; k < shape[2]; ++k) {
        const int64_t o =
            ((mask[0] ? 0 : i) * oshape[1] + (mask[1] ? 0 : j)) * oshape[2] + (mask[2] ? 0 : k);
        const double v = x[(i * shape[1] + j) * shape[2] + k];
        if (op == ReduceOp::max)
          acc[o] = std::max(acc[o], v);
        else if (op == ReduceOp::min)
          acc[o] = std::min(acc[o], v);
        else if (op == ReduceOp::prod)
          acc[o] *= v;
        else
          acc[o] += v;
        ++count[o];
      }
  if (op == ReduceOp::mean)
    for (size_t o = 0; o < acc.size(); ++o) acc[o] /= count[o];
  return acc;
}

TEST(CpuKernels, ReduceEveryDimSet) {
  const int64_t shape[3] = {4, 5, 6};
  std::vector<float> x = ramp(120, 0.23f);
  for (float& v : x) v = 0.8f + 0.1f * v;  // keep prod well-conditioned
  for (int bits = 1; bits < 8; ++bits) {
    const bool mask[3] = {(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
    const Shape out_shape{mask[0] ? 1 : 4, mask[1] ? 1 : 5, mask[2] ? 1 : 6};
    for (ReduceOp op :
         {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) {
      std::vector<float> out(static_cast<size_t>(out_shape.numel()));
      cpu().reduce(op, view_of(out, out_shape), view_of(x, {4, 5, 6}));
      const std::vector<double> ref = naive_reduce(x, shape, mask, op);
      for (size_t o = 0; o < out.size(); ++o)
        EXPECT_NEAR(out[o], ref[o], 1e-5 * std::max(1.0, std::fabs(ref[o])))
            << "reduce op " << static_cast<int>(op) << " dims mask " << bits << " out " << o;
    }
  }
}

TEST(CpuKernels, ReduceLargeFullAndOuterAndStrided) {
  // full reduction, blocked in parallel; f32 accumulates in f64
  const int64_t n = 1 << 20;
  std::vector<float> x(n, 0.1f);
  std::vector<float> s(1);
  cpu().reduce(ReduceOp::sum, view_of(s, {1}), view_of(x, {n}));
  EXPECT_NEAR(s[0], n * static_cast<double>(0.1f), 1e-3);
  // sum over dim 0 of [rows, cols] (the outer driver) against naive
  const int64_t rows = 3000, cols = 130;
  std::vector<float> m = ramp(rows * cols, 0.013f), colsum(cols);
  cpu().reduce(ReduceOp::sum, view_of(colsum, {1, cols}), view_of(m, {rows, cols}));
  for (int64_t j = 0; j < cols; ++j) {
    double ref = 0;
    for (int64_t i = 0; i < rows; ++i) ref += m[i * cols + j];
    EXPECT_NEAR(colsum[j], ref, 1e-4 * std::max(1.0, std::fabs(ref))) << "column " << j;
  }
  // max over dim 1 of a transposed view
  std::vector<float> rowmax(cols);
  cpu().reduce(ReduceOp::max, view_of(rowmax, {cols, 1}), view_of(m, {cols, rows}, {1, cols}));
  for (int64_t j = 0; j < cols; ++j) {
    float ref = -INFINITY;
    for (int64_t i = 0; i < rows; ++i) ref = std::max(ref, m[i * cols + j]);
    EXPECT_EQ(rowmax[j], ref);
  }
  // a few columns over many rows (rows split into blocks, merged in order): sum, argmax
  // with a tie across blocks, and variance
  const int64_t tall = 200000;
  std::vector<double> t(tall * 3);
  for (int64_t i = 0; i < tall * 3; ++i) t[i] = std::cos(0.001 * i);
  t[150000 * 3 + 1] = 5.0;
  t[190000 * 3 + 1] = 5.0;
  std::vector<double> tsum(3), tvar(3);
  std::vector<int64_t> targ(3);
  cpu().reduce(ReduceOp::sum, view_of(tsum, {1, 3}), view_of(t, {tall, 3}));
  cpu().reduce(ReduceOp::argmax, view_of(targ, {1, 3}), view_of(t, {tall, 3}));
  cpu().variance(view_of(tvar, {1, 3}), view_of(t, {tall, 3}), 1);
  for (int64_t j = 0; j < 3; ++j) {
    double ref = 0, sq = 0;
    for (int64_t i = 0; i < tall; ++i) ref += t[i * 3 + j];
    for (int64_t i = 0; i < tall; ++i)
      sq += (t[i * 3 + j] - ref / tall) * (t[i * 3 + j] - ref / tall);
    EXPECT_NEAR(tsum[j], ref, 1e-8 * std::max(1.0, std::fabs(ref))) << "tall sum column " << j;
    EXPECT_NEAR(tvar[j], sq / (tall - 1), 1e-10) << "tall variance column " << j;
  }
  EXPECT_EQ(targ[1], 150000);
  // integer sums keep their dtype; NaN wins max
  std::vector<int64_t> iv = {1, 2, 3, 4, 5, 6}, is(2);
  cpu().reduce(ReduceOp::sum, view_of(is, {2, 1}), view_of(iv, {2, 3}));
  EXPECT_EQ(is, (std::vector<int64_t>{6, 15}));
  std::vector<float> withnan = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f}, mx(1);
  cpu().reduce(ReduceOp::max, view_of(mx, {1}), view_of(withnan, {3}));
  EXPECT_TRUE(std::isnan(mx[0]));
}

TEST(CpuKernels, ReduceEmptyAndScalar) {
  std::vector<float> none(1), sums(5, -1.0f), means(5, -1.0f);
  cpu().reduce(ReduceOp::sum, view_of(sums, {1, 5}), view_of(none, {0, 5}));
  cpu().reduce(ReduceOp::mean, view_of(means, {5, 1}), view_of(none, {5, 0}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sums[i], 0.0f) << "sum over an empty dim";
    EXPECT_TRUE(std::isnan(means[i])) << "mean over an empty dim";
  }
  std::vector<double> scalar = {2.5}, out(1);
  cpu().reduce(ReduceOp::sum, view_of(out, {}), view_of(scalar, {}));
  EXPECT_EQ(out[0], 2.5);
  cpu().reduce(ReduceOp::prod, view_of(out, {1, 1}), view_of(scalar, {1, 1}));
  EXPECT_EQ(out[0], 2.5);
}

TEST(CpuKernels, ArgmaxArgminFirstOnTies) {
  std::vector<float> x = {1,  5, 5, 2,  //
                          7,  7, 0, 0,  //
                          -1, 3, 3, -1};
  std::vector<int64_t> amax(3), amin(3), cmax(4);
  cpu().reduce(ReduceOp::argmax, view_of(amax, {3, 1}), view_of(x, {3, 4}));
  cpu().reduce(ReduceOp::argmin, view_of(amin, {3, 1}), view_of(x, {3, 4}));
  cpu().reduce(ReduceOp::argmax, view_of(cmax, {1, 4}), view_of(x, {3, 4}));
  EXPECT_EQ(amax, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(amin, (std::vector<int64_t>{0, 2, 0}));
  EXPECT_EQ(cmax, (std::vector<int64_t>{1, 1, 0, 0}));
  std::vector<float> nan_row = {1, std::numeric_limits<float>::quiet_NaN(), 9};
  std::vector<int64_t> an(1);
  cpu().reduce(ReduceOp::argmax, view_of(an, {1}), view_of(nan_row, {3}));
  EXPECT_EQ(an[0], 1);
  // a long row (the blocked path): the maximum appears twice, the first must win
  std::vector<float> big(100000, 0.0f);
  big[70000] = 4.0f;
  big[90000] = 4.0f;
  big[30000] = -4.0f;
  std::vector<int64_t> ab(1);
  cpu().reduce(ReduceOp::argmax, view_of(ab, {1}), view_of(big, {100000}));
  EXPECT_EQ(ab[0], 70000);
  cpu().reduce(ReduceOp::argmin, view_of(ab, {1}), view_of(big, {100000}));
  EXPECT_EQ(ab[0], 30000);
}

TEST(CpuKernels, VarianceWithCorrection) {
  std::vector<double> x = {1, 2, 3, 4, 10, 20, 30, 40};
  std::vector<double> v0(2), v1(2), vc(4);
  cpu().variance(view_of(v0, {2, 1}), view_of(x, {2, 4}), 0);
  cpu().variance(view_of(v1, {2, 1}), view_of(x, {2, 4}), 1);
  cpu().variance(view_of(vc, {1, 4}), view_of(x, {2, 4}), 1);
  EXPECT_NEAR(v0[0], 1.25, 1e-12);
  EXPECT_NEAR(v1[1], 500.0 / 3.0, 1e-10);
  EXPECT_NEAR(vc[0], 40.5, 1e-12);
  // large mean, small spread: the two-pass algorithm keeps its accuracy
  std::vector<float> y(1000);
  for (int i = 0; i < 1000; ++i) y[i] = 10000.0f + (i % 2 ? 1.0f : -1.0f);
  std::vector<float> vy(1);
  cpu().variance(view_of(vy, {1}), view_of(y, {1000}), 0);
  EXPECT_NEAR(vy[0], 1.0f, 1e-5f);
}

// ---- softmax ----

TEST(CpuKernels, SoftmaxEveryDimAndBackward) {
  const Shape shape{3, 70, 5};
  std::vector<float> x = ramp(shape.numel(), 0.91f);
  x[7] = 80.0f;  // large logits stay finite
  for (int dim = 0; dim < 3; ++dim) {
    std::vector<float> y(x.size()), ly(x.size());
    cpu().softmax(view_of(y, shape), view_of(x, shape), dim, false);
    cpu().softmax(view_of(ly, shape), view_of(x, shape), dim, true);
    const Shape strides = contiguous_strides(shape);
    for (int64_t base = 0; base < shape.numel(); ++base) {
      if ((base / strides[dim]) % shape[dim] != 0) continue;  // first element of each slice
      double total = 0;
      for (int64_t k = 0; k < shape[dim]; ++k) {
        const int64_t at = base + k * strides[dim];
        ASSERT_TRUE(std::isfinite(y[at]));
        total += y[at];
        EXPECT_NEAR(ly[at], std::log(std::max(y[at], 1e-38f)), 1e-4 + 1e-5 * std::fabs(ly[at]))
            << "log_softmax dim " << dim << " at " << at;
      }
      EXPECT_NEAR(total, 1.0, 1e-5) << "softmax dim " << dim << " slice " << base;
    }
    // backward against the formulas, computed naively
    std::vector<float> g = ramp(shape.numel(), 0.31f), gi(x.size()), lgi(x.size());
    cpu().softmax_backward(view_of(gi, shape), view_of(g, shape), view_of(y, shape), dim, false);
    cpu().softmax_backward(view_of(lgi, shape), view_of(g, shape), view_of(ly, shape), dim, true);
    for (int64_t base = 0; base < shape.numel(); ++base) {
      if ((base / strides[dim]) % shape[dim] != 0) continue;
      double dot = 0, sum = 0;
      for (int64_t k = 0; k < shape[dim]; ++k) {
        const int64_t at = base + k * strides[dim];
        dot += static_cast<double>(g[at]) * y[at];
        sum += g[at];
      }
      for (int64_t k = 0; k < shape[dim]; ++k) {
        const int64_t at = base + k * strides[dim];
        EXPECT_NEAR(gi[at], y[at] * (g[at] - dot), 1e-5);
        EXPECT_NEAR(lgi[at], g[at] - std::exp(static_cast<double>(ly[at])) * sum, 1e-4);
      }
    }
  }
}

// ---- gemm ----

TEST(CpuKernels, GemmEveryTransposeBatchAndBias) {
  const int64_t m = 7, n = 5, k = 9, batch = 3;
  for (int dt = 0; dt < 2; ++dt) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      std::vector<double> a(batch * m * k), b(k * n), c(batch * m * n, 1.0), bias(n);
      for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.3 * i);
      for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.7 * i);
      for (int64_t j = 0; j < n; ++j) bias[j] = j * 0.5;
      std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(c.begin(), c.end()),
          biasf(bias.begin(), bias.end());
      GemmArgs g;
      g.dtype = dt ? DType::f64 : DType::f32;
      g.trans_a = ta;
      g.trans_b = tb;
      g.m = m, g.n = n, g.k = k, g.batch = batch;
      g.lda = ta ? m : k;
      g.ldb = tb ? k : n;
      g.ldc = n;
      g.batch_stride_a = m * k;
      g.batch_stride_b = 0;  // one B broadcast over the batch
      g.batch_stride_c = m * n;
      g.alpha = 0.5;
      g.beta = 2.0;
      g.a = dt ? static_cast<void*>(a.data()) : af.data();
      g.b = dt ? static_cast<void*>(b.data()) : bf.data();
      g.c = dt ? static_cast<void*>(c.data()) : cf.data();
      g.bias = dt ? static_cast<void*>(bias.data()) : biasf.data();
      cpu().gemm(g);
      for (int64_t p = 0; p < batch; ++p)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double ref = 0;
            for (int64_t q = 0; q < k; ++q) {
              const double av = a[p * m * k + (ta ? q * m + i : i * k + q)];
              const double bv = b[tb ? j * k + q : q * n + j];
              ref += av * bv;
            }
            ref = 0.5 * ref + 2.0 * 1.0 + bias[j];
            const double got = dt ? c[(p * m + i) * n + j] : cf[(p * m + i) * n + j];
            EXPECT_NEAR(got, ref, dt ? 1e-12 : 1e-5)
                << "gemm trans_a " << ta << " trans_b " << tb << " f64 " << dt << " at " << p << ","
                << i << "," << j;
          }
    }
  }
  // k == 0: C = beta · C (+ bias)
  std::vector<float> c0 = {1, 2, 3, 4};
  GemmArgs z;
  z.m = 2, z.n = 2, z.k = 0, z.ldc = 2, z.beta = 0.0;
  z.c = c0.data();
  cpu().gemm(z);
  EXPECT_EQ(c0, (std::vector<float>{0, 0, 0, 0}));
}

// GemmArgs::bias_grad: the sums of op(A)'s rows over k, beside the product (linear's bias
// gradient beside dW = gᵀ·x), for A stored either way.
TEST(CpuKernels, GemmBiasGradSumsTheRowsOfOpA) {
  const int64_t m = 6, n = 4, k = 11;
  for (int ta = 0; ta < 2; ++ta) {
    std::vector<float> a(m * k), b(k * n, 0.25f), c(m * n), sums(m, -1.0f);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(std::sin(0.37 * i));
    GemmArgs g;
    g.trans_a = ta;
    g.m = m, g.n = n, g.k = k;
    g.lda = ta ? m : k;
    g.ldb = n;
    g.ldc = n;
    g.a = a.data();
    g.b = b.data();
    g.c = c.data();
    g.bias_grad = sums.data();
    cpu().gemm(g);
    for (int64_t i = 0; i < m; ++i) {
      double ref = 0;
      for (int64_t q = 0; q < k; ++q) ref += a[ta ? q * m + i : i * k + q];
      EXPECT_NEAR(sums[i], ref, 1e-5) << "row " << i << " trans_a " << ta;
      EXPECT_NEAR(c[i * n], 0.25 * ref, 1e-5) << "product row " << i << " trans_a " << ta;
    }
  }
}

// ---- indexing ----

TEST(CpuKernels, IndexSelectAndIndexAdd) {
  std::vector<float> in(12);
  std::iota(in.begin(), in.end(), 0.0f);  // [3, 4]
  std::vector<int64_t> idx = {2, 0, 2};
  std::vector<float> rows(12), cols(9);
  ASSERT_TRUE(cpu().index_select(view_of(rows, {3, 4}), view_of(in, {3, 4}), 0, view_of(idx, {3})));
  EXPECT_EQ(rows, (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  ASSERT_TRUE(cpu().index_select(view_of(cols, {3, 3}), view_of(in, {3, 4}), 1, view_of(idx, {3})));
  EXPECT_EQ(cols, (std::vector<float>{2, 0, 2, 6, 4, 6, 10, 8, 10}));
  std::vector<int32_t> idx32 = {1, 3};
  std::vector<int64_t> in64 = {10, 11, 12, 13}, out64(2);
  ASSERT_TRUE(cpu().index_select(view_of(out64, {2}), view_of(in64, {4}), 0, view_of(idx32, {2})));
  EXPECT_EQ(out64, (std::vector<int64_t>{11, 13}));
  std::vector<int64_t> bad = {0, 3}, neg = {-1, 0};
  std::vector<float> sink(8, -5.0f);
  EXPECT_FALSE(
      cpu().index_select(view_of(sink, {2, 4}), view_of(in, {3, 4}), 0, view_of(bad, {2})));
  EXPECT_FALSE(
      cpu().index_select(view_of(sink, {2, 4}), view_of(in, {3, 4}), 0, view_of(neg, {2})));
  EXPECT_EQ(sink[0], -5.0f) << "a refused index_select must not write";

  // index_add with a duplicate index accumulates
  std::vector<double> acc(6, 1.0), src = {1, 2, 3, 4, 5, 6};  // acc [3, 2], src [3, 2]
  std::vector<int64_t> dup = {2, 0, 2};
  ASSERT_TRUE(cpu().index_add(view_of(acc, {3, 2}), 0, view_of(dup, {3}), view_of(src, {3, 2})));
  EXPECT_EQ(acc, (std::vector<double>{4, 5, 1, 1, 7, 9}));
  EXPECT_FALSE(cpu().index_add(view_of(acc, {3, 2}), 0, view_of(bad, {2}), view_of(src, {2, 2})));
}

TEST(CpuKernels, GatherAndScatterAdd) {
  std::vector<float> in = {1, 2, 3, 4, 5, 6};  // [2, 3]
  std::vector<int64_t> idx = {2, 0, 1, 1};     // [2, 2] along dim 1
  std::vector<float> out(4);
  ASSERT_TRUE(cpu().gather(view_of(out, {2, 2}), view_of(in, {2, 3}), 1, view_of(idx, {2, 2})));
  EXPECT_EQ(out, (std::vector<float>{3, 1, 5, 5}));
  std::vector<int32_t> idx0 = {1, 0, 1};  // [1, 3] along dim 0
  std::vector<float> out0(3);
  ASSERT_TRUE(cpu().gather(view_of(out0, {1, 3}), view_of(in, {2, 3}), 0, view_of(idx0, {1, 3})));
  EXPECT_EQ(out0, (std::vector<float>{4, 2, 6}));
  std::vector<int64_t> oob = {0, 3, 0, 0};
  EXPECT_FALSE(cpu().gather(view_of(out, {2, 2}), view_of(in, {2, 3}), 1, view_of(oob, {2, 2})));

  std::vector<float> acc(6, 0.0f), src = {1, 2, 10, 20};  // src [2, 2]
  ASSERT_TRUE(cpu().scatter(ScatterOp::sum, view_of(acc, {2, 3}), 1, view_of(idx, {2, 2}),
                            view_of(src, {2, 2})));
  EXPECT_EQ(acc, (std::vector<float>{2, 0, 1, 0, 30, 0}));
  std::vector<float> acc0(6, 0.0f), src0 = {1, 2, 3};
  ASSERT_TRUE(cpu().scatter(ScatterOp::sum, view_of(acc0, {2, 3}), 0, view_of(idx0, {1, 3}),
                            view_of(src0, {1, 3})));
  EXPECT_EQ(acc0, (std::vector<float>{0, 2, 0, 1, 0, 3}));
  EXPECT_FALSE(cpu().scatter(ScatterOp::sum, view_of(acc, {2, 3}), 1, view_of(oob, {2, 2}),
                             view_of(src, {2, 2})));
  // many duplicates on a large tensor (parallel over lines): every add lands
  const int64_t rows = 2000, width = 50;
  std::vector<double> big(rows * 4, 0.0), ones(rows * width, 1.0);
  std::vector<int64_t> spread(rows * width);
  for (int64_t i = 0; i < rows * width; ++i) spread[i] = (i % width) % 4;
  ASSERT_TRUE(cpu().scatter(ScatterOp::sum, view_of(big, {rows, 4}), 1,
                            view_of(spread, {rows, width}), view_of(ones, {rows, width})));
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(big[r * 4 + 0], 13.0);
    ASSERT_EQ(big[r * 4 + 3], 12.0);
  }
}

// ---- random ----

TEST(CpuKernels, PhiloxKnownAnswersAndStreams) {
  // Random123's known-answer vectors for philox4x32-10.
  const philox::Block z = philox::philox4x32_10({{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(z.x[0], 0x6627e8d5u);
  EXPECT_EQ(z.x[3], 0x9b00dbd8u);
  const philox::Block p = philox::philox4x32_10(
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(p.x[0], 0xd16cfe09u);
  EXPECT_EQ(p.x[1], 0x94fdccebu);
  EXPECT_EQ(p.x[2], 0x5001e420u);
  EXPECT_EQ(p.x[3], 0x24126ea1u);

  const int64_t n = 10000, shift = 123;
  std::vector<float> u0(n), u0b(n), uk(n);
  cpu().uniform(view_of(u0, {n}), 42, 0, -1.0, 3.0);
  cpu().uniform(view_of(u0b, {n}), 42, 0, -1.0, 3.0);
  cpu().uniform(view_of(uk, {n}), 42, shift, -1.0, 3.0);
  EXPECT_EQ(u0, u0b) << "same seed and offset must repeat";
  for (int64_t i = 0; i + shift < n; ++i)
    ASSERT_EQ(uk[i], u0[i + shift]) << "offset shifts the stream";
  double mean = 0;
  for (float v : u0) {
    ASSERT_GE(v, -1.0f);
    ASSERT_LT(v, 3.0f);
    mean += v;
  }
  EXPECT_NEAR(mean / n, 1.0, 0.05);
  std::vector<float> other(n);
  cpu().uniform(view_of(other, {n}), 43, 0, -1.0, 3.0);
  EXPECT_NE(other, u0);

  std::vector<double> g(n), gk(n);
  cpu().normal(view_of(g, {n}), 7, 0, 2.0, 0.5);
  cpu().normal(view_of(gk, {n}), 7, shift, 2.0, 0.5);
  for (int64_t i = 0; i + shift < n; ++i) ASSERT_EQ(gk[i], g[i + shift]);
  double s = 0, ss = 0;
  for (double v : g) s += v, ss += v * v;
  const double gm = s / n, gv = ss / n - gm * gm;
  EXPECT_NEAR(gm, 2.0, 0.03);
  EXPECT_NEAR(std::sqrt(gv), 0.5, 0.02);
  // element i uses its own block: the value at i is the documented transform
  EXPECT_EQ(static_cast<double>(g[5]), 2.0 + 0.5 * philox::normal_f64(philox::block_for(7, 5)));

  // a strided output is filled by logical position, not by memory order
  std::vector<float> t(6), flat(6);
  cpu().uniform(view_of(t, {2, 3}, {1, 2}), 9, 0, 0.0, 1.0);
  cpu().uniform(view_of(flat, {6}), 9, 0, 0.0, 1.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(t[i + 2 * j], flat[i * 3 + j]);
}

TEST(CpuKernels, DropoutMaskAndScale) {
  const int64_t n = 50000;
  std::vector<float> x(n, 2.0f), out(n), mask(n);
  const double prob = 0.3;
  cpu().dropout(view_of(out, {n}), view_of(mask, {n}), view_of(x, {n}), prob, 11, 5);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = philox::uniform_f32(philox::block_for(11, 5 + i).x[0]) >= prob;
    ASSERT_EQ(mask[i], keep ? static_cast<float>(1.0 / 0.7) : 0.0f) << "mask at " << i;
    ASSERT_EQ(out[i], 2.0f * mask[i]);
    kept += keep;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.01);
}

// ---- allocator ----

TEST(CpuKernels, AllocatorCachesAndCounts) {
  EXPECT_EQ(cpu::size_class(0), 64u);
  EXPECT_EQ(cpu::size_class(64), 64u);
  EXPECT_EQ(cpu::size_class(65), 128u);
  EXPECT_EQ(cpu::size_class(1000), 1024u);
  EXPECT_EQ(cpu::size_class(4097), 4608u);  // 4096 + 4096/8
  for (size_t bytes : {100u, 5000u, 123457u, 10000000u}) {
    const size_t c = cpu::size_class(bytes);
    EXPECT_GE(c, bytes);
    EXPECT_LE(static_cast<double>(c - bytes), 0.125 * static_cast<double>(bytes) + 64);
    EXPECT_EQ(c % 64, 0u);
  }
  const int dev = 0;
  MemoryStats s0;
  cpu_runtime().memory_stats(dev, &s0);
  size_t block = 0;
  void* p = cpu_runtime().allocate(dev, 100000, Pool::Pass, &block);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(block, cpu::size_class(100000));
  std::memset(p, 1, 100000);
  MemoryStats s1;
  cpu_runtime().memory_stats(dev, &s1);
  EXPECT_EQ(s1.pass_in_use - s0.pass_in_use, static_cast<int64_t>(block));
  EXPECT_EQ(s1.alloc_count - s0.alloc_count, 1);
  EXPECT_GE(s1.pass_peak, s1.pass_in_use);
  cpu_runtime().deallocate(dev, p, block, Pool::Pass);
  MemoryStats s2;
  cpu_runtime().memory_stats(dev, &s2);
  EXPECT_EQ(s2.pass_in_use, s0.pass_in_use);
  EXPECT_EQ(s2.pass_reserved, s1.pass_reserved) << "a freed block stays cached";
  EXPECT_GT(s2.fragmentation, 0.0);
  size_t block2 = 0;
  void* q = cpu_runtime().allocate(dev, 99999, Pool::Pass, &block2);  // same size class
  EXPECT_EQ(q, p);
  MemoryStats s3;
  cpu_runtime().memory_stats(dev, &s3);
  EXPECT_EQ(s3.cache_hits - s2.cache_hits, 1);
  EXPECT_EQ(s3.system_allocs, s2.system_allocs);
  // persistent blocks are counted apart from pass blocks
  size_t pblock = 0;
  void* r = cpu_runtime().allocate(dev, 0, Pool::Persistent, &pblock);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(pblock, 64u);
  MemoryStats s4;
  cpu_runtime().memory_stats(dev, &s4);
  EXPECT_EQ(s4.persistent_bytes - s3.persistent_bytes, 64);
  EXPECT_EQ(s4.pass_in_use, s3.pass_in_use);
  cpu_runtime().deallocate(dev, r, pblock, Pool::Persistent);
  cpu_runtime().deallocate(dev, q, block2, Pool::Pass);
  cpu_runtime().reset_peak(dev);
  cpu_runtime().empty_cache(dev);
  MemoryStats s5;
  cpu_runtime().memory_stats(dev, &s5);
  EXPECT_EQ(s5.pass_peak, s5.pass_in_use);
  EXPECT_EQ(s5.pass_reserved, s5.pass_in_use) << "empty_cache frees every cached block";
  EXPECT_EQ(s5.persistent_reserved, s5.persistent_bytes);
  EXPECT_EQ(s5.host_to_device_bytes, 0);
  EXPECT_EQ(s5.device_to_host_bytes, 0);
  // an impossible request throws OutOfMemory naming the size, and the allocator still works
  try {
    cpu_runtime().allocate(dev, size_t{1} << 62, Pool::Pass, &block);
    ADD_FAILURE() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(size_t{1} << 62)), std::string::npos)
        << e.what();
  }
  void* after = cpu_runtime().allocate(dev, 128, Pool::Pass, &block);
  EXPECT_NE(after, nullptr);
  cpu_runtime().deallocate(dev, after, block, Pool::Pass);
}

// ---- thread pool ----

TEST(CpuKernels, ParallelForCoversEveryIndexOnce) {
  const int saved = get_num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    EXPECT_EQ(get_num_threads(), threads);
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{100000}, int64_t{1000003}}) {
      for (int64_t grain : {int64_t{1}, int64_t{1000}, int64_t{1} << 20}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        core::parallel_for(n, grain, [&](int64_t b, int64_t e) {
          ASSERT_LE(0, b);
          ASSERT_LT(b, e);
          ASSERT_LE(e, n);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
              << "n " << n << " grain " << grain << " i " << i;
      }
    }
    // nested parallel_for runs inline and still covers everything
    std::atomic<int64_t> total{0};
    core::parallel_for(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        core::parallel_for(1000, 10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    });
    EXPECT_EQ(total.load(), 64000);
  }
  // an exception in a body reaches the caller and the pool keeps working
  set_num_threads(2);
  EXPECT_THROW(core::parallel_for(100000, 10,
                                  [](int64_t b, int64_t) {
                                    if (b > 50000) throw Error("boom");
                                  }),
               Error);
  std::atomic<int64_t> count{0};
  core::parallel_for(100000, 10, [&](int64_t b, int64_t e) { count += e - b; });
  EXPECT_EQ(count.load(), 100000);
  EXPECT_THROW(set_num_threads(0), Error);
  // a forked child has no pool threads: it must build its own instead of hanging
  // (ThreadSanitizer cannot start threads after a multi-threaded fork: skipped there)
#if !defined(__SANITIZE_THREAD__)
  const pid_t child = fork();
  if (child == 0) {
    // OpenBLAS set to one thread first: the new pool's creation hook (src/cpu/threads.cpp)
    // must bring it to the pool's size.
    using GetThreads = int (*)();
    using SetThreads = void (*)(int);
    const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (get && set) set(1);
    std::atomic<int64_t> seen{0};
    core::parallel_for(1000000, 1000, [&](int64_t b, int64_t e) { seen += e - b; });
    if (seen.load() != 1000000) _exit(1);
    _exit(get && get() != core::num_threads() ? 2 : 0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "parallel_for after fork (status 2: OpenBLAS's thread count not the new pool's)";
#endif
  set_num_threads(saved);
}

}  // namespace
}  // namespace ember

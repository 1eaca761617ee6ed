// tests/test_cpu_half_gemm.cpp — the CPU's f16/bf16 GEMMs (the gemm slot, src/cpu/linalg.cpp)
// through oneDNN's matmul (Note [16-bit GEMMs through oneDNN] in src/cpu/gemm_onednn.cpp) and
// through the widening path beside it.
//
//   reference  every product against an f64 computation on the same 16-bit operands: within
//              one ulp of the output dtype plus f32 accumulation error (kAccum per unit of
//              Σ|a·b|): transposes, padded leading dimensions, batches (strided, either
//              operand broadcast, both), bias, relu and gelu_tanh epilogues, alpha, beta, an
//              f32 C with the bias gradient (autocast's weight gradient), ReLU masks, sizes
//              1, 7, 129 and empty dims (0: nothing written; k = 0: beta·C + bias).
//   paths      the same products with oneDNN switched off (set_gemm_onednn_enabled) agree
//              with the oneDNN results within the same tolerance; bf16 must have gone
//              through oneDNN (gemm_onednn_last() names the implementation); f16 goes where
//              oneDNN takes it, and the test says where (oneDNN 2.6 has no CPU f16 matmul
//              without AVX512-FP16 kernels: it declines and the widening path runs).
//   bits       the same inputs give the same bits on every call (primitives are cached per
//              thread count; the work split is fixed).
//   ops        matmul with broadcast batch dims and linear with bias in bf16, against f64.
//   f32        products large enough for oneDNN (Note [f32 GEMMs: OpenBLAS or oneDNN]) at one
//              thread: through oneDNN and through OpenBLAS, each against f64; the size rule.
// Without libdnnl the oneDNN-specific assertions skip with the loader's reason; the
// reference checks still run (on the widening path).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cpu/gemm_onednn.hpp"
#include "cpu/kernels.hpp"
#include "ember/ember.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using backend::GemmArgs;
using backend::GemmEpilogue;

constexpr double kAccum = 1e-5;  // f32 accumulation error per unit of Σ|a·b| (k ≤ 1031)

// Whether oneDNN loads here ("" when it does, else the loader's reason).
std::string onednn_missing() {
  const std::string s = conv_library_status();
  return s.rfind("oneDNN ", 0) == 0 && s.size() > 7 && std::isdigit(s[7]) ? "" : s;
}

#define SKIP_WITHOUT_ONEDNN_GEMM()                                                    \
  do {                                                                                \
    if (const std::string why = onednn_missing(); !why.empty())                       \
      GTEST_SKIP() << "no oneDNN here, the widening path alone was checked: " << why; \
  } while (0)

// oneDNN switched off for a scope.
struct OnednnOff {
  bool was = cpu::set_gemm_onednn_enabled(false);
  ~OnednnOff() { cpu::set_gemm_onednn_enabled(was); }
};

template <typename T>
double ulp_of();  // one unit in the last place at 1.0
template <>
double ulp_of<BFloat16>() {
  return 1.0 / 128;
}
template <>
double ulp_of<Half>() {
  return 1.0 / 1024;
}
template <>
double ulp_of<float>() {
  return 1.0 / (1 << 23);
}

// One GEMM: the arguments' shapes and options; operands are made to fit.
struct Spec {
  int64_t m = 1, n = 1, k = 1, batch = 1;
  bool ta = false, tb = false;
  int64_t pad = 0;                                // added to every leading dimension
  bool broadcast_a = false, broadcast_b = false;  // batch stride 0
  bool bias = false, c_f32 = false, bias_grad = false, relu_mask = false;
  GemmEpilogue act = GemmEpilogue::none;
  double alpha = 1.0, beta = 0.0;
  std::string name() const {
    std::string s =
        "m" + std::to_string(m) + " n" + std::to_string(n) + " k" + std::to_string(k) + " batch" +
        std::to_string(batch) + (ta ? " ta" : "") + (tb ? " tb" : "") + (pad ? " pad" : "") +
        (broadcast_a ? " bcast_a" : "") + (broadcast_b ? " bcast_b" : "") + (bias ? " bias" : "") +
        (c_f32 ? " c_f32" : "") + (bias_grad ? " bias_grad" : "") + (relu_mask ? " relu_mask" : "");
    if (act == GemmEpilogue::relu) s += " relu";
    if (act == GemmEpilogue::gelu_tanh) s += " gelu_tanh";
    if (alpha != 1.0) s += " alpha" + std::to_string(alpha);
    if (beta != 0.0) s += " beta" + std::to_string(beta);
    return s;
  }
};

// Operands in T (their values exactly representable), C's initial values, and the outputs.
template <typename T>
struct Product {
  Spec s;
  int64_t lda = 0, ldb = 0, ldc = 0, sa = 0, sb = 0, sc = 0;
  std::vector<T> a, b, bias;
  std::vector<T> c;          // C when not c_f32
  std::vector<float> c32;    // C when c_f32
  std::vector<float> bgrad;  // bias_grad (f32 with c_f32, else in T)
  std::vector<T> bgrad_t;
  std::vector<uint8_t> mask;

  explicit Product(const Spec& spec, uint64_t seed) : s(spec) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
    const int64_t b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
    lda = a_cols + s.pad;
    ldb = b_cols + s.pad;
    ldc = s.n + s.pad;
    sa = s.broadcast_a ? 0 : a_rows * lda;
    sb = s.broadcast_b ? 0 : b_rows * ldb;
    sc = s.m * ldc;
    a.resize(static_cast<size_t>(std::max<int64_t>(sa, a_rows * lda) * s.batch));
    b.resize(static_cast<size_t>(std::max<int64_t>(sb, b_rows * ldb) * s.batch));
    for (T& v : a) v = T(u(rng));
    for (T& v : b) v = T(u(rng));
    if (s.bias) {
      bias.resize(static_cast<size_t>(s.n));
      for (T& v : bias) v = T(u(rng));
    }
    const size_t c_size = static_cast<size_t>(sc * s.batch);
    if (s.c_f32) {
      c32.resize(c_size);
      for (float& v : c32) v = u(rng);
    } else {
      c.resize(c_size);
      for (T& v : c) v = T(u(rng));
    }
    if (s.bias_grad) {
      bgrad.assign(static_cast<size_t>(s.m), -7.0f);
      bgrad_t.assign(static_cast<size_t>(s.m), T(-7.0f));
    }
    if (s.relu_mask) mask.assign(static_cast<size_t>(backend::relu_mask_bytes(s.m, s.n)), 0xAB);
  }

  GemmArgs args() {
    GemmArgs g;
    g.dtype = dtype_of<T>();
    g.trans_a = s.ta;
    g.trans_b = s.tb;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.batch = s.batch;
    g.a = a.data();
    g.lda = lda;
    g.batch_stride_a = sa;
    g.b = b.data();
    g.ldb = ldb;
    g.batch_stride_b = sb;
    g.c = s.c_f32 ? static_cast<void*>(c32.data()) : static_cast<void*>(c.data());
    g.ldc = ldc;
    g.batch_stride_c = sc;
    g.c_f32 = s.c_f32;
    g.alpha = s.alpha;
    g.beta = s.beta;
    g.bias = s.bias ? bias.data() : nullptr;
    g.epilogue = s.act;
    if (s.bias_grad)
      g.bias_grad = s.c_f32 ? static_cast<void*>(bgrad.data()) : static_cast<void*>(bgrad_t.data());
    if (s.relu_mask) g.relu_mask_out = mask.data();
    return g;
  }

  double c_at(int64_t i) const {
    return s.c_f32 ? c32[static_cast<size_t>(i)] : static_cast<float>(c[static_cast<size_t>(i)]);
  }
  double a_at(int64_t p, int64_t i, int64_t j) const {  // op(A)[i, j] of product p
    const int64_t off = p * sa + (s.ta ? j * lda + i : i * lda + j);
    return static_cast<float>(a[static_cast<size_t>(off)]);
  }
  double b_at(int64_t p, int64_t i, int64_t j) const {  // op(B)[i, j]
    const int64_t off = p * sb + (s.tb ? j * ldb + i : i * ldb + j);
    return static_cast<float>(b[static_cast<size_t>(off)]);
  }
};

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// Runs the GEMM on `r` (which holds the initial C) and checks every output against f64.
template <typename T>
void run_and_check(Product<T>& r, const std::string& path) {
  const Product<T> before = r;
  cpu::gemm(r.args());
  const Spec& s = r.s;
  const double out_ulp = s.c_f32 ? 1.0 / (1 << 23) : ulp_of<T>();
  int bad = 0;
  for (int64_t p = 0; p < s.batch; ++p)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0, mag = 0;
        for (int64_t q = 0; q < s.k; ++q) {
          const double t = r.a_at(p, i, q) * r.b_at(p, q, j);
          acc += t;
          mag += std::fabs(t);
        }
        const int64_t ci = p * r.sc + i * r.ldc + j;
        double want = s.alpha * acc + s.beta * before.c_at(ci);
        if (s.bias) want += static_cast<float>(r.bias[static_cast<size_t>(j)]);
        if (s.act == GemmEpilogue::relu) want = want < 0 ? 0 : want;
        if (s.act == GemmEpilogue::gelu_tanh) want = gelu_tanh(want);
        const double got = r.c_at(ci);
        const double tol = out_ulp * std::fabs(want) + kAccum * (std::fabs(s.alpha) * mag + 1.0);
        if (!(std::fabs(got - want) <= tol) && bad++ < 5)
          ADD_FAILURE() << path << " " << s.name() << ": C[" << p << ", " << i << ", " << j
                        << "] = " << got << ", want " << want << " (tolerance " << tol << ")";
      }
  // Untouched: the padding of C.
  for (int64_t p = 0; p < s.batch; ++p)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = s.n; j < r.ldc; ++j) {
        const int64_t ci = p * r.sc + i * r.ldc + j;
        if (r.c_at(ci) != before.c_at(ci) && bad++ < 5)
          ADD_FAILURE() << path << " " << s.name() << ": padding C[" << p << ", " << i << ", " << j
                        << "] was written";
      }
  if (s.bias_grad) {
    for (int64_t i = 0; i < s.m; ++i) {
      double want = 0;
      for (int64_t q = 0; q < s.k; ++q) want += r.a_at(0, i, q);
      const double got = s.c_f32 ? r.bgrad[static_cast<size_t>(i)]
                                 : static_cast<float>(r.bgrad_t[static_cast<size_t>(i)]);
      const double tol = (s.c_f32 ? 1e-6 : ulp_of<T>()) * std::fabs(want) + kAccum * s.k;
      if (!(std::fabs(got - want) <= tol) && bad++ < 5)
        ADD_FAILURE() << path << " " << s.name() << ": bias_grad[" << i << "] = " << got
                      << ", want " << want;
    }
  }
  if (s.relu_mask) {
    const int64_t ld = backend::relu_mask_ld(s.n);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        const int64_t bit = i * ld + j;
        const bool set = (r.mask[static_cast<size_t>(bit / 8)] >> (bit % 8)) & 1;
        if (set != (r.c_at(i * r.ldc + j) > 0) && bad++ < 5)
          ADD_FAILURE() << path << " " << s.name() << ": ReLU mask bit (" << i << ", " << j
                        << ") is " << set << " for C = " << r.c_at(i * r.ldc + j);
      }
  }
}

std::vector<Spec> gemm_specs() {
  std::vector<Spec> v;
  for (int64_t m : {1, 7, 129})
    for (int64_t n : {1, 7, 129})
      for (int64_t k : {1, 7, 129})
        for (int t = 0; t < 4; ++t) {
          Spec s;
          s.m = m, s.n = n, s.k = k, s.ta = t & 1, s.tb = t & 2;
          v.push_back(s);
        }
  auto with = [&](auto f) {
    Spec s;
    s.m = 33, s.n = 65, s.k = 129;
    f(s);
    v.push_back(s);
  };
  with([](Spec& s) { s.pad = 3; });
  with([](Spec& s) { s.pad = 5, s.ta = s.tb = true; });
  with([](Spec& s) { s.bias = true; });
  with([](Spec& s) { s.bias = true, s.act = GemmEpilogue::relu; });
  with([](Spec& s) { s.bias = true, s.act = GemmEpilogue::relu, s.relu_mask = true; });
  with([](Spec& s) { s.bias = true, s.act = GemmEpilogue::gelu_tanh; });
  with([](Spec& s) { s.act = GemmEpilogue::gelu_tanh, s.tb = true; });
  with([](Spec& s) { s.alpha = 0.125; });
  with([](Spec& s) { s.beta = 1.0; });
  with([](Spec& s) { s.alpha = 0.5, s.beta = 0.75, s.ta = true; });
  with([](Spec& s) { s.bias = true, s.beta = 1.0, s.act = GemmEpilogue::relu; });
  with([](Spec& s) { s.bias_grad = true; });
  with([](Spec& s) { s.bias_grad = true, s.ta = true; });
  with([](Spec& s) { s.c_f32 = true; });
  with([](Spec& s) { s.c_f32 = true, s.beta = 1.0, s.ta = true; });
  with([](Spec& s) { s.c_f32 = true, s.bias_grad = true, s.ta = true; });
  with([](Spec& s) { s.c_f32 = true, s.bias_grad = true; });
  with([](Spec& s) { s.batch = 5; });
  with([](Spec& s) { s.batch = 5, s.ta = true, s.pad = 2; });
  with([](Spec& s) { s.batch = 5, s.broadcast_a = true, s.tb = true; });
  with([](Spec& s) { s.batch = 5, s.broadcast_b = true; });
  with([](Spec& s) { s.batch = 3, s.broadcast_a = s.broadcast_b = true; });
  with([](Spec& s) { s.batch = 4, s.bias = true, s.act = GemmEpilogue::gelu_tanh; });
  with([](Spec& s) { s.k = 0, s.beta = 0.5, s.bias = true; });  // C = beta·C + bias
  with([](Spec& s) { s.k = 0, s.c_f32 = true, s.bias_grad = true, s.beta = 1.0; });
  with([](Spec& s) { s.m = 257, s.n = 257, s.k = 1031, s.tb = true, s.bias = true; });
  return v;
}

template <typename T>
void check_all(const char* dtype) {
  uint64_t seed = 1;
  for (const Spec& s : gemm_specs()) {
    Product<T> on(s, seed), off(s, seed);
    ++seed;
    run_and_check(on, std::string(dtype) + " default path");
    const std::string how = cpu::gemm_onednn_last();
    {
      OnednnOff guard;
      run_and_check(off, std::string(dtype) + " oneDNN off");
      EXPECT_EQ(cpu::gemm_onednn_last(), "switched off") << s.name();
    }
    // Both paths, element by element, within two ulps of the output plus accumulation.
    const double u = s.c_f32 ? 1.0 / (1 << 22) : 2 * ulp_of<T>();
    for (size_t i = 0; i < (s.c_f32 ? on.c32.size() : on.c.size()); ++i) {
      const double x = on.c_at(static_cast<int64_t>(i)), y = off.c_at(static_cast<int64_t>(i));
      ASSERT_LE(std::fabs(x - y), u * std::fabs(y) + kAccum * (s.k + 1))
          << dtype << " " << s.name() << ": oneDNN (" << how << ") " << x << " against " << y
          << " with oneDNN off, element " << i;
    }
  }
}

// Sets ember's thread count for a scope.
struct ThreadCount {
  int was = get_num_threads();
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(was); }
};

// f32 products of 128·160·256 (5.2M) multiply-adds: oneDNN's at one thread, OpenBLAS's with
// oneDNN off, both against f64 (transposes, padding, bias, ReLU, alpha and beta, batches).
TEST(CpuHalfGemm, F32LargeProductsThroughOneDnnAndOpenBlas) {
  const ThreadCount one(1);
  std::vector<Spec> specs;
  auto with = [&](auto f) {
    Spec s;
    s.m = 128, s.n = 160, s.k = 256;
    f(s);
    specs.push_back(s);
  };
  with([](Spec&) {});
  with([](Spec& s) { s.tb = true, s.bias = true, s.act = GemmEpilogue::relu; });
  with([](Spec& s) { s.ta = true, s.pad = 3; });
  with([](Spec& s) { s.ta = s.tb = true, s.alpha = 0.5, s.beta = 0.25; });
  with([](Spec& s) { s.bias = true, s.act = GemmEpilogue::gelu_tanh; });
  with([](Spec& s) { s.batch = 3, s.broadcast_b = true, s.bias = true; });
  with([](Spec& s) { s.bias_grad = true, s.ta = true; });
  with([](Spec& s) { s.act = GemmEpilogue::relu, s.bias = true, s.relu_mask = true; });
  uint64_t seed = 500;
  for (const Spec& s : specs) {
    Product<float> on(s, seed), off(s, seed);
    ++seed;
    run_and_check(on, "f32 default path");
    if (onednn_missing().empty())
      EXPECT_EQ(cpu::gemm_onednn_last().rfind("oneDNN ", 0), 0u)
          << s.name() << ": " << cpu::gemm_onednn_last();
    OnednnOff guard;
    run_and_check(off, "f32 oneDNN off");
  }
}

// The size rule: one thread from 2^22 multiply-adds, more threads from 2^28; batches count.
TEST(CpuHalfGemm, F32SizeRule) {
  GemmArgs g;
  g.m = 128, g.n = 128, g.k = 256;  // 2^22
  {
    const ThreadCount one(1);
    EXPECT_TRUE(cpu::f32_gemm_prefers_onednn(g));
    g.k = 255;
    EXPECT_FALSE(cpu::f32_gemm_prefers_onednn(g));
    g.batch = 2;
    EXPECT_TRUE(cpu::f32_gemm_prefers_onednn(g));
  }
  const ThreadCount two(2);
  g.batch = 1, g.k = 256;
  EXPECT_FALSE(cpu::f32_gemm_prefers_onednn(g));
  g.m = 2048, g.n = 512;  // 2^28
  EXPECT_TRUE(cpu::f32_gemm_prefers_onednn(g));
}

TEST(CpuHalfGemm, Bf16AgainstF64BothPaths) { check_all<BFloat16>("bf16"); }

TEST(CpuHalfGemm, F16AgainstF64BothPaths) { check_all<Half>("f16"); }

TEST(CpuHalfGemm, Bf16GoesThroughOneDnn) {
  SKIP_WITHOUT_ONEDNN_GEMM();
  for (const Spec& s : gemm_specs()) {
    if (s.k == 0) continue;  // beta·C + bias: nothing for oneDNN to multiply
    Product<BFloat16> r(s, 99);
    cpu::gemm(r.args());
    EXPECT_EQ(cpu::gemm_onednn_last().rfind("oneDNN ", 0), 0u)
        << s.name() << ": " << cpu::gemm_onednn_last();
    EXPECT_EQ(cpu::gemm_onednn_last().find("ref"), std::string::npos) << cpu::gemm_onednn_last();
  }
}

// f16 runs where oneDNN takes it; either way the reason is named (the values are checked
// above). oneDNN 2.6 declines f16 matmuls on CPUs where it has no f16 kernels.
TEST(CpuHalfGemm, F16PathIsNamed) {
  SKIP_WITHOUT_ONEDNN_GEMM();
  Spec s;
  s.m = 7, s.n = 7, s.k = 7;
  Product<Half> r(s, 5);
  cpu::gemm(r.args());
  const std::string how = cpu::gemm_onednn_last();
  const bool ran = how.rfind("oneDNN ", 0) == 0 && how.rfind("oneDNN declined: ", 0) != 0;
  EXPECT_TRUE(ran || how.rfind("oneDNN declined: ", 0) == 0) << how;
  std::printf("f16 GEMM path here: %s\n", how.c_str());
}

TEST(CpuHalfGemm, EmptyDimsWriteNothing) {
  for (int which = 0; which < 3; ++which) {
    Spec s;
    s.m = which == 0 ? 0 : 7, s.n = which == 1 ? 0 : 7, s.k = 7;
    s.batch = which == 2 ? 0 : 1;
    Product<BFloat16> r(s, 3);
    r.c.assign(49, BFloat16(3.0f));
    GemmArgs g = r.args();
    cpu::gemm(g);
    for (const BFloat16& v : r.c) ASSERT_EQ(static_cast<float>(v), 3.0f) << s.name();
  }
}

TEST(CpuHalfGemm, SameBitsEveryCall) {
  SKIP_WITHOUT_ONEDNN_GEMM();
  Spec s;
  s.m = 1031, s.n = 257, s.k = 1031, s.tb = true, s.bias = true, s.act = GemmEpilogue::gelu_tanh;
  Product<BFloat16> first(s, 11);
  cpu::gemm(first.args());
  ASSERT_EQ(cpu::gemm_onednn_last().rfind("oneDNN ", 0), 0u) << cpu::gemm_onednn_last();
  for (int rep = 0; rep < 3; ++rep) {
    Product<BFloat16> again(s, 11);
    cpu::gemm(again.args());
    ASSERT_EQ(std::memcmp(first.c.data(), again.c.data(), first.c.size() * 2), 0)
        << "call " << rep + 2 << " gave other bits";
  }
  Spec w;  // a weight gradient: f32 C with its bias gradient, k the long side
  w.m = 257, w.n = 129, w.k = 2048, w.ta = true, w.c_f32 = true, w.bias_grad = true;
  Product<BFloat16> g1(w, 12), g2(w, 12);
  cpu::gemm(g1.args());
  cpu::gemm(g2.args());
  ASSERT_EQ(std::memcmp(g1.c32.data(), g2.c32.data(), g1.c32.size() * 4), 0);
  ASSERT_EQ(std::memcmp(g1.bgrad.data(), g2.bgrad.data(), g1.bgrad.size() * 4), 0);
}

// ---- through the ops ----

Tensor rand16(const Shape& s, uint64_t seed) {
  manual_seed(seed);
  return randn(s).to(DType::bf16);
}

void expect_close_f64(const Tensor& got, const Tensor& want, double k, const char* what) {
  const std::vector<double> g = got.to(DType::f64).contiguous().to_vector<double>();
  const std::vector<double> w = want.contiguous().to_vector<double>();
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::fabs(g[i] - w[i]), std::fabs(w[i]) / 128 + 4 * kAccum * k)
        << what << ": element " << i << " is " << g[i] << ", want " << w[i];
}

TEST(CpuHalfGemm, MatmulBroadcastAndLinearBf16) {
  const Tensor a = rand16({2, 3, 7, 129}, 21), b = rand16({129, 7}, 22);
  const Tensor c = matmul(a, b);
  EXPECT_EQ(c.dtype(), DType::bf16);
  expect_close_f64(c, matmul(a.to(DType::f64), b.to(DType::f64)), 129 * 3,
                   "matmul [2,3,7,129]·[129,7]");
  const Tensor p = rand16({3, 1, 6, 7}, 23), q = rand16({4, 7, 129}, 24);
  expect_close_f64(matmul(p, q), matmul(p.to(DType::f64), q.to(DType::f64)), 7 * 3,
                   "matmul [3,1,6,7]·[4,7,129]");
  const Tensor x = rand16({9, 129}, 25), w = rand16({7, 129}, 26), bias = rand16({7}, 27);
  expect_close_f64(linear(x, w, bias),
                   linear(x.to(DType::f64), w.to(DType::f64), bias.to(DType::f64)), 129 * 3,
                   "linear [9,129]·[7,129]ᵀ + bias");
  expect_close_f64(linear(x, w, bias, Activation::relu),
                   relu(linear(x.to(DType::f64), w.to(DType::f64), bias.to(DType::f64))), 129 * 3,
                   "linear + relu");
}

}  // namespace

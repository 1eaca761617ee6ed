// tests/test_layer_norm_fused.cpp — layer_norm's one-pass kernels (Note [Fused layer norm] in
// src/ops/norm.cpp, Note [Layer norm on CUDA] in src/cuda/norm.cu): y, mean, rstd and the
// backward's grad_x, grad_weight and grad_bias (column sums formed by the backward kernel
// itself) against an f64 reference written as plain loops, on the CPU and on CUDA; the slot's
// accumulate flag (grad_x += ...) and its "only the column sums" form; the residual pattern
// x + f(layer_norm(x)), where the node adds its gradient into x's pending one, next to cases
// where that gradient must not be written in place; gradcheck of the residual pattern; CUDA
// against the CPU, and the CUDA column sums bitwise equal from run to run.
//
// Tolerances, |got - want| <= tol·(|want| + max|want|) per value: f64 1e-12; f32 1e-5 (f32
// rounding of x̂ and of the row terms; the row sums are f64 in every kernel, the column sums
// f64 on the CPU and f32 per block then f64 across blocks on CUDA). CUDA against the CPU at f32:
// 1e-5 too. CUDA cases skip without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::doubles;

constexpr double kEps = 1e-5;

enum class AffineParts { none, both, weight_only, bias_only };

const char* affine_name(AffineParts a) {
  switch (a) {
    case AffineParts::none: return "no affine";
    case AffineParts::both: return "weight and bias";
    case AffineParts::weight_only: return "weight only";
    case AffineParts::bias_only: return "bias only";
  }
  return "?";
}
bool has_weight(AffineParts a) { return a == AffineParts::both || a == AffineParts::weight_only; }
bool has_bias(AffineParts a) { return a == AffineParts::both || a == AffineParts::bias_only; }

struct Shape2 {
  int64_t rows, n;
};

// Register rows at f32 (768: 6 packs a lane; 1024: 8 packs and 64 KB of shared memory on
// CUDA; 250: unvectorised, 8 a lane), n = 1 and n = 5 (odd), 3000 (the general path), rows not a
// multiple of a block's 8 warps.
const std::vector<Shape2> kShapes = {{64, 768}, {7, 1}, {9, 5}, {5, 3000}, {20, 1024}, {37, 250}};

std::vector<double> normal(int64_t count, uint64_t seed, double mean, double stddev) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(mean, stddev);
  std::vector<double> v(static_cast<size_t>(count));
  for (double& e : v) e = dist(gen);
  return v;
}

struct Data {
  Shape2 s;
  std::vector<double> x, w, b, g;  // x, g [rows, n]; w, b [n]
};

Data make_data(Shape2 s, uint64_t seed) {
  Data d{s, {}, {}, {}, {}};
  d.x = normal(s.rows * s.n, seed, 3.0, 2.0);  // an offset mean: the centring matters
  d.w = normal(s.n, seed + 1, 1.0, 0.5);
  d.b = normal(s.n, seed + 2, 0.0, 0.5);
  d.g = normal(s.rows * s.n, seed + 3, 0.0, 1.0);
  return d;
}

// ---- the f64 reference, plain loops ----
struct Ref {
  std::vector<double> y, mean, rstd, dx, dw, db;
};

Ref reference(const Data& d, AffineParts affine, const std::vector<double>& g) {
  const int64_t rows = d.s.rows, n = d.s.n;
  const bool hw = has_weight(affine), hb = has_bias(affine);
  Ref r;
  r.y.resize(rows * n);
  r.dx.resize(rows * n);
  r.mean.resize(rows);
  r.rstd.resize(rows);
  r.dw.assign(n, 0.0);
  r.db.assign(n, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const double* x = d.x.data() + i * n;
    const double* gr = g.data() + i * n;
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += x[j];
    const double m = s / n;
    double v = 0;
    for (int64_t j = 0; j < n; ++j) v += (x[j] - m) * (x[j] - m);
    const double rs = 1.0 / std::sqrt(v / n + kEps);
    r.mean[i] = m;
    r.rstd[i] = rs;
    double s1 = 0, s2 = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double h = (x[j] - m) * rs, w = hw ? d.w[j] : 1.0;
      r.y[i * n + j] = h * w + (hb ? d.b[j] : 0.0);
      s1 += gr[j] * w;
      s2 += gr[j] * w * h;
      r.dw[j] += gr[j] * h;
      r.db[j] += gr[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      const double h = (x[j] - m) * rs, w = hw ? d.w[j] : 1.0;
      r.dx[i * n + j] = rs * (gr[j] * w - s1 / n - h * s2 / n);
    }
  }
  return r;
}

double norm_tolerance(DType dtype) { return dtype == DType::f64 ? 1e-12 : 1e-5; }

// Every value within tol·(|want| + max|want|); the message names the case and the first
// mismatches.
void expect_close(const std::string& what, const std::vector<double>& got,
                  const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  int bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    if (!(err <= tol * (std::abs(want[i]) + scale))) {
      if (bad < 5) first << "\n  [" << i << "] got " << got[i] << ", want " << want[i];
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " values off (tol " << tol
                    << ", scale " << scale << ")" << first.str();
}

std::vector<double> plus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

std::vector<double> scaled(const std::vector<double>& a, double k) {
  std::vector<double> c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] * k;
  return c;
}

Tensor make(const std::vector<double>& v, const Shape& shape, DType dtype, Device device,
            bool grad = false) {
  Tensor t = from_vector(v, shape).to(dtype).to(device).detach();
  if (grad) t.requires_grad_();
  return t;
}

std::string name_of(const std::string& what, Shape2 s, AffineParts a, DType dtype, Device device) {
  std::ostringstream o;
  o << what << " [" << s.rows << ", " << s.n << "] " << affine_name(a) << " " << dtype_name(dtype)
    << " " << device.str();
  return o.str();
}

// ---- the op: y = layer_norm(x), y.backward(g) ----
struct Got {
  std::vector<double> y, dx, dw, db;
};

Got run_op(const Data& d, AffineParts affine, DType dtype, Device device) {
  const Shape shape{d.s.rows, d.s.n};
  Tensor x = make(d.x, shape, dtype, device, true);
  Tensor w = has_weight(affine) ? make(d.w, {d.s.n}, dtype, device, true) : Tensor();
  Tensor b = has_bias(affine) ? make(d.b, {d.s.n}, dtype, device, true) : Tensor();
  Tensor y = layer_norm(x, {d.s.n}, w, b, kEps);
  y.backward(make(d.g, shape, dtype, device));
  Got got;
  got.y = doubles(y);
  got.dx = doubles(x.grad());
  if (w.defined()) got.dw = doubles(w.grad());
  if (b.defined()) got.db = doubles(b.grad());
  return got;
}

void check_op_against_reference(Device device) {
  uint64_t seed = 100;
  for (const Shape2 s : kShapes)
    for (const DType dtype : {DType::f32, DType::f64})
      for (const AffineParts affine :
           {AffineParts::none, AffineParts::both, AffineParts::weight_only}) {
        const Data d = make_data(s, seed++);
        const Ref r = reference(d, affine, d.g);
        const Got got = run_op(d, affine, dtype, device);
        const double tol = norm_tolerance(dtype);
        expect_close(name_of("layer_norm y", s, affine, dtype, device), got.y, r.y, tol);
        expect_close(name_of("layer_norm dx", s, affine, dtype, device), got.dx, r.dx, tol);
        if (has_weight(affine))
          expect_close(name_of("layer_norm dweight", s, affine, dtype, device), got.dw, r.dw, tol);
        if (has_bias(affine))
          expect_close(name_of("layer_norm dbias", s, affine, dtype, device), got.db, r.db, tol);
      }
}

// ---- the slots, called directly: mean and rstd, accumulate, the column sums alone ----
backend::View strided_view(const Tensor& t) {
  return {t.data_ptr(), t.dtype(), t.device().index, t.shape(), t.strides()};
}
backend::View no_view(DType dtype, Device device) {
  return {nullptr, dtype, device.index, Shape{0}, Shape{1}};
}

void check_slots_against_reference(Device device) {
  const backend::Backend& be = backend::backend_for(device);
  uint64_t seed = 300;
  for (const Shape2 s : kShapes)
    for (const DType dtype : {DType::f32, DType::f64})
      for (const AffineParts affine :
           {AffineParts::both, AffineParts::bias_only, AffineParts::none}) {
        const Data d = make_data(s, seed++);
        const Ref r = reference(d, affine, d.g);
        const double tol = norm_tolerance(dtype);
        const Shape shape{s.rows, s.n};
        const Tensor x = make(d.x, shape, dtype, device), g = make(d.g, shape, dtype, device);
        const Tensor w = has_weight(affine) ? make(d.w, {s.n}, dtype, device) : Tensor();
        const Tensor b = has_bias(affine) ? make(d.b, {s.n}, dtype, device) : Tensor();
        const backend::View wv = w.defined() ? strided_view(w) : no_view(dtype, device);
        const backend::View bv = b.defined() ? strided_view(b) : no_view(dtype, device);
        const TensorOptions o{.dtype = dtype, .device = device};
        const Tensor y = empty(shape, o), mean = empty({s.rows}, o), rstd = empty({s.rows}, o);
        be.layer_norm_forward(strided_view(y), backend::View{}, strided_view(mean),
                              strided_view(rstd), strided_view(x), wv, bv, kEps);
        expect_close(name_of("slot y", s, affine, dtype, device), doubles(y), r.y, tol);
        expect_close(name_of("slot mean", s, affine, dtype, device), doubles(mean), r.mean, tol);
        expect_close(name_of("slot rstd", s, affine, dtype, device), doubles(rstd), r.rstd, tol);

        // accumulate: grad_x holds a gradient already and gets the kernel's added.
        const std::vector<double> prior = normal(s.rows * s.n, seed + 1000, 0.0, 1.0);
        const Tensor gx = make(prior, shape, dtype, device);
        const Tensor gw = empty({s.n}, o), gb = empty({s.n}, o);
        be.layer_norm_backward(strided_view(gx), backend::View{}, strided_view(gw),
                               strided_view(gb), strided_view(g), strided_view(x),
                               strided_view(mean), strided_view(rstd), wv, true);
        expect_close(name_of("slot dx accumulated", s, affine, dtype, device), doubles(gx),
                     plus(prior, r.dx), tol);
        expect_close(name_of("slot dweight", s, affine, dtype, device), doubles(gw), r.dw, tol);
        expect_close(name_of("slot dbias", s, affine, dtype, device), doubles(gb), r.db, tol);

        // overwrite, no column sums.
        const Tensor gx2 = make(prior, shape, dtype, device);
        be.layer_norm_backward(strided_view(gx2), backend::View{}, no_view(dtype, device),
                               no_view(dtype, device), strided_view(g), strided_view(x),
                               strided_view(mean), strided_view(rstd), wv, false);
        expect_close(name_of("slot dx", s, affine, dtype, device), doubles(gx2), r.dx, tol);

        // only the column sums (grad_x not wanted), only one of them.
        const Tensor gw2 = empty({s.n}, o);
        be.layer_norm_backward(no_view(dtype, device), backend::View{}, strided_view(gw2),
                               no_view(dtype, device), strided_view(g), strided_view(x),
                               strided_view(mean), strided_view(rstd), wv, false);
        expect_close(name_of("slot dweight alone", s, affine, dtype, device), doubles(gw2), r.dw,
                     tol);

        // grad_x in grad_y's buffer (the slot allows it), accumulating.
        const Tensor shared = make(d.g, shape, dtype, device);
        const Tensor gb2 = empty({s.n}, o);
        be.layer_norm_backward(strided_view(shared), backend::View{}, no_view(dtype, device),
                               strided_view(gb2), strided_view(shared), strided_view(x),
                               strided_view(mean), strided_view(rstd), wv, true);
        expect_close(name_of("slot dx into grad_y's buffer", s, affine, dtype, device),
                     doubles(shared), plus(d.g, r.dx), tol);
        expect_close(name_of("slot dbias, grad_y's buffer", s, affine, dtype, device), doubles(gb2),
                     r.db, tol);
      }
}

// An input whose data starts 4 bytes past an allocation (no 16-byte packs on CUDA).
void check_unaligned(Device device) {
  const Shape2 s{12, 768};
  const Data d = make_data(s, 500);
  const Ref r = reference(d, AffineParts::both, d.g);
  std::vector<double> padded(1, 0.0);
  padded.insert(padded.end(), d.x.begin(), d.x.end());
  Tensor base = make(padded, {s.rows * s.n + 1}, DType::f32, device, true);
  Tensor x = slice(base, 0, 1, s.rows * s.n + 1).reshape({s.rows, s.n});
  Tensor w = make(d.w, {s.n}, DType::f32, device, true);
  Tensor b = make(d.b, {s.n}, DType::f32, device, true);
  Tensor y = layer_norm(x, {s.n}, w, b, kEps);
  y.backward(make(d.g, {s.rows, s.n}, DType::f32, device));
  const std::string what = "unaligned " + device.str();
  expect_close(what + " y", doubles(y), r.y, 1e-5);
  std::vector<double> dx = doubles(base.grad());
  EXPECT_EQ(dx[0], 0.0) << what;
  dx.erase(dx.begin());
  expect_close(what + " dx", dx, r.dx, 1e-5);
  expect_close(what + " dweight", doubles(w.grad()), r.dw, 1e-5);
  expect_close(what + " dbias", doubles(b.grad()), r.db, 1e-5);
}

// ---- the residual pattern: x's gradient from the residual branch meets layer_norm's ----
// z = x + 2·layer_norm(x, w, b), loss = Σ z·c: x.grad = c + dx(g = 2c). The gradient that
// reaches x through the sum is a fresh buffer nobody else holds, so layer_norm's backward adds
// its own into it (the accumulate path).
void check_residual(Device device, DType dtype) {
  for (const Shape2 s : {Shape2{16, 768}, Shape2{6, 5}, Shape2{4, 3000}}) {
    const Data d = make_data(s, 700 + s.n);
    const std::vector<double> c = d.g;
    const Ref r = reference(d, AffineParts::both, scaled(c, 2.0));
    const Shape shape{s.rows, s.n};
    Tensor x = make(d.x, shape, dtype, device, true);
    Tensor w = make(d.w, {s.n}, dtype, device, true);
    Tensor b = make(d.b, {s.n}, dtype, device, true);
    Tensor z = x + layer_norm(x, {s.n}, w, b, kEps) * 2.0;
    (z * make(c, shape, dtype, device)).sum().backward();
    const std::string what = name_of("residual", s, AffineParts::both, dtype, device);
    const double tol = norm_tolerance(dtype);
    expect_close(what + " x.grad", doubles(x.grad()), plus(c, r.dx), tol);
    expect_close(what + " w.grad", doubles(w.grad()), r.dw, tol);
    expect_close(what + " b.grad", doubles(b.grad()), r.db, tol);
  }
}

// The pending gradient of x is a buffer others see: the caller's own gradient tensor
// (z.backward(g) hands g to both branches), a broadcast of the sum's seed, and a non-leaf x
// that a third branch also reads. Values must be the plain sum, and g must be unchanged.
void check_shared_pending(Device device) {
  const Shape2 s{10, 768};
  const Data d = make_data(s, 900);
  const Shape shape{s.rows, s.n};
  const DType dtype = DType::f32;
  {
    const Ref r = reference(d, AffineParts::both, d.g);
    Tensor x = make(d.x, shape, dtype, device, true);
    Tensor w = make(d.w, {s.n}, dtype, device, true);
    const Tensor g = make(d.g, shape, dtype, device);
    Tensor z = x + layer_norm(x, {s.n}, w, Tensor(), kEps);
    z.backward(g);
    const std::string what = "caller's gradient " + device.str();
    expect_close(what + " x.grad", doubles(x.grad()), plus(d.g, r.dx), 1e-5);
    expect_close(what + " w.grad", doubles(w.grad()), r.dw, 1e-5);
    EXPECT_EQ(doubles(g), doubles(make(d.g, shape, dtype, device))) << what << ": g was written";
  }
  {
    const std::vector<double> ones(s.rows * s.n, 1.0);
    const Ref r = reference(d, AffineParts::none, scaled(ones, 2.0));
    Tensor x = make(d.x, shape, dtype, device, true);
    (x + layer_norm(x, {s.n}, Tensor(), Tensor(), kEps) * 2.0).sum().backward();
    expect_close("broadcast seed " + device.str() + " x.grad", doubles(x.grad()), plus(ones, r.dx),
                 1e-5);
  }
  {
    // h = 1.5·a; loss = Σ (h + 2·layer_norm(h))·c + Σ h·e: a.grad = 1.5·(c + e + dx(2c)).
    const std::vector<double> e = normal(s.rows * s.n, 901, 0.0, 1.0);
    Data dh = d;
    dh.x = scaled(d.x, 1.5);
    const Ref r = reference(dh, AffineParts::both, scaled(d.g, 2.0));
    Tensor a = make(d.x, shape, dtype, device, true);
    Tensor w = make(d.w, {s.n}, dtype, device, true);
    Tensor b = make(d.b, {s.n}, dtype, device, true);
    Tensor h = a * 1.5;
    Tensor z = h + layer_norm(h, {s.n}, w, b, kEps) * 2.0;
    ((z * make(d.g, shape, dtype, device)).sum() + (h * make(e, shape, dtype, device)).sum())
        .backward();
    const std::string what = "non-leaf used twice " + device.str();
    expect_close(what + " a.grad", doubles(a.grad()), scaled(plus(plus(d.g, e), r.dx), 1.5), 1e-5);
    expect_close(what + " w.grad", doubles(w.grad()), r.dw, 1e-5);
    expect_close(what + " b.grad", doubles(b.grad()), r.db, 1e-5);
  }
}

TEST(LayerNormFused, CpuOpMatchesF64Reference) { check_op_against_reference(Device::cpu()); }
TEST(LayerNormFused, CpuSlotsMatchF64Reference) { check_slots_against_reference(Device::cpu()); }
TEST(LayerNormFused, CpuUnalignedInput) { check_unaligned(Device::cpu()); }
TEST(LayerNormFused, CpuResidualAccumulates) {
  check_residual(Device::cpu(), DType::f32);
  check_residual(Device::cpu(), DType::f64);
}
TEST(LayerNormFused, CpuSharedPendingGradientIsNotWritten) { check_shared_pending(Device::cpu()); }

TEST(LayerNormFused, CudaOpMatchesF64Reference) {
  SKIP_WITHOUT_CUDA();
  check_op_against_reference(Device::cuda(0));
}
TEST(LayerNormFused, CudaSlotsMatchF64Reference) {
  SKIP_WITHOUT_CUDA();
  check_slots_against_reference(Device::cuda(0));
}
TEST(LayerNormFused, CudaUnalignedInput) {
  SKIP_WITHOUT_CUDA();
  check_unaligned(Device::cuda(0));
}
TEST(LayerNormFused, CudaResidualAccumulates) {
  SKIP_WITHOUT_CUDA();
  check_residual(Device::cuda(0), DType::f32);
  check_residual(Device::cuda(0), DType::f64);
}
TEST(LayerNormFused, CudaSharedPendingGradientIsNotWritten) {
  SKIP_WITHOUT_CUDA();
  check_shared_pending(Device::cuda(0));
}

// CUDA against the CPU for the same f32 inputs, at a GPT-2 width and a long row.
TEST(LayerNormFused, CudaMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  for (const Shape2 s : {Shape2{4096, 768}, Shape2{33, 3000}})
    for (const AffineParts affine : {AffineParts::both, AffineParts::none}) {
      const Data d = make_data(s, 1100 + s.n);
      const Got cpu = run_op(d, affine, DType::f32, Device::cpu());
      const Got gpu = run_op(d, affine, DType::f32, Device::cuda(0));
      const std::string what = name_of("CUDA vs CPU", s, affine, DType::f32, Device::cuda(0));
      expect_close(what + " y", gpu.y, cpu.y, 1e-5);
      expect_close(what + " dx", gpu.dx, cpu.dx, 1e-5);
      expect_close(what + " dweight", gpu.dw, cpu.dw, 1e-5);
      expect_close(what + " dbias", gpu.db, cpu.db, 1e-5);
    }
}

// The column sums are formed in a fixed order: two runs give the same bits.
TEST(LayerNormFused, CudaBackwardIsDeterministic) {
  SKIP_WITHOUT_CUDA();
  for (const Shape2 s : {Shape2{16384, 768}, Shape2{300, 3000}}) {
    const Data d = make_data(s, 1300 + s.n);
    auto run = [&] {
      const Shape shape{s.rows, s.n};
      const Device gpu = Device::cuda(0);
      Tensor x = make(d.x, shape, DType::f32, gpu, true);
      Tensor w = make(d.w, {s.n}, DType::f32, gpu, true);
      Tensor b = make(d.b, {s.n}, DType::f32, gpu, true);
      layer_norm(x, {s.n}, w, b, kEps).backward(make(d.g, shape, DType::f32, gpu));
      return std::vector<std::vector<float>>{w.grad().to(Device::cpu()).to_vector<float>(),
                                             b.grad().to(Device::cpu()).to_vector<float>(),
                                             x.grad().to(Device::cpu()).to_vector<float>()};
    };
    const auto first = run(), second = run();
    EXPECT_TRUE(first[0] == second[0]) << "dweight differs between runs, n = " << s.n;
    EXPECT_TRUE(first[1] == second[1]) << "dbias differs between runs, n = " << s.n;
    EXPECT_TRUE(first[2] == second[2]) << "dx differs between runs, n = " << s.n;
  }
}

// f64 finite differences of the residual pattern (the accumulate path), with and without the
// affine parameters, one row short and one long enough for several row blocks.
TEST(LayerNormFused, ResidualGradcheckF64) {
  manual_seed(31);
  auto data = [](const Shape& shape) { return randn(shape, {.dtype = DType::f64}); };
  const GradcheckResult affine = gradcheck(
      [](const std::vector<Tensor>& in) {
        return in[0] + layer_norm(in[0], {5}, in[1], in[2]) * 2.0;
      },
      {data({3, 5}), data({5}), data({5})});
  EXPECT_TRUE(affine.ok) << "residual layer_norm with weight and bias: " << affine.message;
  const GradcheckResult plain = gradcheck(
      [](const std::vector<Tensor>& in) {
        return in[0] + layer_norm(in[0], {4, 3}, Tensor(), Tensor(), 1e-3);
      },
      {data({2, 4, 3})});
  EXPECT_TRUE(plain.ok) << "residual layer_norm without affine: " << plain.message;
}

}  // namespace

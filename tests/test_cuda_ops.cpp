// tests/test_cuda_ops.cpp — every CUDA kernel of the runtime helper (fill, copy, unary,
// binary, where, reductions, variance, softmax, GEMM, random) against the CPU result.
//
// Each case is written once as a lambda over input tensors: it runs on CPU copies and on
// cuda:0 copies, and the results must agree to relative 1e-5 (ARCHITECTURE §3 rule 6).
// Gradient cases also compare every input's .grad. Skips when no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/train/capture.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using ember_test::kGpu;

// Runs fn on the CPU inputs and on copies on cuda:0, compares the results (and, with
// `grads`, the inputs' gradients of sum(result · weights)).
void expect_same(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs,
                 bool grads = false, double rtol = 1e-5, double atol = 1e-6) {
  std::vector<Tensor> cpu, gpu;
  for (const Tensor& t : inputs) {
    Tensor c = t.detach().clone();
    Tensor g = t.detach().to(kGpu);
    if (grads && is_floating(t.dtype())) {
      c.requires_grad_();
      g.requires_grad_();
    }
    cpu.push_back(c);
    gpu.push_back(g);
  }
  const Tensor want = fn(cpu);
  const Tensor got = fn(gpu);
  ASSERT_EQ(got.device(), kGpu) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_TRUE(
      ember_test::check_close(got.detach().to(Device::cpu()), want.detach(), rtol, atol, what));
  if (!grads) return;
  manual_seed(99);
  const Tensor weights = randn(want.shape(), {.dtype = want.dtype()});
  sum(want * weights).backward();
  sum(got * weights.to(kGpu)).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!cpu[i].requires_grad()) continue;
    ASSERT_TRUE(gpu[i].grad().defined()) << what << ": input " << i << " has no grad on cuda";
    EXPECT_TRUE(ember_test::check_close(gpu[i].grad().to(Device::cpu()), cpu[i].grad(), rtol, atol,
                                        what + " grad of input " + std::to_string(i)));
  }
}

Tensor rnd(const Shape& shape, uint64_t seed = 1, DType dtype = DType::f32) {
  manual_seed(seed);
  return randn(shape, {.dtype = dtype});
}

Tensor positive(const Shape& shape, uint64_t seed = 2) {
  manual_seed(seed);
  return rand(shape, {}, 0.1, 3.0);
}

TEST(CudaOps, FillEveryDtype) {
  SKIP_WITHOUT_CUDA();
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64,
                  DType::u8, DType::boolean}) {
    const Tensor got = full({3, 5}, 2.5, {.dtype = d, .device = kGpu}).to(Device::cpu());
    const Tensor want = full({3, 5}, 2.5, {.dtype = d});
    EXPECT_TRUE(ember_test::check_close(got.to(DType::f64), want.to(DType::f64), 0, 0,
                                        std::string("fill ") + std::string(dtype_name(d))));
  }
  // A strided fill: a column of a matrix.
  Tensor m = zeros({4, 3}, {.device = kGpu});
  m.slice(1, 1, 2).fill_(7.0);
  Tensor want = zeros({4, 3});
  want.slice(1, 1, 2).fill_(7.0);
  EXPECT_EQ(m.to(Device::cpu()).to_vector<float>(), want.to_vector<float>());
}

TEST(CudaOps, CopyCastsAndStrides) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = rnd({33, 65}) * 10.0f;
  for (DType d :
       {DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8, DType::boolean}) {
    expect_same(std::string("to ") + std::string(dtype_name(d)),
                [d](const std::vector<Tensor>& v) { return v[0].to(d).to(DType::f64); }, {abs(x)});
  }
  expect_same("transpose contiguous",
              [](const std::vector<Tensor>& v) { return v[0].t().contiguous(); }, {x});
  expect_same("permute 3-d",
              [](const std::vector<Tensor>& v) {
                return v[0].permute({2, 0, 1}).contiguous();
              },
              {rnd({4, 5, 6})});
  expect_same("expand",
              [](const std::vector<Tensor>& v) {
                return v[0].expand({7, 65}).contiguous();
              },
              {rnd({1, 65})});
  expect_same("strided slice",
              [](const std::vector<Tensor>& v) { return v[0].slice(1, 1, 60, 3).contiguous(); },
              {x});
}

TEST(CudaOps, UnaryOpsAndGradients) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = rnd({37, 129}) * 2.0f;  // odd sizes: packed path plus a tail
  const Tensor p = positive({37, 129});
  struct Case {
    const char* name;
    Fn fn;
    bool positive_input;
  };
  const std::vector<Case> cases = {
      {"neg", [](auto& v) { return neg(v[0]); }, false},
      {"abs", [](auto& v) { return abs(v[0]); }, false},
      {"sqrt", [](auto& v) { return sqrt(v[0]); }, true},
      {"rsqrt", [](auto& v) { return rsqrt(v[0]); }, true},
      {"square", [](auto& v) { return square(v[0]); }, false},
      {"exp", [](auto& v) { return exp(v[0]); }, false},
      {"log", [](auto& v) { return log(v[0]); }, true},
      {"sign", [](auto& v) { return sign(v[0]); }, false},
      {"relu", [](auto& v) { return relu(v[0]); }, false},
      {"sigmoid", [](auto& v) { return sigmoid(v[0]); }, false},
      {"tanh", [](auto& v) { return tanh(v[0]); }, false},
      {"gelu", [](auto& v) { return gelu(v[0]); }, false},
      {"gelu tanh", [](auto& v) { return gelu(v[0], "tanh"); }, false},
      {"silu", [](auto& v) { return silu(v[0]); }, false},
      {"clamp", [](auto& v) { return clamp(v[0], -0.5, 0.7); }, false},
      {"pow 3", [](auto& v) { return pow(v[0], 3.0); }, false},
      {"pow 0.5", [](auto& v) { return pow(v[0], 0.5); }, true},
      {"affine", [](auto& v) { return v[0] * 3.0f + 1.0f; }, false},
  };
  for (const Case& c : cases) {
    expect_same(c.name, c.fn, {c.positive_input ? p : x}, /*grads=*/true);
    expect_same(std::string(c.name) + " f64", c.fn, {(c.positive_input ? p : x).to(DType::f64)});
    expect_same(std::string(c.name) + " strided",
                [&c](const std::vector<Tensor>& v) { return c.fn({v[0].t()}); },
                {c.positive_input ? p : x});
  }
}

TEST(CudaOps, BinaryOpsBroadcastAndCompare) {
  SKIP_WITHOUT_CUDA();
  const Tensor a = rnd({16, 33}, 3), b = rnd({16, 33}, 4), row = rnd({33}, 5),
               col = rnd({16, 1}, 6);
  const std::vector<std::pair<const char*, Fn>> ops = {
      {"add", [](auto& v) { return add(v[0], v[1]); }},
      {"sub", [](auto& v) { return sub(v[0], v[1]); }},
      {"mul", [](auto& v) { return mul(v[0], v[1]); }},
      {"div", [](auto& v) { return div(v[0], v[1]); }},
      {"maximum", [](auto& v) { return maximum(v[0], v[1]); }},
      {"minimum", [](auto& v) { return minimum(v[0], v[1]); }},
  };
  for (const auto& [name, fn] : ops) {
    expect_same(name, fn, {a, b}, /*grads=*/true);
    expect_same(std::string(name) + " row broadcast", fn, {a, row}, true);
    expect_same(std::string(name) + " column broadcast", fn, {col, a}, true);
    expect_same(std::string(name) + " f64", fn, {a.to(DType::f64), b.to(DType::f64)});
    expect_same(std::string(name) + " i64", fn,
                {(a * 10.0f).to(DType::i64), (abs(b) * 10.0f + 1.0f).to(DType::i64)});
    expect_same(std::string(name) + " i32", fn,
                {(a * 10.0f).to(DType::i32), (abs(b) * 10.0f + 1.0f).to(DType::i32)});
  }
  expect_same(
      "pow", [](auto& v) { return pow(v[0], v[1]); }, {abs(a) + 0.5f, b}, true);
  const std::vector<std::pair<const char*, Fn>> cmps = {
      {"eq", [](auto& v) { return eq(v[0], v[1]); }},
      {"ne", [](auto& v) { return ne(v[0], v[1]); }},
      {"lt", [](auto& v) { return lt(v[0], v[1]); }},
      {"le", [](auto& v) { return le(v[0], v[1]); }},
      {"gt", [](auto& v) { return gt(v[0], v[1]); }},
      {"ge", [](auto& v) { return ge(v[0], v[1]); }},
  };
  const Tensor ai = (a * 2.0f).to(DType::i32), bi = (b * 2.0f).to(DType::i32);
  for (const auto& [name, fn] : cmps) {
    expect_same(name, fn, {a, row});
    expect_same(std::string(name) + " i32", fn, {ai, bi});
    expect_same(std::string(name) + " u8", fn,
                {abs(a * 2.0f).to(DType::u8), abs(b * 2.0f).to(DType::u8)});
  }
  expect_same(
      "where", [](auto& v) { return where(gt(v[0], v[1]), v[0], v[1] * 2.0f); }, {a, b}, true);
  // A large contiguous add: the packed fast path over many blocks.
  expect_same("large add", [](auto& v) { return v[0] + v[1]; },
              {rnd({1 << 20}, 7), rnd({1 << 20}, 8)});
}

// Every elementwise kernel has a flat path (contiguous operands: small parameter block, 16-byte
// packs when aligned, the n % pack tail in the same launch) and a strided one (the geometry):
// both against the CPU, bit for bit, for every dtype, at sizes around the pack and block
// widths, with operands contiguous, contiguous but misaligned, strided and broadcast.
TEST(CudaOps, FlatStridedAndBroadcastPathsEveryDtypeBitwise) {
  SKIP_WITHOUT_CUDA();
  const std::vector<DType> dtypes = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                     DType::i32, DType::i64, DType::u8,  DType::boolean};
  auto values = [](int64_t n, uint64_t seed, DType d) {
    Tensor v = rnd({n}, seed) * 10.0f;
    if (d == DType::u8) v = abs(v);
    return d == DType::boolean ? gt(v, zeros({1})) : v.to(d);
  };
  // The layouts of one n-element operand, made on `device` from the same CPU values.
  auto layouts = [&](int64_t n, uint64_t seed, DType d, Device device) {
    const Tensor long_ = values(2 * n + 1, seed, d).to(device);
    return std::vector<std::pair<std::string, Tensor>>{
        {"contiguous", long_.slice(0, 0, n).clone()},
        {"misaligned", long_.slice(0, 1, n + 1)},  // contiguous, one element off
        {"strided", long_.slice(0, 0, 2 * n, 2)},
        {"broadcast", long_.slice(0, n, n + 1).expand({n})},
    };
  };
  auto same = [](const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.dtype(), want.dtype()) << what;
    EXPECT_TRUE(ember_test::check_close(got.to(Device::cpu()).to(DType::f64), want.to(DType::f64),
                                        0, 0, what));
  };
  for (int64_t n : {1, 3, 16, 17, 255, 257, 1027}) {
    for (DType d : dtypes) {
      const std::string at = std::string(dtype_name(d)) + " n=" + std::to_string(n) + " ";
      const auto cpu_a = layouts(n, 1, d, Device::cpu()), gpu_a = layouts(n, 1, d, kGpu);
      const auto cpu_b = layouts(n, 2, d, Device::cpu()), gpu_b = layouts(n, 2, d, kGpu);
      const Tensor cond = gt(rnd({n}, 3), zeros({1}));
      same(full({n}, 2.5, {.dtype = d, .device = kGpu}), full({n}, 2.5, {.dtype = d}), at + "fill");
      for (size_t l = 0; l < cpu_a.size(); ++l) {
        const std::string w = at + cpu_a[l].first + " ";
        const Tensor &ca = cpu_a[l].second, &ga = gpu_a[l].second;
        const Tensor &cb = cpu_b[0].second, &gb = gpu_b[0].second;
        same(ga.contiguous(), ca.contiguous(), w + "copy");
        for (DType to : {DType::f32, DType::f16, DType::i64, DType::boolean})
          same(ga.to(to), ca.to(to), w + "cast to " + std::string(dtype_name(to)));
        same(where(cond.to(kGpu), ga, gb), where(cond, ca, cb), w + "where");
        same(where(cond.to(kGpu), gb, ga), where(cond, cb, ca), w + "where (b)");
        same(logical_not(ga), logical_not(ca), w + "logical_not");
        same(eq(ga, gb), eq(ca, cb), w + "eq");
        same(lt(gb, ga), lt(cb, ca), w + "lt");
        if (supports(Op::add, d, kGpu)) {
          same(add(ga, gb), add(ca, cb), w + "add");
          same(mul(gb, ga), mul(cb, ca), w + "mul (b first)");
        }
        if (supports(Op::maximum, d, kGpu)) same(maximum(ga, gb), maximum(ca, cb), w + "maximum");
        if (supports(Op::neg, d, kGpu)) same(neg(ga), neg(ca), w + "neg");
        if (supports(Op::abs, d, kGpu)) same(abs(ga), abs(ca), w + "abs");
        if (supports(Op::relu, d, kGpu)) same(relu(ga), relu(ca), w + "relu");
      }
      // A strided fill (every other element) and a fill of a misaligned run.
      Tensor g = zeros({2 * n + 1}, {.dtype = d, .device = kGpu});
      Tensor c = zeros({2 * n + 1}, {.dtype = d});
      g.slice(0, 0, 2 * n, 2).fill_(1.0);
      c.slice(0, 0, 2 * n, 2).fill_(1.0);
      g.slice(0, 1, n + 1).fill_(3.0);
      c.slice(0, 1, n + 1).fill_(3.0);
      same(g, c, at + "strided and misaligned fill_");
    }
  }
}

// Elementwise kernels are launched chained (Note [Chained launches], src/cuda/launch.cuh): each
// may start before the kernel ahead of it ends and waits for it on the device. A long
// dependent chain mixed with kernels that are not chained (reductions, cuBLASLt, copies,
// random) must still see every earlier result, eager and captured.
TEST(CudaOps, ChainedLaunchesKeepStreamOrder) {
  SKIP_WITHOUT_CUDA();
  auto step = [](const std::vector<Tensor>& v) {
    Tensor z = v[0];
    const Tensor &a = v[1], &b = v[2], &w = v[3];
    for (int i = 0; i < 60; ++i) {
      z = z * a + b;                     // chained after chained
      if (i % 10 == 3) z = z - mean(z);  // a reduction in between
      if (i % 10 == 6) z = tanh(matmul(w, z.reshape({8, 8})).reshape({64}));  // cuBLASLt
      if (i % 10 == 8) z = z.reshape({8, 8}).t().contiguous().reshape({64});  // strided copy
      if (i % 10 == 9) z = where(gt(z, zeros_like(z)), z, z * 0.5f).clone();  // memcpy copy
    }
    return z;
  };
  const std::vector<Tensor> in = {rnd({64}, 30), rand({64}, {}, 0.9, 1.1), rnd({64}, 31) * 0.1f,
                                  rnd({8, 8}, 32) * 0.3f};
  expect_same("chain of 60 steps", step, in, false, 1e-4, 1e-5);
  // Captured (programmatic edges in the graph) and replayed: bit for bit the eager result.
  NoGradGuard no_grad;
  std::vector<Tensor> gpu;
  for (const Tensor& t : in) gpu.push_back(t.to(kGpu));
  const std::vector<float> eager = step(gpu).to_vector<float>();
  train::CapturedStep graph([&](const std::vector<Tensor>& v) { return std::vector{step(v)}; },
                            {.warmup = 0});
  for (int replay = 0; replay < 3; ++replay)
    EXPECT_EQ(graph(gpu)[0].to_vector<float>(), eager) << "replay " << replay;
}

TEST(CudaOps, ReductionsOverAnyDims) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = rnd({6, 7, 130}, 9);
  const std::vector<Shape> dims = {{0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1}, {0, 1, 2}};
  for (const Shape& d : dims) {
    const std::string ds = d.to_string();
    expect_same(
        "sum " + ds, [d](auto& v) { return sum(v[0], d); }, {x}, true);
    expect_same(
        "mean " + ds, [d](auto& v) { return mean(v[0], d, true); }, {x}, true);
    expect_same("max " + ds, [d](auto& v) { return max(v[0], d); }, {x});
    expect_same("min " + ds, [d](auto& v) { return min(v[0], d); }, {x});
    expect_same(
        "var " + ds, [d](auto& v) { return var(v[0], d); }, {x}, true);
    expect_same("sum i64 " + ds, [d](auto& v) { return sum(v[0], d); },
                {(x * 100.0f).to(DType::i64)});
    expect_same("sum f64 " + ds, [d](auto& v) { return sum(v[0], d); }, {x.to(DType::f64)});
  }
  for (int64_t d = 0; d < 3; ++d) {
    expect_same("argmax " + std::to_string(d), [d](auto& v) { return argmax(v[0], d); }, {x});
    expect_same("argmin " + std::to_string(d), [d](auto& v) { return argmin(v[0], d, true); }, {x});
  }
  // Ties keep the first index.
  expect_same("argmax ties", [](auto& v) { return argmax(v[0], 1); },
              {from_vector<float>({1, 3, 3, 0, 2, 2, 2, 2}, {2, 4})});
  // Full and nearly full reductions of large tensors (chunked, merged in order).
  const Tensor big = rnd({3 << 20}, 10);
  expect_same(
      "sum large", [](auto& v) { return sum(v[0]); }, {big}, false, 1e-5, 1e-3);
  expect_same("max large", [](auto& v) { return max(v[0]); }, {big});
  expect_same("mean columns of a tall matrix", [](auto& v) { return mean(v[0], {0}); },
              {rnd({100000, 3}, 11)});
  expect_same(
      "var large", [](auto& v) { return var(v[0]); }, {big}, false, 1e-4);
  expect_same("argmax large", [](auto& v) { return argmax(v[0], 0); }, {big});
  expect_same("sum strided", [](auto& v) { return sum(v[0].t(), {1}); }, {rnd({50, 40}, 12)});
}

TEST(CudaOps, SoftmaxAnyDimAndBackward) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = rnd({5, 9, 12}, 13) * 3.0f;
  for (int64_t d : {0, 1, 2, -1}) {
    expect_same(
        "softmax dim " + std::to_string(d), [d](auto& v) { return softmax(v[0], d); }, {x}, true);
    expect_same(
        "log_softmax dim " + std::to_string(d), [d](auto& v) { return log_softmax(v[0], d); }, {x},
        true);
  }
  const Tensor wide = rnd({7, 3000}, 14) * 4.0f;  // rows longer than a warp's share
  expect_same(
      "softmax wide rows", [](auto& v) { return softmax(v[0], 1); }, {wide}, true);
  expect_same(
      "log_softmax wide rows", [](auto& v) { return log_softmax(v[0], 1); }, {wide}, true);
  expect_same(
      "softmax f64", [](auto& v) { return softmax(v[0], 1); }, {x.to(DType::f64)}, true);
  expect_same(
      "cross_entropy", [](auto& v) { return cross_entropy(v[0], v[1]); },
      {rnd({32, 10}, 15), from_vector<int64_t>(std::vector<int64_t>(32, 3), {32})}, true);
}

TEST(CudaOps, MatmulAndLinearThroughCublasLt) {
  SKIP_WITHOUT_CUDA();
  const double rtol = 1e-5, atol = 1e-4;  // GEMM: within its own rounding
  expect_same(
      "matmul", [](auto& v) { return matmul(v[0], v[1]); }, {rnd({37, 19}, 1), rnd({19, 23}, 2)},
      true, rtol, atol);
  expect_same(
      "matmul transposed views", [](auto& v) { return matmul(v[0].t(), v[1].t()); },
      {rnd({19, 37}, 3), rnd({23, 19}, 4)}, true, rtol, atol);
  expect_same(
      "batched matmul", [](auto& v) { return matmul(v[0], v[1]); },
      {rnd({4, 8, 16}, 5), rnd({4, 16, 5}, 6)}, true, rtol, atol);
  expect_same(
      "broadcast batch", [](auto& v) { return matmul(v[0], v[1]); },
      {rnd({3, 8, 16}, 7), rnd({16, 5}, 8)}, true, rtol, atol);
  expect_same(
      "broadcast left batch", [](auto& v) { return matmul(v[0], v[1]); },
      {rnd({8, 16}, 9), rnd({3, 16, 5}, 10)}, true, rtol, atol);
  expect_same(
      "linear with bias", [](auto& v) { return linear(v[0], v[1], v[2]); },
      {rnd({64, 784}, 11), rnd({256, 784}, 12) * 0.05f, rnd({256}, 13)}, true, rtol, atol);
  expect_same(
      "linear f64", [](auto& v) { return linear(v[0], v[1], v[2]); },
      {rnd({16, 30}, 14, DType::f64), rnd({20, 30}, 15, DType::f64), rnd({20}, 16, DType::f64)},
      true, 1e-12, 1e-12);
  expect_same(
      "matmul f64", [](auto& v) { return matmul(v[0], v[1]); },
      {rnd({40, 50}, 17, DType::f64), rnd({50, 60}, 18, DType::f64)}, false, 1e-12, 1e-12);
  expect_same(
      "vector dot", [](auto& v) { return matmul(v[0], v[1]); }, {rnd({100}, 19), rnd({100}, 20)},
      true, rtol, atol);
}

TEST(CudaOps, RandomStreamsEqualTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (DType d : {DType::f32, DType::f64}) {
    manual_seed(1234);
    const Tensor cu = rand({1000, 3}, {.dtype = d});
    manual_seed(1234);
    const Tensor gu = rand({1000, 3}, {.dtype = d, .device = kGpu});
    EXPECT_EQ(gu.to(Device::cpu()).to(DType::f64).to_vector<double>(),
              cu.to(DType::f64).to_vector<double>())
        << "uniform " << dtype_name(d) << ": the same stream bit for bit";
    manual_seed(77);
    const Tensor cn = randn({4097}, {.dtype = d});
    manual_seed(77);
    const Tensor gn = randn({4097}, {.dtype = d, .device = kGpu});
    EXPECT_TRUE(ember_test::check_close(gn.to(Device::cpu()), cn, 1e-5, 1e-6, "normal"));
  }
  manual_seed(5);
  const Tensor x = rnd({64, 50}, 21);
  manual_seed(5);
  const Tensor cd = dropout(x, 0.3);
  manual_seed(5);
  const Tensor gd = dropout(x.to(kGpu), 0.3);
  EXPECT_EQ(gd.to(Device::cpu()).to_vector<float>(), cd.to_vector<float>()) << "dropout mask";
}

}  // namespace

// tests/test_deterministic.cpp — deterministic mode (set_deterministic / EMBER_DETERMINISTIC,
// include/ember/runtime.hpp; docs/cuda.md "Deterministic mode").
//
// Any machine: the switch, the variable read at start (tests/deterministic_worker.cpp `flag`
// in a child process), and the CPU's index family giving the same bits with the switch on or
// off. CUDA (skipped without a device): index_add, scatter_add, scatter_reduce, scatter,
// embedding's and gather's backward with many repeated indices, each run twice with the switch
// on and compared bit for bit, then with the CPU (Note [Deterministic accumulation] in
// src/cuda/index.cu); scaled_dot_product_attention's forward and backward twice, bit for bit,
// and against the composed path in f32 (Note [Deterministic attention backward] in
// src/cuda/attention.cpp); and two processes training a small transformer for 20 steps to
// the same losses and weights, bit for bit (tests/deterministic_worker.cpp `train`).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/attention.hpp"
#include "ember/ember.hpp"
#include "ember/runtime.hpp"
#include "fixtures.hpp"

namespace {

using ember::Device;
using ember::DType;
using ember::SdpaBackend;
using ember::Shape;
using ember::Tensor;
using ember_test::check_close;
using ember_test::DeterministicScope;

// a and b hold the same bytes (same shape and dtype); the failure names `what`, the count of
// differing elements and the first of them.
::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b,
                                         const std::string& what) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure()
           << what << ": " << a.shape().to_string() << " " << ember::dtype_name(a.dtype()) << " vs "
           << b.shape().to_string() << " " << ember::dtype_name(b.dtype());
  const Tensor x = a.detach().to(Device::cpu()).contiguous();
  const Tensor y = b.detach().to(Device::cpu()).contiguous();
  const size_t es = ember::element_size(x.dtype());
  const auto* px = static_cast<const unsigned char*>(x.data_ptr());
  const auto* py = static_cast<const unsigned char*>(y.data_ptr());
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::memcmp(px + i * es, py + i * es, es) != 0) {
      if (first < 0) first = i;
      ++differ;
    }
  }
  if (differ == 0) return ::testing::AssertionSuccess();
  const std::vector<double> vx = ember_test::values_f64(x), vy = ember_test::values_f64(y);
  return ::testing::AssertionFailure()
         << what << " " << a.shape().to_string() << ": " << differ << " of " << x.numel()
         << " elements differ in their bits; first at "
         << ember_test::index_string(first, x.shape()) << ": " << vx[first] << " vs " << vy[first];
}

// Tolerance for comparing a GPU result with the CPU's (the same order of additions: equal up
// to the rounding of 16-bit types).
double gpu_tolerance(DType t) {
  switch (t) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-5;
    case DType::bf16: return 2e-2;
    case DType::f16: return 4e-3;
    default: return 0.0;
  }
}

Tensor random_of(const Shape& shape, DType dtype) {
  if (!ember::is_floating(dtype)) return ember::randint(-50, 50, shape, {.dtype = dtype});
  return ember::randn(shape).to(dtype);
}

// An index of `n` values in [0, size), drawn so that a few rows get most of them (row 1 about
// a third) and every row repeats.
Tensor crowded_index(int64_t n, int64_t size, const Shape& shape = {}) {
  Tensor uniform = ember::randint(0, size, {n});
  Tensor crowd = ember::lt(ember::rand({n}), 0.35);
  Tensor index = ember::where(crowd, ember::full({n}, 1.0, {.dtype = DType::i64}), uniform);
  return shape.size() ? index.reshape(shape) : index;
}

// ---- any machine ----

TEST(Deterministic, SwitchTurnsOnAndOff) {
  const bool before = ember::deterministic();
  {
    DeterministicScope on(true);
    EXPECT_TRUE(ember::deterministic());
    ember::set_deterministic(false);
    EXPECT_FALSE(ember::deterministic());
    ember::set_deterministic(true);
    EXPECT_TRUE(ember::deterministic());
  }
  EXPECT_EQ(ember::deterministic(), before);
}

#if defined(EMBER_DETERMINISTIC_WORKER)
// The worker's exit status and standard output (its standard error goes to the test's log).
struct WorkerRun {
  int status = -1;
  std::string out;
};

WorkerRun run_worker(const std::string& env, const std::string& args) {
  const std::string cmd = env + " " + EMBER_DETERMINISTIC_WORKER + " " + args;
  WorkerRun r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  const int st = pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(Deterministic, VariableIsReadAtStart) {
  const WorkerRun unset = run_worker("env -u EMBER_DETERMINISTIC", "flag");
  ASSERT_EQ(unset.status, 0) << unset.out;
  EXPECT_EQ(unset.out, "deterministic 0\n");
  const WorkerRun one = run_worker("env EMBER_DETERMINISTIC=1", "flag");
  ASSERT_EQ(one.status, 0) << one.out;
  EXPECT_EQ(one.out, "deterministic 1\n");
  const WorkerRun zero = run_worker("env EMBER_DETERMINISTIC=0", "flag");
  ASSERT_EQ(zero.status, 0) << zero.out;
  EXPECT_EQ(zero.out, "deterministic 0\n");
}
#else
TEST(Deterministic, VariableIsReadAtStart) {
  GTEST_SKIP() << "built without tests/deterministic_worker.cpp (EMBER_DETERMINISTIC_WORKER)";
}
#endif

// The CPU backend is deterministic either way: the switch changes none of its bits.
TEST(Deterministic, CpuIndexOpsGiveTheSameBitsEitherWay) {
  ember::manual_seed(3);
  const Tensor x = ember::randn({40, 17});
  const Tensor index = crowded_index(3000, 40);
  const Tensor src = ember::randn({3000, 17});
  const Tensor scatter_index = crowded_index(2000 * 17, 40, {2000, 17});
  const Tensor scatter_src = ember::randn({2000, 17});
  const Tensor weight = ember::randn({40, 17});
  auto run = [&] {
    std::vector<Tensor> out;
    out.push_back(ember::index_add(x, 0, index, src));
    out.push_back(ember::scatter_add(x, 0, scatter_index, scatter_src));
    out.push_back(ember::scatter_reduce(x, 0, scatter_index, scatter_src, "amax"));
    const Tensor w = weight.detach().requires_grad_();
    (ember::embedding(w, index.reshape({60, 50})) * 0.5).sum().backward();
    out.push_back(w.grad());
    return out;
  };
  std::vector<Tensor> off, on;
  {
    DeterministicScope s(false);
    off = run();
  }
  {
    DeterministicScope s(true);
    on = run();
  }
  for (size_t i = 0; i < off.size(); ++i)
    EXPECT_TRUE(bitwise_equal(on[i], off[i], "CPU result " + std::to_string(i)));
}

// ---- CUDA ----

TEST(DeterministicCuda, IndexAddRepeatsBitwiseAndMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  DeterministicScope on(true);
  const Device gpu = Device::cuda();
  ember::manual_seed(5);
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i64}) {
    for (int dim : {0, 1, 2}) {
      Shape xs{3, 40, 33};
      const int64_t count = 5000;
      Shape ss = xs;
      ss[dim] = count;
      const Tensor x = random_of(xs, dtype), src = random_of(ss, dtype);
      const Tensor index = crowded_index(count, xs[dim]);
      const std::string name =
          "index_add " + std::string(ember::dtype_name(dtype)) + " dim " + std::to_string(dim);
      const Tensor want = ember::index_add(x, dim, index, src);
      const Tensor xg = x.to(gpu), ig = index.to(gpu), sg = src.to(gpu);
      const Tensor a = ember::index_add(xg, dim, ig, sg);
      const Tensor b = ember::index_add(xg, dim, ig, sg);
      EXPECT_TRUE(bitwise_equal(a, b, name + " (two runs)"));
      EXPECT_TRUE(check_close(a.to(Device::cpu()), want, gpu_tolerance(dtype), gpu_tolerance(dtype),
                              name + " vs CPU"));
    }
  }
  // i32 indices, and alpha
  const Tensor x = ember::randn({64, 8}), src = ember::randn({4000, 8});
  const Tensor index = crowded_index(4000, 64).to(DType::i32);
  const Tensor want = ember::index_add(x, 0, index, src, 0.5);
  const Tensor a = ember::index_add(x.to(gpu), 0, index.to(gpu), src.to(gpu), 0.5);
  const Tensor b = ember::index_add(x.to(gpu), 0, index.to(gpu), src.to(gpu), 0.5);
  EXPECT_TRUE(bitwise_equal(a, b, "index_add i32 index (two runs)"));
  EXPECT_TRUE(check_close(a.to(Device::cpu()), want, 1e-5, 1e-5, "index_add i32 index vs CPU"));
}

TEST(DeterministicCuda, ScatterFamilyRepeatsBitwiseAndMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  DeterministicScope on(true);
  const Device gpu = Device::cuda();
  ember::manual_seed(6);
  struct Case {
    int dim;
    Shape x, index;
  };
  for (const Case& c : {Case{0, {50, 20}, {3000, 20}}, Case{1, {30, 16}, {30, 900}},
                        Case{1, {4, 6, 9}, {4, 500, 9}}}) {
    const int64_t n = c.index.numel();
    const Tensor index = crowded_index(n, c.x[c.dim], c.index);
    const Tensor x = ember::randn(c.x);
    const Tensor src = ember::randn(c.index);
    const Tensor near_one = ember::rand(c.index, {}, 0.97, 1.03);  // products stay finite
    const Tensor xg = x.to(gpu), ig = index.to(gpu), sg = src.to(gpu), pg = near_one.to(gpu);
    const std::string where = " dim " + std::to_string(c.dim) + " " + c.index.to_string();
    auto both = [&](const std::string& name, const Tensor& want, auto&& f) {
      const Tensor a = f(), b = f();
      EXPECT_TRUE(bitwise_equal(a, b, name + where + " (two runs)"));
      EXPECT_TRUE(check_close(a.to(Device::cpu()), want, 1e-5, 1e-5, name + where + " vs CPU"));
    };
    both("scatter_add", ember::scatter_add(x, c.dim, index, src),
         [&] { return ember::scatter_add(xg, c.dim, ig, sg); });
    for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"}) {
      const bool prod = std::strcmp(reduce, "prod") == 0;
      both(std::string("scatter_reduce ") + reduce,
           ember::scatter_reduce(x, c.dim, index, prod ? near_one : src, reduce, true),
           [&] { return ember::scatter_reduce(xg, c.dim, ig, prod ? pg : sg, reduce, true); });
    }
    // scatter keeps the last of a target's sources, as the CPU does: exactly the CPU's bits
    const Tensor want = ember::scatter(x, c.dim, index, src);
    const Tensor got = ember::scatter(xg, c.dim, ig, sg);
    EXPECT_TRUE(bitwise_equal(got, want, "scatter" + where + " vs CPU"));
  }
  // integer scatter_add
  const Tensor xi = ember::randint(-9, 9, {12, 5}), si = ember::randint(-9, 9, {700, 5});
  const Tensor ii = crowded_index(3500, 12, {700, 5});
  EXPECT_TRUE(bitwise_equal(ember::scatter_add(xi.to(gpu), 0, ii.to(gpu), si.to(gpu)),
                            ember::scatter_add(xi, 0, ii, si), "scatter_add i64 vs CPU"));
}

TEST(DeterministicCuda, EmbeddingAndGatherBackwardRepeatBitwise) {
  SKIP_WITHOUT_CUDA();
  DeterministicScope on(true);
  const Device gpu = Device::cuda();
  ember::manual_seed(7);
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor weight = ember::randn({64, 48}).to(dtype);
    const Tensor tokens = crowded_index(8 * 512, 64, {8, 512});
    const Tensor g = ember::randn({8, 512, 48}).to(dtype);
    auto embedding_grad = [&](const Device& d) {
      const Tensor w = weight.to(d).requires_grad_();
      (ember::embedding(w, tokens.to(d)) * g.to(d)).sum().backward();
      return w.grad();
    };
    const std::string name = "embedding backward " + std::string(ember::dtype_name(dtype));
    const Tensor a = embedding_grad(gpu), b = embedding_grad(gpu);
    EXPECT_TRUE(bitwise_equal(a, b, name + " (two runs)"));
    EXPECT_TRUE(check_close(a.to(Device::cpu()), embedding_grad(Device::cpu()),
                            gpu_tolerance(dtype), gpu_tolerance(dtype), name + " vs CPU"));
  }
  const Tensor x = ember::randn({300, 10});
  const Tensor index = crowded_index(5000 * 10, 300, {5000, 10});
  const Tensor g = ember::randn({5000, 10});
  auto gather_grad = [&](const Device& d) {
    const Tensor xd = x.to(d).requires_grad_();
    (ember::gather(xd, 0, index.to(d)) * g.to(d)).sum().backward();
    return xd.grad();
  };
  const Tensor a = gather_grad(gpu), b = gather_grad(gpu);
  EXPECT_TRUE(bitwise_equal(a, b, "gather backward (two runs)"));
  EXPECT_TRUE(check_close(a.to(Device::cpu()), gather_grad(Device::cpu()), 1e-5, 1e-5,
                          "gather backward vs CPU"));
}

TEST(DeterministicCuda, BadIndexIsStillReported) {
  SKIP_WITHOUT_CUDA();
  DeterministicScope on(true);
  const Device gpu = Device::cuda();
  const Tensor x = ember::zeros({5, 3}, {.device = gpu});
  const Tensor index = ember::from_vector<int64_t>({0, 2, 7, 2}, {4}).to(gpu);
  const Tensor src = ember::ones({4, 3}, {.device = gpu});
  EXPECT_THROW(
      {
        const Tensor r = ember::index_add(x, 0, index, src);
        (void)r.to(Device::cpu());
      },
      ember::Error);
  EXPECT_TRUE(bitwise_equal(x, ember::zeros({5, 3}), "x after a refused index_add"));
}

// q, k, v in bf16 [2, 4, 256, 64], causal: forward and backward twice.
struct SdpaRun {
  Tensor out, dq, dk, dv;
  SdpaBackend backend = SdpaBackend::none;
  std::string reason;
};

SdpaRun sdpa_run(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& w) {
  SdpaRun r;
  const Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(),
               v = v0.detach().requires_grad_();
  r.out = ember::scaled_dot_product_attention(q, k, v, {.is_causal = true});
  r.backend = ember::sdpa_last_backend();
  r.reason = ember::sdpa_fallback_reason();
  (r.out.to(DType::f32) * w).sum().backward();
  r.dq = q.grad();
  r.dk = k.grad();
  r.dv = v.grad();
  return r;
}

TEST(DeterministicCuda, SdpaForwardAndBackwardRepeatBitwise) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  ember::manual_seed(8);
  const Shape s{2, 4, 256, 64};
  const Tensor q = ember::randn(s, {.device = gpu}).to(DType::bf16);
  const Tensor k = ember::randn(s, {.device = gpu}).to(DType::bf16);
  const Tensor v = ember::randn(s, {.device = gpu}).to(DType::bf16);
  const Tensor w = ember::randn(s, {.device = gpu});
  DeterministicScope on(true);
  const SdpaRun a = sdpa_run(q, k, v, w), b = sdpa_run(q, k, v, w);
  std::printf("[ deterministic attention path: %s%s ]\n",
              a.backend == SdpaBackend::cudnn ? "cudnn" : "composed: ", a.reason.c_str());
  EXPECT_TRUE(bitwise_equal(a.out, b.out, "sdpa output (two runs)"));
  EXPECT_TRUE(bitwise_equal(a.dq, b.dq, "sdpa dq (two runs)"));
  EXPECT_TRUE(bitwise_equal(a.dk, b.dk, "sdpa dk (two runs)"));
  EXPECT_TRUE(bitwise_equal(a.dv, b.dv, "sdpa dv (two runs)"));
  // Against the composed path in f32 on the same rounded inputs (tolerances of test_sdpa.cpp).
  const SdpaRun ref = sdpa_run(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), w);
  EXPECT_TRUE(check_close(a.out.to(DType::f32), ref.out.detach(), 2e-2, 2e-2, "sdpa output"));
  EXPECT_TRUE(check_close(a.dq.to(DType::f32), ref.dq, 4e-2, 4e-2, "sdpa dq"));
  EXPECT_TRUE(check_close(a.dk.to(DType::f32), ref.dk, 4e-2, 4e-2, "sdpa dk"));
  EXPECT_TRUE(check_close(a.dv.to(DType::f32), ref.dv, 4e-2, 4e-2, "sdpa dv"));
}

// On sm_80 to sm_90, wherever cuDNN's fused path runs at all, deterministic mode keeps it
// (cuDNN's deterministic backward graph) rather than falling back to the composed path.
TEST(DeterministicCuda, SdpaKeepsTheFusedPathWhereCudnnHasADeterministicBackward) {
  SKIP_WITHOUT_CUDA();
  const std::string gpu_name = ember::cuda_device_description(0);
  if (gpu_name.find("(sm_8") == std::string::npos && gpu_name.find("(sm_9") == std::string::npos)
    GTEST_SKIP() << "cuDNN's deterministic attention backward is used on sm_80 to sm_90 ("
                 << gpu_name << ")";
  const Device gpu = Device::cuda();
  ember::manual_seed(9);
  const Shape s{2, 4, 128, 64};
  const Tensor q = ember::randn(s, {.device = gpu}).to(DType::bf16);
  const Tensor w = ember::randn(s, {.device = gpu});
  {
    DeterministicScope off(false);
    if (sdpa_run(q, q, q, w).backend != SdpaBackend::cudnn)
      GTEST_SKIP() << "the fused path does not run here: " << ember::sdpa_cudnn_status();
  }
  DeterministicScope on(true);
  const SdpaRun r = sdpa_run(q, q, q, w);
  EXPECT_EQ(r.backend, SdpaBackend::cudnn)
      << "deterministic mode fell back: " << r.reason << " | " << ember::sdpa_cudnn_status();
}

#if defined(EMBER_DETERMINISTIC_WORKER)
// Two processes, each training the worker's transformer for 20 steps with the switch on (in
// code, or by EMBER_DETERMINISTIC=1), print the same losses and weights, bit for bit.
TEST(DeterministicCuda, TwoProcessesTrainToTheSameBits) {
  SKIP_WITHOUT_CUDA();
  const WorkerRun first = run_worker("env -u EMBER_DETERMINISTIC", "train --api --steps 20");
  ASSERT_EQ(first.status, 0) << first.out;
  std::printf("%s", first.out.c_str());
  ASSERT_NE(first.out.find("step 19 loss"), std::string::npos) << first.out;
  const WorkerRun second = run_worker("env -u EMBER_DETERMINISTIC", "train --api --steps 20");
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_EQ(second.out, first.out);
  const WorkerRun by_variable = run_worker("env EMBER_DETERMINISTIC=1", "train --env --steps 20");
  ASSERT_EQ(by_variable.status, 0) << by_variable.out;
  EXPECT_EQ(by_variable.out, first.out);
}

TEST(DeterministicCuda, TwoProcessesTrainToTheSameBitsWithDropout) {
  SKIP_WITHOUT_CUDA();
  const std::string args = "train --api --steps 20 --dropout 0.1";
  const WorkerRun first = run_worker("env -u EMBER_DETERMINISTIC", args);
  ASSERT_EQ(first.status, 0) << first.out;
  std::printf("%s", first.out.c_str());
  const WorkerRun second = run_worker("env -u EMBER_DETERMINISTIC", args);
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_EQ(second.out, first.out);
}
#endif

}  // namespace

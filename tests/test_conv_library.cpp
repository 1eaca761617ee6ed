// tests/test_conv_library.cpp — the library convolution paths (Note [Which convolution path
// runs] in src/ops/conv_library.cpp) against ember's im2col path, forced with
// set_conv_library(false): oneDNN on the CPU (ConvLibrary*), cuDNN on a GPU (CudaConvLibrary*,
// skipped without one). Every case compares the output and the gradients of x, weight and bias
// for a fixed weighting of the output, and checks which path ran, so a library test cannot
// pass on the fallback. The im2col path itself is checked against PyTorch by the catalogue's
// fixtures (tests/test_catalogue.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/conv_backend.hpp"
#include "ember/ember.hpp"
#include "ember/models/resnet.hpp"
#include "ember/nn/conv.hpp"
#include "ember/optim.hpp"
#include "ember/train/capture.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace ember {
namespace {

using ember_test::kGpu;

using ConvFn = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
using ember_test::seeded_randn;

// A convolution's output, its gradients for sum(y · weights) and the path that ran.
struct ConvRun {
  Tensor y, gx, gw, gb;
  ConvBackend backend = ConvBackend::none;
  std::string reason;
};

// Runs `f` on copies of x, w, b (b may be undefined) on `device` in `dtype`, with the library
// on or off; results come back as f32 on the CPU.
ConvRun run_conv(const ConvFn& f, const Tensor& x, const Tensor& w, const Tensor& b, bool library,
                 Device device = Device::cpu(), DType dtype = DType::f32) {
  set_conv_library(library);
  auto leaf = [&](const Tensor& t) {
    if (!t.defined()) return Tensor();
    Tensor l = t.to(device).to(dtype).detach();
    l.requires_grad_(true);
    return l;
  };
  Tensor xl = leaf(x), wl = leaf(w), bl = leaf(b);
  ConvRun r;
  r.y = f(xl, wl, bl);
  r.backend = conv_last_backend();
  r.reason = conv_fallback_reason();
  manual_seed(7);
  const Tensor weights = randn(r.y.shape()).to(device).to(dtype);
  (r.y * weights).sum().backward();
  set_conv_library(true);
  auto host = [](const Tensor& t) { return t.defined() ? t.to(Device::cpu()).to(DType::f32) : t; };
  r.y = host(r.y.detach());
  r.gx = host(xl.grad());
  r.gw = host(wl.grad());
  if (bl.defined()) r.gb = host(bl.grad());
  return r;
}

// max |a - b| <= tol · (1 + max |b|), with the first mismatch named.
void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what << ": missing";
  ASSERT_TRUE(b.defined()) << what << ": missing reference";
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const std::vector<float> va = a.contiguous().to_vector<float>();
  const std::vector<float> vb = b.contiguous().to_vector<float>();
  double scale = 0.0;
  for (float v : vb) scale = std::max(scale, std::abs(static_cast<double>(v)));
  const double limit = tol * (1.0 + scale);
  for (size_t i = 0; i < va.size(); ++i)
    ASSERT_LE(std::abs(static_cast<double>(va[i]) - vb[i]), limit)
        << what << " " << a.shape().to_string() << ": element " << i << " is " << va[i]
        << ", the im2col path gives " << vb[i];
}

// The library path on `device` in `dtype` against im2col on the CPU in f32.
void check_against_im2col(const ConvFn& f, const Tensor& x, const Tensor& w, const Tensor& b,
                          ConvBackend expected, double tol, Device device = Device::cpu(),
                          DType dtype = DType::f32) {
  const ConvRun ref = run_conv(f, x, w, b, false);
  ASSERT_EQ(ref.backend, ConvBackend::im2col);
  EXPECT_NE(ref.reason.find("switched off"), std::string::npos) << ref.reason;
  const ConvRun lib = run_conv(f, x, w, b, true, device, dtype);
  ASSERT_EQ(lib.backend, expected) << "fell back: " << lib.reason;
  EXPECT_EQ(lib.reason, "");
  expect_close(lib.y, ref.y, tol, "output");
  expect_close(lib.gx, ref.gx, tol, "grad input");
  expect_close(lib.gw, ref.gw, tol, "grad weight");
  if (b.defined()) expect_close(lib.gb, ref.gb, tol, "grad bias");
}

constexpr double kF32 = 2e-5;  // f32 against f32: summation order only

// The oneDNN cases below need it; a machine without it says so and skips them.
// ("oneDNN 2.6.3 (...)" when loaded; "oneDNN not found (...)" on the GPU machines).
#define SKIP_WITHOUT_ONEDNN()                                                             \
  do {                                                                                    \
    const std::string status = conv_library_status();                                     \
    if (status.rfind("oneDNN ", 0) != 0 || status.size() < 8 || !std::isdigit(status[7])) \
      GTEST_SKIP() << "no oneDNN here: " << status;                                       \
  } while (0)

ConvFn conv2d_fn(Size2d stride, Size2d padding, Size2d dilation, int64_t groups) {
  return [=](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv2d(x, w, b, stride, padding, dilation, groups);
  };
}

// Note [A convolution's input gradient added where it lands] (src/ops/conv_library.cpp): a
// residual block relu(batch_norm(conv(x)) + x), whose input's gradient is the shortcut's (it
// arrives first) plus the convolution's. x's gradient with the library on or off (im2col),
// and the calls of the engine's `add` in the backward (the separate pass the library's
// accumulation saves).
struct JoinRun {
  Tensor gx;
  int64_t backward_adds = 0;
  ConvBackend backend = ConvBackend::none;
};

JoinRun run_join(bool library, Device device, DType dtype, MemoryFormat format) {
  set_conv_library(library);
  Tensor x = seeded_randn({4, 16, 10, 10}, 160).to(device).to(dtype).contiguous(format).detach();
  x.requires_grad_(true);
  const Tensor w = (seeded_randn({16, 16, 3, 3}, 161) * 0.2f).to(device).to(dtype);
  const Tensor r = seeded_randn({4, 16, 10, 10}, 162).to(device).to(dtype).contiguous(format);
  const TensorOptions f32{.dtype = DType::f32, .device = device};
  const Tensor rm = zeros({16}, f32), rv = ones({16}, f32);
  const Tensor y = conv2d(x, w.contiguous(format), Tensor(), 1, 1);
  JoinRun run;
  run.backend = conv_last_backend();
  const Tensor out = batch_norm_relu(y, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5, x);
  const Tensor loss = sum(mul(out, r));
  Profiler prof;
  loss.backward();
  prof.stop();
  for (const ProfileRow& row : prof.rows())
    if (row.name == "add" && row.phase == ProfilePhase::backward) run.backward_adds += row.calls;
  set_conv_library(true);
  run.gx = x.grad().to(Device::cpu()).to(DType::f32);
  return run;
}

// On the CPU oneDNN's backward data cannot add into its output: the node adds, and x's
// gradient is the im2col route's.
TEST(ConvLibrary, InputGradientJoinsTheShortcutsWhenTheSlotDeclines) {
  SKIP_WITHOUT_ONEDNN();
  for (const MemoryFormat format : {MemoryFormat::channels_last, MemoryFormat::contiguous}) {
    SCOPED_TRACE(format == MemoryFormat::channels_last ? "channels_last" : "contiguous");
    const JoinRun lib = run_join(true, Device::cpu(), DType::f32, format);
    const JoinRun ref = run_join(false, Device::cpu(), DType::f32, format);
    ASSERT_EQ(lib.backend, ConvBackend::onednn);
    ASSERT_EQ(ref.backend, ConvBackend::im2col);
    EXPECT_GE(ref.backward_adds, 1) << "the block's input gets two gradients";
    expect_close(lib.gx, ref.gx, kF32, "x's gradient");
  }
}

TEST(ConvLibrary, StatusNamesOneDnnAndItsCache) {
  SKIP_WITHOUT_ONEDNN();
  const std::string s = conv_library_status();
  EXPECT_NE(s.find("oneDNN 2."), std::string::npos) << s;
  EXPECT_NE(s.find("primitive cache"), std::string::npos) << s;
  EXPECT_EQ(s.find("primitive cache 0"), std::string::npos) << "oneDNN's cache is off: " << s;
}

TEST(ConvLibrary, Conv2dPaddedWithBias) {
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(conv2d_fn(1, 1, 1, 1), seeded_randn({2, 3, 9, 8}, 1),
                       seeded_randn({5, 3, 3, 3}, 2), seeded_randn({5}, 3), ConvBackend::onednn,
                       kF32);
}

TEST(ConvLibrary, Conv2dStrideDilationNoBias) {
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(conv2d_fn(2, 2, 2, 1), seeded_randn({3, 4, 11, 10}, 4),
                       seeded_randn({6, 4, 3, 3}, 5), Tensor(), ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, Conv2dUnevenGeometry) {
  // A stride that leaves input rows unread (oneDNN's right padding below the left one), a
  // rectangular kernel, per-dim stride, padding and dilation.
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(conv2d_fn(Size2d(2, 3), Size2d(1, 0), Size2d(1, 2), 1),
                       seeded_randn({2, 3, 10, 13}, 6), seeded_randn({4, 3, 3, 2}, 7),
                       seeded_randn({4}, 8), ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, Conv2dStrideLargerThanKernel) {
  // A 1×1 kernel at stride 3 skips two of every three rows and columns: oneDNN's right
  // padding is negative here (-2).
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(conv2d_fn(3, 0, 1, 1), seeded_randn({2, 3, 9, 9}, 60),
                       seeded_randn({4, 3, 1, 1}, 61), seeded_randn({4}, 62), ConvBackend::onednn,
                       kF32);
}

// Notes [Weight gradients of small output planes] and [Convolutions onto small planes]
// (src/cpu/conv_small_plane.cpp): with at most 4 output positions an image every pass is GEMMs
// over the windows' valid taps (NCHW between transposes); 6 positions stay with oneDNN.
TEST(ConvLibrary, Conv2dSmallOutputPlanes) {
  SKIP_WITHOUT_ONEDNN();
  struct Case {
    Shape x, w;
    Size2d stride, padding, dilation;
    bool bias;
  };
  const Case cases[] = {
      {{5, 6, 2, 2}, {7, 6, 3, 3}, 1, 1, 1, true},   // 2×2, padded
      {{3, 5, 4, 4}, {4, 5, 3, 3}, 2, 1, 1, false},  // 2×2, stride 2
      {{2, 3, 5, 4}, {6, 3, 3, 2}, Size2d(2, 3), Size2d(0, 1), Size2d(1, 2), true},  // 2×2
      {{4, 8, 3, 3}, {5, 8, 3, 3}, 1, 0, 1, true},                                   // 1×1
      {{2, 3, 1, 6}, {4, 3, 1, 3}, 1, 0, 1, true},                                   // 1×4
      {{2, 3, 2, 5}, {4, 3, 1, 3}, 1, 0, 1, true},                                   // 2×3: oneDNN
      {{3, 5, 2, 1}, {4, 5, 2, 2}, 1, Size2d(0, 2), 1, true},  // 1×4, two windows on padding only
      {{2, 4, 4, 4}, {5, 4, 3, 3}, 1, 1, 2, false},            // 2×2, dilated: runs of one tap
  };
  uint64_t seed = 700;
  for (const Case& c : cases) {
    for (const bool nhwc : {false, true}) {
      SCOPED_TRACE(c.x.to_string() + (nhwc ? " channels_last" : " NCHW"));
      seed += 3;
      Tensor x = seeded_randn(c.x, seed);
      if (nhwc) x = x.contiguous(MemoryFormat::channels_last);
      const Tensor w = seeded_randn(c.w, seed + 1);
      const Tensor b = c.bias ? seeded_randn({c.w[0]}, seed + 2) : Tensor();
      check_against_im2col(conv2d_fn(c.stride, c.padding, c.dilation, 1), x, w, b,
                           ConvBackend::onednn, kF32);
    }
  }
}

TEST(ConvLibrary, Conv2dNonContiguousInput) {
  // x a permuted view ([N, H, W, C] memory): the op hands the library a contiguous copy, and
  // the gradient flows back through the permute.
  SKIP_WITHOUT_ONEDNN();
  const ConvFn f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv2d(x.permute({0, 3, 1, 2}), w, b, 1, 1);
  };
  check_against_im2col(f, seeded_randn({2, 9, 8, 3}, 63), seeded_randn({5, 3, 3, 3}, 64),
                       seeded_randn({5}, 65), ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, Conv2dGroups) {
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(conv2d_fn(1, 1, 1, 2), seeded_randn({2, 4, 7, 7}, 9),
                       seeded_randn({6, 2, 3, 3}, 10), seeded_randn({6}, 11), ConvBackend::onednn,
                       kF32);
}

TEST(ConvLibrary, Conv2dDepthwise) {
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(conv2d_fn(2, 1, 1, 8), seeded_randn({2, 8, 9, 9}, 12),
                       seeded_randn({8, 1, 3, 3}, 13), seeded_randn({8}, 14), ConvBackend::onednn,
                       kF32);
}

TEST(ConvLibrary, Conv1dStridedDilatedGrouped) {
  SKIP_WITHOUT_ONEDNN();
  const ConvFn f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv1d(x, w, b, 2, 2, 2, 3);
  };
  check_against_im2col(f, seeded_randn({2, 6, 23}, 15), seeded_randn({9, 2, 3}, 16),
                       seeded_randn({9}, 17), ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, Conv1dUnbatched) {
  SKIP_WITHOUT_ONEDNN();
  const ConvFn f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv1d(x, w, b, 1, 1);
  };
  check_against_im2col(f, seeded_randn({3, 12}, 18), seeded_randn({4, 3, 5}, 19),
                       seeded_randn({4}, 20), ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, Conv3dPaddedStridedWithBias) {
  SKIP_WITHOUT_ONEDNN();
  const ConvFn f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv3d(x, w, b, Size3d(1, 2, 2), 1);
  };
  check_against_im2col(f, seeded_randn({2, 3, 5, 7, 6}, 21), seeded_randn({4, 3, 3, 3, 3}, 22),
                       seeded_randn({4}, 23), ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, Conv3dGroupsDilation) {
  SKIP_WITHOUT_ONEDNN();
  const ConvFn f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv3d(x, w, b, 1, Size3d(0, 1, 2), Size3d(1, 2, 2), 2);
  };
  check_against_im2col(f, seeded_randn({1, 4, 4, 8, 8}, 24), seeded_randn({6, 2, 2, 3, 3}, 25),
                       Tensor(), ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, OnlyWeightNeedsGrad) {
  // The first layer of a network: x needs no gradient, so the forward promises only the
  // filter backward.
  SKIP_WITHOUT_ONEDNN();
  Tensor x = seeded_randn({2, 1, 12, 12}, 26), w = seeded_randn({4, 1, 3, 3}, 27),
         b = seeded_randn({4}, 28);
  Tensor grads[2][2];
  for (bool library : {false, true}) {
    set_conv_library(library);
    Tensor wl = w.detach(), bl = b.detach();
    wl.requires_grad_(true);
    bl.requires_grad_(true);
    Tensor y = conv2d(x, wl, bl, 1, 1);
    EXPECT_EQ(conv_last_backend(), library ? ConvBackend::onednn : ConvBackend::im2col);
    (y * y).sum().backward();
    grads[library][0] = wl.grad();
    grads[library][1] = bl.grad();
  }
  set_conv_library(true);
  expect_close(grads[1][0], grads[0][0], kF32, "grad weight");
  expect_close(grads[1][1], grads[0][1], kF32, "grad bias");
}

TEST(ConvLibrary, InferenceWithoutGrad) {
  SKIP_WITHOUT_ONEDNN();
  const Tensor x = seeded_randn({4, 3, 16, 16}, 29), w = seeded_randn({8, 3, 5, 5}, 30),
               b = seeded_randn({8}, 31);
  NoGradGuard no_grad;
  set_conv_library(false);
  const Tensor ref = conv2d(x, w, b, 1, 2);
  set_conv_library(true);
  const Tensor y = conv2d(x, w, b, 1, 2);
  EXPECT_EQ(conv_last_backend(), ConvBackend::onednn) << conv_fallback_reason();
  expect_close(y, ref, kF32, "output");
}

TEST(ConvLibrary, OneAndTwoThreadsAgree) {
  SKIP_WITHOUT_ONEDNN();
  const int before = get_num_threads();
  std::vector<ConvRun> runs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    runs.push_back(run_conv(conv2d_fn(1, 1, 1, 1), seeded_randn({8, 16, 14, 14}, 32),
                            seeded_randn({32, 16, 3, 3}, 33), seeded_randn({32}, 34), true));
    EXPECT_EQ(runs.back().backend, ConvBackend::onednn) << runs.back().reason;
  }
  set_num_threads(before);
  expect_close(runs[1].y, runs[0].y, kF32, "output");
  expect_close(runs[1].gw, runs[0].gw, kF32, "grad weight");
  expect_close(runs[1].gx, runs[0].gx, kF32, "grad input");
}

TEST(ConvLibrary, RepeatedCallsGiveTheSameResult) {
  // The second call runs the cached primitive.
  SKIP_WITHOUT_ONEDNN();
  const ConvRun a = run_conv(conv2d_fn(1, 1, 1, 1), seeded_randn({2, 3, 8, 8}, 35),
                             seeded_randn({4, 3, 3, 3}, 36), seeded_randn({4}, 37), true);
  const ConvRun b = run_conv(conv2d_fn(1, 1, 1, 1), seeded_randn({2, 3, 8, 8}, 35),
                             seeded_randn({4, 3, 3, 3}, 36), seeded_randn({4}, 37), true);
  expect_close(b.y, a.y, 0.0, "output");
  expect_close(b.gw, a.gw, 0.0, "grad weight");
}

TEST(ConvLibrary, Bf16AgainstF32Im2col) {
  // bf16 operands (8 bits of mantissa) computed by oneDNN with f32 accumulation: within 2% of
  // the largest value of the f32 reference. A CPU whose oneDNN has no bf16 convolution declines
  // with a reason and the im2col path runs.
  SKIP_WITHOUT_ONEDNN();
  const Tensor x = seeded_randn({2, 4, 10, 10}, 38), w = seeded_randn({6, 4, 3, 3}, 39),
               b = seeded_randn({6}, 40);
  const ConvRun probe = run_conv(conv2d_fn(1, 1, 1, 1), x, w, b, true, Device::cpu(), DType::bf16);
  if (probe.backend != ConvBackend::onednn)
    GTEST_SKIP() << "oneDNN declines bf16 on this CPU: " << probe.reason;
  check_against_im2col(conv2d_fn(1, 1, 1, 1), x, w, b, ConvBackend::onednn, 2e-2, Device::cpu(),
                       DType::bf16);
}

TEST(ConvLibrary, F64FallsBackWithTheReason) {
  SKIP_WITHOUT_ONEDNN();  // without it the reason is "oneDNN not found"
  const Tensor x = seeded_randn({1, 2, 5, 5}, 41).to(DType::f64),
               w = seeded_randn({3, 2, 3, 3}, 42).to(DType::f64);
  const Tensor y = conv2d(x, w);
  EXPECT_EQ(conv_last_backend(), ConvBackend::im2col);
  EXPECT_NE(conv_fallback_reason().find("f64"), std::string::npos) << conv_fallback_reason();
  set_conv_library(false);
  const Tensor ref = conv2d(x, w);
  set_conv_library(true);
  expect_close(y.to(DType::f32), ref.to(DType::f32), 0.0, "output");
}

TEST(ConvLibrary, GradcheckThroughTheLibraryRouteInF64Falls) {
  // f64 (gradcheck's dtype) never reaches the library, so the im2col path's gradcheck holds;
  // the f32 library path is checked against it above.
  const Tensor x = seeded_randn({1, 2, 5, 5}, 43), w = seeded_randn({3, 2, 3, 3}, 44);
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], Tensor(), 1, 1); }, {x, w}));
}

TEST(ConvLibrary, ErrorsStillNameTheOp) {
  const Tensor x = seeded_randn({1, 3, 5, 5}, 45);
  const std::string e = test_util::error_of([&] { conv2d(x, seeded_randn({4, 2, 3, 3}, 46)); });
  EXPECT_NE(e.find("conv2d: input has 3 channels, expected 2"), std::string::npos) << e;
  const std::string e3 = test_util::error_of([&] {
    conv3d(seeded_randn({1, 2, 3, 3, 3}, 47), seeded_randn({4, 2, 5, 1, 1}, 48));
  });
  EXPECT_NE(e3.find("conv3d: kernel depth 5"), std::string::npos) << e3;
}

TEST(ConvLibrary, Conv2dModuleRunsOnOneDnn) {
  SKIP_WITHOUT_ONEDNN();
  nn::Conv2d conv(3, 8, 3, 1, 1);
  const Tensor y = conv(seeded_randn({2, 3, 6, 6}, 49));
  EXPECT_EQ(conv_last_backend(), ConvBackend::onednn) << conv_fallback_reason();
  y.sum().backward();
  EXPECT_TRUE(conv->weight().grad().defined());
  EXPECT_TRUE(conv->bias().grad().defined());
}

// Without oneDNN (EMBER_ONEDNN_LIBRARY naming a file that does not exist: the loader tries
// only that) the im2col path runs and the reason says what was missing. The loader runs once
// per process, so this runs in a fresh one (a threadsafe death test re-executes the binary).
// The child of the test below: exits 0 when the im2col path ran with the loader's reason.
[[noreturn]] void convolve_without_onednn() {
  setenv("EMBER_ONEDNN_LIBRARY", "/nonexistent/libdnnl.so.2", 1);
  const Tensor x = seeded_randn({1, 2, 5, 5}, 50), w = seeded_randn({3, 2, 3, 3}, 51);
  const Tensor y = conv2d(x, w);
  const std::string why = conv_fallback_reason();
  const bool ok = conv_last_backend() == ConvBackend::im2col &&
                  why.find("oneDNN not found") != std::string::npos &&
                  why.find("/nonexistent/libdnnl.so.2") != std::string::npos &&
                  conv_library_status().find("oneDNN not found") != std::string::npos &&
                  y.shape() == Shape({1, 3, 3, 3});
  std::exit(ok ? 0 : 1);
}

TEST(ConvLibraryDeathTest, MissingOneDnnFallsBackWithTheReason) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(convolve_without_onednn(), ::testing::ExitedWithCode(0), "");
}

// ---- transposed convolutions (Note [Transposed convolutions in the library]) ----

ConvFn conv_transpose2d_fn(Size2d stride, Size2d padding, Size2d output_padding, int64_t groups,
                           Size2d dilation) {
  return [=](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation);
  };
}

ConvFn conv_transpose3d_fn(Size3d stride, Size3d padding, Size3d output_padding, int64_t groups,
                           Size3d dilation) {
  return [=](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv_transpose3d(x, w, b, stride, padding, output_padding, groups, dilation);
  };
}

TEST(ConvLibrary, ConvTranspose2dStridedOutputPaddingWithBias) {
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(conv_transpose2d_fn(2, 1, 1, 1, 1), seeded_randn({2, 4, 6, 5}, 301),
                       seeded_randn({4, 3, 3, 3}, 302), seeded_randn({3}, 303), ConvBackend::onednn,
                       kF32);
}

TEST(ConvLibrary, ConvTranspose2dGroupsDilationUneven) {
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(
      conv_transpose2d_fn(Size2d(1, 3), Size2d(2, 0), Size2d(0, 2), 2, Size2d(2, 1)),
      seeded_randn({3, 4, 7, 4}, 304), seeded_randn({4, 3, 3, 2}, 305), Tensor(),
      ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, ConvTranspose1dStridedWithBias) {
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col([](const Tensor& x, const Tensor& w,
                          const Tensor& b) { return conv_transpose1d(x, w, b, 3, 1, 2, 1, 1); },
                       seeded_randn({2, 3, 9}, 306), seeded_randn({3, 5, 4}, 307),
                       seeded_randn({5}, 308), ConvBackend::onednn, kF32);
}

TEST(ConvLibrary, ConvTranspose3dStridedGroupedWithBias) {
  SKIP_WITHOUT_ONEDNN();
  check_against_im2col(conv_transpose3d_fn(Size3d(2, 1, 2), 1, Size3d(1, 0, 1), 2, 1),
                       seeded_randn({2, 4, 3, 4, 3}, 309), seeded_randn({4, 2, 3, 2, 3}, 310),
                       seeded_randn({4}, 311), ConvBackend::onednn, kF32);
}

// NHWC operands run the library NHWC and give channels_last outputs and input gradients.
TEST(ConvLibrary, ConvTransposeChannelsLastKeepsTheFormat) {
  SKIP_WITHOUT_ONEDNN();
  const Tensor x = seeded_randn({2, 4, 5, 6}, 312).contiguous(MemoryFormat::channels_last);
  check_against_im2col(conv_transpose2d_fn(2, 1, 1, 1, 1), x, seeded_randn({4, 3, 3, 3}, 313),
                       seeded_randn({3}, 314), ConvBackend::onednn, kF32);
  const ConvRun lib = run_conv(conv_transpose2d_fn(2, 1, 1, 1, 1), x,
                               seeded_randn({4, 3, 3, 3}, 313), seeded_randn({3}, 314), true);
  EXPECT_TRUE(lib.y.is_contiguous(MemoryFormat::channels_last));
  EXPECT_TRUE(lib.gx.is_contiguous(MemoryFormat::channels_last));
  const Tensor x3 = seeded_randn({1, 2, 3, 4, 3}, 315).contiguous(MemoryFormat::channels_last_3d);
  check_against_im2col(conv_transpose3d_fn(2, 0, 1, 1, 1), x3, seeded_randn({2, 3, 2, 2, 2}, 316),
                       Tensor(), ConvBackend::onednn, kF32);
  const ConvRun lib3 = run_conv(conv_transpose3d_fn(2, 0, 1, 1, 1), x3,
                                seeded_randn({2, 3, 2, 2, 2}, 316), Tensor(), true);
  EXPECT_TRUE(lib3.y.is_contiguous(MemoryFormat::channels_last_3d));
}

// The im2col path keeps the format too (it transposes its NCHW result).
TEST(ConvLibrary, ConvTransposeIm2colKeepsChannelsLast) {
  const Tensor x = seeded_randn({2, 4, 5, 6}, 317).contiguous(MemoryFormat::channels_last);
  const ConvRun ref = run_conv(conv_transpose2d_fn(2, 1, 1, 1, 1), x.contiguous(),
                               seeded_randn({4, 3, 3, 3}, 318), Tensor(), false);
  const ConvRun nhwc = run_conv(conv_transpose2d_fn(2, 1, 1, 1, 1), x,
                                seeded_randn({4, 3, 3, 3}, 318), Tensor(), false);
  ASSERT_EQ(nhwc.backend, ConvBackend::im2col);
  expect_close(nhwc.y, ref.y, 0.0, "output");
  expect_close(nhwc.gx, ref.gx, 0.0, "grad input");
  expect_close(nhwc.gw, ref.gw, 1e-6, "grad weight");
  set_conv_library(false);
  const Tensor y = conv_transpose2d(x, seeded_randn({4, 3, 3, 3}, 318), Tensor(), 2, 1, 1);
  set_conv_library(true);
  EXPECT_TRUE(y.is_contiguous(MemoryFormat::channels_last));
}

// An output_padding of at least the stride (allowed below the dilation) is no convolution's
// input gradient: the op's own path runs, and says why.
TEST(ConvLibrary, ConvTransposeOutputPaddingPastTheStrideFallsBack) {
  SKIP_WITHOUT_ONEDNN();
  const ConvFn f = conv_transpose2d_fn(1, 0, 1, 1, 2);
  const ConvRun lib = run_conv(f, seeded_randn({1, 2, 4, 4}, 319), seeded_randn({2, 3, 2, 2}, 320),
                               seeded_randn({3}, 321), true);
  EXPECT_EQ(lib.backend, ConvBackend::im2col);
  EXPECT_NE(lib.reason.find("output_padding"), std::string::npos) << lib.reason;
  const ConvRun ref = run_conv(f, seeded_randn({1, 2, 4, 4}, 319), seeded_randn({2, 3, 2, 2}, 320),
                               seeded_randn({3}, 321), false);
  expect_close(lib.y, ref.y, 0.0, "output");
  EXPECT_EQ(lib.y.shape(), Shape({1, 3, 7, 7}));  // (4 - 1)·1 + 2·(2 - 1) + 1 + 1
}

// ---- cuDNN (the GPU machine runs these; they skip without a CUDA device) ----

// cuDNN convolutions on for one test (the default, unless EMBER_CONV_CUDNN=0: Note [cuDNN
// convolutions by default] in src/ops/conv_library.cpp).
struct CudnnConvolutionsOn : ember_test::CudnnConvolutionsScope {
  CudnnConvolutionsOn() : ember_test::CudnnConvolutionsScope(true) {}
};

// cuDNN must be there for these: a GPU without it reports why in the failure.
#define SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN()            \
  SKIP_WITHOUT_CUDA();                                       \
  const CudnnConvolutionsOn cudnn_convolutions_on;           \
  ASSERT_EQ(conv_library_status(kGpu).rfind("cuDNN", 0), 0u) \
      << "cuDNN not loadable here: " << conv_library_status(kGpu)

constexpr double kCudnnF32 = 1e-4;   // f32 compute, no TF32; a different summation order
constexpr double kCudnnF16 = 5e-3;   // 11-bit mantissa operands, f32 accumulation
constexpr double kCudnnBf16 = 2e-2;  // 8-bit mantissa operands, f32 accumulation

TEST(CudaConvLibrary, StatusNamesCudnn) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  EXPECT_NE(conv_library_status(kGpu).find("cuDNN 9."), std::string::npos);
}

// The three modes and their shorthands (Note [cuDNN convolutions by default]); this one runs
// anywhere: only the setting is read back.
TEST(ConvLibrary, CudnnModesAndTheirShorthands) {
  const ember_test::CudnnConvolutionsScope restore(cudnn_convolution_mode());
  set_cudnn_convolutions(CudnnConvolutions::automatic);
  EXPECT_TRUE(cudnn_convolutions());
  set_cudnn_convolutions(false);
  EXPECT_EQ(cudnn_convolution_mode(), CudnnConvolutions::off);
  EXPECT_FALSE(cudnn_convolutions());
  set_cudnn_convolutions(true);
  EXPECT_EQ(cudnn_convolution_mode(), CudnnConvolutions::always);
  EXPECT_TRUE(cudnn_convolutions());
}

// By default f32 without TF32 runs im2col + cuBLAS, saying why; 16-bit convolutions and f32 with
// TF32 allowed take cuDNN; CudnnConvolutions::always gives it f32 too.
TEST(CudaConvLibrary, AutomaticModeKeepsPreciseF32OnIm2col) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  const ember_test::CudnnConvolutionsScope automatic(CudnnConvolutions::automatic);
  const Tensor x = seeded_randn({2, 3, 9, 8}, 150).to(kGpu),
               w = seeded_randn({4, 3, 3, 3}, 151).to(kGpu);
  ASSERT_EQ(get_float32_matmul_precision(), "highest");
  conv2d(x, w, Tensor(), 1, 1);
  EXPECT_EQ(conv_last_backend(), ConvBackend::im2col);
  EXPECT_NE(conv_fallback_reason().find("f32 without TF32"), std::string::npos)
      << conv_fallback_reason();
  conv2d(x.to(DType::bf16), w.to(DType::bf16), Tensor(), 1, 1);
  EXPECT_EQ(conv_last_backend(), ConvBackend::cudnn) << conv_fallback_reason();
  set_float32_matmul_precision("high");
  conv2d(x, w, Tensor(), 1, 1);
  set_float32_matmul_precision("highest");
  EXPECT_EQ(conv_last_backend(), ConvBackend::cudnn) << conv_fallback_reason();
  set_cudnn_convolutions(CudnnConvolutions::always);
  conv2d(x, w, Tensor(), 1, 1);
  EXPECT_EQ(conv_last_backend(), ConvBackend::cudnn) << conv_fallback_reason();
}

// On a GPU cuDNN's backward data adds the convolution's gradient into the shortcut's (beta 1):
// no `add` of the engine in the backward, and x's gradient is the im2col route's within the
// dtype's rounding, channels_last and NCHW, f32 (cuDNN always) and bf16.
TEST(CudaConvLibrary, InputGradientAddedIntoTheShortcuts) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  const ember_test::CudnnConvolutionsScope cudnn(true);
  for (const DType dtype : {DType::f32, DType::bf16})
    for (const MemoryFormat format : {MemoryFormat::channels_last, MemoryFormat::contiguous}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) +
                   (format == MemoryFormat::channels_last ? " channels_last" : " contiguous"));
      const JoinRun lib = run_join(true, kGpu, dtype, format);
      const JoinRun ref = run_join(false, kGpu, dtype, format);
      ASSERT_EQ(lib.backend, ConvBackend::cudnn) << conv_fallback_reason();
      ASSERT_EQ(ref.backend, ConvBackend::im2col);
      EXPECT_GE(ref.backward_adds, 1) << "the block's input gets two gradients";
      EXPECT_EQ(lib.backward_adds, 0) << "cuDNN's backward data did not add into the shortcut's";
      expect_close(lib.gx, ref.gx, dtype == DType::bf16 ? kCudnnBf16 : kCudnnF32, "x's gradient");
    }
}

TEST(CudaConvLibrary, Conv2dPaddedWithBiasF32) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  check_against_im2col(conv2d_fn(1, 1, 1, 1), seeded_randn({4, 3, 17, 16}, 101),
                       seeded_randn({8, 3, 3, 3}, 102), seeded_randn({8}, 103), ConvBackend::cudnn,
                       kCudnnF32, kGpu);
}

TEST(CudaConvLibrary, Conv2dStrideDilationUnevenF32) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  check_against_im2col(conv2d_fn(Size2d(2, 3), Size2d(1, 0), Size2d(1, 2), 1),
                       seeded_randn({2, 3, 10, 13}, 104), seeded_randn({4, 3, 3, 2}, 105),
                       seeded_randn({4}, 106), ConvBackend::cudnn, kCudnnF32, kGpu);
}

TEST(CudaConvLibrary, Conv2dGroupsAndDepthwiseF32) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  check_against_im2col(conv2d_fn(1, 1, 1, 2), seeded_randn({2, 4, 7, 7}, 107),
                       seeded_randn({6, 2, 3, 3}, 108), seeded_randn({6}, 109), ConvBackend::cudnn,
                       kCudnnF32, kGpu);
  check_against_im2col(conv2d_fn(2, 1, 1, 8), seeded_randn({2, 8, 9, 9}, 110),
                       seeded_randn({8, 1, 3, 3}, 111), Tensor(), ConvBackend::cudnn, kCudnnF32,
                       kGpu);
}

TEST(CudaConvLibrary, Conv1dF32) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  const ConvFn f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv1d(x, w, b, 2, 2, 2, 3);
  };
  check_against_im2col(f, seeded_randn({2, 6, 23}, 112), seeded_randn({9, 2, 3}, 113),
                       seeded_randn({9}, 114), ConvBackend::cudnn, kCudnnF32, kGpu);
}

TEST(CudaConvLibrary, Conv3dF32) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  const ConvFn f = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv3d(x, w, b, Size3d(1, 2, 2), 1);
  };
  check_against_im2col(f, seeded_randn({2, 3, 5, 7, 6}, 115), seeded_randn({4, 3, 3, 3, 3}, 116),
                       seeded_randn({4}, 117), ConvBackend::cudnn, kCudnnF32, kGpu);
  const ConvFn g = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv3d(x, w, b, 1, Size3d(0, 1, 2), Size3d(1, 2, 2), 2);
  };
  check_against_im2col(g, seeded_randn({1, 4, 4, 8, 8}, 118), seeded_randn({6, 2, 2, 3, 3}, 119),
                       Tensor(), ConvBackend::cudnn, kCudnnF32, kGpu);
}

TEST(CudaConvLibrary, Conv2dF16AndBf16) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  // Channel counts that are multiples of 8, as tensor-core engines like them.
  const Tensor x = seeded_randn({4, 16, 12, 12}, 120), w = seeded_randn({32, 16, 3, 3}, 121),
               b = seeded_randn({32}, 122);
  check_against_im2col(conv2d_fn(1, 1, 1, 1), x, w, b, ConvBackend::cudnn, kCudnnF16, kGpu,
                       DType::f16);
  check_against_im2col(conv2d_fn(1, 1, 1, 1), x, w, b, ConvBackend::cudnn, kCudnnBf16, kGpu,
                       DType::bf16);
}

TEST(CudaConvLibrary, ConvTranspose2dAnd3dF32) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  check_against_im2col(conv_transpose2d_fn(2, 1, 1, 1, 1), seeded_randn({2, 4, 6, 5}, 331),
                       seeded_randn({4, 3, 3, 3}, 332), seeded_randn({3}, 333), ConvBackend::cudnn,
                       kCudnnF32, kGpu);
  check_against_im2col(
      conv_transpose2d_fn(Size2d(1, 3), Size2d(2, 0), Size2d(0, 2), 2, Size2d(2, 1)),
      seeded_randn({3, 4, 7, 4}, 334), seeded_randn({4, 3, 3, 2}, 335), Tensor(),
      ConvBackend::cudnn, kCudnnF32, kGpu);
  check_against_im2col(conv_transpose3d_fn(Size3d(2, 1, 2), 1, Size3d(1, 0, 1), 2, 1),
                       seeded_randn({2, 4, 3, 4, 3}, 336), seeded_randn({4, 2, 3, 2, 3}, 337),
                       seeded_randn({4}, 338), ConvBackend::cudnn, kCudnnF32, kGpu);
  const Tensor x = seeded_randn({2, 4, 5, 6}, 339).contiguous(MemoryFormat::channels_last);
  check_against_im2col(conv_transpose2d_fn(2, 1, 1, 1, 1), x, seeded_randn({4, 3, 3, 3}, 340),
                       seeded_randn({3}, 341), ConvBackend::cudnn, kCudnnF32, kGpu);
  const ConvRun lib = run_conv(conv_transpose2d_fn(2, 1, 1, 1, 1), x,
                               seeded_randn({4, 3, 3, 3}, 340), seeded_randn({3}, 341), true, kGpu);
  EXPECT_TRUE(lib.y.is_contiguous(MemoryFormat::channels_last));
}

TEST(CudaConvLibrary, F64FallsBackWithTheReason) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  const Tensor x = seeded_randn({1, 2, 5, 5}, 123).to(kGpu).to(DType::f64);
  const Tensor w = seeded_randn({3, 2, 3, 3}, 124).to(kGpu).to(DType::f64);
  conv2d(x, w);
  EXPECT_EQ(conv_last_backend(), ConvBackend::im2col);
  EXPECT_NE(conv_fallback_reason().find("f64"), std::string::npos) << conv_fallback_reason();
}

TEST(CudaConvLibrary, DeterministicModeRepeatsBitwise) {
  // Engines cuDNN notes as nondeterministic are skipped in deterministic mode, so two runs
  // give the same bits (or the convolution runs im2col, which is deterministic too).
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  set_deterministic(true);
  const Tensor x = seeded_randn({16, 32, 24, 24}, 140), w = seeded_randn({64, 32, 3, 3}, 141),
               b = seeded_randn({64}, 142);
  const ConvRun a = run_conv(conv2d_fn(1, 1, 1, 1), x, w, b, true, kGpu);
  const ConvRun c = run_conv(conv2d_fn(1, 1, 1, 1), x, w, b, true, kGpu);
  set_deterministic(false);
  expect_close(c.y, a.y, 0.0, "output");
  expect_close(c.gx, a.gx, 0.0, "grad input");
  expect_close(c.gw, a.gw, 0.0, "grad weight");
  expect_close(c.gb, a.gb, 0.0, "grad bias");
}

TEST(CudaConvLibrary, CapturedStepEqualsEager) {
  // A small CNN's SGD steps, eager and as a replayed CUDA graph: the convolutions (cuDNN, with
  // their workspaces from the graph's pool) replay bitwise.
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  std::vector<float> losses[2];
  for (int captured = 0; captured < 2; ++captured) {
    manual_seed(5);
    nn::Module net =
        nn::Sequential({nn::Conv2d(1, 8, 3, 1, 1), nn::ReLU(), nn::Conv2d(8, 8, 3, 1, 1, 1, 2),
                        nn::Flatten(), nn::Linear(8 * 8 * 8, 10)});
    net->to(kGpu);
    optim::SGD opt(net->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    auto step = [&](const std::vector<Tensor>& in) {
      opt.zero_grad();
      Tensor loss = cross_entropy(net(in[0]), in[1]);
      loss.backward();
      opt.step();
      return std::vector<Tensor>{loss};
    };
    std::unique_ptr<train::CapturedStep> graph;
    if (captured) graph = std::make_unique<train::CapturedStep>(step);
    manual_seed(9);
    for (int s = 0; s < 5; ++s) {
      const std::vector<Tensor> batch = {randn({16, 1, 8, 8}, {.device = kGpu}),
                                         randint(0, 10, {16}, {.device = kGpu})};
      const Tensor loss = captured ? (*graph)(batch)[0] : step(batch)[0];
      if (!captured && s == 0)
        EXPECT_EQ(conv_last_backend(), ConvBackend::cudnn) << conv_fallback_reason();
      losses[captured].push_back(loss.item<float>());
    }
  }
  for (size_t i = 0; i < losses[0].size(); ++i)
    EXPECT_EQ(losses[1][i], losses[0][i]) << "step " << i;
  EXPECT_NE(losses[0].front(), losses[0].back()) << "the model did not train";
}

// Every parameter's gradient of a whole network, cuDNN against im2col on the same GPU (both
// f32, no TF32), and im2col on the GPU against the CPU for scale: relative 2-norms, the worst
// listed on failure. `smooth` swaps ReLU and max-pooling for GELU and average pooling, whose
// results move with rounding instead of jumping (a max-pool's argmax or a ReLU near zero can
// flip between two correct summation orders).
struct NetGrads {
  std::map<std::string, Tensor> grads;
  Tensor out;
};

NetGrads net_grads(const std::function<nn::Module()>& make, const Tensor& x, Device device,
                   bool library) {
  set_conv_library(library);
  manual_seed(21);
  nn::Module net = make();
  net->to(device);
  net->train();
  const Tensor out = net(x.to(device));
  manual_seed(22);
  (out * randn(out.shape()).to(device)).sum().backward();
  NetGrads r;
  r.out = out.detach().to(Device::cpu());
  for (const auto& [name, p] : net->named_parameters())
    if (p.grad().defined()) r.grads[name] = p.grad().to(Device::cpu());
  set_conv_library(true);
  return r;
}

// The worst relative 2-norm between two runs' gradients, and a table of the ten worst.
std::pair<double, std::string> worst_gradients(const NetGrads& got, const NetGrads& want) {
  // A gradient near zero (a convolution's bias before a training-mode BatchNorm is zero in exact
  // arithmetic) is rounding noise in both runs: each norm is floored at 1e-4 of the largest.
  double largest = 0;
  for (const auto& [name, g] : want.grads)
    largest = std::max<double>(largest, norm(g).item<float>());
  std::vector<std::pair<double, std::string>> errs;
  for (const auto& [name, g] : want.grads) {
    const auto it = got.grads.find(name);
    if (it == got.grads.end()) {
      errs.push_back({1e9, name + " (missing)"});
      continue;
    }
    const double n = norm(g).item<float>();
    const double e = norm(it->second - g).item<float>();
    errs.push_back({e / std::max(n, 1e-4 * largest), name});
  }
  std::sort(errs.rbegin(), errs.rend());
  std::string table;
  for (size_t i = 0; i < std::min<size_t>(10, errs.size()); ++i)
    table += "  " + errs[i].second + ": " + std::to_string(errs[i].first) + "\n";
  return {errs.empty() ? 0.0 : errs.front().first, table};
}

nn::Module residual_net(bool smooth) {
  auto act = [smooth]() -> nn::Module {
    if (smooth) return nn::GELU();
    return nn::ReLU();
  };
  auto block = [&](int64_t c) {
    return nn::Sequential({nn::Conv2d(c, c, 3, 1, 1, 1, 1, false), nn::BatchNorm2d(c), act(),
                           nn::Conv2d(c, c, 3, 1, 1, 1, 1, false), nn::BatchNorm2d(c)});
  };
  nn::Module pool = smooth ? nn::Module(nn::AvgPool2d(2)) : nn::Module(nn::MaxPool2d(2));
  return nn::Sequential({nn::Conv2d(3, 16, 3, 1, 1, 1, 1, false), nn::BatchNorm2d(16), act(), pool,
                         block(16), act(), nn::Conv2d(16, 32, 3, 2, 1, 1, 1, false),
                         nn::BatchNorm2d(32), act(), block(32), nn::AdaptiveAvgPool2d(1),
                         nn::Flatten(), nn::Linear(32, 10)});
}

TEST(ConvLibrary, SmoothResidualNetGradientsMatchIm2col) {
  const ConvRun probe = run_conv(conv2d_fn(1, 1, 1, 1), seeded_randn({1, 2, 4, 4}, 1),
                                 seeded_randn({2, 2, 3, 3}, 2), Tensor(), true);
  if (probe.backend != ConvBackend::onednn) GTEST_SKIP() << "no oneDNN here: " << probe.reason;
  manual_seed(3);
  const auto make = [] { return residual_net(true); };
  const Tensor x = randn({8, 3, 16, 16});
  const auto [e, t] = worst_gradients(net_grads(make, x, Device::cpu(), true),
                                      net_grads(make, x, Device::cpu(), false));
  EXPECT_LE(e, 1e-4) << "oneDNN against im2col, worst parameters:\n" << t;
}

void expect_cudnn_gradients_match(const std::function<nn::Module()>& make, const Tensor& x,
                                  double tolerance) {
  const CudnnConvolutionsOn cudnn_on;
  const NetGrads cpu = net_grads(make, x, Device::cpu(), false);
  const NetGrads im2col = net_grads(make, x, kGpu, false);
  const NetGrads cudnn = net_grads(make, x, kGpu, true);
  const auto [e_ref, t_ref] = worst_gradients(im2col, cpu);
  const auto [e, t] = worst_gradients(cudnn, im2col);
  EXPECT_LE(e, tolerance) << "cuDNN against im2col on the GPU, worst parameters:\n"
                          << t << "im2col on the GPU against the CPU, worst parameters:\n"
                          << t_ref;
  EXPECT_LE(e_ref, tolerance) << "im2col on the GPU against the CPU:\n" << t_ref;
}

TEST(CudaConvLibrary, SmoothResidualNetGradientsMatchIm2col) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  manual_seed(3);
  expect_cudnn_gradients_match([] { return residual_net(true); }, randn({8, 3, 16, 16}), 1e-4);
}

TEST(CudaConvLibrary, ResidualNetGradientsMatchIm2col) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  manual_seed(3);
  expect_cudnn_gradients_match([] { return residual_net(false); }, randn({8, 3, 16, 16}), 1e-3);
}

TEST(CudaConvLibrary, ResNet18GradientsMatchIm2col) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  manual_seed(3);
  expect_cudnn_gradients_match([] { return nn::Module(models::resnet18({.num_classes = 10})); },
                               randn({4, 3, 64, 64}), 1e-3);
}

// With EMBER_CONV_AUTOTUNE=1 (read once per process, so in a fresh one) the plans are the
// fastest of several engines, timed at the first call: still the same results; and so with
// EMBER_CONV_NONDETERMINISTIC=1, whose candidates may add with atomics.
[[noreturn]] void convolve_autotuned(bool nondeterministic) {
  setenv("EMBER_CONV_AUTOTUNE", "1", 1);
  if (nondeterministic) setenv("EMBER_CONV_NONDETERMINISTIC", "1", 1);
  const ConvFn f = conv2d_fn(1, 1, 1, 1);
  const Tensor x = seeded_randn({8, 16, 20, 20}, 130), w = seeded_randn({32, 16, 3, 3}, 131),
               b = seeded_randn({32}, 132);
  const ConvRun ref = run_conv(f, x, w, b, false);
  bool ok = true;
  for (int call = 0; call < 2; ++call) {  // the first call tunes, the second runs the pick
    const ConvRun lib = run_conv(f, x, w, b, true, kGpu);
    ok = ok && lib.backend == ConvBackend::cudnn;
    for (const auto& [got, want] : {std::pair{lib.y, ref.y}, std::pair{lib.gx, ref.gx},
                                    std::pair{lib.gw, ref.gw}, std::pair{lib.gb, ref.gb}}) {
      const double scale = want.abs().max().item<float>();
      ok = ok && (got - want).abs().max().item<float>() <= kCudnnF32 * (1.0 + scale);
    }
  }
  std::exit(ok ? 0 : 1);
}

TEST(CudaConvLibraryDeathTest, AutotunedPlansMatchIm2col) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(convolve_autotuned(false), ::testing::ExitedWithCode(0), "");
}

TEST(CudaConvLibraryDeathTest, NondeterministicEnginesMatchIm2col) {
  SKIP_WITHOUT_CUDA_OR_FAIL_WITHOUT_CUDNN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(convolve_autotuned(true), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ember

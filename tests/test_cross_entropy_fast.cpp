// tests/test_cross_entropy_fast.cpp — the one-pass CUDA cross-entropy kernels (Note
// [Cross-entropy in one pass] in src/cuda/loss.cu) against the CPU, for the shapes that take
// each path: C = 50304 (a block per row, 16-byte loads), C = 50257 (odd: most rows unaligned,
// element loads), C = 7 and C = 1 (a few threads per row, a partial chunk), and a view whose
// rows start off a 16-byte boundary; bf16, f16 (under autocast, read as they are), f32 and f64
// logits; label smoothing 0.1, ignore_index rows, NaN and infinite logits.
//
// Tolerances, against the CPU's two-pass form with f64 sums: the loss within 2e-6 relative plus
// 2e-6 of the largest loss (the forward's __expf puts lse within ~2e-6 at worst: Note
// [Cross-entropy in one pass]); the gradient within 5e-5 relative plus 2e-7 of the largest for
// f32 logits (where softmax is close to ε/C or to 1 the gradient cancels, and the GPU contracts
// s·(p - ε/C) - s·(1 - ε) into one FMA where the CPU rounds twice: C = 1 with smoothing gives
// -6e-8 against 0; a few elements of [64, 7] rows came out 2.2e-5 off, more than the exps'
// ulps explain, not traced further) and one rounding to the logits'
// dtype for bf16/f16 (2^-8, 2^-10 relative); f64 within 1e-12. Skips when no CUDA device is
// present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;

using Edit = std::function<void(std::vector<float>& logits, int64_t n, int64_t c)>;
using ember_test::kGpu;

struct LogitsCase {
  int64_t n = 8;
  int64_t c = 50304;
  DType dtype = DType::bf16;
  int64_t offset = 0;  // the logits start this many elements into their buffer
  Edit edit;           // NaN or infinite logits, written before the cast to dtype
};

bool is_half(DType t) { return t == DType::bf16 || t == DType::f16; }

// The dtype of the loss, and of the CPU reference (the 16-bit logits' exact values in f32).
DType wide(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

struct Tolerance {
  double loss_rtol, loss_atol, grad_rtol, grad_atol;
};

Tolerance tolerance(DType t) {
  switch (t) {
    case DType::f64: return {1e-12, 1e-12, 1e-12, 1e-14};
    case DType::bf16: return {2e-6, 2e-6, 1.0 / 256, 1e-7};
    case DType::f16: return {2e-6, 2e-6, 1.0 / 1024, 1e-7};
    default: return {2e-6, 2e-6, 5e-5, 2e-7};  // see the f32 gradient note above
  }
}

std::string name_of(const LogitsCase& k, double smoothing) {
  return "cross_entropy [" + std::to_string(k.n) + ", " + std::to_string(k.c) + "] " +
         std::string(dtype_name(k.dtype)) + " offset " + std::to_string(k.offset) + " smoothing " +
         std::to_string(smoothing);
}

// The logits' buffer (CPU, in k.dtype): k.offset zeros, then n·c values of randn·4, edited.
Tensor stored_logits(const LogitsCase& k) {
  manual_seed(static_cast<uint64_t>(k.c * 131 + k.n));
  std::vector<float> v = (randn({k.n * k.c}) * 4.0).to_vector<float>();
  if (k.edit) k.edit(v, k.n, k.c);
  std::vector<float> flat(static_cast<size_t>(k.offset), 0.0f);
  flat.insert(flat.end(), v.begin(), v.end());
  return from_vector(flat, {k.offset + k.n * k.c}).to(k.dtype);
}

// Labels in [0, c); rows 0 and n - 1 ignored (ignore_index -100).
Tensor labels_of(const LogitsCase& k) {
  manual_seed(static_cast<uint64_t>(k.c + 17));
  const Tensor t = randint(0, k.c, {k.n});
  return index_fill(t, 0, from_vector(std::vector<int64_t>{0, k.n - 1}, {2}), -100.0);
}

// [n, c] logits from the buffer: a view at k.offset.
Tensor rows_of(const Tensor& buffer, const LogitsCase& k) {
  return buffer.narrow(0, k.offset, k.n * k.c).reshape({k.n, k.c});
}

// Forward (per row, mean, sum) and backward of per-row losses weighted by w, on the GPU (16-bit
// logits under autocast, read as they are) against the CPU on the logits' exact values.
void expect_matches_cpu(const LogitsCase& k, double smoothing) {
  const std::string what = name_of(k, smoothing);
  const Tolerance tol = tolerance(k.dtype);
  const Tensor stored = stored_logits(k);
  const Tensor target = labels_of(k);
  const CrossEntropyOptions per_row{.reduction = Reduction::none, .label_smoothing = smoothing};
  manual_seed(3);
  const Tensor w = randn({k.n});

  Tensor xc = rows_of(stored, k).to(wide(k.dtype)).requires_grad_();
  const Tensor want = cross_entropy(xc, target, per_row);
  sum(want * w.to(want.dtype())).backward();

  Tensor leaf = stored.to(kGpu).requires_grad_();
  const Tensor tg = target.to(kGpu);
  Tensor got, got_mean, got_sum;
  {
    AutocastGuard autocast(is_half(k.dtype) ? k.dtype : DType::bf16, is_half(k.dtype));
    const Tensor x = rows_of(leaf, k);
    got = cross_entropy(x, tg, per_row);
    got_mean = cross_entropy(x.detach(), tg, {.label_smoothing = smoothing});
    got_sum =
        cross_entropy(x.detach(), tg, {.reduction = Reduction::sum, .label_smoothing = smoothing});
  }
  ASSERT_EQ(got.dtype(), wide(k.dtype)) << what;
  sum(got * w.to(kGpu).to(got.dtype())).backward();

  EXPECT_TRUE(ember_test::check_close(got.detach().to(Device::cpu()), want.detach(), tol.loss_rtol,
                                      tol.loss_atol, what + " loss"));
  const Tensor xd = xc.detach();
  EXPECT_TRUE(ember_test::check_close(got_mean.to(Device::cpu()),
                                      cross_entropy(xd, target, {.label_smoothing = smoothing}),
                                      tol.loss_rtol, tol.loss_atol, what + " mean"));
  EXPECT_TRUE(ember_test::check_close(
      got_sum.to(Device::cpu()),
      cross_entropy(xd, target, {.reduction = Reduction::sum, .label_smoothing = smoothing}),
      tol.loss_rtol, tol.loss_atol, what + " sum"));
  ASSERT_TRUE(leaf.grad().defined()) << what;
  ASSERT_EQ(leaf.grad().dtype(), k.dtype) << what;
  const Tensor grad = rows_of(leaf.grad(), k).to(wide(k.dtype)).to(Device::cpu());
  EXPECT_TRUE(
      ember_test::check_close(grad, xc.grad(), tol.grad_rtol, tol.grad_atol, what + " grad"));
}

void expect_matches_cpu(const LogitsCase& k) {
  for (double smoothing : {0.0, 0.1}) expect_matches_cpu(k, smoothing);
}

constexpr DType kDTypes[] = {DType::bf16, DType::f16, DType::f32};

TEST(CrossEntropyFast, WideAlignedRowsMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (DType t : kDTypes) expect_matches_cpu({.n = 8, .c = 50304, .dtype = t});
}

TEST(CrossEntropyFast, F64WideRowsMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  expect_matches_cpu({.n = 8, .c = 50304, .dtype = DType::f64});
  expect_matches_cpu({.n = 8, .c = 50257, .dtype = DType::f64});
  expect_matches_cpu({.n = 64, .c = 7, .dtype = DType::f64});
}

TEST(CrossEntropyFast, OddClassCountTakesElementLoads) {
  SKIP_WITHOUT_CUDA();
  for (DType t : kDTypes) expect_matches_cpu({.n = 8, .c = 50257, .dtype = t});
}

TEST(CrossEntropyFast, UnalignedViewTakesElementLoads) {
  SKIP_WITHOUT_CUDA();
  for (DType t : kDTypes) expect_matches_cpu({.n = 8, .c = 50304, .dtype = t, .offset = 1});
}

TEST(CrossEntropyFast, FewClassesMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (DType t : kDTypes) {
    expect_matches_cpu({.n = 64, .c = 7, .dtype = t});
    expect_matches_cpu({.n = 16, .c = 1, .dtype = t});
    expect_matches_cpu({.n = 300, .c = 1000, .dtype = t});  // a warp per row, 16-byte loads
    expect_matches_cpu({.n = 64, .c = 7, .dtype = t, .offset = 3});
  }
}

// Row 1 holds one NaN: its loss and gradient are NaN, the other rows unaffected, as on the CPU.
TEST(CrossEntropyFast, NanLogitMakesItsRowNan) {
  SKIP_WITHOUT_CUDA();
  const Edit nan_in_row_1 = [](std::vector<float>& v, int64_t, int64_t c) {
    v[static_cast<size_t>(c + c / 2)] = NAN;
  };
  for (DType t : kDTypes)
    for (int64_t c : {50304, 50257, 7}) {
      const LogitsCase k{.n = 8, .c = c, .dtype = t, .edit = nan_in_row_1};
      expect_matches_cpu(k);
      AutocastGuard autocast(is_half(t) ? t : DType::bf16, is_half(t));
      const std::vector<float> loss =
          cross_entropy(rows_of(stored_logits(k).to(kGpu), k), labels_of(k).to(kGpu),
                        {.reduction = Reduction::none})
              .to(Device::cpu())
              .to_vector<float>();
      EXPECT_TRUE(std::isnan(loss[1])) << name_of(k, 0.0);
      EXPECT_TRUE(std::isfinite(loss[2])) << name_of(k, 0.0);
    }
}

// Row 1 masked (every other logit -inf: finite), row 2 all -inf (NaN, as the two-pass form's
// exp(-inf - -inf)), row 3 one +inf (NaN), row 4 -inf but for its last logit.
TEST(CrossEntropyFast, InfiniteLogitsAsTheCpu) {
  SKIP_WITHOUT_CUDA();
  const Edit infinities = [](std::vector<float>& v, int64_t, int64_t c) {
    auto at = [&](int64_t r, int64_t j) -> float& { return v[static_cast<size_t>(r * c + j)]; };
    for (int64_t j = 0; j < c; j += 2) at(1, j) = -INFINITY;
    for (int64_t j = 0; j < c; ++j) at(2, j) = -INFINITY;
    at(3, c / 3) = INFINITY;
    for (int64_t j = 0; j + 1 < c; ++j) at(4, j) = -INFINITY;
  };
  for (DType t : kDTypes)
    for (int64_t c : {50304, 50257, 7})
      expect_matches_cpu({.n = 8, .c = c, .dtype = t, .edit = infinities});
}

// The element-by-thread mapping depends on C alone (Note [Cross-entropy in one pass]): bf16
// logits, aligned or not, give bitwise the values of their f32 cast (Note [Cross-entropy of
// 16-bit logits] in src/ops/loss.cpp), and a second run gives bitwise the first.
TEST(CrossEntropyFast, Bf16IsTheCastPathBitwiseOnEveryPath) {
  SKIP_WITHOUT_CUDA();
  for (int64_t c : {50304, 50257, 7})
    for (int64_t offset : {0, 1}) {
      const LogitsCase k{.n = 8, .c = c, .dtype = DType::bf16, .offset = offset};
      const std::string what = name_of(k, 0.1);
      const Tensor tg = labels_of(k).to(kGpu);
      const CrossEntropyOptions o{.reduction = Reduction::none, .label_smoothing = 0.1};
      const Tensor stored = stored_logits(k).to(kGpu);
      manual_seed(4);
      const Tensor w = randn({k.n}).to(kGpu);
      std::vector<float> loss[2], grad[2];
      for (int run = 0; run < 2; ++run) {
        Tensor a = stored.clone().requires_grad_();
        Tensor la;
        {
          AutocastGuard autocast(DType::bf16);
          la = cross_entropy(rows_of(a, k), tg, o);
        }
        sum(la * w).backward();
        loss[run] = la.detach().to(Device::cpu()).to_vector<float>();
        grad[run] = a.grad().to(DType::f32).to(Device::cpu()).to_vector<float>();
      }
      EXPECT_EQ(loss[0], loss[1]) << what << ": a second run";
      EXPECT_EQ(grad[0], grad[1]) << what << ": a second run";
      Tensor b = rows_of(stored, k).clone().requires_grad_();  // aligned, bf16
      const Tensor lb = cross_entropy(b.to(DType::f32), tg, o);
      sum(lb * w).backward();
      EXPECT_EQ(loss[0], lb.detach().to(Device::cpu()).to_vector<float>()) << what;
      const std::vector<float> gb = b.grad().to(DType::f32).to(Device::cpu()).to_vector<float>();
      const std::vector<float> ga(grad[0].begin() + offset, grad[0].end());
      EXPECT_EQ(ga, gb) << what;
    }
}

TEST(CrossEntropyFast, OutOfRangeLabelInAWideRowSurfacesAtTheNextSync) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = randn({8, 50304}).to(DType::bf16).to(kGpu);
  std::vector<int64_t> t(8, 3);
  t[5] = 50304;
  Tensor loss;
  {
    AutocastGuard autocast(DType::bf16);
    ASSERT_NO_THROW(loss = cross_entropy(x, from_vector(t, {8}).to(kGpu)));
  }
  const std::string msg = error_of([&] { (void)loss.item<float>(); });
  EXPECT_NE(msg.find("cross_entropy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("label 50304"), std::string::npos) << msg;
  EXPECT_NE(msg.find("position 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("50304 classes"), std::string::npos) << msg;
  t[5] = 50303;  // the device stays usable
  AutocastGuard autocast(DType::bf16);
  EXPECT_TRUE(std::isfinite(cross_entropy(x, from_vector(t, {8}).to(kGpu)).item<float>()));
}

}  // namespace

// tests/test_few_rows_gemm.cpp — the CUDA product of a few rows with a weight matrix (Note
// [Products of a few rows] in src/cuda/gemv.cu): a bf16/f16 linear of 1 to 4 rows, with bias
// and each epilogue, against the CPU's f32 computation of the same rounded operands, and
// equal to itself run to run.
#include <gtest/gtest.h>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"

namespace {

using namespace ember;

TEST(FewRowsGemm, CudaLinearOfFewRowsMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(11);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const int64_t m : {1, 2, 3, 4, 5}) {  // 5 rows: cuBLASLt, the same answers
      for (const Activation act : {Activation::none, Activation::relu, Activation::gelu_tanh}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " m " + std::to_string(m));
        const Tensor x = randn({m, 264}).to(dtype), w = (randn({72, 264}) * 0.1).to(dtype);
        const Tensor b = randn({72}).to(dtype);
        const Tensor want = linear(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32), act);
        const Tensor gx = x.to(Device::cuda(0)), gw = w.to(Device::cuda(0)),
                     gb = b.to(Device::cuda(0));
        const Tensor got = linear(gx, gw, gb, act).to(Device::cpu());
        EXPECT_EQ(got.dtype(), dtype);
        // One rounding to the 16-bit dtype of an f32 sum: within 1% of the largest value.
        const double scale = max(abs(want)).item<double>();
        EXPECT_LT(max(abs(got.to(DType::f32) - want)).item<double>(), 1e-2 * scale);
        // no bias, and the same bits again
        const Tensor plain = linear(gx, gw, Tensor(), act).to(Device::cpu());
        EXPECT_EQ(max(abs(plain.to(DType::f32) -
                          linear(gx, gw, Tensor(), act).to(Device::cpu()).to(DType::f32)))
                      .item<double>(),
                  0.0);
      }
    }
  }
}

}  // namespace

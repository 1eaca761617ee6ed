// src/cuda/conv_cudnn.cpp — the CUDA library convolution slots: declined for now (cuDNN's
// convolution graphs come next), so CUDA convolutions run im2col + GEMM as before.
#include "cuda/kernels.cuh"

namespace ember::cuda {

using backend::ConvBackwardArgs;
using backend::ConvForwardArgs;
using backend::ConvLibraryStatus;

namespace {
constexpr const char* kNotYet = "cuDNN convolutions are not built yet";
}

ConvLibraryStatus conv_library_forward(const ConvForwardArgs&) {
  return ConvLibraryStatus::declined(kNotYet);
}
ConvLibraryStatus conv_library_backward_data(const ConvBackwardArgs&) {
  return ConvLibraryStatus::declined(kNotYet);
}
ConvLibraryStatus conv_library_backward_filter(const ConvBackwardArgs&) {
  return ConvLibraryStatus::declined(kNotYet);
}
const char* conv_library_status(int) { return kNotYet; }

}  // namespace ember::cuda

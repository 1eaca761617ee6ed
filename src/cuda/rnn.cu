// src/cuda/rnn.cu — the fused LSTM step and its backward on CUDA: one thread per cell of
// src/kernels/rnn.hpp, with the device math library (DeviceMath), in a grid-stride loop.
#include "cuda/common.cuh"
#include "cuda/device_math.cuh"
#include "kernels/rnn.hpp"

namespace ember::cuda {
namespace {

template <typename T, typename Args>
__global__ void lstm_kernel(Args a, int64_t cells) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < cells;
       e += int64_t{gridDim.x} * blockDim.x) {
    if constexpr (std::is_same_v<Args, LstmStepArgs>)
      kernels::lstm_step_cell<DeviceMath, T>(a, e);
    else
      kernels::lstm_step_backward_cell<DeviceMath, T>(a, e);
  }
}

template <typename Args>
void launch_cells(const Args& a, const char* name) {
  const int64_t cells = a.batch * a.hidden;
  if (cells == 0) return;
  cudaStream_t st = stream(a.device);
  dispatch_float(a.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    lstm_kernel<T, Args><<<grid_for(cells), kBlock, 0, st>>>(a, cells);
  });
  EMBER_CUDA_LAUNCH_CHECK();
}

}  // namespace

void lstm_step(const LstmStepArgs& a) { launch_cells(a, "lstm_step"); }
void lstm_step_backward(const LstmStepBackwardArgs& a) { launch_cells(a, "lstm_step_backward"); }

}  // namespace ember::cuda

// src/cuda/device_math.cuh — CUDA's device math library as the policy of the shared formulas
// (src/kernels/elementwise.hpp, src/kernels/rnn.hpp): the CPU's counterpart is HostMath in
// src/cpu/vec_math.hpp.
#pragma once

#include <cmath>

#include "kernels/elementwise.hpp"

namespace ember::cuda {

struct DeviceMath : kernels::StdMath {
  template <typename T>
  __device__ static T exp(T x) {
    return ::exp(x);
  }
  template <typename T>
  __device__ static T log(T x) {
    return ::log(x);
  }
  template <typename T>
  __device__ static T log1p(T x) {
    return ::log1p(x);
  }
  template <typename T>
  __device__ static T tanh(T x) {
    return ::tanh(x);
  }
  template <typename T>
  __device__ static T erf(T x) {
    return ::erf(x);
  }
  template <typename T>
  __device__ static T sqrt(T x) {
    return ::sqrt(x);
  }
  template <typename T>
  __device__ static T abs(T x) {
    return ::fabs(x);
  }
  template <typename T>
  __device__ static T pow(T x, T y) {
    return ::pow(x, y);
  }
};

}  // namespace ember::cuda

// src/cuda/random.cu — uniform, normal and dropout from counter-based Philox on CUDA.
//
// The generator and the value transforms are the CPU's own (src/kernels/random.hpp, compiled
// here as __host__ __device__): element i, in row-major order of the output, draws block
// (seed, offset + i) (Note [Random streams]), so a seed gives the same values on every
// device. f16/bf16 outputs are drawn as f32 and rounded, as on the CPU. Inside a captured
// step the kernels read the seed and the stream's base offset from the graph
// (Note [Captured steps] in graph.cu), so each replay draws the numbers eager code would.
#include "cuda/graph.cuh"
#include "cuda/loops.cuh"
#include "kernels/random.hpp"

namespace ember::cuda {
namespace {

// The generator's state of one launch: by value, or (captured) read on the device.
struct PhiloxArgs {
  uint64_t seed = 0, offset = 0;
  const uint64_t* captured = nullptr;  // {seed, base offset}; offset is then relative

  __device__ void resolve(uint64_t* s, uint64_t* o) const {
    *s = captured ? captured[0] : seed;
    *o = captured ? captured[1] + offset : offset;
  }
};

PhiloxArgs philox_args(int device, uint64_t seed, uint64_t offset) {
  uint64_t start = 0;
  if (const uint64_t* captured = graph::captured_philox(device, &start))
    return {seed, offset - start, captured};
  return {seed, offset, nullptr};
}

template <typename F>
void dispatch_random(DType t, const char* op, F&& f) {
  kernels::dispatch_any_float<__half, __nv_bfloat16>(t, op, "CUDA", f);
}

template <typename T, typename Gen>
__global__ void generate_kernel(Geometry<1> g, T* out, PhiloxArgs rng, Gen gen) {
  uint64_t seed = 0, offset = 0;
  rng.resolve(&seed, &offset);
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[1] = {i};
    if (!g.contiguous) offsets_of(g, i, off);
    out[off[0]] = cast<T>(gen(philox::block_for(seed, offset + static_cast<uint64_t>(i))));
  }
}

struct NormalF32 {
  float mean, std;
  __device__ float operator()(const philox::Block& b) const {
    return mean + std * philox::normal_f32(b);
  }
};
struct NormalF64 {
  double mean, std;
  __device__ double operator()(const philox::Block& b) const {
    return mean + std * philox::normal_f64(b);
  }
};

template <typename T, typename Gen>
void generate(const View& out, uint64_t seed, uint64_t offset, Gen gen) {
  const Shape* strides[1] = {&out.strides};
  const Geometry<1> g = make_geometry(out.shape, strides);
  if (g.numel == 0) return;
  generate_kernel<T, Gen><<<grid_for(g.numel), kBlock, 0, stream_for(out)>>>(
      g, static_cast<T*>(out.data), philox_args(out.device, seed, offset), gen);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
__global__ void dropout_kernel(Geometry<3> g, T* out, T* mask, const T* in, double p,
                               PhiloxArgs rng, Compute<T> scale) {
  using C = Compute<T>;
  uint64_t seed = 0, offset = 0;
  rng.resolve(&seed, &offset);
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[3] = {i, i, i};
    if (!g.contiguous) offsets_of(g, i, off);
    const bool kept =
        philox::dropout_keep(philox::block_for(seed, offset + static_cast<uint64_t>(i)), p);
    const C keep = kept ? scale : C(0);
    mask[off[1]] = cast<T>(keep);
    out[off[0]] = cast<T>(cast<C>(in[off[2]]) * keep);
  }
}

// {seed, 0, offset, 0} of one launch's generator state, as cuDNN's dropout reads it.
__global__ void philox_state_kernel(PhiloxArgs rng, int64_t* out) {
  uint64_t seed = 0, offset = 0;
  rng.resolve(&seed, &offset);
  out[0] = static_cast<int64_t>(seed);
  out[1] = 0;
  out[2] = static_cast<int64_t>(offset);
  out[3] = 0;
}

}  // namespace

void write_philox_state(int device, uint64_t seed, uint64_t offset, int64_t* out) {
  philox_state_kernel<<<1, 1, 0, stream(device)>>>(philox_args(device, seed, offset), out);
  EMBER_CUDA_LAUNCH_CHECK();
}

void uniform(const View& out, uint64_t seed, uint64_t offset, double lo, double hi) {
  dispatch_random(out.dtype, "uniform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>)
      generate<T>(out, seed, offset, philox::UniformF64(lo, hi));
    else
      generate<T>(out, seed, offset,
                  philox::UniformF32(static_cast<float>(lo), static_cast<float>(hi)));
  });
}

void normal(const View& out, uint64_t seed, uint64_t offset, double mean, double std) {
  dispatch_random(out.dtype, "normal", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>)
      generate<T>(out, seed, offset, NormalF64{mean, std});
    else
      generate<T>(out, seed, offset, NormalF32{static_cast<float>(mean), static_cast<float>(std)});
  });
}

void dropout(const View& out, const View& mask, const View& in, double p, uint64_t seed,
             uint64_t offset) {
  EMBER_ASSERT(mask.dtype == in.dtype && out.dtype == in.dtype, "dropout: dtype mismatch");
  const Shape* strides[3] = {&out.strides, &mask.strides, &in.strides};
  const Geometry<3> g = make_geometry(out.shape, strides);
  if (g.numel == 0) return;
  cudaStream_t st = stream_for(out);
  dispatch_any_float(in.dtype, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Compute<T> scale = p < 1.0 ? static_cast<Compute<T>>(1.0 / (1.0 - p)) : Compute<T>(0);
    dropout_kernel<T><<<grid_for(g.numel), kBlock, 0, st>>>(
        g, static_cast<T*>(out.data), static_cast<T*>(mask.data), static_cast<const T*>(in.data), p,
        philox_args(out.device, seed, offset), scale);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda

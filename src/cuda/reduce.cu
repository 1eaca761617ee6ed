// src/cuda/reduce.cu — reductions (sum, mean, max, min, prod, argmax, argmin) and variance on
// CUDA.
//
// Reductions share the CPU kernel's plan and reducers (src/kernels/reduce.hpp): `in` is reduced
// over the dims where out.shape == 1 and in.shape != 1; a plan collapses kept and reduced dims.
// Work items are (output, chunk) pairs: each group of `group` elements is cut into `chunks` fixed
// chunks so that a few large groups still fill the GPU. When the innermost dim is reduced a warp
// runs an item (lanes stride through the chunk, coalesced); when it is kept one thread runs an item
// (neighbouring threads read neighbouring columns). With one chunk the item writes the output;
// otherwise items write partial accumulators to a scratch buffer and a second kernel merges them
// (a warp per output, in a fixed order: deterministic). Every kernel is launched chained (Note
// [Chained launches] in launch.cuh): it starts while the kernel ahead finishes. f32 sums accumulate
// in f64; max/min propagate NaN; argmax/argmin keep the first index on ties and treat NaN as the
// extreme (PyTorch).
#include <algorithm>
#include <cmath>
#include <optional>

#include "cuda/launch.cuh"
#include "cuda/loops.cuh"
#include "kernels/reduce.hpp"

namespace ember::cuda {
namespace {

constexpr int kLoads = 8;  // reads in flight per thread in reduce_outer_kernel

// ---- the plan and the reducers: src/kernels/reduce.hpp (Note [Reduction plan]) ----
using Plan = kernels::ReducePlan;
using kernels::ArgReducer;
using kernels::ExtremeReducer;
using kernels::kept_offsets;
using kernels::make_plan;
using kernels::max_nan;
using kernels::ProdReducer;
using kernels::reduced_offset;
using kernels::SquareDeviationReducer;
using kernels::SumReducer;

template <typename Acc>
__device__ __forceinline__ Acc shfl_down(const Acc& v, int delta) {
  static_assert(sizeof(Acc) % 4 == 0, "accumulators are whole 32-bit words");
  constexpr int kWords = sizeof(Acc) / 4;
  uint32_t w[kWords];
  memcpy(w, &v, sizeof(Acc));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_down_sync(0xffffffffu, w[i], delta);
  Acc out;
  memcpy(&out, w, sizeof(Acc));
  return out;
}

// Item (o, c): chunk c of output o. A warp per item; lane 0 holds the merged result.
template <typename T, typename Red>
__global__ void reduce_inner_kernel(Plan p, Red red, const T* in, typename Red::Out* out,
                                    typename Red::Acc* partial, int64_t chunks, int64_t chunk_len) {
  using Acc = typename Red::Acc;
  chain_enter();  // launched chained (Note [Chained launches] in launch.cuh)
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  const int64_t items = p.outputs * chunks;
  for (int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       item < items; item += warps) {
    const int64_t o = item / chunks, c = item % chunks;
    int64_t in_off, out_off;
    kept_offsets(p, o, in_off, out_off);
    Acc acc = red.init(out + out_off);
    const int64_t begin = c * chunk_len;
    const int64_t end = begin + chunk_len < p.group ? begin + chunk_len : p.group;
    for (int64_t pos = begin + lane; pos < end; pos += kWarp)
      red.step(acc, in[in_off + reduced_offset(p, pos)], pos);
    for (int delta = kWarp / 2; delta > 0; delta /= 2) red.merge(acc, shfl_down(acc, delta));
    if (lane == 0) {
      if (chunks == 1)
        out[out_off] = red.finish(acc, p.group);
      else
        partial[c * p.outputs + o] = acc;
    }
  }
}

// A thread per item (the innermost dim is kept: neighbouring outputs are neighbours in memory).
// Its loads are issued kLoads at a time: a bias gradient (256 outputs of 128 rows) is one
// block whose every read would otherwise wait for the one before (13 µs -> ~3 on the H200).
template <typename T, typename Red>
__global__ void reduce_outer_kernel(Plan p, Red red, const T* in, typename Red::Out* out,
                                    typename Red::Acc* partial, int64_t chunks, int64_t chunk_len) {
  using Acc = typename Red::Acc;
  chain_enter();
  const int64_t items = p.outputs * chunks;
  EMBER_CUDA_KERNEL_LOOP(item, items) {
    const int64_t c = item / p.outputs, o = item % p.outputs;  // neighbours: same chunk
    int64_t in_off, out_off;
    kept_offsets(p, o, in_off, out_off);
    Acc acc = red.init(out + out_off);
    const int64_t begin = c * chunk_len;
    const int64_t end = begin + chunk_len < p.group ? begin + chunk_len : p.group;
    int64_t pos = begin;
    if (p.reduced == 1) {  // kLoads reads in flight at once, accumulated in order
      const int64_t stride = p.red_in[0];
      for (; pos + kLoads <= end; pos += kLoads) {
        T v[kLoads];
#pragma unroll
        for (int j = 0; j < kLoads; ++j) v[j] = in[in_off + (pos + j) * stride];
#pragma unroll
        for (int j = 0; j < kLoads; ++j) red.step(acc, v[j], pos + j);
      }
    }
    for (; pos < end; ++pos) red.step(acc, in[in_off + reduced_offset(p, pos)], pos);
    if (chunks == 1)
      out[out_off] = red.finish(acc, p.group);
    else
      partial[c * p.outputs + o] = acc;
  }
}

// A warp per output: lane l merges chunks l, l + 32, ... in order, then the lanes merge as the
// inner kernel's do (a fixed tree: deterministic). One thread walking the chunks in turn waited
// on each read: argmax over GPT-2's 50,257 logits (197 chunks) took 47 µs under Nsight Compute,
// the warp 6 (with the tool's ~2 µs floor).
template <typename Red>
__global__ void reduce_merge_kernel(Plan p, Red red, typename Red::Out* out,
                                    const typename Red::Acc* partial, int64_t chunks) {
  using Acc = typename Red::Acc;
  chain_enter();
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t o = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       o < p.outputs; o += warps) {
    int64_t in_off, out_off;
    kept_offsets(p, o, in_off, out_off);
    Acc acc = partial[o];  // chunk 0 always holds a partial; lanes past the chunks merge none
    if (lane < chunks) acc = partial[lane * p.outputs + o];
    for (int64_t c = lane + kWarp; c < chunks; c += kWarp)
      red.merge(acc, partial[c * p.outputs + o]);
    for (int delta = kWarp / 2; delta > 0; delta /= 2) {
      const Acc other = shfl_down(acc, delta);
      if (lane + delta < chunks) red.merge(acc, other);
    }
    if (lane == 0) out[out_off] = red.finish(acc, p.group);
  }
}

template <typename T, typename Red>
void run_reduce(const Red& red, const View& out_view, const View& in_view) {
  using Acc = typename Red::Acc;
  using Out = typename Red::Out;
  const Plan plan = make_plan(out_view, in_view);
  if (plan.outputs == 0) return;
  const T* in = static_cast<const T*>(in_view.data);
  Out* out = static_cast<Out*>(out_view.data);
  const int device = out_view.device;
  cudaStream_t st = stream(device);
  const int64_t group = plan.group;
  // Chunks: enough items to fill the GPU, but never chunks shorter than a few hundred reads.
  const bool inner = plan.innermost_reduced;
  const int64_t target_items = inner ? 4096 : 65536;
  // (Inner chunks of 256: a few outputs over a long group — a conv bias gradient, 3 outputs of
  // 65536 — then still spread over ~100 blocks, not the 12 that chunks of 2048 gave, which
  // took 60 µs on the H200.)
  const int64_t min_chunk = 256;
  int64_t chunks = std::max<int64_t>(1, std::min((group + min_chunk - 1) / min_chunk,
                                                 (target_items + plan.outputs - 1) / plan.outputs));
  const int64_t chunk_len = std::max<int64_t>(1, (group + chunks - 1) / chunks);
  chunks = std::max<int64_t>(1, (group + chunk_len - 1) / chunk_len);
  const int64_t items = plan.outputs * chunks;
  std::optional<Scratch> scratch;
  Acc* partial = nullptr;
  if (chunks > 1) {
    scratch.emplace(device, static_cast<size_t>(items) * sizeof(Acc));
    partial = static_cast<Acc*>(scratch->get());
  }
  if (inner) {
    const int64_t blocks = std::min<int64_t>((items * kWarp + kBlock - 1) / kBlock, 65535 * 16);
    launch_chained<reduce_inner_kernel<T, Red>>(dim3(static_cast<unsigned>(blocks)), kBlock, st,
                                                plan, red, in, out, partial, chunks, chunk_len);
  } else {
    launch_chained<reduce_outer_kernel<T, Red>>(dim3(grid_for(items)), kBlock, st, plan, red, in,
                                                out, partial, chunks, chunk_len);
  }
  if (chunks > 1) {
    const int64_t merge_blocks =
        std::min<int64_t>((plan.outputs * kWarp + kBlock - 1) / kBlock, 65535 * 16);
    launch_chained<reduce_merge_kernel<Red>>(dim3(static_cast<unsigned>(merge_blocks)), kBlock, st,
                                             plan, red, out, partial, chunks);
  }
}

}  // namespace

using BackendHalf = __half;
using BackendBFloat = __nv_bfloat16;
#define EMBER_BACKEND_NAME "CUDA"
#include "kernels/reduce_slots.inc"
#undef EMBER_BACKEND_NAME

}  // namespace ember::cuda

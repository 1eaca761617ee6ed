// src/cuda/rotary.cu — rotary position embedding on CUDA, forward and transpose.
//
// Shapes: out (contiguous), x (or the backward's grad, any strides), cos and sin (stride 0
// where they broadcast) all [..., D], D even. A thread per pair of the pair space (Note [Rotary
// pairs] in src/kernels/rotary.hpp): its operands' offsets from the strided geometry (Note
// [CUDA strided geometry]), both elements of its pair read once, computed in Compute<T> (f32
// for f16/bf16) with every product rounded on its own, as the CPU, and written once. One
// launch per call: for a decode step's q or k ([B, H, 1, D]) this is one kernel where the
// composite x·cos + cat(-x₂, x₁)·sin took six, launched chained (Note [Chained launches] in
// launch.cuh) so that it starts while the product before it finishes.
#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/launch.cuh"
#include "cuda/loops.cuh"
#include "kernels/rotary.hpp"

namespace ember::cuda {
namespace {

// kBackward: the transpose (rotary_pair_backward), `in` being out's gradient.
template <typename T, bool kBackward>
__global__ void rotary_kernel(T* out, const T* in, const T* cos, const T* sin, Geometry<4> g,
                              int64_t po, int64_t pi, int64_t pc, int64_t ps) {
  using C = Compute<T>;
  chain_enter();  // Note [Chained launches] in launch.cuh
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[4];
    offsets_of(g, i, off);
    const C a = cast<C>(in[off[1]]), b = cast<C>(in[off[1] + pi]);
    const C ca = cast<C>(cos[off[2]]), cb = cast<C>(cos[off[2] + pc]);
    const C sa = cast<C>(sin[off[3]]), sb = cast<C>(sin[off[3] + ps]);
    C ra, rb;
    if constexpr (kBackward)
      kernels::rotary_pair_backward(ra, rb, a, b, ca, cb, sa, sb);
    else
      kernels::rotary_pair(ra, rb, a, b, ca, cb, sa, sb);
    out[off[0]] = cast<T>(ra);
    out[off[0] + po] = cast<T>(rb);
  }
}

template <bool kBackward>
void rotary(const View& out, const View& in, const View& cos, const View& sin, bool interleaved,
            const char* name) {
  if (out.numel() == 0) return;
  const kernels::RotaryPairs p = kernels::rotary_pairs(out, in, cos, sin, interleaved);
  const Shape* const strides[4] = {&p.strides[0], &p.strides[1], &p.strides[2], &p.strides[3]};
  const Geometry<4> g = make_geometry<4>(p.shape, strides);
  const cudaStream_t st = stream(out.device);
  dispatch_any_float(in.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_chained<rotary_kernel<T, kBackward>>(
        grid_for(g.numel), kBlock, st, static_cast<T*>(out.data), static_cast<const T*>(in.data),
        static_cast<const T*>(cos.data), static_cast<const T*>(sin.data), g, p.partner[0],
        p.partner[1], p.partner[2], p.partner[3]);
  });
}

}  // namespace

#include "kernels/rotary_slots.inc"

}  // namespace ember::cuda

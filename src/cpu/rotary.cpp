// src/cpu/rotary.cpp — rotary position embedding on the CPU, forward and transpose: a strided
// loop over the pair space (Note [Rotary pairs] in src/kernels/rotary.hpp), each pair read
// once, computed in Compute<T> (f32 for f16/bf16, rounded once on store) and written once.
#pragma GCC optimize("fp-contract=off")  // the pair formulas round each product on its own

#include "kernels/rotary.hpp"

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {

namespace {

// out (contiguous) from in (any strides), cos and sin over the pair space; kBackward: the
// transpose (rotary_pair_backward).
template <bool kBackward>
void rotary(const View& out, const View& in, const View& cos, const View& sin, bool interleaved,
            const char* name) {
  if (out.numel() == 0) return;
  const kernels::RotaryPairs p = kernels::rotary_pairs(out, in, cos, sin, interleaved);
  dispatch_any_float(in.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const Operand ops[4] = {{out.data, p.strides[0].data(), sizeof(T)},
                            {in.data, p.strides[1].data(), sizeof(T)},
                            {cos.data, p.strides[2].data(), sizeof(T)},
                            {sin.data, p.strides[3].data(), sizeof(T)}};
    const Loop<4> loop = make_loop(p.shape, ops);
    const int64_t po = p.partner[0], pi = p.partner[1], pc = p.partner[2], ps = p.partner[3];
    parallel_loop(loop, kGrainCheap / 4, [&](char* const* ptrs, const int64_t* st, int64_t n) {
      for (int64_t j = 0; j < n; ++j) {
        T* o = reinterpret_cast<T*>(ptrs[0] + j * st[0]);
        const T* x = reinterpret_cast<const T*>(ptrs[1] + j * st[1]);
        const T* c = reinterpret_cast<const T*>(ptrs[2] + j * st[2]);
        const T* s = reinterpret_cast<const T*>(ptrs[3] + j * st[3]);
        C ra, rb;
        const C a = cast<C>(x[0]), b = cast<C>(x[pi]);
        const C ca = cast<C>(c[0]), cb = cast<C>(c[pc]), sa = cast<C>(s[0]), sb = cast<C>(s[ps]);
        if constexpr (kBackward)
          kernels::rotary_pair_backward(ra, rb, a, b, ca, cb, sa, sb);
        else
          kernels::rotary_pair(ra, rb, a, b, ca, cb, sa, sb);
        o[0] = cast<T>(ra);
        o[po] = cast<T>(rb);
      }
    });
  });
}

}  // namespace

#include "kernels/rotary_slots.inc"

}  // namespace ember::cpu

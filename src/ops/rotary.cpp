// src/ops/rotary.cpp — rotary_embedding: the rotary position embedding of transformers (Llama,
// its rotate_half layout) or GPT-J / Meta (interleaved pairs), one fused kernel per direction
// (src/cpu/rotary.cpp, src/cuda/rotary.cu; the pair formulas in src/kernels/rotary.hpp, Note
// [Rotary pairs]). Part of the attention family.
//
// Shape letters: x [..., D] (D even; e.g. [B, H, T, D]), cos and sin broadcasting to it
// ([T, D], [B, 1, T, D]); out = x·cos + rotate_half(x)·sin has x's shape and is contiguous.
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {

// rotate_half(x) (interleaved: the pairs (2i, 2i+1) rotated), composed: for cos's and sin's
// gradients only, which take x·g and rotate_half(x)·g summed over the broadcast dims.
Tensor rotate_half(const Tensor& x, bool interleaved) {
  const int64_t last = x.dim() - 1, d = x.size(last);
  if (!interleaved) return cat({neg(x.narrow(last, d / 2, d / 2)), x.narrow(last, 0, d / 2)}, last);
  std::vector<int64_t> pairs = x.shape().vec();
  pairs.back() = d / 2;
  pairs.push_back(2);
  const Tensor p = x.reshape(Shape(pairs));
  return stack({neg(p.select(last + 1, 1)), p.select(last + 1, 0)}, last + 1).reshape(x.shape());
}

// cos or sin (`what`) must broadcast to x's shape.
void check_broadcasts(const Tensor& x, const Tensor& t, const char* what) {
  const char* name = op_name(Op::rotary_embedding);
  ops::check_defined(name, t, what);
  bool fits = t.dim() <= x.dim();
  for (int i = 1; fits && i <= t.dim(); ++i) {
    const int64_t have = t.size(t.dim() - i);
    fits = have == 1 || have == x.size(x.dim() - i);
  }
  EMBER_CHECK(fits, name, ": ", what, " shape ", t.shape().to_string(),
              " does not broadcast to input shape ", x.shape().to_string(),
              " (expected [..., T, D] sizes equal to the input's or 1)");
  EMBER_CHECK(t.dtype() == x.dtype(), name, ": ", what, " dtype ", dtype_name(t.dtype()),
              " for input dtype ", dtype_name(x.dtype()),
              " (expected the input's dtype; convert with .to(DType))");
  ops::check_same_device(name, x, t);
}

}  // namespace

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  const char* name = op_name(Op::rotary_embedding);
  ops::check_defined(name, x);
  const ops::OpScope op_scope(Op::rotary_embedding, x);
  ops::check_supported(Op::rotary_embedding, x);
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, name, ": input shape ", x.shape().to_string(),
              " (expected [..., D] with an even head size D)");
  check_broadcasts(x, cos, "cos");
  check_broadcasts(x, sin, "sin");
  Tensor out = ops::make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0)
    ops::backend_of(x).rotary_embedding(ops::view_of(out), ops::view_of(x),
                                        ops::broadcast_view(cos, x.shape()),
                                        ops::broadcast_view(sin, x.shape()), interleaved);
  if (autograd::needs_grad(x, cos, sin)) {
    // x's gradient is the transpose, one kernel; cos's and sin's (rarely wanted: they are
    // constants of the positions) are composed: Σ g·x and Σ g·rotate_half(x) over broadcast dims.
    const bool nx = x.requires_grad(), nc = cos.requires_grad(), ns = sin.requires_grad();
    autograd::record(
        Op::rotary_embedding, out, {&x, &cos, &sin},
        [nx, nc, ns, interleaved, sc = SavedTensor(cos), ss = SavedTensor(sin),
         sx = (nc || ns) ? SavedTensor(x) : SavedTensor()](const Tensor& g_in, GradList& gi) {
          const Tensor c = sc.get(), s = ss.get(), g = ops::cast_to(g_in, c.dtype());
          if (nx) {
            Tensor gx = ops::make_tensor(g.shape(), g.dtype(), g.device());
            if (gx.numel() > 0)
              ops::backend_of(g).rotary_embedding_backward(
                  ops::view_of(gx), ops::view_of(g), ops::broadcast_view(c, g.shape()),
                  ops::broadcast_view(s, g.shape()), interleaved);
            gi[0] = gx;
          }
          if (nc) gi[1] = sum_to(g * sx.get(), c.shape());
          if (ns) gi[2] = sum_to(g * rotate_half(sx.get(), interleaved), s.shape());
        });
  }
  return out;
}

}  // namespace ember

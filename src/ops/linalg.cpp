// src/ops/linalg.cpp — matmul (torch.matmul semantics, batched with broadcasting) and
// linear (x·Wᵀ + b with the bias, and optionally ReLU / tanh-GELU, fused into the GEMM). Transposed
// operands are passed to the backend as flags, never materialised.
#include <atomic>
#include <cstdlib>
#include <optional>

#include "ember/autocast.hpp"
#include "ember/read_only.hpp"
#include "ember/runtime.hpp"
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {

// How one GEMM operand is laid out: its data, leading dimension, transpose flag and the
// stride between batch entries. Falls back to a contiguous copy only when the strides
// cannot be described that way.
struct Operand {
  Tensor keep;  // keeps a copy alive when one was needed
  const void* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
  int64_t batch_stride = 0;
};

bool collapse_batch(const Tensor& t, int batch_dims, int64_t* stride) {
  int64_t s = 0;
  bool have = false;
  for (int i = batch_dims - 1; i >= 0; --i) {
    const int64_t n = t.shape()[i];
    if (n == 1) continue;
    const int64_t st = t.strides()[i];
    if (!have) {
      s = st;
      have = true;
      continue;
    }
    // The batch index walks dims i+1.. first; dim i must continue that walk.
    int64_t inner_count = 1;
    for (int j = i + 1; j < batch_dims; ++j) inner_count *= t.shape()[j];
    if (st != s * inner_count) return false;
  }
  *stride = s;
  return true;
}

Operand operand(const Tensor& t, int batch_dims) {
  Operand op;
  const int64_t r = t.shape()[batch_dims], c = t.shape()[batch_dims + 1];
  const int64_t sr = t.strides()[batch_dims], sc = t.strides()[batch_dims + 1];
  int64_t bs = 0;
  const bool batch_ok = collapse_batch(t, batch_dims, &bs);
  if (batch_ok && (sc == 1 || c == 1) && (r == 1 || sr >= c)) {
    op.data = t.data_ptr();
    op.ld = r == 1 ? std::max<int64_t>(c, 1) : std::max<int64_t>(sr, 1);
    op.trans = false;
    op.batch_stride = bs;
    return op;
  }
  if (batch_ok && (sr == 1 || r == 1) && (c == 1 || sc >= r)) {
    op.data = t.data_ptr();
    op.ld = c == 1 ? std::max<int64_t>(r, 1) : std::max<int64_t>(sc, 1);
    op.trans = true;
    op.batch_stride = bs;
    return op;
  }
  op.keep = t.contiguous();
  op.data = op.keep.data_ptr();
  op.ld = std::max<int64_t>(c, 1);
  op.batch_stride = r * c;
  return op;
}

// What one product keeps for, or takes from, its activation's backward: ReLU masks (Note
// [ReLU masks] in src/backend/backend.hpp; k > 0) and GELU's pre-activation (Note [GELU
// backward in the next GEMM]).
struct ActAux {
  Tensor* out = nullptr;             // with act relu: receives the mask of the output
  const Tensor* in = nullptr;        // the product is masked by it (ReLU's backward) …
  Tensor* bias_grad = nullptr;       // … and its column sums land here (also with pre_in)
  Tensor* pre_out = nullptr;         // with act gelu_tanh: receives the pre-activation
  const Tensor* pre_in = nullptr;    // GELU's backward at this pre-activation applied
  const Tensor* residual = nullptr;  // contiguous [m, n] of a's dtype, added last (no act)
  bool b_read_only = false;          // GemmArgs::b_read_only: b is a ReadOnlyGuard's
};

// out[B..., m, n] = act(a[B..., m, k] · b[B..., k, n] (+ bias[n])); batch shapes already equal.
// a·b (+ bias, activation); with `row_sums` (no batch, bias or activation) also the sums of
// a's rows, from the same call (GemmArgs::bias_grad: a bias gradient beside dW = gᵀ·x).
// `wide`: 16-bit a and b, the product (and the row sums) written in f32 (GemmArgs::c_f32).
Tensor gemm(const Tensor& a, const Tensor& b, const Tensor& bias, const Shape& batch,
            backend::GemmEpilogue act = backend::GemmEpilogue::none, Tensor* row_sums = nullptr,
            const ActAux& masks = {}, bool wide = false) {
  const int bd = batch.size();
  const int64_t m = a.shape()[bd], k = a.shape()[bd + 1], n = b.shape()[bd + 1];
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  EMBER_ASSERT(!wide || ((a.dtype() == DType::bf16 || a.dtype() == DType::f16) && !bias.defined() &&
                         act == backend::GemmEpilogue::none && !masks.out && !masks.in),
               "gemm: an f32 product is for one plain product of 16-bit operands");
  const DType out_dtype = wide ? DType::f32 : a.dtype();
  Tensor out = ops::make_tensor(out_shape, out_dtype, a.device());
  if (masks.out || masks.in) {
    EMBER_ASSERT(bd == 0 && k > 0 && m > 0 && n > 0 && !row_sums, "gemm: ReLU masks need one ",
                 "product with k > 0");
    if (masks.out)  // reset below unless the backend writes it
      *masks.out = ops::make_tensor(Shape{backend::relu_mask_bytes(m, n)}, DType::u8, a.device());
    if (masks.bias_grad) *masks.bias_grad = ops::make_tensor(Shape{n}, a.dtype(), a.device());
  }
  if (masks.pre_out || masks.pre_in) {
    EMBER_ASSERT(bd == 0 && !row_sums && !wide && !masks.out && !masks.in &&
                     (masks.pre_out ? act == backend::GemmEpilogue::gelu_tanh
                                    : act == backend::GemmEpilogue::none && !bias.defined()),
                 "gemm: GELU's pre-activation is for one product with that epilogue");
    if (masks.pre_out) *masks.pre_out = ops::make_tensor(out_shape, a.dtype(), a.device());
    if (masks.pre_in && masks.bias_grad)
      *masks.bias_grad = ops::make_tensor(Shape{n}, a.dtype(), a.device());
  }
  if (row_sums) {
    EMBER_ASSERT(bd == 0 && !bias.defined() && act == backend::GemmEpilogue::none,
                 "gemm: row sums of one plain product only");
    *row_sums = ops::make_tensor(Shape{m}, out_dtype, a.device());
    if (out.numel() == 0 || k == 0) {  // nothing to sum, or no product to ride along
      NoGradGuard no_grad;
      *row_sums = sum(ops::cast_to(a, out_dtype), {1});
      row_sums = nullptr;
    }
  }
  if (out.numel() == 0) return out;
  if (k == 0) {
    ops::backend_of(a).fill(ops::view_of(out), 0.0);
    if (bias.defined()) {
      backend::View o = ops::view_of(out);
      ops::backend_of(a).binary(backend::BinaryOp::add, o, o, ops::broadcast_view(bias, out_shape));
    }
    if (masks.pre_out) ops::backend_of(a).copy(ops::view_of(*masks.pre_out), ops::view_of(out));
    if (masks.pre_in && masks.bias_grad) ops::backend_of(a).fill(ops::view_of(*masks.bias_grad), 0);
    if (masks.residual) {
      backend::View o = ops::view_of(out);
      ops::backend_of(a).binary(backend::BinaryOp::add, o, o, ops::view_of(*masks.residual));
    }
    if (act != backend::GemmEpilogue::none) {
      backend::View o = ops::view_of(out);
      ops::backend_of(a).unary(
          act == backend::GemmEpilogue::relu ? backend::UnaryOp::relu : backend::UnaryOp::gelu_tanh,
          o, o, 0.0, 0.0);
    }
    return out;
  }
  Operand A = operand(a, bd), B = operand(b, bd);
  backend::GemmArgs g;
  g.dtype = a.dtype();
  g.device = a.device().index;
  g.trans_a = A.trans;
  g.trans_b = B.trans;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch.numel();
  g.a = A.data;
  g.lda = A.ld;
  g.batch_stride_a = A.batch_stride;
  g.b = B.data;
  g.ldb = B.ld;
  g.batch_stride_b = B.batch_stride;
  g.c = out.data_ptr();
  g.c_f32 = wide;
  g.ldc = n;
  g.batch_stride_c = m * n;
  Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  g.bias = bias_c.defined() ? bias_c.data_ptr() : nullptr;
  g.epilogue = act;
  g.bias_grad = row_sums ? row_sums->data_ptr() : nullptr;
  bool mask_written = false;
  g.relu_mask_out = masks.out ? masks.out->data_ptr() : nullptr;
  g.relu_mask_written = &mask_written;
  g.relu_mask_in = masks.in ? masks.in->data_ptr() : nullptr;
  g.relu_bias_grad = masks.in && masks.bias_grad ? masks.bias_grad->data_ptr() : nullptr;
  g.gelu_pre_out = masks.pre_out ? masks.pre_out->data_ptr() : nullptr;
  g.gelu_pre_in = masks.pre_in ? masks.pre_in->data_ptr() : nullptr;
  g.gelu_bias_grad = masks.pre_in && masks.bias_grad ? masks.bias_grad->data_ptr() : nullptr;
  g.residual = masks.residual ? masks.residual->data_ptr() : nullptr;
  g.b_read_only = masks.b_read_only;
  ops::backend_of(a).gemm(g);
  if (masks.out && !mask_written) *masks.out = Tensor();
  return out;
}

void check_operands(Op linalg_op, const Tensor& a, const Tensor& b) {
  const char* op = op_name(linalg_op);
  ops::check_defined(op, a, "first input");
  ops::check_defined(op, b, "second input");
  ops::check_same_dtype(op, a, b);
  ops::check_same_device(op, a, b);
  const ops::OpScope op_scope(linalg_op, a);
  ops::check_supported(linalg_op, a);
}

// Rank >= 2 on both sides.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const int64_t k = a.shape().at(-1);
  EMBER_CHECK(k == b.shape().at(-2), op_name(Op::matmul), ": shapes ", a.shape().to_string(),
              " and ", b.shape().to_string(),
              " cannot be multiplied (expected a.size(-1) == b.size(-2), got ", k, " and ",
              b.shape().at(-2), ")");
  Shape ba(std::span<const int64_t>(a.shape().begin(), a.dim() - 2));
  Shape bb(std::span<const int64_t>(b.shape().begin(), b.dim() - 2));
  for (int i = 1; i <= std::min(ba.size(), bb.size()); ++i) {
    const int64_t da = ba[ba.size() - i], db = bb[bb.size() - i];
    EMBER_CHECK(da == db || da == 1 || db == 1, op_name(Op::matmul), ": batch dims of shapes ",
                a.shape().to_string(), " and ", b.shape().to_string(), " cannot be broadcast (", da,
                " vs ", db, "; expected equal sizes or 1 in every batch dim)");
  }
  const Shape batch = ba == bb ? ba : broadcast_shapes(ba, bb, "matmul");
  Shape sa = batch, sb = batch;
  sa.push_back(a.shape().at(-2));
  sa.push_back(k);
  sb.push_back(k);
  sb.push_back(b.shape().at(-1));
  Tensor out;
  {
    NoGradGuard g;  // the expands below are internal
    out = gemm(a.expand(sa), b.expand(sb), Tensor(), batch);
  }
  if (autograd::needs_grad(a, b)) {
    const bool na = a.requires_grad(), nb = b.requires_grad();
    autograd::record(Op::matmul, out, {&a, &b},
                     [na, nb, sa_ = SavedTensor(nb ? a : Tensor()),
                      sb_ = SavedTensor(na ? b : Tensor())](const Tensor& g, GradList& gi) {
                       // grads in the broadcast shape; the engine sums them to each input's shape
                       if (na) gi[0] = matmul_nd(g, sb_.get().transpose(-1, -2));
                       if (nb) gi[1] = matmul_nd(sa_.get().transpose(-1, -2), g);
                     });
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (const auto c = ops::autocast(Op::matmul, {&a, &b})) return matmul(c[0], c[1]);
  const ops::OpScope op_scope(Op::matmul, a);
  check_operands(Op::matmul, a, b);
  EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, op_name(Op::matmul),
              ": both inputs need at least one dim (got shapes ", a.shape().to_string(), " and ",
              b.shape().to_string(), ")");
  if (a.dim() == 1 && b.dim() == 1) {
    EMBER_CHECK(a.numel() == b.numel(), op_name(Op::matmul), ": shapes ", a.shape().to_string(),
                " and ", b.shape().to_string(),
                " cannot be multiplied (expected equal lengths for a dot product)");
    return matmul_nd(a.unsqueeze(0), b.unsqueeze(1)).reshape(Shape{});
  }
  if (a.dim() == 1) {
    EMBER_CHECK(a.shape()[0] == b.shape().at(-2), op_name(Op::matmul), ": shapes ",
                a.shape().to_string(), " and ", b.shape().to_string(),
                " cannot be multiplied (expected a.size(-1) == b.size(-2), got ", a.shape()[0],
                " and ", b.shape().at(-2), ")");
    return matmul_nd(a.unsqueeze(0), b).squeeze(-2);
  }
  if (b.dim() == 1) {
    EMBER_CHECK(a.shape().at(-1) == b.shape()[0], op_name(Op::matmul), ": shapes ",
                a.shape().to_string(), " and ", b.shape().to_string(),
                " cannot be multiplied (expected a.size(-1) == b.size(0), got ", a.shape().at(-1),
                " and ", b.shape()[0], ")");
    return matmul_nd(a, b.unsqueeze(1)).squeeze(-1);
  }
  return matmul_nd(a, b);
}

namespace {
// The rank an op of the mm family takes, refused by name otherwise (PyTorch does not
// broadcast these: matmul does).
void check_rank(Op op, const Tensor& t, int rank, const char* what) {
  ops::check_supported(op, t, what);
  EMBER_CHECK(t.dim() == rank, op_name(op), ": ", what, " has shape ", t.shape().to_string(),
              " (expected a ", rank, "-D tensor)");
}
void check_ranks(Op op, const Tensor& a, const Tensor& b, int rank) {
  check_rank(op, a, rank, "first input");
  check_rank(op, b, rank, "second input");
}
}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  const ops::UserOp user(Op::mm, {&a, &b});
  check_ranks(Op::mm, a, b, 2);
  return matmul(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  const ops::UserOp user(Op::bmm, {&a, &b});
  check_ranks(Op::bmm, a, b, 3);
  EMBER_CHECK(a.shape()[0] == b.shape()[0], op_name(Op::bmm), ": batch sizes ", a.shape()[0],
              " and ", b.shape()[0], " differ (shapes ", a.shape().to_string(), " and ",
              b.shape().to_string(), "; bmm does not broadcast, matmul does)");
  return matmul(a, b);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  const ops::UserOp user(Op::dot, {&a, &b});
  check_ranks(Op::dot, a, b, 1);
  return matmul(a, b);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  if (const auto c = ops::autocast(Op::outer, {&a, &b})) return outer(c[0], c[1]);
  check_ranks(Op::outer, a, b, 1);
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

namespace {
// beta·input + alpha·product, input broadcasting to the product; with beta == 0 the input is
// not read (NaN in it stays out), as PyTorch.
Tensor add_product(Op op, const Tensor& input, const Tensor& product, double beta, double alpha) {
  EMBER_CHECK(broadcast_shapes(input.shape(), product.shape(), op_name(op)) == product.shape(),
              op_name(op), ": input shape ", input.shape().to_string(),
              " does not broadcast to the product's ", product.shape().to_string());
  Tensor p = alpha == 1.0 ? product : mul(product, alpha);
  if (beta == 0.0) return p;
  return add(beta == 1.0 ? input : mul(input, beta), p);
}
}  // namespace

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta, double alpha) {
  const ops::UserOp user(Op::addmm, {&input, &m1, &m2});
  if (const auto c = ops::autocast(Op::addmm, {&input, &m1, &m2}))
    return addmm(c[0], c[1], c[2], beta, alpha);
  const ops::OpScope op_scope(Op::addmm, input);
  ops::check_supported(Op::addmm, input, "input");
  check_rank(Op::addmm, m1, 2, "mat1");
  check_rank(Op::addmm, m2, 2, "mat2");
  return add_product(Op::addmm, input, matmul(m1, m2), beta, alpha);
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta, double alpha) {
  const ops::UserOp user(Op::baddbmm, {&input, &b1, &b2});
  if (const auto c = ops::autocast(Op::baddbmm, {&input, &b1, &b2}))
    return baddbmm(c[0], c[1], c[2], beta, alpha);
  const ops::OpScope op_scope(Op::baddbmm, input);
  ops::check_supported(Op::baddbmm, input, "input");
  return add_product(Op::baddbmm, input, bmm(b1, b2), beta, alpha);
}

namespace {

// Note [ReLU backward in the next GEMM]
// The backward of Linear → ReLU → Linear spends a kernel on ReLU's backward (the gradient
// masked where the output was 0) and a reduction on the first Linear's bias gradient.
// cuBLASLt folds both into the GEMM that makes the gradient: the second Linear's input
// gradient g·W can be written already masked (the DRELU_BGRAD epilogue), with the first
// Linear's bias gradient beside it, from the bit mask the first Linear's forward wrote (the
// RELU_AUX_BIAS epilogue; Note [ReLU masks] in src/backend/backend.hpp).
// So a linear with a fused ReLU (Sequential's Linear + ReLU) keeps its output's mask in a
// ActLink on its node, and a linear whose input is exactly that output (the input's grad_fn
// is that node) takes the link. In the backward, unless the engine hands the first node's
// gradient to a caller (autograd::grad with that tensor among the inputs: Node::
// grad_observed), the second node writes the masked gradient and the bias gradient and
// leaves both on the link; the first node, receiving exactly that tensor (the engine passes a
// lone gradient on as it is; a second consumer's gradient makes a new sum), uses them and
// skips its mask and its bias reduction. Receiving anything else it masks as usual (masking
// twice changes nothing) and sums its own bias gradient. The CPU backend computes the same.
// Values equal the unfused path's except that the bias gradient is summed in another order
// and that a non-finite gradient where ReLU was off becomes 0 (the unfused mask multiplies by
// 0; PyTorch's threshold_backward also gives 0). set_relu_fold (ember/runtime.hpp) turns it on
// or off per device type: on the H200 the plain path measured faster (docs/benchmarks.md), so
// CUDA starts with it off.
//
// Note [GELU backward in the next GEMM]
// The same for Linear with GELU (linear(x, W, b, Activation::gelu_tanh), GPT-2's MLP): its
// forward keeps the pre-activation from cuBLASLt's GELU_AUX_BIAS epilogue (the tensor gelu
// would have saved; the GELU kernel is gone), and the next linear's input gradient is written
// through DGELU: g·W times gelu_tanh'(pre). The first linear's bias gradient then rides with
// its own dW (BGRADB) as usual: on the H200 DGELU_BGRAD, which would make it beside the
// masked product, took 0.59 ms for GPT-2's MLP projection backward against 0.31 with DGELU
// (GPT-2 step 37.2 against 34.9 ms; no fold at all 35.2, docs/benchmarks.md).
// Unlike ReLU's mask, GELU's derivative cannot be applied twice, so the second node folds
// only when its gradient is the only one the first output will receive: the first node has no
// other consumer left to run (Node::pending_deps is 1) and no gradient pending, and nobody
// observes it (grad_observed). Values: the forward's GELU is taken of the f32 accumulator
// instead of the rounded pre-activation and the backward's product is rounded once, so in
// bf16 both differ from the unfused path by up to a rounding (tests/test_gelu_linear.cpp);
// in f32 on the CPU they are the unfused kernels. EMBER_GELU_FOLD=0 turns both off.
struct ActLink {
  Tensor mask;                      // ReLU: the first linear's output mask
  SavedTensor pre;                  // GELU: the first linear's pre-activation
  bool wants_bias_grad = false;     // the first linear's bias needs a gradient
  std::weak_ptr<TensorImpl> given;  // the gradient the second linear made …
  Tensor bias_grad;                 // … and the bias gradient beside it
};

bool gelu_fold() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_GELU_FOLD");
    return !(v && v[0] == '0');
  }();
  return on;
}

// The backward of linear (x·Wᵀ + b, optionally ReLU fused in the epilogue).
struct LinearNode final : autograd::Node {
  LinearNode() : Node(op_name(Op::linear)) {}

  void apply(const Tensor& g, GradList& gi) override {
    Tensor g2 = ops::cast_to(g, compute).reshape({rows, out_f});
    // Note [Autocast's linear writes f32 gradients]: an input kept in f32 gets its gradient
    // straight from the 16-bit product, written in f32.
    const bool wide_x = gx == DType::f32 && compute != DType::f32;
    const bool wide_w = gw == DType::f32 && compute != DType::f32;
    Tensor given_bias_grad;
    bool masked = false;
    if (own) {  // the next linear may have applied the activation's backward already
      masked = own->given.lock() == detail::TensorAccess::impl_ptr(g);
      if (masked) given_bias_grad = std::move(own->bias_grad);
      own->given.reset();
      own->bias_grad = Tensor();
    }
    if (sy.defined() && !masked) g2 = ops::relu_backward(g2, sy.get());           // ReLU was fused
    if (spre.defined() && !masked) g2 = ops::gelu_tanh_backward(g2, spre.get());  // GELU was
    if (nx) {
      Node* made_x = edges[0].node.get();
      // GELU's derivative applies once: only to the sole gradient of x (Note [GELU backward in the
      // next GEMM]).
      const bool fold =
          input && !wide_x && made_x && !made_x->grad_observed &&
          (!input->pre.defined() || (made_x->pending_deps == 1 && !made_x->pending_grad.defined()));
      if (fold) {
        Tensor dbias, pre = input->pre.defined() ? input->pre.get() : Tensor();
        // GELU's bias gradient rides with the first linear's dW instead (DGELU_BGRAD measured
        // 0.3 ms slower a layer than DGELU on GPT-2's MLP: Note [GELU backward in the next GEMM]).
        Tensor* bias_grad = input->wants_bias_grad && !pre.defined() ? &dbias : nullptr;
        const ActAux aux = pre.defined() ? ActAux{.bias_grad = bias_grad, .pre_in = &pre}
                                         : ActAux{.in = &input->mask, .bias_grad = bias_grad};
        gi[0] = gemm(g2, sw.get(), Tensor(), Shape{}, backend::GemmEpilogue::none, nullptr, aux)
                    .reshape(xs);
        input->given = detail::TensorAccess::impl_ptr(gi[0]);
        input->bias_grad = std::move(dbias);
      } else {
        gi[0] =
            gemm(g2, sw.get(), Tensor(), Shape{}, backend::GemmEpilogue::none, nullptr, {}, wide_x)
                .reshape(xs);
      }
    }
    const auto dw = [&](Tensor* row_sums) {
      return gemm(g2.t(), sx.get(), Tensor(), Shape{}, backend::GemmEpilogue::none, row_sums, {},
                  wide_w);
    };
    if (nb && masked && given_bias_grad.defined()) {
      gi[2] = ops::cast_to(given_bias_grad, gb);
      if (nw) gi[1] = dw(nullptr);
    } else if (nw && nb && gb == gw) {  // the bias gradient rides along (GemmArgs::bias_grad)
      gi[1] = dw(&gi[2]);
    } else {
      if (nw) gi[1] = dw(nullptr);
      if (nb) gi[2] = sum(ops::cast_to(g2, gb), {0});
    }
  }

  void release() override {
    sx = sw = sy = spre = SavedTensor();
    own.reset();
    input.reset();
  }

  bool nx = false, nw = false, nb = false;
  DType compute = DType::f32;               // the product's dtype (that of y)
  DType gx = DType::f32, gw = gx, gb = gx;  // the dtypes of x, weight and bias
  int64_t rows = 0, out_f = 0;
  Shape xs;
  SavedTensor sx, sw, sy;          // x (for dW), W (for dx), the ReLU output (its mask)
  SavedTensor spre;                // GELU's pre-activation
  std::shared_ptr<ActLink> own;    // this linear's ReLU mask or GELU pre-activation, if linked
  std::shared_ptr<ActLink> input;  // that of the linear that made x, when foldable
};

// The link of the linear + activation that made `x`, when x is exactly its output (same rows).
std::shared_ptr<ActLink> input_link(const Tensor& x, int64_t rows) {
  if (!x.requires_grad()) return nullptr;
  auto* node = dynamic_cast<LinearNode*>(detail::TensorAccess::impl(x)->grad_fn.get());
  if (!node || !node->own || node->rows != rows) return nullptr;
  return node->own;
}

// The tensors a linear's gradients are for, when they are not the operands of its product
// (autocast's f32 inputs of a 16-bit product: Note [Autocast's linear writes f32 gradients]).
struct GradTargets {
  const Tensor* x;
  const Tensor* weight;
  const Tensor* bias;
};

// linear with `act` applied in the GEMM's epilogue. The backward of relu masks the gradient
// with the saved output (y > 0 exactly where the pre-activation is), or takes it already
// masked (Note [ReLU backward in the next GEMM]); that of gelu_tanh multiplies by its
// derivative at the pre-activation the epilogue kept, or takes the gradient with that done
// (Note [GELU backward in the next GEMM]). With `targets`, x, weight and bias are casts of the
// targets made without a graph, and the gradients go to the targets in their own dtypes.
Tensor linear_impl(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   backend::GemmEpilogue act, const GradTargets* targets = nullptr,
                   const Tensor* residual = nullptr) {
  const ops::OpScope op_scope(Op::linear, x);
  check_operands(Op::linear, x, weight);
  EMBER_CHECK(weight.dim() == 2, op_name(Op::linear), ": weight shape ", weight.shape().to_string(),
              " (expected [out_features, in_features])");
  EMBER_CHECK(x.dim() >= 1 && x.shape().at(-1) == weight.shape()[1], op_name(Op::linear),
              ": input shape ", x.shape().to_string(), " does not match weight shape ",
              weight.shape().to_string(), " (expected input.size(-1) == ", weight.shape()[1],
              ", got ", x.dim() ? x.shape().at(-1) : 0, ")");
  if (bias.defined()) {
    ops::check_same_dtype("linear", x, bias);
    ops::check_same_device("linear", x, bias);
    EMBER_CHECK(bias.dim() == 1 && bias.shape()[0] == weight.shape()[0], op_name(Op::linear),
                ": bias shape ", bias.shape().to_string(), " (expected [", weight.shape()[0], "])");
  }
  const int64_t in = weight.shape()[1], out_f = weight.shape()[0];
  // Rows from the leading dims, not numel / in: with in_features == 0 the input is empty but
  // the output still has a row per sample (holding the bias).
  int64_t rows = 1;
  for (int i = 0; i + 1 < x.dim(); ++i) rows *= x.shape()[i];
  Tensor x2;
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = out_f;
  {
    NoGradGuard g;
    x2 = x.reshape({rows, in});
  }
  const GradTargets to = targets ? *targets : GradTargets{&x, &weight, &bias};
  const bool grad = autograd::needs_grad(*to.x, *to.weight, *to.bias);
  const bool relu = act == backend::GemmEpilogue::relu;
  // A mask for the next linear's backward (Note [ReLU backward in the next GEMM]).
  const bool keep_mask =
      grad && relu && !targets && rows > 0 && in > 0 && out_f > 0 && relu_fold(x.device().type);
  // GELU's pre-activation for its backward (Note [GELU backward in the next GEMM]).
  const bool keep_pre = grad && act == backend::GemmEpilogue::gelu_tanh;
  Tensor y2, mask, pre;
  {
    NoGradGuard g;
    Tensor r2;
    if (residual) {
      EMBER_ASSERT(!grad && act == backend::GemmEpilogue::none && residual->shape() == out_shape,
                   "linear: a residual in the product needs no gradient and no activation");
      r2 = residual->contiguous().reshape({rows, out_f});
    }
    y2 = gemm(x2, weight.t(), bias, Shape{}, act, nullptr,
              {.out = keep_mask ? &mask : nullptr,
               .pre_out = keep_pre ? &pre : nullptr,
               .residual = residual ? &r2 : nullptr,
               .b_read_only = is_read_only(weight)});
  }
  Tensor out = ops::make_view(y2, out_shape, contiguous_strides(out_shape), 0);
  if (grad) {
    auto node = std::make_shared<LinearNode>();
    node->nx = to.x->requires_grad();
    node->nw = to.weight->requires_grad();
    node->nb = to.bias->defined() && to.bias->requires_grad();
    node->compute = x.dtype();
    node->gx = to.x->dtype();
    node->gw = to.weight->dtype();
    node->gb = to.bias->defined() ? to.bias->dtype() : x.dtype();
    node->rows = rows;
    node->out_f = out_f;
    node->xs = x.shape();
    node->sx = SavedTensor(node->nw ? x2 : Tensor());
    node->sw = SavedTensor(node->nx ? weight : Tensor());
    node->sy = SavedTensor(relu ? y2 : Tensor());
    node->spre = SavedTensor(pre);
    if (mask.defined())
      node->own = std::make_shared<ActLink>(ActLink{.mask = mask, .wants_bias_grad = node->nb});
    if (pre.defined() && rows > 0 && in > 0 && out_f > 0 && gelu_fold())
      node->own =
          std::make_shared<ActLink>(ActLink{.pre = node->spre, .wants_bias_grad = node->nb});
    // A link only to x itself (not to a cast of it: its gradient is another tensor's).
    if (node->nx && out_f > 0 && (!targets || targets->x->is_same(x)))
      node->input = input_link(x, rows);
    const Tensor* inputs[] = {to.x, to.weight, to.bias};
    autograd::attach(node, out, inputs);
  }
  return out;
}

}  // namespace

namespace {

// Note [Autocast's linear writes f32 gradients]
// Under autocast a linear of f32 x and parameters casts each to bf16 with a differentiable
// .to(), so its backward produces bf16 gradients that three more kernels convert to f32
// (GPT-2 124M: 146 conversions a step, 1.8 ms of 42 on the H200). When a gradient is needed
// and every input is f32 or the low dtype, the casts are instead made without a graph and the
// linear's own node takes the f32 tensors as its inputs: its 16-bit GEMMs write dX, dW and
// the bias gradient (cuBLASLt's BGRADB) in f32 directly, with f32 accumulation throughout.
// They differ from the cast path only by that path's rounding of each gradient to bf16 before
// widening it (the f32 result is the more exact one; tests/test_autocast_linear.cpp). The
// forward is the cast path's, bit for bit.
std::optional<Tensor> autocast_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                      backend::GemmEpilogue act) {
  if (!autocast_enabled() || autocast_policy(Op::linear) != AutocastPolicy::lower) return {};
  const DType low = autocast_dtype();
  bool wide = false;
  for (const Tensor* t : {&x, &weight, &bias}) {
    if (!t->defined()) continue;
    if (t->dtype() != DType::f32 && t->dtype() != low) return {};
    wide = wide || t->dtype() == DType::f32;
  }
  if (!wide || !weight.defined() || !autograd::needs_grad(x, weight, bias)) return {};
  Tensor xl, wl, bl;
  {
    NoGradGuard no_grad;
    xl = ops::low_copy_of(x, low);  // Note [A lower-precision copy beside a tensor]
    if (!xl.defined()) xl = ops::cast_to(x, low);
    wl = ops::autocast_lower(weight);
    bl = ops::autocast_lower(bias);
  }
  const GradTargets targets{&x, &weight, &bias};
  return linear_impl(xl, wl, bl, act, &targets);
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autocast_enabled())
    if (auto y = autocast_linear(x, weight, bias, backend::GemmEpilogue::none)) return *y;
  if (const auto c = ops::autocast(Op::linear, {&x, &weight, &bias}))
    return linear(c[0], c[1], c[2]);
  return linear_impl(x, weight, bias, backend::GemmEpilogue::none);
}

// Note [A residual in the product]
// A pre-norm transformer block ends each half with x + proj(h): at decode, with one row per
// sequence, the add is a kernel launch of its own beside a product that is itself only a few
// microseconds. linear(x, weight, bias, residual) asks the backend to add the residual in the
// GEMM (GemmArgs::residual): the few-rows kernel adds it in f32 before its one rounding into
// C (Note [Products of a few rows] in src/cuda/gemv.cu); cuBLASLt and the CPU's BLAS get it
// copied into C first and accumulate the product onto it (beta = 1), so there the add's
// kernel becomes a copy. The sum is rounded once instead of twice (the product, then the
// add): results differ from residual + linear(x, weight, bias) by that rounding. A gradient
// to compute, an activation, or a residual of another dtype, device or shape than the
// product's takes the composite, with its usual backward.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual) {
  if (!residual.defined()) return linear(x, weight, bias);
  if (autograd::needs_grad(x, weight, bias, residual) ||
      (autocast_enabled() && autocast_policy(Op::linear) == AutocastPolicy::lower &&
       (x.dtype() != autocast_dtype() || weight.dtype() != autocast_dtype() ||
        (bias.defined() && bias.dtype() != autocast_dtype()))))
    return add(residual, linear(x, weight, bias));
  ops::check_defined(op_name(Op::linear), x, "input");
  ops::check_defined(op_name(Op::linear), weight, "weight");
  Shape out_shape = x.shape();
  if (weight.dim() == 2 && x.dim() >= 1) out_shape[out_shape.size() - 1] = weight.shape()[0];
  if (residual.dtype() != x.dtype() || residual.device() != x.device() ||
      residual.shape() != out_shape || weight.dim() != 2)
    return add(residual, linear(x, weight, bias));
  return linear_impl(x, weight, bias, backend::GemmEpilogue::none, nullptr, &residual);
}

namespace {
// layer_norm_linear / rms_norm_linear / rms_norm_swiglu: the fused kernel when it applies
// (every product of the same rows in one launch; swiglu: silu(P₀)·P₁ as one output), else
// `composite`.
template <typename Composite>
std::vector<Tensor> norm_then_linears(const char* op, const Tensor& x, const backend::RowNorm& norm,
                                      const Tensor& norm_weight, const Tensor& norm_bias,
                                      const std::vector<Tensor>& weights,
                                      const std::vector<Tensor>& biases, Activation activation,
                                      bool swiglu, Composite composite) {
  ops::check_defined(op, x, "input");
  EMBER_CHECK(!weights.empty(), op, ": no weights (expected at least one)");
  EMBER_CHECK(biases.empty() || biases.size() == weights.size(), op, ": ", biases.size(),
              " biases for ", weights.size(), " weights (expected one per weight, or none)");
  for (const Tensor& w : weights) ops::check_defined(op, w, "weight");
  EMBER_CHECK(x.dim() >= 1, op, ": input shape ", x.shape().to_string(),
              " (expected at least one dim: the normalised one)");
  auto bias_of = [&](size_t i) { return biases.empty() ? Tensor() : biases[i]; };
  bool grad = autograd::needs_grad(x, norm_weight, norm_bias);
  for (size_t i = 0; i < weights.size(); ++i)
    grad = grad || autograd::needs_grad(weights[i], bias_of(i));
  auto same = [&](const Tensor& t) {
    return !t.defined() || (t.dtype() == x.dtype() && t.device() == x.device() &&
                            t.is_contiguous() && t.dim() == 1);
  };
  const bool half = x.dtype() == DType::bf16 || x.dtype() == DType::f16;
  const bool lowered = autocast_enabled() && autocast_policy(Op::linear) == AutocastPolicy::lower;
  bool fits = !grad && half && x.is_contiguous() && same(norm_weight) && same(norm_bias) &&
              !(lowered && x.dtype() != autocast_dtype()) && !x.device().is_cpu() &&
              weights.size() <= 3;
  for (size_t i = 0; fits && i < weights.size(); ++i) {
    const Tensor& w = weights[i];
    fits = w.dim() == 2 && x.shape().at(-1) == w.size(1) && same(bias_of(i)) &&
           w.dtype() == x.dtype() && w.device() == x.device() &&
           (!swiglu || w.shape() == weights[0].shape());
  }
  if (!fits) return composite();
  const ops::OpScope op_scope(Op::linear, x);
  const int64_t k = x.shape().at(-1), rows = x.numel() / std::max<int64_t>(k, 1);
  std::vector<Tensor> outs, held;  // held: contiguous weights alive until the launch
  std::vector<backend::GemmArgs> gs;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor w = weights[i].is_contiguous() ? weights[i] : weights[i].contiguous();
    held.push_back(w);
    const int64_t n = w.size(0);
    Shape out_shape = x.shape();
    out_shape[out_shape.size() - 1] = n;
    if (!swiglu || i == 0) outs.push_back(ops::make_tensor(out_shape, x.dtype(), x.device()));
    backend::GemmArgs g;
    g.dtype = x.dtype();
    g.device = x.device().index;
    g.trans_b = true;
    g.m = rows;
    g.n = n;
    g.k = k;
    g.a = x.data_ptr();
    g.lda = k;
    g.b = w.data_ptr();
    g.ldb = k;
    g.b_read_only = is_read_only(w);  // a contiguous copy made here is not
    g.c = outs.back().data_ptr();
    g.ldc = n;
    const Tensor b = bias_of(i);
    g.bias = b.defined() ? b.data_ptr() : nullptr;
    g.epilogue = activation == Activation::relu        ? backend::GemmEpilogue::relu
                 : activation == Activation::gelu_tanh ? backend::GemmEpilogue::gelu_tanh
                                                       : backend::GemmEpilogue::none;
    if (rows == 0 || n == 0) return composite();
    gs.push_back(g);
  }
  backend::RowNorm rn = norm;
  rn.weight = norm_weight.defined() ? norm_weight.data_ptr() : nullptr;
  rn.bias = norm_bias.defined() ? norm_bias.data_ptr() : nullptr;
  if (k == 0 || !ops::backend_of(x).norm_linear(x.device().index, gs, rn, swiglu))
    return composite();
  return outs;
}

// The composite's norm: a 16-bit x whose norm parameters share its dtype is normalised with
// autocast off, by the 16-bit kernel that computes in f32 and rounds once — the bits of the f32
// norm autocast would run, cast back by the linear after it, in one kernel instead of three
// (Note [Norms in the weights' dtype] in src/models/gpt2.cpp).
template <typename Norm>
Tensor norm_in_own_dtype(const Tensor& x, const Tensor& norm_weight, const Tensor& norm_bias,
                         Norm norm) {
  const bool half = x.dtype() == DType::bf16 || x.dtype() == DType::f16;
  const bool own = (!norm_weight.defined() || norm_weight.dtype() == x.dtype()) &&
                   (!norm_bias.defined() || norm_bias.dtype() == x.dtype());
  if (!half || !own || !autocast_enabled() || autograd::needs_grad(x, norm_weight, norm_bias))
    return norm();
  const AutocastGuard off(x.dtype(), /*enabled=*/false);
  return norm();
}

// linear(n, weights[i], biases[i], activation) for each weight.
std::vector<Tensor> linears(const Tensor& n, const std::vector<Tensor>& weights,
                            const std::vector<Tensor>& biases, Activation activation) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < weights.size(); ++i)
    out.push_back(linear(n, weights[i], biases.empty() ? Tensor() : biases[i], activation));
  return out;
}

Tensor layer_normed(const Tensor& x, const Tensor& norm_weight, const Tensor& norm_bias,
                    double eps) {
  return norm_in_own_dtype(x, norm_weight, norm_bias, [&] {
    return layer_norm(x, Shape{x.shape().at(-1)}, norm_weight, norm_bias, eps);
  });
}

Tensor rms_normed(const Tensor& x, const Tensor& norm_weight, double eps) {
  return norm_in_own_dtype(x, norm_weight, Tensor(),
                           [&] { return rms_norm(x, Shape{x.shape().at(-1)}, norm_weight, eps); });
}
}  // namespace

std::vector<Tensor> layer_norm_linear(const Tensor& x, const Tensor& norm_weight,
                                      const Tensor& norm_bias, double eps,
                                      const std::vector<Tensor>& weights,
                                      const std::vector<Tensor>& biases, Activation activation) {
  return norm_then_linears("layer_norm_linear", x, {.eps = eps}, norm_weight, norm_bias, weights,
                           biases, activation, false, [&] {
                             return linears(layer_normed(x, norm_weight, norm_bias, eps), weights,
                                            biases, activation);
                           });
}

std::vector<Tensor> rms_norm_linear(const Tensor& x, const Tensor& norm_weight, double eps,
                                    const std::vector<Tensor>& weights,
                                    const std::vector<Tensor>& biases, Activation activation) {
  return norm_then_linears(
      "rms_norm_linear", x, {.eps = eps, .rms = true}, norm_weight, Tensor(), weights, biases,
      activation, false,
      [&] { return linears(rms_normed(x, norm_weight, eps), weights, biases, activation); });
}

Tensor layer_norm_linear(const Tensor& x, const Tensor& norm_weight, const Tensor& norm_bias,
                         double eps, const Tensor& weight, const Tensor& bias,
                         Activation activation) {
  return layer_norm_linear(x, norm_weight, norm_bias, eps, std::vector<Tensor>{weight},
                           std::vector<Tensor>{bias}, activation)
      .front();
}

Tensor rms_norm_linear(const Tensor& x, const Tensor& norm_weight, double eps, const Tensor& weight,
                       const Tensor& bias, Activation activation) {
  return rms_norm_linear(x, norm_weight, eps, std::vector<Tensor>{weight},
                         std::vector<Tensor>{bias}, activation)
      .front();
}

Tensor rms_norm_swiglu(const Tensor& x, const Tensor& norm_weight, double eps,
                       const Tensor& gate_weight, const Tensor& up_weight, const Tensor& gate_bias,
                       const Tensor& up_bias) {
  ops::check_defined("rms_norm_swiglu", gate_weight, "gate weight");
  ops::check_defined("rms_norm_swiglu", up_weight, "up weight");
  EMBER_CHECK(gate_weight.shape() == up_weight.shape(), "rms_norm_swiglu: gate weight ",
              gate_weight.shape().to_string(), " and up weight ", up_weight.shape().to_string(),
              " (expected one shape: up's column i multiplies gate's)");
  const std::vector<Tensor> weights{gate_weight, up_weight}, biases{gate_bias, up_bias};
  return norm_then_linears("rms_norm_swiglu", x, {.eps = eps, .rms = true}, norm_weight, Tensor(),
                           weights, biases, Activation::none, true,
                           [&] {
                             const Tensor n = rms_normed(x, norm_weight, eps);
                             return std::vector<Tensor>{silu(linear(n, gate_weight, gate_bias)) *
                                                        linear(n, up_weight, up_bias)};
                           })
      .front();
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation activation) {
  if (activation == Activation::none) return linear(x, weight, bias);
  const backend::GemmEpilogue act = activation == Activation::relu
                                        ? backend::GemmEpilogue::relu
                                        : backend::GemmEpilogue::gelu_tanh;
  if (autocast_enabled())
    if (auto y = autocast_linear(x, weight, bias, act)) return *y;
  if (const auto c = ops::autocast(Op::linear, {&x, &weight, &bias}))
    return linear(c[0], c[1], c[2], activation);
  return linear_impl(x, weight, bias, act);
}

}  // namespace ember

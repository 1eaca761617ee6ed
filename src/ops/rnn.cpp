// src/ops/rnn.cpp — the rnn family: lstm_recurrence, the fused LSTM layer direction that
// nn::LSTM runs (src/nn/rnn.cpp).
//
// Shape letters: T steps, N batch, H hidden, G = 4H gates (PyTorch's order i, f, g, o).
//
// Note [Fused LSTM]
// Composed from ops, an LSTM step is ~12 kernels forward and ~25 backward (the gate chunks,
// four activations, the products, the per-step linear and its bias reduction), and each
// step's gradient of gx[t] is a full [T, N, G] tensor; the H200 ran the 2×512 benchmark layer
// at a tenth of cuDNN's speed. Fused, a step is one GEMM and one kernel each way:
//   forward   gh = h_{t-1}·W_hhᵀ                                  GEMM [N, G]
//             h_t, c_t, acts_t = lstm_step(gx[t], gh, h_{t-1}, c_{t-1})  (kernels/rnn.hpp)
//   backward  dG_t, dc_{t-1} = lstm_step_backward(dY[t], carry, acts_t, c_t, c_{t-1})
//             carry_h = dG_t·W_hh (+ the masked rows' pass-through)   GEMM [N, H]
// and the weight gradient is one GEMM over all steps after the loop, since the states
// h_0 .. h_{T-1} lie contiguous in the output:
//   dW_hh = Σ_t dG_tᵀ·h_{t-1} = dG[steps 1..]ᵀ·Y_h[0 .. T-2]  +  dG[first]ᵀ·h0
// (reverse: the predecessor of step t is t + 1). The output holds h_t and c_t of every step,
// so backward needs nothing else but the activated gates. gx's gradient is dG itself. The
// biases live in gx (the module adds b_hh to linear's bias), so their gradients come from
// linear's backward.
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {

// The address of element `offset` of contiguous t.
void* at_mut(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.data_ptr()) + offset * static_cast<int64_t>(element_size(t.dtype()));
}
const void* at(const Tensor& t, int64_t offset) { return at_mut(t, offset); }

// C[m, n] = op(A)·op(B) + beta·C on contiguous row-major blocks.
void gemm(const Tensor& like, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc,
          double beta) {
  backend::GemmArgs g;
  g.dtype = like.dtype();
  g.device = like.device().index;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  g.beta = beta;
  ops::backend_of(like).gemm(g);
}

struct LstmGeometry {
  int64_t steps, batch, hidden;
  bool reverse;
  int64_t state_size() const { return batch * hidden; }                  // one [N, H]
  int64_t gate_size() const { return batch * 4 * hidden; }               // one [N, G]
  int64_t h_at(int64_t t) const { return t * state_size(); }             // Y[0][t]
  int64_t c_at(int64_t t) const { return (steps + t) * state_size(); }   // Y[1][t]
  int64_t step(int64_t i) const { return reverse ? steps - 1 - i : i; }  // i-th step taken
};

void check_lstm(const Tensor& gx, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                const Tensor& mask) {
  const char* op = op_name(Op::lstm_recurrence);
  const ops::OpScope op_scope(Op::lstm_recurrence, gx);
  ops::check_supported(Op::lstm_recurrence, gx, "gx");
  EMBER_CHECK(gx.dim() == 3 && gx.size(2) % 4 == 0 && gx.size(2) > 0, op, ": gx shape ",
              gx.shape().to_string(), " (expected [T, N, 4*H])");
  const int64_t t = gx.size(0), n = gx.size(1), h = gx.size(2) / 4;
  const std::pair<const Tensor*, const char*> operands[] = {
      {&h0, "h0"}, {&c0, "c0"}, {&w_hh, "w_hh"}};
  for (const auto& [x, name] : operands) {
    ops::check_defined(op, *x, name);
    ops::check_same_dtype(op, gx, *x);
    ops::check_same_device(op, gx, *x);
  }
  EMBER_CHECK(h0.shape() == Shape({n, h}) && c0.shape() == Shape({n, h}), op, ": h0 shape ",
              h0.shape().to_string(), ", c0 shape ", c0.shape().to_string(),
              " (expected [N, H] = ", Shape({n, h}).to_string(), " for gx shape ",
              gx.shape().to_string(), ")");
  EMBER_CHECK(w_hh.shape() == Shape({4 * h, h}), op, ": w_hh shape ", w_hh.shape().to_string(),
              " (expected [4*H, H] = ", Shape({4 * h, h}).to_string(), ")");
  if (mask.defined()) {
    ops::check_same_device(op, gx, mask);
    EMBER_CHECK(mask.dtype() == DType::boolean && mask.shape() == Shape({t, n}), op, ": mask ",
                dtype_name(mask.dtype()), " ", mask.shape().to_string(),
                " (expected bool [T, N] = ", Shape({t, n}).to_string(), ")");
  }
}

const bool* mask_at(const Tensor& mask, int64_t t, int64_t n) {
  return mask.defined() ? static_cast<const bool*>(mask.data_ptr()) + t * n : nullptr;
}

// The states [2, T, N, H] and the activated gates [T, N, G] (Note [Fused LSTM]).
std::pair<Tensor, Tensor> lstm_forward(const LstmGeometry& geo, const Tensor& gx, const Tensor& h0,
                                       const Tensor& c0, const Tensor& w_hh, const Tensor& mask) {
  const int64_t t_n = geo.steps, n = geo.batch, h = geo.hidden, g = 4 * h;
  Tensor y = ops::make_tensor({2, t_n, n, h}, gx.dtype(), gx.device());
  Tensor acts = ops::make_tensor({t_n, n, g}, gx.dtype(), gx.device());
  Tensor gh = ops::make_tensor({n, g}, gx.dtype(), gx.device());
  const backend::Backend& be = ops::backend_of(gx);
  for (int64_t i = 0; i < t_n; ++i) {
    const int64_t t = geo.step(i), prev = geo.step(i - 1);
    const void* h_prev = i == 0 ? h0.data_ptr() : at(y, geo.h_at(prev));
    const void* c_prev = i == 0 ? c0.data_ptr() : at(y, geo.c_at(prev));
    gemm(gx, false, true, n, g, h, h_prev, h, w_hh.data_ptr(), h, gh.data_ptr(), g, 0.0);
    backend::LstmStepArgs a;
    a.dtype = gx.dtype();
    a.device = gx.device().index;
    a.batch = n;
    a.hidden = h;
    a.gx = at(gx, t * geo.gate_size());
    a.gh = gh.data_ptr();
    a.h_prev = h_prev;
    a.c_prev = c_prev;
    a.mask = mask_at(mask, t, n);
    a.h = at_mut(y, geo.h_at(t));
    a.c = at_mut(y, geo.c_at(t));
    a.acts = at_mut(acts, t * geo.gate_size());
    be.lstm_step(a);
  }
  return {y, acts};
}

struct LstmGrads {
  Tensor gx, h0, c0, w_hh;
};

LstmGrads lstm_backward(const LstmGeometry& geo, const Tensor& grad_y, const Tensor& y,
                        const Tensor& acts, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                        const Tensor& mask, bool need_w) {
  const int64_t t_n = geo.steps, n = geo.batch, h = geo.hidden, g = 4 * h;
  const backend::Backend& be = ops::backend_of(y);
  LstmGrads r;
  r.gx = ops::make_tensor({t_n, n, g}, y.dtype(), y.device());
  r.h0 = ops::make_tensor({n, h}, y.dtype(), y.device());
  r.c0 = ops::make_tensor({n, h}, y.dtype(), y.device());
  be.fill(ops::view_of(r.h0), 0.0);
  be.fill(ops::view_of(r.c0), 0.0);
  for (int64_t i = t_n - 1; i >= 0; --i) {
    const int64_t t = geo.step(i), prev = geo.step(i - 1);
    backend::LstmStepBackwardArgs a;
    a.dtype = y.dtype();
    a.device = y.device().index;
    a.batch = n;
    a.hidden = h;
    a.grad_h = at(grad_y, geo.h_at(t));
    a.grad_c = at(grad_y, geo.c_at(t));
    a.carry_h = r.h0.data_ptr();
    a.carry_c = r.c0.data_ptr();
    a.acts = at(acts, t * geo.gate_size());
    a.c = at(y, geo.c_at(t));
    a.c_prev = i == 0 ? c0.data_ptr() : at(y, geo.c_at(prev));
    a.mask = mask_at(mask, t, n);
    a.grad_gates = at_mut(r.gx, t * geo.gate_size());
    be.lstm_step_backward(a);
    // carry_h += dG_t·W_hh: the gradient of h_{t-1} (of h0 after the first step).
    gemm(y, false, false, n, h, g, a.grad_gates, g, w_hh.data_ptr(), h, r.h0.data_ptr(), h, 1.0);
  }
  if (need_w) {
    r.w_hh = ops::make_tensor({g, h}, y.dtype(), y.device());
    // Steps after the first read h of the step taken before them (Note [Fused LSTM]).
    const int64_t first = geo.step(0), rest = (t_n - 1) * n;
    if (t_n > 1) {
      const int64_t dg0 = geo.reverse ? 0 : n * g, h0_at = geo.reverse ? geo.h_at(1) : 0;
      gemm(y, true, false, g, h, rest, at(r.gx, dg0), g, at(y, h0_at), h, r.w_hh.data_ptr(), h,
           0.0);
    }
    gemm(y, true, false, g, h, n, at(r.gx, first * geo.gate_size()), g, h0.data_ptr(), h,
         r.w_hh.data_ptr(), h, t_n > 1 ? 1.0 : 0.0);
  }
  return r;
}

}  // namespace

Tensor lstm_recurrence(const Tensor& gx, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                       const Tensor& mask, bool reverse) {
  check_lstm(gx, h0, c0, w_hh, mask);
  const LstmGeometry geo{gx.size(0), gx.size(1), gx.size(2) / 4, reverse};
  Tensor gxc, h0c, c0c, wc, mc, y, acts;
  {
    NoGradGuard no_grad;
    gxc = gx.contiguous();
    h0c = h0.contiguous();
    c0c = c0.contiguous();
    wc = w_hh.contiguous();
    mc = mask.defined() ? mask.contiguous() : Tensor();
    std::tie(y, acts) = lstm_forward(geo, gxc, h0c, c0c, wc, mc);
  }
  if (autograd::needs_grad(gx, h0, c0, w_hh)) {
    const bool need_w = autograd::needs_grad(w_hh);
    autograd::record(
        Op::lstm_recurrence, y, {&gx, &h0, &c0, &w_hh},
        [geo, need_w, sy = SavedTensor(y), sa = SavedTensor(acts), sh = SavedTensor(h0c),
         sc = SavedTensor(c0c), sw = SavedTensor(wc), mc](const Tensor& grad, GradList& gi) {
          LstmGrads r = lstm_backward(geo, grad.contiguous(), sy.get(), sa.get(), sh.get(),
                                      sc.get(), sw.get(), mc, need_w);
          gi[0] = r.gx;
          gi[1] = r.h0;
          gi[2] = r.c0;
          gi[3] = r.w_hh;
        });
  }
  return y;
}

}  // namespace ember

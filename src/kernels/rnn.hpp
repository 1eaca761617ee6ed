// src/kernels/rnn.hpp — the fused LSTM step's formulas, shared by src/cpu/rnn.cpp and
// src/cuda/rnn.cu (Note [Fused LSTM] in src/ops/rnn.cpp). Each function computes one cell
// (row n, column j of the [N, H] state) from the four gates at columns j, H + j, 2H + j,
// 3H + j of the row's [4H] block; M is the backend's math policy (exp, tanh), as in
// src/kernels/elementwise.hpp, so a backend's LSTM and its sigmoid/tanh ops agree.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "kernels/elementwise.hpp"

namespace ember::kernels {

/// One cell of LstmStepArgs: the gates, c = f·c_prev + i·g, h = o·tanh(c).
template <typename M, typename T>
EMBER_HD inline void lstm_step_cell(const backend::LstmStepArgs& a, int64_t e) {
  const int64_t hd = a.hidden, n = e / hd, j = e - n * hd, g0 = n * 4 * hd + j;
  const T* h_prev = static_cast<const T*>(a.h_prev);
  const T* c_prev = static_cast<const T*>(a.c_prev);
  T* acts = static_cast<T*>(a.acts);
  T* h = static_cast<T*>(a.h);
  T* c = static_cast<T*>(a.c);
  if (a.mask && !a.mask[n]) {  // a padded step: the state passes through
    h[e] = h_prev[e];
    c[e] = c_prev[e];
    for (int k = 0; k < 4; ++k) acts[g0 + k * hd] = T(0);
    return;
  }
  const T* gx = static_cast<const T*>(a.gx);
  const T* gh = static_cast<const T*>(a.gh);
  const T i = sigmoid_of<M>(gx[g0] + gh[g0]);
  const T f = sigmoid_of<M>(gx[g0 + hd] + gh[g0 + hd]);
  const T g = M::tanh(gx[g0 + 2 * hd] + gh[g0 + 2 * hd]);
  const T o = sigmoid_of<M>(gx[g0 + 3 * hd] + gh[g0 + 3 * hd]);
  const T cn = f * c_prev[e] + i * g;
  acts[g0] = i;
  acts[g0 + hd] = f;
  acts[g0 + 2 * hd] = g;
  acts[g0 + 3 * hd] = o;
  c[e] = cn;
  h[e] = o * M::tanh(cn);
}

/// One cell of LstmStepBackwardArgs. With dh, dc the total gradients of h_t, c_t:
///   dc_t   += dh·o·(1 - tanh²c_t)           dc_{t-1} = dc_t·f
///   dG_i = dc_t·g·i(1-i)    dG_f = dc_t·c_{t-1}·f(1-f)
///   dG_g = dc_t·i·(1-g²)    dG_o = dh·tanh(c_t)·o(1-o)
template <typename M, typename T>
EMBER_HD inline void lstm_step_backward_cell(const backend::LstmStepBackwardArgs& a, int64_t e) {
  const int64_t hd = a.hidden, n = e / hd, j = e - n * hd, g0 = n * 4 * hd + j;
  T* carry_h = static_cast<T*>(a.carry_h);
  T* carry_c = static_cast<T*>(a.carry_c);
  T* dg = static_cast<T*>(a.grad_gates);
  const T dh = static_cast<const T*>(a.grad_h)[e] + carry_h[e];
  const T dc_in = static_cast<const T*>(a.grad_c)[e] + carry_c[e];
  if (a.mask && !a.mask[n]) {  // a padded step passed the state through: so does its gradient
    carry_h[e] = dh;
    carry_c[e] = dc_in;
    for (int k = 0; k < 4; ++k) dg[g0 + k * hd] = T(0);
    return;
  }
  const T* acts = static_cast<const T*>(a.acts);
  const T i = acts[g0], f = acts[g0 + hd], g = acts[g0 + 2 * hd], o = acts[g0 + 3 * hd];
  const T tc = M::tanh(static_cast<const T*>(a.c)[e]);
  const T dc = dc_in + dh * o * (T(1) - tc * tc);
  dg[g0] = dc * g * i * (T(1) - i);
  dg[g0 + hd] = dc * static_cast<const T*>(a.c_prev)[e] * f * (T(1) - f);
  dg[g0 + 2 * hd] = dc * i * (T(1) - g * g);
  dg[g0 + 3 * hd] = dh * tc * o * (T(1) - o);
  carry_c[e] = dc * f;
  carry_h[e] = T(0);
}

}  // namespace ember::kernels

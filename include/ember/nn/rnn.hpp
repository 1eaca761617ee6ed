// ember/nn/rnn.hpp — recurrent layers (torch.nn.RNN, LSTM, GRU) and their cells (RNNCell,
// LSTMCell, GRUCell), with PyTorch's parameter names, initialisation, gate order and shapes.
//
// Shape letters: T = sequence length, N = batch, I = input_size, H = hidden_size, L =
// num_layers, D = 2 when bidirectional else 1, P = proj_size (LSTM only; H when 0).
// Input [T, N, I], or [N, T, I] with batch_first, or unbatched [T, I]. Results:
//   output [T, N, D·P]  (batch_first: [N, T, D·P]; unbatched: [T, D·P])
//   h_n    [L·D, N, P]  (unbatched: [L·D, P]),  c_n [L·D, N, H] (LSTM)
// Parameters per layer k and direction (suffix "_reverse" for the backward one), as PyTorch:
//   weight_ih_l{k} [G·H, I or D·P], weight_hh_l{k} [G·H, P], bias_ih_l{k} [G·H], bias_hh_l{k}
//   [G·H], weight_hr_l{k} [P, H] (LSTM with proj_size), all ~ U(±1/√H).
// G = 1 (RNN), 4 (LSTM: gates i, f, g, o), 3 (GRU: r, z, n).
//
// Variable lengths (ember's equivalent of pack_padded_sequence): pass `lengths` (i64 [N],
// each 1..T) with the padded batch. Steps at t >= lengths[n] do not update sample n's state
// and their outputs are zero, exactly as PyTorch's packed sequences followed by
// pad_packed_sequence(total_length = T); h_n holds each sample's state at its last valid step
// (for the reverse direction: after step 0, having started at step lengths[n] - 1).
//
//   nn::LSTM lstm(nn::RNNOptions{.input_size = 8, .hidden_size = 16, .num_layers = 2});
//   auto [out, h_n, c_n] = lstm(x);                         // x [T, N, 8]
//   auto r = lstm(nn::pack_padded_sequence(x, lengths));     // padded steps stay zero
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ember/nn/module.hpp"

namespace ember::nn {

struct RNNOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  /// RNN only: "tanh" or "relu".
  std::string nonlinearity = "tanh";
  bool bias = true;
  bool batch_first = false;
  /// Dropout on the outputs of every layer but the last (training mode only).
  double dropout = 0.0;
  bool bidirectional = false;
  /// LSTM only: the hidden state is projected to this size (0 = no projection).
  int64_t proj_size = 0;
  static constexpr auto fields() {
    using O = RNNOptions;
    return std::tuple{field("input_size", &O::input_size),
                      field("hidden_size", &O::hidden_size),
                      field("num_layers", &O::num_layers),
                      field("nonlinearity", &O::nonlinearity),
                      field("bias", &O::bias),
                      field("batch_first", &O::batch_first),
                      field("dropout", &O::dropout),
                      field("bidirectional", &O::bidirectional),
                      field("proj_size", &O::proj_size)};
  }
};

/// Initial states; undefined means zeros. h: [L·D, N, P]; c: [L·D, N, H] (LSTM only).
struct RNNState {
  Tensor h{};
  Tensor c{};
};

/// output, h_n and (LSTM) c_n, in PyTorch's shapes (see the file comment).
struct RNNOutput {
  Tensor output{};
  Tensor h_n{};
  Tensor c_n{};
};

/// A padded batch with the true length of each sequence: what PyTorch's PackedSequence
/// carries. `data` is [N, T, ...] when batch_first is true, [T, N, ...] when false; a module
/// of the other layout converts it. Unset (a PackedSequence made by hand): laid out as the
/// module expects.
struct PackedSequence {
  Tensor data{};
  /// i64 [N], each in 1..T.
  Tensor lengths{};
  /// The layout of `data`; pack_padded_sequence records it.
  std::optional<bool> batch_first{};
};

/// ember's pack_padded_sequence: checks the lengths (i64 [N], 1..T; sorted or not, as
/// enforce_sorted=False) and pairs them with the padded batch.
PackedSequence pack_padded_sequence(const Tensor& padded, const Tensor& lengths,
                                    bool batch_first = false);

enum class RNNMode : uint8_t { rnn_tanh, rnn_relu, lstm, gru };

/// The shared multi-layer recurrent network. Each layer projects its whole input sequence in
/// one GEMM (x·W_ihᵀ + b_ih for all T steps), then per step adds h·W_hhᵀ + b_hh and applies
/// the gate math; everything is built from ops, so autograd supplies the backward.
class RNNBaseImpl : public ModuleImpl {
 public:
  /// The output sequence only.
  Tensor forward(const Tensor& input) override { return forward(input, RNNState{}).output; }
  /// Optional initial state; optional lengths (i64 [N]) for padded batches.
  RNNOutput forward(const Tensor& input, const RNNState& state, const Tensor& lengths = Tensor());
  RNNOutput forward(const PackedSequence& packed, const RNNState& state = {});

  json options() const override;
  std::string extra_repr() const override;
  const RNNOptions& rnn_options() const { return options_; }
  RNNMode mode() const { return mode_; }

 protected:
  RNNBaseImpl(RNNOptions options, RNNMode mode);

 private:
  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
  };
  // One direction of one layer over time-major x [T, N, In]; h0/c0 [N, P]/[N, H]; mask [T,
  // N, 1] bool (or undefined). Returns the outputs [T, N, P] and the final h, c.
  Tensor run_direction(const Weights& w, const Tensor& x, Tensor& h, Tensor& c, const Tensor& mask,
                       bool reverse) const;

  RNNOptions options_;
  RNNMode mode_;
  std::vector<Weights> weights_;  // layer-major, then direction
};

/// Elman RNN: h' = tanh(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh) (or relu).
class RNNImpl : public RNNBaseImpl {
 public:
  explicit RNNImpl(RNNOptions options);
  RNNImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1)
      : RNNImpl(RNNOptions{
            .input_size = input_size, .hidden_size = hidden_size, .num_layers = num_layers}) {}
  std::string type_name() const override { return "RNN"; }
};

/// LSTM: i, f, g, o = σ, σ, tanh, σ of the gates; c' = f·c + i·g; h' = o·tanh(c') (then
/// h'·W_hrᵀ with proj_size).
class LSTMImpl : public RNNBaseImpl {
 public:
  explicit LSTMImpl(RNNOptions options);
  LSTMImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1)
      : LSTMImpl(RNNOptions{
            .input_size = input_size, .hidden_size = hidden_size, .num_layers = num_layers}) {}
  std::string type_name() const override { return "LSTM"; }
};

/// GRU: r, z = σ(gates); n = tanh(x_n + r·(h·W_hnᵀ + b_hn)); h' = (1 - z)·n + z·h.
class GRUImpl : public RNNBaseImpl {
 public:
  explicit GRUImpl(RNNOptions options);
  GRUImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1)
      : GRUImpl(RNNOptions{
            .input_size = input_size, .hidden_size = hidden_size, .num_layers = num_layers}) {}
  std::string type_name() const override { return "GRU"; }
};

template <typename Impl>
class RNNHolder : public ModuleHolder<Impl> {
 public:
  using ModuleHolder<Impl>::ModuleHolder;
  using ModuleHolder<Impl>::operator();
  RNNOutput operator()(const Tensor& input, const RNNState& state,
                       const Tensor& lengths = Tensor()) const {
    return (*this)->forward(input, state, lengths);
  }
  RNNOutput operator()(const PackedSequence& packed, const RNNState& state = {}) const {
    return (*this)->forward(packed, state);
  }
};
class RNN : public RNNHolder<RNNImpl> {
 public:
  using RNNHolder::RNNHolder;
};
class LSTM : public RNNHolder<LSTMImpl> {
 public:
  using RNNHolder::RNNHolder;
};
class GRU : public RNNHolder<GRUImpl> {
 public:
  using RNNHolder::RNNHolder;
};

// ---- cells: one time step; input [N, I] or unbatched [I] ----

struct RNNCellOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  bool bias = true;
  /// RNNCell only: "tanh" or "relu".
  std::string nonlinearity = "tanh";
  static constexpr auto fields() {
    using O = RNNCellOptions;
    return std::tuple{field("input_size", &O::input_size), field("hidden_size", &O::hidden_size),
                      field("bias", &O::bias), field("nonlinearity", &O::nonlinearity)};
  }
};

/// Parameters weight_ih [G·H, I], weight_hh [G·H, H], bias_ih, bias_hh [G·H] ~ U(±1/√H).
class RNNCellBaseImpl : public ModuleImpl {
 public:
  /// h' from a zero state (LSTMCell: h' only).
  Tensor forward(const Tensor& input) override { return step(input, RNNState{}).h; }
  /// {h', c'} (c' undefined except for LSTMCell); an undefined state means zeros.
  RNNState step(const Tensor& input, const RNNState& state);
  json options() const override;
  std::string extra_repr() const override;

 protected:
  RNNCellBaseImpl(RNNCellOptions options, RNNMode mode);

 private:
  RNNCellOptions options_;
  RNNMode mode_;
  Tensor w_ih_, w_hh_, b_ih_, b_hh_;
};

class RNNCellImpl : public RNNCellBaseImpl {
 public:
  explicit RNNCellImpl(RNNCellOptions options);
  RNNCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true,
              std::string nonlinearity = "tanh")
      : RNNCellImpl(RNNCellOptions{input_size, hidden_size, bias, std::move(nonlinearity)}) {}
  /// h' = tanh(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh).
  Tensor forward(const Tensor& input, const Tensor& h) { return step(input, {h, Tensor()}).h; }
  using RNNCellBaseImpl::forward;
  std::string type_name() const override { return "RNNCell"; }
};

class LSTMCellImpl : public RNNCellBaseImpl {
 public:
  explicit LSTMCellImpl(RNNCellOptions options);
  LSTMCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true)
      : LSTMCellImpl(RNNCellOptions{input_size, hidden_size, bias, "tanh"}) {}
  /// {h', c'} from {h, c}.
  RNNState forward(const Tensor& input, const RNNState& state) { return step(input, state); }
  using RNNCellBaseImpl::forward;
  std::string type_name() const override { return "LSTMCell"; }
};

class GRUCellImpl : public RNNCellBaseImpl {
 public:
  explicit GRUCellImpl(RNNCellOptions options);
  GRUCellImpl(int64_t input_size, int64_t hidden_size, bool bias = true)
      : GRUCellImpl(RNNCellOptions{input_size, hidden_size, bias, "tanh"}) {}
  Tensor forward(const Tensor& input, const Tensor& h) { return step(input, {h, Tensor()}).h; }
  using RNNCellBaseImpl::forward;
  std::string type_name() const override { return "GRUCell"; }
};

class RNNCell : public ModuleHolder<RNNCellImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& input, const Tensor& h) const {
    return (*this)->forward(input, h);
  }
};
class LSTMCell : public ModuleHolder<LSTMCellImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  RNNState operator()(const Tensor& input, const RNNState& state) const {
    return (*this)->forward(input, state);
  }
};
class GRUCell : public ModuleHolder<GRUCellImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& input, const Tensor& h) const {
    return (*this)->forward(input, h);
  }
};

}  // namespace ember::nn

// src/nn/rnn.cpp — RNN, LSTM, GRU and their cells. An LSTM layer without proj_size runs each
// direction as the fused op lstm_recurrence (Note [Fused LSTM] in src/ops/rnn.cpp); the
// others are composed from ops (linear, chunk, sigmoid, tanh, where, stack, cat), so autograd
// supplies the backward.
//
// Shape letters as in the header: T steps, N batch, H hidden, P = proj_size or H, G gates.
// A layer's direction runs as:
//   gx = x·W_ihᵀ + b_ih                                   [T, N, G·H], one GEMM for all steps
//   for t (T-1 .. 0 when reverse):
//     h', c' = gate_math(gx[t], h·W_hhᵀ + b_hh, h, c)     [N, P], [N, H]
//     h, c   = mask[t] ? (h', c') : (h, c)                padded steps keep the state
//     out[t] = mask[t] ? h' : 0
// Note [Reverse direction with lengths]: walking t down from T-1, the padded steps of sample n
// (t >= lengths[n]) keep its initial state, so its reverse pass effectively starts at step
// lengths[n] - 1 from h0, as PyTorch's packed sequences do.
#include "ember/nn/rnn.hpp"

#include <cmath>

#include "ember/autograd.hpp"
#include "ember/nn/init.hpp"
#include "py_repr.hpp"

namespace ember::nn {

namespace {

const char* mode_name(RNNMode m) {
  switch (m) {
    case RNNMode::lstm: return "LSTM";
    case RNNMode::gru: return "GRU";
    default: return "RNN";
  }
}

int64_t gate_count(RNNMode m) { return m == RNNMode::lstm ? 4 : m == RNNMode::gru ? 3 : 1; }

RNNMode rnn_mode(const std::string& nonlinearity, const char* who) {
  EMBER_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", who, ": nonlinearity '",
              nonlinearity, "' (expected \"tanh\" or \"relu\")");
  return nonlinearity == "relu" ? RNNMode::rnn_relu : RNNMode::rnn_tanh;
}

struct Step {
  Tensor h, c;
};

// One step's gate math. gx: this step's input projection [N, G·H] (bias included); h [N, P],
// c [N, H] (LSTM). w_hr projects LSTM's h when defined.
Step gate_math(RNNMode mode, const Tensor& gx, const Tensor& h, const Tensor& c, const Tensor& w_hh,
               const Tensor& b_hh, const Tensor& w_hr) {
  const Tensor gh = linear(h, w_hh, b_hh);
  switch (mode) {
    case RNNMode::rnn_tanh: return {tanh(add(gx, gh)), Tensor()};
    case RNNMode::rnn_relu: return {relu(add(gx, gh)), Tensor()};
    case RNNMode::lstm: {
      const std::vector<Tensor> g = chunk(add(gx, gh), 4, -1);
      const Tensor c_new = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
      Tensor h_new = mul(sigmoid(g[3]), tanh(c_new));
      if (w_hr.defined()) h_new = linear(h_new, w_hr);
      return {h_new, c_new};
    }
    case RNNMode::gru: {
      const std::vector<Tensor> x3 = chunk(gx, 3, -1), h3 = chunk(gh, 3, -1);
      const Tensor r = sigmoid(add(x3[0], h3[0])), z = sigmoid(add(x3[1], h3[1]));
      const Tensor n = tanh(add(x3[2], mul(r, h3[2])));
      return {add(n, mul(z, sub(h, n))), Tensor()};  // (1 - z)·n + z·h
    }
  }
  return {};
}

std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().to_string() : "undefined"; }

}  // namespace

PackedSequence pack_padded_sequence(const Tensor& padded, const Tensor& lengths, bool batch_first) {
  EMBER_CHECK(padded.defined() && padded.dim() >= 2, "pack_padded_sequence: input shape ",
              shape_of(padded), " (expected [T, N, *], or [N, T, *] with batch_first)");
  const int64_t t = padded.size(batch_first ? 1 : 0), n = padded.size(batch_first ? 0 : 1);
  EMBER_CHECK(lengths.defined() && lengths.dim() == 1 && lengths.size(0) == n &&
                  (lengths.dtype() == DType::i64 || lengths.dtype() == DType::i32),
              "pack_padded_sequence: lengths shape ", shape_of(lengths), " ",
              lengths.defined() ? dtype_name(lengths.dtype()) : "", " (expected i64 [N] = [", n,
              "])");
  for (int64_t len : lengths.to(DType::i64).to(Device::cpu()).to_vector<int64_t>())
    EMBER_CHECK(len >= 1 && len <= t, "pack_padded_sequence: a length of ", len,
                " (expected every length in 1..", t, ", the padded sequence length)");
  return {padded, lengths, batch_first};
}

// ---- RNNBase ----

RNNBaseImpl::RNNBaseImpl(RNNOptions o, RNNMode mode) : options_(o), mode_(mode) {
  const char* who = mode_name(mode);
  EMBER_CHECK(o.input_size > 0 && o.hidden_size > 0 && o.num_layers > 0, who, ": input_size ",
              o.input_size, ", hidden_size ", o.hidden_size, ", num_layers ", o.num_layers,
              " (expected all > 0)");
  EMBER_CHECK(o.dropout >= 0.0 && o.dropout <= 1.0, who, ": dropout ", o.dropout,
              " (expected 0 <= dropout <= 1)");
  EMBER_CHECK(o.proj_size >= 0 && o.proj_size < o.hidden_size, who, ": proj_size ", o.proj_size,
              " (expected 0 <= proj_size < hidden_size ", o.hidden_size, ")");
  EMBER_CHECK(o.proj_size == 0 || mode == RNNMode::lstm, who, ": proj_size ", o.proj_size,
              " (only LSTM supports a projection; expected 0)");
  const int64_t h = o.hidden_size, g = gate_count(mode) * h;
  const int64_t p = o.proj_size > 0 ? o.proj_size : h, dirs = o.bidirectional ? 2 : 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(h));
  for (int64_t k = 0; k < o.num_layers; ++k) {
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = std::to_string(k) + (d ? "_reverse" : "");
      const int64_t in = k == 0 ? o.input_size : p * dirs;
      Weights w;
      w.w_ih = register_parameter("weight_ih_l" + sfx, init::uniform({g, in}, bound));
      w.w_hh = register_parameter("weight_hh_l" + sfx, init::uniform({g, p}, bound));
      if (o.bias) {
        w.b_ih = register_parameter("bias_ih_l" + sfx, init::uniform({g}, bound));
        w.b_hh = register_parameter("bias_hh_l" + sfx, init::uniform({g}, bound));
      }
      if (o.proj_size > 0)
        w.w_hr = register_parameter("weight_hr_l" + sfx, init::uniform({p, h}, bound));
      weights_.push_back(w);
    }
  }
}

Tensor RNNBaseImpl::run_direction(const Weights& w, const Tensor& x, Tensor& h, Tensor& c,
                                  const Tensor& mask, bool reverse) const {
  const int64_t steps = x.size(0);
  if (mode_ == RNNMode::lstm && !w.w_hr.defined()) {
    // Note [Fused LSTM] (src/ops/rnn.cpp): the whole direction is one op; both biases go
    // into the input projection.
    const Tensor bias = w.b_ih.defined() ? add(w.b_ih, w.b_hh) : Tensor();
    const Tensor y = lstm_recurrence(linear(x, w.w_ih, bias), h, c, w.w_hh,
                                     mask.defined() ? mask.squeeze(2) : Tensor(), reverse);
    const int64_t last = reverse ? 0 : steps - 1;
    h = y.select(0, 0).select(0, last);
    c = y.select(0, 1).select(0, last);
    const Tensor out = y.select(0, 0);
    return mask.defined() ? masked_fill(out, logical_not(mask), 0.0) : out;
  }
  const Tensor gx = linear(x, w.w_ih, w.b_ih);  // [T, N, G·H]
  std::vector<Tensor> outs(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    Step s = gate_math(mode_, gx.select(0, t), h, c, w.w_hh, w.b_hh, w.w_hr);
    if (mask.defined()) {
      const Tensor m = mask.select(0, t);  // [N, 1] bool
      outs[static_cast<size_t>(t)] = masked_fill(s.h, logical_not(m), 0.0);
      h = where(m, s.h, h);
      if (s.c.defined()) c = where(m, s.c, c);
    } else {
      outs[static_cast<size_t>(t)] = s.h;
      h = s.h;
      if (s.c.defined()) c = s.c;
    }
  }
  return stack(outs, 0);
}

RNNOutput RNNBaseImpl::forward(const PackedSequence& packed, const RNNState& state) {
  EMBER_CHECK(packed.lengths.defined(), mode_name(mode_),
              ": the PackedSequence has no lengths (make it with pack_padded_sequence)");
  // Note [Padded steps are never read]: a batch packed in the other layout is transposed to
  // this module's (read as it is, N == T would pass silently with the batch transposed).
  const bool convert = packed.batch_first.has_value() && packed.data.defined() &&
                       packed.data.dim() == 3 && *packed.batch_first != options_.batch_first;
  return forward(convert ? packed.data.transpose(0, 1) : packed.data, state, packed.lengths);
}

RNNOutput RNNBaseImpl::forward(const Tensor& input, const RNNState& state, const Tensor& lengths) {
  const RNNOptions& o = options_;
  const char* who = mode_name(mode_);
  const bool bf = o.batch_first;
  EMBER_CHECK(input.defined() && (input.dim() == 3 || input.dim() == 2), who, ": input shape ",
              shape_of(input), " (expected ", bf ? "[N, T, " : "[T, N, ", o.input_size,
              "], or unbatched [T, ", o.input_size, "])");
  EMBER_CHECK(input.size(-1) == o.input_size, who, ": input shape ", input.shape().to_string(),
              " has ", input.size(-1), " features (expected input_size ", o.input_size, ")");
  const bool unbatched = input.dim() == 2;
  const Tensor x = unbatched ? input.unsqueeze(1) : (bf ? input.transpose(0, 1) : input);
  const int64_t steps = x.size(0), n = x.size(1), dirs = o.bidirectional ? 2 : 1;
  EMBER_CHECK(steps > 0, who, ": input shape ", input.shape().to_string(),
              " has no steps (expected a sequence length > 0, as PyTorch)");
  const int64_t h_size = o.hidden_size, p = o.proj_size > 0 ? o.proj_size : h_size;
  const int64_t ld = o.num_layers * dirs;
  const TensorOptions like{.dtype = x.dtype(), .device = x.device()};

  // Initial states: [L·D, N, P] and [L·D, N, H] (unbatched: without N).
  auto initial = [&](const Tensor& s, int64_t size, const char* name) {
    if (!s.defined()) return zeros({ld, n, size}, like);
    const Shape want = unbatched ? Shape{ld, size} : Shape{ld, n, size};
    EMBER_CHECK(s.shape() == want, who, ": ", name, " shape ", s.shape().to_string(), " (expected ",
                unbatched ? "[L*D, " : "[L*D, N, ", name[0] == 'c' ? "H" : "P",
                "] = ", want.to_string(), ")");
    return unbatched ? s.unsqueeze(1) : s;
  };
  EMBER_CHECK(mode_ == RNNMode::lstm || !state.c.defined(), who,
              ": got a cell state c0 (only LSTM has one)");
  const Tensor h0 = initial(state.h, p, "h0");
  const Tensor c0 = mode_ == RNNMode::lstm ? initial(state.c, h_size, "c0") : Tensor();

  // lengths -> mask [T, N, 1] (true = a real step).
  Tensor mask;
  if (lengths.defined()) {
    EMBER_CHECK(!unbatched, who, ": lengths need a batched input (got unbatched shape ",
                input.shape().to_string(), ")");
    EMBER_CHECK(lengths.dim() == 1 && lengths.size(0) == n &&
                    (lengths.dtype() == DType::i64 || lengths.dtype() == DType::i32),
                who, ": lengths shape ", lengths.shape().to_string(), " ",
                dtype_name(lengths.dtype()), " (expected i64 [N] = [", n, "])");
    const std::vector<int64_t> len = lengths.to(DType::i64).to(Device::cpu()).to_vector<int64_t>();
    std::vector<float> m(static_cast<size_t>(steps * n));
    for (int64_t b = 0; b < n; ++b) {
      EMBER_CHECK(len[static_cast<size_t>(b)] >= 1 && len[static_cast<size_t>(b)] <= steps, who,
                  ": lengths[", b, "] is ", len[static_cast<size_t>(b)], " (expected 1..", steps,
                  ": no longer than the sequence of input shape ", input.shape().to_string(), ")");
      for (int64_t t = 0; t < len[static_cast<size_t>(b)]; ++t)
        m[static_cast<size_t>(t * n + b)] = 1.0f;
    }
    mask = from_vector<float>(m, {steps, n, 1}).to(DType::boolean).to(x.device());
  }

  // Note [Padded steps are never read]: the padding is zeroed before the first layer's input
  // projection, so NaN or inf there reaches neither an output nor (through the projection's
  // weight gradient, 0 · NaN) a gradient; deeper layers read outputs already zero there.
  Tensor layer_in = mask.defined() ? masked_fill(x, logical_not(mask), 0.0) : x;
  std::vector<Tensor> h_n, c_n;
  for (int64_t k = 0; k < o.num_layers; ++k) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t idx = k * dirs + d;
      Tensor h = h0.select(0, idx), c = c0.defined() ? c0.select(0, idx) : Tensor();
      outs.push_back(
          run_direction(weights_[static_cast<size_t>(idx)], layer_in, h, c, mask, d == 1));
      h_n.push_back(h);
      if (c.defined()) c_n.push_back(c);
    }
    layer_in = dirs == 2 ? cat(outs, 2) : outs[0];
    if (k + 1 < o.num_layers && o.dropout > 0.0 && is_training())
      layer_in = dropout(layer_in, o.dropout, true);
  }
  RNNOutput r;
  r.output = unbatched ? layer_in.squeeze(1) : (bf ? layer_in.transpose(0, 1) : layer_in);
  r.h_n = stack(h_n, 0);
  if (unbatched) r.h_n = r.h_n.squeeze(1);
  if (!c_n.empty()) {
    r.c_n = stack(c_n, 0);
    if (unbatched) r.c_n = r.c_n.squeeze(1);
  }
  return r;
}

json RNNBaseImpl::options() const {
  // nonlinearity is RNN's alone, proj_size LSTM's alone: the others' configs leave them out.
  json j = options_json(options_);
  if (mode_ == RNNMode::rnn_tanh || mode_ == RNNMode::rnn_relu)
    j["nonlinearity"] = mode_ == RNNMode::rnn_relu ? "relu" : "tanh";
  else
    j.erase("nonlinearity");
  if (mode_ != RNNMode::lstm) j.erase("proj_size");
  return j;
}

std::string RNNBaseImpl::extra_repr() const {
  // PyTorch's RNNBase.extra_repr: only the options that differ from their defaults.
  const RNNOptions& o = options_;
  std::string s = std::to_string(o.input_size) + ", " + std::to_string(o.hidden_size);
  if (o.proj_size != 0) s += ", proj_size=" + std::to_string(o.proj_size);
  if (o.num_layers != 1) s += ", num_layers=" + std::to_string(o.num_layers);
  if (!o.bias) s += ", bias=False";
  if (o.batch_first) s += ", batch_first=True";
  if (o.dropout != 0.0) s += ", dropout=" + pyrepr::py_float(o.dropout);
  if (o.bidirectional) s += ", bidirectional=True";
  return s;
}

RNNImpl::RNNImpl(RNNOptions o) : RNNBaseImpl(o, rnn_mode(o.nonlinearity, "RNN")) {}
LSTMImpl::LSTMImpl(RNNOptions o) : RNNBaseImpl(o, RNNMode::lstm) {}
GRUImpl::GRUImpl(RNNOptions o) : RNNBaseImpl(o, RNNMode::gru) {}

// ---- cells ----

RNNCellBaseImpl::RNNCellBaseImpl(RNNCellOptions o, RNNMode mode) : options_(o), mode_(mode) {
  const char* who = mode == RNNMode::lstm  ? "LSTMCell"
                    : mode == RNNMode::gru ? "GRUCell"
                                           : "RNNCell";
  EMBER_CHECK(o.input_size > 0 && o.hidden_size > 0, who, ": input_size ", o.input_size,
              " and hidden_size ", o.hidden_size, " (expected both > 0)");
  const int64_t h = o.hidden_size, g = gate_count(mode) * h;
  const double bound = 1.0 / std::sqrt(static_cast<double>(h));
  w_ih_ = register_parameter("weight_ih", init::uniform({g, o.input_size}, bound));
  w_hh_ = register_parameter("weight_hh", init::uniform({g, h}, bound));
  if (o.bias) {
    b_ih_ = register_parameter("bias_ih", init::uniform({g}, bound));
    b_hh_ = register_parameter("bias_hh", init::uniform({g}, bound));
  }
}

RNNState RNNCellBaseImpl::step(const Tensor& input, const RNNState& state) {
  const RNNCellOptions& o = options_;
  const std::string who = type_name();
  EMBER_CHECK(
      input.defined() && (input.dim() == 1 || input.dim() == 2) && input.size(-1) == o.input_size,
      who, ": input shape ", shape_of(input), " (expected [N, ", o.input_size, "] or unbatched [",
      o.input_size, "])");
  const bool unbatched = input.dim() == 1;
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  const int64_t n = x.size(0);
  const TensorOptions like{.dtype = x.dtype(), .device = x.device()};
  auto initial = [&](const Tensor& s, const char* name) {
    if (!s.defined()) return zeros({n, o.hidden_size}, like);
    const Shape want = unbatched ? Shape{o.hidden_size} : Shape{n, o.hidden_size};
    EMBER_CHECK(s.shape() == want, who, ": ", name, " shape ", s.shape().to_string(), " (expected ",
                want.to_string(), " for input shape ", input.shape().to_string(), ")");
    return unbatched ? s.unsqueeze(0) : s;
  };
  EMBER_CHECK(mode_ == RNNMode::lstm || !state.c.defined(), who,
              ": got a cell state c (only LSTMCell has one)");
  EMBER_CHECK(mode_ != RNNMode::lstm || state.h.defined() == state.c.defined(), who,
              ": give both h and c, or neither");
  const Tensor h = initial(state.h, "h");
  const Tensor c = mode_ == RNNMode::lstm ? initial(state.c, "c") : Tensor();
  Step s = gate_math(mode_, linear(x, w_ih_, b_ih_), h, c, w_hh_, b_hh_, Tensor());
  RNNState out{unbatched ? s.h.squeeze(0) : s.h, Tensor()};
  if (s.c.defined()) out.c = unbatched ? s.c.squeeze(0) : s.c;
  return out;
}

json RNNCellBaseImpl::options() const {
  json j = options_json(options_);  // nonlinearity is RNNCell's alone
  if (mode_ == RNNMode::rnn_tanh || mode_ == RNNMode::rnn_relu)
    j["nonlinearity"] = mode_ == RNNMode::rnn_relu ? "relu" : "tanh";
  else
    j.erase("nonlinearity");
  return j;
}

std::string RNNCellBaseImpl::extra_repr() const {
  std::string s = std::to_string(options_.input_size) + ", " + std::to_string(options_.hidden_size);
  if (!options_.bias) s += ", bias=False";
  if (mode_ == RNNMode::rnn_relu) s += ", nonlinearity=relu";
  return s;
}

RNNCellImpl::RNNCellImpl(RNNCellOptions o)
    : RNNCellBaseImpl(o, rnn_mode(o.nonlinearity, "RNNCell")) {}
LSTMCellImpl::LSTMCellImpl(RNNCellOptions o) : RNNCellBaseImpl(o, RNNMode::lstm) {}
GRUCellImpl::GRUCellImpl(RNNCellOptions o) : RNNCellBaseImpl(o, RNNMode::gru) {}

}  // namespace ember::nn

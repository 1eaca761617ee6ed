// tests/interop/ember_interop.cpp — ember's half of the PyTorch interop test (interop.py).
//
//   ember_interop write DIR   for each model NAME: DIR/NAME.ember.safetensors (save_model)
//                             and DIR/NAME.ember_io.safetensors ("input", "output" of the
//                             model in eval mode), for torch to load and compare
//   ember_interop check DIR   for each model NAME: load DIR/NAME.torch.safetensors (written
//                             by safetensors.torch.save_file) into the equivalent ember module
//                             with strict load_state, run it on "input" of
//                             DIR/NAME.torch_io.safetensors, compare with "output" (1e-5)
//
// The models (same definitions in interop.py): mlp_bn, Linear-BatchNorm1d-ReLU-Linear;
// cnn, train::fashion_cnn; transformer, a 2-layer TransformerEncoder with a final LayerNorm;
// activations_norms, a Sequential of the activation, shape and norm modules (PReLU, GLU,
// Unflatten, GroupNorm, InstanceNorm1d with running stats, RMSNorm, Softplus, ELU, ...);
// recurrent, a ModuleList of LSTM (2 layers, bidirectional, proj_size), GRU, RNN (relu),
// the three cells and a Bilinear; seq2seq, an nn::Transformer with a causal target mask;
// conv1d_family, conv2d_family, conv3d_family: Sequentials of the issue-16 convolution,
// pooling and resampling modules (padding modes, transposed convs, adaptive pools, Upsample).
// Prints one JSON line per model; exits 1 when any check fails.
#include <cmath>
#include <cstdio>
#include <string>

#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/nn/transformer.hpp"
#include "ember/train/models.hpp"

namespace {

using namespace ember;  // NOLINT: small program

struct Model {
  std::string name;
  nn::Module (*make)();
  Shape input;
  /// How the model is called on the input; null: net(x).
  Tensor (*forward)(const nn::Module& net, const Tensor& x) = nullptr;
};

Tensor flat(const std::vector<Tensor>& parts) {
  std::vector<Tensor> f;
  for (const Tensor& t : parts) f.push_back(t.flatten());
  return cat(f, 0);
}

// The "recurrent" model: a ModuleList of every recurrent layer and cell, and a Bilinear,
// each applied to the input [6, 2, 4] (cells and Bilinear to its first steps); the results
// flattened into one vector (interop.py does the same).
Tensor recurrent_forward(const nn::Module& net, const Tensor& x) {
  auto list = std::dynamic_pointer_cast<nn::ModuleListImpl>(net.ptr());
  auto rnn = [&](size_t i) {
    return std::dynamic_pointer_cast<nn::RNNBaseImpl>((*list)[i].ptr())->forward(x, {});
  };
  auto cell = [&](size_t i, const Tensor& in) {
    return std::dynamic_pointer_cast<nn::RNNCellBaseImpl>((*list)[i].ptr())->step(in, {});
  };
  const nn::RNNOutput lstm = rnn(0), gru = rnn(1), elman = rnn(2);
  const nn::RNNState lc = cell(3, x.select(0, 0)), gc = cell(4, x.select(0, 1)),
                     rc = cell(5, x.select(0, 2));
  const Tensor bil = std::dynamic_pointer_cast<nn::BilinearImpl>((*list)[6].ptr())
                         ->forward(x.select(0, 3), x.select(0, 4));
  return flat({lstm.output, lstm.h_n, lstm.c_n, gru.output, gru.h_n, elman.output, elman.h_n, lc.h,
               lc.c, gc.h, rc.h, bil});
}

// The "seq2seq" model: nn::Transformer with src = x [5, 3, 16], tgt = its first 4 steps and a
// causal target mask.
Tensor seq2seq_forward(const nn::Module& net, const Tensor& x) {
  auto t = std::dynamic_pointer_cast<nn::TransformerImpl>(net.ptr());
  nn::TransformerMasks masks;
  masks.tgt_mask = nn::generate_square_subsequent_mask(4);
  return t->forward(x, x.narrow(0, 0, 4), masks);
}

const std::vector<Model>& models() {
  static const std::vector<Model> all = {
      {"mlp_bn",
       [] {
         return nn::Module(nn::Sequential(std::vector<nn::Module>{
             nn::Linear(20, 32), nn::BatchNorm1d(32), nn::ReLU(), nn::Linear(32, 10)}));
       },
       {8, 20}},
      {"cnn", [] { return train::fashion_cnn(); }, {4, 1, 28, 28}},
      {"transformer",
       [] {
         return nn::Module(nn::TransformerEncoder(nn::TransformerEncoderOptions{
             .layer = {.d_model = 16, .nhead = 4, .dim_feedforward = 32, .dropout = 0.1},
             .num_layers = 2,
             .final_norm = true}));
       },
       {5, 3, 16}},
      {"activations_norms",
       [] {
         return nn::Module(
             nn::Sequential(std::vector<nn::Module>{nn::Linear(6, 12),
                                                    nn::PReLU(12),
                                                    nn::GLU(-1),
                                                    nn::Unflatten(1, Shape{2, 3}),
                                                    nn::GroupNorm(2, 2),
                                                    nn::InstanceNorm1d(2, 1e-5, 0.1, true, true),
                                                    nn::RMSNorm(Shape{2, 3}),
                                                    nn::Flatten(),
                                                    nn::Softplus(),
                                                    nn::Linear(6, 6),
                                                    nn::ELU(),
                                                    nn::Mish(),
                                                    nn::Hardswish(),
                                                    nn::LeakyReLU(0.1),
                                                    nn::SELU(),
                                                    nn::Hardtanh(),
                                                    nn::ReLU6(),
                                                    nn::Identity(),
                                                    nn::Hardsigmoid(),
                                                    nn::Linear(6, 4),
                                                    nn::LogSigmoid()}));
       },
       {8, 6}},
      {"recurrent",
       [] {
         return nn::Module(nn::ModuleList(
             {nn::LSTM(nn::RNNOptions{.input_size = 4,
                                      .hidden_size = 5,
                                      .num_layers = 2,
                                      .bidirectional = true,
                                      .proj_size = 3}),
              nn::GRU(4, 5),
              nn::RNN(nn::RNNOptions{
                  .input_size = 4, .hidden_size = 5, .num_layers = 2, .nonlinearity = "relu"}),
              nn::LSTMCell(4, 5), nn::GRUCell(4, 5), nn::RNNCell(4, 5), nn::Bilinear(4, 4, 3)}));
       },
       {6, 2, 4},
       recurrent_forward},
      {"seq2seq",
       [] {
         return nn::Module(nn::Transformer(nn::TransformerOptions{.d_model = 16,
                                                                  .nhead = 4,
                                                                  .num_encoder_layers = 2,
                                                                  .num_decoder_layers = 2,
                                                                  .dim_feedforward = 32}));
       },
       {5, 3, 16},
       seq2seq_forward},
      {"conv1d_family",
       [] {
         return nn::Module(nn::Sequential(std::vector<nn::Module>{
             nn::Conv1d(nn::Conv1dOptions{.in_channels = 2,
                                          .out_channels = 4,
                                          .kernel_size = 3,
                                          .padding = 1,
                                          .padding_mode = "circular"}),
             nn::MaxPool1d(nn::MaxPool1dOptions{.kernel_size = 2}),
             nn::ConvTranspose1d(nn::ConvTranspose1dOptions{
                 .in_channels = 4, .out_channels = 3, .kernel_size = 4, .stride = 2, .padding = 1}),
             nn::AvgPool1d(nn::AvgPool1dOptions{.kernel_size = 2}), nn::AdaptiveMaxPool1d(5),
             nn::Conv1d(nn::Conv1dOptions{
                 .in_channels = 3, .out_channels = 2, .kernel_size = 2, .dilation = 2}),
             nn::AdaptiveAvgPool1d(4), nn::Flatten()}));
       },
       {2, 2, 16}},
      {"conv2d_family",
       [] {
         return nn::Module(nn::Sequential(std::vector<nn::Module>{
             nn::Conv2d(2, 4, 3, 1, 1, 1, 1, true, "reflect"),
             nn::ConvTranspose2d(nn::ConvTranspose2dOptions{.in_channels = 4,
                                                            .out_channels = 3,
                                                            .kernel_size = 3,
                                                            .stride = 2,
                                                            .padding = 1,
                                                            .output_padding = 1}),
             nn::ReLU(),
             nn::Upsample(InterpolateOptions{.scale_factor = {2.0}, .mode = "bilinear"}),
             nn::AdaptiveAvgPool2d(Size2d{6, 6}), nn::AdaptiveMaxPool2d(Size2d{3, 3}),
             nn::PixelUnshuffle(3), nn::Flatten(), nn::Linear(27, 4)}));
       },
       {2, 2, 6, 6}},
      {"conv3d_family",
       [] {
         return nn::Module(nn::Sequential(
             std::vector<nn::Module>{nn::Conv3d(nn::Conv3dOptions{.in_channels = 1,
                                                                  .out_channels = 2,
                                                                  .kernel_size = 3,
                                                                  .padding = 1,
                                                                  .padding_mode = "replicate"}),
                                     nn::Conv3d(nn::Conv3dOptions{.in_channels = 2,
                                                                  .out_channels = 2,
                                                                  .kernel_size = {1, 2, 2},
                                                                  .stride = {1, 2, 2}}),
                                     nn::Flatten()}));
       },
       {2, 1, 4, 6, 6}},
  };
  return all;
}

// Random values everywhere, including BatchNorm running statistics and counters.
void randomize(const nn::Module& m) {
  NoGradGuard g;
  for (auto& [name, t] : m->state_dict()) {
    Tensor v = t;
    if (!is_floating(t.dtype()))
      v.fill_(3);
    else if (name.find("running_var") != std::string::npos)
      v.copy_(randn(t.shape()).abs() + 0.5);
    else
      v.copy_(randn(t.shape()) * 0.2);
  }
}

int write(const std::string& dir) {
  manual_seed(2024);
  for (const Model& m : models()) {
    nn::Module net = m.make();
    randomize(net);
    net->eval();
    const Tensor x = randn(m.input);
    NoGradGuard g;
    const Tensor y = m.forward ? m.forward(net, x) : net(x);
    io::save_model(net, dir + "/" + m.name + ".ember.safetensors");
    io::write_safetensors(dir + "/" + m.name + ".ember_io.safetensors",
                          {{"input", x}, {"output", y}}, {});
    std::printf("{\"direction\": \"ember->torch\", \"model\": \"%s\", \"written\": true}\n",
                m.name.c_str());
  }
  return 0;
}

int check(const std::string& dir) {
  int failures = 0;
  for (const Model& m : models()) {
    nn::Module net = m.make();
    const nn::LoadReport r =
        io::load_state(net, dir + "/" + m.name + ".torch.safetensors", /*strict=*/true);
    net->eval();
    io::SafetensorsFile io_file(dir + "/" + m.name + ".torch_io.safetensors");
    const Tensor x = io_file.read("input"), want = io_file.read("output");
    NoGradGuard g;
    const Tensor out = m.forward ? m.forward(net, x) : net(x);
    const std::vector<float> got = out.to_vector<float>(), ref = want.to_vector<float>();
    double max_err = got.size() == ref.size() ? 0.0 : INFINITY;
    for (size_t i = 0; i < got.size() && i < ref.size(); ++i)
      max_err =
          std::max(max_err, std::abs(double(got[i]) - ref[i]) / (1.0 + std::abs(double(ref[i]))));
    const bool ok = max_err <= 1e-5;
    failures += ok ? 0 : 1;
    std::printf(
        "{\"direction\": \"torch->ember\", \"model\": \"%s\", \"tensors\": %zu, \"max_rel_err\": "
        "%.3g, \"ok\": %s}\n",
        m.name.c_str(), r.applied.size(), max_err, ok ? "true" : "false");
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  try {
    if (mode == "write") return write(argv[2]);
    if (mode == "check") return check(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember_interop: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: ember_interop write DIR | check DIR\n");
  return 2;
}

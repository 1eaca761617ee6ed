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
// cnn, train::fashion_cnn; transformer, a 2-layer TransformerEncoder with a final LayerNorm.
// Prints one JSON line per model; exits 1 when any check fails.
#include <cmath>
#include <cstdio>
#include <string>

#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/transformer.hpp"
#include "ember/train/models.hpp"

namespace {

using namespace ember;  // NOLINT: small program

struct Model {
  std::string name;
  nn::Module (*make)();
  Shape input;
};

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
    const Tensor y = net(x);
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
    const std::vector<float> got = net(x).to_vector<float>(), ref = want.to_vector<float>();
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

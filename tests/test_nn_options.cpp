// tests/test_nn_options.cpp — nn modules' options declared once (ember/nn/options.hpp): a saved
// file names each option, so reordering an options struct's members does not change what it
// loads; every registered module type rebuilds from its config() (same config, same printed
// form, same parameters); unknown keys and bad values are refused naming the module and the
// key; the generated range checks read as nn's other errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ember/io/checkpoint.hpp"
#include "ember/models/mobilenet.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/attention.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/distance.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/pool3d.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/nn/transformer.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember::test_util::expect_contains_all;

// The same three options, declared in two member orders.
struct ProbeOptions {
  int64_t width = 1;
  double rate = 0.5;
  bool gated = false;
  static constexpr auto fields() {
    return std::tuple{nn::field("width", &ProbeOptions::width, opts::above(0)),
                      nn::field("rate", &ProbeOptions::rate, opts::closed(0, 1)),
                      nn::field("gated", &ProbeOptions::gated)};
  }
};
struct ProbeOptionsReordered {
  bool gated = false;
  double rate = 0.5;
  int64_t width = 1;
  static constexpr auto fields() {
    using O = ProbeOptionsReordered;
    return std::tuple{nn::field("gated", &O::gated), nn::field("rate", &O::rate),
                      nn::field("width", &O::width, opts::above(0))};
  }
};

// A module holding a [width] parameter, built from options O (registered as "Probe").
template <typename O>
class ProbeImpl : public nn::ModuleImpl {
 public:
  explicit ProbeImpl(O o) : options_(o) {
    nn::check_options(o, "Probe");
    weight_ = register_parameter("weight", full({o.width}, o.rate));
  }
  Tensor forward(const Tensor& x) override { return options_.gated ? x * weight_ : x; }
  std::string type_name() const override { return "Probe"; }
  nn::json options() const override { return nn::options_json(options_); }
  const O& probe_options() const { return options_; }

 private:
  O options_;
  Tensor weight_;
};

template <typename O>
void register_probe() {
  nn::register_module_type("Probe", [](const nn::json& c) -> nn::ModulePtr {
    return std::make_shared<ProbeImpl<O>>(
        nn::options_from<O>(c.contains("options") ? c["options"] : nn::json(), "Probe"));
  });
}

TEST(NnOptions, ReorderedMembersStillLoadASavedFile) {
  const auto dir = std::filesystem::temp_directory_path() / "ember_nn_options_reorder";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "probe.safetensors").string();
  register_probe<ProbeOptions>();
  nn::Module saved(std::make_shared<ProbeImpl<ProbeOptions>>(
      ProbeOptions{.width = 3, .rate = 0.25, .gated = true}));
  io::save_model(saved, path);

  register_probe<ProbeOptionsReordered>();  // the struct's members change order
  nn::Module back = io::load_model(path);
  auto* probe = dynamic_cast<ProbeImpl<ProbeOptionsReordered>*>(back.ptr().get());
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->probe_options().width, 3);
  EXPECT_EQ(probe->probe_options().rate, 0.25);
  EXPECT_TRUE(probe->probe_options().gated);
  EXPECT_EQ(back->param("weight").shape(), Shape({3}));
  EXPECT_EQ(back->config(), saved->config());
  std::filesystem::remove_all(dir);
}

TEST(NnOptions, AbsentKeysKeepDefaultsAndJsonHooksWork) {
  const auto o = nn::options_from<nn::Conv2dOptions>(
      {{"in_channels", 2}, {"out_channels", 4}, {"kernel_size", {3, 5}}, {"padding", "same"}},
      "Conv2d");
  EXPECT_EQ(o.kernel_size, Size2d(3, 5));
  EXPECT_EQ(o.stride, Size2d(1));
  EXPECT_EQ(o.padding_preset, ConvPadding::same);
  EXPECT_EQ(o.padding_mode, "zeros");
  const nn::json j = nn::LinearOptions{.in_features = 4, .out_features = 2};
  EXPECT_EQ(j, (nn::json{{"in_features", 4}, {"out_features", 2}, {"bias", true}}));
  const auto back = j.get<nn::LinearOptions>();
  EXPECT_EQ(back.in_features, 4);
  EXPECT_EQ(back.out_features, 2);
  const auto bn = nn::options_from<nn::BatchNormOptions>({{"momentum", nullptr}}, "BatchNorm1d");
  EXPECT_FALSE(bn.momentum.has_value());
  EXPECT_EQ(bn.eps, 1e-5);
}

// One module of every registered type, with options away from their defaults where it can.
std::map<std::string, nn::Module> one_of_each() {
  using namespace nn;
  std::map<std::string, Module> m;
  m["Linear"] = Linear(4, 3, false);
  m["Flatten"] = Flatten(0, 2);
  m["Dropout"] = Dropout(0.25);
  m["ReLU"] = ReLU();
  m["SiLU"] = SiLU();
  m["Sigmoid"] = Sigmoid();
  m["Tanh"] = Tanh();
  m["Identity"] = Identity();
  m["GELU"] = GELU("tanh");
  m["Softmax"] = Softmax(1);
  m["LogSoftmax"] = LogSoftmax(0);
  m["Sequential"] = Sequential({Linear(2, 3), ReLU()});
  m["ModuleList"] = ModuleList({Linear(2, 2), Tanh()});
  m["MultiheadAttention"] = MultiheadAttention(MultiheadAttentionOptions{
      .embed_dim = 8, .num_heads = 2, .dropout = 0.1, .batch_first = true});
  const TransformerEncoderLayerOptions layer{.d_model = 8, .nhead = 2, .dim_feedforward = 16};
  m["TransformerEncoderLayer"] = TransformerEncoderLayer(layer);
  m["TransformerEncoder"] = TransformerEncoder(TransformerEncoderLayer(layer), 2, LayerNorm(8));
  m["TransformerDecoderLayer"] = TransformerDecoderLayer(layer);
  m["TransformerDecoder"] = TransformerDecoder(TransformerDecoderLayer(layer), 2);
  m["Transformer"] = Transformer(TransformerOptions{.d_model = 8,
                                                    .nhead = 2,
                                                    .num_encoder_layers = 1,
                                                    .num_decoder_layers = 2,
                                                    .dim_feedforward = 16});
  m["Conv1d"] = Conv1d(Conv1dOptions{.in_channels = 2,
                                     .out_channels = 4,
                                     .kernel_size = 3,
                                     .padding_mode = "reflect",
                                     .padding_preset = ConvPadding::same});
  m["Conv2d"] = Conv2d(2, 4, Size2d(3, 2), 2, Size2d(1, 0), 1, 2, false);
  m["Conv3d"] =
      Conv3d(Conv3dOptions{.in_channels = 1, .out_channels = 2, .kernel_size = Size3d(1, 2, 3)});
  m["ConvTranspose1d"] = ConvTranspose1d(ConvTranspose1dOptions{
      .in_channels = 2, .out_channels = 4, .kernel_size = 3, .stride = 2, .output_padding = 1});
  m["ConvTranspose2d"] = ConvTranspose2d(ConvTranspose2dOptions{
      .in_channels = 2, .out_channels = 2, .kernel_size = 2, .stride = 2, .groups = 2});
  m["MaxPool1d"] = MaxPool1d(MaxPool1dOptions{.kernel_size = 3, .stride = 2, .ceil_mode = true});
  m["MaxPool2d"] = MaxPool2d(Size2d(2, 3), std::nullopt, 1);
  m["AvgPool1d"] = AvgPool1d(AvgPool1dOptions{.kernel_size = 2, .count_include_pad = false});
  m["AvgPool2d"] = AvgPool2d(3, 2, 1, true);
  m["AdaptiveAvgPool1d"] = AdaptiveAvgPool1d(5);
  m["AdaptiveMaxPool1d"] = AdaptiveMaxPool1d(4);
  m["AdaptiveAvgPool2d"] = AdaptiveAvgPool2d(Size2d(2, 3));
  m["AdaptiveMaxPool2d"] = AdaptiveMaxPool2d(Size2d(3));
  m["Upsample"] = Upsample(
      InterpolateOptions{.scale_factor = {2.0, 3.0}, .mode = "bilinear", .align_corners = true});
  m["PixelShuffle"] = PixelShuffle(2);
  m["PixelUnshuffle"] = PixelUnshuffle(3);
  m["Unfold"] = Unfold(FoldOptions{.kernel_size = Size2d(2, 3), .padding = 1});
  m["Fold"] = Fold(FoldOptions{.output_size = Size2d(4, 5), .kernel_size = 2});
  m["BatchNorm1d"] = BatchNorm1d(BatchNormOptions{.num_features = 3, .momentum = std::nullopt});
  m["BatchNorm2d"] = BatchNorm2d(4, 1e-3, 0.2, false);
  m["LayerNorm"] = LayerNorm(Shape{2, 3}, 1e-6, true, false);
  m["Embedding"] = Embedding(10, 4, -1);
  m["EmbeddingBag"] = EmbeddingBag(EmbeddingBagOptions{.num_embeddings = 10,
                                                       .embedding_dim = 4,
                                                       .mode = "max",
                                                       .include_last_offset = true,
                                                       .padding_idx = 3});
  m["Softplus"] = Softplus(2.0, 10.0);
  m["LeakyReLU"] = LeakyReLU(0.2);
  m["ELU"] = ELU(0.5);
  m["Hardtanh"] = Hardtanh(-2.0, 3.0);
  m["ReLU6"] = ReLU6();
  m["SELU"] = SELU();
  m["Mish"] = Mish();
  m["Hardswish"] = Hardswish();
  m["Hardsigmoid"] = Hardsigmoid();
  m["LogSigmoid"] = LogSigmoid();
  m["PReLU"] = PReLU(3, 0.1);
  m["GLU"] = GLU(1);
  m["Unflatten"] = Unflatten(1, Shape{2, -1});
  m["Bilinear"] = Bilinear(3, 2, 4, false);
  m["GroupNorm"] = GroupNorm(2, 4, 1e-4, false);
  m["InstanceNorm1d"] = InstanceNorm1d(3, 1e-5, 0.2, true, true);
  m["InstanceNorm2d"] = InstanceNorm2d(2);
  m["RMSNorm"] = RMSNorm(Shape{4}, 1e-6, false);
  m["RNN"] = RNN(RNNOptions{.input_size = 3,
                            .hidden_size = 4,
                            .num_layers = 2,
                            .nonlinearity = "relu",
                            .batch_first = true});
  m["LSTM"] =
      LSTM(RNNOptions{.input_size = 3, .hidden_size = 4, .bidirectional = true, .proj_size = 2});
  m["GRU"] = GRU(RNNOptions{.input_size = 3, .hidden_size = 4, .bias = false});
  m["RNNCell"] = RNNCell(RNNCellOptions{.input_size = 3, .hidden_size = 2, .nonlinearity = "relu"});
  m["LSTMCell"] = LSTMCell(3, 2);
  m["GRUCell"] = GRUCell(3, 2, false);
  // issue 32, group nn
  m["MaxPool3d"] = MaxPool3d(MaxPool3dOptions{.kernel_size = {1, 2, 2}, .padding = {0, 1, 1}});
  m["AvgPool3d"] =
      AvgPool3d(AvgPool3dOptions{.kernel_size = 3, .stride = 2, .divisor_override = 4});
  m["AdaptiveAvgPool3d"] = AdaptiveAvgPool3d(Size3d(1, 2, 3));
  m["AdaptiveMaxPool3d"] = AdaptiveMaxPool3d(Size3d(2));
  m["MaxUnpool1d"] = MaxUnpool1d(MaxUnpool1dOptions{.kernel_size = 2, .padding = 1});
  m["MaxUnpool2d"] = MaxUnpool2d(MaxUnpool2dOptions{.kernel_size = {2, 3}, .stride = 1});
  m["MaxUnpool3d"] = MaxUnpool3d(MaxUnpool3dOptions{.kernel_size = 2});
  m["LPPool1d"] = LPPool1d(LPPool1dOptions{.norm_type = 3.0, .kernel_size = 2});
  m["LPPool2d"] = LPPool2d(LPPool2dOptions{.kernel_size = {2, 3}, .stride = 1, .ceil_mode = true});
  m["LPPool3d"] = LPPool3d(LPPool3dOptions{.norm_type = 1.5, .kernel_size = 2});
  m["ChannelShuffle"] = ChannelShuffle(3);
  m["LocalResponseNorm"] = LocalResponseNorm(5, 0.01, 0.5, 2.0);
  m["CosineSimilarity"] = CosineSimilarity(CosineSimilarityOptions{.dim = -1, .eps = 1e-6});
  m["PairwiseDistance"] = PairwiseDistance(PairwiseDistanceOptions{.p = 1.0, .keepdim = true});
  m["FractionalMaxPool2d"] = FractionalMaxPool2d(
      FractionalMaxPool2dOptions{.kernel_size = 2, .output_size = Size2d(3, 4)});
  m["FractionalMaxPool3d"] =
      FractionalMaxPool3d(FractionalMaxPool3dOptions{.kernel_size = 2, .output_ratio = {0.5}});
  m["ConvTranspose3d"] = ConvTranspose3d(ConvTranspose3dOptions{
      .in_channels = 4, .out_channels = 2, .kernel_size = {2, 1, 2}, .groups = 2, .bias = false});
  // issue 32, group special
  m["CELU"] = CELU(1.5);
  m["Softsign"] = Softsign();
  m["Tanhshrink"] = Tanhshrink();
  m["Hardshrink"] = Hardshrink(0.3);
  m["Softshrink"] = Softshrink(0.2);
  m["Threshold"] = Threshold(0.1, 20.0);
  m["RReLU"] = RReLU(0.1, 0.2);
  // the vision zoo: MobileNetV2 and its block (issue 29 item 4)
  m["InvertedResidual"] = InvertedResidual(
      InvertedResidualOptions{.inp = 8, .oup = 16, .stride = 2, .expand_ratio = 6});
  m["MobileNetV2"] =
      MobileNetV2(MobileNetV2Options{.num_classes = 5, .width_mult = 0.25, .dropout = 0.1});
  return m;
}

// Every registered type, read from the error that lists them ("known types: A, B, ...;").
std::vector<std::string> registered_types() {
  const std::string msg = error_of([] { nn::build({{"type", "NoSuchModule"}}); });
  const size_t from = msg.find("known types: ") + 13, to = msg.find(';', from);
  std::vector<std::string> types;
  std::stringstream list(msg.substr(from, to - from));
  for (std::string t; std::getline(list, t, ',');) types.push_back(t.substr(t[0] == ' '));
  return types;
}

std::vector<std::pair<std::string, Shape>> param_shapes(const nn::Module& m) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [name, t] : m->state_dict()) out.emplace_back(name, t.shape());
  return out;
}

// Whether `type` reads its options through the field lists: it refuses an unknown key naming
// itself (the "layer" object satisfies the transformer stacks' first check). Types other code
// registers (ResNet's blocks, a test's custom module) read their options their own way.
bool reads_options_by_fields(const std::string& type) {
  try {
    nn::build({{"type", type}, {"options", {{"__probe__", 1}, {"layer", nn::json::object()}}}});
  } catch (const Error& e) {
    return std::string(e.what()).find(type + " options: unknown key '__probe__'") !=
           std::string::npos;
  }
  return false;  // it ignored the key
}

TEST(NnOptions, EveryRegisteredTypeRoundTripsThroughItsConfig) {
  const auto examples = one_of_each();
  size_t checked = 0;
  for (const std::string& type : registered_types()) {
    if (type == "Probe" || !reads_options_by_fields(type)) continue;  // not nn's own
    SCOPED_TRACE(type);
    const auto it = examples.find(type);
    ASSERT_NE(it, examples.end()) << "no example of registered module type " << type;
    const nn::Module& m = it->second;
    const nn::json config = m->config();
    EXPECT_EQ(config["type"], type);
    const nn::Module back = nn::build(nn::json::parse(config.dump()));  // through text
    EXPECT_EQ(back->config(), config);
    EXPECT_EQ(back->extra_repr(), m->extra_repr());
    EXPECT_EQ(param_shapes(back), param_shapes(m));
    ++checked;
  }
  EXPECT_EQ(checked, examples.size());  // and every example is a registered type of nn's
}

TEST(NnOptions, UnknownKeysAndBadValuesAreRefusedNamingModuleAndKey) {
  expect_contains_all(
      error_of([] {
        nn::build({{"type", "Linear"}, {"options", {{"in_features", 4}, {"out_feature", 2}}}});
      }),
      {"Linear", "unknown key 'out_feature'", "out_features"});
  expect_contains_all(error_of([] {
                        nn::build({{"type", "ReLU"}, {"options", {{"inplace", true}}}});
                      }),
                      {"ReLU", "unknown key 'inplace'"});
  expect_contains_all(error_of([] {
                        nn::build({{"type", "TransformerEncoder"},
                                   {"options", {{"layer", {{"d_model", 8}, {"n_head", 2}}}}}});
                      }),
                      {"TransformerEncoder layer", "unknown key 'n_head'"});
  expect_contains_all(error_of([] {
                        nn::build({{"type", "Linear"},
                                   {"options", {{"in_features", "four"}, {"out_features", 2}}}});
                      }),
                      {"Linear", "in_features", "whole number", "\"four\""});
  expect_contains_all(error_of([] {
                        nn::build({{"type", "Dropout"}, {"options", {{"p", true}}}});
                      }),
                      {"Dropout", "p must be a number", "true"});
  expect_contains_all(
      error_of([] {
        nn::build({{"type", "Conv1d"},
                   {"options", {{"in_channels", 1}, {"out_channels", 1}, {"padding", "full"}}}});
      }),
      {"Conv1d", "padding", "'full'", "\"same\""});
  expect_contains_all(error_of([] {
                        nn::build({{"type", "Linear"}, {"options", {1, 2}}});
                      }),
                      {"Linear options: expected a JSON object"});
}

TEST(NnOptions, GeneratedRangeChecksNameTheModuleTheKeyAndTheRange) {
  expect_contains_all(error_of([] { nn::Dropout(1.5); }),
                      {"Dropout: p 1.5 (expected 0 <= p <= 1)"});
  expect_contains_all(error_of([] { nn::Linear(0, 3); }),
                      {"Linear: in_features 0 (expected in_features > 0)"});
  expect_contains_all(error_of([] { nn::BatchNorm1d(4, 1e-5, 1.5); }),
                      {"BatchNorm1d: momentum 1.5 (expected 0 <= momentum <= 1)"});
  expect_contains_all(error_of([] { nn::MaxPool1d(nn::MaxPool1dOptions{.kernel_size = 0}); }),
                      {"MaxPool1d: kernel_size 0 (expected kernel_size >= 1)"});
  expect_contains_all(error_of([] {
                        nn::build({{"type", "Embedding"},
                                   {"options", {{"num_embeddings", -2}, {"embedding_dim", 3}}}});
                      }),
                      {"Embedding: num_embeddings -2 (expected num_embeddings > 0)"});
  expect_contains_all(error_of([] { ProbeImpl<ProbeOptions>(ProbeOptions{.rate = 2.0}); }),
                      {"Probe: rate 2 (expected 0 <= rate <= 1)"});
}

TEST(NnOptions, GeneratedReprIsThePlainListOfFields) {
  EXPECT_EQ(nn::Linear(4, 3)->extra_repr(), "in_features=4, out_features=3, bias=True");
  EXPECT_EQ(nn::Softplus(2.0, 10.0)->extra_repr(), "beta=2.0, threshold=10.0");
  EXPECT_EQ(nn::MaxPool2d(Size2d(2, 3))->extra_repr(),
            "kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=1, ceil_mode=False");
  EXPECT_EQ(nn::Unflatten(1, Shape{2, 5})->extra_repr(), "dim=1, unflattened_size=(2, 5)");
}

}  // namespace

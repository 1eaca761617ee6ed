// tests/test_layers_module_contracts.cpp — the module contracts of the activation, shape,
// normalisation, recurrent and transformer-decoder modules (their values against PyTorch are in
// test_layers_activation_rnn.cpp): PyTorch's default initialisation,
// parameter names, nn::build(config()) round trips, the causal mask helper, variable lengths,
// and errors that name the layer, what came and what was expected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "ember/io/checkpoint.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/nn/transformer.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "layer_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember::test_util::expect_contains_all;
using ember::test_util::expect_uniform;
using ember::test_util::state_names;

// ---- initialisation and names

TEST(ModuleContractsInit, PReLUBilinearAndNorms) {
  manual_seed(170);
  nn::PReLU prelu(3);
  ember_test::expect_equal(prelu->weight(), full({3}, 0.25), "PReLU weight");
  nn::PReLU prelu_init(1, 0.1);
  EXPECT_FLOAT_EQ(prelu_init->weight().to_vector<float>()[0], 0.1f);
  nn::Bilinear bil(25, 40, 30);  // bound 1/√in1 = 0.2
  EXPECT_EQ(bil->weight().shape(), Shape({30, 25, 40}));
  expect_uniform(bil->weight(), 0.2, "Bilinear weight");
  EXPECT_EQ(state_names(nn::Bilinear(2, 3, 4, false)),
            std::vector<std::string>{"weight [4, 2, 3]"});
  nn::GroupNorm gn(2, 4);
  ember_test::expect_equal(gn->param("weight"), ones({4}), "GroupNorm weight");
  ember_test::expect_equal(gn->param("bias"), zeros({4}), "GroupNorm bias");
  EXPECT_TRUE(nn::InstanceNorm2d(3)->state_dict().empty());
  EXPECT_EQ(state_names(nn::InstanceNorm1d(3, 1e-5, 0.1, true, true)),
            (std::vector<std::string>{"weight [3]", "bias [3]", "running_mean [3]",
                                      "running_var [3]", "num_batches_tracked []"}));
  nn::RMSNorm rms(Shape{2, 3});
  ember_test::expect_equal(rms->param("weight"), ones({2, 3}), "RMSNorm weight");
  EXPECT_TRUE(nn::RMSNorm(4, std::nullopt, false)->state_dict().empty());
}

TEST(ModuleContractsInit, RecurrentNamesShapesAndBounds) {
  manual_seed(171);
  nn::LSTM lstm(nn::RNNOptions{
      .input_size = 3, .hidden_size = 100, .num_layers = 2, .bidirectional = true, .proj_size = 4});
  const std::vector<std::string> want = {"weight_ih_l0 [400, 3]",
                                         "weight_hh_l0 [400, 4]",
                                         "bias_ih_l0 [400]",
                                         "bias_hh_l0 [400]",
                                         "weight_hr_l0 [4, 100]",
                                         "weight_ih_l0_reverse [400, 3]",
                                         "weight_hh_l0_reverse [400, 4]",
                                         "bias_ih_l0_reverse [400]",
                                         "bias_hh_l0_reverse [400]",
                                         "weight_hr_l0_reverse [4, 100]",
                                         "weight_ih_l1 [400, 8]",
                                         "weight_hh_l1 [400, 4]",
                                         "bias_ih_l1 [400]",
                                         "bias_hh_l1 [400]",
                                         "weight_hr_l1 [4, 100]",
                                         "weight_ih_l1_reverse [400, 8]",
                                         "weight_hh_l1_reverse [400, 4]",
                                         "bias_ih_l1_reverse [400]",
                                         "bias_hh_l1_reverse [400]",
                                         "weight_hr_l1_reverse [4, 100]"};
  EXPECT_EQ(state_names(lstm), want);
  for (auto& [n, p] : lstm->named_parameters()) expect_uniform(p, 0.1, "LSTM " + n);
  EXPECT_EQ(state_names(nn::GRU(nn::RNNOptions{.input_size = 2, .hidden_size = 5, .bias = false})),
            (std::vector<std::string>{"weight_ih_l0 [15, 2]", "weight_hh_l0 [15, 5]"}));
  EXPECT_EQ(state_names(nn::LSTMCell(2, 3)),
            (std::vector<std::string>{"weight_ih [12, 2]", "weight_hh [12, 3]", "bias_ih [12]",
                                      "bias_hh [12]"}));
  nn::GRUCell cell(4, 64);
  for (auto& [n, p] : cell->named_parameters()) expect_uniform(p, 0.125, "GRUCell " + n);
}

TEST(ModuleContractsInit, TransformerChildNamesAndXavier) {
  manual_seed(172);
  nn::Transformer t(nn::TransformerOptions{.d_model = 16,
                                           .nhead = 2,
                                           .num_encoder_layers = 2,
                                           .num_decoder_layers = 2,
                                           .dim_feedforward = 32});
  const nn::StateDict sd = t->state_dict();
  auto has = [&](const std::string& n) {
    for (auto& [k, v] : sd)
      if (k == n) return true;
    return false;
  };
  for (const char* n : {"encoder.layers.1.self_attn.in_proj_weight", "encoder.norm.weight",
                        "decoder.layers.0.multihead_attn.out_proj.weight",
                        "decoder.layers.1.norm3.bias", "decoder.norm.bias"})
    EXPECT_TRUE(has(n)) << n;
  // _reset_parameters: every matrix redrawn independently (layers are no longer copies).
  Tensor a = t->encoder()->layer(0)->self_attn()->in_proj_weight();
  Tensor b = t->encoder()->layer(1)->self_attn()->in_proj_weight();
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());
  expect_uniform(t->decoder()->layer(0)->named_parameters()[0].second,
                 std::sqrt(6.0 / (16.0 + 48.0)), "decoder self_attn in_proj_weight (xavier)");
  // A TransformerDecoder's layers start as copies of one layer, as PyTorch's _get_clones.
  nn::TransformerDecoder dec(nn::TransformerDecoderOptions{
      .layer = {.d_model = 8, .nhead = 2, .dim_feedforward = 8}, .num_layers = 2});
  EXPECT_EQ(dec->layer(0)->named_parameters()[0].second.to_vector<float>(),
            dec->layer(1)->named_parameters()[0].second.to_vector<float>());
}

// ---- config round trips

TEST(ModuleContracts, ConfigRoundTrip) {
  const std::vector<nn::Module> modules = {
      nn::Softplus(2.0, 5.0),
      nn::LeakyReLU(0.3),
      nn::ELU(0.7),
      nn::SELU(),
      nn::ReLU6(),
      nn::Mish(),
      nn::Hardtanh(-2.0, 3.0),
      nn::Hardswish(),
      nn::Hardsigmoid(),
      nn::LogSigmoid(),
      nn::PReLU(4, 0.1),
      nn::GLU(1),
      nn::Identity(),
      nn::Flatten(0, 2),
      nn::Unflatten(1, Shape{2, -1}),
      nn::Bilinear(2, 3, 4, false),
      nn::GroupNorm(3, 6, 1e-3, false),
      nn::InstanceNorm1d(3, 1e-4, 0.2, true, true),
      nn::InstanceNorm2d(2),
      nn::RMSNorm(Shape{3, 4}, 1e-6, false),
      nn::RMSNorm(5),
      nn::RNN(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .nonlinearity = "relu"}),
      nn::LSTM(nn::RNNOptions{.input_size = 2,
                              .hidden_size = 4,
                              .num_layers = 2,
                              .batch_first = true,
                              .dropout = 0.25,
                              .bidirectional = true,
                              .proj_size = 3}),
      nn::GRU(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .bias = false}),
      nn::RNNCell(2, 3, false, "relu"),
      nn::LSTMCell(2, 3),
      nn::GRUCell(2, 3),
      nn::TransformerDecoderLayer(nn::TransformerDecoderLayerOptions{.d_model = 8,
                                                                     .nhead = 2,
                                                                     .dim_feedforward = 16,
                                                                     .activation = "gelu",
                                                                     .norm_first = true}),
      nn::TransformerDecoder(
          nn::TransformerDecoderOptions{.layer = {.d_model = 8, .nhead = 2, .dim_feedforward = 16},
                                        .num_layers = 2,
                                        .final_norm = true}),
      nn::Transformer(nn::TransformerOptions{.d_model = 8,
                                             .nhead = 2,
                                             .num_encoder_layers = 1,
                                             .num_decoder_layers = 2,
                                             .dim_feedforward = 16,
                                             .batch_first = true}),
  };
  for (const nn::Module& m : modules) ember::test_util::expect_config_round_trip(m);
}

TEST(ModuleContracts, PrintsAsPyTorch) {
  auto repr = [](const nn::Module& m) { return m->type_name() + "(" + m->extra_repr() + ")"; };
  EXPECT_EQ(
      repr(nn::LSTM(nn::RNNOptions{
          .input_size = 3, .hidden_size = 4, .num_layers = 2, .dropout = 0.5, .proj_size = 2})),
      "LSTM(3, 4, proj_size=2, num_layers=2, dropout=0.5)");
  EXPECT_EQ(repr(nn::RNNCell(3, 4, false, "relu")), "RNNCell(3, 4, bias=False, nonlinearity=relu)");
  EXPECT_EQ(repr(nn::RMSNorm(8)), "RMSNorm((8,), eps=None, elementwise_affine=True)");
  EXPECT_EQ(repr(nn::Softplus()), "Softplus(beta=1.0, threshold=20.0)");
  EXPECT_EQ(repr(nn::Unflatten(1, Shape{2, 5})), "Unflatten(dim=1, unflattened_size=(2, 5))");
  std::ostringstream s;
  s << *nn::Transformer(nn::TransformerOptions{.d_model = 8,
                                               .nhead = 2,
                                               .num_encoder_layers = 1,
                                               .num_decoder_layers = 1,
                                               .dim_feedforward = 16});
  EXPECT_NE(s.str().find("(multihead_attn): MultiheadAttention("), std::string::npos) << s.str();
  EXPECT_NE(s.str().find("(norm3): LayerNorm((8,)"), std::string::npos) << s.str();
}

// ---- masks and variable lengths

TEST(ModuleContracts, SquareSubsequentMask) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> want = {0, -inf, -inf, 0, 0, -inf, 0, 0, 0};
  EXPECT_EQ(nn::generate_square_subsequent_mask(3).to_vector<float>(), want);
  EXPECT_EQ(nn::TransformerImpl::generate_square_subsequent_mask(3).to_vector<float>(), want);
  EXPECT_EQ(nn::generate_square_subsequent_mask(3).dtype(), DType::f32);
  // A float -inf mask and tgt_is_causal give the same decoder output.
  manual_seed(173);
  nn::TransformerDecoderLayer layer(nn::TransformerDecoderLayerOptions{
      .d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0});
  const Tensor tgt = randn({4, 2, 8}), mem = randn({3, 2, 8});
  ember_test::expect_close(layer(tgt, mem, {.tgt_mask = nn::generate_square_subsequent_mask(4)}),
                           layer(tgt, mem, {.tgt_is_causal = true}), 1e-6, 1e-6,
                           "float causal mask vs tgt_is_causal");
}

TEST(ModuleContracts, PaddedStepsKeepStateAndOutputZero) {
  manual_seed(174);
  nn::GRU gru(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .batch_first = true});
  Tensor x = randn({2, 5, 2});
  const Tensor lengths = from_vector<int64_t>({5, 2}, {2});
  nn::RNNOutput packed = gru(nn::pack_padded_sequence(x, lengths, true));
  // Sample 1 alone, truncated to its 2 steps, gives the same state and outputs.
  nn::RNNOutput alone = gru(x.narrow(0, 1, 1).narrow(1, 0, 2), {});
  ember_test::expect_close(packed.h_n.narrow(1, 1, 1), alone.h_n, 1e-6, 1e-6, "h_n of sample 1");
  ember_test::expect_close(packed.output.narrow(0, 1, 1).narrow(1, 0, 2), alone.output, 1e-6, 1e-6,
                           "outputs of sample 1");
  ember_test::expect_equal(packed.output.narrow(0, 1, 1).narrow(1, 2, 3), zeros({1, 3, 3}),
                           "padded outputs");
  // Padded input values do not matter.
  Tensor x2 = x.clone();
  {
    NoGradGuard g;
    x2.narrow(0, 1, 1).narrow(1, 2, 3).fill_(100.0);
  }
  ember_test::expect_equal(gru(x2, {}, lengths).h_n, packed.h_n, "padded values are ignored");
}

// ---- errors name the layer, what came and what was expected

TEST(ModuleContractsErrors, MessagesNameLayerGotAndExpected) {
  nn::LSTM lstm(nn::RNNOptions{.input_size = 3, .hidden_size = 4, .num_layers = 2});
  expect_contains_all(error_of([&] {
                        lstm(zeros({5, 2, 4}));
                      }),
                      {"LSTM", "[5, 2, 4]", "4 features", "input_size 3"});
  expect_contains_all(error_of([&] {
                        lstm(zeros({2, 3, 4, 5}));
                      }),
                      {"LSTM", "[2, 3, 4, 5]", "[T, N, 3]"});
  expect_contains_all(error_of([&] {
                        lstm(zeros({5, 2, 3}), {zeros({1, 2, 4}), Tensor()});
                      }),
                      {"LSTM", "h0 shape [1, 2, 4]", "[2, 2, 4]"});
  expect_contains_all(error_of([&] {
                        lstm(zeros({5, 2, 3}), {zeros({2, 2, 4}), zeros({2, 3, 4})});
                      }),
                      {"LSTM", "c0 shape [2, 3, 4]", "[2, 2, 4]"});
  expect_contains_all(error_of([&] {
                        lstm(zeros({5, 2, 3}), {}, from_vector<int64_t>({6, 2}, {2}));
                      }),
                      {"LSTM", "lengths[0] is 6", "1..5", "no longer than the sequence"});
  expect_contains_all(error_of([&] {
                        lstm(zeros({5, 2, 3}), {}, from_vector<int64_t>({5}, {1}));
                      }),
                      {"LSTM", "lengths shape [1]", "[N] = [2]"});
  expect_contains_all(
      error_of([&] {
        nn::pack_padded_sequence(zeros({4, 2, 3}), from_vector<int64_t>({5, 1}, {2}));
      }),
      {"pack_padded_sequence", "length of 5", "1..4"});
  nn::GRU gru(2, 3);
  expect_contains_all(error_of([&] {
                        gru(zeros({4, 1, 2}), {zeros({1, 1, 3}), zeros({1, 1, 3})});
                      }),
                      {"GRU", "cell state"});
  expect_contains_all(
      error_of([] {
        nn::RNN(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .nonlinearity = "sigmoid"});
      }),
      {"RNN", "nonlinearity 'sigmoid'", "tanh"});
  expect_contains_all(
      error_of([] { nn::GRU(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .proj_size = 2}); }),
      {"GRU", "proj_size 2", "only LSTM"});
  nn::LSTMCell cell(3, 4);
  expect_contains_all(error_of([&] {
                        cell(zeros({2, 3}), {zeros({2, 5}), zeros({2, 4})});
                      }),
                      {"LSTMCell", "h shape [2, 5]", "[2, 4]"});
  expect_contains_all(error_of([&] { cell(zeros({2, 2}), {}); }), {"LSTMCell", "[2, 2]", "[N, 3]"});

  expect_contains_all(error_of([] { nn::GroupNorm(4, 6); }),
                      {"GroupNorm", "num_channels 6 is not divisible by num_groups 4"});
  nn::GroupNorm gn(2, 4);
  expect_contains_all(error_of([&] {
                        gn(zeros({2, 6, 3}));
                      }),
                      {"GroupNorm(2, 4)", "[2, 6, 3]", "[N, 4, *]"});
  nn::InstanceNorm2d in2(3, 1e-5, 0.1, true);
  expect_contains_all(error_of([&] {
                        in2(zeros({2, 3}));
                      }),
                      {"InstanceNorm2d", "expected 3D (unbatched) or 4D input", "[2, 3]"});
  expect_contains_all(error_of([&] {
                        in2(zeros({1, 2, 4, 4}));
                      }),
                      {"InstanceNorm2d(3)", "input has 2 channels, expected 3"});
  nn::RMSNorm rms(Shape{3, 4});
  expect_contains_all(error_of([&] {
                        rms(zeros({2, 4, 3}));
                      }),
                      {"RMSNorm((3, 4))", "[2, 4, 3]", "trailing dims [3, 4]"});
  nn::Bilinear bil(2, 3, 4);
  expect_contains_all(error_of([&] {
                        bil(zeros({5, 2}), zeros({5, 4}));
                      }),
                      {"Bilinear", "[5, 2] and [5, 4]", "[.., 3]"});
  expect_contains_all(error_of([&] { bil(zeros({5, 2})); }), {"Bilinear", "two inputs"});
  expect_contains_all(error_of([] {
                        nn::Unflatten(1, Shape{2, 3})(zeros({4, 5}));
                      }),
                      {"Unflatten", "[4, 5]", "5 elements", "expected 6"});
  expect_contains_all(error_of([] {
                        nn::PReLU(3)(zeros({2, 4}));
                      }),
                      {"PReLU(num_parameters=3)", "[2, 4]", "3 channels"});
  expect_contains_all(error_of([] {
                        nn::GLU(1)(zeros({2, 3}));
                      }),
                      {"GLU(dim=1)", "[2, 3]", "even"});

  nn::TransformerDecoderLayer layer(nn::TransformerDecoderLayerOptions{.d_model = 8, .nhead = 2});
  expect_contains_all(error_of([&] {
                        layer(zeros({3, 2, 8}));
                      }),
                      {"TransformerDecoderLayer", "memory"});
  expect_contains_all(error_of([&] {
                        layer(zeros({3, 2, 6}), zeros({3, 2, 8}));
                      }),
                      {"TransformerDecoderLayer", "tgt shape [3, 2, 6]", "[T, N, 8]"});
  expect_contains_all(error_of([&] {
                        layer(zeros({3, 2, 8}), zeros({3, 8}));
                      }),
                      {"TransformerDecoderLayer", "memory shape [3, 8]"});
  nn::Transformer t(nn::TransformerOptions{.d_model = 8,
                                           .nhead = 2,
                                           .num_encoder_layers = 1,
                                           .num_decoder_layers = 1,
                                           .dim_feedforward = 8});
  expect_contains_all(error_of([&] {
                        t(zeros({3, 2, 8}), zeros({4, 3, 8}));
                      }),
                      {"Transformer", "different batch sizes"});
}

// ---- checkpoints: save_model / load_model rebuild every new module with its weights

TEST(ModuleContracts, SaveModelLoadModelRoundTrip) {
  manual_seed(176);
  const std::string path =
      (std::filesystem::temp_directory_path() / "ember_module_contracts_roundtrip.safetensors")
          .string();
  struct Case {
    nn::Module model;
    Tensor (*run)(const nn::Module&);
  };
  const Tensor seq = randn({5, 2, 3}), img = randn({2, 4, 3, 3});
  static Tensor s_seq, s_img;
  s_seq = seq;
  s_img = img;
  const std::vector<Case> cases = {
      {nn::Sequential({nn::GroupNorm(2, 4), nn::PReLU(4),
                       nn::InstanceNorm2d(4, 1e-5, 0.1, true, true), nn::Flatten(), nn::RMSNorm(36),
                       nn::Unflatten(1, Shape{4, 9}), nn::GLU(1), nn::Softplus(2.0, 5.0),
                       nn::Mish()}),
       [](const nn::Module& m) { return m(s_img); }},
      {nn::LSTM(nn::RNNOptions{.input_size = 3,
                               .hidden_size = 4,
                               .num_layers = 2,
                               .bidirectional = true,
                               .proj_size = 2}),
       [](const nn::Module& m) { return m(s_seq); }},
      {nn::GRU(3, 4), [](const nn::Module& m) { return m(s_seq); }},
      {nn::Transformer(nn::TransformerOptions{.d_model = 3,
                                              .nhead = 1,
                                              .num_encoder_layers = 1,
                                              .num_decoder_layers = 2,
                                              .dim_feedforward = 8}),
       [](const nn::Module& m) {
         return std::dynamic_pointer_cast<nn::TransformerImpl>(m.ptr())->forward(
             s_seq, s_seq.narrow(0, 0, 3), {.tgt_is_causal = true});
       }},
  };
  for (const Case& c : cases) {
    c.model->eval();
    io::save_model(c.model, path);
    nn::Module back = io::load_model(path);
    EXPECT_EQ(back->config(), c.model->config());
    NoGradGuard g;
    ember_test::expect_equal(c.run(back), c.run(c.model),
                             c.model->type_name() + " after load_model");
  }
  std::remove(path.c_str());
}

TEST(ModuleContracts, DropoutBetweenRecurrentLayersOnlyInTraining) {
  manual_seed(177);
  nn::LSTM lstm(nn::RNNOptions{.input_size = 3, .hidden_size = 8, .num_layers = 2, .dropout = 0.5});
  nn::LSTM plain(nn::RNNOptions{.input_size = 3, .hidden_size = 8, .num_layers = 2});
  plain->load_state_dict(lstm->state_dict(), true);
  const Tensor x = randn({6, 4, 3});
  NoGradGuard g;
  const Tensor trained = lstm(x);
  EXPECT_NE(trained.to_vector<float>(), plain(x).to_vector<float>()) << "dropout in training";
  lstm->eval();
  ember_test::expect_equal(lstm(x), plain(x), "no dropout in eval");
  nn::LSTM one(nn::RNNOptions{.input_size = 3, .hidden_size = 8, .dropout = 0.5});
  nn::LSTM one_plain(3, 8);
  one_plain->load_state_dict(one->state_dict(), true);
  ember_test::expect_equal(one(x), one_plain(x), "no dropout after the last layer");
}

}  // namespace

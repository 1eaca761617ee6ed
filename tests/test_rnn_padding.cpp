// tests/test_rnn_padding.cpp — padded batches in the recurrent layers (issue 27 items 8 and 9):
// values in the padding never reach an output or a gradient, and a PackedSequence carries
// its layout so a module of the other layout does not read the batch transposed. Each test
// failed before its fix.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/rnn.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;  // NOLINT: test file

bool all_finite(const Tensor& t) {
  return !any(isnan(t)).item<bool>() && !any(isinf(t)).item<bool>();
}

// The gradients of every parameter after backward through a padded batch whose padding holds
// `pad`, for a module of `mode`, optionally with two layers, bidirectional and a projection.
std::vector<Tensor> grads_with_padding(const std::string& mode, double pad, bool two_layers,
                                       bool bidirectional, int64_t proj) {
  manual_seed(5);
  nn::RNNOptions o{.input_size = 3,
                   .hidden_size = 4,
                   .num_layers = two_layers ? 2 : 1,
                   .batch_first = true,
                   .bidirectional = bidirectional};
  if (proj) o.proj_size = proj;
  nn::Module m = mode == "LSTM"  ? nn::Module(nn::LSTM(o))
                 : mode == "GRU" ? nn::Module(nn::GRU(o))
                                 : nn::Module(nn::RNN(o));
  manual_seed(6);
  Tensor x = randn({3, 5, 3});
  {
    NoGradGuard g;
    x.narrow(0, 1, 1).narrow(1, 2, 3).fill_(pad);  // sample 1: 2 real steps
    x.narrow(0, 2, 1).narrow(1, 4, 1).fill_(pad);  // sample 2: 4 real steps
  }
  x.requires_grad_();
  const Tensor lengths = from_vector<int64_t>({5, 2, 4}, {3});
  auto* rnn = dynamic_cast<nn::RNNBaseImpl*>(m.ptr().get());
  nn::RNNOutput out = rnn->forward(nn::pack_padded_sequence(x, lengths, true));
  (out.output.sum() + out.h_n.sum() + (out.c_n.defined() ? out.c_n.sum() : zeros({}))).backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : m->parameters()) grads.push_back(p.grad());
  grads.push_back(x.grad());
  return grads;
}

TEST(RnnPadding, NanOrInfInThePaddingReachesNoGradient) {
  for (const std::string mode : {"LSTM", "GRU", "RNN"}) {
    for (bool deep : {false, true}) {
      for (bool bi : {false, true}) {
        const std::vector<Tensor> clean = grads_with_padding(mode, 0.0, deep, bi, 0);
        for (double pad : {double(NAN), double(INFINITY), 1e30}) {
          const std::vector<Tensor> dirty = grads_with_padding(mode, pad, deep, bi, 0);
          ASSERT_EQ(dirty.size(), clean.size());
          for (size_t i = 0; i < clean.size(); ++i) {
            const std::string what = mode + (deep ? " 2 layers" : "") +
                                     (bi ? " bidirectional" : "") + " pad " + std::to_string(pad) +
                                     " grad " + std::to_string(i);
            ASSERT_TRUE(all_finite(dirty[i])) << what;
            // The real steps' gradients equal the clean run's: the padding's value is unread.
            const Tensor diff = abs(dirty[i] - clean[i]);
            EXPECT_LT(where(isnan(diff), full({}, 1.0), diff).max().item<float>(), 1e-5f) << what;
          }
        }
      }
    }
  }
  // The projected LSTM takes the unfused path.
  const std::vector<Tensor> clean = grads_with_padding("LSTM", 0.0, true, true, 2);
  const std::vector<Tensor> dirty = grads_with_padding("LSTM", NAN, true, true, 2);
  for (size_t i = 0; i < clean.size(); ++i) EXPECT_TRUE(all_finite(dirty[i])) << "proj grad " << i;
}

TEST(RnnPadding, APackedSequenceCarriesItsLayout) {
  manual_seed(7);
  nn::GRU time_major(nn::RNNOptions{.input_size = 2, .hidden_size = 3});
  nn::GRU batch_major(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .batch_first = true});
  batch_major->load_state_dict(time_major->state_dict());
  // N == T == 3: read transposed, the batch would pass silently.
  const Tensor x_bf = randn({3, 3, 2});  // [N, T, I]
  const Tensor lengths = from_vector<int64_t>({3, 1, 2}, {3});
  const nn::PackedSequence packed = nn::pack_padded_sequence(x_bf, lengths, true);
  ASSERT_TRUE(packed.batch_first.has_value());
  EXPECT_TRUE(*packed.batch_first);
  const nn::RNNOutput want = batch_major(packed);
  // The time-major module converts the batch to its own layout: same final states, and the
  // outputs in its layout [T, N, H].
  const nn::RNNOutput got = time_major(packed);
  EXPECT_LT(abs(got.h_n - want.h_n).max().item<float>(), 1e-6f);
  EXPECT_LT(abs(got.output.transpose(0, 1) - want.output).max().item<float>(), 1e-6f);
  // And the other way round.
  const nn::PackedSequence tm = nn::pack_padded_sequence(x_bf.transpose(0, 1), lengths, false);
  EXPECT_LT(abs(batch_major(tm).h_n - want.h_n).max().item<float>(), 1e-6f);
  // A PackedSequence made by hand without a layout is read as the module's own (as before).
  const nn::PackedSequence bare{x_bf, lengths};
  EXPECT_LT(abs(batch_major(bare).h_n - want.h_n).max().item<float>(), 1e-6f);
}

}  // namespace

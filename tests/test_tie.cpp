// tests/test_tie.cpp — ModuleImpl::tie: one parameter used by two modules (a language model's
// head and its token embedding) is computed with by both, listed and stepped once, and saved
// once; bad ties are refused with nothing changed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"
#include "io_test_util.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember_test::floats;

constexpr int64_t kVocab = 50, kDim = 16, kTokens = 24;

// The same values in `to`'s parameter as in `from`'s (no graph).
void copy_into(const Tensor& to, const Tensor& from) {
  NoGradGuard no_grad;
  Tensor(to).copy_(from);
}

// wte → Linear → head (bias-free, tied to wte): the module form (tie) against the
// functional form (linear(h, wte.weight)), trained side by side from the same values.
TEST(Tie, ATiedHeadTrainsAsTheFunctionalFormBitwise) {
  manual_seed(5);
  nn::Embedding wte(kVocab, kDim);
  nn::Linear mid(kDim, kDim), head(nn::LinearOptions{kDim, kVocab, false});
  nn::Sequential net{wte, mid, head};
  net->tie("2.weight", wte->weight());
  ASSERT_TRUE(head->weight().is_same(wte->weight()));
  EXPECT_EQ(net->parameters().size(), 3u);  // wte.weight, mid.weight, mid.bias

  nn::Embedding wte2(kVocab, kDim);
  nn::Linear mid2(kDim, kDim);
  copy_into(wte2->weight(), wte->weight());
  copy_into(mid2->weight(), mid->weight());
  copy_into(mid2->bias(), mid->bias());

  optim::AdamW a(net->parameters(), {.lr = 1e-2});
  std::vector<Tensor> p2 = mid2->parameters();
  p2.insert(p2.begin(), wte2->weight());
  optim::AdamW b(p2, {.lr = 1e-2});
  for (int step = 0; step < 5; ++step) {
    const Tensor idx = randint(0, kVocab, {kTokens}), target = randint(0, kVocab, {kTokens});
    a.zero_grad();
    b.zero_grad();
    Tensor la = cross_entropy(net(idx), target);
    Tensor lb = cross_entropy(linear(mid2(wte2(idx)), wte2->weight()), target);
    la.backward();
    lb.backward();
    EXPECT_EQ(la.item<float>(), lb.item<float>()) << "step " << step;
    a.step();
    b.step();
  }
  EXPECT_EQ(floats(wte->weight()), floats(wte2->weight()));
  EXPECT_EQ(floats(head->weight()), floats(wte2->weight()));
}

// The other direction (an embedding tied to a head's weight), and a checkpoint: both names in
// state_dict, stored once in the file, loaded back into a model tied the same way.
TEST(Tie, AnEmbeddingTiedToAHeadSavesOnceAndLoadsBack) {
  manual_seed(6);
  auto make = [] {
    nn::Embedding wte(kVocab, kDim);
    nn::Linear head(nn::LinearOptions{kDim, kVocab, false});
    nn::Sequential net{wte, head};
    net->tie("0.weight", head->weight());
    return net;
  };
  nn::Sequential net = make();
  EXPECT_EQ(net->parameters().size(), 1u);
  const nn::StateDict sd = net->state_dict();
  ASSERT_EQ(sd.size(), 2u);  // both names, as PyTorch's state_dict
  EXPECT_TRUE(sd[0].second.is_same(sd[1].second));
  ember_test::ScratchDir dir;
  io::save_model(net, dir.file("tied.safetensors"));
  nn::Sequential back = make();
  io::load_state(back, dir.file("tied.safetensors"));
  EXPECT_EQ(floats(back->state_dict()[0].second), floats(sd[0].second));
  EXPECT_TRUE(back->state_dict()[0].second.is_same(back->state_dict()[1].second));
  // One gradient: the embedding's rows and the head's product both land in it.
  const Tensor idx = tensor({1.0f, 2.0f, 2.0f}).to(DType::i64);
  net(idx).sum().backward();
  const Tensor g = net->parameters()[0].grad();
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.shape(), (Shape{kVocab, kDim}));
}

TEST(Tie, BadTiesAreRefusedAndChangeNothing) {
  nn::Embedding wte(kVocab, kDim);
  nn::Linear narrow(kDim, kVocab - 1), head(kDim, kVocab);
  nn::Sequential net{wte, narrow, head};
  const Tensor before = narrow->weight();
  std::string e = error_of([&] { net->tie("1.weight", wte->weight()); });
  EXPECT_NE(e.find("tie: '1.weight' is [49, 16]"), std::string::npos) << e;
  EXPECT_NE(e.find("[50, 16]"), std::string::npos) << e;
  EXPECT_TRUE(narrow->weight().is_same(before));
  e = error_of([&] { net->tie("2.wieght", wte->weight()); });
  EXPECT_NE(e.find("no parameter named 'wieght'"), std::string::npos) << e;
  e = error_of([&] { net->tie("7.weight", wte->weight()); });
  EXPECT_NE(e.find("no child module named '7'"), std::string::npos) << e;
  e = error_of([&] { net->tie("2.weight", Tensor()); });
  EXPECT_NE(e.find("undefined"), std::string::npos) << e;
  e = error_of([&] { net->tie("2.weight", zeros({kVocab, kDim})); });
  EXPECT_NE(e.find("is not a parameter"), std::string::npos) << e;
  e = error_of(
      [&] { net->tie("2.weight", wte->weight().to(DType::f64).detach().requires_grad_()); });
  EXPECT_NE(e.find("f64"), std::string::npos) << e;
  // A module that computes with its own handle and cannot rebind it: refused, untouched.
  nn::LayerNorm a(std::vector<int64_t>{3}), b(std::vector<int64_t>{3});
  const Tensor norm_before = b->param("weight");
  e = error_of([&] { b->tie("weight", a->param("weight")); });
  EXPECT_NE(e.find("LayerNorm"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot rebind"), std::string::npos) << e;
  EXPECT_TRUE(b->param("weight").is_same(norm_before));
  // The convolutions rebind: a tied Conv2d computes with the other's weight.
  nn::Conv2d c(2, 3, 3), d(2, 3, 3);
  d->tie("weight", c->weight());
  const Tensor x = randn({1, 2, 5, 5});
  EXPECT_TRUE(d->weight().is_same(c->weight()));
  const Tensor gap = (d(x) - d->bias().view({1, 3, 1, 1})) - (c(x) - c->bias().view({1, 3, 1, 1}));
  EXPECT_LT(abs(gap).max().item<float>(), 1e-5f);
}

}  // namespace

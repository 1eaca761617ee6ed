// tests/test_layers_embedding_bag.cpp — nn::EmbeddingBag (torch.nn.EmbeddingBag) over the
// embedding_bag op (whose values and gradients tests/test_catalogue.cpp checks against
// PyTorch): hand-computed bags in each mode, offsets and per-sample weights, the padding row,
// PyTorch's repr, the config round trip and the refusals.
#include <gtest/gtest.h>

#include "ember/ember.hpp"
#include "ember/nn/embedding.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"

using namespace ember;
using ember::test_util::error_of;
using ember_test::expect_close;

namespace {

// weight row r = [r, 10 r]: a bag's sum, mean and max are easy to write down.
nn::EmbeddingBag bag_with_rows(nn::EmbeddingBagOptions o) {
  nn::EmbeddingBag bag(o);
  NoGradGuard no_grad;
  std::vector<float> rows;
  for (int64_t r = 0; r < o.num_embeddings; ++r) {
    rows.push_back(static_cast<float>(r));
    rows.push_back(static_cast<float>(10 * r));
  }
  bag->weight().assign_(from_vector(rows, {o.num_embeddings, 2}));
  return bag;
}

}  // namespace

TEST(EmbeddingBagModule, BagsOfRowsInEachMode) {
  const Tensor input = from_vector<int64_t>({1, 2, 4, 3, 3, 0}, {2, 3});
  const std::vector<std::pair<std::string, std::vector<float>>> want{
      {"sum", {7, 70, 6, 60}}, {"mean", {7.f / 3, 70.f / 3, 2, 20}}, {"max", {4, 40, 3, 30}}};
  for (const auto& [mode, values] : want) {
    nn::EmbeddingBag bag = bag_with_rows({.num_embeddings = 5, .embedding_dim = 2, .mode = mode});
    expect_close(bag(input), from_vector(values, {2, 2}), 1e-6, 1e-6, "EmbeddingBag " + mode);
  }
}

TEST(EmbeddingBagModule, OffsetsWeightsAndPadding) {
  nn::EmbeddingBag bag = bag_with_rows({.num_embeddings = 5, .embedding_dim = 2, .mode = "sum"});
  const Tensor input = from_vector<int64_t>({1, 2, 4, 3}, {4});
  const Tensor offsets = from_vector<int64_t>({0, 1}, {2});  // bags {1} and {2, 4, 3}
  expect_close(bag(input, offsets), from_vector<float>({1, 10, 9, 90}, {2, 2}), 1e-6, 1e-6,
               "bags at offsets");
  const Tensor w = from_vector<float>({2, 1, 0.5f, 1}, {4});
  expect_close(bag(input, offsets, w), from_vector<float>({2, 20, 7, 70}, {2, 2}), 1e-6, 1e-6,
               "per-sample weights");

  // padding_idx: its entries are left out of the bag and of the mean's count, its row starts
  // at zero and gets no gradient.
  nn::EmbeddingBag padded(
      nn::EmbeddingBagOptions{.num_embeddings = 5, .embedding_dim = 3, .padding_idx = -1});
  EXPECT_EQ(padded->embedding_bag_options().padding_idx, std::optional<int64_t>(4));
  EXPECT_EQ(abs(padded->weight().select(0, 4)).sum().item<float>(), 0.0f);
  const Tensor x = from_vector<int64_t>({4, 1, 4, 4}, {2, 2});
  const Tensor out = padded(x);
  expect_close(out.select(0, 0), padded->weight().select(0, 1), 1e-6, 1e-6, "mean without pads");
  expect_close(out.select(0, 1), zeros({3}), 0, 0, "a bag of pads only");
  out.sum().backward();
  expect_close(padded->weight().grad().select(0, 4), zeros({3}), 0, 0, "padding row's grad");
  expect_close(padded->weight().grad().select(0, 1), ones({3}), 0, 0, "row 1's grad");
}

TEST(EmbeddingBagModule, ReprAndConfigRoundTrip) {
  manual_seed(4);
  nn::EmbeddingBag bag(nn::EmbeddingBagOptions{
      .num_embeddings = 10, .embedding_dim = 3, .mode = "sum", .padding_idx = 2});
  std::ostringstream printed;
  printed << *bag;
  // torch.nn.EmbeddingBag(10, 3, mode='sum', padding_idx=2) prints this line
  EXPECT_NE(printed.str().find("EmbeddingBag(10, 3, mode=sum, padding_idx=2)"), std::string::npos)
      << printed.str();
  nn::Module back = nn::build(bag->config());
  back->load_state_dict(bag->state_dict());
  const Tensor x = from_vector<int64_t>({0, 2, 9, 5}, {2, 2});
  expect_close(back(x), bag(x), 0, 0, "rebuilt EmbeddingBag");
  EXPECT_EQ(back->config(), bag->config());
}

TEST(EmbeddingBagModule, RefusesBadInput) {
  EXPECT_NE(error_of([] {
              nn::EmbeddingBag(4, 2, "median");
            }).find("EmbeddingBag: mode 'median' (expected sum, mean or max)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              nn::EmbeddingBag(nn::EmbeddingBagOptions{
                  .num_embeddings = 4, .embedding_dim = 2, .padding_idx = 4});
            }).find("padding_idx 4 is out of range"),
            std::string::npos);
  nn::EmbeddingBag bag(4, 2);
  EXPECT_NE(error_of([&] {
              bag(from_vector<int64_t>({0, 1}, {2}));
            }).find("needs offsets"),
            std::string::npos);
}

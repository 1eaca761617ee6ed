// ember/nn/flatten.hpp — Flatten and Unflatten (torch.nn's flatten.py): the modules that
// change a tensor's shape, not its values.
//
//   nn::Flatten flat;                 // [N, C, H, W] -> [N, C·H·W]
//   nn::Unflatten unflat(1, {2, 5});  // [N, 10] -> [N, 2, 5]
#pragma once

#include <string>
#include <utility>

#include "ember/nn/module.hpp"

namespace ember::nn {

struct FlattenOptions {
  int64_t start_dim = 1;
  int64_t end_dim = -1;
  static constexpr auto fields() {
    return std::tuple{field("start_dim", &FlattenOptions::start_dim),
                      field("end_dim", &FlattenOptions::end_dim)};
  }
};

/// Flattens dims start_dim..end_dim (default 1..-1, as PyTorch).
class FlattenImpl : public ModuleImpl {
 public:
  explicit FlattenImpl(FlattenOptions options) : options_(options) {}
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : FlattenImpl(FlattenOptions{start_dim, end_dim}) {}
  Tensor forward(const Tensor& x) override {
    return x.flatten(options_.start_dim, options_.end_dim);
  }
  std::string type_name() const override { return "Flatten"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  FlattenOptions options_;
};
class Flatten : public ModuleHolder<FlattenImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct UnflattenOptions {
  int64_t dim = 1;
  Shape unflattened_size{};
  static constexpr auto fields() {
    return std::tuple{field("dim", &UnflattenOptions::dim),
                      field("unflattened_size", &UnflattenOptions::unflattened_size)};
  }
};

/// Unflatten: dim `dim` of size Πsizes becomes the dims `sizes` (one may be -1, inferred).
///   nn::Unflatten(1, {2, 5}) maps [N, 10] to [N, 2, 5].
class UnflattenImpl : public ModuleImpl {
 public:
  explicit UnflattenImpl(UnflattenOptions options);
  UnflattenImpl(int64_t dim, Shape unflattened_size)
      : UnflattenImpl(UnflattenOptions{dim, std::move(unflattened_size)}) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Unflatten"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  UnflattenOptions options_;
};
class Unflatten : public ModuleHolder<UnflattenImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn

// ember/nn/containers.hpp — the containers of torch.nn: Sequential, which runs its children in
// order, and ModuleList, an indexed list of child modules with no forward of its own.
//
//   nn::ModuleList blocks({nn::Linear(8, 8), nn::Linear(8, 8)});   // children "0", "1"
//   Tensor h = x;
//   for (size_t i = 0; i < blocks->size(); ++i) h = relu(blocks[i](h));
#pragma once

#include <memory>
#include <vector>

#include "ember/nn/module.hpp"

namespace ember::nn {

/// Runs children in order; children are named "0", "1", ... as in PyTorch.
/// Example: nn::Sequential net({nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10)});
class SequentialImpl : public ModuleImpl {
 public:
  SequentialImpl() = default;
  explicit SequentialImpl(const std::vector<Module>& modules);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  json config() const override;
  void push_back(const Module& m);
  size_t size() const { return named_children().size(); }
  Module operator[](size_t i) const;
};
class Sequential : public ModuleHolder<SequentialImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  Sequential(std::initializer_list<Module> modules)
      : ModuleHolder(std::make_shared<SequentialImpl>(std::vector<Module>(modules))) {}
};

/// Holds modules under the names "0", "1", ... (PyTorch's nn.ModuleList), so their parameters
/// appear as "layers.0.weight". It is a container only: calling forward throws.
class ModuleListImpl : public ModuleImpl {
 public:
  ModuleListImpl() = default;
  explicit ModuleListImpl(const std::vector<Module>& modules);
  /// Throws: a ModuleList has no forward; index it and call the modules yourself.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ModuleList"; }
  /// {"type": "ModuleList", "options": {}, "children": [config of each module, in order]}.
  json config() const override;

  void push_back(const Module& m);
  size_t size() const { return named_children().size(); }
  bool empty() const { return size() == 0; }
  /// The i-th module (bounds checked).
  Module operator[](size_t i) const;
  /// The i-th module as its concrete type; throws when it is another type.
  /// Example: auto layer = list->at<LinearImpl>(0); layer->weight();
  template <typename Impl>
  std::shared_ptr<Impl> at(size_t i) const {
    auto typed = std::dynamic_pointer_cast<Impl>((*this)[i].ptr());
    EMBER_CHECK(typed != nullptr, "ModuleList: module ", i, " is a ", (*this)[i]->type_name(),
                " (not the requested type)");
    return typed;
  }
};

class ModuleList : public ModuleHolder<ModuleListImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  ModuleList() : ModuleHolder(std::make_shared<ModuleListImpl>()) {}
  ModuleList(std::initializer_list<Module> modules)
      : ModuleHolder(std::make_shared<ModuleListImpl>(std::vector<Module>(modules))) {}
  Module operator[](size_t i) const { return (**this)[i]; }
};

}  // namespace ember::nn

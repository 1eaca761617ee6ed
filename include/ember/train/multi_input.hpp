// ember/train/multi_input.hpp — models whose forward takes several tensors (PyTorch's
// forward(self, a, b)), and two containers built from them.
//
// A multi-input module derives from MultiInputImpl and implements forward_inputs; fit(),
// evaluate() and train::forward() hand it every input of a batch, in the order the dataset
// yields them (data::Example::inputs(); data::MultiTensorDataset makes such batches):
//
//   struct TwoTowerImpl : train::MultiInputImpl {
//     nn::Linear a{8, 16}, b{4, 16};
//     TwoTowerImpl() { register_module("a", a.ptr()); register_module("b", b.ptr()); }
//     Tensor forward_inputs(const std::vector<Tensor>& x) override { return a(x[0]) + b(x[1]); }
//     std::string type_name() const override { return "TwoTower"; }
//   };
//
// The same shape without code: Parallel runs branch i on input i and concatenates the
// outputs; MultiInputSequential runs its first module on all inputs and the rest in order:
//
//   train::MultiInputSequential net({train::Parallel({nn::Linear(8, 16), nn::Linear(4, 16)}),
//                                    nn::ReLU(), nn::Linear(32, 3)});
//   Tensor y = net({x8, x4});                      // [N, 3]
//
// Both are registered module types ("Parallel", "MultiInputSequential"), so config(),
// save_model and load_model work on them as on Sequential.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "ember/nn/module.hpp"

namespace ember::train {

/// Base of a module with several inputs. forward(x) is forward_inputs({x}).
class MultiInputImpl : public nn::ModuleImpl {
 public:
  /// The forward pass on every input (inputs[0] is data::Example::input, then extra_inputs).
  virtual Tensor forward_inputs(const std::vector<Tensor>& inputs) = 0;
  Tensor forward(const Tensor& input) override;
};

/// Runs `model` on `inputs`: a MultiInputImpl gets them all, any other module exactly one
/// (else an ember::Error naming the module type and the count). Example:
///   Tensor y = train::forward(net, batch.inputs());
Tensor forward(const nn::Module& model, const std::vector<Tensor>& inputs);
/// Whether `model` takes several inputs (derives from MultiInputImpl).
bool is_multi_input(const nn::Module& model);

/// Branch i runs on input i; the outputs are concatenated along `dim` (1: features).
class ParallelImpl : public MultiInputImpl {
 public:
  explicit ParallelImpl(const std::vector<nn::Module>& branches = {}, int64_t dim = 1);
  /// Throws unless there is one input per branch (naming both counts).
  Tensor forward_inputs(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "Parallel"; }
  nn::json options() const override { return {{"dim", dim_}}; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim_); }
  nn::json config() const override;
  void push_back(const nn::Module& branch);
  size_t size() const { return named_children().size(); }
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
};
class Parallel : public nn::ModuleHolder<ParallelImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Parallel(std::initializer_list<nn::Module> branches, int64_t dim = 1)
      : ModuleHolder(std::make_shared<ParallelImpl>(std::vector<nn::Module>(branches), dim)) {}
  Tensor operator()(const std::vector<Tensor>& inputs) const {
    return (*this)->forward_inputs(inputs);
  }
};

/// Module 0 runs on every input (train::forward), each later module on the previous output,
/// as in nn::Sequential. Parameter names are Sequential's: "0.0.weight", "2.bias".
class MultiInputSequentialImpl : public MultiInputImpl {
 public:
  explicit MultiInputSequentialImpl(const std::vector<nn::Module>& modules = {});
  Tensor forward_inputs(const std::vector<Tensor>& inputs) override;
  std::string type_name() const override { return "MultiInputSequential"; }
  nn::json config() const override;
  void push_back(const nn::Module& module);
  size_t size() const { return named_children().size(); }
};
class MultiInputSequential : public nn::ModuleHolder<MultiInputSequentialImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  MultiInputSequential(std::initializer_list<nn::Module> modules)
      : ModuleHolder(std::make_shared<MultiInputSequentialImpl>(std::vector<nn::Module>(modules))) {
  }
  Tensor operator()(const std::vector<Tensor>& inputs) const {
    return (*this)->forward_inputs(inputs);
  }
};

}  // namespace ember::train

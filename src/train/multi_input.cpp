// src/train/multi_input.cpp — MultiInputImpl, train::forward, Parallel and
// MultiInputSequential, and their registry factories (registered when libember loads).
#include "ember/train/multi_input.hpp"

#include "ember/ops.hpp"

namespace ember::train {

Tensor MultiInputImpl::forward(const Tensor& input) { return forward_inputs({input}); }

bool is_multi_input(const nn::Module& model) {
  return dynamic_cast<const MultiInputImpl*>(model.ptr().get()) != nullptr;
}

Tensor forward(const nn::Module& model, const std::vector<Tensor>& inputs) {
  EMBER_CHECK(model.defined(), "train::forward: the model is undefined");
  if (auto* multi = dynamic_cast<MultiInputImpl*>(model.ptr().get()))
    return multi->forward_inputs(inputs);
  EMBER_CHECK(inputs.size() == 1, "train::forward: ", model->type_name(), " takes one input (got ",
              inputs.size(),
              "; a model with several inputs derives from train::MultiInputImpl, e.g. "
              "train::MultiInputSequential)");
  return model(inputs[0]);
}

namespace {
nn::json children_config(const nn::ModuleImpl& m, const nn::json& options) {
  nn::json children = nn::json::array();
  for (auto& [name, child] : m.named_children()) children.push_back(child->config());
  return {{"type", m.type_name()}, {"options", options}, {"children", children}};
}
}  // namespace

// ---- Parallel ----

ParallelImpl::ParallelImpl(const std::vector<nn::Module>& branches, int64_t dim) : dim_(dim) {
  for (const nn::Module& b : branches) push_back(b);
}

void ParallelImpl::push_back(const nn::Module& branch) {
  EMBER_CHECK(branch.defined(), "Parallel: cannot add an undefined module");
  register_module(std::to_string(size()), branch.ptr());
}

Tensor ParallelImpl::forward_inputs(const std::vector<Tensor>& inputs) {
  EMBER_CHECK(inputs.size() == size(), "Parallel: got ", inputs.size(), " inputs (expected ",
              size(), ", one per branch)");
  std::vector<Tensor> outputs;
  outputs.reserve(inputs.size());
  const auto& branches = named_children();
  for (size_t i = 0; i < inputs.size(); ++i)
    outputs.push_back(nn::run_forward(*branches[i].second, inputs[i]));
  return outputs.size() == 1 ? outputs[0] : cat(outputs, dim_);
}

nn::json ParallelImpl::config() const { return children_config(*this, options()); }

// ---- MultiInputSequential ----

MultiInputSequentialImpl::MultiInputSequentialImpl(const std::vector<nn::Module>& modules) {
  for (const nn::Module& m : modules) push_back(m);
}

void MultiInputSequentialImpl::push_back(const nn::Module& module) {
  EMBER_CHECK(module.defined(), "MultiInputSequential: cannot add an undefined module");
  register_module(std::to_string(size()), module.ptr());
}

Tensor MultiInputSequentialImpl::forward_inputs(const std::vector<Tensor>& inputs) {
  const auto& children = named_children();
  EMBER_CHECK(!children.empty(), "MultiInputSequential: no modules (expected at least one)");
  Tensor h = train::forward(nn::Module(children[0].second), inputs);
  for (size_t i = 1; i < children.size(); ++i) h = nn::run_forward(*children[i].second, h);
  return h;
}

nn::json MultiInputSequentialImpl::config() const {
  return children_config(*this, nn::json::object());
}

// ---- registry ----

namespace {
std::vector<nn::Module> build_children(const nn::json& c, const char* type) {
  std::vector<nn::Module> out;
  if (!c.contains("children")) return out;
  EMBER_CHECK(c["children"].is_array(), "nn::build: ", type, " children must be a list");
  for (const nn::json& child : c["children"]) out.push_back(nn::build(child));
  return out;
}

// Registered when the library loads (the registry is a function-local static, so the order
// of static initialisers does not matter).
[[maybe_unused]] const bool kRegistered = [] {
  nn::register_module_type("Parallel", [](const nn::json& c) -> nn::ModulePtr {
    const int64_t dim = c.contains("options") && c["options"].contains("dim")
                            ? c["options"]["dim"].get<int64_t>()
                            : 1;
    return std::make_shared<ParallelImpl>(build_children(c, "Parallel"), dim);
  });
  nn::register_module_type("MultiInputSequential", [](const nn::json& c) -> nn::ModulePtr {
    return std::make_shared<MultiInputSequentialImpl>(build_children(c, "MultiInputSequential"));
  });
  return true;
}();
}  // namespace

}  // namespace ember::train

// src/nn/linear.cpp — Linear, Flatten, Dropout, GELU and Sequential.
#include "ember/nn/linear.hpp"

#include <sstream>

#include "core/profiler.hpp"
#include "ember/nn/init.hpp"
#include "nn/py_repr.hpp"

namespace ember::nn {

LinearImpl::LinearImpl(LinearOptions o) : options_(o) {
  check_options(o, "Linear");
  weight_ =
      register_parameter("weight", init::kaiming_uniform_default({o.out_features, o.in_features}));
  if (o.bias) bias_ = register_parameter("bias", init::bias_default(o.out_features, o.in_features));
}

Tensor LinearImpl::forward(const Tensor& x) { return forward(x, Activation::none); }

Tensor LinearImpl::forward(const Tensor& x, Activation activation) {
  EMBER_CHECK(x.dim() >= 1 && x.shape().at(-1) == options_.in_features,
              "Linear(in_features=", options_.in_features, ", out_features=", options_.out_features,
              "): input shape ", x.shape().to_string(), " has ", x.dim() ? x.shape().at(-1) : 0,
              " features in its last dim (expected ", options_.in_features, ")");
  return activation == Activation::none ? linear(x, weight_, bias_)
                                        : linear(x, weight_, bias_, activation);
}

void LinearImpl::rebind_parameter(const std::string& name, const Tensor& param) {
  (name == "weight" ? weight_ : bias_) = param;  // tie() checked the name and the shape
}

json LinearImpl::options() const { return options_json(options_); }

std::string LinearImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

std::string FlattenImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

DropoutImpl::DropoutImpl(DropoutOptions o) : options_(o) { check_options(o, "Dropout"); }

std::string DropoutImpl::extra_repr() const {
  std::ostringstream s;  // "p=0.5, inplace=False", p as the stream prints it
  s << "p=" << options_.p << ", inplace=False";
  return s.str();
}

GELUImpl::GELUImpl(GELUOptions o) : options_(std::move(o)) {
  const std::string& a = options_.approximate;
  EMBER_CHECK(a == "none" || a == "tanh", "GELU: approximate '", a,
              "' (expected \"none\" or \"tanh\")");
}

std::string GELUImpl::extra_repr() const {
  const std::string& a = options_.approximate;
  return a == "none" ? "" : "approximate='" + a + "'";
}

SequentialImpl::SequentialImpl(const std::vector<Module>& modules) {
  for (const Module& m : modules) push_back(m);
}

void SequentialImpl::push_back(const Module& m) {
  EMBER_CHECK(m.defined(), "Sequential: cannot add an undefined module");
  register_module(std::to_string(size()), m.ptr());
}

Module SequentialImpl::operator[](size_t i) const {
  auto kids = named_children();
  EMBER_CHECK(i < kids.size(), "Sequential: index ", i, " is out of range (size ", kids.size(),
              ")");
  return Module(kids[i].second);
}

Tensor SequentialImpl::forward(const Tensor& x) {
  // A child that can fuse (Linear) followed by an activation an epilogue applies (ReLU) runs
  // as one GEMM with that epilogue (same values, same gradients, fewer kernels); everything
  // else runs child by child.
  Tensor h = x;
  const auto& children = named_children();
  for (size_t i = 0; i < children.size(); ++i) {
    if (i + 1 < children.size()) {
      if (const std::optional<Activation> act = children[i + 1].second->as_epilogue()) {
        ModuleImpl& child = *children[i].second;
        const core::profiler::ModuleFrame frame(
            &child, detail::profiling() ? child.type_name() : std::string());
        Tensor fused = child.forward_with_epilogue(h, *act);
        if (fused.defined()) {
          h = fused;
          ++i;
          continue;
        }
      }
    }
    h = run_forward(*children[i].second, h);
  }
  return h;
}

json SequentialImpl::config() const {
  json children = json::array();
  for (auto& [name, m] : named_children()) children.push_back(m->config());
  return {{"type", type_name()}, {"options", json::object()}, {"children", children}};
}

}  // namespace ember::nn

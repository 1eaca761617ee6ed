// src/nn/containers.cpp — Sequential (with its Linear + activation fusion) and ModuleList.
#include "ember/nn/containers.hpp"

#include "core/profiler.hpp"

namespace ember::nn {

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
      // (not when either has forward hooks: each must see its own input and output)
      const std::optional<Activation> act = children[i + 1].second->as_epilogue();
      if (act && !children[i].second->has_forward_hooks() &&
          !children[i + 1].second->has_forward_hooks()) {
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

ModuleListImpl::ModuleListImpl(const std::vector<Module>& modules) {
  for (const Module& m : modules) push_back(m);
}

Tensor ModuleListImpl::forward(const Tensor&) {
  detail::throw_error(detail::concat(
      "ModuleList: has no forward (it holds ", size(),
      " modules; index it, e.g. list[i](x), or use Sequential to run them in order)"));
}

json ModuleListImpl::config() const {
  json children = json::array();
  for (auto& [name, m] : named_children()) children.push_back(m->config());
  return {{"type", type_name()}, {"options", json::object()}, {"children", children}};
}

void ModuleListImpl::push_back(const Module& m) {
  EMBER_CHECK(m.defined(), "ModuleList: cannot add an undefined module");
  register_module(std::to_string(size()), m.ptr());
}

Module ModuleListImpl::operator[](size_t i) const {
  const auto& kids = named_children();
  EMBER_CHECK(i < kids.size(), "ModuleList: index ", i, " is out of range (size ", kids.size(),
              ")");
  return Module(kids[i].second);
}

}  // namespace ember::nn

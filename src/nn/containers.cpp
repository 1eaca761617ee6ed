// src/nn/containers.cpp — ModuleList.
#include "ember/nn/containers.hpp"

namespace ember::nn {

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

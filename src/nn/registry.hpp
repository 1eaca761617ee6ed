// src/nn/registry.hpp — what the registry files share: a factory reads a module's options from
// its config by name (options_from: absent keys keep their defaults, unknown keys and values of
// the wrong kind are refused naming the module and the key) and builds the module from them.
// No factory fills an options struct by position.
#pragma once

#include <memory>
#include <string>
#include <tuple>

#include "ember/nn/module.hpp"

namespace ember::nn::registry {

/// The options of a module that takes none: any key is refused.
struct NoOptions {
  static constexpr auto fields() { return std::tuple{}; }
};

/// The "options" object of a module config ({} when absent or null).
inline const json& config_options(const json& config) {
  static const json empty = json::object();
  return config.contains("options") && !config["options"].is_null() ? config["options"] : empty;
}

/// Options O read by name from a module config of type `type`.
template <typename O>
O options_of(const json& config, const std::string& type) {
  return options_from<O>(config_options(config), type);
}

/// Registers `type`, built as make(options) from its config's options O.
template <typename O, typename Make>
void register_built(const std::string& type, Make make) {
  register_module_type(type, [type, make](const json& config) -> ModulePtr {
    return make(options_of<O>(config, type));
  });
}

/// Registers `type`, built as Impl(options) from its config's options O.
template <typename Impl, typename O>
void register_with(const std::string& type) {
  register_built<O>(type, [](O o) -> ModulePtr { return std::make_shared<Impl>(std::move(o)); });
}

/// Registers `type`, an Impl that takes no options.
template <typename Impl>
void register_plain(const std::string& type) {
  register_built<NoOptions>(type, [](NoOptions) -> ModulePtr { return std::make_shared<Impl>(); });
}

/// The children list of a container's config, each built (Sequential, ModuleList).
template <typename Impl>
void register_container(const std::string& type) {
  register_module_type(type, [type](const json& config) -> ModulePtr {
    (void)options_of<NoOptions>(config, type);
    auto container = std::make_shared<Impl>();
    if (config.contains("children")) {
      EMBER_CHECK(config["children"].is_array(), "nn::build: ", type, " children must be a list");
      for (const json& child : config["children"]) container->push_back(build(child));
    }
    return container;
  });
}

}  // namespace ember::nn::registry

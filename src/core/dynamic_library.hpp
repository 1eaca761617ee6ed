// src/core/dynamic_library.hpp — what the loaders of run-time vendor libraries share (cuDNN:
// src/cuda/cudnn_loader.cpp; oneDNN: src/cpu/onednn_loader.cpp): typed entry points resolved
// with dlsym, and an API loaded once per process with the reason kept when it is not there.
#pragma once

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace ember::core {

/// *out = symbol `name` of `lib` (a dlopen handle), typed as Fn; false with
/// *why = "<library> has no symbol <name>" when it is missing.
template <typename Fn>
bool resolve_symbol(void* lib, const char* name, Fn* out, std::string* why, const char* library) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out) *why = std::string(library) + " has no symbol " + name;
  return *out != nullptr;
}

/// A library's entry points as its loader left them: ok, or why not.
template <typename Api>
struct LoadedLibrary {
  Api api;
  bool ok = false;
  std::string why;
};

/// The API `load` returns, loaded on the first call of this Api type (thread-safe, kept until
/// exit), or null with *why. Never throws.
template <typename Api>
const Api* load_once(LoadedLibrary<Api> (*load)(), std::string* why) {
  static std::once_flag once;
  static LoadedLibrary<Api>* loaded = nullptr;  // leaked: used until exit
  std::call_once(once, [load] { loaded = new LoadedLibrary<Api>(load()); });
  if (!loaded->ok) {
    if (why) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace ember::core

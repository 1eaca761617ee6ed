// src/core/dynamic_library.hpp — what the loaders of run-time vendor libraries share (cuDNN:
// src/cuda/cudnn_loader.cpp; oneDNN: src/cpu/onednn_loader.cpp): typed entry points resolved
// with dlsym, and an API loaded once per process with the reason kept when it is not there.
#pragma once

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace ember::core {

/// *out = symbol `name` of `lib` (a dlopen handle), typed as Fn; false with
/// *why = "<library> has no symbol <name>" when it is missing.
template <typename Fn>
bool resolve_symbol(void* lib, const char* name, Fn* out, std::string* why, const char* library) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out) *why = std::string(library) + " has no symbol " + name;
  return *out != nullptr;
}

/// The paths matching a glob(3) pattern, sorted (none when nothing matches).
inline std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

/// The files `tail` names (e.g. "/nvidia/cudnn/lib/libcudnn.so.9", globs allowed) inside the
/// usual Python site-packages folders, where NVIDIA's pip packages (PyTorch's wheels) put their
/// libraries: /usr/local/lib/python3*/dist-packages, /usr/lib/python3*/..., $VIRTUAL_ENV,
/// $CONDA_PREFIX, /opt/*/.venv and ~/.local.
inline std::vector<std::string> python_package_files(const std::string& tail) {
  std::vector<std::string> roots = {
      "/usr/local/lib/python3*/dist-packages",   "/usr/local/lib/python3*/site-packages",
      "/usr/lib/python3*/dist-packages",         "/usr/lib/python3/dist-packages",
      "/opt/*/.venv/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages"};
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* p = std::getenv(var); p && *p)
      roots.push_back(std::string(p) + "/lib/python3*/site-packages");
  if (const char* home = std::getenv("HOME"); home && *home)
    roots.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
  std::vector<std::string> out;
  for (const std::string& r : roots)
    for (const std::string& p : glob_paths(r + tail)) out.push_back(p);
  return out;
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

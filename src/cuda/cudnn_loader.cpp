// src/cuda/cudnn_loader.cpp — finds and opens cuDNN 9 with dlopen (cudnn_loader.hpp).
//
// Note [Finding cuDNN]
// Tried in order, the first that opens wins:
//   1. $EMBER_CUDNN_LIBRARY: the path of libcudnn.so.9, or the folder holding it;
//   2. libcudnn.so.9 on the loader's search path (a system install, LD_LIBRARY_PATH);
//   3. the pip package nvidia-cudnn-cu<N> (what PyTorch's wheels use) in the usual Python
//      site-packages folders: /usr/local/lib/python3*/dist-packages, /usr/lib/python3*/...,
//      $VIRTUAL_ENV, $CONDA_PREFIX, /opt/*/.venv and ~/.local (…/nvidia/cudnn/lib).
// From a folder, cuDNN's sub-libraries (libcudnn_graph, the engine libraries, the heuristic
// library) are opened first by full path with RTLD_GLOBAL, so that libcudnn finds them even
// when that folder is on no search path. cuDNN's runtime-compiled engines (the fused attention
// kernels among them) need NVRTC: when libnvrtc.so.<CUDA major> is not on the search path it
// is looked for beside the cuDNN package (nvidia/*/lib). Anything missing is reported by
// cudnn_api(), never thrown: the caller falls back to its composed path.
#include "cuda/cudnn_loader.hpp"

#if defined(EMBER_HAVE_CUDNN_HEADERS)

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/dynamic_library.hpp"

namespace ember::cuda {
namespace {

constexpr const char* kSoname = "libcudnn.so.9";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Candidate files for libcudnn.so.9, in the order of Note [Finding cuDNN].
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (std::string e = env("EMBER_CUDNN_LIBRARY"); !e.empty()) {
    const bool folder = e.find(".so") == std::string::npos;
    out.push_back(folder ? e + "/" + kSoname : e);
  }
  out.emplace_back(kSoname);
  for (const std::string& p :
       core::python_package_files("/nvidia/cudnn/lib/" + std::string(kSoname)))
    out.push_back(p);
  return out;
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// Opens cuDNN from `path`; null with *why on failure.
void* open_cudnn(const std::string& path, std::string* why) {
  const std::string dir = folder_of(path);
  if (!dir.empty()) {
    for (const char* sub :
         {"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9",
          "libcudnn_engines_runtime_compiled.so.9", "libcudnn_heuristic.so.9", "libcudnn_ops.so.9"})
      dlopen((dir + "/" + sub).c_str(), RTLD_NOW | RTLD_GLOBAL);  // optional: best effort
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char* e = dlerror();
    *why = path + ": " + (e ? e : "cannot open");
  }
  return h;
}

// Makes libnvrtc loadable for cuDNN's runtime-compiled engines (Note [Finding cuDNN]).
void preload_nvrtc(const std::string& cudnn_path) {
  const std::string soname = "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
  if (dlopen(soname.c_str(), RTLD_NOW | RTLD_GLOBAL)) return;
  const std::string nvidia = folder_of(folder_of(folder_of(cudnn_path)));  // …/nvidia
  if (nvidia.empty()) return;
  for (const std::string& p : core::glob_paths(nvidia + "/*/lib/" + soname))
    if (dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL)) return;
}

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* why) {
  return core::resolve_symbol(lib, name, out, why, "cuDNN");
}

using Loaded = core::LoadedLibrary<CudnnApi>;

Loaded load() {
  Loaded r;
  void* lib = nullptr;
  std::string tried;
  for (const std::string& c : candidates()) {
    std::string why;
    lib = open_cudnn(c, &why);
    if (lib) {
      r.api.path = c;
      break;
    }
    if (c.find('/') != std::string::npos || tried.empty())
      tried += (tried.empty() ? "" : "; ") + why;
  }
  if (!lib) {
    r.why = "cuDNN not found (" + tried + "); install nvidia-cudnn-cu" +
            std::to_string(CUDART_VERSION / 1000) + " or set EMBER_CUDNN_LIBRARY to libcudnn.so.9";
    return r;
  }
  CudnnApi& a = r.api;
  if (!resolve(lib, "cudnnGetVersion", &a.get_version, &r.why) ||
      !resolve(lib, "cudnnGetErrorString", &a.get_error_string, &r.why) ||
      !resolve(lib, "cudnnCreate", &a.create, &r.why) ||
      !resolve(lib, "cudnnSetStream", &a.set_stream, &r.why) ||
      !resolve(lib, "cudnnBackendCreateDescriptor", &a.create_descriptor, &r.why) ||
      !resolve(lib, "cudnnBackendDestroyDescriptor", &a.destroy_descriptor, &r.why) ||
      !resolve(lib, "cudnnBackendFinalize", &a.finalize, &r.why) ||
      !resolve(lib, "cudnnBackendSetAttribute", &a.set_attribute, &r.why) ||
      !resolve(lib, "cudnnBackendGetAttribute", &a.get_attribute, &r.why) ||
      !resolve(lib, "cudnnBackendExecute", &a.execute, &r.why))
    return r;
  std::string ignored;
  resolve(lib, "cudnnGetLastErrorString", &a.last_error_string, &ignored);
  a.version = a.get_version();
  if (a.version < 90000) {
    r.why = "cuDNN " + std::to_string(a.version) + " at " + a.path +
            " is older than 9.0 (the fused attention path needs cuDNN 9)";
    return r;
  }
  preload_nvrtc(a.path);
  r.ok = true;
  return r;
}

}  // namespace

const CudnnApi* cudnn_api(std::string* why) { return core::load_once<CudnnApi>(load, why); }

}  // namespace ember::cuda

#endif  // EMBER_HAVE_CUDNN_HEADERS

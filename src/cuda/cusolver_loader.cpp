// src/cuda/cusolver_loader.cpp — finds and opens cuSOLVER and cuBLAS with dlopen
// (cusolver_loader.hpp).
//
// Note [Finding cuSOLVER]
// libcusolver.so.<major> (12 for CUDA 13, 11 for CUDA 12: CUSOLVER_VER_MAJOR of the headers
// ember was built with) is tried in order, the first that opens wins:
//   1. $EMBER_CUSOLVER_LIBRARY: its path, or the folder holding it;
//   2. on the loader's search path (a CUDA toolkit or runtime install, LD_LIBRARY_PATH);
//   3. NVIDIA's pip packages (PyTorch's wheels): …/nvidia/cu<CUDA major>/lib and
//      …/nvidia/cusolver/lib in the Python site-packages folders (core::python_package_files).
// From a package folder, the libraries cuSOLVER itself needs (cuBLAS, cuBLASLt, cuSPARSE,
// nvJitLink) are opened first from the sibling nvidia/*/lib folders with RTLD_GLOBAL, as for
// cuDNN. libcublas.so.<CUDA major> (trsm) comes from the search path or beside cuSOLVER.
// Anything missing is reported by cusolver_api(), never thrown: the decompositions take the
// host route and say why (linalg_fallback_reason()).
#include "cuda/cusolver_loader.hpp"

#if defined(EMBER_HAVE_CUSOLVER_HEADERS)

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/dynamic_library.hpp"

namespace ember::cuda {
namespace {

const std::string kCusolver = "libcusolver.so." + std::to_string(CUSOLVER_VER_MAJOR);
const std::string kCublas = "libcublas.so." + std::to_string(CUDART_VERSION / 1000);

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// Candidate files for libcusolver, in the order of Note [Finding cuSOLVER].
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* e = std::getenv("EMBER_CUSOLVER_LIBRARY"); e && *e) {
    const std::string v(e);
    out.push_back(v.find(".so") == std::string::npos ? v + "/" + kCusolver : v);
  }
  out.push_back(kCusolver);
  const std::string cu = "cu" + std::to_string(CUDART_VERSION / 1000);
  for (const std::string& sub : {cu, std::string("cusolver")})
    for (const std::string& p : core::python_package_files("/nvidia/" + sub + "/lib/" + kCusolver))
      out.push_back(p);
  return out;
}

// Opens `path`; for a file in a package folder, its dependencies first (best effort).
void* open_library(const std::string& path, std::string* why) {
  if (const std::string dir = folder_of(path); !dir.empty()) {
    const std::string nvidia = folder_of(folder_of(dir));  // …/nvidia
    for (const char* dep :
         {"libnvJitLink.so.*", "libcublasLt.so.*", "libcublas.so.*", "libcusparse.so.*"}) {
      for (const std::string& p : core::glob_paths(dir + "/" + dep))
        dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (!nvidia.empty())
        for (const std::string& p : core::glob_paths(nvidia + "/*/lib/" + dep))
          dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char* e = dlerror();
    *why = path + ": " + (e ? e : "cannot open");
  }
  return h;
}

template <typename Fn>
bool resolve(void* lib, const std::string& name, Fn* out, std::string* why, const char* what) {
  return core::resolve_symbol(lib, name.c_str(), out, why, what);
}

// One precision's routines: p is "S" or "D".
template <typename T>
bool resolve_routines(void* solver, void* blas, const std::string& p, CusolverRoutines<T>* r,
                      std::string* why) {
  const std::string d = "cusolverDn" + p;
  return resolve(solver, d + "getrf_bufferSize", &r->getrf_buffer_size, why, "cuSOLVER") &&
         resolve(solver, d + "getrf", &r->getrf, why, "cuSOLVER") &&
         resolve(solver, d + "getrs", &r->getrs, why, "cuSOLVER") &&
         resolve(solver, d + "potrf_bufferSize", &r->potrf_buffer_size, why, "cuSOLVER") &&
         resolve(solver, d + "potrf", &r->potrf, why, "cuSOLVER") &&
         resolve(solver, d + "geqrf_bufferSize", &r->geqrf_buffer_size, why, "cuSOLVER") &&
         resolve(solver, d + "geqrf", &r->geqrf, why, "cuSOLVER") &&
         resolve(solver, d + "orgqr_bufferSize", &r->orgqr_buffer_size, why, "cuSOLVER") &&
         resolve(solver, d + "orgqr", &r->orgqr, why, "cuSOLVER") &&
         resolve(solver, d + "gesvd_bufferSize", &r->gesvd_buffer_size, why, "cuSOLVER") &&
         resolve(solver, d + "gesvd", &r->gesvd, why, "cuSOLVER") &&
         resolve(solver, d + "syevd_bufferSize", &r->syevd_buffer_size, why, "cuSOLVER") &&
         resolve(solver, d + "syevd", &r->syevd, why, "cuSOLVER") &&
         resolve(blas, "cublas" + p + "trsm_v2", &r->trsm, why, "cuBLAS");
}

using Loaded = core::LoadedLibrary<CusolverApi>;

Loaded load() {
  Loaded r;
  void* solver = nullptr;
  std::string tried;
  for (const std::string& c : candidates()) {
    std::string why;
    if ((solver = open_library(c, &why))) {
      r.api.path = c;
      break;
    }
    if (c.find('/') != std::string::npos || tried.empty())
      tried += (tried.empty() ? "" : "; ") + why;
  }
  if (!solver) {
    r.why = "cuSOLVER not found (" + tried + "); install the CUDA toolkit's cuSOLVER or the " +
            "nvidia-cusolver pip package, or set EMBER_CUSOLVER_LIBRARY to " + kCusolver;
    return r;
  }
  // cuBLAS: already loaded beside cuSOLVER (its dependency), else from the search path.
  void* blas = dlopen(kCublas.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!blas) {
    for (const std::string& p : core::glob_paths(folder_of(r.api.path) + "/" + kCublas))
      if ((blas = dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL))) break;
  }
  if (!blas) {
    r.why = "cuBLAS (" + kCublas + ", for the triangular solves) not found beside " + r.api.path;
    return r;
  }
  CusolverApi& a = r.api;
  if (!resolve(solver, "cusolverDnCreate", &a.create, &r.why, "cuSOLVER") ||
      !resolve(solver, "cusolverDnSetStream", &a.set_stream, &r.why, "cuSOLVER") ||
      !resolve(blas, "cublasCreate_v2", &a.blas_create, &r.why, "cuBLAS") ||
      !resolve(blas, "cublasSetStream_v2", &a.blas_set_stream, &r.why, "cuBLAS") ||
      !resolve_routines(solver, blas, "S", &a.f32, &r.why) ||
      !resolve_routines(solver, blas, "D", &a.f64, &r.why))
    return r;
  r.ok = true;
  return r;
}

}  // namespace

const CusolverApi* cusolver_api(std::string* why) {
  return core::load_once<CusolverApi>(load, why);
}

}  // namespace ember::cuda

#endif  // EMBER_HAVE_CUSOLVER_HEADERS

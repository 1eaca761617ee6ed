// src/cpu/onednn_loader.cpp — finds and opens oneDNN 2.x with dlopen (onednn_loader.hpp).
//
// Note [Finding oneDNN]
// With $EMBER_ONEDNN_LIBRARY set (the path of libdnnl.so.2, or the folder holding it) that
// file is the only one tried: it is the user's choice, and a path that does not exist is how
// the im2col path is tested on a machine that has oneDNN. Otherwise libdnnl.so.2 on the
// loader's search path (Debian 12: the libdnnl2 package). The library is opened RTLD_LOCAL:
// its symbols, and those of the OpenMP runtime it brings (libgomp), are looked up through its
// handle only, so nothing else in the process binds to them by accident. Anything missing is
// reported by onednn_api(), never thrown: convolutions then take the im2col path, 16-bit
// GEMMs the widening one.
#include "cpu/onednn_loader.hpp"

#if defined(EMBER_HAVE_ONEDNN_HEADERS)

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "core/dynamic_library.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "ember/error.hpp"

namespace ember::cpu {
namespace {

constexpr const char* kSoname = "libdnnl.so.2";

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* why) {
  return core::resolve_symbol(lib, name, out, why, "oneDNN");
}

using Loaded = core::LoadedLibrary<OnednnApi>;

Loaded load() {
  Loaded r;
  std::string path = kSoname;
  if (const char* e = std::getenv("EMBER_ONEDNN_LIBRARY"); e && *e) {
    path = e;
    if (path.find(".so") == std::string::npos) path += std::string("/") + kSoname;
  }
  // Note [oneDNN's threads are ember's] (conv_onednn.cpp): idle OpenMP threads block rather
  // than spin, unless the user chose. Read by libgomp when it loads (with oneDNN, below).
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT"))
    setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    r.why = "oneDNN not found (" + path + ": " + (e ? e : "cannot open") +
            "); install libdnnl2 (Debian) or set EMBER_ONEDNN_LIBRARY to libdnnl.so.2";
    return r;
  }
  OnednnApi& a = r.api;
  if (!resolve(lib, "dnnl_version", &a.version, &r.why) ||
      !resolve(lib, "dnnl_engine_create", &a.engine_create, &r.why) ||
      !resolve(lib, "dnnl_stream_create", &a.stream_create, &r.why) ||
      !resolve(lib, "dnnl_stream_wait", &a.stream_wait, &r.why) ||
      !resolve(lib, "dnnl_memory_desc_init_by_tag", &a.memory_desc_init_by_tag, &r.why) ||
      !resolve(lib, "dnnl_memory_desc_equal", &a.memory_desc_equal, &r.why) ||
      !resolve(lib, "dnnl_memory_desc_get_size", &a.memory_desc_get_size, &r.why) ||
      !resolve(lib, "dnnl_memory_create", &a.memory_create, &r.why) ||
      !resolve(lib, "dnnl_memory_destroy", &a.memory_destroy, &r.why) ||
      !resolve(lib, "dnnl_dilated_convolution_forward_desc_init", &a.conv_forward_desc_init,
               &r.why) ||
      !resolve(lib, "dnnl_dilated_convolution_backward_data_desc_init",
               &a.conv_backward_data_desc_init, &r.why) ||
      !resolve(lib, "dnnl_dilated_convolution_backward_weights_desc_init",
               &a.conv_backward_weights_desc_init, &r.why) ||
      !resolve(lib, "dnnl_primitive_attr_create", &a.attr_create, &r.why) ||
      !resolve(lib, "dnnl_primitive_attr_destroy", &a.attr_destroy, &r.why) ||
      !resolve(lib, "dnnl_primitive_attr_set_post_ops", &a.attr_set_post_ops, &r.why) ||
      !resolve(lib, "dnnl_primitive_attr_set_scratchpad_mode", &a.attr_set_scratchpad_mode,
               &r.why) ||
      !resolve(lib, "dnnl_post_ops_create", &a.post_ops_create, &r.why) ||
      !resolve(lib, "dnnl_post_ops_destroy", &a.post_ops_destroy, &r.why) ||
      !resolve(lib, "dnnl_post_ops_append_eltwise", &a.post_ops_append_eltwise, &r.why) ||
      !resolve(lib, "dnnl_primitive_desc_create", &a.primitive_desc_create, &r.why) ||
      !resolve(lib, "dnnl_primitive_desc_destroy", &a.primitive_desc_destroy, &r.why) ||
      !resolve(lib, "dnnl_primitive_desc_query", &a.primitive_desc_query, &r.why) ||
      !resolve(lib, "dnnl_primitive_desc_query_md", &a.primitive_desc_query_md, &r.why) ||
      !resolve(lib, "dnnl_reorder_primitive_desc_create", &a.reorder_primitive_desc_create,
               &r.why) ||
      !resolve(lib, "dnnl_primitive_create", &a.primitive_create, &r.why) ||
      !resolve(lib, "dnnl_primitive_destroy", &a.primitive_destroy, &r.why) ||
      !resolve(lib, "dnnl_primitive_execute", &a.primitive_execute, &r.why) ||
      !resolve(lib, "dnnl_get_primitive_cache_capacity", &a.get_primitive_cache_capacity, &r.why) ||
      !resolve(lib, "dnnl_memory_desc_init_by_strides", &a.memory_desc_init_by_strides, &r.why) ||
      !resolve(lib, "dnnl_matmul_desc_init", &a.matmul_desc_init, &r.why) ||
      !resolve(lib, "dnnl_primitive_attr_set_output_scales", &a.attr_set_output_scales, &r.why) ||
      !resolve(lib, "dnnl_post_ops_append_sum", &a.post_ops_append_sum, &r.why))
    return r;
  const dnnl_version_t* v = a.version();
  if (v->major != 2) {
    r.why = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + " at " + path +
            " (ember uses oneDNN 2.x's C API)";
    return r;
  }
  if (v->cpu_runtime == DNNL_RUNTIME_OMP) {
    std::string ignored;
    resolve(lib, "omp_get_max_threads", &a.omp_get_max_threads, &ignored);
    resolve(lib, "omp_set_num_threads", &a.omp_set_num_threads, &ignored);
    if (!a.omp_get_max_threads || !a.omp_set_num_threads) {
      r.why = "oneDNN at " + path + " uses OpenMP but its omp_set_num_threads was not found";
      return r;
    }
  } else if (v->cpu_runtime != DNNL_RUNTIME_SEQ) {
    r.why = "oneDNN at " + path + " uses a threading runtime ember cannot size (only OpenMP " +
            "and sequential builds keep to ember's thread count)";
    return r;
  }
  if (a.engine_create(&a.engine, dnnl_cpu, 0) != dnnl_success) {
    r.why = "oneDNN at " + path + ": dnnl_engine_create failed";
    return r;
  }
  a.version_text = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                   std::to_string(v->patch) + " (" + path + ", " +
                   (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "sequential") + " threads)";
  r.ok = true;
  return r;
}

}  // namespace

const OnednnApi* onednn_api(std::string* why) { return core::load_once<OnednnApi>(load, why); }

std::string onednn_status_name(dnnl_status_t s) {
  switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    default: return "status " + std::to_string(static_cast<int>(s));
  }
}

void onednn_check(dnnl_status_t s, const char* what) {
  if (s != dnnl_success) throw OnednnDeclined{std::string(what) + ": " + onednn_status_name(s)};
}

OnednnMemory::OnednnMemory(const dnnl_memory_desc_t& d, void* data, const char* op) {
  if (onednn().memory_create(&m_, &d, onednn().engine, data) != dnnl_success)
    ember::detail::throw_error(ember::detail::concat(op, " (oneDNN): dnnl_memory_create failed"));
}

dnnl_stream_t onednn_thread_stream() {
  thread_local dnnl_stream_t s = [] {
    dnnl_stream_t st = nullptr;
    if (onednn().stream_create(&st, onednn().engine, dnnl_stream_default_flags) != dnnl_success)
      ember::detail::throw_error("oneDNN: dnnl_stream_create failed");
    return st;
  }();
  return s;
}

void onednn_take_threads() {
  const int threads = num_threads();
  const OnednnApi& a = onednn();
  if (a.omp_set_num_threads && a.omp_get_max_threads() != threads) a.omp_set_num_threads(threads);
  park_workers();
}

void onednn_execute(dnnl_primitive_t prim, const std::vector<dnnl_exec_arg_t>& args, const char* op,
                    const char* what) {
  const dnnl_status_t s = onednn().primitive_execute(prim, onednn_thread_stream(),
                                                     static_cast<int>(args.size()), args.data());
  if (s != dnnl_success)
    ember::detail::throw_error(
        ember::detail::concat(op, " (oneDNN): ", what, " failed: ", onednn_status_name(s)));
}

}  // namespace ember::cpu

#endif  // EMBER_HAVE_ONEDNN_HEADERS

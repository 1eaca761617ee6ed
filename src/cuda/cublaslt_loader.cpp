// src/cuda/cublaslt_loader.cpp — cuBLASLt, loaded on first use.
//
// libcublasLt's static initialisers cost ~0.4 s at every process start (measured: an empty
// program linked against it takes 0.39 s, against cudart alone 6 ms), which every ember
// program paid even when it never multiplied on a GPU. So ember does not link cuBLASLt: the
// few entry points linalg.cpp uses are defined here (hidden, so they never interpose on a real
// cuBLASLt elsewhere in the process) and forward to the library, opened with dlopen the first
// time one of them is called. A missing library is a clear ember::Error at the first GPU GEMM.
#include <dlfcn.h>

#include <string>

#include "ember/error.hpp"

#pragma GCC visibility push(hidden)
#include <cublasLt.h>
#pragma GCC visibility pop

namespace {

void* cublaslt_library() {
  static void* const lib = [] {
    void* h = dlopen("libcublasLt.so." EMBER_CUBLASLT_SOVERSION, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
    return h;
  }();
  if (!lib) {
    const char* why = dlerror();
    ember::detail::throw_error(ember::detail::concat(
        "cuBLASLt: cannot load libcublasLt.so." EMBER_CUBLASLT_SOVERSION " (",
        why ? why : "not found",
        "); install the CUDA toolkit's cuBLAS libraries or add their folder to LD_LIBRARY_PATH"));
  }
  return lib;
}

template <typename Fn>
Fn resolve(const char* name) {
  void* f = dlsym(cublaslt_library(), name);
  EMBER_CHECK(f != nullptr, "cuBLASLt: libcublasLt has no symbol ", name, " (expected CUDA ",
              EMBER_CUBLASLT_SOVERSION, "'s cuBLASLt)");
  return reinterpret_cast<Fn>(f);
}

}  // namespace

// Each entry point: resolved once, then a plain indirect call.
#define EMBER_CUBLASLT_FORWARD(ret, name, params, args)   \
  extern "C" ret name params {                            \
    static const auto fn = resolve<ret(*) params>(#name); \
    return fn args;                                       \
  }

EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
EMBER_CUBLASLT_FORWARD(const char*, cublasLtGetStatusName, (cublasStatus_t status), (status))
EMBER_CUBLASLT_FORWARD(const char*, cublasLtGetStatusString, (cublasStatus_t status), (status))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmul,
                       (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                        const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                        cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                        cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                        const cublasLtMatmulAlgo_t* algo, void* workspace,
                        size_t workspaceSizeInBytes, cudaStream_t stream),
                       (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
                        workspace, workspaceSizeInBytes, stream))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                       (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                        cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                        cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                        cublasLtMatmulPreference_t pref, int requested,
                        cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returned),
                       (handle, desc, Adesc, Bdesc, Cdesc, Ddesc, pref, requested,
                        heuristicResultsArray, returned))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulAlgoConfigGetAttribute,
                       (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                        void* buf, size_t size, size_t* written),
                       (algo, attr, buf, size, written))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescCreate,
                       (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute,
                        cudaDataType_t scale),
                       (desc, compute, scale))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescSetAttribute,
                       (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                        const void* buf, size_t size),
                       (desc, attr, buf, size))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceCreate,
                       (cublasLtMatmulPreference_t * pref), (pref))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceDestroy,
                       (cublasLtMatmulPreference_t pref), (pref))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                       (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                        const void* buf, size_t size),
                       (pref, attr, buf, size))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutCreate,
                       (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows,
                        uint64_t cols, int64_t ld),
                       (layout, type, rows, cols, ld))
EMBER_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
                       (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                        const void* buf, size_t size),
                       (layout, attr, buf, size))

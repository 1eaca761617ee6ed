// src/cuda/lapack.cpp — the decompose slot on CUDA: the documented CPU fallback. The operands
// are copied to host memory, the CPU backend's LAPACK decomposes them, and the results are
// copied back (docs/ops.md says so; cuSOLVER would keep them on the device). Every
// Decomposition goes this way, eigh, lu (its i32 pivots too) and the triangular solves
// included: each operand is copied as its own dtype.
#include <vector>

#include "cuda/common.cuh"

namespace ember::cuda {
namespace {

// A host copy of a device view (empty when the view has no data).
struct HostCopy {
  std::vector<unsigned char> bytes;
  View view;
  HostCopy(const View& v, bool read) : view(v) {
    if (!v.data) return;
    bytes.resize(static_cast<size_t>(v.numel()) * element_size(v.dtype));
    if (read && !bytes.empty()) memcpy_to_host(v.device, bytes.data(), v.data, bytes.size());
    view.data = bytes.data();
  }
  void write_back(const View& device_view) const {
    if (device_view.data && !bytes.empty())
      memcpy_from_host(device_view.device, device_view.data, bytes.data(), bytes.size());
  }
};

}  // namespace

int64_t decompose(Decomposition op, const View& a, const View& b, const View& out0,
                  const View& out1, const View& out2) {
  HostCopy ha(a, true), hb(b, true), h0(out0, false), h1(out1, false), h2(out2, false);
  const int64_t failed =
      backend::cpu_backend().decompose(op, ha.view, hb.view, h0.view, h1.view, h2.view);
  h0.write_back(out0);
  h1.write_back(out1);
  h2.write_back(out2);
  return failed;
}

}  // namespace ember::cuda

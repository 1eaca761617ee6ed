// src/ops/common.cpp — shared op helpers (see common.hpp).
#include "ops/common.hpp"

namespace ember::ops {

backend::View broadcast_view(const Tensor& t, const Shape& shape) {
  backend::View v;
  v.data = t.data_ptr();
  v.dtype = t.dtype();
  v.device = t.device().index;
  v.shape = shape;
  v.strides = Shape::filled(shape.size(), 0);
  const int lead = shape.size() - t.dim();
  EMBER_ASSERT(lead >= 0, "broadcast_view: rank grows");
  for (int i = 0; i < t.dim(); ++i)
    v.strides[lead + i] = (t.shape()[i] == 1 && shape[lead + i] != 1) ? 0 : t.strides()[i];
  return v;
}

void check_defined(const char* op, const Tensor& t, const char* what) {
  EMBER_CHECK(t.defined(), op, ": ", what, " is an undefined tensor (expected a tensor)");
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch (got ", dtype_name(a.dtype()), " and ",
              dtype_name(b.dtype()), ", expected both the same; convert with .to(DType))");
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.device() == b.device(), op, ": tensors on different devices (got ",
              a.device().str(), " and ", b.device().str(),
              ", expected one device; move with .to(Device))");
}

void check_supported(Op op, const Tensor& t, const char* what) {
  const char* name = op_name(op);
  check_defined(name, t, what);
  if (supports_here(op, t)) [[likely]]
    return;
  const DTypeSet here = op_info(op).dtypes(t.device().type);
  const bool low_float = t.dtype() == DType::f16 || t.dtype() == DType::bf16;
  detail::throw_error(detail::concat(
      name, ": unsupported dtype ", dtype_name(t.dtype()), " on ", t.device().str(), " (",
      here == kNoDTypes ? std::string("this backend does not compute it")
                        : "supported there: " + here.to_string(),
      low_float ? "; f16/bf16 are storage types here: convert with .to(DType::f32))"
                : "; convert with .to(DType))"));
}

void check_index_dtype(const char* op, const Tensor& index) {
  EMBER_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op, ": index dtype ",
              dtype_name(index.dtype()), " (expected i64 or i32)");
}

void check_writable(const char* op, const Tensor& t) {
  check_defined(op, t, "the in-place target");
  EMBER_CHECK(!(grad_mode_enabled() && t.requires_grad()), op,
              ": in-place change of a tensor that requires grad while recording the graph (got a ",
              t.is_leaf() ? "leaf" : "non-leaf",
              " that requires grad; expected the change inside a NoGradGuard, or on a detach()ed "
              "tensor)");
  // A stride-0 dim of size > 1 (expand, broadcast_to) makes several elements one memory
  // location: a write would accumulate into it (PyTorch refuses the same way).
  for (int d = 0; d < t.dim(); ++d)
    EMBER_CHECK(
        t.strides()[d] != 0 || t.shape()[d] <= 1, op,
        ": the in-place target is an expanded view (shape ", t.shape().to_string(), ", strides ",
        t.strides().to_string(), "): more than one of its elements refers to ",
        "a single memory location (expected a tensor with its own elements; clone() it first)");
}

void check_inplace(const char* op, const Tensor& t) {
  check_writable(op, t);
  detail::StorageAccess::bump_version(*t.storage());
}

Shape reduced_shape(const Shape& in, const Shape& dims, const char* op) {
  Shape out = in;
  if (dims.empty()) {
    for (int i = 0; i < out.size(); ++i) out[i] = 1;
    return out;
  }
  for (int64_t d : dims) out[wrap_dim(d, in.size(), op)] = 1;
  return out;
}

Shape squeeze_dims(const Shape& keep, const Shape& in, const Shape& dims) {
  bool drop[kMaxRank] = {};
  if (dims.empty()) {
    for (int i = 0; i < in.size(); ++i) drop[i] = true;
  } else {
    for (int64_t d : dims) drop[d < 0 ? d + in.size() : d] = true;
  }
  Shape out;
  for (int i = 0; i < keep.size(); ++i)
    if (!drop[i]) out.push_back(keep[i]);
  return out;
}

}  // namespace ember::ops

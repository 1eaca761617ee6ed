// src/ops/common.cpp — shared op helpers (see common.hpp).
#include "ops/common.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "ember/runtime.hpp"

namespace ember {

namespace {
// The op whose kernels the next check covers, and the op the user called around it.
thread_local const char* t_last_op = nullptr;
thread_local std::string t_last_user_op;

// Note [Synchronous device errors]: with set_sync_errors(true) each op entry waits for the
// device, so a deferred error (Note [Deferred device errors] in src/cuda/device_error.cuh)
// surfaces before the next op and is attributed to the op that ran last on this thread.
void check_previous_op(Op op, Device device) {
  try {
    synchronize(device);
  } catch (const Error& e) {
    const std::string by = t_last_op == nullptr ? std::string("an earlier op")
                           : t_last_user_op.empty() || t_last_user_op == t_last_op
                               ? std::string(t_last_op)
                               : std::string(t_last_op) + " (inside " + t_last_user_op + ")";
    throw Error(detail::concat(e.what(), " [raised by the kernels of ", by, "; found before ",
                               op_name(op), " by EMBER_CUDA_SYNC_ERRORS]"));
  }
  t_last_op = op_name(op);
  const char* user = detail::current_error_scope_op();
  t_last_user_op = user ? user : "";
}
}  // namespace

}  // namespace ember

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

namespace {
// "[3, 4] f32" for a tensor, "undefined" for an empty handle.
std::string tensor_summary(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return t.shape().to_string() + " " + std::string(dtype_name(t.dtype())) +
         (t.device().is_cpu() ? "" : " on " + t.device().str());
}
}  // namespace

UserOp::UserOp(Op op, std::initializer_list<const Tensor*> inputs) noexcept
    : UserOp(op_name(op), inputs) {}

namespace {
// The device of the first defined input (-1 when none), for the profiler.
int first_device(std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (t && t->defined()) return t->device().index;
  return -1;
}
int first_device(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined()) return t.device().index;
  return -1;
}
}  // namespace

UserOp::UserOp(const char* op, std::initializer_list<const Tensor*> inputs) noexcept
    : ErrorScope(op),
      profile_(ProfileKind::op, op, detail::profiling() ? first_device(inputs) : -1) {
  for (const Tensor* t : inputs)
    if (count_ < kMaxInputs) inputs_[count_++] = t;
}

UserOp::UserOp(Op op, const std::vector<Tensor>& inputs) noexcept
    : ErrorScope(op_name(op)),
      list_(&inputs),
      profile_(ProfileKind::op, op_name(op), detail::profiling() ? first_device(inputs) : -1) {}

std::string UserOp::describe() const {
  const size_t n = list_ ? list_->size() : count_;
  std::string out = n == 1 ? "input " : "inputs ";
  for (size_t i = 0; i < n; ++i)
    out += (i ? ", " : "") + tensor_summary(list_ ? (*list_)[i] : *inputs_[i]);
  return out;
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
  check_defined(op_name(op), t, what);
  check_supported(op, t.dtype(), t.device());
}

void check_supported(Op op, DType dtype, Device device) {
  if (device.is_cuda() && sync_errors()) [[unlikely]]
    check_previous_op(op, device);
  if (supports(op, dtype, device)) [[likely]]
    return;
  const char* name = op_name(op);
  const DTypeSet here = op_info(op).dtypes(device.type);
  const bool low_float = dtype == DType::f16 || dtype == DType::bf16;
  detail::throw_error(detail::concat(
      name, ": unsupported dtype ", dtype_name(dtype), " on ", device.str(), " (",
      here == kNoDTypes ? std::string("this backend does not compute it")
                        : "supported there: " + here.to_string(),
      low_float ? "; compute it in f32: .to(DType::f32), or an AutocastGuard, which runs it in f32)"
                : "; convert with .to(DType))"));
}

// Note [Type promotion]
// ember promotes operands of different dtypes as torch.result_type does. Dtypes fall in three
// categories, bool < integer < float. Two dtypes combine with promote_types: the higher
// category wins; within integers the wider (u8 < i32 < i64); within floats f64 over f32 over
// the 16-bit types, and f16 with bf16 gives f32. Operands are then split into dimensioned
// tensors (dim() > 0) and 0-d ones. The dimensioned ones decide, unless the 0-d ones reach a
// higher category: i32 tensor + 0-d f64 is f64, but f32 tensor + 0-d f64 stays f32 and
// i32 tensor + 0-d i64 stays i32 (a 0-d tensor behaves like a scalar). With only 0-d operands
// they combine as dimensioned ones do. (PyTorch's "wrapped numbers", C++ doubles here, are
// the scalar overloads: add(x, 2.0) keeps x's dtype, see elementwise.cpp.)

namespace {
int category(DType t) { return t == DType::boolean ? 0 : is_floating(t) ? 2 : 1; }
int int_rank(DType t) { return t == DType::u8 ? 0 : t == DType::i32 ? 1 : 2; }
}  // namespace

}  // namespace ember::ops

namespace ember {

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const int ca = ops::category(a), cb = ops::category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) return ops::int_rank(a) > ops::int_rank(b) ? a : b;
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32;  // f32 with a 16-bit float, or f16 with bf16
}

DType result_type(const Tensor& a, const Tensor& b) { return ops::result_type({&a, &b}); }

}  // namespace ember

namespace ember::ops {

DType result_type(std::initializer_list<const Tensor*> tensors) {
  std::optional<DType> dimensioned, zero_dim;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    std::optional<DType>& r = t->dim() > 0 ? dimensioned : zero_dim;
    r = r ? promote_types(*r, t->dtype()) : t->dtype();
  }
  EMBER_ASSERT(dimensioned || zero_dim, "result_type: no defined tensor");
  if (!dimensioned) return *zero_dim;
  if (!zero_dim || category(*zero_dim) <= category(*dimensioned)) return *dimensioned;
  return promote_types(*dimensioned, *zero_dim);
}

std::pair<Tensor, Tensor> promote(Op op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_defined(name, a, "first input");
  check_defined(name, b, "second input");
  check_same_device(name, a, b);
  const DType dtype = a.dtype() == b.dtype() ? a.dtype() : result_type({&a, &b});
  check_supported(op, dtype, a.device());
  return {cast_to(a, dtype), cast_to(b, dtype)};
}

void check_index_dtype(const char* op, const Tensor& index) {
  EMBER_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op, ": index dtype ",
              dtype_name(index.dtype()), " (expected i64 or i32)");
}

void check_scalar_fits(const char* op, double value, DType dtype) {
  if (is_floating(dtype) || dtype == DType::boolean) return;
  double lo = 0.0, hi = 0.0;  // the exact range; every bound is a double
  switch (dtype) {
    case DType::i32: lo = -2147483648.0, hi = 2147483647.0; break;
    case DType::u8: lo = 0.0, hi = 255.0; break;
    default: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;  // i64: < 2^63
  }
  // Truncated toward zero first (full(-2.7) of an i64 is -2, as PyTorch).
  const double t = std::trunc(value);
  const bool fits = !std::isnan(value) && t >= lo && (dtype == DType::i64 ? t < hi : t <= hi);
  EMBER_CHECK(fits, op, ": value ", value, " cannot be converted to ", dtype_name(dtype),
              " without overflow (expected a finite value in [", lo, ", ", hi, "])");
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
  for (int64_t d : dims) {
    const int w = wrap_dim(d, in.size(), op);  // a 0-d input takes dim 0 or -1: itself
    if (in.size() > 0) out[w] = 1;
  }
  return out;
}

Shape squeeze_dims(const Shape& keep, const Shape& in, const Shape& dims) {
  if (in.size() == 0) return keep;  // a 0-d input reduces to itself
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

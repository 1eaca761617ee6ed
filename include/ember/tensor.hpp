// ember/tensor.hpp — the Tensor handle (ARCHITECTURE §2).
//
// A Tensor is a cheap, shared handle to a TensorImpl: storage, element offset, shape,
// strides (in elements), dtype, autograd state. Copying a Tensor copies the handle; views
// (reshape, transpose, slice, expand, ...) share storage with their base.
//
//   Tensor x = randn({4, 3}, {.requires_grad = true});
//   Tensor y = (x * 2.0f).sum();
//   y.backward();               // x.grad() is now all 2s
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "ember/device.hpp"
#include "ember/dtype.hpp"
#include "ember/error.hpp"
#include "ember/memory.hpp"
#include "ember/shape.hpp"
#include "ember/storage.hpp"

namespace ember {

namespace autograd {
struct Node;
}

struct TensorImpl;
class Tensor;
namespace detail {
struct TensorAccess;
}

/// How a 4-d or 5-d tensor's elements lie in memory (torch.memory_format). `contiguous`:
/// row-major over the logical [N, C, H, W] (NCHW); `channels_last`: [N, C, H, W] with the
/// channels innermost (NHWC in memory, strides [H·W·C, 1, W·C, C]); `channels_last_3d`: the same
/// for [N, C, D, H, W] (NDHWC); `preserve` (for clone and to): keep the input's format. The
/// logical shape and indexing never change, only the strides (docs/tensors.md, "Memory format").
enum class MemoryFormat { contiguous, preserve, channels_last, channels_last_3d };

/// Options for factories. Example: zeros({2, 3}, {.dtype = DType::f64});
struct TensorOptions {
  std::optional<DType> dtype = std::nullopt;    // default_dtype() when unset (from_vector: T's)
  std::optional<Device> device = std::nullopt;  // default_device() when unset
  bool requires_grad = false;
};

class Tensor {
 public:
  Tensor() = default;

  bool defined() const { return impl_ != nullptr; }
  /// True when both handles refer to the same tensor (PyTorch's Tensor::is_same); views of
  /// one storage are different tensors. Two empty handles are the same.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  /// Deprecated (internals: writing them breaks autograd's and the pools' invariants); compare
  /// handles with is_same().
  [[deprecated("internal; compare handles with is_same()")]] TensorImpl* impl() const {
    return impl_.get();
  }
  [[deprecated("internal; compare handles with is_same()")]] const std::shared_ptr<TensorImpl>&
  impl_ptr() const {
    return impl_;
  }
  [[deprecated("internal; tensors come from factories and ops")]] explicit Tensor(
      std::shared_ptr<TensorImpl> impl)
      : impl_(std::move(impl)) {}

  // ---- metadata ----
  const Shape& shape() const;
  const Shape& strides() const;
  int dim() const;
  /// Size of dimension `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  int64_t offset() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  /// Whether the strides are `format`'s for this shape (dims of size 1 may have any stride);
  /// channels_last needs 4 dims and channels_last_3d 5 (others: false). preserve is refused.
  bool is_contiguous(MemoryFormat format) const;
  /// channels_last (or channels_last_3d) when the strides are that format's and not plain
  /// row-major, else contiguous: the format ops give their outputs (torch's
  /// suggest_memory_format).
  MemoryFormat suggest_memory_format() const;
  /// Address of the first element (storage data + offset).
  void* data_ptr() const;
  template <typename T>
  T* data() const;
  const std::shared_ptr<Storage>& storage() const;
  /// Version counter shared with every view of the same storage.
  uint64_t version() const;

  // ---- views (share storage) ----
  Tensor view(const Shape& shape) const;
  /// A view when the strides allow it, otherwise a contiguous copy. One -1 is inferred.
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  /// Transpose of a matrix (rank 2); swaps the last two dims for higher ranks.
  Tensor t() const;
  Tensor permute(const Shape& dims) const;
  /// Elements start, start+step, ... < end along `dim`; negative start/end count from the end.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor broadcast_to(const Shape& shape) const { return expand(shape); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  /// This tensor when its strides already are `format`'s (is_contiguous(format)), else a copy
  /// in it (differentiable). Example: x.contiguous(MemoryFormat::channels_last).
  Tensor contiguous(MemoryFormat format) const;

  // ---- conversion and copies ----
  /// Dtype and device conversions keep a channels_last tensor channels_last.
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  /// This tensor when suggest_memory_format() is `format`, else a copy with exactly
  /// `format`'s strides (torch's x.to(memory_format=...); differentiable).
  Tensor to(MemoryFormat format) const;
  /// A copy; by default channels_last stays channels_last and anything else comes back
  /// contiguous (torch keeps any dense strides; ember keeps the memory formats only).
  Tensor clone(MemoryFormat format = MemoryFormat::preserve) const;
  template <typename T>
  std::vector<T> to_vector() const;
  template <typename T>
  T item() const;
  std::string to_string() const;

  // ---- autograd ----
  bool requires_grad() const;
  /// Marks a leaf as requiring grad. Throws for a non-leaf or a non-float tensor.
  Tensor& requires_grad_(bool on = true);
  /// Accumulated gradient (undefined before the first backward).
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  /// Drops the accumulated gradient (set_to_none) or zeroes it in place.
  void zero_grad(bool set_to_none = true) const;
  bool is_leaf() const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  /// Runs backward from this tensor. Scalar: `grad` may be omitted (taken as 1).
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  /// Same storage, cut from the graph.
  Tensor detach() const;

  // ---- in-place (not differentiable; refused on tensors that need grad while recording) ----
  /// Copies `src` (broadcast, cast) into this tensor's buffer: the data pointer is kept.
  Tensor& copy_(const Tensor& src);
  /// Writes `src` into this tensor's buffer. Shapes must match exactly (error names both).
  Tensor& assign_(const Tensor& src);
  /// Makes this handle use `src`'s storage, strides and dtype (same shape; every copy of the
  /// handle sees the change), keeping requires_grad, .grad and the graph node: how Module::to
  /// moves a parameter to another device or dtype in place. Not differentiable.
  void set_data_(const Tensor& src);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(const Tensor& other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double value);
  Tensor& add_(double value);
  Tensor& div_(const Tensor& other);
  Tensor& clamp_(double lo, double hi);

  // ---- common ops as methods (see ops.hpp) ----
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor pow(double exponent) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

 private:
  /// The impl behind a defined handle; an empty handle throws ember::Error naming `member`.
  TensorImpl& checked(const char* member) const {
    if (!impl_) [[unlikely]]
      throw_undefined(member);
    return *impl_;
  }
  [[noreturn]] static void throw_undefined(const char* member);

  friend struct detail::TensorAccess;
  struct Internal {};
  Tensor(std::shared_ptr<TensorImpl> impl, Internal) : impl_(std::move(impl)) {}

  std::shared_ptr<TensorImpl> impl_;
};

namespace detail {
/// ember's own access to a handle's state (src/ only, not API).
struct TensorAccess {
  static TensorImpl* impl(const Tensor& t) { return t.impl_.get(); }
  static const std::shared_ptr<TensorImpl>& impl_ptr(const Tensor& t) { return t.impl_; }
  static Tensor wrap(std::shared_ptr<TensorImpl> impl) {
    return Tensor(std::move(impl), Tensor::Internal{});
  }
};
}  // namespace detail

/// The state behind a Tensor handle (internal: defined here for the inline accessors below).
/// Kernels never see it; ops and autograd reach it through detail::TensorAccess.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::f32;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;         // set on non-leaves made while recording
  std::weak_ptr<autograd::Node> grad_accumulator;  // cached for leaves that require grad
  // The same values rounded to a 16-bit dtype, written by the op that made this tensor beside
  // it; valid while the storage's version is low_copy_version (Note [A lower-precision copy
  // beside a tensor] in src/ops/autocast.cpp).
  std::shared_ptr<TensorImpl> low_copy;
  uint64_t low_copy_version = 0;
};

// Every accessor of an empty handle (Tensor t; a moved-from tensor) throws ember::Error
// naming the member; requires_grad() alone answers false, as PyTorch's undefined tensor does.
inline const Shape& Tensor::shape() const { return checked("shape").shape; }
inline const Shape& Tensor::strides() const { return checked("strides").strides; }
inline int Tensor::dim() const { return checked("dim").shape.size(); }
inline int64_t Tensor::numel() const { return checked("numel").shape.numel(); }
inline int64_t Tensor::offset() const { return checked("offset").offset; }
inline DType Tensor::dtype() const { return checked("dtype").dtype; }
inline Device Tensor::device() const { return checked("device").storage->device(); }
inline const std::shared_ptr<Storage>& Tensor::storage() const {
  return checked("storage").storage;
}
inline uint64_t Tensor::version() const { return checked("version").storage->version(); }
inline bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
inline void* Tensor::data_ptr() const {
  const TensorImpl& impl = checked("data_ptr");
  return static_cast<char*>(impl.storage->data()) +
         impl.offset * static_cast<int64_t>(element_size(impl.dtype));
}
template <typename T>
T* Tensor::data() const {
  EMBER_CHECK(dtype_of<T>() == dtype(), "data<T>: dtype mismatch (got ", dtype_name(dtype()),
              ", expected ", dtype_name(dtype_of<T>()), ")");
  return static_cast<T*>(data_ptr());
}

std::ostream& operator<<(std::ostream& out, const Tensor& t);

// ---- factories ----
/// The dtype factories (empty, zeros, ones, full, arange, linspace, scalar_tensor) use when
/// no dtype is given: f32 until set_default_dtype changes it, process-wide.
DType default_dtype();
/// Sets default_dtype() and returns the previous one (as torch.set_default_dtype, only
/// floating dtypes: f32, f64, f16, bf16; others throw). Example:
///   DType old = set_default_dtype(DType::f64);  ...  set_default_dtype(old);
DType set_default_dtype(DType dtype);
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
/// start, start+step, ... < end. Example: arange(0, 5) -> [0, 1, 2, 3, 4].
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor arange(double end, TensorOptions options = {});
/// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
/// Uniform in [low, high).
Tensor rand(const Shape& shape, TensorOptions options = {}, double low = 0.0, double high = 1.0);
/// Normal with the given mean and standard deviation.
Tensor randn(const Shape& shape, TensorOptions options = {}, double mean = 0.0, double std = 1.0);
/// Integers uniform in [low, high); dtype defaults to i64.
Tensor randint(int64_t low, int64_t high, const Shape& shape,
               TensorOptions options = {.dtype = DType::i64});
/// A tensor holding `values` with `shape` (numel must match). DType from T unless given.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options = {});
Tensor tensor(std::initializer_list<float> values, const Shape& shape = {},
              TensorOptions options = {});
/// A 0-d tensor.
Tensor scalar_tensor(double value, TensorOptions options = {});
/// A trainable parameter: a copy of `init` in the Persistent pool with requires_grad set.
/// Example: Tensor w = parameter(randn({256, 784}) * 0.05);
Tensor parameter(const Tensor& init);
/// The same; a tensor nothing else holds (a temporary: an initialiser's result) becomes the
/// parameter itself, its block counted in the Persistent pool, with no copy.
Tensor parameter(Tensor&& init);

/// Seeds ember's global generator: every random factory and dropout are reproducible.
void manual_seed(uint64_t seed);

// ---- operators (see ops.hpp for the full set) ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

}  // namespace ember

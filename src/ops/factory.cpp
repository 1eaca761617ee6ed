// src/ops/factory.cpp — tensor factories and the parameter factory (random factories:
// src/ops/random.cpp).
#include <atomic>
#include <cmath>
#include <mutex>

#include "ember/random.hpp"
#include "ops/common.hpp"

namespace ember {

using ops::device_or_default;
using ops::dtype_or_default;
using ops::finish;

// ---- the default dtype (torch.set_default_dtype) ----

namespace {
std::atomic<DType> g_default_dtype{DType::f32};
}  // namespace

DType default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }

DType set_default_dtype(DType dtype) {
  EMBER_CHECK(
      dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16,
      "set_default_dtype: dtype ", dtype_name(dtype),
      " is not a floating dtype (expected f32, f64, f16 or bf16)");
  return g_default_dtype.exchange(dtype, std::memory_order_relaxed);
}

Tensor empty(const Shape& shape, TensorOptions o) {
  return finish(ops::make_tensor(shape, dtype_or_default(o), device_or_default(o)), o);
}

Tensor full(const Shape& shape, double value, TensorOptions o) {
  ops::check_scalar_fits("full", value, dtype_or_default(o));
  Tensor t = ops::make_tensor(shape, dtype_or_default(o), device_or_default(o));
  ops::backend_of(t).fill(ops::view_of(t), value);
  return finish(t, o);
}
Tensor zeros(const Shape& shape, TensorOptions o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return full(shape, 1.0, o); }

static TensorOptions like(const Tensor& t) { return {.dtype = t.dtype(), .device = t.device()}; }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), like(t)); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), like(t)); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, like(t)); }

Tensor arange(double start, double end, double step, TensorOptions o) {
  EMBER_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange: start ",
              start, ", end ", end, ", step ", step, " (expected finite values)");
  EMBER_CHECK(step != 0.0, "arange: step is 0 (expected a non-zero step)");
  EMBER_CHECK((end - start) / step >= 0.0, "arange: the range [", start, ", ", end,
              ") is empty or has the wrong direction for step ", step);
  const int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  // One kernel on either device (no host buffer copied: it runs inside a captured step).
  Tensor t = ops::make_tensor({n}, dtype_or_default(o), device_or_default(o));
  ops::backend_of(t).arange(ops::view_of(t), start, step);
  return finish(t, o);
}
Tensor arange(double end, TensorOptions o) { return arange(0.0, end, 1.0, o); }

Tensor linspace(double start, double end, int64_t steps, TensorOptions o) {
  EMBER_CHECK(steps >= 0, "linspace: steps is ", steps, " (expected >= 0)");
  std::vector<double> v(static_cast<size_t>(steps));
  const double d = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  for (int64_t i = 0; i < steps; ++i)
    v[i] = (i == steps - 1 && steps > 1) ? end : start + d * static_cast<double>(i);
  if (!o.dtype) o.dtype = default_dtype();
  return from_vector(v, {steps}, o);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions o) {
  EMBER_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: ", values.size(),
              " values do not fill shape ", shape.to_string(), " (expected ", shape.numel(), ")");
  Device dev = device_or_default(o);
  const DType src = dtype_of<T>();
  Tensor host = ops::make_tensor(shape, src, Device::cpu());
  if (!values.empty()) {
    if constexpr (std::is_same_v<T, bool>) {
      auto* p = static_cast<uint8_t*>(host.data_ptr());
      for (size_t i = 0; i < values.size(); ++i) p[i] = values[i] ? 1 : 0;
    } else {
      std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(T));
    }
  }
  Tensor t = host;
  if (o.dtype && *o.dtype != src) t = t.to(*o.dtype);
  if (dev != Device::cpu()) t = t.to(dev);
  return finish(t, o);
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, TensorOptions);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const Shape&, TensorOptions);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, TensorOptions);
template Tensor from_vector<Half>(const std::vector<Half>&, const Shape&, TensorOptions);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&, TensorOptions);

Tensor tensor(std::initializer_list<float> values, const Shape& shape, TensorOptions o) {
  std::vector<float> v(values);
  Shape s = shape.empty() ? Shape{static_cast<int64_t>(v.size())} : shape;
  if (!o.dtype) o.dtype = default_dtype();  // torch.tensor([1.0]): the default dtype
  for (float value : v) ops::check_scalar_fits("tensor", value, *o.dtype);
  return from_vector(v, s, o);
}

Tensor scalar_tensor(double value, TensorOptions o) { return full(Shape{}, value, o); }

Tensor parameter(const Tensor& init) {
  ops::check_defined("parameter", init);
  EMBER_CHECK(is_floating(init.dtype()), "parameter: dtype ", dtype_name(init.dtype()),
              " cannot require grad (expected a floating dtype)");
  Tensor p;
  {
    PoolGuard pool(Pool::Persistent);
    p = ops::make_tensor(init.shape(), init.dtype(), init.device());
  }
  {
    NoGradGuard no_grad;
    p.copy_(init);
  }
  p.requires_grad_(true);
  return p;
}

Tensor parameter(Tensor&& init) {
  // Adopted only when the result could not be told apart from a copy: nothing else holds the
  // handle or the storage, a plain leaf exactly covering an owned storage.
  const bool adopt =
      init.defined() && is_floating(init.dtype()) &&
      detail::TensorAccess::impl_ptr(init).use_count() == 1 && init.storage().use_count() == 1 &&
      !init.requires_grad() && init.is_leaf() && init.is_contiguous() && init.offset() == 0 &&
      init.storage()->bytes() == static_cast<size_t>(init.numel()) * element_size(init.dtype()) &&
      detail::StorageAccess::owned(*init.storage());
  if (!adopt) return parameter(static_cast<const Tensor&>(init));
  detail::StorageAccess::recharge(*init.storage(), Pool::Persistent);
  Tensor p = std::move(init);
  p.requires_grad_(true);
  return p;
}

}  // namespace ember

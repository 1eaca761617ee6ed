// src/autograd/tensor.cpp — the Tensor members that belong to autograd: requires_grad_,
// the accumulated gradient, the graph node, backward.
#include "ember/tensor.hpp"

#include "autograd/node.hpp"
#include "core/checks.hpp"
#include "ember/ops.hpp"

namespace ember {

Tensor& Tensor::requires_grad_(bool on) {
  core::check_defined("requires_grad_", *this, "tensor");
  EMBER_CHECK(!on || is_floating(dtype()), "requires_grad_: dtype ", dtype_name(dtype()),
              " cannot require grad (expected a floating dtype)");
  EMBER_CHECK(is_leaf(),
              "requires_grad_: only leaves can change requires_grad (got a tensor made by '",
              impl_->grad_fn->name, "'; use detach() first)");
  impl_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  const TensorImpl& impl = checked("grad");
  return impl.grad ? detail::TensorAccess::wrap(impl.grad) : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  checked("set_grad");
  if (g.defined())
    EMBER_CHECK(g.shape() == shape(), "set_grad: gradient shape ", g.shape().to_string(),
                " does not match the tensor's shape ", shape().to_string());
  impl_->grad = detail::TensorAccess::impl_ptr(g);
}

void Tensor::zero_grad(bool set_to_none) const {
  if (!checked("zero_grad").grad) return;
  if (set_to_none) {
    impl_->grad.reset();
  } else {
    NoGradGuard g;
    detail::TensorAccess::wrap(impl_->grad).zero_();
  }
}

bool Tensor::is_leaf() const { return checked("is_leaf").grad_fn == nullptr; }
std::shared_ptr<autograd::Node> Tensor::grad_fn() const { return checked("grad_fn").grad_fn; }

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  core::check_defined("backward", *this, "tensor");
  autograd::run_backward({*this}, {grad}, retain_graph, {});
}

}  // namespace ember

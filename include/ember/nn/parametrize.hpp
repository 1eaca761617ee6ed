// ember/nn/parametrize.hpp — parametrizations (torch.nn.utils.parametrize and
// torch.nn.utils.parametrizations): a module's parameter replaced by a function of other
// tensors, recomputed at every forward, so an optimizer trains the originals.
//
//   nn::Linear fc(64, 32);
//   nn::utils::parametrizations::weight_norm(fc);       // weight = g · v / ‖v‖ (per row)
//   fc->state_dict();   // "bias", "parametrizations.weight.original0" (g), "...original1" (v)
//   nn::utils::parametrizations::spectral_norm(critic_layer);   // weight / σ_max (GANs)
//
// A parametrized name leaves the module's parameters; a child "parametrizations" (a
// ModuleDict, as PyTorch's) holds, per name, the originals and the chain of parametrizations,
// with PyTorch's state-dict names, so checkpoints load in both directions. The module
// recomputes the value at the start of each forward (however it is called) and computes
// with it; `module->param("weight")` recomputes it too. Linear, Bilinear, Embedding and the
// convolutions (Conv1d/2d/3d, ConvTranspose1d/2d) can be parametrized; other modules are
// refused by name (a custom module overrides ModuleImpl::rebind_parameter and calls
// refresh_parametrizations() first in its forward). config() records the parametrizations,
// so nn::build and io::load_model rebuild them (a custom parametrization registers its type
// with nn::register_module_type). Guide: docs/modules.md, "Parametrizations".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/nn/module.hpp"

namespace ember::nn {

/// Base of a parametrization: a module that maps the originals to the value. The common case
/// overrides forward(original) (one original); one that keeps several originals (weight_norm:
/// g and v) overrides compute() and right_inverse(). Any Module whose forward maps a tensor to
/// a tensor of the same shape may be registered too (then right_inverse is the identity).
class ParametrizationImpl : public ModuleImpl {
 public:
  /// The value from the originals: forward(originals[0]) unless overridden.
  virtual Tensor compute(const std::vector<Tensor>& originals);
  /// The originals that give `value` (used once, at registration, for the first
  /// parametrization of a name): {value} unless overridden.
  virtual std::vector<Tensor> right_inverse(const Tensor& value) { return {value}; }
  /// A parametrization with several originals needs no one-input forward: this default throws.
  Tensor forward(const Tensor& original) override;
};

/// torch.nn.utils.parametrizations.weight_norm's parametrization: weight = g · v / ‖v‖, the
/// norm over every dim but `dim` (all dims when dim is nullopt). Originals: g (original0, the
/// norms, shaped to broadcast) and v (original1, the direction).
class WeightNormImpl : public ParametrizationImpl {
 public:
  explicit WeightNormImpl(std::optional<int64_t> dim = 0) : dim_(dim) {}
  Tensor compute(const std::vector<Tensor>& originals) override;
  std::vector<Tensor> right_inverse(const Tensor& value) override;
  std::string type_name() const override { return "_WeightNorm"; }
  json options() const override;
  std::optional<int64_t> dim() const { return dim_; }

 private:
  std::optional<int64_t> dim_;
};

/// torch.nn.utils.parametrizations.spectral_norm's parametrization: weight / σ, σ the largest
/// singular value of the weight as a matrix (`dim` first, the rest flattened), estimated by
/// power iteration with the buffers _u and _v: n_power_iterations steps at each forward in
/// training mode (none in eval mode), 15 at registration. A 1-D weight is normalized instead.
class SpectralNormImpl : public ParametrizationImpl {
 public:
  SpectralNormImpl(const Tensor& weight, int64_t n_power_iterations = 1, int64_t dim = 0,
                   double eps = 1e-12);
  Tensor forward(const Tensor& weight) override;
  std::string type_name() const override { return "_SpectralNorm"; }
  json options() const override;

 private:
  void power_method(const Tensor& weight_mat, int64_t iterations);
  Tensor as_matrix(const Tensor& weight) const;
  int64_t n_power_iterations_, dim_;
  double eps_;
  Shape weight_shape_;
};

/// torch.nn.utils.parametrizations.orthogonal's parametrization, with its trivialization: the
/// weight (as [.., n, k] matrices, transposed when n < k) is base · Q(original), base the
/// weight's orthogonalised value at registration (buffer "base") and Q the map of the
/// original: "matrix_exp" (exp of the skew part of its lower triangle), "cayley"
/// ((I - A/2)⁻¹(I + A/2)) or "householder" (the product of its Householder reflectors). The
/// original starts as -I, where every map gives I, so the value starts orthogonal.
class OrthogonalImpl : public ParametrizationImpl {
 public:
  explicit OrthogonalImpl(std::string orthogonal_map) : map_(std::move(orthogonal_map)) {}
  Tensor forward(const Tensor& original) override;
  std::vector<Tensor> right_inverse(const Tensor& value) override;
  std::string type_name() const override { return "_Orthogonal"; }
  json options() const override { return {{"orthogonal_map", map_}}; }

 private:
  std::string map_;
  bool has_base_ = false;
};

namespace utils::parametrize {

/// Replaces `module`'s parameter `name` by `parametrization`(originals), as
/// torch.nn.utils.parametrize.register_parametrization: the first parametrization of a name
/// makes its originals from the parameter's current value (right_inverse), so the value is
/// unchanged; a second one chains after the first. The parametrization is moved to the
/// parameter's device and dtype. Refused (ember::Error, nothing changed): an empty handle, a
/// name that is not a parameter of `module`, a module that cannot rebind it, a
/// parametrization whose value differs in shape or dtype from the parameter's (unless
/// `unsafe`).
void register_parametrization(const Module& module, const std::string& name,
                              const Module& parametrization, bool unsafe = false);

/// Undoes the parametrizations of `name`: the parameter comes back as a plain leaf holding the
/// current value (leave_parametrized) or the original (which must be a single tensor of the
/// value's shape). Refused when `name` is not parametrized.
void remove_parametrizations(const Module& module, const std::string& name,
                             bool leave_parametrized = true);

/// Whether `module` has a parametrized name (any, or `name` when given).
bool is_parametrized(const Module& module, const std::string& name = "");

}  // namespace utils::parametrize

namespace utils::parametrizations {

/// torch.nn.utils.parametrizations.weight_norm: parametrizes `name` as g · v / ‖v‖ (norm over
/// every dim but `dim`; over all when dim is nullopt). Returns the module.
///   nn::utils::parametrizations::weight_norm(conv);           // g: [out, 1, 1]
Module weight_norm(const Module& module, const std::string& name = "weight",
                   std::optional<int64_t> dim = 0);

/// torch.nn.utils.parametrizations.spectral_norm: parametrizes `name` as weight / σ_max
/// (power iteration; `dim` defaults to 1 for ConvTranspose, 0 otherwise). Returns the module.
///   nn::utils::parametrizations::spectral_norm(fc);
Module spectral_norm(const Module& module, const std::string& name = "weight",
                     int64_t n_power_iterations = 1, double eps = 1e-12,
                     std::optional<int64_t> dim = std::nullopt);

/// torch.nn.utils.parametrizations.orthogonal: keeps `name` an orthogonal matrix (orthonormal
/// columns or rows) while training its original freely. orthogonal_map: "matrix_exp",
/// "cayley" or "householder"; by default matrix_exp for a square weight, householder otherwise
/// (as PyTorch). The weight is made orthogonal at registration (QR, R's diagonal positive;
/// a non-square one completed with random columns first). Returns the module.
///   nn::utils::parametrizations::orthogonal(rnn_input_layer);
Module orthogonal(const Module& module, const std::string& name = "weight",
                  std::optional<std::string> orthogonal_map = std::nullopt);

}  // namespace utils::parametrizations

}  // namespace ember::nn

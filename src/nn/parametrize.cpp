// src/nn/parametrize.cpp — parametrizations (ember/nn/parametrize.hpp): the ModuleDict /
// ParametrizationList children that hold the originals, the recomputation a parametrized
// module runs before forward, weight_norm and spectral_norm.
#include "ember/nn/parametrize.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/ops.hpp"
#include "ember/ops_shape.hpp"

namespace ember::nn {

namespace {

// The originals of one parametrized name ("original", or "original0".. when the first
// parametrization's right_inverse gives several) and its chain, children "0", "1", ...
class ParametrizationListImpl : public ModuleImpl {
 public:
  Tensor forward(const Tensor&) override {
    ember::detail::throw_error(
        "ParametrizationList: computes from its originals (call the parametrized module)");
  }
  std::string type_name() const override { return "ParametrizationList"; }

  void add_original(const std::string& name, const Tensor& t) {
    ParametrizeAccess::params(*this).emplace_back(name, t);
  }
  void add(const ModulePtr& p) { register_module(std::to_string(named_children().size()), p); }

  std::vector<Tensor> originals() const {
    std::vector<Tensor> out;
    for (auto& [n, t] : named_parameters(false)) out.push_back(t);
    return out;
  }

  /// The value: the first parametrization on the originals, each next one on its result.
  Tensor compute() const { return compute_upto(named_children().size()); }
  Tensor compute_upto(size_t count) const {
    const auto& chain = named_children();
    Tensor value = apply(*chain.at(0).second, originals());
    for (size_t i = 1; i < count; ++i) value = apply(*chain[i].second, {value});
    return value;
  }

  static Tensor apply(ModuleImpl& p, const std::vector<Tensor>& inputs) {
    if (auto* typed = dynamic_cast<ParametrizationImpl*>(&p)) return typed->compute(inputs);
    return run_forward(p, inputs.at(0));
  }
};

// The child "parametrizations": one ParametrizationList per parametrized name.
class ParametrizationDictImpl : public ModuleImpl {
 public:
  Tensor forward(const Tensor&) override {
    ember::detail::throw_error("ModuleDict: holds parametrizations (call the parametrized module)");
  }
  std::string type_name() const override { return "ModuleDict"; }
  void add(const std::string& name, const ModulePtr& list) { register_module(name, list); }
  void erase(const std::string& name) {
    auto& kids = ParametrizeAccess::children(*this);
    kids.erase(std::find_if(kids.begin(), kids.end(), [&](auto& c) { return c.first == name; }));
  }
  ParametrizationListImpl* list(const std::string& name) const {
    for (auto& [n, c] : named_children())
      if (n == name) return static_cast<ParametrizationListImpl*>(c.get());
    return nullptr;
  }
};

std::string names_of(const NamedTensors& list) {
  std::string s;
  for (auto& [n, t] : list)
    if (t.defined()) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

}  // namespace

struct ParametrizedState {
  std::shared_ptr<ParametrizationDictImpl> dict;
  NamedTensors values;  // the value last computed per name: what param(name) refers to
};

ParametrizedState* ParametrizeAccess::state(const ModuleImpl& m) { return m.parametrized_.get(); }
void ParametrizeAccess::set_state(ModuleImpl& m, std::shared_ptr<ParametrizedState> state) {
  m.parametrized_ = std::move(state);
}
NamedTensors& ParametrizeAccess::params(ModuleImpl& m) { return m.params_; }
std::vector<std::pair<std::string, ModulePtr>>& ParametrizeAccess::children(ModuleImpl& m) {
  return m.children_;
}
void ParametrizeAccess::rebind(ModuleImpl& m, const std::string& name, const Tensor& value) {
  m.rebind_parameter(name, value);
}

namespace {
Tensor& store_value(ParametrizedState& st, const std::string& name, const Tensor& value) {
  for (auto& [n, t] : st.values)
    if (n == name) return t = value;
  st.values.emplace_back(name, value);
  return st.values.back().second;
}
}  // namespace

void ParametrizeAccess::recompute(ModuleImpl& m) {
  ParametrizedState& st = *m.parametrized_;
  for (auto& [name, list] : st.dict->named_children()) {
    const Tensor value = static_cast<ParametrizationListImpl&>(*list).compute();
    m.rebind_parameter(name, value);
    store_value(st, name, value);
  }
}

Tensor& ParametrizeAccess::value(ModuleImpl& m, const std::string& name) {
  ParametrizedState& st = *m.parametrized_;
  ParametrizationListImpl* list = st.dict->list(name);
  EMBER_CHECK(list, m.type_name(), ": no parameter named '", name, "'");
  const Tensor value = list->compute();
  m.rebind_parameter(name, value);
  return store_value(st, name, value);
}

nlohmann::json ParametrizeAccess::config(const ModuleImpl& m) {
  nlohmann::json out = nlohmann::json::object();
  for (auto& [name, list] : m.parametrized_->dict->named_children()) {
    nlohmann::json chain = nlohmann::json::array();
    for (auto& [i, p] : list->named_children()) chain.push_back(p->config());
    out[name] = chain;
  }
  return out;
}

void ParametrizeAccess::rebuild(ModuleImpl& m, const nlohmann::json& spec) {
  EMBER_CHECK(spec.is_object(), "nn::build: \"parametrizations\" of ", m.type_name(),
              " is not an object of name -> list (got ", spec.dump().substr(0, 120), ")");
  const Module handle(m.shared_from_this());
  for (auto& [name, chain] : spec.items()) {
    EMBER_CHECK(chain.is_array(), "nn::build: parametrizations of '", name,
                "' are not a list (got ", chain.dump().substr(0, 120), ")");
    for (const auto& p : chain) {
      const std::string type = p.value("type", "");
      const nlohmann::json o = p.value("options", nlohmann::json::object());
      if (type == "_WeightNorm") {
        const std::optional<int64_t> dim = o.contains("dim") && !o["dim"].is_null()
                                               ? std::optional(o["dim"].get<int64_t>())
                                               : std::nullopt;
        utils::parametrizations::weight_norm(handle, name, dim);
      } else if (type == "_Orthogonal") {
        utils::parametrizations::orthogonal(handle, name,
                                            o.at("orthogonal_map").get<std::string>());
      } else if (type == "_SpectralNorm") {
        utils::parametrizations::spectral_norm(handle, name, o.at("n_power_iterations"),
                                               o.at("eps"), o.at("dim").get<int64_t>());
      } else {
        utils::parametrize::register_parametrization(handle, name, build(p));
      }
    }
  }
}

// ---- ParametrizationImpl, WeightNorm, SpectralNorm ----

Tensor ParametrizationImpl::compute(const std::vector<Tensor>& originals) {
  EMBER_CHECK(originals.size() == 1, type_name(), ": got ", originals.size(),
              " originals (expected 1; a parametrization with several overrides compute)");
  return forward(originals[0]);
}

Tensor ParametrizationImpl::forward(const Tensor&) {
  ember::detail::throw_error(ember::detail::concat(type_name(),
                                                   ": has no one-input forward (it computes from ",
                                                   "its originals; override forward or compute)"));
}

namespace {

// ‖v‖ over every dim but `dim` (kept, size 1), or over all dims when dim is nullopt or -1
// (torch.norm_except_dim's convention).
Tensor norm_except_dim(const Tensor& v, std::optional<int64_t> dim) {
  if (!dim || *dim == -1) return sqrt(sum(square(v)));
  const int64_t d = *dim < 0 ? *dim + v.dim() : *dim;
  std::vector<int64_t> others;
  for (int64_t i = 0; i < v.dim(); ++i)
    if (i != d) others.push_back(i);
  if (others.empty()) return abs(v);
  return sqrt(sum(square(v), Shape(others), /*keepdim=*/true));
}

void check_weight_norm_dim(std::optional<int64_t> dim, const Tensor& v) {
  if (!dim || *dim == -1) return;
  EMBER_CHECK(*dim >= -v.dim() && *dim < v.dim(), "weight_norm: dim ", *dim, " is out of range ",
              "for a weight of shape ", v.shape().to_string(), " (expected -1 or nullopt for ",
              "all dims, or a dim in [", -v.dim(), ", ", v.dim() - 1, "])");
}

}  // namespace

Tensor WeightNormImpl::compute(const std::vector<Tensor>& originals) {
  EMBER_CHECK(originals.size() == 2, "weight_norm: got ", originals.size(),
              " originals (expected g and v)");
  const Tensor& g = originals[0];
  const Tensor& v = originals[1];
  return v * (g / norm_except_dim(v, dim_));
}

std::vector<Tensor> WeightNormImpl::right_inverse(const Tensor& value) {
  check_weight_norm_dim(dim_, value);
  NoGradGuard no_grad;
  return {norm_except_dim(value, dim_), value.clone()};
}

json WeightNormImpl::options() const { return {{"dim", dim_ ? json(*dim_) : json(nullptr)}}; }

SpectralNormImpl::SpectralNormImpl(const Tensor& weight, int64_t n_power_iterations, int64_t dim,
                                   double eps)
    : n_power_iterations_(n_power_iterations), dim_(dim), eps_(eps), weight_shape_(weight.shape()) {
  EMBER_CHECK(weight.defined() && is_floating(weight.dtype()),
              "spectral_norm: the weight is undefined or not floating (expected a float tensor)");
  EMBER_CHECK(n_power_iterations > 0, "spectral_norm: n_power_iterations is ", n_power_iterations,
              " (expected > 0)");
  EMBER_CHECK(eps > 0, "spectral_norm: eps is ", eps, " (expected > 0)");
  const int64_t nd = weight.dim();
  EMBER_CHECK(dim >= -std::max<int64_t>(nd, 1) && dim < std::max<int64_t>(nd, 1),
              "spectral_norm: dim ", dim, " is out of range for a weight of shape ",
              weight.shape().to_string());
  dim_ = dim < 0 ? dim + nd : dim;
  if (nd <= 1) return;
  NoGradGuard no_grad;
  const Tensor w = as_matrix(weight.detach());
  const TensorOptions to{.dtype = weight.dtype(), .device = weight.device()};
  auto unit = [&](int64_t n) {
    const Tensor r = randn({n}, to);
    return r / clamp_min(norm(r), eps_);
  };
  register_buffer("_u", unit(w.shape()[0]));
  register_buffer("_v", unit(w.shape()[1]));
  power_method(w, 15);
}

Tensor SpectralNormImpl::as_matrix(const Tensor& weight) const {
  const Tensor w = dim_ == 0 ? weight : movedim(weight, dim_, 0);
  return w.reshape({w.shape()[0], -1});
}

void SpectralNormImpl::power_method(const Tensor& weight_mat, int64_t iterations) {
  NoGradGuard no_grad;
  Tensor& u = buffer("_u");
  Tensor& v = buffer("_v");
  for (int64_t i = 0; i < iterations; ++i) {
    const Tensor nu = matmul(weight_mat, v);
    u.assign_(nu / clamp_min(norm(nu), eps_));
    const Tensor nv = matmul(weight_mat.t(), u);
    v.assign_(nv / clamp_min(norm(nv), eps_));
  }
}

Tensor SpectralNormImpl::forward(const Tensor& weight) {
  if (weight.dim() <= 1) return weight / clamp_min(norm(weight), eps_);
  const Tensor w = as_matrix(weight);
  if (is_training()) power_method(w.detach(), n_power_iterations_);
  const Tensor u = buffer("_u").clone();
  const Tensor v = buffer("_v").clone();
  const Tensor sigma = dot(u, matmul(w, v));
  return weight / sigma;
}

json SpectralNormImpl::options() const {
  return {{"n_power_iterations", n_power_iterations_}, {"dim", dim_}, {"eps", eps_}};
}

// ---- orthogonal ----

namespace {

// The identity [n, n] in `like`'s dtype and device.
Tensor identity_like(int64_t n, const Tensor& like) {
  return diag(ones({n}, {.dtype = like.dtype(), .device = like.device()}));
}

// The last two dims swapped (PyTorch's mT).
Tensor mT(const Tensor& x) { return x.transpose(-2, -1); }

// Q of a QR of the square matrices A with R's diagonal made positive (PyTorch's
// _make_orthogonal through geqrf and householder_product gives the same Q).
Tensor make_orthogonal(const Tensor& a) {
  const QR f = qr(a);
  return f.Q * sign(diagonal(f.R, 0, -2, -1)).unsqueeze(-2);
}

bool is_orthogonal(const Tensor& q) {
  const int64_t n = q.shape()[q.dim() - 2], k = q.shape()[q.dim() - 1];
  const double eps = q.dtype() == DType::f64 ? 2.220446049250313e-16 : 1.1920928955078125e-7;
  const Tensor gap = abs(matmul(mT(q), q) - identity_like(k, q));
  return max(gap).item<double>() <= 10.0 * static_cast<double>(n) * eps;
}

}  // namespace

Tensor OrthogonalImpl::forward(const Tensor& original) {
  EMBER_CHECK(original.dim() >= 2, "orthogonal: the weight is ", original.shape().to_string(),
              " (expected at least 2 dims: matrices in its last two)");
  Tensor x = original;
  int64_t n = x.shape()[x.dim() - 2], k = x.shape()[x.dim() - 1];
  const bool transposed = n < k;
  if (transposed) {
    x = mT(x);
    std::swap(n, k);
  }
  Tensor q;
  if (map_ == "matrix_exp" || map_ == "cayley") {
    x = tril(x);
    if (n != k) {
      Shape pad = x.shape();
      pad[pad.size() - 1] = n - k;
      x = cat({x, zeros(pad, {.dtype = x.dtype(), .device = x.device()})}, -1);
    }
    const Tensor a = x - mT(x);
    if (map_ == "matrix_exp") {
      q = matrix_exp(a);
    } else {
      const Tensor id = identity_like(n, a);
      q = solve(id - a * 0.5, id + a * 0.5);
    }
    if (n != k) q = q.narrow(-1, 0, k);
  } else {
    const Tensor a = tril(x, -1);
    const Tensor tau = 2.0 / (sum(a * a, Shape{-2}) + 1.0);
    q = householder_product(a, tau);
    // the signs of the original's diagonal, truncated as PyTorch's .int() (no gradient)
    q = q * trunc(diagonal(x, 0, -2, -1)).detach().unsqueeze(-2);
  }
  if (has_base_) q = matmul(buffer("base"), q);
  return transposed ? mT(q) : q;
}

std::vector<Tensor> OrthogonalImpl::right_inverse(const Tensor& value) {
  EMBER_CHECK(value.dim() >= 2, "orthogonal: the weight is ", value.shape().to_string(),
              " (expected at least 2 dims: matrices in its last two)");
  NoGradGuard no_grad;
  Tensor q = value.detach();
  int64_t n = q.shape()[q.dim() - 2], k = q.shape()[q.dim() - 1];
  if (n < k) {
    q = mT(q);
    std::swap(n, k);
  }
  Tensor base;
  if (n == k) {
    base = is_orthogonal(q) ? q.clone() : make_orthogonal(q);
  } else {  // completed to a full [n, n] orthogonal matrix with random columns
    Shape rest = q.shape();
    rest[rest.size() - 1] = n - k;
    base = make_orthogonal(cat({q, randn(rest, {.dtype = q.dtype(), .device = q.device()})}, -1));
  }
  register_buffer("base", base);
  has_base_ = true;
  // -I in the value's shape: every map gives I there, so the value starts as base's columns.
  Tensor neg = zeros(value.shape(), {.dtype = value.dtype(), .device = value.device()});
  diagonal(neg, 0, -2, -1).fill_(-1.0);  // a view: writes neg's diagonal
  return {neg};
}

// ---- registration ----

namespace utils::parametrize {

namespace {

ModuleImpl& checked_module(const Module& module, const char* op) {
  EMBER_CHECK(module.defined(), op, ": the module handle is empty (expected a constructed ",
              "module, e.g. nn::Linear fc(4, 3))");
  return *module;
}

ParametrizationDictImpl* dict_of(const ModuleImpl& m) {
  ParametrizedState* st = ParametrizeAccess::state(m);
  return st ? st->dict.get() : nullptr;
}

void check_same(const Tensor& value, const Tensor& want, const ModuleImpl& p,
                const std::string& name) {
  EMBER_CHECK(value.defined() && value.shape() == want.shape() && value.dtype() == want.dtype(),
              "register_parametrization: ", p.type_name(), " gives '", name, "' ",
              value.defined()
                  ? value.shape().to_string() + " " + std::string(dtype_name(value.dtype()))
                  : std::string("an undefined tensor"),
              " but the parameter is ", want.shape().to_string(), " ", dtype_name(want.dtype()),
              " (expected the same shape and dtype; pass unsafe = true to allow a change)");
}

}  // namespace

void register_parametrization(const Module& module, const std::string& name,
                              const Module& parametrization, bool unsafe) {
  ModuleImpl& m = checked_module(module, "register_parametrization");
  EMBER_CHECK(parametrization.defined(), "register_parametrization: the parametrization handle ",
              "for '", name, "' is empty (expected a module, e.g. a ParametrizationImpl)");
  ModuleImpl& p = *parametrization;
  EMBER_CHECK(&p != &m, "register_parametrization: a module cannot parametrize itself");
  ParametrizationDictImpl* dict = dict_of(m);
  if (ParametrizationListImpl* list = dict ? dict->list(name) : nullptr) {  // chain
    Tensor before;
    {
      NoGradGuard no_grad;
      before = list->compute();
      p.to(before.device());
      if (is_floating(before.dtype())) p.to(before.dtype());
      const Tensor after = ParametrizationListImpl::apply(p, {before});
      if (!unsafe) check_same(after, before, p, name);
    }
    list->add(parametrization.ptr());
    return;
  }
  NamedTensors& params = ParametrizeAccess::params(m);
  auto it = std::find_if(params.begin(), params.end(), [&](auto& e) { return e.first == name; });
  EMBER_CHECK(it != params.end() && it->second.defined(),
              "register_parametrization: ", m.type_name(), " has no parameter named '", name,
              "' (parameters: ", names_of(params), ")");
  const Tensor w = it->second;
  try {
    ParametrizeAccess::rebind(m, name, w);  // a probe: the same tensor, nothing changes
  } catch (const Error&) {
    ember::detail::throw_error(ember::detail::concat(
        "register_parametrization: ", m.type_name(), " computes with its own handle to '", name,
        "' and cannot rebind it (Linear, Bilinear, Embedding and the convolutions can; a custom "
        "module overrides rebind_parameter and calls refresh_parametrizations() in forward)"));
  }
  p.to(w.device());
  if (is_floating(w.dtype())) p.to(w.dtype());
  std::vector<Tensor> originals;
  {
    NoGradGuard no_grad;
    auto* typed = dynamic_cast<ParametrizationImpl*>(&p);
    originals = typed ? typed->right_inverse(w) : std::vector<Tensor>{w};
    EMBER_CHECK(!originals.empty(), "register_parametrization: ", p.type_name(),
                ".right_inverse gave no tensor for '", name, "'");
  }
  auto list = std::make_shared<ParametrizationListImpl>();
  for (size_t i = 0; i < originals.size(); ++i) {
    const std::string oname = originals.size() == 1 ? "original" : "original" + std::to_string(i);
    // The parameter itself stays the original when right_inverse hands it back unchanged, so
    // an optimizer built before keeps stepping it.
    list->add_original(oname, originals[i].is_same(w) ? w : parameter(originals[i]));
  }
  list->add(parametrization.ptr());
  if (!unsafe) {
    NoGradGuard no_grad;
    check_same(list->compute(), w, p, name);
  }
  // Nothing can fail from here on.
  if (!dict) {
    auto state = std::make_shared<ParametrizedState>();
    state->dict = std::make_shared<ParametrizationDictImpl>();
    ParametrizeAccess::children(m).emplace_back("parametrizations", state->dict);
    ParametrizeAccess::set_state(m, state);
    dict = state->dict.get();
  }
  dict->add(name, list);
  params.erase(it);
  // The module's handle holds the value without a graph until the next forward recomputes it.
  ParametrizeAccess::rebind(m, name, w.detach());
}

void remove_parametrizations(const Module& module, const std::string& name,
                             bool leave_parametrized) {
  ModuleImpl& m = checked_module(module, "remove_parametrizations");
  ParametrizationDictImpl* dict = dict_of(m);
  ParametrizationListImpl* list = dict ? dict->list(name) : nullptr;
  EMBER_CHECK(list, "remove_parametrizations: '", name, "' of ", m.type_name(),
              " is not parametrized");
  Tensor plain;
  if (leave_parametrized) {
    NoGradGuard no_grad;
    plain = parameter(list->compute().detach());
  } else {
    const std::vector<Tensor> originals = list->originals();
    EMBER_CHECK(originals.size() == 1, "remove_parametrizations: '", name, "' has ",
                originals.size(), " originals (expected 1 with leave_parametrized = false)");
    plain = originals[0];
  }
  ParametrizeAccess::params(m).emplace_back(name, plain);
  ParametrizeAccess::rebind(m, name, plain);
  dict->erase(name);
  ParametrizedState* st = ParametrizeAccess::state(m);
  std::erase_if(st->values, [&](auto& e) { return e.first == name; });
  if (dict->named_children().empty()) {
    auto& kids = ParametrizeAccess::children(m);
    std::erase_if(kids, [&](auto& c) { return c.second.get() == dict; });
    ParametrizeAccess::set_state(m, nullptr);
  }
}

bool is_parametrized(const Module& module, const std::string& name) {
  const ParametrizationDictImpl* dict = dict_of(checked_module(module, "is_parametrized"));
  if (!dict) return false;
  return name.empty() || dict->list(name) != nullptr;
}

}  // namespace utils::parametrize

namespace utils::parametrizations {

Module weight_norm(const Module& module, const std::string& name, std::optional<int64_t> dim) {
  parametrize::register_parametrization(module, name,
                                        Module(std::make_shared<WeightNormImpl>(dim)));
  return module;
}

Module spectral_norm(const Module& module, const std::string& name, int64_t n_power_iterations,
                     double eps, std::optional<int64_t> dim) {
  EMBER_CHECK(module.defined(), "spectral_norm: the module handle is empty (expected a ",
              "constructed module, e.g. nn::Linear fc(4, 3))");
  const std::string type = module->type_name();
  const int64_t d = dim.value_or(type.rfind("ConvTranspose", 0) == 0 ? 1 : 0);
  const bool chained = parametrize::is_parametrized(module, name);
  const Tensor w = module->param(name);
  auto p = std::make_shared<SpectralNormImpl>(chained ? w.detach() : w, n_power_iterations, d, eps);
  parametrize::register_parametrization(module, name, Module(p));
  return module;
}

Module orthogonal(const Module& module, const std::string& name,
                  std::optional<std::string> orthogonal_map) {
  EMBER_CHECK(module.defined(), "orthogonal: the module handle is empty (expected a ",
              "constructed module, e.g. nn::Linear fc(4, 3))");
  const Tensor w = module->param(name);
  EMBER_CHECK(w.dim() >= 2 && is_floating(w.dtype()), "orthogonal: '", name, "' is ",
              w.shape().to_string(), " ", dtype_name(w.dtype()),
              " (expected a floating tensor of at least 2 dims)");
  const bool square = w.shape()[w.dim() - 2] == w.shape()[w.dim() - 1];
  const std::string map = orthogonal_map.value_or(square ? "matrix_exp" : "householder");
  EMBER_CHECK(map == "matrix_exp" || map == "cayley" || map == "householder",
              "orthogonal: orthogonal_map '", map,
              "' (expected matrix_exp, cayley or householder)");
  parametrize::register_parametrization(module, name,
                                        Module(std::make_shared<OrthogonalImpl>(map)));
  return module;
}

}  // namespace utils::parametrizations

}  // namespace ember::nn

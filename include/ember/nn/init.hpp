// ember/nn/init.hpp — parameter initialisers with PyTorch's distributions and bounds: the
// factories layers use for their defaults, and torch.nn.init's in-place functions.
//
// The in-place functions (name ending in `_`, as torch.nn.init's) write into an existing
// tensor — a parameter included: they run under NoGradGuard, keep the tensor's identity
// (data_ptr, dtype, device) and return it. Random ones draw from ember's generator
// (manual_seed) on the tensor's own device, so a seed gives the same values on the CPU and a
// GPU (orthogonal_ and sparse_ draw and compute on the CPU, then copy); f16/bf16 tensors
// are drawn in their dtype (trunc_normal_ computes in f32, f64 for f64), integer tensors are
// refused. Bounds, standard deviations, gains and fans are PyTorch's to the last bit
// (tests/gen_init_fixtures.py). Example:
//   nn::Linear fc(256, 128);
//   nn::init::orthogonal_(fc->weight(), nn::init::calculate_gain("relu"));
//   nn::init::zeros_(fc->bias());
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "ember/tensor.hpp"

namespace ember::nn::init {

/// fan_in and fan_out of a weight as PyTorch computes them (dim 1 × receptive field, dim 0 × ...).
std::pair<int64_t, int64_t> fans(const Shape& shape);
/// torch.nn.init._calculate_fan_in_and_fan_out of a tensor (at least 2-D).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
/// Uniform(-bound, bound) of `shape`.
Tensor uniform(const Shape& shape, double bound, DType dtype = DType::f32);
/// PyTorch's kaiming_uniform_(a=√5) used by Linear and Conv weights: bound = 1/√fan_in.
Tensor kaiming_uniform_default(const Shape& shape, DType dtype = DType::f32);
/// Bias default of Linear/Conv: Uniform(±1/√fan_in).
Tensor bias_default(int64_t size, int64_t fan_in, DType dtype = DType::f32);
/// xavier_uniform_: bound = gain·√(6/(fan_in+fan_out)).
Tensor xavier_uniform(const Shape& shape, double gain = 1.0, DType dtype = DType::f32);
/// Normal(0, std).
Tensor normal(const Shape& shape, double std = 1.0, DType dtype = DType::f32);

/// Which fan kaiming initialisation scales by: fan_in keeps the forward pass's variance,
/// fan_out the backward pass's (torch.nn.init's mode argument).
enum class FanMode { fan_in, fan_out };
/// "fan_in" or "fan_out" in any case (torch lowercases the mode); another is an ember::Error.
FanMode fan_mode(const std::string& mode);

/// torch.nn.init.calculate_gain: "linear", "conv1d/2d/3d", "conv_transpose1d/2d/3d" and
/// "sigmoid" 1, "tanh" 5/3, "relu" √2, "leaky_relu" √(2/(1+slope²)) with slope `param` (0.01
/// when not given, as torch), "selu" 3/4; another name is an ember::Error listing these.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);

/// torch.nn.init.uniform_: Uniform[a, b) in place (a <= b, finite).
Tensor uniform_(Tensor t, double a = 0.0, double b = 1.0);
/// torch.nn.init.normal_: Normal(mean, std) in place (std >= 0).
Tensor normal_(Tensor t, double mean = 0.0, double std = 1.0);
/// torch.nn.init.trunc_normal_: Normal(mean, std) truncated to [a, b] by PyTorch's inverse-CDF
/// method (u ~ Uniform(2Φ(α)-1, 2Φ(β)-1), mean + std·√2·erfinv(u), clamped to [a, b]).
/// std = 0 fills clamp(mean, a, b). Example: init::trunc_normal_(w, 0.0, 0.02, -0.04, 0.04);
Tensor trunc_normal_(Tensor t, double mean = 0.0, double std = 1.0, double a = -2.0,
                     double b = 2.0);
/// torch.nn.init.constant_, ones_, zeros_: fills `t` (any dtype). They run under a
/// SkipInitGuard too, as the value costs no random numbers.
Tensor constant_(Tensor t, double value);
Tensor ones_(Tensor t);
Tensor zeros_(Tensor t);
/// torch.nn.init.eye_: the identity in a 2-D tensor (ones on the main diagonal, any shape).
Tensor eye_(Tensor t);
/// torch.nn.init.dirac_: a 3-, 4- or 5-D convolution weight that passes its input through:
/// in each of `groups` groups of dim 0, out channel d of the group is 1 at input channel d and
/// the kernel's centre (dim 0 divisible by groups; channels past min(out/groups, in) stay 0).
Tensor dirac_(Tensor t, int64_t groups = 1);
/// torch.nn.init.xavier_uniform_: Uniform(±gain·√(6/(fan_in+fan_out))).
Tensor xavier_uniform_(Tensor t, double gain = 1.0);
/// torch.nn.init.xavier_normal_: Normal(0, gain·√(2/(fan_in+fan_out))).
Tensor xavier_normal_(Tensor t, double gain = 1.0);

struct KaimingOptions {
  double a = 0.0;  // the negative slope of leaky_relu
  FanMode mode = FanMode::fan_in;
  std::string nonlinearity = "leaky_relu";
};

/// torch.nn.init.kaiming_uniform_: Uniform(±√3·gain/√fan), gain = calculate_gain(nonlinearity,
/// a), fan by `mode`. Does nothing to a tensor with no elements (as torch). Both spellings:
///   init::kaiming_uniform_(w, {.mode = FanMode::fan_out, .nonlinearity = "relu"});
///   init::kaiming_uniform_(w, 0.0, "fan_out", "relu");
Tensor kaiming_uniform_(Tensor t, const KaimingOptions& options = {});
Tensor kaiming_uniform_(Tensor t, double a, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu");
/// torch.nn.init.kaiming_normal_ in place: Normal(0, gain/√fan), as kaiming_uniform_.
/// torchvision's ResNet draws its convolutions so:
///   init::kaiming_normal_(conv->weight(), {.mode = FanMode::fan_out, .nonlinearity = "relu"});
Tensor kaiming_normal_(Tensor t, const KaimingOptions& options = {});
Tensor kaiming_normal_(Tensor t, double a, const std::string& mode = "fan_in",
                       const std::string& nonlinearity = "leaky_relu");
/// torch.nn.init.orthogonal_ (ggmlR's init = "orthogonal"): `t` (at least 2-D) seen as rows =
/// dim 0 by cols = the rest gets gain·Q, Q from the QR of a Normal(0, 1) matrix (transposed
/// when rows < cols) with each column's sign set by diag(R), as torch. Orthonormal rows or
/// columns, whichever are fewer. Drawn in f64 on the CPU, factorised by LAPACK, then copied.
Tensor orthogonal_(Tensor t, double gain = 1.0);
/// torch.nn.init.sparse_: a 2-D tensor drawn from Normal(0, std) with ceil(sparsity·rows)
/// entries of each column, at random rows, set to 0 (0 <= sparsity < 1).
Tensor sparse_(Tensor t, double sparsity, double std = 0.01);

/// While one is alive on this thread, the random initialisers above return uninitialised
/// tensors on `device` instead of drawing values (and consume no random numbers); the random
/// in-place ones leave their tensor as it is. io's load_model builds the module under one,
/// since every value then comes from the file (Note [No initialisation on load] in
/// src/io/checkpoint.cpp). Example:
///   { nn::init::SkipInitGuard skip(Device::cuda(0)); net = nn::build(config); }
class SkipInitGuard {
 public:
  explicit SkipInitGuard(Device device = Device::cpu());
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  bool previous_active_;
  Device previous_device_;
};

namespace detail {
/// Whether a SkipInitGuard is alive on this thread (init.cpp and init_inplace.cpp share it).
bool skipping();
}  // namespace detail

}  // namespace ember::nn::init

// tests/test_catalogue.cpp — the one test driver for every op of the catalogue
// (include/ember/catalogue.hpp): each case below runs through the three tiers of STYLE §8.
//
//   MatchesPyTorch  tier 1: the case of tests/data/op_fixtures.json (tests/gen_fixtures.py):
//                   inputs with a stored gradient are made requires_grad_(), the output is
//                   compared with PyTorch's, then sum(out * w) is back-propagated and every
//                   input's .grad() compared.
//   Gradcheck       tier 2: the same inputs in f64 against central differences.
//   EveryDType      tier 3: every dtype the catalogue claims on the CPU, against the f64 run
//                   of the same values; a dtype it does not claim must be refused with an
//                   ember::Error before dispatch.
//   EveryDevice     tier 3: every dtype the catalogue claims on each available GPU, output and
//                   gradients against the CPU.
// A case names its op by its name's prefix (add_bcast_lead is Op::add). The coverage tests
// fail when a catalogue op has no case, a differentiable op has no case with gradients, or
// the table and the fixture file disagree. Random ops (the *_moments cases) compare the
// statistics of a large sample with their expectation, and run with the seed reset before
// every evaluation, so gradcheck and the device comparison see the same draws.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "fixtures.hpp"
#include "op_cases.hpp"

namespace {

using ember::Reduction;
using ember::Shape;
using ember::Tensor;
using ember_test::Fixture;

using ember_test::OpFn;

const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t;
    ember_test::add_core_cases(t);
    ember_test::add_vocabulary_cases(t);
    ember_test::add_linalg_cases(t);
    ember_test::add_special_cases(t);
    ember_test::add_shape_cases(t);
    ember_test::add_nn_cases(t);
    return t;
  }();
  return table;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Tensor names in a case that are results rather than inputs.
bool is_result(const std::string& key) {
  return key == "out" || key == "w" || starts_with(key, "grad_") || ends_with(key, "_after");
}

std::vector<std::string> table_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : op_table()) names.push_back(name);
  return names;
}

// ---- what the tiers share

bool is_statistical(const std::string& name) { return ends_with(name, "_moments"); }

// The catalogue op a case exercises: the longest op name that is the case's name or a prefix
// of it followed by '_' (cmp_eq is eq; rsub/rdiv with a scalar are sub/div). Op::count: none.
ember::Op op_of_case(const std::string& case_name) {
  std::string name = case_name;
  if (starts_with(name, "cmp_")) name = name.substr(4);
  if (starts_with(name, "rsub_")) name = "sub";
  if (starts_with(name, "rdiv_")) name = "div";
  ember::Op best = ember::Op::count;
  size_t best_len = 0;
  for (const ember::OpInfo& info : ember::catalogue()) {
    const std::string op = info.name;
    if ((name == op || starts_with(name, op + "_")) && op.size() > best_len) {
      best = info.op;
      best_len = op.size();
    }
  }
  return best;
}

constexpr uint64_t kCaseSeed = 20261201;

// Runs the case on a fresh copy of its fixture with the seed reset (random ops draw the same
// numbers every time), `inputs` replacing the fixture's input tensors in file order.
Tensor run_case(const std::string& name, const std::vector<std::string>& keys,
                const std::vector<Tensor>& inputs) {
  Fixture f = ember_test::load_fixture(name);
  for (size_t i = 0; i < keys.size(); ++i) f[keys[i]] = inputs[i];
  ember::manual_seed(kCaseSeed);
  return op_table().at(name)(f);
}

// The input tensors of a case (fixture order) and which of them carry gradients.
struct CaseInputs {
  std::vector<std::string> keys;
  std::vector<Tensor> values;
  std::vector<bool> differentiable;
};

CaseInputs inputs_of(const std::string& name) {
  Fixture f = ember_test::load_fixture(name);
  CaseInputs in;
  for (const std::string& key : f.order) {
    if (is_result(key)) continue;
    in.keys.push_back(key);
    in.values.push_back(f[key]);
    const bool floating = ember::is_floating(f[key].dtype());
    in.differentiable.push_back(
        f.has("grad_" + key) ||
        (is_statistical(name) && floating && ember::op_info(op_of_case(name)).differentiable));
  }
  return in;
}

// A float fixture input as `dtype`, with values that dtype can hold: floats as they are
// (rounded to the dtype), integers as round(3x) (|.| for u8), bool as x > 0. Index and bool
// inputs keep their dtype. Lands on `device`.
Tensor as_dtype(const Tensor& x, ember::DType dtype, ember::Device device) {
  using ember::DType;
  // detach(): a fresh leaf every time, never an alias of the fixture's tensor that a run
  // marked requires_grad.
  if (!ember::is_floating(x.dtype())) return x.detach().to(device);
  if (ember::is_floating(dtype)) return x.detach().to(dtype).to(device);
  std::vector<double> v = ember_test::values_f64(x);
  for (double& e : v) {
    if (dtype == DType::boolean)
      e = e > 0.0 ? 1.0 : 0.0;
    else
      e = dtype == DType::u8 ? std::round(std::abs(3.0 * e)) : std::round(3.0 * e);
  }
  return ember::from_vector<double>(v, x.shape()).to(dtype).to(device);
}

// A case whose inputs are all integer or bool (one_hot's class indices) has nothing else to
// sweep: its inputs themselves are cast to each dtype.
bool all_integral(const CaseInputs& in) {
  for (const Tensor& t : in.values)
    if (ember::is_floating(t.dtype())) return false;
  return !in.values.empty();
}

std::vector<Tensor> inputs_as(const CaseInputs& in, ember::DType dtype, ember::Device device) {
  std::vector<Tensor> out;
  for (const Tensor& t : in.values)
    out.push_back(all_integral(in) ? t.detach().to(dtype).to(device) : as_dtype(t, dtype, device));
  return out;
}

// The reference of a run in `dtype`: the same values (as_dtype's), float inputs held in f64.
std::vector<Tensor> reference_inputs(const CaseInputs& in, ember::DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : in.values) {
    Tensor v = all_integral(in) ? t.detach().to(dtype) : as_dtype(t, dtype, ember::Device::cpu());
    out.push_back(ember::is_floating(t.dtype()) ? v.to(ember::DType::f64) : v);
  }
  return out;
}

// What a run in `dtype` is compared with: the f64 run of the same values; for random ops,
// which draw other numbers in each dtype, the expectation stored in the fixture.
Tensor reference_of(const std::string& name, const CaseInputs& in, ember::DType dtype) {
  if (is_statistical(name)) return ember_test::load_fixture(name)["out"];
  return run_case(name, in.keys, reference_inputs(in, dtype));
}

// Tolerance of a run in `dtype` against the f64 run of the same values (check_close's rtol
// and atol, atol scaled by max(1, max|want|)).
std::pair<double, double> tolerance_of(ember::DType dtype, const std::string& name) {
  using ember::DType;
  // Random ops against their expectation: the fixture's widest statistical tolerance.
  if (is_statistical(name) && ember::is_floating(dtype)) return {0.0, 2e-2};
  switch (dtype) {
    case DType::f64: return {1e-10, 1e-10};
    case DType::f32: return {2e-4, 2e-5};
    case DType::f16: return {4e-3, 4e-3};
    case DType::bf16: return {2e-2, 2e-2};
    default: return {0.0, 0.0};
  }
}

// got against want cast to got's dtype (a run in i64 of masked_fill(x, -1.5) writes -1, as
// PyTorch), exact for integer and bool results.
::testing::AssertionResult check_run(const Tensor& got, const Tensor& want, ember::DType dtype,
                                     const std::string& name, const std::string& what) {
  // A float result of integer inputs (float_power, true division: f64 or f32) is held to its
  // own dtype's rounding: CUDA's pow is not glibc's to the last bit.
  const ember::DType judged =
      ember::is_floating(got.dtype()) && !ember::is_floating(dtype) ? got.dtype() : dtype;
  const auto [rtol, atol] = tolerance_of(judged, name);
  Tensor w = want.to(ember::Device::cpu()).to(got.dtype());
  if (!ember::is_floating(got.dtype()))
    return ember_test::check_close(got.to(ember::Device::cpu()), w, 0.0, 0.0, what);
  return ember_test::check_close(got.to(ember::Device::cpu()).to(ember::DType::f64),
                                 w.to(ember::DType::f64), rtol, atol, what);
}

std::vector<ember::DType> all_dtypes() {
  std::vector<ember::DType> out;
  for (int i = 0; i < ember::kNumDTypes; ++i) out.push_back(static_cast<ember::DType>(i));
  return out;
}

class OpFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OpFixture, MatchesPyTorch) {
  const std::string name = GetParam();
  Fixture f = ember_test::load_fixture(name);
  Fixture pristine = ember_test::load_fixture(name);
  const double rtol = f.rtol(), atol = f.atol();

  std::vector<std::string> inputs, differentiable;
  for (const std::string& key : f.order) {
    if (is_result(key)) continue;
    inputs.push_back(key);
    if (f.has("grad_" + key)) {
      f[key].requires_grad_();
      differentiable.push_back(key);
    }
  }

  Tensor out = op_table().at(name)(f);
  ASSERT_TRUE(out.defined()) << name << ": the op returned an undefined tensor";
  ember_test::expect_close(out, f["out"], rtol, atol, name + " output");
  EXPECT_EQ(out.requires_grad(), !differentiable.empty())
      << name << ": the output's requires_grad does not follow its inputs'";

  // In-place effects: only the *_after tensors (batch-norm running stats) may change.
  for (const std::string& key : inputs) {
    const std::string after = key + "_after";
    if (f.has(after)) {
      ember_test::expect_close(f[key], f[after], rtol, atol, name + " " + key + " after the call");
    } else {
      ember_test::expect_equal(f[key].detach(), pristine[key],
                               name + ": input '" + key + "' was modified by the op");
    }
  }

  if (differentiable.empty()) {
    EXPECT_FALSE(f.has("w")) << name << ": fixture has a weight but no differentiable input";
    return;
  }
  Tensor loss = (out * f["w"]).sum();
  loss.backward();
  for (const std::string& key : differentiable) {
    ember_test::expect_close(f[key].grad(), f["grad_" + key], rtol, atol,
                             name + " grad of '" + key + "'");
  }
  // Inputs without a stored gradient (targets, indices, masks, running stats) get none.
  for (const std::string& key : inputs) {
    if (!f.has("grad_" + key)) {
      EXPECT_FALSE(f[key].grad().defined())
          << name << ": non-differentiable input '" << key << "' received a gradient";
    }
  }
}

// Tier 2: the gradients of the differentiable inputs against f64 central differences.
TEST_P(OpFixture, Gradcheck) {
  const std::string name = GetParam();
  const ember::Op op = op_of_case(name);
  ASSERT_NE(op, ember::Op::count) << name << ": no catalogue op";
  CaseInputs in = inputs_of(name);
  std::vector<Tensor> x;
  bool any = false;
  for (size_t i = 0; i < in.values.size(); ++i) {
    Tensor t = in.values[i].detach().clone();
    if (in.differentiable[i]) {
      t = t.to(ember::DType::f64).requires_grad_();
      any = true;
    }
    x.push_back(t);
  }
  if (!any)  // Catalogue.EveryOpHasCasesForEveryTier makes sure another case checks the op
    GTEST_SKIP() << name << ": no differentiable input (a non-differentiable result)";
  const auto keys = in.keys;
  ember::GradcheckResult r =
      ember::gradcheck([&](const std::vector<Tensor>& v) { return run_case(name, keys, v); }, x,
                       {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3});
  EXPECT_TRUE(r.ok) << name << ": " << r.message;
}

// Bad input names the op the user called (issue 27 item 19): each input in turn replaced by an
// empty handle, by a tensor with an extra trailing dim of 5 and by its f64 twin. A run may
// succeed (broadcasting, promotion, an optional input); an ember::Error must start with the
// op's name and never be internal; nothing else may be thrown.
TEST_P(OpFixture, ErrorsNameTheOp) {
  const std::string name = GetParam();
  const ember::Op op = op_of_case(name);
  ASSERT_NE(op, ember::Op::count);
  const std::string op_name = ember::op_info(op).name;
  // Cases that compute their op's input with other public ops first (isnan(a / b),
  // nanmean(log(x)), cholesky of a symmetrised a, ...): a bad input fails in that op, which is
  // then the op the user called.
  static const std::set<std::string> kComputedInput = {"cholesky",
                                                       "contiguous",
                                                       "ctc_loss",
                                                       "ctc_loss_packed_sum",
                                                       "dropout_moments",
                                                       "eigh_values",
                                                       "eigh_vectors_batched",
                                                       "eigvalsh",
                                                       "isfinite",
                                                       "isinf",
                                                       "isnan",
                                                       "nan_to_num_nonfinite",
                                                       "nanmean_all",
                                                       "nanmedian_all",
                                                       "nanmedian_dim1",
                                                       "nansum_dim1",
                                                       "rand_moments",
                                                       "randn_moments",
                                                       "rdiv_scalar",
                                                       "reshape_of_transpose"};
  if (kComputedInput.count(name)) GTEST_SKIP() << name << ": its input is computed by other ops";
  CaseInputs in = inputs_of(name);
  for (size_t i = 0; i < in.values.size(); ++i) {
    const Tensor x = in.values[i];
    const std::vector<std::pair<std::string, Tensor>> bad = {
        {"an empty handle", Tensor()},
        {"an extra dim", x.unsqueeze(-1).expand([&] {
           ember::Shape s = x.shape();
           s.push_back(5);
           return s;
         }())},
        {"f64", x.to(ember::DType::f64)}};
    for (const auto& [how, value] : bad) {
      std::vector<Tensor> v;
      for (const Tensor& t : in.values) v.push_back(t.detach().clone());
      v[i] = value;
      const std::string what = name + " with '" + in.keys[i] + "' as " + how;
      try {
        run_case(name, in.keys, v);
      } catch (const ember::Error& e) {
        const std::string m = e.what();
        EXPECT_TRUE(m.rfind(op_name + ":", 0) == 0 || m.rfind("Tensor::" + op_name + ":", 0) == 0)
            << what << ": the error does not name " << op_name << ": " << m;
        EXPECT_EQ(m.find("internal error"), std::string::npos) << what << ": " << m;
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": threw a non-ember exception: " << e.what();
      }
    }
  }
}

// Tier 3 on the CPU: every claimed dtype against the f64 run of the same values; the first
// unclaimed dtype is refused before dispatch with an ember::Error (never an internal one).
TEST_P(OpFixture, EveryDType) {
  const std::string name = GetParam();
  const ember::Op op = op_of_case(name);
  ASSERT_NE(op, ember::Op::count);
  const ember::Device cpu = ember::Device::cpu();
  CaseInputs in = inputs_of(name);
  bool refused = false;
  for (ember::DType dtype : all_dtypes()) {
    const std::string what = name + " in " + std::string(ember::dtype_name(dtype));
    if (ember::supports(op, dtype, cpu)) {
      Tensor got;
      try {
        got = run_case(name, in.keys, inputs_as(in, dtype, cpu));
      } catch (const ember::Error& e) {
        // The case's scalar does not fit this integer dtype (masked_fill(u8, -1.5)): refused,
        // as PyTorch's "value cannot be converted to type uint8_t without overflow".
        const std::string m = e.what();
        EXPECT_NE(m.find("without overflow"), std::string::npos) << what << ": " << m;
        EXPECT_FALSE(ember::is_floating(dtype)) << what << ": " << m;
        continue;
      }
      EXPECT_TRUE(check_run(got, reference_of(name, in, dtype), dtype, name,
                            what + " (claimed by the catalogue)"));
    } else if (!refused) {
      // Refused with an ember::Error, or promoted to a dtype the op computes, as PyTorch
      // (integer operands of div, a fractional scalar, a mixed case's other operand).
      refused = true;
      Tensor got;
      std::string msg;
      try {
        got = run_case(name, in.keys, inputs_as(in, dtype, cpu));
      } catch (const ember::Error& e) {
        msg = e.what();
      }
      if (got.defined()) {
        EXPECT_NE(got.dtype(), dtype) << what << ": unclaimed, yet computed in it";
        EXPECT_TRUE(ember::supports(op, got.dtype(), cpu))
            << what << ": promoted to " << ember::dtype_name(got.dtype())
            << ", which the catalogue does not claim";
        continue;
      }
      EXPECT_NE(msg.find("unsupported dtype"), std::string::npos) << what << ": " << msg;
      EXPECT_EQ(msg.find("internal error"), std::string::npos) << what << ": " << msg;
    }
  }
}

// Tier 3 on every GPU: output and gradients of every claimed dtype against the CPU.
TEST_P(OpFixture, EveryDevice) {
  if (!ember::cuda_available())
    GTEST_SKIP() << "no CUDA device: the device tier runs on a machine with a GPU";
  const std::string name = GetParam();
  const ember::Op op = op_of_case(name);
  ASSERT_NE(op, ember::Op::count);
  const ember::Device cpu = ember::Device::cpu(), gpu = ember::Device::cuda();
  CaseInputs in = inputs_of(name);
  for (ember::DType dtype : all_dtypes()) {
    if (!ember::supports(op, dtype, gpu)) continue;
    const std::string what = name + " on cuda in " + std::string(ember::dtype_name(dtype));
    std::vector<Tensor> xc = inputs_as(in, dtype, cpu), xg = inputs_as(in, dtype, gpu);
    const bool grads =
        ember::is_floating(dtype) && dtype != ember::DType::f16 && dtype != ember::DType::bf16;
    for (size_t i = 0; i < xc.size(); ++i)
      if (grads && in.differentiable[i]) {
        xc[i].requires_grad_();
        xg[i].requires_grad_();
      }
    // A case scalar this integer dtype cannot hold is refused on every device alike.
    std::string refused_cpu, refused_gpu;
    Tensor oc, og;
    try {
      oc = ember::supports(op, dtype, cpu) ? run_case(name, in.keys, xc)
                                           : reference_of(name, in, dtype);
    } catch (const ember::Error& e) {
      refused_cpu = e.what();
    }
    try {
      og = run_case(name, in.keys, xg);
    } catch (const ember::Error& e) {
      refused_gpu = e.what();
    }
    if (!refused_cpu.empty() || !refused_gpu.empty()) {
      EXPECT_NE(refused_cpu.find("without overflow"), std::string::npos) << what << refused_cpu;
      EXPECT_EQ(refused_cpu, refused_gpu) << what << ": the devices disagree";
      continue;
    }
    ASSERT_EQ(og.device(), gpu) << what << ": the result left the device";
    EXPECT_TRUE(check_run(og, oc, dtype, name, what));
    if (!grads || !og.requires_grad() || !oc.requires_grad()) continue;
    Tensor w = ember::randn(oc.shape(), {.dtype = oc.dtype()});
    (oc * w).sum().backward();
    (og * w.to(gpu)).sum().backward();
    for (size_t i = 0; i < xc.size(); ++i) {
      if (in.differentiable[i]) {
        EXPECT_TRUE(check_run(xg[i].grad(), xc[i].grad(), dtype, name,
                              what + " grad of '" + in.keys[i] + "'"));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpFixture, ::testing::ValuesIn(table_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Every fixture in the file is exercised above, and every table entry has a fixture.
TEST(OpFixtureFile, TableCoversEveryCase) {
  const std::vector<std::string> in_file = ember_test::fixture_names();
  const std::set<std::string> file_set(in_file.begin(), in_file.end());
  EXPECT_GE(in_file.size(), 100u) << "op_fixtures.json looks truncated";
  for (const std::string& name : in_file) {
    EXPECT_TRUE(op_table().count(name)) << "fixture '" << name << "' has no entry in op_table()";
  }
  for (const auto& [name, fn] : op_table()) {
    EXPECT_TRUE(file_set.count(name)) << "op_table() entry '" << name << "' has no fixture";
  }
}

// Every catalogue op has a case; every differentiable op has a case whose gradients are
// checked (tiers 1 and 2); every case names a catalogue op.
TEST(Catalogue, EveryOpHasCasesForEveryTier) {
  std::map<ember::Op, int> cases, with_grads;
  for (const auto& [name, fn] : op_table()) {
    const ember::Op op = op_of_case(name);
    EXPECT_NE(op, ember::Op::count) << "case '" << name << "' names no catalogue op";
    if (op == ember::Op::count) continue;
    ++cases[op];
    const CaseInputs in = inputs_of(name);
    for (bool d : in.differentiable) with_grads[op] += d ? 1 : 0;
  }
  for (const ember::OpInfo& info : ember::catalogue()) {
    EXPECT_GT(cases[info.op], 0) << "catalogue op '" << info.name
                                 << "' has no case in tests/test_catalogue.cpp";
    if (info.differentiable) {
      EXPECT_GT(with_grads[info.op], 0)
          << "differentiable op '" << info.name << "' has no case with gradients";
    }
  }
}

// The catalogue's own rows: names are unique and found again, claims are sane.
TEST(Catalogue, RowsAreConsistent) {
  std::set<std::string> names;
  for (const ember::OpInfo& info : ember::catalogue()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate name " << info.name;
    EXPECT_EQ(ember::op_by_name(info.name), info.op);
    EXPECT_STREQ(ember::op_name(info.op), info.name);
    EXPECT_NE(info.cpu, ember::kNoDTypes) << info.name << " claims no CPU dtype";
    EXPECT_TRUE(ember::supports(info.op, ember::DType::f32, ember::Device::cpu()) ||
                !info.cpu.contains(ember::DType::f32));
  }
  EXPECT_EQ(ember::op_by_name("no_such_op"), ember::Op::count);
  EXPECT_EQ(ember::catalogue().size(), static_cast<size_t>(ember::Op::count));
  EXPECT_EQ(ember::kFloat.to_string(), "f32, f64");
  EXPECT_EQ(ember::kNoDTypes.to_string(), "none");
#if !defined(EMBER_WITH_CUDA)
  EXPECT_FALSE(ember::supports(ember::Op::add, ember::DType::f32, ember::Device::cuda()));
#endif
}

// The driver's comparison must be able to fail: a dtype that computes the wrong values, and
// an op that is not refused, are both caught.
TEST(Catalogue, DriverDetectsWrongRuns) {
  Tensor want = ember::from_vector<double>({1.0, 2.0, -1.5}, {3});
  EXPECT_FALSE(check_run(ember::from_vector<float>({1.0f, 2.0f, -1.4f}, {3}), want,
                         ember::DType::f32, "x", "f32 run"));
  EXPECT_TRUE(check_run(ember::from_vector<float>({1.0f, 2.0f, -1.5f}, {3}), want,
                        ember::DType::f32, "x", "f32 run"));
  // i64 runs compare exactly against the reference cast to i64 (-1.5 -> -1).
  EXPECT_TRUE(check_run(ember::from_vector<int64_t>({1, 2, -1}, {3}), want, ember::DType::i64, "x",
                        "i64 run"));
  EXPECT_FALSE(check_run(ember::from_vector<int64_t>({1, 2, -2}, {3}), want, ember::DType::i64, "x",
                         "i64 run"));
  EXPECT_EQ(op_of_case("log_softmax_dim0"), ember::Op::log_softmax);
  EXPECT_EQ(op_of_case("cmp_ge"), ember::Op::ge);
  EXPECT_EQ(op_of_case("max_pool2d_with_indices_indices"), ember::Op::max_pool2d_with_indices);
  EXPECT_EQ(op_of_case("bogus"), ember::Op::count);
}

// The comparison itself must be able to fail: a perturbed value, a wrong shape and a wrong
// dtype are each reported.
TEST(OpFixtureFile, ComparisonDetectsMismatch) {
  Fixture f = ember_test::load_fixture("add");
  Tensor want = f["out"];
  std::vector<float> v = want.to_vector<float>();
  v[5] += 1e-3f;
  Tensor bumped = ember::from_vector<float>(v, want.shape());
  ::testing::AssertionResult r = ember_test::check_close(bumped, want, 1e-5, 1e-6, "add output");
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("[1, 1]"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("add output"), std::string::npos) << r.message();
  EXPECT_FALSE(ember_test::check_close(want.reshape({4, 3}), want, 1e-5, 1e-6, "reshaped"));
  EXPECT_FALSE(ember_test::check_close(want.to(ember::DType::f64), want, 1e-5, 1e-6, "f64"));
  EXPECT_TRUE(ember_test::check_close(want.clone(), want, 1e-5, 1e-6, "clone"));
}

}  // namespace

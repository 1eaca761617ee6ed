// tests/op_cases.hpp — the op test driver's case table (tests/test_catalogue.cpp): each case
// name of tests/data/op_fixtures.json mapped to the call that runs it. The table is filled by
// the files tests/test_op_cases_*.cpp, one family group each, so none grows past the line
// budget.
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixtures.hpp"

namespace ember_test {

using OpFn = std::function<ember::Tensor(Fixture&)>;
using OpTable = std::map<std::string, OpFn>;

inline ember::Reduction reduction_of(const Fixture& f) {
  const std::string r = f.attr_string("reduction");
  if (r == "mean") return ember::Reduction::mean;
  if (r == "sum") return ember::Reduction::sum;
  if (r == "none") return ember::Reduction::none;
  throw std::runtime_error("unknown reduction " + r);
}

inline ember::Tensor optional_tensor(Fixture& f, const std::string& key) {
  return f.has(key) ? f[key] : ember::Tensor();
}

/// The cases of the ops ember had before issue 16 (elementwise, reductions, linalg products,
/// shape, index, random, norm, conv2d/pools, the first losses).
void add_core_cases(OpTable& t);
/// The cases of issue 16's vocabulary: sorting and scans, rearrangements and indexing,
/// decompositions and einsum, the other losses, convolution/pooling/upsampling.
void add_vocabulary_cases(OpTable& t);
/// The cases of issue 32's linear algebra (tests/test_op_cases_linalg.cpp).
void add_linalg_cases(OpTable& t);
/// Issue 32's elementwise math and activations (tests/test_op_cases_special.cpp; fixtures
/// from tests/fixture_cases_special.py).
void add_special_cases(OpTable& t);
/// Issue 32's shape, indexing, reductions and scans (tests/test_op_cases_shape.cpp;
/// tests/fixture_cases_shape.py).
void add_shape_cases(OpTable& t);
/// Issue 32's nn functional ops and losses (tests/test_op_cases_nn.cpp;
/// tests/fixture_cases_nn.py).
void add_nn_cases(OpTable& t);

}  // namespace ember_test

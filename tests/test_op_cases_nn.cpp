// tests/test_op_cases_nn.cpp — the op test driver's cases for issue 32's nn functional ops and losses
// (see tests/op_cases.hpp); their PyTorch references are tests/fixture_cases_nn.py, written
// to tests/data/op_fixtures_nn.json by `/usr/bin/python3 tests/gen_fixtures.py nn`.
#include "op_cases.hpp"

namespace ember_test {

void add_nn_cases(OpTable& t) { (void)t; }

}  // namespace ember_test

// tests/test_op_cases_special.cpp — the op test driver's cases for issue 32's elementwise math and activations
// (see tests/op_cases.hpp); their PyTorch references are tests/fixture_cases_special.py, written
// to tests/data/op_fixtures_special.json by `/usr/bin/python3 tests/gen_fixtures.py special`.
#include "op_cases.hpp"

namespace ember_test {

void add_special_cases(OpTable& t) { (void)t; }

}  // namespace ember_test

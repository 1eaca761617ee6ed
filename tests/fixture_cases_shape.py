"""Issue 32's shape, indexing, reductions and scans: the PyTorch references of the cases in
tests/test_op_cases_shape.cpp. Written to tests/data/op_fixtures_shape.json by
`/usr/bin/python3 tests/gen_fixtures.py shape` (see gen_fixtures.py for case(), the makers and
the tolerances)."""
from gen_fixtures import binary, case, unary  # noqa: F401
import torch  # noqa: F401
import torch.nn.functional as F  # noqa: F401

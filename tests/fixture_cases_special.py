"""Issue 32's elementwise math and activations: the PyTorch references of the cases in
tests/test_op_cases_special.cpp. Written to tests/data/op_fixtures_special.json by
`/usr/bin/python3 tests/gen_fixtures.py special` (see gen_fixtures.py for case(), the makers and
the tolerances)."""
from gen_fixtures import binary, case, unary  # noqa: F401
import torch  # noqa: F401
import torch.nn.functional as F  # noqa: F401

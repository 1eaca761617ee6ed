"""Issue 32's nn functional ops and losses: the PyTorch references of the cases in
tests/test_op_cases_nn.cpp. Written to tests/data/op_fixtures_nn.json by
`/usr/bin/python3 tests/gen_fixtures.py nn` (see gen_fixtures.py for case(), the makers and
the tolerances)."""
from gen_fixtures import binary, case, unary  # noqa: F401
import torch  # noqa: F401
import torch.nn.functional as F  # noqa: F401

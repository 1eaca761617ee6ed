#!/usr/bin/python3
"""Writes tests/data/op_fixtures.json: PyTorch reference values for ember's op tests.

Run with Debian's interpreter (torch 1.13 lives there):   /usr/bin/python3 tests/gen_fixtures.py

The cases below are the core list. A group of cases may live in its own file,
tests/fixture_cases_<group>.py (it imports case/unary/binary and the input makers from here),
written to tests/data/op_fixtures_<group>.json by `gen_fixtures.py <group>`; `gen_fixtures.py
all` writes every file. The C++ side reads op_fixtures.json and every op_fixtures_*.json.

For every case: the inputs (f32-representable values, stored as f32; indices as i64; masks
as bool), the output, a fixed random weight `w` of the output's shape, and the gradient of
every differentiable input for the loss sum(out * w). The reference math runs in float64 on
the f32-rounded inputs. Each case also carries `attrs` (the op's non-tensor arguments, read
by tests/test_ops_fixtures.cpp) and its comparison tolerances (`rtol`, `atol`; the C++ side
scales atol by max(1, max|want|)).

Before writing, every case is recomputed in float32 PyTorch and checked against the f64
reference under its own tolerances, so a tolerance that an honest f32 implementation cannot
meet is caught here, not in C++.

The output is deterministic: fixed per-case seeds (crc32 of the case name), one thread, and
a hand-written compact JSON emitter with shortest round-trip f32 formatting.
"""
import importlib
import math
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_json import encode_tensor as _encode_tensor, scaled_error, write_fixtures  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "data", "op_fixtures.json")

DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6
MAX_ELEMENTS = 200

# ----------------------------------------------------------------------------------------
# input makers (all draw from the case's generator; float values are rounded to f32)


class Maker:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    @staticmethod
    def _f32(t):
        return t.to(torch.float32).to(torch.float64)

    def randn(self, *shape, scale=1.0):
        return self._f32(torch.randn(tuple(shape), generator=self.g, dtype=torch.float64) * scale)

    def uniform(self, *shape, lo=0.0, hi=1.0):
        u = torch.rand(*shape, generator=self.g, dtype=torch.float64)
        return self._f32(lo + (hi - lo) * u)

    def positive(self, *shape):
        """|randn| + 0.5: safe for log, sqrt, rsqrt, pow with fractional exponents."""
        return self._f32(torch.randn(*shape, generator=self.g, dtype=torch.float64).abs() + 0.5)

    def away_from_zero(self, *shape, gap=0.1):
        """randn pushed at least `gap` away from 0 (relu, abs, sign, div denominators)."""
        x = torch.randn(*shape, generator=self.g, dtype=torch.float64)
        s = torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))
        return self._f32(s * (x.abs() + gap))

    def distinct(self, *shape):
        """A random permutation of well separated values (no ties for max/min/argmax)."""
        n = math.prod(shape)
        perm = torch.randperm(n, generator=self.g).to(torch.float64)
        jitter = torch.rand(n, generator=self.g, dtype=torch.float64) * 0.5
        return self._f32(((perm + jitter) * 0.25 - n * 0.125).reshape(shape))

    def randint(self, lo, hi, *shape):
        return torch.randint(lo, hi, shape, generator=self.g, dtype=torch.int64)

    def mask(self, *shape):
        return torch.rand(*shape, generator=self.g) < 0.5

    def softmax_rows(self, *shape):
        return self._f32(torch.softmax(torch.randn(*shape, generator=self.g, dtype=torch.float64), -1))


# ----------------------------------------------------------------------------------------
# case registry

CASES = []


def case(name, make, fn, diff=(), attrs=None, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL, exact=False):
    """make(Maker) -> dict of input tensors; fn(inputs dict) -> out or (out, extras dict).
    exact: the inputs keep their own dtypes (mixed-dtype cases: torch promotes them, the
    reference is computed in those dtypes) and every tensor is stored in its dtype."""
    CASES.append(dict(name=name, make=make, fn=fn, diff=tuple(diff), attrs=attrs or {},
                      rtol=rtol, atol=atol, exact=exact))


def unary(name, make, fn, **kw):
    case(name, lambda m: {"x": make(m)}, lambda t: fn(t["x"]), diff=("x",), **kw)


def binary(name, make_a, make_b, fn, **kw):
    case(name, lambda m: {"a": make_a(m), "b": make_b(m)}, lambda t: fn(t["a"], t["b"]),
         diff=("a", "b"), **kw)


# ---- linear algebra
for nm, sa, sb in [("matmul_2d", (3, 4), (4, 5)),
                   ("matmul_1d_2d", (4,), (4, 3)),
                   ("matmul_2d_1d", (3, 4), (4,)),
                   ("matmul_1d_1d", (5,), (5,)),
                   ("matmul_batched_2d", (2, 3, 4), (4, 5)),
                   ("matmul_2d_batched", (3, 4), (2, 4, 5)),
                   ("matmul_batched", (2, 3, 4), (2, 4, 2)),
                   ("matmul_batch_broadcast", (2, 1, 3, 4), (3, 4, 2)),
                   ("matmul_batched_1d", (2, 3, 4), (4,)),
                   ("matmul_1d_batched", (4,), (2, 4, 3)),
                   ("matmul_lead_broadcast", (1, 3, 4), (2, 4, 2))]:
    binary(nm, lambda m, s=sa: m.randn(*s), lambda m, s=sb: m.randn(*s), torch.matmul)

case("linear_bias_3d",
     lambda m: {"x": m.randn(2, 3, 4), "weight": m.randn(5, 4), "bias": m.randn(5)},
     lambda t: F.linear(t["x"], t["weight"], t["bias"]), diff=("x", "weight", "bias"))
case("linear_nobias",
     lambda m: {"x": m.randn(3, 4), "weight": m.randn(2, 4)},
     lambda t: F.linear(t["x"], t["weight"]), diff=("x", "weight"))
binary("mm", lambda m: m.randn(3, 4), lambda m: m.randn(4, 5), torch.mm)
binary("bmm", lambda m: m.randn(2, 3, 4), lambda m: m.randn(2, 4, 2), torch.bmm)
binary("dot", lambda m: m.randn(5), lambda m: m.randn(5), torch.dot)
binary("outer", lambda m: m.randn(3), lambda m: m.randn(4), torch.outer)
case("addmm", lambda m: {"input": m.randn(5), "a": m.randn(3, 4), "b": m.randn(4, 5)},
     lambda t: torch.addmm(t["input"], t["a"], t["b"], beta=0.5, alpha=2.0),
     diff=("input", "a", "b"), attrs={"beta": 0.5, "alpha": 2.0})
case("baddbmm", lambda m: {"input": m.randn(2, 3, 2), "a": m.randn(2, 3, 4), "b": m.randn(2, 4, 2)},
     lambda t: torch.baddbmm(t["input"], t["a"], t["b"], beta=-1.0, alpha=0.5),
     diff=("input", "a", "b"), attrs={"beta": -1.0, "alpha": 0.5})
case("linear_1d",
     lambda m: {"x": m.randn(4), "weight": m.randn(3, 4), "bias": m.randn(3)},
     lambda t: F.linear(t["x"], t["weight"], t["bias"]), diff=("x", "weight", "bias"))
case("linear_nobias_3d",
     lambda m: {"x": m.randn(2, 2, 3), "weight": m.randn(4, 3)},
     lambda t: F.linear(t["x"], t["weight"]), diff=("x", "weight"))

# ---- binary elementwise (same shape, [3,1]x[1,4], [2,3,4]x[4], [4]x[2,3,4])
BCAST = [("", (3, 4), (3, 4)), ("_bcast_col_row", (3, 1), (1, 4)),
         ("_bcast_trailing", (2, 3, 4), (4,)), ("_bcast_lead", (4,), (2, 3, 4)),
         ("_bcast_mid", (2, 1, 4), (3, 1))]
for op, fn in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul)]:
    for suffix, sa, sb in BCAST:
        binary(op + suffix, lambda m, s=sa: m.randn(*s), lambda m, s=sb: m.randn(*s), fn)
for suffix, sa, sb in BCAST:
    binary("div" + suffix, lambda m, s=sa: m.randn(*s), lambda m, s=sb: m.away_from_zero(*s, gap=0.5),
           torch.div)


for op, fn in [("maximum", torch.maximum), ("minimum", torch.minimum)]:
    for suffix, sa, sb in BCAST[:3]:
        def make(m, sa=sa, sb=sb):
            while True:
                a, b = m.randn(*sa), m.randn(*sb)
                x, y = torch.broadcast_tensors(a, b)
                if ((x - y).abs() > 0.05).all():
                    return {"a": a, "b": b}
        case(op + suffix, make, lambda t, fn=fn: fn(t["a"], t["b"]), diff=("a", "b"))

binary("pow_tensor", lambda m: m.positive(3, 4), lambda m: m.randn(3, 4), torch.pow)
binary("pow_tensor_bcast", lambda m: m.positive(2, 3, 4), lambda m: m.randn(4), torch.pow)

# ---- with a scalar
unary("add_scalar", lambda m: m.randn(3, 4), lambda x: x + 1.25, attrs={"s": 1.25})
unary("mul_scalar", lambda m: m.randn(3, 4), lambda x: x * -0.5, attrs={"s": -0.5})
unary("rsub_scalar", lambda m: m.randn(3, 4), lambda x: 2.0 - x, attrs={"s": 2.0})
unary("rdiv_scalar", lambda m: m.away_from_zero(3, 4, gap=0.5), lambda x: 3.0 / x, attrs={"s": 3.0})
unary("scale", lambda m: m.randn(2, 3, 4), lambda x: x * 0.75, attrs={"s": 0.75})
unary("pow_scalar_3", lambda m: m.randn(3, 4), lambda x: x ** 3.0, attrs={"p": 3.0})
unary("pow_scalar_2", lambda m: m.randn(3, 4), lambda x: x ** 2.0, attrs={"p": 2.0})
unary("pow_scalar_half", lambda m: m.positive(3, 4), lambda x: x ** 0.5, attrs={"p": 0.5})
unary("pow_scalar_neg", lambda m: m.positive(3, 4), lambda x: x ** -1.5, attrs={"p": -1.5})


def clamp_input(m):
    x = m.uniform(4, 5, lo=-1.0, hi=1.0)
    near = ((x.abs() - 0.5).abs() < 0.05)
    return m._f32(torch.where(near, x * 1.3, x))


unary("clamp", clamp_input, lambda x: torch.clamp(x, -0.5, 0.5), attrs={"lo": -0.5, "hi": 0.5})

# ---- unary elementwise
unary("neg", lambda m: m.randn(3, 4), torch.neg)
unary("abs", lambda m: m.away_from_zero(3, 4), torch.abs)
unary("sqrt", lambda m: m.positive(3, 4), torch.sqrt)
unary("rsqrt", lambda m: m.positive(3, 4), torch.rsqrt)
unary("square", lambda m: m.randn(3, 4), torch.square)
unary("exp", lambda m: m.randn(3, 4), torch.exp)
unary("log", lambda m: m.positive(3, 4), torch.log)
unary("relu", lambda m: m.away_from_zero(3, 4), torch.relu)
unary("sigmoid", lambda m: m.randn(3, 4, scale=2.0), torch.sigmoid)
unary("tanh", lambda m: m.randn(3, 4, scale=1.5), torch.tanh)
unary("gelu_erf", lambda m: m.randn(3, 5, scale=2.0), lambda x: F.gelu(x),
      attrs={"approximate": "none"})
unary("gelu_tanh", lambda m: m.randn(3, 5, scale=2.0), lambda x: F.gelu(x, approximate="tanh"),
      attrs={"approximate": "tanh"})
unary("silu", lambda m: m.randn(3, 5, scale=2.0), F.silu)
case("sign", lambda m: {"x": m.away_from_zero(3, 4)}, lambda t: torch.sign(t["x"]), diff=("x",))

# ---- comparisons (bool outputs, no gradient)
for op, fn in [("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le),
               ("gt", torch.gt), ("ge", torch.ge)]:
    def make(m):
        a = m.randint(0, 3, 3, 4).to(torch.float64)  # small integers: plenty of ties
        b = m.randint(0, 3, 4).to(torch.float64)
        return {"a": a, "b": b}
    case("cmp_" + op, make, lambda t, fn=fn: fn(t["a"], t["b"]))

# ---- softmax family
for nm, shape, dim in [("softmax_dim0", (3, 4), 0), ("softmax_last", (3, 4), -1),
                       ("softmax_3d_dim1", (2, 3, 4), 1)]:
    unary(nm, lambda m, s=shape: m.randn(*s, scale=2.0), lambda x, d=dim: torch.softmax(x, d),
          attrs={"dim": dim})
    unary("log_" + nm, lambda m, s=shape: m.randn(*s, scale=2.0),
          lambda x, d=dim: torch.log_softmax(x, d), attrs={"dim": dim})

# ---- reductions
unary("sum_all", lambda m: m.randn(2, 3, 4), torch.sum)
unary("sum_dim1", lambda m: m.randn(2, 3, 4), lambda x: x.sum([1]), attrs={"dims": [1], "keepdim": False})
unary("sum_dims_keepdim", lambda m: m.randn(2, 3, 4), lambda x: x.sum([0, 2], keepdim=True),
      attrs={"dims": [0, 2], "keepdim": True})
unary("sum_neg_dim", lambda m: m.randn(2, 3, 4), lambda x: x.sum([-1]), attrs={"dims": [-1], "keepdim": False})
unary("mean_all", lambda m: m.randn(2, 3, 4), torch.mean)
unary("mean_dim1", lambda m: m.randn(2, 3, 4), lambda x: x.mean([1]), attrs={"dims": [1], "keepdim": False})
unary("mean_dims_keepdim", lambda m: m.randn(2, 3, 4), lambda x: x.mean([0, 2], keepdim=True),
      attrs={"dims": [0, 2], "keepdim": True})
unary("max_all", lambda m: m.distinct(3, 5), torch.max)
unary("min_all", lambda m: m.distinct(3, 5), torch.min)
unary("max_dim1", lambda m: m.distinct(3, 5), lambda x: torch.amax(x, [1]), attrs={"dims": [1], "keepdim": False})
unary("max_dim0_keepdim", lambda m: m.distinct(3, 5), lambda x: torch.amax(x, [0], keepdim=True),
      attrs={"dims": [0], "keepdim": True})
unary("min_dim1", lambda m: m.distinct(3, 5), lambda x: torch.amin(x, [1]), attrs={"dims": [1], "keepdim": False})
unary("min_dims_keepdim", lambda m: m.distinct(2, 3, 4), lambda x: torch.amin(x, [0, 2], keepdim=True),
      attrs={"dims": [0, 2], "keepdim": True})
unary("var_all", lambda m: m.randn(3, 5), lambda x: torch.var(x), attrs={"correction": 1})
unary("var_dim1", lambda m: m.randn(3, 5), lambda x: torch.var(x, [1], unbiased=True),
      attrs={"dims": [1], "correction": 1, "keepdim": False})
unary("var_dims_c0_keepdim", lambda m: m.randn(2, 3, 4), lambda x: torch.var(x, [0, 2], unbiased=False, keepdim=True),
      attrs={"dims": [0, 2], "correction": 0, "keepdim": True})
unary("var_dim0_c1_keepdim", lambda m: m.randn(4, 3), lambda x: torch.var(x, [0], unbiased=True, keepdim=True),
      attrs={"dims": [0], "correction": 1, "keepdim": True})
for op, fn in [("argmax", torch.argmax), ("argmin", torch.argmin)]:
    case(op + "_dim1", lambda m: {"x": m.distinct(3, 5)}, lambda t, fn=fn: fn(t["x"], 1),
         attrs={"dim": 1, "keepdim": False})
    case(op + "_dim0_keepdim", lambda m: {"x": m.distinct(3, 5)},
         lambda t, fn=fn: fn(t["x"], 0, keepdim=True), attrs={"dim": 0, "keepdim": True})
    case(op + "_3d_neg", lambda m: {"x": m.distinct(2, 3, 4)}, lambda t, fn=fn: fn(t["x"], -1),
         attrs={"dim": -1, "keepdim": False})

# ---- shape ops
unary("reshape", lambda m: m.randn(2, 3, 4), lambda x: x.reshape(4, 6), attrs={"shape": [4, 6]})
unary("reshape_infer", lambda m: m.randn(2, 3, 4), lambda x: x.reshape(-1, 3), attrs={"shape": [-1, 3]})
unary("transpose", lambda m: m.randn(2, 3, 4), lambda x: x.transpose(0, 2), attrs={"d0": 0, "d1": 2})
unary("transpose_2d", lambda m: m.randn(3, 5), lambda x: x.transpose(0, 1), attrs={"d0": 0, "d1": 1})
unary("t_matrix", lambda m: m.randn(3, 5), lambda x: x.t())
unary("narrow", lambda m: m.randn(4, 5), lambda x: x.narrow(1, 1, 3),
      attrs={"dim": 1, "start": 1, "length": 3})
unary("select", lambda m: m.randn(3, 4, 2), lambda x: x.select(1, -1), attrs={"dim": 1, "index": -1})
unary("permute", lambda m: m.randn(2, 3, 4), lambda x: x.permute(2, 0, 1), attrs={"dims": [2, 0, 1]})
unary("slice_step", lambda m: m.randn(3, 8), lambda x: x[:, 1:7:2],
      attrs={"dim": 1, "start": 1, "end": 7, "step": 2})
unary("slice_neg_start", lambda m: m.randn(5, 3), lambda x: x[-3:5],
      attrs={"dim": 0, "start": -3, "end": 5, "step": 1})
unary("slice_step3", lambda m: m.randn(2, 7, 2), lambda x: x[:, 0:7:3],
      attrs={"dim": 1, "start": 0, "end": 7, "step": 3})
unary("expand", lambda m: m.randn(3, 1), lambda x: x.expand(2, 3, 4), attrs={"shape": [2, 3, 4]})
unary("flatten", lambda m: m.randn(2, 3, 4), lambda x: x.flatten(1, 2), attrs={"start": 1, "end": 2})
unary("squeeze", lambda m: m.randn(3, 1, 4), lambda x: x.squeeze(1), attrs={"dim": 1})
unary("unsqueeze", lambda m: m.randn(3, 4), lambda x: x.unsqueeze(1), attrs={"dim": 1})
unary("sum_to", lambda m: m.randn(2, 3, 4), lambda x: x.sum_to_size(3, 1), attrs={"shape": [3, 1]})
unary("sum_to_leading", lambda m: m.randn(2, 3, 4), lambda x: x.sum_to_size(4), attrs={"shape": [4]})
unary("squeeze_all", lambda m: m.randn(3, 1, 4, 1), lambda x: x.squeeze())
unary("unsqueeze_neg", lambda m: m.randn(3, 4), lambda x: x.unsqueeze(-1), attrs={"dim": -1})
unary("flatten_all", lambda m: m.randn(2, 3, 4), lambda x: x.flatten())
unary("expand_new_leading", lambda m: m.randn(4), lambda x: x.expand(2, 3, 4), attrs={"shape": [2, 3, 4]})
unary("reshape_of_transpose", lambda m: m.randn(3, 4), lambda x: x.transpose(0, 1).reshape(12))
unary("cat_same_input_twice", lambda m: m.randn(2, 3), lambda x: torch.cat([x, x], 0))
unary("split_sizes", lambda m: m.randn(6, 2),
      lambda x: (lambda p: torch.cat([p[1], p[2], p[0]], 0))(torch.split(x, [1, 3, 2], 0)))
case("cat_dim0", lambda m: {"a": m.randn(2, 3), "b": m.randn(1, 3), "c": m.randn(3, 3)},
     lambda t: torch.cat([t["a"], t["b"], t["c"]], 0), diff=("a", "b", "c"), attrs={"dim": 0})
case("cat_dim1", lambda m: {"a": m.randn(2, 3, 2), "b": m.randn(2, 1, 2), "c": m.randn(2, 2, 2)},
     lambda t: torch.cat([t["a"], t["b"], t["c"]], 1), diff=("a", "b", "c"), attrs={"dim": 1})
case("stack_dim0", lambda m: {"a": m.randn(2, 3), "b": m.randn(2, 3), "c": m.randn(2, 3)},
     lambda t: torch.stack([t["a"], t["b"], t["c"]], 0), diff=("a", "b", "c"), attrs={"dim": 0})
case("stack_dim1", lambda m: {"a": m.randn(2, 3), "b": m.randn(2, 3), "c": m.randn(2, 3)},
     lambda t: torch.stack([t["a"], t["b"], t["c"]], 1), diff=("a", "b", "c"), attrs={"dim": 1})
case("stack_last", lambda m: {"a": m.randn(2, 3), "b": m.randn(2, 3)},
     lambda t: torch.stack([t["a"], t["b"]], -1), diff=("a", "b"), attrs={"dim": -1})

# ---- indexing
case("index_select_dim0_repeats",
     lambda m: {"x": m.randn(4, 3), "index": torch.tensor([0, 2, 0, 3, 2, 2])},
     lambda t: torch.index_select(t["x"], 0, t["index"]), diff=("x",), attrs={"dim": 0})
case("index_select_dim1_repeats",
     lambda m: {"x": m.randn(3, 4), "index": torch.tensor([3, 1, 3, 3])},
     lambda t: torch.index_select(t["x"], 1, t["index"]), diff=("x",), attrs={"dim": 1})
case("gather_dim1",
     lambda m: {"x": m.randn(3, 4), "index": m.randint(0, 4, 3, 5)},
     lambda t: torch.gather(t["x"], 1, t["index"]), diff=("x",), attrs={"dim": 1})
case("gather_dim0",
     lambda m: {"x": m.randn(3, 4), "index": m.randint(0, 3, 2, 4)},
     lambda t: torch.gather(t["x"], 0, t["index"]), diff=("x",), attrs={"dim": 0})
case("scatter_add_dim1",
     lambda m: {"x": m.randn(3, 5), "index": m.randint(0, 5, 3, 4), "src": m.randn(3, 4)},
     lambda t: torch.scatter_add(t["x"], 1, t["index"], t["src"]), diff=("x", "src"), attrs={"dim": 1})
case("embedding",
     lambda m: {"weight": m.randn(6, 3), "index": torch.tensor([[1, 4, 1, 0], [5, 1, 4, 4]])},
     lambda t: F.embedding(t["index"], t["weight"]), diff=("weight",))
case("where",
     lambda m: {"cond": m.mask(3, 4), "a": m.randn(3, 4), "b": m.randn(4)},
     lambda t: torch.where(t["cond"], t["a"], t["b"]), diff=("a", "b"))
case("where_bcast",
     lambda m: {"cond": m.mask(1, 4), "a": m.randn(3, 1), "b": m.randn(3, 4)},
     lambda t: torch.where(t["cond"], t["a"], t["b"]), diff=("a", "b"))
case("masked_fill",
     lambda m: {"x": m.randn(3, 4), "mask": m.mask(3, 4)},
     lambda t: t["x"].masked_fill(t["mask"], -1.5), diff=("x",), attrs={"value": -1.5})
case("masked_fill_bcast",
     lambda m: {"x": m.randn(2, 3, 4), "mask": m.mask(3, 1)},
     lambda t: t["x"].masked_fill(t["mask"], 2.0), diff=("x",), attrs={"value": 2.0})

# ---- normalisation
case("layer_norm_affine",
     lambda m: {"x": m.randn(2, 3, 4, scale=2.0), "weight": m.randn(4), "bias": m.randn(4)},
     lambda t: F.layer_norm(t["x"], [4], t["weight"], t["bias"], 1e-5),
     diff=("x", "weight", "bias"), attrs={"normalized_shape": [4], "eps": 1e-5})
case("layer_norm_weight_only",
     lambda m: {"x": m.randn(3, 4), "weight": m.randn(4)},
     lambda t: F.layer_norm(t["x"], [4], t["weight"], None, 1e-5),
     diff=("x", "weight"), attrs={"normalized_shape": [4], "eps": 1e-5})
case("layer_norm_plain_2dims",
     lambda m: {"x": m.randn(2, 3, 4, scale=2.0)},
     lambda t: F.layer_norm(t["x"], [3, 4], None, None, 1e-5),
     diff=("x",), attrs={"normalized_shape": [3, 4], "eps": 1e-5})


# rms_norm: torch 1.13 has no F.rms_norm; its definition (torch 2.4) written out.
def _rms_norm(x, dims, weight, eps):
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y if weight is None else y * weight


case("rms_norm_weight",
     lambda m: {"x": m.randn(2, 3, 8, scale=2.0), "weight": m.randn(8)},
     lambda t: _rms_norm(t["x"], [-1], t["weight"], 1e-6),
     diff=("x", "weight"), attrs={"normalized_shape": [8], "eps": 1e-6})
# eps left out: torch.finfo(torch.float32).eps, what the C++ side's f32 run uses
case("rms_norm_plain_2dims",
     lambda m: {"x": m.randn(2, 3, 4, scale=0.5)},
     lambda t: _rms_norm(t["x"], [-2, -1], None, torch.finfo(torch.float32).eps),
     diff=("x",), attrs={"normalized_shape": [3, 4]})


def bn_train(t):
    rm, rv = t["running_mean"].clone(), t["running_var"].clone()
    out = F.batch_norm(t["x"], rm, rv, t["weight"], t["bias"], training=True, momentum=0.1, eps=1e-5)
    return out, {"running_mean_after": rm, "running_var_after": rv}


def bn_eval(t):
    return F.batch_norm(t["x"], t["running_mean"], t["running_var"], t["weight"], t["bias"],
                        training=False, momentum=0.1, eps=1e-5)


def bn_inputs(*shape):
    c = shape[1]
    return lambda m: {"x": m.randn(*shape, scale=2.0), "running_mean": m.randn(c, scale=0.5),
                      "running_var": m.positive(c), "weight": m.randn(c), "bias": m.randn(c)}


BN_ATTRS = {"momentum": 0.1, "eps": 1e-5}
case("batch_norm_train_2d", bn_inputs(5, 3), bn_train, diff=("x", "weight", "bias"),
     attrs=dict(BN_ATTRS, training=True), rtol=2e-5, atol=2e-6)
case("batch_norm_train_3d", bn_inputs(2, 3, 4), bn_train, diff=("x", "weight", "bias"),
     attrs=dict(BN_ATTRS, training=True), rtol=2e-5, atol=2e-6)
case("batch_norm_train_4d", bn_inputs(2, 2, 2, 3), bn_train, diff=("x", "weight", "bias"),
     attrs=dict(BN_ATTRS, training=True), rtol=2e-5, atol=2e-6)
case("batch_norm_eval", bn_inputs(4, 3), bn_eval, diff=("x", "weight", "bias"),
     attrs=dict(BN_ATTRS, training=False))

# ---- losses (the gradient is taken for the input only; targets are data)
RED = {"mean": "mean", "sum": "sum", "none": "none"}
for r in RED:
    case("mse_loss_" + r, lambda m: {"input": m.randn(3, 4), "target": m.randn(3, 4)},
         lambda t, r=r: F.mse_loss(t["input"], t["target"], reduction=r), diff=("input",),
         attrs={"reduction": r})
case("cross_entropy_probs",
     lambda m: {"probs": m.softmax_rows(4, 5), "target": m.softmax_rows(4, 5)},
     lambda t: -(t["target"] * torch.log(t["probs"])).sum() / t["probs"].shape[0],
     diff=("probs",), attrs={"reduction": "mean"})
case("cross_entropy_probs_onehot",
     lambda m: {"probs": m.softmax_rows(3, 4),
                "target": F.one_hot(torch.tensor([2, 0, 3]), 4).to(torch.float64)},
     lambda t: -(t["target"] * torch.log(t["probs"])).sum() / t["probs"].shape[0],
     diff=("probs",), attrs={"reduction": "mean"})


def ce_case(name, n, c, target, extra=(), **opts):
    shape = (n, c) + tuple(extra)
    def make(m):
        return {"logits": m.randn(*shape, scale=2.0), "target": torch.tensor(target)}
    attrs = {"reduction": opts.get("reduction", "mean"), "ignore_index": opts.get("ignore_index", -100),
             "label_smoothing": opts.get("label_smoothing", 0.0)}
    case(name, make, lambda t: F.cross_entropy(t["logits"], t["target"], **opts), diff=("logits",),
         attrs=attrs)


ce_case("cross_entropy", 4, 5, [1, 0, 4, 2])
ce_case("cross_entropy_sum", 4, 5, [1, 0, 4, 2], reduction="sum")
ce_case("cross_entropy_none", 4, 5, [1, 0, 4, 2], reduction="none")
ce_case("cross_entropy_ignore_index", 5, 4, [1, 3, 3, 0, 2], ignore_index=3)
ce_case("cross_entropy_label_smoothing", 4, 5, [1, 0, 4, 2], label_smoothing=0.1)
ce_case("cross_entropy_smoothing_ignore", 5, 4, [1, 3, 3, 0, 2], ignore_index=3, label_smoothing=0.2)
ce_case("cross_entropy_smoothing_sum", 4, 5, [1, 0, 4, 2], label_smoothing=0.1, reduction="sum")
ce_case("cross_entropy_spatial", 2, 3, [[0, 2, 1, 2], [1, 1, 0, 2]], extra=(4,))


def nll_case(name, target, **opts):
    def make(m):
        return {"log_probs": m._f32(torch.log_softmax(m.randn(len(target), 4, scale=2.0), -1)),
                "target": torch.tensor(target)}
    attrs = {"reduction": opts.get("reduction", "mean"), "ignore_index": opts.get("ignore_index", -100)}
    case(name, make, lambda t: F.nll_loss(t["log_probs"], t["target"], **opts), diff=("log_probs",),
         attrs=attrs)


nll_case("nll_loss", [3, 0, 1, 1, 2])
nll_case("nll_loss_sum", [3, 0, 1, 1, 2], reduction="sum")
nll_case("nll_loss_none", [3, 0, 1, 1, 2], reduction="none")
nll_case("nll_loss_ignore_index", [3, 0, 1, 1, 2], ignore_index=1)


def bce_case(name, pos_weight=False, reduction="mean"):
    def make(m):
        d = {"logits": m.randn(4, 3, scale=2.0), "target": m.uniform(4, 3)}
        if pos_weight:
            d["pos_weight"] = m.positive(3)
        return d
    def fn(t):
        return F.binary_cross_entropy_with_logits(t["logits"], t["target"], reduction=reduction,
                                                  pos_weight=t.get("pos_weight"))
    case(name, make, fn, diff=("logits",), attrs={"reduction": reduction})


bce_case("bce_with_logits")
bce_case("bce_with_logits_sum", reduction="sum")
bce_case("bce_with_logits_none", reduction="none")
bce_case("bce_with_logits_pos_weight", pos_weight=True)
bce_case("bce_with_logits_pos_weight_none", pos_weight=True, reduction="none")

# ---- catalogue ops without a case above (tests/test_catalogue.cpp runs every case through the
# three tiers; each catalogue op needs at least one)


def with_zeros(m):
    x = m.away_from_zero(3, 4, gap=0.3)
    x[0, 1] = 0.0          # a row with one zero: its gradient is the product of the others
    x[2, 0] = x[2, 3] = 0.0  # two zeros: every gradient of that row is 0
    return x


unary("prod_all", lambda m: m.uniform(2, 3, lo=0.5, hi=1.5), lambda x: x.prod())
unary("prod_dim1", with_zeros, lambda x: x.prod(1), attrs={"dim": 1})
case("logical_not", lambda m: {"x": m.mask(3, 4)}, lambda t: torch.logical_not(t["x"]))
case("logical_not_float", lambda m: {"x": m.randn(3, 4) * m.mask(3, 4)},
     lambda t: torch.logical_not(t["x"]))
unary("clone", lambda m: m.randn(3, 4), lambda x: x.clone())
unary("contiguous", lambda m: m.randn(3, 4), lambda x: x.t().contiguous())
unary("to", lambda m: m.randn(3, 4), lambda x: x.to(torch.float64).to(x.dtype))
unary("view", lambda m: m.randn(3, 4), lambda x: x.view(2, 6))
unary("split", lambda m: m.randn(3, 5), lambda x: torch.split(x, 2, dim=1)[1])
unary("chunk", lambda m: m.randn(5, 2), lambda x: torch.chunk(x, 3, dim=0)[2])
case("conv2d_pad1",
     lambda m: {"x": m.randn(2, 3, 5, 5), "weight": m.randn(4, 3, 3, 3, scale=0.5),
                "bias": m.randn(4)},
     lambda t: F.conv2d(t["x"], t["weight"], t["bias"], padding=1), diff=("x", "weight", "bias"),
     attrs={"stride": 1, "padding": 1, "groups": 1}, rtol=1e-4, atol=1e-5)
case("conv2d_groups_stride2",
     lambda m: {"x": m.randn(1, 4, 6, 6), "weight": m.randn(6, 2, 3, 3, scale=0.5)},
     lambda t: F.conv2d(t["x"], t["weight"], stride=2, groups=2), diff=("x", "weight"),
     attrs={"stride": 2, "padding": 0, "groups": 2}, rtol=1e-4, atol=1e-5)
unary("max_pool2d", lambda m: m.distinct(2, 2, 5, 5), lambda x: F.max_pool2d(x, 2),
      attrs={"kernel": 2})
unary("max_pool2d_with_indices", lambda m: m.distinct(1, 2, 4, 6),
      lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)[0],
      attrs={"kernel": 3, "stride": 2, "padding": 1})
case("max_pool2d_with_indices_indices", lambda m: {"x": m.distinct(1, 2, 4, 6)},
     lambda t: F.max_pool2d(t["x"], 3, stride=2, padding=1, return_indices=True)[1],
     attrs={"kernel": 3, "stride": 2, "padding": 1})
unary("avg_pool2d", lambda m: m.randn(2, 2, 6, 6),
      lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), attrs={"kernel": 3, "stride": 2,
                                                                "padding": 1})

unary("softplus", lambda m: m.randn(3, 4, scale=4.0), lambda x: F.softplus(x))
# ---- activations (issue 16); inputs kept away from each kink
unary("leaky_relu", lambda m: m.away_from_zero(3, 4), lambda x: F.leaky_relu(x),
      attrs={"negative_slope": 0.01})
unary("leaky_relu_slope", lambda m: m.away_from_zero(3, 4), lambda x: F.leaky_relu(x, 0.2),
      attrs={"negative_slope": 0.2})
unary("elu", lambda m: m.away_from_zero(3, 4, gap=0.1), lambda x: F.elu(x), attrs={"alpha": 1.0})
unary("elu_alpha", lambda m: m.away_from_zero(3, 4, gap=0.1), lambda x: F.elu(x, 0.5),
      attrs={"alpha": 0.5})
unary("selu", lambda m: m.away_from_zero(3, 4, gap=0.1), F.selu)
unary("mish", lambda m: m.randn(3, 4, scale=3.0), F.mish)
unary("hardtanh", lambda m: m.uniform(3, 4, lo=-2.0, hi=2.0), lambda x: F.hardtanh(x),
      attrs={"min_val": -1.0, "max_val": 1.0})
unary("hardtanh_range", lambda m: m.uniform(3, 4, lo=-2.0, hi=3.0), lambda x: F.hardtanh(x, -0.5, 2.0),
      attrs={"min_val": -0.5, "max_val": 2.0})
unary("hardswish", lambda m: m.uniform(3, 5, lo=-5.0, hi=5.0), F.hardswish)
unary("hardsigmoid", lambda m: m.uniform(3, 5, lo=-5.0, hi=5.0), F.hardsigmoid)
unary("logsigmoid", lambda m: m.randn(3, 4, scale=5.0), F.logsigmoid)
case("prelu", lambda m: {"x": m.away_from_zero(2, 3, 4), "weight": m.uniform(1, lo=0.1, hi=0.4)},
     lambda t: F.prelu(t["x"], t["weight"]), diff=("x", "weight"))
case("prelu_channels", lambda m: {"x": m.away_from_zero(2, 3, 4), "weight": m.uniform(3, lo=0.1, hi=0.4)},
     lambda t: F.prelu(t["x"], t["weight"]), diff=("x", "weight"))
unary("glu", lambda m: m.randn(3, 4), lambda x: F.glu(x), attrs={"dim": -1})
unary("glu_dim0", lambda m: m.randn(4, 3), lambda x: F.glu(x, 0), attrs={"dim": 0})

# ---- the math library (issue 16)
unary("sin", lambda m: m.randn(3, 4, scale=2.0), torch.sin)
unary("cos", lambda m: m.randn(3, 4, scale=2.0), torch.cos)
unary("tan", lambda m: m.uniform(3, 4, lo=-1.2, hi=1.2), torch.tan)
unary("asin", lambda m: m.uniform(3, 4, lo=-0.9, hi=0.9), torch.asin)
unary("acos", lambda m: m.uniform(3, 4, lo=-0.9, hi=0.9), torch.acos)
unary("atan", lambda m: m.randn(3, 4, scale=2.0), torch.atan)
unary("sinh", lambda m: m.randn(3, 4, scale=1.5), torch.sinh)
unary("cosh", lambda m: m.randn(3, 4, scale=1.5), torch.cosh)
unary("floor", lambda m: m.randn(3, 4, scale=3.0), torch.floor)
unary("ceil", lambda m: m.randn(3, 4, scale=3.0), torch.ceil)
unary("round", lambda m: m.randn(3, 4, scale=3.0), torch.round)
# ties: no gradient case (a finite difference across a tie is not the zero gradient)
case("round_half_to_even",
     lambda m: {"x": m._f32(torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.2, -3.7],
                                         dtype=torch.float64))},
     lambda t: torch.round(t["x"]))
unary("trunc", lambda m: m.randn(3, 4, scale=3.0), torch.trunc)
unary("frac", lambda m: m.randn(3, 4, scale=3.0), torch.frac)
unary("log1p", lambda m: m.uniform(3, 4, lo=-0.5, hi=3.0), torch.log1p)
unary("log1p_tiny", lambda m: m.uniform(6, lo=-1e-6, hi=1e-6), torch.log1p, atol=1e-13)
unary("expm1", lambda m: m.randn(3, 4), torch.expm1)
unary("expm1_tiny", lambda m: m.uniform(6, lo=-1e-6, hi=1e-6), torch.expm1, atol=1e-13)
unary("log2", lambda m: m.positive(3, 4), torch.log2)
unary("log10", lambda m: m.positive(3, 4), torch.log10)
unary("exp2", lambda m: m.randn(3, 4, scale=2.0), torch.exp2)
unary("reciprocal", lambda m: m.away_from_zero(3, 4, gap=0.5), torch.reciprocal)
unary("erf", lambda m: m.randn(3, 4, scale=1.5), torch.erf)
unary("erfc", lambda m: m.randn(3, 4, scale=1.5), torch.erfc)
unary("erfinv", lambda m: m.uniform(3, 4, lo=-0.95, hi=0.95), torch.erfinv)
def sign_mix(m, *shape):
    """-1, 0 and 1 (the logical ops read non-zero as true)."""
    return m._f32(m.randint(-1, 2, *shape).to(torch.float64))


def zero_rows(m):
    """[4, 3]: a row of zeros, a row without zeros, two mixed rows (any/all differ per row)."""
    x = sign_mix(m, 4, 3)
    x[0] = 0.0
    x[1] = torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64)
    x[2, 0] = 0.0
    x[3, 1] = 1.0
    return x


# ---- reductions built from the others (issue 16)
unary("std_dim1", lambda m: m.randn(3, 5), lambda x: torch.std(x, dim=1, unbiased=True),
      attrs={"dims": [1], "correction": 1, "keepdim": False})
unary("std_all_c0", lambda m: m.randn(3, 4), lambda x: torch.std(x, unbiased=False),
      attrs={"dims": [], "correction": 0, "keepdim": False})
unary("logsumexp_dim1", lambda m: m.randn(3, 5, scale=3.0), lambda x: torch.logsumexp(x, 1),
      attrs={"dims": [1], "keepdim": False})
unary("logsumexp_keepdim", lambda m: m.randn(2, 3, 4, scale=3.0),
      lambda x: torch.logsumexp(x, [0, 2], keepdim=True), attrs={"dims": [0, 2], "keepdim": True})
unary("logsumexp_large", lambda m: m._f32(m.randn(2, 6, scale=3.0) + 500.0),
      lambda x: torch.logsumexp(x, 1), attrs={"dims": [1], "keepdim": False},
      rtol=1e-4)  # its gradient, exp(x - lse) with lse ~ 500, holds f32 to ~1e-5
unary("norm_2", lambda m: m.randn(3, 4), lambda x: torch.linalg.vector_norm(x, 2),
      attrs={"p": 2.0, "dims": [], "keepdim": False})
unary("norm_1_dim1", lambda m: m.away_from_zero(3, 4), lambda x: torch.linalg.vector_norm(x, 1, dim=1),
      attrs={"p": 1.0, "dims": [1], "keepdim": False})
unary("norm_inf", lambda m: m.distinct(3, 4), lambda x: torch.linalg.vector_norm(x, float("inf"), dim=0),
      attrs={"p": "inf", "dims": [0], "keepdim": False})
unary("norm_3_keepdim", lambda m: m.away_from_zero(3, 4),
      lambda x: torch.linalg.vector_norm(x, 3, dim=1, keepdim=True),
      attrs={"p": 3.0, "dims": [1], "keepdim": True})
# log of a negative is NaN: the NaN-skipping reductions see real NaNs (the JSON holds no NaN)
# x + a / b with 0 / 0 in places: NaN there, skipped (a / b is true division in every dtype, so
# the integer runs of the dtype tier see the same NaNs)
case("nansum_dim1", lambda m: {"x": m.randn(3, 4),
                               "a": m._f32(torch.tensor([[0.0, 1.0, 0.0, 2.0]] * 3, dtype=torch.float64)),
                               "b": m._f32(torch.tensor([[0.0, 2.0, 0.0, 4.0]] * 3, dtype=torch.float64))},
     lambda t: torch.nansum(t["x"] + t["a"] / t["b"], dim=1), diff=("x",),
     attrs={"dims": [1], "keepdim": False})
unary("nanmean_all", lambda m: m.away_from_zero(3, 4, gap=0.3), lambda x: torch.nanmean(torch.log(x)),
      attrs={"dims": [], "keepdim": False})
case("count_nonzero_dim1", lambda m: {"x": sign_mix(m, 3, 5)}, lambda t: torch.count_nonzero(t["x"], dim=1),
     attrs={"dims": [1]})
case("count_nonzero_all", lambda m: {"x": sign_mix(m, 3, 5)}, lambda t: torch.count_nonzero(t["x"]),
     attrs={"dims": []})
case("any_dim1", lambda m: {"x": zero_rows(m)}, lambda t: torch.any(t["x"], dim=1),
     attrs={"dims": [1], "keepdim": False})
case("all_dim1", lambda m: {"x": zero_rows(m)}, lambda t: torch.all(t["x"], dim=1),
     attrs={"dims": [1], "keepdim": False})
case("any_all_keepdim", lambda m: {"x": zero_rows(m)}, lambda t: torch.any(t["x"]).reshape(1, 1),
     attrs={"dims": [], "keepdim": True})
case("all_all", lambda m: {"x": zero_rows(m)}, lambda t: torch.all(t["x"]),
     attrs={"dims": [], "keepdim": False})

binary("atan2", lambda m: m.randn(3, 4), lambda m: m.away_from_zero(3, 4, gap=0.3), torch.atan2)
binary("atan2_bcast", lambda m: m.randn(3, 1), lambda m: m.away_from_zero(4, gap=0.3), torch.atan2)
binary("fmod", lambda m: m.randn(3, 4, scale=3.0), lambda m: m.away_from_zero(3, 4, gap=0.5),
       torch.fmod)
binary("remainder", lambda m: m.randn(3, 4, scale=3.0), lambda m: m.away_from_zero(3, 4, gap=0.5),
       torch.remainder)
case("fmod_scalar", lambda m: {"x": m.randn(3, 4, scale=3.0)}, lambda t: torch.fmod(t["x"], -1.5),
     diff=("x",), attrs={"other": -1.5})
case("remainder_scalar", lambda m: {"x": m.randn(3, 4, scale=3.0)},
     lambda t: torch.remainder(t["x"], -1.5), diff=("x",), attrs={"other": -1.5})



for nm, fn in [("logical_and", torch.logical_and), ("logical_or", torch.logical_or),
               ("logical_xor", torch.logical_xor)]:
    case(nm, lambda m: {"a": sign_mix(m, 3, 4), "b": sign_mix(m, 3, 4)},
         lambda t, fn=fn: fn(t["a"], t["b"]))
    case(nm + "_bcast", lambda m: {"a": sign_mix(m, 3, 1), "b": sign_mix(m, 4)},
         lambda t, fn=fn: fn(t["a"], t["b"]))
case("clamp_min", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.clamp_min(t["x"], -0.3),
     diff=("x",), attrs={"min": -0.3})
case("clamp_max", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.clamp_max(t["x"], 0.4),
     diff=("x",), attrs={"max": 0.4})
case("clamp_only_max", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.clamp(t["x"], max=0.4),
     diff=("x",), attrs={"max": 0.4})
case("clamp_tensor_bounds",
     lambda m: {"x": m.randn(3, 4, scale=2.0), "lo": m.uniform(3, 4, lo=-1.5, hi=-0.5),
                "hi": m.uniform(4, lo=0.5, hi=1.5)},
     lambda t: torch.clamp(t["x"], t["lo"], t["hi"]), diff=("x", "lo", "hi"))
# zeros over zeros and ones: NaN, +inf, -inf and finite values (the JSON holds finite ones only)
NONFINITE = lambda m: {"a": m._f32(torch.tensor([0.0, 1.0, -1.0, 0.0, 2.0, -3.0], dtype=torch.float64)),
                       "b": m._f32(torch.tensor([0.0, 0.0, 0.0, 1.0, 4.0, 2.0], dtype=torch.float64))}
case("isnan", NONFINITE, lambda t: torch.isnan(t["a"] / t["b"]))
case("isinf", NONFINITE, lambda t: torch.isinf(t["a"] / t["b"]))
case("isfinite", NONFINITE, lambda t: torch.isfinite(t["a"] / t["b"]))
case("nan_to_num_nonfinite", NONFINITE,
     lambda t: torch.nan_to_num(t["a"] / t["b"], nan=0.5, posinf=10.0, neginf=-10.0),
     attrs={"nan": 0.5, "posinf": 10.0, "neginf": -10.0})
case("nan_to_num", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.nan_to_num(t["x"]), diff=("x",))
case("lerp", lambda m: {"start": m.randn(3, 4), "end": m.randn(3, 4), "weight": m.uniform(4)},
     lambda t: torch.lerp(t["start"], t["end"], t["weight"]), diff=("start", "end", "weight"))
case("lerp_scalar", lambda m: {"start": m.randn(3, 4), "end": m.randn(3, 4)},
     lambda t: torch.lerp(t["start"], t["end"], 0.3), diff=("start", "end"), attrs={"weight": 0.3})
case("addcmul", lambda m: {"x": m.randn(3, 4), "t1": m.randn(3, 4), "t2": m.randn(4)},
     lambda t: torch.addcmul(t["x"], t["t1"], t["t2"], value=0.5), diff=("x", "t1", "t2"),
     attrs={"value": 0.5})
case("addcdiv", lambda m: {"x": m.randn(3, 4), "t1": m.randn(3, 4), "t2": m.away_from_zero(3, 4, gap=0.5)},
     lambda t: torch.addcdiv(t["x"], t["t1"], t["t2"], value=-2.0), diff=("x", "t1", "t2"),
     attrs={"value": -2.0})
unary("softplus_beta2_threshold3", lambda m: m.randn(3, 4, scale=2.0),
      lambda x: F.softplus(x, beta=2.0, threshold=3.0), attrs={"beta": 2.0, "threshold": 3.0})

# ---- sorting, selection and scans (issue 16); `distinct` inputs keep the order unique
case("sort_dim1", lambda m: {"x": m.distinct(3, 5)},
     lambda t: torch.sort(t["x"], dim=1, stable=True).values, diff=("x",), attrs={"dim": 1})
case("sort_desc_dim0", lambda m: {"x": m.distinct(4, 3)},
     lambda t: torch.sort(t["x"], dim=0, descending=True, stable=True).values, diff=("x",),
     attrs={"dim": 0, "descending": True})
case("sort_indices_3d", lambda m: {"x": m.distinct(2, 3, 4)},
     lambda t: torch.sort(t["x"], dim=1, stable=True).indices, attrs={"dim": 1})
case("argsort_last", lambda m: {"x": m.distinct(3, 6)},
     lambda t: torch.argsort(t["x"], dim=-1), attrs={"dim": -1})
case("argsort_desc", lambda m: {"x": m.distinct(5, 2)},
     lambda t: torch.argsort(t["x"], dim=0, descending=True), attrs={"dim": 0, "descending": True})
case("topk_k2", lambda m: {"x": m.distinct(3, 5)}, lambda t: torch.topk(t["x"], 2).values,
     diff=("x",), attrs={"k": 2, "dim": -1, "largest": True})
case("topk_smallest_dim0", lambda m: {"x": m.distinct(5, 3)},
     lambda t: torch.topk(t["x"], 3, dim=0, largest=False).values, diff=("x",),
     attrs={"k": 3, "dim": 0, "largest": False})
case("topk_indices", lambda m: {"x": m.distinct(3, 5)}, lambda t: torch.topk(t["x"], 3).indices,
     attrs={"k": 3, "dim": -1, "largest": True})
case("kthvalue_k2", lambda m: {"x": m.distinct(3, 5)},
     lambda t: torch.kthvalue(t["x"], 2, dim=1).values, diff=("x",),
     attrs={"k": 2, "dim": 1, "keepdim": False})
case("kthvalue_keepdim_dim0", lambda m: {"x": m.distinct(4, 3)},
     lambda t: torch.kthvalue(t["x"], 4, dim=0, keepdim=True).values, diff=("x",),
     attrs={"k": 4, "dim": 0, "keepdim": True})
case("kthvalue_indices", lambda m: {"x": m.distinct(3, 5)},
     lambda t: torch.kthvalue(t["x"], 3, dim=1).indices, attrs={"k": 3, "dim": 1, "keepdim": False})
case("median_all", lambda m: {"x": m.distinct(3, 4)}, lambda t: torch.median(t["x"]), diff=("x",))
case("median_dim1", lambda m: {"x": m.distinct(3, 5)},
     lambda t: torch.median(t["x"], dim=1).values, diff=("x",), attrs={"dim": 1, "keepdim": False})
case("median_even_keepdim", lambda m: {"x": m.distinct(4, 3)},
     lambda t: torch.median(t["x"], dim=0, keepdim=True).values, diff=("x",),
     attrs={"dim": 0, "keepdim": True})
case("median_indices", lambda m: {"x": m.distinct(3, 5)},
     lambda t: torch.median(t["x"], dim=1).indices, attrs={"dim": 1, "keepdim": False})
# log of a mix of signs: NaN where x < 0; nanmedian skips them
case("nanmedian_dim1", lambda m: {"x": m.distinct(3, 6)},
     lambda t: torch.nanmedian(torch.log(t["x"]), dim=1).values, diff=("x",),
     attrs={"dim": 1, "keepdim": False})
case("nanmedian_all", lambda m: {"x": m.distinct(3, 4)},
     lambda t: torch.nanmedian(torch.log(t["x"])), diff=("x",))
case("max_with_indices_dim1", lambda m: {"x": m.distinct(3, 5)},
     lambda t: torch.max(t["x"], dim=1).values, diff=("x",), attrs={"dim": 1, "keepdim": False})
case("max_with_indices_indices", lambda m: {"x": m.distinct(3, 5)},
     lambda t: torch.max(t["x"], dim=0, keepdim=True).indices, attrs={"dim": 0, "keepdim": True})
case("min_with_indices_dim0", lambda m: {"x": m.distinct(4, 3)},
     lambda t: torch.min(t["x"], dim=0, keepdim=True).values, diff=("x",),
     attrs={"dim": 0, "keepdim": True})
case("min_with_indices_indices", lambda m: {"x": m.distinct(3, 5)},
     lambda t: torch.min(t["x"], dim=-1).indices, attrs={"dim": -1, "keepdim": False})
case("cumsum_dim1", lambda m: {"x": m.randn(3, 5)}, lambda t: torch.cumsum(t["x"], 1), diff=("x",),
     attrs={"dim": 1})
case("cumsum_dim0_3d", lambda m: {"x": m.randn(4, 2, 3)}, lambda t: torch.cumsum(t["x"], 0),
     diff=("x",), attrs={"dim": 0})
case("cumprod_dim1", lambda m: {"x": m.uniform(3, 5, lo=0.5, hi=1.5)},
     lambda t: torch.cumprod(t["x"], 1), diff=("x",), attrs={"dim": 1})
# zeros inside the lines: one zero, two zeros, a leading zero (PyTorch's exact gradient)
case("cumprod_zeros", lambda m: {"x": m._f32(torch.tensor(
         [[0.5, 2.0, 0.0, 1.5, -0.7], [1.2, 0.0, 0.8, 0.0, 2.0], [0.0, 1.1, -1.3, 0.9, 1.4]],
         dtype=torch.float64))},
     lambda t: torch.cumprod(t["x"], 1), diff=("x",), attrs={"dim": 1})
case("cummax_dim1", lambda m: {"x": m.distinct(3, 6)}, lambda t: torch.cummax(t["x"], 1).values,
     diff=("x",), attrs={"dim": 1})
case("cummax_indices", lambda m: {"x": m.distinct(3, 6)},
     lambda t: torch.cummax(t["x"], 1).indices, attrs={"dim": 1})
case("cummin_dim0", lambda m: {"x": m.distinct(5, 3)}, lambda t: torch.cummin(t["x"], 0).values,
     diff=("x",), attrs={"dim": 0})
case("cummin_indices", lambda m: {"x": m.distinct(5, 3)},
     lambda t: torch.cummin(t["x"], 0).indices, attrs={"dim": 0})
case("diff_dim1", lambda m: {"x": m.randn(3, 5)}, lambda t: torch.diff(t["x"], dim=1), diff=("x",),
     attrs={"n": 1, "dim": 1})
case("diff_n2_prepend_append",
     lambda m: {"x": m.randn(3, 4), "prepend": m.randn(3, 1), "append": m.randn(3, 2)},
     lambda t: torch.diff(t["x"], n=2, dim=1, prepend=t["prepend"], append=t["append"]),
     diff=("x", "prepend", "append"), attrs={"n": 2, "dim": 1})

# ---- decompositions and einsum (issue 16); well-conditioned matrices
def well_conditioned(m, *shape):
    n = shape[-1]
    return m._f32(m.randn(*shape) + 3.0 * torch.eye(n, dtype=torch.float64))
def spd(m, n):
    a = m.randn(n, n)
    return m._f32(a @ a.T + n * torch.eye(n, dtype=torch.float64))
case("inv", lambda m: {"a": well_conditioned(m, 3, 3)}, lambda t: torch.linalg.inv(t["a"]),
     diff=("a",), rtol=1e-4, atol=1e-5)
case("inv_batched", lambda m: {"a": well_conditioned(m, 2, 3, 3)},
     lambda t: torch.linalg.inv(t["a"]), diff=("a",), rtol=1e-4, atol=1e-5)
case("det", lambda m: {"a": well_conditioned(m, 3, 3)}, lambda t: torch.linalg.det(t["a"]),
     diff=("a",), rtol=1e-4, atol=1e-5)
case("det_batched", lambda m: {"a": m.randn(2, 2, 2)}, lambda t: torch.linalg.det(t["a"]),
     diff=("a",), rtol=1e-4, atol=1e-5)
# Singular matrices (rank 2 and rank 1 of 3): det is 0 and its gradient the cofactor matrix,
# which exists without an inverse. torch 1.13's det backward returns zeros there (its own
# gradcheck fails on the first matrix), so the reference is the Leibniz formula in torch ops,
# whose autograd gives the cofactors; its value is checked against torch.linalg.det.
def det3_leibniz(a):
    terms = [(1, (0, 1, 2)), (-1, (0, 2, 1)), (-1, (1, 0, 2)), (1, (1, 2, 0)), (1, (2, 0, 1)),
             (-1, (2, 1, 0))]
    out = sum(sign * a[..., 0, p[0]] * a[..., 1, p[1]] * a[..., 2, p[2]] for sign, p in terms)
    assert torch.allclose(out, torch.linalg.det(a), atol=1e-6)
    return out


case("det_singular", lambda m: {"a": torch.tensor([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],
                                                   [[1.0, 2.0, -1.0], [2.0, 4.0, -2.0], [-3.0, -6.0, 3.0]]])},
     lambda t: det3_leibniz(t["a"]), diff=("a",), rtol=1e-4, atol=1e-5)
case("solve", lambda m: {"a": well_conditioned(m, 3, 3), "b": m.randn(3, 2)},
     lambda t: torch.linalg.solve(t["a"], t["b"]), diff=("a", "b"), rtol=1e-4, atol=1e-5)
case("solve_vector_broadcast", lambda m: {"a": well_conditioned(m, 2, 3, 3), "b": m.randn(3)},
     lambda t: torch.linalg.solve(t["a"], t["b"]), diff=("a", "b"), rtol=1e-4, atol=1e-5)
# cholesky of (A + Aᵀ)/2: LAPACK reads one triangle, so finite differences see the symmetrised
# input as PyTorch's gradient assumes.
case("cholesky", lambda m: {"a": spd(m, 3)},
     lambda t: torch.linalg.cholesky((t["a"] + t["a"].mT) / 2), diff=("a",), rtol=1e-4, atol=1e-5)
case("qr_q", lambda m: {"a": m.randn(4, 3)}, lambda t: torch.linalg.qr(t["a"]).Q, diff=("a",),
     rtol=1e-4, atol=1e-5)
case("qr_r", lambda m: {"a": m.randn(4, 3)}, lambda t: torch.linalg.qr(t["a"]).R, diff=("a",),
     rtol=1e-4, atol=1e-5)
case("svd_values", lambda m: {"a": m.randn(4, 3)},
     lambda t: torch.linalg.svd(t["a"], full_matrices=False).S, diff=("a",), rtol=1e-4, atol=1e-5)
case("svd_u_projector", lambda m: {"a": m.randn(4, 3)},
     lambda t: (lambda u: u @ u.mT)(torch.linalg.svd(t["a"], full_matrices=False).U), diff=("a",),
     rtol=1e-4, atol=1e-5)
case("svd_v_projector", lambda m: {"a": m.randn(3, 4)},
     lambda t: (lambda vh: vh.mT @ vh)(torch.linalg.svd(t["a"], full_matrices=False).Vh),
     diff=("a",), rtol=1e-4, atol=1e-5)
for nm, eqn, shapes in [("einsum_matmul", "ij,jk->ik", [(3, 4), (4, 2)]),
                        ("einsum_attention", "bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
                        ("einsum_trace", "ii->", [(3, 3)]),
                        ("einsum_diagonal", "ii->i", [(3, 3)]),
                        ("einsum_outer_implicit", "i,j", [(3,), (4,)]),
                        ("einsum_ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]),
                        ("einsum_sum_permute", "ijk->kj", [(2, 3, 4)]),
                        ("einsum_chain", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
                        ("einsum_bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)])]:
    names = ["x%d" % i for i in range(len(shapes))]
    case(nm, lambda m, shapes=shapes, names=names: {k: m.randn(*sh) for k, sh in zip(names, shapes)},
         lambda t, eqn=eqn, names=names: torch.einsum(eqn, *[t[k] for k in names]), diff=tuple(names),
         attrs={"equation": eqn}, rtol=1e-5, atol=1e-5)

# ---- linear algebra, issue 32: eigh, LU, triangular and least-squares solves, pinv, ranks,
# powers and exponentials, Householder products, norms, cond, cross, kron, tensordot, multi_dot.
# Matrices whose decompositions are smooth at the point (distinct eigenvalues, non-zero
# pivots, full rank); eigh reads one triangle, so its differentiable cases symmetrise first
# (as cholesky's above).
def sym(a):
    return (a + a.mT) / 2


def rank2(m):
    """A 4 × 3 matrix of rank 2: its third row is the sum of the first two, its fourth 0
    (small integers, so that the sum is exact in f32 too)."""
    r = m.randint(-3, 4, 2, 3).to(torch.float64)
    return torch.cat([r, r.sum(0, keepdim=True), torch.zeros(1, 3, dtype=torch.float64)])


LA = dict(rtol=1e-4, atol=1e-5)
case("eigh_values", lambda m: {"a": m.randn(3, 3)},
     lambda t: torch.linalg.eigh(sym(t["a"])).eigenvalues, diff=("a",), **LA)
# Eigenvectors are defined up to sign: v[i, j]·v[0, j] does not depend on column j's sign.
case("eigh_vectors_batched", lambda m: {"a": m.randn(2, 3, 3)},
     lambda t: (lambda v: v * v[..., :1, :])(torch.linalg.eigh(sym(t["a"])).eigenvectors),
     diff=("a",), **LA)
case("eigh_upper", lambda m: {"a": m.randn(3, 3)},
     lambda t: torch.linalg.eigh(t["a"], UPLO="U").eigenvalues, **LA)
case("eigvalsh", lambda m: {"a": m.randn(2, 4, 4)},
     lambda t: torch.linalg.eigvalsh(sym(t["a"])), diff=("a",), **LA)
case("slogdet", lambda m: {"a": well_conditioned(m, 2, 3, 3)},
     lambda t: torch.linalg.slogdet(t["a"]).logabsdet, diff=("a",), **LA)
case("slogdet_sign", lambda m: {"a": torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [4.0, -3.0, 8.0]], dtype=torch.float64)},
     lambda t: torch.linalg.slogdet(t["a"]).sign, **LA)
case("lu_factor", lambda m: {"a": m.randn(2, 3, 3)},
     lambda t: torch.linalg.lu_factor(t["a"]).LU, diff=("a",), **LA)
case("lu_factor_wide", lambda m: {"a": m.randn(3, 5)},
     lambda t: torch.linalg.lu_factor(t["a"]).LU, diff=("a",), **LA)
case("lu_factor_tall_batched", lambda m: {"a": m.randn(2, 5, 3)},
     lambda t: torch.linalg.lu_factor(t["a"]).LU, diff=("a",), **LA)
case("lu_factor_pivots", lambda m: {"a": m.randn(3, 4)},
     lambda t: torch.linalg.lu_factor(t["a"]).pivots.long())
case("lu_l", lambda m: {"a": m.randn(3, 3)}, lambda t: torch.linalg.lu(t["a"]).L, diff=("a",),
     **LA)
case("lu_u", lambda m: {"a": m.randn(3, 3)}, lambda t: torch.linalg.lu(t["a"]).U, diff=("a",),
     **LA)
case("lu_p_wide", lambda m: {"a": m.randn(3, 5)}, lambda t: torch.linalg.lu(t["a"]).P)


def lu_inputs(m, batch=()):
    f = torch.linalg.lu_factor(well_conditioned(m, *batch, 3, 3))
    return {"lu": m._f32(f.LU), "pivots": f.pivots.long(), "b": m.randn(*batch, 3, 2)}


case("lu_solve", lambda m: lu_inputs(m),
     lambda t: torch.linalg.lu_solve(t["lu"], t["pivots"].int(), t["b"]), diff=("lu", "b"), **LA)
case("lu_solve_adjoint_right", lambda m: dict(lu_inputs(m, (2,)), b=m.randn(2, 4, 3)),
     lambda t: torch.linalg.lu_solve(t["lu"], t["pivots"].int(), t["b"], left=False,
                                     adjoint=True), diff=("lu", "b"), **LA)
case("solve_triangular_lower", lambda m: {"a": well_conditioned(m, 3, 3), "b": m.randn(3, 2)},
     lambda t: torch.linalg.solve_triangular(t["a"], t["b"], upper=False), diff=("a", "b"), **LA)
case("solve_triangular_upper_right_unit",
     lambda m: {"a": m.randn(2, 3, 3), "b": m.randn(4, 3)},
     lambda t: torch.linalg.solve_triangular(t["a"], t["b"], upper=True, left=False,
                                             unitriangular=True), diff=("a", "b"), **LA)
case("triangular_solve_transpose", lambda m: {"b": m.randn(3, 2), "a": well_conditioned(m, 3, 3)},
     lambda t: torch.triangular_solve(t["b"], t["a"], upper=True, transpose=True).solution,
     diff=("b", "a"), **LA)
# cholesky_solve reads the factor's triangle; torch's gradient treats the whole matrix as the
# factor, so the reference passes it the triangle (the gradient is then that triangle's).
case("cholesky_solve", lambda m: {"b": m.randn(3, 2), "l": well_conditioned(m, 3, 3)},
     lambda t: torch.cholesky_solve(t["b"], torch.tril(t["l"])), diff=("b", "l"), **LA)
case("cholesky_solve_upper", lambda m: {"b": m.randn(2, 3, 2), "l": well_conditioned(m, 3, 3)},
     lambda t: torch.cholesky_solve(t["b"], torch.triu(t["l"]), upper=True), diff=("b", "l"), **LA)
case("lstsq_tall", lambda m: {"a": m.randn(5, 3), "b": m.randn(5, 2)},
     lambda t: torch.linalg.lstsq(t["a"], t["b"]).solution, diff=("a", "b"), **LA)
case("lstsq_wide_batched", lambda m: {"a": m.randn(2, 2, 4), "b": m.randn(2, 3)},
     lambda t: torch.linalg.lstsq(t["a"], t["b"].expand(2, 2, 3)).solution, diff=("a", "b"), **LA)
case("pinv", lambda m: {"a": m.randn(4, 3)}, lambda t: torch.linalg.pinv(t["a"]), diff=("a",),
     **LA)
case("pinv_wide_batched", lambda m: {"a": m.randn(2, 2, 3)}, lambda t: torch.linalg.pinv(t["a"]),
     diff=("a",), **LA)
case("matrix_rank", lambda m: {"a": rank2(m)}, lambda t: torch.linalg.matrix_rank(t["a"]))
case("matrix_rank_batched", lambda m: {"a": torch.stack([rank2(m), m.randn(4, 3)])},
     lambda t: torch.linalg.matrix_rank(t["a"]))
case("matrix_power_3", lambda m: {"a": m.randn(2, 3, 3)},
     lambda t: torch.linalg.matrix_power(t["a"], 3), diff=("a",), **LA)
# torch 1.13's matrix_power(a, -2) backward fails (its inverse is modified in place): the
# reference is the power of the inverse, whose value is checked against it.
def inverse_squared(a):
    out = torch.linalg.inv(a) @ torch.linalg.inv(a)
    assert torch.allclose(out, torch.linalg.matrix_power(a.detach(), -2))
    return out


case("matrix_power_neg2", lambda m: {"a": well_conditioned(m, 3, 3)},
     lambda t: inverse_squared(t["a"]), diff=("a",), **LA)
case("matrix_exp", lambda m: {"a": m.randn(3, 3, scale=0.3)},
     lambda t: torch.linalg.matrix_exp(t["a"]), diff=("a",), **LA)
case("matrix_exp_scaled_batched", lambda m: {"a": m.randn(2, 3, 3, scale=1.5)},
     lambda t: torch.linalg.matrix_exp(t["a"]), diff=("a",), **LA)
case("householder_product", lambda m: {"a": m.randn(4, 3), "tau": m.uniform(2, lo=0.5, hi=1.5)},
     lambda t: torch.linalg.householder_product(t["a"], t["tau"]), diff=("a", "tau"), **LA)
case("householder_product_batched",
     lambda m: {"a": m.randn(2, 3, 3), "tau": m.uniform(2, 3, lo=0.5, hi=1.5)},
     lambda t: torch.linalg.householder_product(t["a"], t["tau"]), diff=("a", "tau"), **LA)
case("vector_norm_2_dim", lambda m: {"x": m.randn(3, 4)},
     lambda t: torch.linalg.vector_norm(t["x"], 2, dim=1), diff=("x",), **LA)
case("vector_norm_3_keepdim", lambda m: {"x": m.away_from_zero(2, 3, 4)},
     lambda t: torch.linalg.vector_norm(t["x"], 3, dim=(0, 2), keepdim=True), diff=("x",), **LA)
case("matrix_norm_fro", lambda m: {"a": m.randn(2, 3, 4)},
     lambda t: torch.linalg.matrix_norm(t["a"]), diff=("a",), **LA)
case("matrix_norm_nuc", lambda m: {"a": m.randn(3, 4)},
     lambda t: torch.linalg.matrix_norm(t["a"], "nuc"), diff=("a",), **LA)
case("matrix_norm_2", lambda m: {"a": m.randn(2, 4, 3)},
     lambda t: torch.linalg.matrix_norm(t["a"], 2), diff=("a",), **LA)
case("matrix_norm_neg2_dims", lambda m: {"a": m.randn(4, 2, 3)},
     lambda t: torch.linalg.matrix_norm(t["a"], -2, dim=(0, 2)), diff=("a",), **LA)
case("matrix_norm_1_keepdim", lambda m: {"a": m.distinct(2, 3, 4)},
     lambda t: torch.linalg.matrix_norm(t["a"], 1, keepdim=True), diff=("a",), **LA)
case("matrix_norm_neginf_dims", lambda m: {"a": m.distinct(3, 2, 4)},
     lambda t: torch.linalg.matrix_norm(t["a"], -float("inf"), dim=(2, 0)), diff=("a",), **LA)
case("cond", lambda m: {"a": m.randn(2, 3, 3)}, lambda t: torch.linalg.cond(t["a"]), diff=("a",),
     **LA)
# torch 1.13's cond backward fails for p other than ±2 (the same in-place inverse): the
# reference is its definition, checked against torch.linalg.cond.
def cond_by_norms(a, p):
    out = torch.linalg.matrix_norm(a, p) * torch.linalg.matrix_norm(torch.linalg.inv(a), p)
    assert torch.allclose(out, torch.linalg.cond(a.detach(), p))
    return out


case("cond_fro", lambda m: {"a": well_conditioned(m, 3, 3)},
     lambda t: cond_by_norms(t["a"], "fro"), diff=("a",), **LA)
case("cond_inf", lambda m: {"a": m.distinct(3, 3) + 3 * torch.eye(3, dtype=torch.float64)},
     lambda t: cond_by_norms(t["a"], float("inf")), diff=("a",), **LA)
case("cross", lambda m: {"a": m.randn(4, 3), "b": m.randn(4, 3)},
     lambda t: torch.linalg.cross(t["a"], t["b"]), diff=("a", "b"), **LA)
case("cross_dim0_broadcast", lambda m: {"a": m.randn(3, 4), "b": m.randn(3, 1)},
     lambda t: torch.linalg.cross(t["a"], t["b"], dim=0), diff=("a", "b"), **LA)
case("kron", lambda m: {"a": m.randn(2, 3), "b": m.randn(3, 2)},
     lambda t: torch.kron(t["a"], t["b"]), diff=("a", "b"), **LA)
case("kron_ranks", lambda m: {"a": m.randn(2, 1, 2), "b": m.randn(2, 3)},
     lambda t: torch.kron(t["a"], t["b"]), diff=("a", "b"), **LA)
case("tensordot_2", lambda m: {"a": m.randn(2, 3, 4), "b": m.randn(3, 4, 2)},
     lambda t: torch.tensordot(t["a"], t["b"], 2), diff=("a", "b"), **LA)
case("tensordot_pairs", lambda m: {"a": m.randn(3, 4, 2), "b": m.randn(2, 3, 5)},
     lambda t: torch.tensordot(t["a"], t["b"], ([0, 2], [1, 0])), diff=("a", "b"), **LA)
case("multi_dot", lambda m: {"x0": m.randn(5), "x1": m.randn(5, 3), "x2": m.randn(3, 6),
                             "x3": m.randn(6, 2), "x4": m.randn(2)},
     lambda t: torch.linalg.multi_dot([t["x%d" % i] for i in range(5)]),
     diff=("x0", "x1", "x2", "x3", "x4"), **LA)
case("multi_dot_matrices", lambda m: {"x0": m.randn(2, 4), "x1": m.randn(4, 3)},
     lambda t: torch.linalg.multi_dot([t["x0"], t["x1"]]), diff=("x0", "x1"), **LA)
case("chain_matmul", lambda m: {"x0": m.randn(3, 2), "x1": m.randn(2, 4), "x2": m.randn(4, 3)},
     lambda t: torch.chain_matmul(t["x0"], t["x1"], t["x2"]), diff=("x0", "x1", "x2"), **LA)

# ---- losses (issue 16)
T = lambda *v: torch.tensor(v, dtype=torch.float64)
case("cross_entropy_weight", lambda m: {"logits": m.randn(5, 4, scale=2.0),
                                        "target": IDX(1, 3, 3, 0, 2), "weight": m.positive(4)},
     lambda t: F.cross_entropy(t["logits"], t["target"], weight=t["weight"], ignore_index=3,
                               label_smoothing=0.1),
     diff=("logits",), attrs={"reduction": "mean", "ignore_index": 3, "label_smoothing": 0.1})
case("cross_entropy_weight_sum", lambda m: {"logits": m.randn(4, 3, scale=2.0),
                                            "target": IDX(2, 0, 1, 2), "weight": m.positive(3)},
     lambda t: F.cross_entropy(t["logits"], t["target"], weight=t["weight"], reduction="sum"),
     diff=("logits",), attrs={"reduction": "sum", "ignore_index": -100, "label_smoothing": 0.0})
case("nll_loss_weight", lambda m: {"log_probs": m._f32(torch.log_softmax(m.randn(5, 4), -1)),
                                   "target": IDX(3, 0, 1, 1, 2), "weight": m.positive(4)},
     lambda t: F.nll_loss(t["log_probs"], t["target"], weight=t["weight"], ignore_index=0),
     diff=("log_probs",), attrs={"reduction": "mean", "ignore_index": 0})
case("bce_with_logits_weight", lambda m: {"logits": m.randn(4, 3, scale=2.0),
                                          "target": m.uniform(4, 3), "weight": m.positive(3)},
     lambda t: F.binary_cross_entropy_with_logits(t["logits"], t["target"], weight=t["weight"]),
     diff=("logits",), attrs={"reduction": "mean"})
case("binary_cross_entropy", lambda m: {"input": m.uniform(4, 3, lo=0.05, hi=0.95),
                                        "target": m.uniform(4, 3), "weight": m.positive(3)},
     lambda t: F.binary_cross_entropy(t["input"], t["target"], weight=t["weight"]),
     diff=("input",), attrs={"reduction": "mean"})
case("binary_cross_entropy_sum", lambda m: {"input": m.uniform(5, lo=0.05, hi=0.95),
                                            "target": m.uniform(5)},
     lambda t: F.binary_cross_entropy(t["input"], t["target"], reduction="sum"),
     diff=("input",), attrs={"reduction": "sum"})
case("l1_loss", lambda m: {"input": m.randn(3, 4), "target": m.randn(3, 4)},
     lambda t: F.l1_loss(t["input"], t["target"]), diff=("input", "target"),
     attrs={"reduction": "mean"})
case("smooth_l1_loss_beta", lambda m: {"input": m.randn(3, 4), "target": m.randn(3, 4)},
     lambda t: F.smooth_l1_loss(t["input"], t["target"], reduction="sum", beta=0.5),
     diff=("input", "target"), attrs={"reduction": "sum", "beta": 0.5})
case("huber_loss_delta", lambda m: {"input": m.randn(3, 4), "target": m.randn(3, 4)},
     lambda t: F.huber_loss(t["input"], t["target"], reduction="none", delta=0.7),
     diff=("input", "target"), attrs={"reduction": "none", "delta": 0.7})
case("kl_div_batchmean", lambda m: {"input": m._f32(torch.log_softmax(m.randn(3, 4), -1)),
                                    "target": m.softmax_rows(3, 4)},
     lambda t: F.kl_div(t["input"], t["target"], reduction="batchmean"), diff=("input", "target"),
     attrs={"reduction": "batchmean", "log_target": False})
case("kl_div_log_target", lambda m: {"input": m._f32(torch.log_softmax(m.randn(3, 4), -1)),
                                     "target": m._f32(torch.log_softmax(m.randn(3, 4), -1))},
     lambda t: F.kl_div(t["input"], t["target"], reduction="sum", log_target=True),
     diff=("input", "target"), attrs={"reduction": "sum", "log_target": True})
case("margin_ranking_loss", lambda m: {"x1": m.randn(6), "x2": m.randn(6),
                                       "y": T(1, -1, 1, 1, -1, -1)},
     lambda t: F.margin_ranking_loss(t["x1"], t["x2"], t["y"], margin=0.3),
     diff=("x1", "x2"), attrs={"margin": 0.3, "reduction": "mean"})
for nm, swap in [("triplet_margin_loss", False), ("triplet_margin_loss_swap", True)]:
    case(nm, lambda m: {"anchor": m.randn(4, 3), "positive": m.randn(4, 3),
                        "negative": m.randn(4, 3)},
         lambda t, swap=swap: F.triplet_margin_loss(t["anchor"], t["positive"], t["negative"],
                                                    margin=1.5, swap=swap),
         diff=("anchor", "positive", "negative"), attrs={"margin": 1.5, "swap": swap})
case("cosine_embedding_loss", lambda m: {"x1": m.randn(4, 3), "x2": m.randn(4, 3),
                                         "y": T(1, -1, 1, -1)},
     lambda t: F.cosine_embedding_loss(t["x1"], t["x2"], t["y"], margin=-0.5),
     diff=("x1", "x2"), attrs={"margin": -0.5, "reduction": "mean"})
case("poisson_nll_loss", lambda m: {"input": m.randn(3, 4), "target": m.uniform(3, 4, hi=3.0)},
     lambda t: F.poisson_nll_loss(t["input"], t["target"]), diff=("input", "target"),
     attrs={"log_input": True, "full": False, "reduction": "mean"})
case("poisson_nll_loss_full", lambda m: {"input": m.positive(3, 4), "target": m.uniform(3, 4, hi=4.0)},
     lambda t: F.poisson_nll_loss(t["input"], t["target"], log_input=False, full=True,
                                  reduction="sum"),
     diff=("input",), attrs={"log_input": False, "full": True, "reduction": "sum"})
# CTC on log_softmax(x) (the gradient is compared with respect to x, where PyTorch's CTC
# gradient and the exact one agree): padded targets, then concatenated ones.
case("ctc_loss", lambda m: {"x": m.randn(6, 2, 4), "targets": IDX(1, 2, 2, 3, 1, 0).reshape(2, 3),
                            "input_lengths": IDX(6, 5), "target_lengths": IDX(3, 2)},
     lambda t: F.ctc_loss(torch.log_softmax(t["x"], 2), t["targets"], t["input_lengths"],
                          t["target_lengths"]),
     diff=("x",), attrs={"blank": 0, "reduction": "mean", "zero_infinity": False})
case("ctc_loss_packed_sum", lambda m: {"x": m.randn(5, 3, 3), "targets": IDX(1, 2, 1, 1, 2),
                                       "input_lengths": IDX(5, 4, 5),
                                       "target_lengths": IDX(2, 1, 2)},
     lambda t: F.ctc_loss(torch.log_softmax(t["x"], 2), t["targets"], t["input_lengths"],
                          t["target_lengths"], blank=0, reduction="sum"),
     diff=("x",), attrs={"blank": 0, "reduction": "sum", "zero_infinity": False})

# ---- the fused LSTM recurrence (rnn family): the reference is the step written in torch ops
def lstm_reference(gx, h, c, w_hh, mask=None, reverse=False):
    steps = range(gx.shape[0] - 1, -1, -1) if reverse else range(gx.shape[0])
    hs, cs = [None] * gx.shape[0], [None] * gx.shape[0]
    for t in steps:
        i, f, g, o = (gx[t] + h @ w_hh.T).chunk(4, -1)
        c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_new = torch.sigmoid(o) * torch.tanh(c_new)
        if mask is not None:
            keep = mask[t].unsqueeze(-1)
            h_new, c_new = torch.where(keep, h_new, h), torch.where(keep, c_new, c)
        h, c = h_new, c_new
        hs[t], cs[t] = h, c
    return torch.stack([torch.stack(hs), torch.stack(cs)])


for nm, t_n, n, h, masked, reverse in [("lstm_recurrence", 4, 2, 3, False, False),
                                       ("lstm_recurrence_reverse", 3, 2, 2, False, True),
                                       ("lstm_recurrence_masked", 5, 3, 2, True, False),
                                       ("lstm_recurrence_masked_reverse", 4, 3, 2, True, True)]:
    case(nm, lambda m, t_n=t_n, n=n, h=h, masked=masked: dict(
             {"gx": m.randn(t_n, n, 4 * h), "h0": m.randn(n, h), "c0": m.randn(n, h),
              "w_hh": m.randn(4 * h, h, scale=0.5)}, **({"mask": m.mask(t_n, n)} if masked else {})),
         lambda t, reverse=reverse: lstm_reference(t["gx"], t["h0"], t["c0"], t["w_hh"],
                                                   t.get("mask"), reverse),
         diff=("gx", "h0", "c0", "w_hh"), attrs={"reverse": reverse})

# ---- rearrangements and indexing (issue 16)
IDX = lambda *v: torch.tensor(v, dtype=torch.int64)
case("flip_dims01", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.flip(t["x"], [0, 1]),
     diff=("x",), attrs={"dims": [0, 1]})
case("flip_last_3d", lambda m: {"x": m.randn(2, 3, 4)}, lambda t: torch.flip(t["x"], [-1]),
     diff=("x",), attrs={"dims": [-1]})
case("roll_dims", lambda m: {"x": m.randn(3, 4)},
     lambda t: torch.roll(t["x"], shifts=(1, -5), dims=(0, 1)), diff=("x",),
     attrs={"shifts": [1, -5], "dims": [0, 1]})
case("roll_flat", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.roll(t["x"], 5), diff=("x",),
     attrs={"shifts": [5], "dims": []})
case("repeat_lead", lambda m: {"x": m.randn(2, 3)}, lambda t: t["x"].repeat(2, 1, 2), diff=("x",),
     attrs={"repeats": [2, 1, 2]})
case("tile_short", lambda m: {"x": m.randn(2, 3)}, lambda t: torch.tile(t["x"], (3,)),
     diff=("x",), attrs={"reps": [3]})
case("repeat_interleave_dim1", lambda m: {"x": m.randn(2, 3)},
     lambda t: torch.repeat_interleave(t["x"], 2, dim=1), diff=("x",),
     attrs={"repeats": 2, "dim": 1})
case("repeat_interleave_flat", lambda m: {"x": m.randn(2, 2)},
     lambda t: torch.repeat_interleave(t["x"], 3), diff=("x",), attrs={"repeats": 3})
case("repeat_interleave_counts", lambda m: {"x": m.randn(3, 2), "repeats": IDX(1, 0, 3)},
     lambda t: torch.repeat_interleave(t["x"], t["repeats"], dim=0), diff=("x",), attrs={"dim": 0})
case("unbind_dim1", lambda m: {"x": m.randn(2, 3, 2)}, lambda t: torch.unbind(t["x"], 1)[2],
     diff=("x",), attrs={"dim": 1, "pick": 2})
case("movedim_two", lambda m: {"x": m.randn(2, 3, 4)},
     lambda t: torch.movedim(t["x"], (0, 1), (2, 0)), diff=("x",),
     attrs={"source": [0, 1], "destination": [2, 0]})
case("tril_below", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.tril(t["x"], -1), diff=("x",),
     attrs={"diagonal": -1})
case("triu_batched", lambda m: {"x": m.randn(2, 3, 4)}, lambda t: torch.triu(t["x"], 1),
     diff=("x",), attrs={"diagonal": 1})
case("diag_vector_above", lambda m: {"x": m.randn(3)}, lambda t: torch.diag(t["x"], 1),
     diff=("x",), attrs={"diagonal": 1})
case("diag_vector_below", lambda m: {"x": m.randn(3)}, lambda t: torch.diag(t["x"], -2),
     diff=("x",), attrs={"diagonal": -2})
case("diag_matrix", lambda m: {"x": m.randn(3, 4)}, lambda t: torch.diag(t["x"], 1), diff=("x",),
     attrs={"diagonal": 1})
case("meshgrid_ij", lambda m: {"a": m.randn(3), "b": m.randn(2)},
     lambda t: torch.stack(torch.meshgrid(t["a"], t["b"], indexing="ij")), diff=("a", "b"),
     attrs={"indexing": "ij"})
case("meshgrid_xy", lambda m: {"a": m.randn(3), "b": m.randn(2)},
     lambda t: torch.stack(torch.meshgrid(t["a"], t["b"], indexing="xy")), diff=("a", "b"),
     attrs={"indexing": "xy"})
for nm, shape, pads, mode, value in [
        ("pad_constant", (2, 3, 4), [1, 2, 0, 1], "constant", 0.5),
        ("pad_crop", (2, 3, 4), [-1, 1, 1, -2], "constant", 0.0),
        ("pad_reflect", (1, 2, 4, 5), [1, 2, 3, 1], "reflect", 0.0),
        ("pad_replicate", (1, 2, 3, 4), [2, 0, 1, 3], "replicate", 0.0),
        ("pad_circular", (1, 2, 3, 4), [1, 2, 3, 0], "circular", 0.0)]:
    case(nm, lambda m, shape=shape: {"x": m.randn(*shape)},
         lambda t, pads=pads, mode=mode, value=value:
             F.pad(t["x"], pads, mode=mode, value=value) if mode == "constant"
             else F.pad(t["x"], pads, mode=mode),
         diff=("x",), attrs={"pads": pads, "mode": mode, "value": value})
case("unfold_dim1", lambda m: {"x": m.randn(3, 7)}, lambda t: t["x"].unfold(1, 3, 2), diff=("x",),
     attrs={"dim": 1, "size": 3, "step": 2})
case("unfold_dim0_overlap", lambda m: {"x": m.randn(5, 2)}, lambda t: t["x"].unfold(0, 2, 1),
     diff=("x",), attrs={"dim": 0, "size": 2, "step": 1})
case("pixel_shuffle", lambda m: {"x": m.randn(1, 8, 2, 3)}, lambda t: F.pixel_shuffle(t["x"], 2),
     diff=("x",), attrs={"factor": 2})
case("pixel_unshuffle", lambda m: {"x": m.randn(1, 2, 4, 6)},
     lambda t: F.pixel_unshuffle(t["x"], 2), diff=("x",), attrs={"factor": 2})
case("nonzero", lambda m: {"x": m.randn(3, 4) * m.mask(3, 4)}, lambda t: torch.nonzero(t["x"]))
case("masked_select", lambda m: {"x": m.randn(3, 4), "mask": m.mask(4)},
     lambda t: torch.masked_select(t["x"], t["mask"]), diff=("x",))
case("index_add", lambda m: {"x": m.randn(5, 3), "index": IDX(0, 2, 0, 4), "source": m.randn(4, 3)},
     lambda t: torch.index_add(t["x"], 0, t["index"], t["source"], alpha=2.0),
     diff=("x", "source"), attrs={"dim": 0, "alpha": 2.0})
case("index_fill", lambda m: {"x": m.randn(3, 4), "index": IDX(0, 2)},
     lambda t: t["x"].index_fill(1, t["index"], -1.5), diff=("x",), attrs={"dim": 1, "value": -1.5})
case("index_copy", lambda m: {"x": m.randn(4, 3), "index": IDX(3, 1), "source": m.randn(2, 3)},
     lambda t: t["x"].index_copy(0, t["index"], t["source"]), diff=("x", "source"),
     attrs={"dim": 0})
# src of index's shape: torch 1.13's scatter gradient of a larger src has the wrong shape
case("scatter", lambda m: {"x": m.randn(3, 5), "index": IDX(0, 4, 2, 1, 3, 0).reshape(2, 3),
                           "src": m.randn(2, 3)},
     lambda t: torch.scatter(t["x"], 1, t["index"], t["src"]), diff=("x", "src"), attrs={"dim": 1})
case("scatter_value", lambda m: {"x": m.randn(4, 3), "index": IDX(3, 0, 1).reshape(1, 3)},
     lambda t: torch.scatter(t["x"], 0, t["index"], -2.0), diff=("x",),
     attrs={"dim": 0, "value": -2.0})
SR_INDEX = IDX(0, 2, 0, 1, 2, 2, 0, 1).reshape(2, 4)
for reduce, include_self in [("sum", True), ("prod", True), ("mean", False), ("amax", True),
                             ("amin", False)]:
    nm = "scatter_reduce_" + reduce + ("" if include_self else "_exclude_self")
    case(nm, lambda m: {"x": m.distinct(2, 3), "index": SR_INDEX, "src": m.distinct(2, 4)},
         lambda t, reduce=reduce, include_self=include_self: torch.scatter_reduce(
             t["x"], 1, t["index"], t["src"], reduce, include_self=include_self),
         diff=("x", "src"), attrs={"dim": 1, "reduce": reduce, "include_self": include_self})
case("embedding_bag_sum_offsets", lambda m: {"weight": m.randn(6, 3), "input": IDX(1, 2, 4, 5, 4, 3, 2),
                                             "offsets": IDX(0, 2, 2, 5),
                                             "per_sample_weights": m.randn(7)},
     lambda t: F.embedding_bag(t["input"], t["weight"], t["offsets"], mode="sum",
                               per_sample_weights=t["per_sample_weights"]),
     diff=("weight", "per_sample_weights"), attrs={"mode": "sum"})
case("embedding_bag_mean_padding", lambda m: {"weight": m.randn(5, 2), "input": IDX(0, 3, 1, 3, 4, 2),
                                              "offsets": IDX(0, 3, 6)},
     lambda t: F.embedding_bag(t["input"], t["weight"], t["offsets"], mode="mean",
                               include_last_offset=True, padding_idx=3),
     diff=("weight",), attrs={"mode": "mean", "include_last_offset": True, "padding_idx": 3})
case("embedding_bag_max_2d", lambda m: {"weight": m.distinct(5, 3), "input": IDX(0, 3, 1, 4, 2, 2).reshape(2, 3)},
     lambda t: F.embedding_bag(t["input"], t["weight"], mode="max"), diff=("weight",),
     attrs={"mode": "max"})
case("one_hot", lambda m: {"index": IDX(0, 2, 1, 3, 2)}, lambda t: F.one_hot(t["index"], 5),
     attrs={"num_classes": 5})
case("one_hot_infer", lambda m: {"index": IDX(1, 3, 0, 2, 2, 1).reshape(2, 3)},
     lambda t: F.one_hot(t["index"]), attrs={"num_classes": -1})

# ---- convolution, pooling and upsampling (issue 16, second part)
CONV_TOL = dict(rtol=1e-4, atol=1e-5)
case("conv1d_pad_stride",
     lambda m: {"x": m.randn(2, 3, 9), "weight": m.randn(4, 3, 3, scale=0.5), "bias": m.randn(4)},
     lambda t: F.conv1d(t["x"], t["weight"], t["bias"], stride=2, padding=1),
     diff=("x", "weight", "bias"), attrs={"stride": 2, "padding": 1}, **CONV_TOL)
case("conv1d_groups_dilation",
     lambda m: {"x": m.randn(1, 4, 10), "weight": m.randn(6, 2, 3, scale=0.5)},
     lambda t: F.conv1d(t["x"], t["weight"], dilation=2, groups=2), diff=("x", "weight"),
     attrs={"dilation": 2, "groups": 2}, **CONV_TOL)
case("conv1d_same",
     lambda m: {"x": m.randn(2, 2, 7), "weight": m.randn(3, 2, 4, scale=0.5), "bias": m.randn(3)},
     lambda t: F.conv1d(t["x"], t["weight"], t["bias"], padding="same"),
     diff=("x", "weight", "bias"), attrs={"padding": "same"}, **CONV_TOL)
case("conv3d_pad_stride",
     lambda m: {"x": m.randn(1, 2, 4, 5, 5), "weight": m.randn(3, 2, 2, 3, 3, scale=0.3),
                "bias": m.randn(3)},
     lambda t: F.conv3d(t["x"], t["weight"], t["bias"], stride=(1, 2, 2), padding=(1, 1, 0)),
     diff=("x", "weight", "bias"), attrs={"stride": [1, 2, 2], "padding": [1, 1, 0]}, **CONV_TOL)
case("conv3d_groups_dilation",
     lambda m: {"x": m.randn(1, 2, 5, 4, 4), "weight": m.randn(4, 1, 2, 2, 2, scale=0.5)},
     lambda t: F.conv3d(t["x"], t["weight"], dilation=(2, 1, 1), groups=2), diff=("x", "weight"),
     attrs={"dilation": [2, 1, 1], "groups": 2}, **CONV_TOL)
case("conv3d_same",
     lambda m: {"x": m.randn(1, 2, 3, 4, 4), "weight": m.randn(2, 2, 2, 3, 3, scale=0.3)},
     lambda t: F.conv3d(t["x"], t["weight"], padding="same"), diff=("x", "weight"),
     attrs={"padding": "same"}, **CONV_TOL)
case("conv_transpose2d_stride2",
     lambda m: {"x": m.randn(2, 3, 3, 3), "weight": m.randn(3, 2, 3, 3, scale=0.5),
                "bias": m.randn(2)},
     lambda t: F.conv_transpose2d(t["x"], t["weight"], t["bias"], stride=2, padding=1,
                                  output_padding=1),
     diff=("x", "weight", "bias"), attrs={"stride": 2, "padding": 1, "output_padding": 1},
     **CONV_TOL)
case("conv_transpose2d_groups_dilation",
     lambda m: {"x": m.randn(1, 4, 3, 3), "weight": m.randn(4, 1, 2, 2, scale=0.5)},
     lambda t: F.conv_transpose2d(t["x"], t["weight"], stride=(1, 2), output_padding=1, groups=2,
                                  dilation=2),
     diff=("x", "weight"),
     attrs={"stride": [1, 2], "output_padding": 1, "groups": 2, "dilation": 2}, **CONV_TOL)
case("conv_transpose1d_stride",
     lambda m: {"x": m.randn(2, 3, 5), "weight": m.randn(3, 4, 3, scale=0.5), "bias": m.randn(4)},
     lambda t: F.conv_transpose1d(t["x"], t["weight"], t["bias"], stride=2, padding=1,
                                  output_padding=1),
     diff=("x", "weight", "bias"), attrs={"stride": 2, "padding": 1, "output_padding": 1},
     **CONV_TOL)
case("conv_transpose1d_groups_dilation",
     lambda m: {"x": m.randn(1, 4, 6), "weight": m.randn(4, 1, 3, scale=0.5)},
     lambda t: F.conv_transpose1d(t["x"], t["weight"], groups=2, dilation=2), diff=("x", "weight"),
     attrs={"groups": 2, "dilation": 2}, **CONV_TOL)
unary("max_pool1d", lambda m: m.distinct(2, 3, 9), lambda x: F.max_pool1d(x, 3, 2, 1),
      attrs={"kernel": 3, "stride": 2, "padding": 1})
unary("max_pool1d_dilation_ceil", lambda m: m.distinct(1, 2, 10),
      lambda x: F.max_pool1d(x, 2, 3, 0, dilation=2, ceil_mode=True),
      attrs={"kernel": 2, "stride": 3, "dilation": 2, "ceil_mode": True})
case("max_pool1d_indices", lambda m: {"x": m.distinct(2, 3, 9)},
     lambda t: F.max_pool1d(t["x"], 3, 2, 1, return_indices=True)[1],
     attrs={"kernel": 3, "stride": 2, "padding": 1})
unary("avg_pool1d", lambda m: m.randn(2, 3, 9), lambda x: F.avg_pool1d(x, 3, 2, 1),
      attrs={"kernel": 3, "stride": 2, "padding": 1})
unary("avg_pool1d_exclude_pad_ceil", lambda m: m.randn(1, 2, 8),
      lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
      attrs={"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True,
             "count_include_pad": False})
unary("adaptive_avg_pool1d", lambda m: m.randn(2, 3, 10), lambda x: F.adaptive_avg_pool1d(x, 4),
      attrs={"output_size": 4})
unary("adaptive_avg_pool2d", lambda m: m.randn(2, 2, 7, 5),
      lambda x: F.adaptive_avg_pool2d(x, (3, 2)), attrs={"output_size": [3, 2]})
unary("adaptive_avg_pool2d_global", lambda m: m.randn(2, 3, 4, 4),
      lambda x: F.adaptive_avg_pool2d(x, 1), attrs={"output_size": 1})
unary("adaptive_avg_pool2d_grow", lambda m: m.randn(2, 3, 4),
      lambda x: F.adaptive_avg_pool2d(x, (5, 6)), attrs={"output_size": [5, 6]})
unary("adaptive_max_pool1d", lambda m: m.distinct(2, 3, 10),
      lambda x: F.adaptive_max_pool1d(x, 4), attrs={"output_size": 4})
case("adaptive_max_pool1d_indices", lambda m: {"x": m.distinct(2, 3, 10)},
     lambda t: F.adaptive_max_pool1d(t["x"], 4, return_indices=True)[1], attrs={"output_size": 4})
unary("adaptive_max_pool2d", lambda m: m.distinct(2, 2, 7, 5),
      lambda x: F.adaptive_max_pool2d(x, (3, 2)), attrs={"output_size": [3, 2]})
case("adaptive_max_pool2d_indices", lambda m: {"x": m.distinct(2, 2, 7, 5)},
     lambda t: F.adaptive_max_pool2d(t["x"], (3, 2), return_indices=True)[1],
     attrs={"output_size": [3, 2]})
unary("adaptive_max_pool2d_grow", lambda m: m.distinct(1, 2, 3, 4),
      lambda x: F.adaptive_max_pool2d(x, (5, 6)), attrs={"output_size": [5, 6]})
unary("interpolate_nearest_scale", lambda m: m.randn(1, 2, 3, 4),
      lambda x: F.interpolate(x, scale_factor=2.0, mode="nearest"),
      attrs={"scale_factor": [2.0], "mode": "nearest"})
unary("interpolate_nearest_size", lambda m: m.randn(1, 2, 5, 4),
      lambda x: F.interpolate(x, size=(3, 7), mode="nearest"),
      attrs={"size": [3, 7], "mode": "nearest"})
unary("interpolate_nearest_exact", lambda m: m.randn(1, 2, 4, 5),
      lambda x: F.interpolate(x, size=(6, 3), mode="nearest-exact"),
      attrs={"size": [6, 3], "mode": "nearest-exact"})
unary("interpolate_nearest_1d", lambda m: m.randn(2, 3, 5),
      lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"),
      attrs={"scale_factor": [1.5], "mode": "nearest"})
# Forward only: torch 1.13's backward of this case treats the unchanged height as a copy while
# its forward reads rows 0, 0, 1, 2 (the two disagree); ember's gradient is its forward's.
case("interpolate_nearest_same_size_scale", lambda m: {"x": m.randn(1, 2, 4, 5)},
     lambda t: F.interpolate(t["x"], scale_factor=1.2, mode="nearest"),
     attrs={"scale_factor": [1.2], "mode": "nearest"})
unary("interpolate_bilinear", lambda m: m.randn(1, 2, 4, 5),
      lambda x: F.interpolate(x, size=(7, 8), mode="bilinear", align_corners=False),
      attrs={"size": [7, 8], "mode": "bilinear", "align_corners": False})
unary("interpolate_bilinear_align", lambda m: m.randn(1, 2, 4, 5),
      lambda x: F.interpolate(x, size=(6, 9), mode="bilinear", align_corners=True),
      attrs={"size": [6, 9], "mode": "bilinear", "align_corners": True})
unary("interpolate_bilinear_scale", lambda m: m.randn(1, 2, 3, 4),
      lambda x: F.interpolate(x, scale_factor=(2.0, 1.5), mode="bilinear"),
      attrs={"scale_factor": [2.0, 1.5], "mode": "bilinear"})
unary("interpolate_bilinear_down", lambda m: m.randn(1, 2, 7, 8),
      lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", align_corners=False),
      attrs={"size": [3, 5], "mode": "bilinear", "align_corners": False})
unary("interpolate_linear", lambda m: m.randn(2, 2, 5),
      lambda x: F.interpolate(x, size=8, mode="linear", align_corners=False),
      attrs={"size": [8], "mode": "linear", "align_corners": False})
unary("interpolate_trilinear", lambda m: m.randn(1, 1, 3, 3, 3),
      lambda x: F.interpolate(x, size=(4, 5, 4), mode="trilinear", align_corners=True),
      attrs={"size": [4, 5, 4], "mode": "trilinear", "align_corners": True})
unary("im2col", lambda m: m.randn(1, 2, 4, 5),
      lambda x: F.unfold(x, (2, 3), padding=1, stride=(1, 2)),
      attrs={"kernel": [2, 3], "padding": 1, "stride": [1, 2]})
unary("im2col_dilation", lambda m: m.randn(2, 1, 5, 5),
      lambda x: F.unfold(x, 2, dilation=2, stride=2), attrs={"kernel": 2, "dilation": 2, "stride": 2})
unary("col2im", lambda m: m.randn(1, 12, 15),
      lambda x: F.fold(x, (4, 5), (2, 3), padding=1, stride=(1, 2)),
      attrs={"output_size": [4, 5], "kernel": [2, 3], "padding": 1, "stride": [1, 2]})
unary("col2im_dilation", lambda m: m.randn(2, 4, 4),
      lambda x: F.fold(x, (5, 5), 2, dilation=2, stride=2),
      attrs={"output_size": [5, 5], "kernel": 2, "dilation": 2, "stride": 2})

# Random ops: PyTorch draws other numbers, so these compare distributions, not values: the
# output is a few statistics of a large sample (computed by the C++ case the same way), the
# reference their exact expectation, the tolerance many standard errors wide. `like` carries
# only the dtype and device the sample is drawn in.
case("rand_moments", lambda m: {"like": torch.zeros(1, dtype=torch.float64)},
     lambda t: torch.tensor([0.5, 1.0 / 12.0], dtype=t["like"].dtype), atol=5e-3)
case("randn_moments", lambda m: {"like": torch.zeros(1, dtype=torch.float64)},
     lambda t: torch.tensor([0.0, 1.0], dtype=t["like"].dtype), atol=2e-2)
# dropout(p = 0.3) of x repeated to 20000 values: [fraction of zeros, mean(out) / mean(x)].
case("dropout_moments", lambda m: {"x": m.uniform(200, lo=1.0, hi=2.0)},
     lambda t: torch.tensor([0.3, 1.0], dtype=t["x"].dtype), atol=2e-2, attrs={"p": 0.3})

# ---- type promotion (torch.result_type) and integer inputs (issue 16); the inputs keep their
# dtypes (exact=True), so torch promotes them and computes the reference in those dtypes
def ints(m, *shape, lo=-4, hi=5, dtype=torch.int32):
    return m.randint(lo, hi, *shape).to(dtype)


def f64(m, *shape):
    """Full-precision f64 values (not f32-representable: the f64 operand must matter)."""
    return torch.randn(tuple(shape), generator=m.g, dtype=torch.float64)


def f32(m, *shape):
    return m.randn(*shape).float()


def distinct_ints(m, rows, n, dtype):
    """Rows of distinct integers (no ties for argmax/argmin or max/min with indices)."""
    return torch.stack([torch.randperm(n, generator=m.g) * 3 - n for _ in range(rows)]).to(dtype)


def mixed(name, make, fn, diff=(), **kw):
    case(name, make, fn, diff=diff, exact=True, **kw)


A_B = lambda fa, fb: (lambda m: {"a": fa(m), "b": fb(m)})
mixed("add_mix_f32_f64", A_B(lambda m: f32(m, 3, 4), lambda m: f64(m, 4)),
      lambda t: t["a"] + t["b"], diff=("a", "b"))
mixed("sub_mix_0d_f64", A_B(lambda m: f32(m, 3, 4), lambda m: f64(m)),
      lambda t: t["a"] - t["b"], diff=("a", "b"))
mixed("mul_mix_i32_f32", A_B(lambda m: ints(m, 3, 4), lambda m: f32(m, 3, 4)),
      lambda t: t["a"] * t["b"], diff=("b",))
mixed("mul_mix_i32_0d_f64", A_B(lambda m: ints(m, 3, 4), lambda m: f64(m)),
      lambda t: t["a"] * t["b"], diff=("b",))
mixed("add_mix_i32_0d_i64", A_B(lambda m: ints(m, 2, 3), lambda m: ints(m, dtype=torch.int64)),
      lambda t: t["a"] + t["b"])
mixed("add_mix_u8_i32", A_B(lambda m: ints(m, 2, 3, lo=0, hi=250, dtype=torch.uint8),
                            lambda m: ints(m, 3, lo=-300, hi=300)),
      lambda t: t["a"] + t["b"])
mixed("add_mix_i32_i64", A_B(lambda m: ints(m, 2, 3, lo=-2**31, hi=2**31 - 1),
                             lambda m: ints(m, 3, lo=-2**40, hi=2**40, dtype=torch.int64)),
      lambda t: t["a"] + t["b"])
mixed("add_mix_bool_f32", A_B(lambda m: m.mask(3, 4), lambda m: f32(m, 3, 4)),
      lambda t: t["a"] + t["b"], diff=("b",))
mixed("add_mix_f16_bf16", A_B(lambda m: f32(m, 3, 4).half(), lambda m: f32(m, 3, 4).bfloat16()),
      lambda t: t["a"] + t["b"], diff=("a", "b"))
mixed("div_mix_i32_i64", A_B(lambda m: ints(m, 3, 4),
                             lambda m: ints(m, 3, 4, lo=1, hi=6, dtype=torch.int64)),
      lambda t: t["a"] / t["b"])
mixed("div_mix_i64_f64", A_B(lambda m: ints(m, 3, 4, dtype=torch.int64),
                             lambda m: m.away_from_zero(3, 4, gap=0.5)),
      lambda t: t["a"] / t["b"], diff=("b",))
mixed("pow_mix_f32_i64", A_B(lambda m: m.positive(3, 4).float(),
                             lambda m: ints(m, 3, 4, lo=0, hi=4, dtype=torch.int64)),
      lambda t: torch.pow(t["a"], t["b"]), diff=("a",))
mixed("maximum_mix_i32_f32", A_B(lambda m: ints(m, 3, 4, lo=-2, hi=3), lambda m: f32(m, 3, 4)),
      lambda t: torch.maximum(t["a"], t["b"]), diff=("b",))
mixed("minimum_mix_f32_f64", A_B(lambda m: f32(m, 3, 4), lambda m: f64(m, 3, 4)),
      lambda t: torch.minimum(t["a"], t["b"]), diff=("a", "b"))
mixed("atan2_mix_f32_f64", A_B(lambda m: f32(m, 3, 4), lambda m: f64(m, 4)),
      lambda t: torch.atan2(t["a"], t["b"]), diff=("a", "b"))
mixed("fmod_mix_i64_f32", A_B(lambda m: ints(m, 3, 4, lo=-9, hi=10, dtype=torch.int64),
                              lambda m: m.away_from_zero(3, 4, gap=0.5).float()),
      lambda t: torch.fmod(t["a"], t["b"]), diff=("b",))
mixed("remainder_mix_f32_0d_f64", A_B(lambda m: f32(m, 3, 4) * 3,
                                      lambda m: torch.tensor(0.7, dtype=torch.float64)),
      lambda t: torch.remainder(t["a"], t["b"]), diff=("a", "b"))
CMP_I32_F32 = lambda m: {"a": ints(m, 3, 4, lo=-2, hi=3),
                         "b": (ints(m, 3, 4, lo=-2, hi=3) + 0.5 * m.mask(3, 4)).float()}
mixed("cmp_eq_mix_i32_f32", CMP_I32_F32, lambda t: torch.eq(t["a"], t["b"]))
mixed("cmp_lt_mix_i32_f32", CMP_I32_F32, lambda t: torch.lt(t["a"], t["b"]))
mixed("cmp_ge_mix_i64_0d_f64", A_B(lambda m: ints(m, 3, 4, dtype=torch.int64),
                                   lambda m: torch.tensor(0.5, dtype=torch.float64)),
      lambda t: torch.ge(t["a"], t["b"]))
mixed("cmp_ne_mix_bool_i32", A_B(lambda m: m.mask(3, 4), lambda m: ints(m, 4, lo=0, hi=3)),
      lambda t: torch.ne(t["a"], t["b"]))
mixed("logical_and_mix_f32_i64", A_B(lambda m: sign_mix(m, 3, 4).float(),
                                     lambda m: ints(m, 3, 4, lo=-1, hi=2, dtype=torch.int64)),
      lambda t: torch.logical_and(t["a"], t["b"]))
mixed("logical_or_mix_bool_f64", A_B(lambda m: m.mask(3, 4), lambda m: sign_mix(m, 4)),
      lambda t: torch.logical_or(t["a"], t["b"]))
mixed("logical_xor_mix_u8_f32", A_B(lambda m: ints(m, 3, 4, lo=0, hi=2, dtype=torch.uint8),
                                    lambda m: sign_mix(m, 3, 4).float()),
      lambda t: torch.logical_xor(t["a"], t["b"]))
mixed("where_mix_i32_f32", lambda m: {"cond": m.mask(3, 4), "a": ints(m, 3, 4), "b": f32(m, 3, 4)},
      lambda t: torch.where(t["cond"], t["a"], t["b"]), diff=("b",))
mixed("where_mix_f32_f64", lambda m: {"cond": m.mask(3, 4), "a": f32(m, 3, 4), "b": f64(m, 4)},
      lambda t: torch.where(t["cond"], t["a"], t["b"]), diff=("a", "b"))
mixed("clamp_mix_tensor_bounds",
      lambda m: {"x": ints(m, 3, 4), "lo": f32(m, 3, 4) - 1.0, "hi": torch.tensor(2, dtype=torch.int64)},
      lambda t: torch.clamp(t["x"], t["lo"], t["hi"]), diff=("lo",))
mixed("addcmul_mix", lambda m: {"x": f32(m, 3, 4), "t1": ints(m, 3, 4), "t2": f64(m, 4)},
      lambda t: torch.addcmul(t["x"], t["t1"], t["t2"], value=0.5), diff=("x", "t2"),
      attrs={"value": 0.5})
# (torch 1.13's addcdiv backward fails with an integer operand: t1 f32 here)
mixed("addcdiv_mix", lambda m: {"x": f32(m, 3, 4), "t1": f32(m, 3, 4),
                                "t2": m.away_from_zero(4, gap=0.5)},
      lambda t: torch.addcdiv(t["x"], t["t1"], t["t2"], value=-2.0), diff=("x", "t1", "t2"),
      attrs={"value": -2.0})

# integer (and bool) inputs of ops that PyTorch computes on them
mixed("abs_int", lambda m: {"x": ints(m, 3, 4, dtype=torch.int64)}, lambda t: torch.abs(t["x"]))
mixed("sign_int", lambda m: {"x": ints(m, 3, 4, lo=-2, hi=3)}, lambda t: torch.sign(t["x"]))
mixed("clamp_int", lambda m: {"x": ints(m, 3, 4, dtype=torch.int64)},
      lambda t: torch.clamp(t["x"], -2, 3), attrs={"lo": -2.0, "hi": 3.0})
mixed("clamp_int_frac", lambda m: {"x": ints(m, 3, 4)},
      lambda t: torch.clamp(t["x"], -1.5, 2.5), attrs={"lo": -1.5, "hi": 2.5})
mixed("clamp_min_int", lambda m: {"x": ints(m, 3, 4)}, lambda t: torch.clamp_min(t["x"], 0),
      attrs={"min": 0.0})
mixed("clamp_max_int", lambda m: {"x": ints(m, 3, 4, dtype=torch.int64)},
      lambda t: torch.clamp_max(t["x"], 1), attrs={"max": 1.0})
mixed("clamp_int_tensor_bounds",
      lambda m: {"x": ints(m, 3, 4), "lo": ints(m, 4, lo=-3, hi=0),
                 "hi": ints(m, 3, 1, lo=0, hi=3, dtype=torch.int64)},
      lambda t: torch.clamp(t["x"], t["lo"], t["hi"]))
mixed("max_int_dims", lambda m: {"x": ints(m, 2, 3, 4, lo=-50, hi=50)},
      lambda t: torch.amax(t["x"], [0, 2]), attrs={"dims": [0, 2], "keepdim": False})
mixed("max_int_all", lambda m: {"x": ints(m, 3, 4, lo=-50, hi=50, dtype=torch.int64)},
      lambda t: torch.max(t["x"]))
mixed("min_int_dim1_keepdim", lambda m: {"x": ints(m, 3, 5, lo=-50, hi=50, dtype=torch.int64)},
      lambda t: torch.amin(t["x"], [1], keepdim=True), attrs={"dims": [1], "keepdim": True})
mixed("argmax_int", lambda m: {"x": distinct_ints(m, 3, 5, torch.int32)},
      lambda t: torch.argmax(t["x"], 1), attrs={"dim": 1, "keepdim": False})
mixed("argmin_int", lambda m: {"x": distinct_ints(m, 3, 5, torch.int64)},
      lambda t: torch.argmin(t["x"], 1, keepdim=True), attrs={"dim": 1, "keepdim": True})
mixed("max_with_indices_int", lambda m: {"x": distinct_ints(m, 3, 5, torch.int32)},
      lambda t: torch.max(t["x"], dim=1).values, attrs={"dim": 1, "keepdim": False})
mixed("max_with_indices_int_indices", lambda m: {"x": distinct_ints(m, 3, 5, torch.int64)},
      lambda t: torch.max(t["x"], dim=1, keepdim=True).indices, attrs={"dim": 1, "keepdim": True})
mixed("min_with_indices_int", lambda m: {"x": distinct_ints(m, 4, 5, torch.int64)},
      lambda t: torch.min(t["x"], dim=-1).values, attrs={"dim": -1, "keepdim": False})
mixed("min_with_indices_int_indices", lambda m: {"x": distinct_ints(m, 4, 5, torch.int32)},
      lambda t: torch.min(t["x"], dim=1).indices, attrs={"dim": 1, "keepdim": False})
mixed("isnan_int", lambda m: {"x": ints(m, 3, 4)}, lambda t: torch.isnan(t["x"]))
mixed("isinf_int", lambda m: {"x": ints(m, 3, 4, dtype=torch.int64)}, lambda t: torch.isinf(t["x"]))
mixed("isfinite_int", lambda m: {"x": ints(m, 3, 4)}, lambda t: torch.isfinite(t["x"]))
mixed("isfinite_bool", lambda m: {"x": m.mask(3, 4)}, lambda t: torch.isfinite(t["x"]))
mixed("sum_int32", lambda m: {"x": ints(m, 3, 4, lo=-2**31, hi=2**31 - 1)},
      lambda t: torch.sum(t["x"]))
mixed("sum_bool_dim1", lambda m: {"x": m.mask(3, 5)}, lambda t: torch.sum(t["x"], [1]),
      attrs={"dims": [1], "keepdim": False})
mixed("nansum_int", lambda m: {"x": ints(m, 3, 4)}, lambda t: torch.nansum(t["x"], [1]),
      attrs={"dims": [1], "keepdim": False})
mixed("cumsum_int", lambda m: {"x": ints(m, 3, 4, lo=-2**31, hi=2**31 - 1)},
      lambda t: torch.cumsum(t["x"], 1), attrs={"dim": 1})
mixed("cumsum_bool", lambda m: {"x": m.mask(3, 4)}, lambda t: torch.cumsum(t["x"], 0),
      attrs={"dim": 0})

# ---- attention family (scaled_dot_product_attention; tests/test_sdpa.cpp has the rest). torch
# 1.13 has no F.scaled_dot_product_attention: its math is written out (torch 2's definition).
def _sdpa(q, k, v, mask=None, causal=False):
    s = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)
    if causal:
        s = s.masked_fill(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1),
                          float("-inf"))
    return torch.softmax(s if mask is None else s + mask, -1) @ v


case("scaled_dot_product_attention",
     lambda m: {"q": m.randn(2, 3, 4), "k": m.randn(2, 5, 4), "v": m.randn(2, 5, 3),
                "mask": m.randn(3, 5)},
     lambda t: _sdpa(t["q"], t["k"], t["v"], t["mask"]), diff=("q", "k", "v", "mask"))
case("scaled_dot_product_attention_causal",
     lambda m: {"q": m.randn(2, 4, 4), "k": m.randn(2, 4, 4), "v": m.randn(2, 4, 4)},
     lambda t: _sdpa(t["q"], t["k"], t["v"], causal=True), diff=("q", "k", "v"))


# rotary_embedding: x·cos + rotate_half(x)·sin (transformers), or with the pairs (2i, 2i+1)
# rotated (interleaved). cos and sin are random here, not a rotation's, so that the backward's
# use of each pair's own cos and sin is tested; they get gradients too.
def _rotary(x, cos, sin, interleaved=False):
    if interleaved:
        p = x.reshape(*x.shape[:-1], -1, 2)
        rot = torch.stack([-p[..., 1], p[..., 0]], -1).reshape(x.shape)
    else:
        h = x.shape[-1] // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], -1)
    return x * cos + rot * sin


case("rotary_embedding",
     lambda m: {"x": m.randn(2, 3, 4, 6), "cos": m.randn(4, 6), "sin": m.randn(4, 6)},
     lambda t: _rotary(t["x"], t["cos"], t["sin"]), diff=("x", "cos", "sin"))
# x stored [B, T, H, D] and rotated as its [B, H, T, D] transpose (Llama's head view)
case("rotary_embedding_strided",
     lambda m: {"x": m.randn(2, 4, 3, 6), "cos": m.randn(2, 1, 4, 6), "sin": m.randn(2, 1, 4, 6)},
     lambda t: _rotary(t["x"].transpose(1, 2), t["cos"], t["sin"]), diff=("x", "cos", "sin"))
case("rotary_embedding_interleaved",
     lambda m: {"x": m.randn(3, 4, 8), "cos": m.randn(4, 8), "sin": m.randn(1, 4, 8)},
     lambda t: _rotary(t["x"], t["cos"], t["sin"], interleaved=True), diff=("x", "cos", "sin"),
     attrs={"interleaved": True})


# attention_with_kv_cache: the new keys appended to each row's first seqlens[b] cached ones,
# query i over keys j < seqlens[b] + i that the padding mask keeps, and its own key.
def _kv_attention(q, kc, vc, k, v, seqlens, mask):
    group = q.shape[1] // kc.shape[1]
    outs = []
    kc_after, vc_after = kc.clone(), vc.clone()
    for b, p in enumerate(seqlens):
        kc_after[b, :, p:p + k.shape[2]] = k[b]
        vc_after[b, :, p:p + v.shape[2]] = v[b]
        K = torch.cat([kc[b, :, :p], k[b]], 1).repeat_interleave(group, 0)
        V = torch.cat([vc[b, :, :p], v[b]], 1).repeat_interleave(group, 0)
        s = (q[b] * (1.0 / math.sqrt(q.shape[-1]))) @ K.transpose(-1, -2)  # [H, T, p + T]
        T = q.shape[2]
        j = torch.arange(p + T)
        own = j[None, :] == p + torch.arange(T)[:, None]
        keep = ((j[None, :] < p + torch.arange(T)[:, None]) & mask[b, :p + T][None, :]) | own
        outs.append(torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ V)
    return torch.stack(outs), {"k_cache_after": kc_after, "v_cache_after": vc_after}


case("attention_with_kv_cache",
     lambda m: {"q": m.randn(2, 4, 2, 8), "k_cache": m.randn(2, 2, 6, 8),
                "v_cache": m.randn(2, 2, 6, 3), "k": m.randn(2, 2, 2, 8), "v": m.randn(2, 2, 2, 3),
                "mask": m.mask(2, 6)},
     lambda t: _kv_attention(t["q"], t["k_cache"], t["v_cache"], t["k"], t["v"], [3, 1],
                             t["mask"]),
     attrs={"seqlens": [3, 1]})


# ----------------------------------------------------------------------------------------
# evaluation


def run_case(c, inputs, dtype):
    """Runs c's fn on copies of `inputs` (floats cast to `dtype`); returns out, extras, grads."""
    t = {}
    for k, v in inputs.items():
        v = v.clone()
        if v.is_floating_point():
            v = v if c["exact"] else v.to(dtype)
            if k in c["diff"]:
                v.requires_grad_(True)
        t[k] = v
    res = c["fn"](t)
    out, extras = (res if isinstance(res, tuple) else (res, {}))
    return t, out, extras


def encode_tensor(t, exact=False):
    return _encode_tensor(t, MAX_ELEMENTS, exact)


def encode_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, (list, tuple)):
        return "[%s]" % ",".join(encode_value(x) for x in v)
    raise TypeError(type(v))


def build(c):
    m = Maker(zlib.crc32(c["name"].encode()))
    inputs = c["make"](m)
    t, out, extras = run_case(c, inputs, torch.float64)
    tensors = dict(inputs)
    tensors["out"] = out
    tensors.update(extras)
    worst = 0.0
    differentiable = out.is_floating_point() and c["diff"]
    if differentiable:
        w = m.randn(*out.shape)
        w = w.to(out.dtype) if c["exact"] else w
        loss = (out * w).sum()
        grads = torch.autograd.grad(loss, [t[k] for k in c["diff"]])
        tensors["w"] = w
        for k, g in zip(c["diff"], grads):
            tensors["grad_" + k] = g
    # self-check: does float32 PyTorch meet the tolerance against this reference?
    t32, out32, extras32 = run_case(c, inputs, torch.float32)
    if out.is_floating_point():
        worst = max(worst, scaled_error(out32, out, c["rtol"], c["atol"]))
    else:
        assert torch.equal(out32, out), c["name"]
    for k, v in extras32.items():
        worst = max(worst, scaled_error(v, extras[k], c["rtol"], c["atol"]))
    if differentiable:
        loss32 = (out32 * tensors["w"].float()).sum()
        grads32 = torch.autograd.grad(loss32, [t32[k] for k in c["diff"]])
        for k, g in zip(c["diff"], grads32):
            worst = max(worst, scaled_error(g, tensors["grad_" + k], c["rtol"], c["atol"]))
    # stored values are the f32 roundings of the f64 results: that rounding must be harmless
    for k, v in tensors.items():
        if v.is_floating_point() and not c["exact"]:
            assert scaled_error(v.float(), v, c["rtol"], c["atol"]) < 0.05, (c["name"], k)
    body = ",".join('"%s":%s' % (k, encode_tensor(v, c["exact"])) for k, v in tensors.items())
    attrs = dict(c["attrs"], rtol=c["rtol"], atol=c["atol"])
    attr_body = ",".join('"%s":%s' % (k, encode_value(v)) for k, v in attrs.items())
    return '"%s":{"attrs":{%s},"tensors":{%s}}' % (c["name"], attr_body, body), worst


def group_cases(group):
    """The cases that tests/fixture_cases_<group>.py declares (with case(), unary(), binary()
    imported from this file), apart from the core list."""
    global CASES
    sys.modules.setdefault("gen_fixtures", sys.modules[__name__])
    core, CASES = CASES, []
    try:
        importlib.import_module("fixture_cases_" + group)
        return CASES
    finally:
        CASES = core


def main():
    """No argument or "core": the cases above, into op_fixtures.json. A group name: the cases
    of tests/fixture_cases_<group>.py, into op_fixtures_<group>.json. "all": every file."""
    groups = sys.argv[1:] or ["core"]
    if groups == ["all"]:
        groups = ["core"] + sorted(f[len("fixture_cases_"):-3] for f in os.listdir(HERE)
                                   if f.startswith("fixture_cases_") and f.endswith(".py"))
    for group in groups:
        if group == "core":
            write_fixtures(CASES, build, "tests/gen_fixtures.py", OUT_PATH)
        else:
            out = os.path.join(HERE, "data", "op_fixtures_%s.json" % group)
            write_fixtures(group_cases(group), build, "tests/gen_fixtures.py " + group, out)


if __name__ == "__main__":
    main()

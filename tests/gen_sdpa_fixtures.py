#!/usr/bin/python3
"""Writes tests/data/sdpa_fixtures.json: PyTorch references for scaled_dot_product_attention
(tests/test_sdpa.cpp).

Run with Debian's interpreter (torch 1.13):   /usr/bin/python3 tests/gen_sdpa_fixtures.py

torch 1.13 has no F.scaled_dot_product_attention, so the reference is its documented math
(torch 2's "math" backend) written out in float64: softmax((q·scale)·kᵀ + mask)·v, a bool mask
true where a query may attend, is_causal the top-left lower triangle. Each case stores the
inputs (f32-rounded), the output, a weight w and the gradients of sum(out * w) with respect to
q, k, v (and a float mask). Same machinery, seeds and JSON writer as tests/gen_fixtures.py.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_fixtures as gf  # noqa: E402

gf.MAX_ELEMENTS = 400  # these cases are a little larger than the op cases
from fixture_json import write_fixtures  # noqa: E402

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sdpa_fixtures.json")
CASES = []


def sdpa(q, k, v, mask=None, causal=False, scale=None):
    """torch 2's math definition of F.scaled_dot_product_attention (no dropout)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q * scale) @ k.transpose(-1, -2)
    if causal:
        blocked = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1)
        s = s.masked_fill(blocked, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


def bool_mask(m, *shape):
    """Random true/false (true = may attend) with at least one true in every row."""
    b = torch.rand(*shape, generator=m.g) > 0.4
    b[..., 0] = True
    return b


def key_padding(lengths, s):
    """[N, 1, 1, S]: row n may attend to its first lengths[n] keys."""
    return (torch.arange(s)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]


def add(name, shapes, mask=None, diff_mask=False, causal=False, scale=None):
    qs, ks, vs = shapes

    def make(m):
        t = {"q": m.randn(*qs), "k": m.randn(*ks), "v": m.randn(*vs)}
        if mask is not None:
            t["mask"] = mask(m)
        return t

    diff = ("q", "k", "v") + (("mask",) if diff_mask else ())
    attrs = {"is_causal": causal}
    if scale is not None:
        attrs["scale"] = scale
    CASES.append(dict(name=name, make=make, diff=diff, attrs=attrs, rtol=1e-5, atol=1e-6,
                      exact=False,
                      fn=lambda t: sdpa(t["q"], t["k"], t["v"], t.get("mask"), causal, scale)))


add("plain", ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 8)))
add("value_dim", ((2, 2, 4, 8), (2, 2, 7, 8), (2, 2, 7, 4)), scale=0.3)
add("rank3", ((3, 5, 4), (3, 6, 4), (3, 6, 4)))
add("rank2", ((5, 4), (6, 4), (6, 3)))
add("lead_broadcast", ((2, 3, 5, 4), (1, 3, 6, 4), (2, 1, 6, 4)))
add("bool_mask", ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 8)), mask=lambda m: bool_mask(m, 5, 6))
add("bool_mask_full", ((2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8)),
    mask=lambda m: bool_mask(m, 2, 2, 4, 6))
add("key_padding", ((3, 2, 4, 8), (3, 2, 6, 8), (3, 2, 6, 8)),
    mask=lambda m: key_padding([6, 3, 1], 6))
add("float_mask", ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 8)), diff_mask=True,
    mask=lambda m: m.randn(2, 1, 5, 6))
add("float_mask_row", ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)), diff_mask=True,
    mask=lambda m: m.randn(6))
add("causal", ((2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8)), causal=True)
add("causal_rect", ((2, 2, 4, 8), (2, 2, 7, 8), (2, 2, 7, 8)), causal=True)
add("causal_tall", ((1, 2, 6, 4), (1, 2, 3, 4), (1, 2, 3, 4)), causal=True, scale=0.5)


def main():
    write_fixtures(CASES, gf.build, "tests/gen_sdpa_fixtures.py", OUT_PATH, separator=",\n")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Writes tests/data/layer_fixtures.json: PyTorch reference runs of ember's layer modules.

Run with Debian's interpreter (torch 1.13 lives there):   /usr/bin/python3 tests/gen_layer_fixtures.py

Each case is one torch.nn module (Conv2d, MaxPool2d, AvgPool2d, BatchNorm1d/2d, LayerNorm,
Embedding) and a list of steps. The file stores, per case:
  module      the ember config JSON ({"type", "options"}) that nn::build turns into the module
  repr        PyTorch's repr of the module (ember's "Type(extra_repr)" must match it)
  state_dict  the module's initial state_dict under PyTorch's names (parameters and buffers)
  steps       each step: "train" (the module's mode) and tensors: the input, the output, a
              fixed weight `w`, the gradients of loss = sum(out * w) for the input
              (`grad_input`, float inputs only) and every parameter (`grad.<name>`), and
              the buffers after the step (`state.<name>`) for modules that have any
  attrs       rtol / atol of the comparison (fixtures.hpp scales atol by max(1, max|want|))
Gradients are zeroed before every step. BatchNorm cases run three training steps (running
statistics and num_batches_tracked advance) and then one eval step.

The reference runs in float64 on f32-rounded parameters and inputs and is stored rounded to
f32. Before writing, every case is rerun in float32 PyTorch and must land within a quarter of
its tolerance, so no tolerance is tighter than an honest f32 implementation can meet.
Deterministic: fixed per-case seeds (crc32 of the name), one thread, a compact emitter.
"""
import math
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_json import encode_tensor as _encode_tensor, scaled_error, write_fixtures  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "data", "layer_fixtures.json")
MAX_ELEMENTS = 600


def f32(t):
    return t.to(torch.float32).to(torch.float64)


class Maker:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def randn(self, *shape, scale=1.0, shift=0.0):
        return f32(torch.randn(shape, generator=self.g, dtype=torch.float64) * scale + shift)

    def distinct(self, *shape):
        """A permutation of well separated values: no ties inside a pooling window."""
        n = math.prod(shape)
        perm = torch.randperm(n, generator=self.g).to(torch.float64)
        jitter = torch.rand(n, generator=self.g, dtype=torch.float64) * 0.5
        return f32(((perm + jitter) * 0.25 - n * 0.125).reshape(shape))

    def randint(self, lo, hi, *shape):
        return torch.randint(lo, hi, shape, generator=self.g, dtype=torch.int64)


# ----------------------------------------------------------------------------------------
# cases: (name, ember config, torch module factory, input makers per step, train flags)

CASES = []


def case(name, config, make_module, inputs, train=None, rtol=1e-4, atol=1e-5):
    """inputs(m) returns one input per step; train gives each step's mode (default: all True)."""
    CASES.append(dict(name=name, config=config, make_module=make_module, inputs=inputs,
                      train=train, rtol=rtol, atol=atol))


def pair(v):
    return list(v) if isinstance(v, (tuple, list)) else v


def conv(name, cin, cout, k, shape, stride=1, padding=0, dilation=1, groups=1, bias=True):
    opts = {"in_channels": cin, "out_channels": cout, "kernel_size": pair(k), "stride": pair(stride),
            "padding": pair(padding), "dilation": pair(dilation), "groups": groups, "bias": bias}
    case(name, {"type": "Conv2d", "options": opts},
         lambda: nn.Conv2d(cin, cout, k, stride=stride, padding=padding, dilation=dilation,
                           groups=groups, bias=bias),
         lambda m: [m.randn(*shape)])


conv("conv_basic", 3, 4, 3, (2, 3, 7, 6))
conv("conv_stride_padding", 2, 3, (3, 2), (2, 2, 7, 5), stride=(2, 1), padding=(1, 2))
conv("conv_dilation", 2, 4, 3, (2, 2, 8, 8), padding=2, dilation=2)
conv("conv_groups_nobias", 4, 6, 3, (2, 4, 5, 5), padding=1, groups=2, bias=False)
conv("conv_depthwise", 3, 6, (2, 3), (2, 3, 7, 8), stride=2, groups=3)
conv("conv_1x1", 5, 3, 1, (2, 5, 4, 3))
conv("conv_everything", 4, 2, (3, 2), (2, 4, 9, 7), stride=(2, 3), padding=(1, 2), dilation=(2, 1),
     groups=2, bias=False)
conv("conv_unbatched", 2, 3, 3, (2, 5, 6), padding=1)
conv("conv_kernel_equals_input", 2, 2, (4, 3), (2, 2, 4, 3))


def maxpool(name, k, shape, stride=None, padding=0, dilation=1, ceil_mode=False):
    opts = {"kernel_size": pair(k), "stride": pair(stride) if stride is not None else None,
            "padding": pair(padding), "dilation": pair(dilation), "ceil_mode": ceil_mode}
    case(name, {"type": "MaxPool2d", "options": opts},
         lambda: nn.MaxPool2d(k, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode),
         lambda m: [m.distinct(*shape)])


maxpool("maxpool_2", 2, (2, 3, 8, 6))
maxpool("maxpool_2_odd", 2, (2, 2, 7, 5))
maxpool("maxpool_2_ceil", 2, (1, 2, 5, 7), ceil_mode=True)
maxpool("maxpool_3_s2_p1_ceil", 3, (2, 2, 9, 7), stride=2, padding=1, ceil_mode=True)
maxpool("maxpool_dilation", (2, 3), (1, 3, 7, 9), stride=(1, 2), padding=1, dilation=(2, 1))
maxpool("maxpool_unbatched", 3, (2, 6, 6), stride=1, padding=1)


def avgpool(name, k, shape, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    opts = {"kernel_size": pair(k), "stride": pair(stride) if stride is not None else None,
            "padding": pair(padding), "ceil_mode": ceil_mode, "count_include_pad": count_include_pad}
    case(name, {"type": "AvgPool2d", "options": opts},
         lambda: nn.AvgPool2d(k, stride=stride, padding=padding, ceil_mode=ceil_mode,
                              count_include_pad=count_include_pad),
         lambda m: [m.randn(*shape)])


avgpool("avgpool_2", 2, (2, 3, 6, 8))
avgpool("avgpool_3_s2_p1", 3, (2, 2, 7, 6), stride=2, padding=1)
avgpool("avgpool_3_s2_p1_exclude_pad", 3, (2, 2, 7, 6), stride=2, padding=1, count_include_pad=False)
avgpool("avgpool_ceil", (3, 2), (1, 2, 8, 7), stride=2, padding=(1, 0), ceil_mode=True)
avgpool("avgpool_ceil_exclude_pad", (3, 2), (1, 2, 8, 7), stride=2, padding=1, ceil_mode=True,
        count_include_pad=False)


def batchnorm(name, kind, c, shapes, eps=1e-5, momentum=0.1, affine=True, track=True, steps=None):
    opts = {"num_features": c, "eps": eps, "momentum": momentum, "affine": affine,
            "track_running_stats": track}
    cls = nn.BatchNorm1d if kind == "BatchNorm1d" else nn.BatchNorm2d

    def make():
        mod = cls(c, eps=eps, momentum=momentum, affine=affine, track_running_stats=track)
        if affine:  # non-trivial affine parameters
            g = torch.Generator().manual_seed(zlib.crc32(name.encode()) + 1)
            with torch.no_grad():
                mod.weight.copy_(f32(torch.rand(c, generator=g, dtype=torch.float64) + 0.5))
                mod.bias.copy_(f32(torch.randn(c, generator=g, dtype=torch.float64) * 0.5))
        return mod

    case(name, {"type": kind, "options": opts}, make,
         lambda m: [m.randn(*s, scale=1.5, shift=0.7) for s in shapes],
         train=steps or [True, True, True, False])


batchnorm("bn2d", "BatchNorm2d", 3, [(4, 3, 3, 2)] * 4)
batchnorm("bn2d_cumulative", "BatchNorm2d", 2, [(3, 2, 2, 3)] * 4, momentum=None, eps=1e-3)
batchnorm("bn2d_no_affine", "BatchNorm2d", 2, [(2, 2, 3, 3)] * 4, affine=False, momentum=0.3)
batchnorm("bn2d_untracked", "BatchNorm2d", 3, [(2, 3, 2, 2)] * 2, track=False, steps=[True, False])
batchnorm("bn1d_2d", "BatchNorm1d", 4, [(6, 4)] * 4)
batchnorm("bn1d_3d", "BatchNorm1d", 3, [(4, 3, 5)] * 4)


def layernorm(name, shape, normalized, eps=1e-5, affine=True, bias=True):
    opts = {"normalized_shape": list(normalized), "eps": eps, "elementwise_affine": affine, "bias": bias}

    def make():
        mod = nn.LayerNorm(normalized, eps=eps, elementwise_affine=affine)
        if affine:
            g = torch.Generator().manual_seed(zlib.crc32(name.encode()) + 1)
            with torch.no_grad():
                mod.weight.copy_(f32(torch.rand(normalized, generator=g, dtype=torch.float64) + 0.5))
                mod.bias.copy_(f32(torch.randn(normalized, generator=g, dtype=torch.float64) * 0.5))
            if not bias:  # torch 1.13 has no bias=False: drop the parameter as newer versions do
                mod.bias = None
        return mod

    case(name, {"type": "LayerNorm", "options": opts}, make, lambda m: [m.randn(*shape, scale=2.0, shift=0.5)])


layernorm("layernorm_last", (2, 3, 6), (6,))
layernorm("layernorm_2d", (2, 3, 4), (3, 4), eps=1e-3)
layernorm("layernorm_no_affine", (3, 5), (5,), affine=False)
layernorm("layernorm_no_bias", (2, 2, 5), (5,), bias=False)


def embedding(name, num, dim, index, padding_idx=None):
    opts = {"num_embeddings": num, "embedding_dim": dim, "padding_idx": padding_idx}
    case(name, {"type": "Embedding", "options": opts},
         lambda: nn.Embedding(num, dim, padding_idx=padding_idx),
         lambda m: [torch.tensor(index, dtype=torch.int64)])


embedding("embedding_plain", 6, 3, [[0, 5, 2], [2, 2, 1]])
embedding("embedding_padding", 7, 4, [[0, 2, 3, 2], [2, 6, 1, 0]], padding_idx=2)
embedding("embedding_negative_padding", 5, 3, [4, 1, 4, 0, 3], padding_idx=-1)

# ----------------------------------------------------------------------------------------
# running and encoding


def run(c, mod, inputs, weights, dtype):
    """Runs every step on `mod` (already in `dtype`); returns a list of {name: tensor}."""
    steps = []
    train = c["train"] or [True] * len(inputs)
    for i, x in enumerate(inputs):
        mod.train(train[i])
        mod.zero_grad(set_to_none=True)
        x = x.clone()
        if x.is_floating_point():
            x = x.to(dtype).requires_grad_(True)
        out = mod(x)
        w = weights[i] if weights is not None else None
        if w is None:
            g = torch.Generator().manual_seed(zlib.crc32(c["name"].encode()) + 100 + i)
            w = f32(torch.randn(out.shape, generator=g, dtype=torch.float64))
        loss = (out * w.to(dtype)).sum()
        loss.backward()
        t = {"input": x.detach(), "w": w, "output": out.detach()}
        if x.is_floating_point():
            t["grad_input"] = x.grad
        for n, p in mod.named_parameters():
            t["grad." + n] = p.grad if p.grad is not None else torch.zeros_like(p)
        for n, b in mod.named_buffers():
            t["state." + n] = b.detach().clone()
        steps.append(t)
    return steps


def encode_tensor(t):
    return _encode_tensor(t, MAX_ELEMENTS)


def encode_json(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, (list, tuple)):
        return "[%s]" % ",".join(encode_json(x) for x in v)
    if isinstance(v, dict):
        return "{%s}" % ",".join('"%s":%s' % (k, encode_json(x)) for k, x in v.items())
    raise TypeError(type(v))


def tensors_json(d):
    return "{%s}" % ",".join('"%s":%s' % (k, encode_tensor(v)) for k, v in d.items())


def build(c):
    seed = zlib.crc32(c["name"].encode())
    torch.manual_seed(seed)  # the module's own initialisation
    mod = c["make_module"]()
    with torch.no_grad():  # parameters exactly representable in f32
        for p in mod.parameters():
            p.copy_(f32(p))
    state = {k: v.detach().clone() for k, v in mod.state_dict().items()}
    inputs = c["inputs"](Maker(seed))
    ref = run(c, mod.double(), inputs, None, torch.float64)
    weights = [s["w"] for s in ref]
    mod32 = c["make_module"]()
    mod32.load_state_dict(state)
    got = run(c, mod32.float(), inputs, weights, torch.float32)
    worst = 0.0
    for s_ref, s_got in zip(ref, got):
        assert s_ref.keys() == s_got.keys(), c["name"]
        for k in s_ref:
            if k in ("input", "w"):
                continue
            worst = max(worst, scaled_error(s_got[k], s_ref[k], c["rtol"], c["atol"]))
    steps = []
    for i, s in enumerate(ref):
        train = (c["train"] or [True] * len(inputs))[i]
        steps.append('{"train":%s,"tensors":%s}' % ("true" if train else "false", tensors_json(s)))
    attrs = {"rtol": c["rtol"], "atol": c["atol"]}
    text = '"%s":{"module":%s,"repr":%s,"attrs":%s,"state_dict":%s,"steps":[%s]}' % (
        c["name"], encode_json(c["config"]), encode_json(repr(mod32)), encode_json(attrs),
        tensors_json(state), ",".join(steps))
    return text, worst


def main():
    write_fixtures(CASES, build, "tests/gen_layer_fixtures.py", OUT_PATH)


if __name__ == "__main__":
    main()

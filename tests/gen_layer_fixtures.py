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

# ---- convolution, pooling and upsampling modules (issue 16, second part)


def conv_nd(name, kind, cin, cout, k, shape, **kw):
    torch_kw = dict(kw)
    opts = {"in_channels": cin, "out_channels": cout, "kernel_size": pair(k)}
    opts.update({key: pair(v) for key, v in kw.items()})
    case(name, {"type": kind, "options": opts},
         lambda: getattr(nn, kind)(cin, cout, k, **torch_kw), lambda m: [m.randn(*shape)])


conv_nd("conv1d_basic", "Conv1d", 3, 4, 3, (2, 3, 10))
conv_nd("conv1d_everything", "Conv1d", 4, 6, 3, (2, 4, 11), stride=2, padding=2, dilation=2,
        groups=2, bias=False)
conv_nd("conv1d_reflect", "Conv1d", 2, 3, 3, (2, 2, 8), padding=2, padding_mode="reflect")
conv_nd("conv1d_circular", "Conv1d", 2, 2, 3, (1, 2, 7), padding=1, padding_mode="circular")
conv_nd("conv2d_circular", "Conv2d", 2, 3, 3, (1, 2, 5, 6), padding=(1, 2), padding_mode="circular")
conv_nd("conv2d_replicate", "Conv2d", 2, 2, (2, 3), (2, 2, 4, 5), stride=(1, 2), padding=1,
        padding_mode="replicate")
conv_nd("conv1d_same_even_kernel", "Conv1d", 2, 3, 4, (2, 2, 9), padding="same", dilation=1)
conv_nd("conv2d_same_reflect", "Conv2d", 2, 2, (3, 2), (1, 2, 5, 6), padding="same",
        dilation=(1, 2), padding_mode="reflect")
conv_nd("conv3d_valid", "Conv3d", 1, 2, 2, (1, 1, 3, 4, 4), padding="valid")
conv_nd("conv3d_basic", "Conv3d", 2, 3, (2, 3, 3), (1, 2, 4, 5, 5), stride=(1, 2, 1),
        padding=(1, 0, 1))
conv_nd("conv3d_groups_replicate", "Conv3d", 2, 2, 3, (1, 2, 4, 4, 4), padding=1, groups=2,
        padding_mode="replicate")
conv_nd("convt2d_basic", "ConvTranspose2d", 3, 2, 3, (2, 3, 4, 4), stride=2, padding=1,
        output_padding=1)
conv_nd("convt2d_groups_dilation", "ConvTranspose2d", 4, 6, (2, 3), (1, 4, 3, 3), stride=(2, 1),
        groups=2, bias=False, dilation=(1, 2))
conv_nd("convt1d_basic", "ConvTranspose1d", 3, 4, 4, (2, 3, 6), stride=2, padding=1)
conv_nd("convt1d_unbatched", "ConvTranspose1d", 2, 2, 3, (2, 5), stride=3, output_padding=2)


def simple(name, kind, opts, make, shape, distinct=False):
    case(name, {"type": kind, "options": opts}, make,
         lambda m: [m.distinct(*shape) if distinct else m.randn(*shape)])


simple("maxpool1d_3_s2_p1", "MaxPool1d", {"kernel_size": 3, "stride": 2, "padding": 1},
       lambda: nn.MaxPool1d(3, 2, 1), (2, 3, 10), distinct=True)
simple("maxpool1d_dilation_ceil", "MaxPool1d",
       {"kernel_size": 2, "stride": None, "dilation": 2, "ceil_mode": True},
       lambda: nn.MaxPool1d(2, dilation=2, ceil_mode=True), (1, 2, 9), distinct=True)
simple("avgpool1d_exclude_pad", "AvgPool1d",
       {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
       lambda: nn.AvgPool1d(3, 2, 1, count_include_pad=False), (2, 3, 10))
simple("adaptive_avgpool1d", "AdaptiveAvgPool1d", {"output_size": 4},
       lambda: nn.AdaptiveAvgPool1d(4), (2, 3, 9))
simple("adaptive_avgpool2d", "AdaptiveAvgPool2d", {"output_size": [3, 2]},
       lambda: nn.AdaptiveAvgPool2d((3, 2)), (2, 2, 7, 5))
simple("adaptive_avgpool2d_global", "AdaptiveAvgPool2d", {"output_size": 1},
       lambda: nn.AdaptiveAvgPool2d(1), (2, 3, 4, 5))
simple("adaptive_maxpool1d", "AdaptiveMaxPool1d", {"output_size": 3},
       lambda: nn.AdaptiveMaxPool1d(3), (2, 2, 8), distinct=True)
simple("adaptive_maxpool2d", "AdaptiveMaxPool2d", {"output_size": [2, 3]},
       lambda: nn.AdaptiveMaxPool2d((2, 3)), (1, 2, 5, 7), distinct=True)
simple("upsample_nearest", "Upsample", {"scale_factor": 2.0, "mode": "nearest"},
       lambda: nn.Upsample(scale_factor=2.0), (1, 2, 3, 4))
simple("upsample_bilinear_align", "Upsample",
       {"size": [5, 7], "mode": "bilinear", "align_corners": True},
       lambda: nn.Upsample(size=(5, 7), mode="bilinear", align_corners=True), (1, 2, 3, 4))
simple("upsample_bilinear_scale", "Upsample", {"scale_factor": [2.0, 1.5], "mode": "bilinear"},
       lambda: nn.Upsample(scale_factor=(2.0, 1.5), mode="bilinear"), (1, 2, 3, 4))
simple("upsample_linear", "Upsample", {"size": 9, "mode": "linear"},
       lambda: nn.Upsample(size=9, mode="linear"), (2, 2, 4))
simple("pixel_shuffle_2", "PixelShuffle", {"upscale_factor": 2}, lambda: nn.PixelShuffle(2),
       (1, 8, 2, 3))
simple("pixel_unshuffle_2", "PixelUnshuffle", {"downscale_factor": 2},
       lambda: nn.PixelUnshuffle(2), (1, 2, 4, 6))
simple("unfold_2x3", "Unfold", {"kernel_size": [2, 3], "padding": 1, "stride": [1, 2]},
       lambda: nn.Unfold((2, 3), padding=1, stride=(1, 2)), (1, 2, 4, 5))
simple("fold_2x3", "Fold",
       {"output_size": [4, 5], "kernel_size": [2, 3], "padding": 1, "stride": [1, 2]},
       lambda: nn.Fold((4, 5), (2, 3), padding=1, stride=(1, 2)), (1, 12, 15))

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


# ========================================================================================
# Issue 16 section (activations, Unflatten/Bilinear, GroupNorm/InstanceNorm/RMSNorm, RNN/LSTM/
# GRU and cells, transformer decoder): written to tests/data/layer_fixtures_more.json and read
# by tests/test_layers_activation_rnn.cpp. Each case names how the module is called ("call"):
#   single       out = m(input)
#   bilinear     out = m(input1, input2)
#   rnn          output, h_n[, c_n] = m(input[, (h0, c0)]) — with "lengths" through
#                pack_padded_sequence(enforce_sorted=False) / pad_packed_sequence(total_length=T)
#   cell         h[, c] = m(input[, h or (h, c)])
#   decoder      out = m(tgt, memory, tgt_mask=..., memory_key_padding_mask=...)
#   transformer  out = m(src, tgt, tgt_mask=...)
# A step stores "input.<k>", "output.<k>", "w.<k>" (loss = Σ_k sum(output_k · w_k)),
# "grad_input.<k>" for float inputs, "grad.<param>" and "state.<buffer>". Boolean masks are
# inputs too. Besides the cases, "trajectory" holds a 20-step Adam run of an LSTM that learns
# the running sum of its input sequence (initial weights, data and torch's losses).
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

MORE_OUT_PATH = os.path.join(HERE, "data", "layer_fixtures_more.json")
MORE_CASES = []


def more(name, config, make_module, inputs, call="single", train=None, rtol=1e-4, atol=1e-5):
    """inputs(m) returns one dict of named inputs per step."""
    MORE_CASES.append(dict(name=name, config=config, make_module=make_module, inputs=inputs,
                           call=call, train=train, rtol=rtol, atol=atol))


def act(name, type_name, options, make, shape=(3, 4, 5), scale=2.0):
    more(name, {"type": type_name, "options": options}, make,
         lambda m: [{"input": m.randn(*shape, scale=scale)}])


act("act_softplus", "Softplus", {"beta": 1.0, "threshold": 20.0}, lambda: nn.Softplus(1.0, 20.0))
act("act_softplus_beta_threshold", "Softplus", {"beta": 2.0, "threshold": 3.0},
    lambda: nn.Softplus(2.0, 3.0), scale=3.0)
act("act_leaky_relu", "LeakyReLU", {"negative_slope": 0.2}, lambda: nn.LeakyReLU(0.2))
act("act_elu", "ELU", {"alpha": 0.5}, lambda: nn.ELU(0.5))
act("act_selu", "SELU", {}, lambda: nn.SELU())
act("act_relu6", "ReLU6", {}, lambda: nn.ReLU6(), scale=5.0)
act("act_mish", "Mish", {}, lambda: nn.Mish())
act("act_hardtanh", "Hardtanh", {"min_val": -0.5, "max_val": 1.5}, lambda: nn.Hardtanh(-0.5, 1.5))
act("act_hardswish", "Hardswish", {}, lambda: nn.Hardswish(), scale=3.0)
act("act_hardsigmoid", "Hardsigmoid", {}, lambda: nn.Hardsigmoid(), scale=3.0)
act("act_logsigmoid", "LogSigmoid", {}, lambda: nn.LogSigmoid(), scale=4.0)
act("act_prelu", "PReLU", {"num_parameters": 1, "init": 0.25}, lambda: nn.PReLU())
act("act_glu", "GLU", {"dim": 1}, lambda: nn.GLU(1), shape=(3, 6, 2))
act("act_relu", "ReLU", {}, lambda: nn.ReLU())
act("act_gelu_tanh", "GELU", {"approximate": "tanh"}, lambda: nn.GELU(approximate="tanh"))
act("act_silu", "SiLU", {}, lambda: nn.SiLU())
act("act_softmax", "Softmax", {"dim": 1}, lambda: nn.Softmax(dim=1))
act("act_log_softmax", "LogSoftmax", {"dim": -1}, lambda: nn.LogSoftmax(dim=-1))
act("identity", "Identity", {}, lambda: nn.Identity())
act("flatten_default", "Flatten", {"start_dim": 1, "end_dim": -1}, lambda: nn.Flatten())
act("flatten_0_1", "Flatten", {"start_dim": 0, "end_dim": 1}, lambda: nn.Flatten(0, 1))
act("unflatten", "Unflatten", {"dim": 1, "unflattened_size": [2, -1]}, lambda: nn.Unflatten(1, (2, -1)),
    shape=(3, 6, 2))


def seeded_like(name, p, scale=0.5, shift=0.0):
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()) + 1)
    return f32(torch.randn(p.shape, generator=g, dtype=torch.float64) * scale + shift)


def randomized(name, make, shift=0.0):
    """The module with every parameter drawn at random (non-trivial affine weights)."""
    def f():
        mod = make()
        with torch.no_grad():
            for p in mod.parameters():
                p.copy_(seeded_like(name, p, 0.5, shift))
        return mod
    return f


more("act_prelu_channels", {"type": "PReLU", "options": {"num_parameters": 3, "init": 0.25}},
     randomized("act_prelu_channels", lambda: nn.PReLU(3)), lambda m: [{"input": m.randn(2, 3, 4)}])

more("bilinear", {"type": "Bilinear", "options": {"in1_features": 3, "in2_features": 4, "out_features": 2,
                                                   "bias": True}},
     lambda: nn.Bilinear(3, 4, 2), lambda m: [{"input1": m.randn(5, 3), "input2": m.randn(5, 4)}],
     call="bilinear")
more("bilinear_nobias_batched", {"type": "Bilinear", "options": {"in1_features": 2, "in2_features": 3,
                                                                  "out_features": 4, "bias": False}},
     lambda: nn.Bilinear(2, 3, 4, bias=False),
     lambda m: [{"input1": m.randn(2, 3, 2), "input2": m.randn(2, 3, 3)}], call="bilinear")


def groupnorm(name, g, c, shape, eps=1e-5, affine=True):
    more(name, {"type": "GroupNorm", "options": {"num_groups": g, "num_channels": c, "eps": eps,
                                                  "affine": affine}},
         randomized(name, lambda: nn.GroupNorm(g, c, eps=eps, affine=affine), shift=1.0),
         lambda m: [{"input": m.randn(*shape, scale=2.0, shift=0.5)}])


groupnorm("groupnorm", 2, 6, (2, 6, 3, 2))
groupnorm("groupnorm_no_affine", 3, 3, (2, 3, 5), affine=False)
groupnorm("groupnorm_one_group", 1, 4, (3, 4), eps=1e-3)


def instancenorm(name, kind, c, shape, affine=False, track=False, momentum=0.1, steps=None):
    cls = nn.InstanceNorm1d if kind == "InstanceNorm1d" else nn.InstanceNorm2d
    more(name, {"type": kind, "options": {"num_features": c, "eps": 1e-5, "momentum": momentum,
                                           "affine": affine, "track_running_stats": track}},
         randomized(name, lambda: cls(c, momentum=momentum, affine=affine, track_running_stats=track),
                    shift=1.0),
         lambda m: [{"input": m.randn(*shape, scale=1.5, shift=0.7)} for _ in (steps or [True])],
         train=steps)


instancenorm("instancenorm1d", "InstanceNorm1d", 3, (2, 3, 6))
instancenorm("instancenorm1d_unbatched", "InstanceNorm1d", 3, (3, 6))
instancenorm("instancenorm1d_affine_tracked", "InstanceNorm1d", 3, (2, 3, 6), affine=True, track=True,
             steps=[True, True, False])
instancenorm("instancenorm2d", "InstanceNorm2d", 2, (2, 2, 3, 4))
instancenorm("instancenorm2d_affine_tracked", "InstanceNorm2d", 2, (2, 2, 3, 3), affine=True, track=True,
             momentum=0.2, steps=[True, True, False])


class RMSNormRef(nn.Module):
    """torch.nn.RMSNorm (PyTorch 2.4) written out: torch 1.13 has none. eps None: f32's
    machine epsilon (ember runs f32; the f64 reference must use the same eps)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        dims = tuple(range(-len(self.normalized_shape), 0))
        eps = self.eps if self.eps is not None else torch.finfo(torch.float32).eps
        y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
        return y * self.weight if self.weight is not None else y

    def extra_repr(self):
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)

    def _get_name(self):
        return "RMSNorm"


def rmsnorm(name, shape, normalized, eps=None, affine=True):
    more(name, {"type": "RMSNorm", "options": {"normalized_shape": list(normalized), "eps": eps,
                                                "elementwise_affine": affine}},
         randomized(name, lambda: RMSNormRef(normalized, eps, affine), shift=1.0),
         lambda m: [{"input": m.randn(*shape, scale=2.0, shift=0.3)}])


rmsnorm("rmsnorm", (2, 3, 8), (8,))
rmsnorm("rmsnorm_2d_eps", (2, 3, 4), (3, 4), eps=1e-3)
rmsnorm("rmsnorm_no_affine", (4, 5), (5,), affine=False)


def rnn(name, kind, opts, shape, h0=False, lengths=None, train=None):
    cls = {"RNN": nn.RNN, "LSTM": nn.LSTM, "GRU": nn.GRU}[kind]
    full = dict(opts)
    torch_opts = {k: v for k, v in opts.items() if k not in ("input_size", "hidden_size")}

    def inputs(m):
        x = m.randn(*shape)
        d = {"input": x}
        if h0:
            layers = opts.get("num_layers", 1) * (2 if opts.get("bidirectional") else 1)
            unbatched = len(shape) == 2
            n = shape[0] if opts.get("batch_first") and not unbatched else shape[1]
            p = opts.get("proj_size", 0) or opts["hidden_size"]
            d["h0"] = m.randn(*((layers, p) if unbatched else (layers, n, p)), scale=0.5)
            if kind == "LSTM":
                d["c0"] = m.randn(*((layers, opts["hidden_size"]) if unbatched else
                                    (layers, n, opts["hidden_size"])), scale=0.5)
        if lengths is not None:
            d["lengths"] = torch.tensor(lengths, dtype=torch.int64)
        return [d] * len(train or [True])

    more(name, {"type": kind, "options": full},
         lambda: cls(opts["input_size"], opts["hidden_size"], **torch_opts), inputs, call="rnn",
         train=train)


rnn("rnn_tanh", "RNN", {"input_size": 3, "hidden_size": 4}, (5, 2, 3))
rnn("rnn_relu_2layer_h0", "RNN", {"input_size": 3, "hidden_size": 4, "num_layers": 2, "nonlinearity": "relu"},
    (5, 2, 3), h0=True)
rnn("rnn_nobias_unbatched", "RNN", {"input_size": 3, "hidden_size": 4, "bias": False}, (5, 3), h0=True)
rnn("lstm", "LSTM", {"input_size": 3, "hidden_size": 5}, (4, 2, 3), h0=True)
rnn("lstm_bidir_2layer_batch_first", "LSTM",
    {"input_size": 3, "hidden_size": 4, "num_layers": 2, "bidirectional": True, "batch_first": True},
    (2, 5, 3), h0=True)
rnn("lstm_bidir_lengths", "LSTM", {"input_size": 2, "hidden_size": 3, "bidirectional": True},
    (6, 3, 2), h0=True, lengths=[3, 6, 1])
rnn("lstm_proj_2layer", "LSTM", {"input_size": 3, "hidden_size": 5, "num_layers": 2, "proj_size": 2},
    (4, 2, 3), h0=True)
rnn("gru", "GRU", {"input_size": 3, "hidden_size": 4}, (5, 2, 3), h0=True)
rnn("gru_bidir_2layer_lengths_batch_first", "GRU",
    {"input_size": 2, "hidden_size": 3, "num_layers": 2, "bidirectional": True, "batch_first": True},
    (3, 5, 2), lengths=[4, 2, 5])
rnn("gru_dropout_eval", "GRU", {"input_size": 3, "hidden_size": 4, "num_layers": 2, "dropout": 0.5},
    (4, 2, 3), train=[False])
rnn("rnn_lengths_h0", "RNN", {"input_size": 2, "hidden_size": 3, "num_layers": 2}, (4, 3, 2), h0=True,
    lengths=[2, 4, 1])


def cell(name, kind, opts, shape, state=True):
    cls = {"RNNCell": nn.RNNCell, "LSTMCell": nn.LSTMCell, "GRUCell": nn.GRUCell}[kind]
    torch_opts = {k: v for k, v in opts.items() if k not in ("input_size", "hidden_size")}

    def inputs(m):
        d = {"input": m.randn(*shape)}
        hs = (opts["hidden_size"],) if len(shape) == 1 else (shape[0], opts["hidden_size"])
        if state:
            d["h"] = m.randn(*hs, scale=0.5)
            if kind == "LSTMCell":
                d["c"] = m.randn(*hs, scale=0.5)
        return [d]

    more(name, {"type": kind, "options": opts},
         lambda: cls(opts["input_size"], opts["hidden_size"], **torch_opts), inputs, call="cell")


cell("rnncell", "RNNCell", {"input_size": 3, "hidden_size": 4}, (2, 3))
cell("rnncell_relu_nobias", "RNNCell", {"input_size": 3, "hidden_size": 4, "bias": False, "nonlinearity": "relu"},
     (2, 3))
cell("lstmcell", "LSTMCell", {"input_size": 3, "hidden_size": 4}, (2, 3))
cell("lstmcell_zero_state", "LSTMCell", {"input_size": 3, "hidden_size": 4}, (2, 3), state=False)
cell("grucell", "GRUCell", {"input_size": 3, "hidden_size": 4}, (2, 3))
cell("grucell_unbatched", "GRUCell", {"input_size": 3, "hidden_size": 4}, (3,))


def causal(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


def decoder_layer_options(d, h, ff, norm_first=False, activation="relu", batch_first=False):
    return {"d_model": d, "nhead": h, "dim_feedforward": ff, "dropout": 0.0, "activation": activation,
            "layer_norm_eps": 1e-5, "batch_first": batch_first, "norm_first": norm_first, "bias": True}


more("decoder_layer_post_norm", {"type": "TransformerDecoderLayer",
                                 "options": decoder_layer_options(8, 2, 16)},
     lambda: nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
     lambda m: [{"tgt": m.randn(4, 2, 8), "memory": m.randn(5, 2, 8), "tgt_mask": causal(4)}],
     call="decoder")
more("decoder_layer_pre_norm_gelu_batch_first",
     {"type": "TransformerDecoderLayer",
      "options": decoder_layer_options(8, 4, 12, norm_first=True, activation="gelu", batch_first=True)},
     lambda: nn.TransformerDecoderLayer(8, 4, dim_feedforward=12, dropout=0.0, activation="gelu",
                                        batch_first=True, norm_first=True),
     lambda m: [{"tgt": m.randn(2, 3, 8), "memory": m.randn(2, 4, 8),
                 "memory_key_padding_mask": torch.tensor([[False, False, True, True],
                                                          [False, False, False, False]])}],
     call="decoder")
more("decoder_stack_norm",
     {"type": "TransformerDecoder",
      "options": {"layer": decoder_layer_options(8, 2, 16), "num_layers": 2}},
     lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0), 2,
                                   norm=nn.LayerNorm(8)),
     lambda m: [{"tgt": m.randn(3, 2, 8), "memory": m.randn(4, 2, 8), "tgt_mask": causal(3)}],
     call="decoder")
MORE_CASES[-1]["config"]["children"] = {"norm": {"type": "LayerNorm", "options": {
    "normalized_shape": [8], "eps": 1e-5, "elementwise_affine": True, "bias": True}}}
more("transformer", {"type": "Transformer", "options": {
    "d_model": 8, "nhead": 2, "num_encoder_layers": 2, "num_decoder_layers": 1, "dim_feedforward": 16,
    "dropout": 0.0, "activation": "relu", "layer_norm_eps": 1e-5, "batch_first": False, "norm_first": False,
    "bias": True}},
     lambda: nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16, dropout=0.0),
     lambda m: [{"src": m.randn(5, 2, 8), "tgt": m.randn(4, 2, 8), "tgt_mask": causal(4)}],
     call="transformer", rtol=2e-4, atol=2e-5)


def call_more(kind, mod, xs):
    """Runs `mod` as its case says; returns {output name: tensor}."""
    if kind == "single":
        return {"output": mod(xs["input"])}
    if kind == "bilinear":
        return {"output": mod(xs["input1"], xs["input2"])}
    if kind == "rnn":
        x = xs["input"]
        lstm = isinstance(mod, nn.LSTM)
        hx = None
        if "h0" in xs:
            hx = (xs["h0"], xs["c0"]) if lstm else xs["h0"]
        if "lengths" in xs:
            total = x.shape[1] if mod.batch_first else x.shape[0]
            packed = pack_padded_sequence(x, xs["lengths"], batch_first=mod.batch_first, enforce_sorted=False)
            out, h = mod(packed, hx)
            out, _ = pad_packed_sequence(out, batch_first=mod.batch_first, total_length=total)
        else:
            out, h = mod(x, hx)
        if lstm:
            return {"output": out, "h_n": h[0], "c_n": h[1]}
        return {"output": out, "h_n": h}
    if kind == "cell":
        if isinstance(mod, nn.LSTMCell):
            h, c = mod(xs["input"], (xs["h"], xs["c"]) if "h" in xs else None)
            return {"h": h, "c": c}
        return {"h": mod(xs["input"], xs.get("h"))}
    if kind == "decoder":
        return {"output": mod(xs["tgt"], xs["memory"], tgt_mask=xs.get("tgt_mask"),
                              memory_key_padding_mask=xs.get("memory_key_padding_mask"))}
    if kind == "transformer":
        return {"output": mod(xs["src"], xs["tgt"], tgt_mask=xs.get("tgt_mask"))}
    raise ValueError(kind)


def run_more(c, mod, inputs, weights, dtype):
    steps = []
    train = c["train"] or [True] * len(inputs)
    for i, step_inputs in enumerate(inputs):
        mod.train(train[i])
        mod.zero_grad(set_to_none=True)
        xs = {}
        for k, v in step_inputs.items():
            v = v.clone()
            if v.is_floating_point():
                v = v.to(dtype).requires_grad_(True)
            xs[k] = v
        outs = call_more(c["call"], mod, xs)
        ws = weights[i] if weights is not None else {}
        loss = 0
        for j, (k, o) in enumerate(outs.items()):
            if k not in ws:
                g = torch.Generator().manual_seed(zlib.crc32(c["name"].encode()) + 100 + 10 * i + j)
                ws[k] = f32(torch.randn(o.shape, generator=g, dtype=torch.float64))
            loss = loss + (o * ws[k].to(dtype)).sum()
        loss.backward()
        t = {}
        for k, v in xs.items():
            t["input." + k] = v.detach()
        for k, o in outs.items():
            t["output." + k] = o.detach()
            t["w." + k] = ws[k]
        for k, v in xs.items():
            if v.is_floating_point():
                t["grad_input." + k] = v.grad
        for n, p in mod.named_parameters():
            t["grad." + n] = p.grad if p.grad is not None else torch.zeros_like(p)
        for n, b in mod.named_buffers():
            t["state." + n] = b.detach().clone()
        steps.append((t, ws))
    return steps


def build_more(c):
    seed = zlib.crc32(c["name"].encode())
    torch.manual_seed(seed)
    mod = c["make_module"]()
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_(f32(p))
    state = {k: v.detach().clone() for k, v in mod.state_dict().items()}
    inputs = c["inputs"](Maker(seed))
    ref = run_more(c, mod.double(), inputs, None, torch.float64)
    mod32 = c["make_module"]()
    mod32.load_state_dict(state)
    got = run_more(c, mod32.float(), inputs, [w for _, w in ref], torch.float32)
    worst = 0.0
    for (s_ref, _), (s_got, _) in zip(ref, got):
        assert s_ref.keys() == s_got.keys(), c["name"]
        for k in s_ref:
            if k.startswith("input.") or k.startswith("w."):
                continue
            worst = max(worst, scaled_error(s_got[k], s_ref[k], c["rtol"], c["atol"]))
    steps = []
    for i, (s, _) in enumerate(ref):
        train = (c["train"] or [True] * len(inputs))[i]
        steps.append('{"train":%s,"tensors":%s}' % ("true" if train else "false", tensors_json(s)))
    attrs = {"rtol": c["rtol"], "atol": c["atol"]}
    text = '"%s":{"module":%s,"call":"%s","repr":%s,"attrs":%s,"state_dict":%s,"steps":[%s]}' % (
        c["name"], encode_json(c["config"]), c["call"], encode_json(repr(mod32).split("\n")[0]),
        encode_json(attrs), tensors_json(state), ",".join(steps))
    return text, worst


def lstm_trajectory(dtype):
    """An LSTM(1, 8) + Linear(8, 1) head learning the running sum of a [T=8, N=16, 1]
    sequence with MSE and Adam(lr=0.02) for 20 steps. Returns (state, x, y, losses)."""
    torch.manual_seed(1616)
    lstm, head = nn.LSTM(1, 8), nn.Linear(8, 1)
    with torch.no_grad():
        for p in list(lstm.parameters()) + list(head.parameters()):
            p.copy_(f32(p))
    g = torch.Generator().manual_seed(1617)
    x = f32(torch.rand(8, 16, 1, generator=g, dtype=torch.float64) * 2 - 1)
    y = torch.cumsum(x, 0)
    state = {"lstm." + k: v.clone() for k, v in lstm.state_dict().items()}
    state.update({"head." + k: v.clone() for k, v in head.state_dict().items()})
    lstm, head = lstm.to(dtype), head.to(dtype)
    opt = torch.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=0.02)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        out, _ = lstm(x.to(dtype))
        loss = nn.functional.mse_loss(head(out), y.to(dtype))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return state, x, y, losses


def write_more():
    parts = []
    names = [c["name"] for c in MORE_CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    report = []
    for c in MORE_CASES:
        text, worst = build_more(c)
        parts.append(text)
        report.append((worst, c["name"]))
    report.sort(reverse=True)
    print("more: worst f32-vs-f64 error as a share of the tolerance:",
          ", ".join("%s %.3f" % (n, w) for w, n in report[:6]))
    bad = [(w, n) for w, n in report if w > 0.25]
    if bad:
        print("tolerance too tight for an f32 implementation (needs <= 0.25):", bad, file=sys.stderr)
        sys.exit(1)
    state, x, y, losses = lstm_trajectory(torch.float64)
    _, _, _, losses32 = lstm_trajectory(torch.float32)
    worst = max(abs(a - b) / abs(a) for a, b in zip(losses, losses32))
    print("more: LSTM trajectory, f32 vs f64 worst relative loss difference %.2e" % worst)
    assert worst < 2.5e-5, worst
    traj = '{"state_dict":%s,"input":%s,"target":%s,"lr":0.02,"losses":[%s],"rtol":1e-4}' % (
        tensors_json(state), encode_tensor(x), encode_tensor(y), ",".join(repr(v) for v in losses))
    text = '{"format":1,"generator":"tests/gen_layer_fixtures.py","trajectory":%s,"cases":{\n%s}}\n' % (
        traj, ",\n".join(parts))
    with open(MORE_OUT_PATH, "w") as f:
        f.write(text)
    print("wrote %s: %d cases, %d bytes" % (os.path.relpath(MORE_OUT_PATH), len(MORE_CASES), len(text)))


# ===================================== end of the issue 16 section ======================


def main():
    # --only-more writes only tests/data/layer_fixtures_more.json (the issue 16 section).
    if "--only-more" not in sys.argv:
        write_fixtures(CASES, build, "tests/gen_layer_fixtures.py", OUT_PATH)
    write_more()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Writes tests/data/attention_fixtures.json: PyTorch references for ember's attention and
transformer modules (read by tests/test_attention.cpp).

Run with Debian's interpreter (torch 1.13 lives there):
    /usr/bin/python3 tests/gen_attention_fixtures.py

Each case builds a torch module (nn.MultiheadAttention, nn.TransformerEncoderLayer or
nn.TransformerEncoder) in float32 from a fixed seed, replaces every parameter by random
f32 values (so that zero-initialised biases and unit LayerNorm weights are exercised too),
and stores:
  state_dict  the f32 parameters under their PyTorch names (loaded with strict=true in C++)
  tensors     inputs (f32; masks bool), "out", "weights" (MHA), a fixed random weight "w" of
              out's shape, and "grad_<input>" for loss = sum(out * w)
  grads       d loss / d parameter, by parameter name
  attrs       the module's options, how it is called, and the tolerances rtol / atol (the
              C++ side allows |got - want| <= atol * max(1, max|want|) + rtol * |want|)
The reference runs in float64 on the f32 values; the case is then re-run in float32 PyTorch
and must meet its own tolerance with room to spare (<= 0.25 of it), so the tolerance is one an
honest f32 implementation can meet. Dropout is 0 and the modules are in training mode (so no
fused inference path is taken). Output is deterministic: per-case seeds, one thread, fixed
float formatting.
"""
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_json import encode_tensor, scaled_error as _scaled_error, write_fixtures  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "data", "attention_fixtures.json")
RTOL = 1e-4
ATOL = 1e-5

# ----------------------------------------------------------------------------------------
# encoding (as tests/gen_fixtures.py: shortest round-trip f32 text)


def encode_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"%s"' % v
    raise TypeError(type(v))


def encode_dict(d, enc):
    return "{%s}" % ",".join('"%s":%s' % (k, enc(v)) for k, v in d.items())


# ----------------------------------------------------------------------------------------
# cases: each is (name, attrs, build(gen) -> module, inputs(gen) -> dict, call(module, t) -> (out, weights))

CASES = []


def scaled_error(got, want):
    return _scaled_error(got, want, RTOL, ATOL)


def f32(t):
    return t.to(torch.float32)


def randomise(module, g):
    """Every parameter <- f32 random values of a similar scale (biases and norms included)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                bound = (6.0 / (p.shape[0] + p.shape[1])) ** 0.5
                p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * bound)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))


def padding_mask(n, s):
    """[N, S] bool: sample i pads its last i+1 keys (key 0 is never padded)."""
    m = torch.zeros(n, s, dtype=torch.bool)
    for i in range(n):
        m[i, s - min(i + 1, s - 1):] = True
    return m


def causal(l, s):
    return torch.ones(l, s, dtype=torch.bool).triu(1)


def mha_case(name, e=8, h=2, l=4, s=None, n=2, batch_first=False, self_attn=True, kpm=False,
             mask=None, bias=True, average=True, unbatched=False):
    s = l if s is None else s
    assert not self_attn or s == l
    attrs = dict(kind="mha", embed_dim=e, num_heads=h, batch_first=batch_first, bias=bias,
                 self_attn=self_attn, average_attn_weights=average, unbatched=unbatched)

    def build():
        return nn.MultiheadAttention(e, h, dropout=0.0, bias=bias, batch_first=batch_first)

    def inputs(g):
        def seq(length):
            if unbatched:
                return f32(torch.randn(length, e, generator=g))
            shape = (n, length, e) if batch_first else (length, n, e)
            return f32(torch.randn(*shape, generator=g))
        t = {"query": seq(l)} if self_attn else {"query": seq(l), "key": seq(s), "value": seq(s)}
        if kpm:
            t["key_padding_mask"] = padding_mask(1 if unbatched else n, s)
            if unbatched:
                t["key_padding_mask"] = t["key_padding_mask"][0]
        if mask == "causal":
            t["attn_mask"] = causal(l, s)
        elif mask == "float":
            t["attn_mask"] = f32(0.5 * torch.randn(l, s, generator=g))
        elif mask == "per_head":  # [N*H, L, S] bool, diagonal always open
            m = torch.rand(n * h, l, s, generator=g) < 0.3
            m[:, torch.arange(l), torch.arange(l) % s] = False
            t["attn_mask"] = m
        return t

    def call(mod, t):
        q = t["query"]
        k, v = (q, q) if self_attn else (t["key"], t["value"])
        out, w = mod(q, k, v, key_padding_mask=t.get("key_padding_mask"), attn_mask=t.get("attn_mask"),
                     need_weights=True, average_attn_weights=average)
        return out, w

    CASES.append(dict(name=name, attrs=attrs, build=build, inputs=inputs, call=call,
                      diff=("query",) if self_attn else ("query", "key", "value")))


def layer_attrs(d, h, ff, activation, norm_first, batch_first, eps):
    return dict(d_model=d, nhead=h, dim_feedforward=ff, activation=activation, norm_first=norm_first,
                batch_first=batch_first, layer_norm_eps=eps)


def encoder_case(name, layers=0, d=8, h=2, ff=16, l=5, n=2, activation="relu", norm_first=False,
                 batch_first=False, eps=1e-5, kpm=False, causal_mask=False, final_norm=True):
    """layers == 0: one TransformerEncoderLayer; else a TransformerEncoder of that many."""
    attrs = dict(kind="encoder_layer" if layers == 0 else "encoder",
                 **layer_attrs(d, h, ff, activation, norm_first, batch_first, eps))
    if layers:
        attrs.update(num_layers=layers, final_norm=final_norm)

    def build():
        layer = nn.TransformerEncoderLayer(d, h, dim_feedforward=ff, dropout=0.0, activation=activation,
                                           layer_norm_eps=eps, batch_first=batch_first, norm_first=norm_first)
        if not layers:
            return layer
        return nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d, eps=eps) if final_norm else None,
                                     enable_nested_tensor=False)

    def inputs(g):
        shape = (n, l, d) if batch_first else (l, n, d)
        t = {"src": f32(torch.randn(*shape, generator=g))}
        if kpm:
            t["src_key_padding_mask"] = padding_mask(n, l)
        if causal_mask:
            t["src_mask"] = causal(l, l)
        return t

    def call(mod, t):
        kw = dict(src_key_padding_mask=t.get("src_key_padding_mask"))
        kw["mask" if layers else "src_mask"] = t.get("src_mask")
        return mod(t["src"], **kw), None

    CASES.append(dict(name=name, attrs=attrs, build=build, inputs=inputs, call=call, diff=("src",)))


# ---- MultiheadAttention
mha_case("mha_self")
mha_case("mha_self_batch_first", batch_first=True)
mha_case("mha_cross", self_attn=False, l=3, s=5)
mha_case("mha_cross_batch_first", self_attn=False, l=3, s=5, batch_first=True)
mha_case("mha_key_padding", self_attn=False, l=4, s=5, kpm=True)
mha_case("mha_causal", mask="causal")
mha_case("mha_causal_key_padding", mask="causal", kpm=True, batch_first=True)
mha_case("mha_float_mask", self_attn=False, l=3, s=4, mask="float")
mha_case("mha_per_head_mask", mask="per_head", average=False)
mha_case("mha_no_bias", bias=False, h=4, self_attn=False, l=3, s=4)
mha_case("mha_unbatched", unbatched=True, kpm=True, self_attn=False, l=3, s=4)
# ---- TransformerEncoderLayer / TransformerEncoder
encoder_case("encoder_layer_post_relu")
encoder_case("encoder_layer_post_gelu", activation="gelu", batch_first=True)
encoder_case("encoder_layer_pre_relu", norm_first=True, kpm=True)
encoder_case("encoder_layer_pre_gelu", norm_first=True, activation="gelu", causal_mask=True, eps=1e-6)
encoder_case("encoder_2_layers", layers=2, kpm=True, causal_mask=True)
encoder_case("encoder_2_layers_pre_no_norm", layers=2, norm_first=True, batch_first=True, final_norm=False)

# ----------------------------------------------------------------------------------------


def run(c, inputs, state, dtype):
    """Builds c's module with `state` in `dtype`, runs it; returns (module, tensors, out, weights)."""
    mod = c["build"]()
    mod.load_state_dict(state)
    mod.to(dtype)
    mod.train()
    t = {}
    for k, v in inputs.items():
        v = v.clone()
        if v.is_floating_point():
            v = v.to(dtype)
            if k in c["diff"]:
                v.requires_grad_(True)
        t[k] = v
    out, weights = c["call"](mod, t)
    return mod, t, out, weights


def build_case(c):
    seed = zlib.crc32(c["name"].encode())
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    proto = c["build"]()
    randomise(proto, g)
    state = {k: f32(v) for k, v in proto.state_dict().items()}
    inputs = c["inputs"](g)

    mod, t, out, weights = run(c, inputs, state, torch.float64)
    w = f32(torch.randn(out.shape, generator=g)).double()
    params = dict(mod.named_parameters())
    grads = torch.autograd.grad((out * w).sum(), [t[k] for k in c["diff"]] + list(params.values()))

    tensors = dict(inputs)
    tensors["out"] = out
    if weights is not None:
        tensors["weights"] = weights
    tensors["w"] = w
    for k, gk in zip(c["diff"], grads):
        tensors["grad_" + k] = gk
    param_grads = dict(zip(params.keys(), grads[len(c["diff"]):]))

    # self-check: float32 PyTorch against the f64 reference, under the stored tolerance
    mod32, t32, out32, weights32 = run(c, inputs, state, torch.float32)
    params32 = dict(mod32.named_parameters())
    grads32 = torch.autograd.grad((out32 * w.float()).sum(), [t32[k] for k in c["diff"]] + list(params32.values()))
    worst = scaled_error(out32, out)
    if weights is not None:
        worst = max(worst, scaled_error(weights32, weights))
    for g32, g64 in zip(grads32, grads):
        worst = max(worst, scaled_error(g32, g64))

    attrs = dict(c["attrs"], rtol=RTOL, atol=ATOL)
    text = '"%s":{"attrs":%s,\n "state_dict":%s,\n "tensors":%s,\n "grads":%s}' % (
        c["name"], encode_dict(attrs, encode_value), encode_dict(state, encode_tensor),
        encode_dict(tensors, encode_tensor), encode_dict(param_grads, encode_tensor))
    return text, worst


def main():
    write_fixtures(CASES, build_case, "tests/gen_attention_fixtures.py", OUT_PATH, separator=",\n")


if __name__ == "__main__":
    main()

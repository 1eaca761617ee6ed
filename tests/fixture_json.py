"""tests/fixture_json.py — what the fixture generators (tests/gen_*_fixtures.py) share: the
JSON text of tensors (f32 values printed as the shortest decimal that round-trips, as
fixtures.hpp reads them), the tolerance check of an f32 run against the f64 reference, and
the writing of the fixture file.
"""
import math
import os
import sys

import numpy as np
import torch


def f32_str(v):
    f = np.float32(v)
    assert np.isfinite(f), "non-finite value in a fixture"
    return repr(float(f)) if f == 0 else str(f)


EXACT_NAMES = {torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
               torch.int32: "i32", torch.uint8: "u8"}


def encode_tensor(t, max_elements=None, exact=False):
    """{"shape": [...], "dtype": "f32" | "i64" | "bool", "data": [...]} of a tensor. With
    `exact` the tensor keeps its own dtype ("f64" with every digit, "f16", "bf16", "i32", "u8"
    too): the fixtures of mixed-dtype cases, where the dtypes are the point."""
    t = t.detach().contiguous()
    assert max_elements is None or t.numel() <= max_elements, \
        f"tensor of {t.numel()} elements is too large"
    flat = t.reshape(-1).tolist()
    if exact and t.dtype in EXACT_NAMES:
        dt = EXACT_NAMES[t.dtype]
        if t.is_floating_point():
            assert all(math.isfinite(v) for v in flat), "non-finite value in a fixture"
            data = [repr(float(v)) for v in flat]
        else:
            data = [str(int(v)) for v in flat]
    elif t.dtype == torch.bool:
        dt, data = "bool", ["true" if v else "false" for v in flat]
    elif t.dtype in (torch.int64, torch.int32):
        dt, data = "i64", [str(int(v)) for v in flat]
    else:
        dt, data = "f32", [f32_str(v) for v in flat]
    shape = ",".join(str(s) for s in t.shape)
    return '{"shape":[%s],"dtype":"%s","data":[%s]}' % (shape, dt, ",".join(data))


def scaled_error(got, want, rtol, atol):
    """max |got-want| / (atol*max(1,max|want|) + rtol*|want|): <= 1 passes (as fixtures.hpp)."""
    if not want.is_floating_point():
        return 0.0 if torch.equal(got, want) else float("inf")
    got, want = got.detach().double(), want.detach().double()
    if want.numel() == 0:
        return 0.0
    scale = max(1.0, want.abs().max().item())
    bound = atol * scale + rtol * want.abs()
    return ((got - want).abs() / bound).max().item()


def write_fixtures(cases, build, generator, out_path, separator=","):
    """Builds every case (build(case) -> (json text, worst scaled error of the f32 run)),
    refuses a tolerance an f32 implementation could not meet (worst > 0.25), and writes
    {"format":1,"generator":...,"cases":{...}} to out_path."""
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    parts, report = [], []
    for c in cases:
        text, worst = build(c)
        parts.append(text)
        report.append((worst, c["name"]))
    bad = [(w, n) for w, n in report if w > 0.25]
    report.sort(reverse=True)
    print("worst f32-vs-f64 error as a share of the tolerance:",
          ", ".join("%s %.3f" % (n, w) for w, n in report[:6]))
    if bad:
        print("tolerance too tight for an f32 implementation (needs <= 0.25):", bad, file=sys.stderr)
        sys.exit(1)
    opening = "{\n" if separator.endswith("\n") else "{"
    text = '{"format":1,"generator":"%s","cases":%s%s}}\n' % (generator, opening, separator.join(parts))
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        f.write(text)
    print("wrote %s: %d cases, %d bytes" % (os.path.relpath(out_path), len(cases), len(text)))

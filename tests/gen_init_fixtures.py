#!/usr/bin/env python3
"""tests/gen_init_fixtures.py — torch.nn.init's formulas as the reference for ember's
nn::init (include/ember/nn/init.hpp; tests/test_nn_init.cpp).

    /usr/bin/python3 tests/gen_init_fixtures.py > tests/data/init_fixtures.json

The random numbers are ember's own, so what is compared is every number PyTorch derives
before it draws: the script replaces torch.Tensor.uniform_ and normal_ by recorders, runs
each torch.nn.init function, and writes the bounds and standard deviations it asked for
(exactly, as Python's repr of the doubles), beside calculate_gain's values, the fans, the
deterministic results of eye_ and dirac_, the zeros per column of sparse_, the moments of
trunc_normal_'s truncated normal, and which calls PyTorch refuses.
"""
import json
import math

import torch
import torch.nn.init as init

calls = []
_uniform, _normal = torch.Tensor.uniform_, torch.Tensor.normal_


def rec_uniform(self, a=0.0, b=1.0):
    calls.append(["uniform", float(a), float(b)])
    return self


def rec_normal(self, mean=0.0, std=1.0):
    calls.append(["normal", float(mean), float(std)])
    return self


def recorded(fn, *args, **kwargs):
    """The single draw torch.nn.init's `fn` asks for: [kind, p1, p2]."""
    calls.clear()
    torch.Tensor.uniform_, torch.Tensor.normal_ = rec_uniform, rec_normal
    try:
        fn(*args, **kwargs)
    finally:
        torch.Tensor.uniform_, torch.Tensor.normal_ = _uniform, _normal
    assert len(calls) == 1, calls
    return calls[0]


out = {}
out["gains"] = [[n, None, init.calculate_gain(n)] for n in
                ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"]]
out["gains"] += [["leaky_relu", p, init.calculate_gain("leaky_relu", p)]
                 for p in [0.0, 0.2, 1.0, math.sqrt(5.0)]]

shapes = [[3, 4], [8, 4, 3, 3], [6, 2, 5], [4, 3, 2, 2, 2], [16, 1, 7], [1, 9]]
out["fans"] = [[s, list(init._calculate_fan_in_and_fan_out(torch.empty(s)))] for s in shapes]

draws = []
for s in shapes:
    for gain in [1.0, 0.5, math.sqrt(2.0)]:
        draws.append(["xavier_uniform_", s, {"gain": gain},
                      recorded(init.xavier_uniform_, torch.empty(s), gain=gain)])
        draws.append(["xavier_normal_", s, {"gain": gain},
                      recorded(init.xavier_normal_, torch.empty(s), gain=gain)])
    for a in [0.0, 0.2, math.sqrt(5.0)]:
        for mode in ["fan_in", "fan_out"]:
            for nl in ["leaky_relu", "relu", "tanh", "linear", "selu"]:
                kw = {"a": a, "mode": mode, "nonlinearity": nl}
                draws.append(["kaiming_uniform_", s, kw,
                              recorded(init.kaiming_uniform_, torch.empty(s), **kw)])
                draws.append(["kaiming_normal_", s, kw,
                              recorded(init.kaiming_normal_, torch.empty(s), **kw)])
out["draws"] = draws

# trunc_normal_: the uniform range of its inverse-CDF method, and the moments of the result.
trunc = []
for mean, std, a, b in [[0.0, 1.0, -2.0, 2.0], [0.5, 0.2, 0.0, 1.0], [0.0, 0.02, -0.04, 0.04],
                        [1.0, 3.0, -1.0, 10.0]]:
    kind, lo, hi = recorded(init.trunc_normal_, torch.empty(4), mean, std, a, b)

    def pdf(x):
        return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)

    def cdf(x):
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    al, be = (a - mean) / std, (b - mean) / std
    z = cdf(be) - cdf(al)
    m = mean + std * (pdf(al) - pdf(be)) / z
    var = std * std * (1 + (al * pdf(al) - be * pdf(be)) / z - ((pdf(al) - pdf(be)) / z) ** 2)
    trunc.append({"mean": mean, "std": std, "a": a, "b": b, "uniform": [lo, hi],
                  "out_mean": m, "out_std": math.sqrt(var)})
out["trunc_normal"] = trunc

out["eye"] = [[s, init.eye_(torch.empty(s)).reshape(-1).tolist()] for s in [[3, 3], [2, 4], [4, 2]]]
out["dirac"] = [[s, g, init.dirac_(torch.empty(s), g).reshape(-1).tolist()]
                for s, g in [[[4, 2, 3], 1], [[6, 3, 3, 3], 2], [[2, 3, 1, 2, 3], 1], [[4, 1, 3], 4],
                             [[3, 5, 2, 2], 1]]]

torch.manual_seed(0)
out["sparse"] = []
for rows, cols, sparsity in [[10, 4, 0.1], [10, 4, 0.25], [7, 3, 0.5], [5, 2, 0.0], [64, 8, 0.9]]:
    t = init.sparse_(torch.empty(rows, cols), sparsity, std=0.01)
    zeros = (t == 0).sum(0).tolist()
    assert len(set(zeros)) == 1
    out["sparse"].append([rows, cols, sparsity, zeros[0]])


def raises(fn):
    try:
        fn()
    except (ValueError, RuntimeError, ZeroDivisionError):
        return True
    return False


refused = []
for name, fn in [["xavier_uniform_", init.xavier_uniform_], ["xavier_normal_", init.xavier_normal_],
                 ["kaiming_uniform_", init.kaiming_uniform_],
                 ["kaiming_normal_", init.kaiming_normal_], ["orthogonal_", init.orthogonal_],
                 ["eye_", init.eye_], ["sparse_", lambda t: init.sparse_(t, 0.5)],
                 ["dirac_", init.dirac_]]:
    for s in [[5], [3, 4], [2, 3, 4], [2, 3, 4, 5], [2, 3, 2, 2, 2], [2, 2, 2, 2, 2, 2]]:
        refused.append([name, s, raises(lambda: fn(torch.empty(s)))])
refused.append(["kaiming_uniform_ mode fan_avg", [3, 4],
                raises(lambda: init.kaiming_uniform_(torch.empty(3, 4), mode="fan_avg"))])
refused.append(["calculate_gain swish", [], raises(lambda: init.calculate_gain("swish"))])
refused.append(["dirac_ groups 3 of 4", [4, 2, 3], raises(lambda: init.dirac_(torch.empty(4, 2, 3), 3))])
out["refused"] = refused
out["torch_version"] = torch.__version__

print(json.dumps(out, indent=None, separators=(",", ":")))

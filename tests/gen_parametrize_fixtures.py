#!/usr/bin/python3
"""Writes tests/data/parametrize_fixtures.json: PyTorch's parametrizations (weight_norm,
spectral_norm, orthogonal) on Linear and convolution layers, for tests/test_parametrize.cpp.

Run with Debian's interpreter (torch 1.13):   /usr/bin/python3 tests/gen_parametrize_fixtures.py

Everything runs in float64 and is stored with every digit. For each case: the module's state
dict after registration (PyTorch's names), an input x, a fixed weight w, the output, the
gradients of the loss sum(out * w) by state-dict name, and for spectral_norm the _u/_v buffers
after the forward. torch 1.13 has no parametrizations.weight_norm (2.1 added it): the case
registers the same parametrization by hand (right_inverse -> (g, v), forward
torch._weight_norm(v, g, dim)), which gives 2.x's names original0/original1.
"""
import os
import sys

import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal, spectral_norm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_json import encode_tensor  # noqa: E402

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "parametrize_fixtures.json")


class WeightNorm(nn.Module):
    """torch 2.x's _WeightNorm (dim -1 means every dim, as torch.norm_except_dim)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return torch._weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return torch.norm_except_dim(weight, 2, self.dim), weight


def enc(t):
    return encode_tensor(t, exact=True)


def run(name, module, x_shape, register, train_steps=1, eval_after=False, seed=0):
    torch.manual_seed(seed)
    m = module.double()
    register(m)
    if name.startswith("orthogonal"):
        with torch.no_grad():
            noise = 0.2 * torch.randn_like(m.parametrizations.weight.original)
            noise.fill_diagonal_(0)  # householder reads the diagonal's signs (PyTorch's .int())
            m.parametrizations.weight.original.add_(noise)
    m.train()
    state = {k: v.detach().clone() for k, v in m.state_dict().items()}
    x = torch.randn(*x_shape, dtype=torch.float64)
    out = None
    for _ in range(train_steps):
        out = m(x)
    w = torch.randn(out.shape, dtype=torch.float64)
    (out * w).sum().backward()
    grads = {k: p.grad for k, p in m.named_parameters()}
    parts = ['"state":{%s}' % ",".join('"%s":%s' % (k, enc(v)) for k, v in state.items()),
             '"x":%s' % enc(x), '"w":%s' % enc(w), '"out":%s' % enc(out),
             '"train_steps":%d' % train_steps,
             '"grads":{%s}' % ",".join('"%s":%s' % (k, enc(g)) for k, g in grads.items()),
             '"after":{%s}' % ",".join('"%s":%s' % (k, enc(v)) for k, v in m.state_dict().items())]
    if eval_after:
        m.eval()
        with torch.no_grad():
            parts.append('"eval_out":%s' % enc(m(x)))
    return '"%s":{%s}' % (name, ",".join(parts))


def main():
    def wn(dim):
        return lambda m: parametrize.register_parametrization(m, "weight", WeightNorm(dim))

    def sn(**kw):
        return lambda m: spectral_norm(m, **kw)

    def orth(**kw):
        return lambda m: orthogonal(m, **kw)

    cases = [
        run("weight_norm_linear", nn.Linear(5, 3), (4, 5), wn(0), seed=1),
        run("weight_norm_linear_dim1", nn.Linear(5, 3), (4, 5), wn(1), seed=2),
        run("weight_norm_conv1d_all", nn.Conv1d(3, 4, 3), (2, 3, 7), wn(None), seed=3),
        run("weight_norm_conv2d", nn.Conv2d(2, 3, 3, padding=1), (2, 2, 5, 5), wn(0), seed=4),
        run("spectral_norm_linear", nn.Linear(6, 4), (3, 6), sn(), train_steps=2,
            eval_after=True, seed=5),
        run("spectral_norm_conv2d", nn.Conv2d(3, 5, 3), (2, 3, 6, 6),
            sn(n_power_iterations=3), eval_after=True, seed=6),
        run("spectral_norm_conv_transpose2d", nn.ConvTranspose2d(4, 3, 2), (2, 4, 3, 3), sn(),
            seed=7),
        # orthogonal: square -> matrix_exp, otherwise householder (n < k transposes), and cayley;
        # the original is -I and base the orthogonalised weight, so the case also moves the
        # original off -I (a fixed step) to exercise each map away from the identity.
        run("orthogonal_square", nn.Linear(4, 4), (3, 4), orth(), seed=9),
        run("orthogonal_wide_householder", nn.Linear(5, 3), (2, 5), orth(), seed=10),
        run("orthogonal_tall_householder", nn.Linear(3, 5), (2, 3), orth(), seed=11),
        run("orthogonal_cayley", nn.Linear(3, 6), (2, 3), orth(orthogonal_map="cayley"), seed=12),
        run("orthogonal_tall_matrix_exp", nn.Linear(3, 5), (2, 3),
            orth(orthogonal_map="matrix_exp"), seed=13),
    ]
    text = '{"format":1,"generator":"tests/gen_parametrize_fixtures.py","cases":{%s}}\n' % (
        ",\n".join(cases))
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote %s: %d cases, %d bytes" % (os.path.relpath(OUT), len(cases), len(text)))


if __name__ == "__main__":
    main()

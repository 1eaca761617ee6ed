#!/usr/bin/python3
"""Writes tests/data/grad_scaler_fixtures.json: PyTorch references for ember's GradScaler
(tests/test_grad_scaler.cpp).

Run with Debian's interpreter (torch 1.13 lives there):
    /usr/bin/python3 tests/gen_grad_scaler_fixtures.py

torch.cuda.amp.GradScaler needs CUDA, and torch 1.13 has no CPU kernels for its two ops
(torch._amp_update_scale_ and torch._amp_foreach_non_finite_check_and_unscale_ raise
NotImplementedError on CPU tensors), so this script runs GradScaler's own sequence with those
two ops written out as in PyTorch's kernels (aten/src/ATen/native/cuda/AmpKernels.cu):
  unscale: inv_scale = scale.double().reciprocal().float(); found_inf = any non-finite grad;
           grad *= inv_scale (every grad, also when found);
  step:    optimizer.step() only where found_inf == 0 (GradScaler._maybe_opt_step);
  update:  found: scale *= backoff (f64 product rounded to f32), tracker = 0; else tracker += 1
           and at growth_interval scale *= growth where the f32 result is finite, tracker = 0.
The optimizers are torch.optim's real Adam and SGD (foreach=False), so their step counting
(a skipped step is not counted) and the momentum buffer's first step are PyTorch's.

Cases: a 4-8-3 tanh MLP (parameters w1 [8,4], b1 [8], w2 [3,8], b2 [3]) on fixed data, MSE
loss, N steps with the scaler, an inf or NaN written into a gradient after backward at chosen
steps; per step the scale after update(), found_inf and every parameter after the step.
"""
import json
import os

import numpy as np
import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "data", "grad_scaler_fixtures.json")


def flat(t):
    # f32 values as doubles: exact in JSON (Python prints the shortest round-tripping double).
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def unscale_(grads, found_inf, scale):
    inv_scale = scale.double().reciprocal().float()
    for g in grads:
        if not torch.isfinite(g).all():
            found_inf.fill_(1.0)
        g.mul_(inv_scale)


def update_scale_(scale, tracker, found_inf, growth, backoff, interval):
    s = np.float32(scale.item())
    if found_inf.item() != 0:
        scale.fill_(float(np.float32(float(s) * backoff)))
        tracker.fill_(0)
        return
    successful = int(tracker.item()) + 1
    if successful == interval:
        with np.errstate(over="ignore"):
            grown = np.float32(float(s) * growth)
        if np.isfinite(grown):
            scale.fill_(float(grown))
        tracker.fill_(0)
    else:
        tracker.fill_(successful)


def run_case(name, make_opt, steps, bad, init_scale, growth, backoff, interval, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 4, generator=g)
    y = torch.randn(16, 3, generator=g)
    params = {
        "w1": (torch.randn(8, 4, generator=g) * 0.5).requires_grad_(),
        "b1": (torch.randn(8, generator=g) * 0.1).requires_grad_(),
        "w2": (torch.randn(3, 8, generator=g) * 0.5).requires_grad_(),
        "b2": (torch.randn(3, generator=g) * 0.1).requires_grad_(),
    }
    names = ["w1", "b1", "w2", "b2"]
    initial = {n: flat(params[n]) for n in names}
    opt = make_opt([params[n] for n in names])
    scale = torch.full((1,), init_scale, dtype=torch.float32)
    tracker = torch.zeros((1,), dtype=torch.int32)
    record = []
    for step in range(1, steps + 1):
        opt.zero_grad()
        h = torch.tanh(x @ params["w1"].t() + params["b1"])
        out = h @ params["w2"].t() + params["b2"]
        loss = torch.nn.functional.mse_loss(out, y)
        (loss * scale).backward()
        if step in bad:
            pname, index, value = bad[step]
            params[pname].grad.view(-1)[index] = float(value)
        found_inf = torch.zeros((1,), dtype=torch.float32)
        unscale_([params[n].grad for n in names], found_inf, scale)
        if found_inf.item() == 0:
            opt.step()
        update_scale_(scale, tracker, found_inf, growth, backoff, interval)
        record.append({
            "loss": float(loss.item()),
            "found_inf": float(found_inf.item()),
            "scale": float(scale.item()),
            "tracker": int(tracker.item()),
            "params": {n: flat(params[n]) for n in names},
        })
    state = opt.state_dict()["state"]
    return {
        "x": flat(x), "y": flat(y), "initial": initial,
        "steps": steps, "init_scale": init_scale, "growth_factor": growth,
        "backoff_factor": backoff, "growth_interval": interval,
        "bad": {str(k): [v[0], v[1], str(v[2])] for k, v in bad.items()},
        "final_step": [int(state[i]["step"]) if "step" in state[i] else 0
                       for i in sorted(state)],
        "record": record,
    }


def main():
    inf, nan = float("inf"), float("nan")
    cases = {
        "adam": run_case(
            "adam", lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False), steps=16,
            bad={3: ("w1", 0, inf), 4: ("b1", 2, nan), 10: ("w2", 5, -inf)},
            init_scale=65536.0, growth=2.0, backoff=0.5, interval=4, seed=0),
        # A skipped first step: the momentum buffer starts at the first step taken
        # (dampening != 0 shows it).
        "sgd": run_case(
            "sgd", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1,
                                             foreach=False),
            steps=12, bad={1: ("b2", 0, inf), 5: ("w1", 3, nan)},
            init_scale=1024.0, growth=2.0, backoff=0.25, interval=3, seed=1),
    }
    # The update rule alone, driven past f32's range (growth stops at the largest finite scale).
    scale = torch.full((1,), 2.0**120, dtype=torch.float32)
    tracker = torch.zeros((1,), dtype=torch.int32)
    pattern = [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    rule = []
    for f in pattern:
        update_scale_(scale, tracker, torch.full((1,), float(f)), 16.0, 0.125, 2)
        rule.append([float(scale.item()), int(tracker.item())])
    cases["rule"] = {"init_scale": 2.0**120, "growth_factor": 16.0, "backoff_factor": 0.125,
                     "growth_interval": 2, "found": pattern, "after": rule}
    with open(OUT_PATH, "w") as f:
        json.dump(cases, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", OUT_PATH)


if __name__ == "__main__":
    main()

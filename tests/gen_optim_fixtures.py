#!/usr/bin/python3
"""Writes tests/data/optim_fixtures.json: PyTorch references for ember's optimizers,
learning-rate schedulers, gradient clipping and the end-to-end training test.

Run with Debian's interpreter (torch 1.13 lives there):   /usr/bin/python3 tests/gen_optim_fixtures.py

Sections (read by tests/test_optim.cpp and tests/test_train_e2e.cpp):
  optimizers  per configuration: the optimizer type, its param groups (PyTorch option keys,
              parameter indices), the initial parameters, a fixed gradient per step and
              parameter (null: no gradient that step) and the parameters after every step,
              20 steps of torch.optim (foreach=False) in float32 (or float64 for *_f64).
  schedulers  per configuration: a scheduler spec and the lr of each of two param groups
              after construction and after each of 30 steps (ReduceLROnPlateau: after each
              step on the stored metrics).
  more_optimizers  (tests/test_optim_more.cpp) RMSprop, Adagrad, Adadelta, Adamax, NAdam and
              RAdam as `optimizers`, each in float32 and float64 (*_f64), plus the names of
              PyTorch's state entries, its state scalars (mu_product) and its group keys.
  more_schedulers  ConstantLR, PolynomialLR, LambdaLR (named lambdas, LAMBDAS), OneCycleLR and
              CyclicLR as `schedulers`, plus each group's momentum (or beta1) after every step.
  lbfgs       a float64 least-squares-plus-quartic problem and, per LBFGS configuration, the
              loss each step() returned, the parameters after it and func_evals / n_iter.
  clip        gradients before and after clip_grad_norm_ / clip_grad_value_, and the norm.
  e2e         an 8-16-16-3 ReLU MLP (PyTorch state_dict names), inputs, labels and the loss
              before each of 20 training steps with Adam and with SGD + momentum.

Tensors are flat lists; float32 values use the shortest decimal that reads back (through a
double) as the same float32. Deterministic: fixed seeds, one thread.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "data", "optim_fixtures.json")

STEPS = 20
SCHED_STEPS = 30
SHAPES = [(2, 3), (4,), (3, 2)]

# ----------------------------------------------------------------------------------------
# compact JSON with exact float32 values


def f32_text(v):
    """Shortest decimal for float32 `v` that also survives double parsing + rounding."""
    f = np.float32(v)
    if not np.isfinite(f):
        raise ValueError("non-finite value in fixture")
    s = repr(float(f)) if f == 0 else np.format_float_positional(f, unique=True, trim="-")
    if len(s) > 12:
        s = np.format_float_scientific(f, unique=True, trim="-")
    if np.float32(float(s)) != f:
        s = "%.9g" % float(f)
    assert np.float32(float(s)) == f
    return s


class Raw:
    def __init__(self, text):
        self.text = text


def flat(t):
    """A tensor as a flat list of Raw numbers (float32: shortest; float64: repr)."""
    a = t.detach().cpu().reshape(-1)
    if a.dtype == torch.float32:
        return [Raw(f32_text(x)) for x in a.numpy().tolist()]
    if a.dtype == torch.float64:
        return [Raw(repr(float(x))) for x in a.numpy().tolist()]
    return [int(x) for x in a.numpy().tolist()]


def emit(v):
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, float):
        if math.isinf(v):
            return '"inf"' if v > 0 else '"-inf"'
        return repr(v)
    if isinstance(v, (int, str)):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(emit(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + emit(x) for k, x in v.items()) + "}"
    raise TypeError(type(v))


# ----------------------------------------------------------------------------------------
# optimizers


def make_params(seed, dtype):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for s in SHAPES]


def make_grads(seed, dtype, skip=None):
    """STEPS x len(SHAPES) gradients with a varying scale (so amsgrad's max matters)."""
    g = torch.Generator().manual_seed(seed + 1000)
    out = []
    for step in range(STEPS):
        scale = 1.0 + 0.8 * math.sin(1.3 * step)
        row = []
        for i, s in enumerate(SHAPES):
            grad = (torch.randn(s, generator=g, dtype=torch.float64) * scale).to(dtype)
            row.append(None if skip and skip(step, i) else grad)
        out.append(row)
    return out


OPTIMIZERS = {
    "sgd_plain": ("SGD", [dict(lr=0.1)], {}),
    "sgd_momentum": ("SGD", [dict(lr=0.05, momentum=0.9)], {}),
    "sgd_nesterov": ("SGD", [dict(lr=0.05, momentum=0.9, nesterov=True)], {}),
    "sgd_dampening_wd": ("SGD", [dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)], {}),
    "sgd_maximize_wd": ("SGD", [dict(lr=0.02, momentum=0.5, weight_decay=0.1, maximize=True)], {}),
    "sgd_two_groups": ("SGD", [dict(lr=0.1, momentum=0.9), dict(lr=0.01, momentum=0.5, nesterov=True)], {}),
    "sgd_momentum_f64": ("SGD", [dict(lr=0.05, momentum=0.9, weight_decay=0.01)], {"dtype": "f64"}),
    "adam": ("Adam", [dict(lr=1e-2)], {}),
    "adam_amsgrad": ("Adam", [dict(lr=1e-2, betas=(0.8, 0.95), amsgrad=True)], {}),
    "adam_wd": ("Adam", [dict(lr=1e-2, weight_decay=0.1)], {}),
    "adam_maximize_eps": ("Adam", [dict(lr=3e-3, eps=1e-3, maximize=True)], {}),
    "adam_skipped_grads": ("Adam", [dict(lr=1e-2)], {"skip": lambda step, i: i == 1 and step % 3 == 1}),
    "adam_two_groups": ("Adam", [dict(lr=1e-2), dict(lr=1e-3, betas=(0.5, 0.9), weight_decay=0.05)], {}),
    "adam_f64": ("Adam", [dict(lr=1e-2, amsgrad=True, weight_decay=0.01)], {"dtype": "f64"}),
    "adamw": ("AdamW", [dict(lr=1e-2)], {}),
    "adamw_amsgrad_wd": ("AdamW", [dict(lr=5e-3, weight_decay=0.1, amsgrad=True)], {}),
}

# The other elementwise optimizers (tests/test_optim_more.cpp), each in f32 and f64.
MORE_OPTIMIZERS = {
    "rmsprop": ("RMSprop", [dict(lr=1e-2)], {}),
    "rmsprop_momentum_centered": ("RMSprop", [dict(lr=5e-3, alpha=0.9, momentum=0.8, centered=True, weight_decay=0.05)], {}),
    "rmsprop_centered_maximize": ("RMSprop", [dict(lr=2e-3, centered=True, eps=1e-4, maximize=True)], {}),
    "rmsprop_two_groups": ("RMSprop", [dict(lr=1e-2, momentum=0.5), dict(lr=3e-3, alpha=0.95)], {}),
    "adagrad": ("Adagrad", [dict(lr=0.1)], {}),
    "adagrad_decay_init": ("Adagrad", [dict(lr=0.2, lr_decay=0.05, initial_accumulator_value=0.3, weight_decay=0.02)], {}),
    "adagrad_maximize_eps": ("Adagrad", [dict(lr=0.05, eps=1e-3, maximize=True)], {}),
    "adadelta": ("Adadelta", [dict()], {}),
    "adadelta_rho_wd": ("Adadelta", [dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True)], {}),
    "adamax": ("Adamax", [dict(lr=1e-2)], {}),
    "adamax_wd_betas": ("Adamax", [dict(lr=5e-3, betas=(0.8, 0.95), weight_decay=0.05, eps=1e-3, maximize=True)], {}),
    "nadam": ("NAdam", [dict(lr=1e-2)], {}),
    "nadam_decay_wd": ("NAdam", [dict(lr=5e-3, betas=(0.85, 0.99), momentum_decay=0.01, weight_decay=0.05)], {}),
    "nadam_two_groups": ("NAdam", [dict(lr=1e-2), dict(lr=2e-3, betas=(0.5, 0.9))], {}),
    "radam": ("RAdam", [dict(lr=1e-2)], {}),
    "radam_wd_betas": ("RAdam", [dict(lr=5e-3, betas=(0.8, 0.9), weight_decay=0.05, eps=1e-4)], {}),
    "radam_skipped_grads": ("RAdam", [dict(lr=1e-2)], {"skip": lambda step, i: i == 2 and step % 4 == 2}),
}
for _name, (_kind, _groups, _extra) in list(MORE_OPTIMIZERS.items()):
    if "skip" not in _extra:
        MORE_OPTIMIZERS[_name + "_f64"] = (_kind, _groups, dict(_extra, dtype="f64"))

TORCH_OPTIM = {"SGD": torch.optim.SGD, "Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW,
               "RMSprop": torch.optim.RMSprop, "Adagrad": torch.optim.Adagrad,
               "Adadelta": torch.optim.Adadelta, "Adamax": torch.optim.Adamax,
               "NAdam": torch.optim.NAdam, "RAdam": torch.optim.RAdam}


def group_split(n_groups):
    """Parameter indices of each group: one group holds all; two groups split [0, 1] | [2]."""
    return [[0, 1, 2]] if n_groups == 1 else [[0, 1], [2]]


def optimizer_case(index, name, spec):
    kind, group_opts, extra = spec
    dtype = torch.float64 if extra.get("dtype") == "f64" else torch.float32
    seed = 100 + index
    params = [p.clone().requires_grad_(True) for p in make_params(seed, dtype)]
    init = [p.detach().clone() for p in params]
    grads = make_grads(seed, dtype, extra.get("skip"))
    split = group_split(len(group_opts))
    groups = [dict(params=[params[i] for i in idx], **opts) for idx, opts in zip(split, group_opts)]
    ctor = {}
    if kind == "Adagrad":
        # torch 1.13 fills "sum" from the constructor's initial_accumulator_value (2.x: the
        # group's); pass it both ways so the fixture holds for either.
        ctor["initial_accumulator_value"] = group_opts[0].get("initial_accumulator_value", 0)
    opt = TORCH_OPTIM[kind](groups, foreach=False, **ctor)
    trajectory = []
    state_names = None
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        for p, g in zip(params, grads[step]):
            p.grad = None if g is None else g.clone()
        opt.step()
        trajectory.append([flat(p) for p in params])
    sd = opt.state_dict()
    state_names = {str(k): sorted(v.keys()) for k, v in sd["state"].items()}
    scalars = {str(k): {n: float(x) for n, x in v.items() if n != "step" and x is not None and
                        (not torch.is_tensor(x) or x.dim() == 0)}
               for k, v in sd["state"].items()}
    options = []
    for idx, opts in zip(split, group_opts):
        o = {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()}
        options.append({"options": o, "params": idx})
    return {
        "type": kind,
        "dtype": "f64" if dtype == torch.float64 else "f32",
        "groups": options,
        "shapes": [list(s) for s in SHAPES],
        "init": [flat(p) for p in init],
        "grads": [[None if g is None else flat(g) for g in row] for row in grads],
        "params": trajectory,
        "state_names": state_names,
        "state_scalars": scalars,
        "group_keys": [sorted(k for k in g.keys() if k not in ("params", "foreach", "differentiable"))
                       for g in sd["param_groups"]],
    }


# ----------------------------------------------------------------------------------------
# schedulers (SGD with two groups, lr 0.1 and 0.02)

S = torch.optim.lr_scheduler

SCHEDULERS = {
    "step": {"type": "StepLR", "step_size": 7, "gamma": 0.5},
    "multistep": {"type": "MultiStepLR", "milestones": [5, 12, 12, 20], "gamma": 0.3},
    "exponential": {"type": "ExponentialLR", "gamma": 0.9},
    "cosine_short": {"type": "CosineAnnealingLR", "T_max": 10, "eta_min": 0.001},
    "cosine_long": {"type": "CosineAnnealingLR", "T_max": 30},
    "warm_restarts_mult2": {"type": "CosineAnnealingWarmRestarts", "T_0": 5, "T_mult": 2, "eta_min": 1e-4},
    "warm_restarts": {"type": "CosineAnnealingWarmRestarts", "T_0": 7},
    "linear_warmup": {"type": "LinearLR", "start_factor": 0.1, "end_factor": 1.0, "total_iters": 8},
    "linear_decay": {"type": "LinearLR", "start_factor": 1.0, "end_factor": 0.2, "total_iters": 10},
    "sequential_warmup_cosine": {
        "type": "SequentialLR", "milestones": [5],
        "schedulers": [{"type": "LinearLR", "start_factor": 0.1, "end_factor": 1.0, "total_iters": 5},
                       {"type": "CosineAnnealingLR", "T_max": 25}]},
    "sequential_three": {
        "type": "SequentialLR", "milestones": [4, 12],
        "schedulers": [{"type": "LinearLR", "start_factor": 0.2, "end_factor": 1.0, "total_iters": 4},
                       {"type": "ExponentialLR", "gamma": 0.9},
                       {"type": "CosineAnnealingWarmRestarts", "T_0": 6, "T_mult": 2}]},
    "chained_step_exp": {
        "type": "ChainedScheduler",
        "schedulers": [{"type": "StepLR", "step_size": 5, "gamma": 0.5},
                       {"type": "ExponentialLR", "gamma": 0.95}]},
    "chained_linear_cosine": {
        "type": "ChainedScheduler",
        "schedulers": [{"type": "LinearLR", "start_factor": 0.5, "end_factor": 1.0, "total_iters": 5},
                       {"type": "CosineAnnealingLR", "T_max": 30, "eta_min": 0.0}]},
    "plateau_min_rel": {"type": "ReduceLROnPlateau", "mode": "min", "factor": 0.5, "patience": 2,
                        "threshold": 1e-2, "threshold_mode": "rel", "cooldown": 1, "min_lr": [1e-3, 5e-3]},
    "plateau_max_abs": {"type": "ReduceLROnPlateau", "mode": "max", "factor": 0.3, "patience": 1,
                        "threshold": 0.1, "threshold_mode": "abs", "cooldown": 0, "min_lr": [0.0]},
}

# The schedules of tests/test_optim_more.cpp. "optimizer": SGD (default), SGD_momentum
# (momentum 0.9, so cycle_momentum has something to cycle) or Adam (betas cycle instead).
MORE_SCHEDULERS = {
    "constant_default": {"type": "ConstantLR"},
    "constant_half": {"type": "ConstantLR", "factor": 0.5, "total_iters": 4},
    "polynomial_quadratic": {"type": "PolynomialLR", "total_iters": 20, "power": 2.0},
    "polynomial_linear": {"type": "PolynomialLR", "total_iters": 12, "power": 1.0},
    "polynomial_sqrt": {"type": "PolynomialLR", "total_iters": 25, "power": 0.5},
    "lambda_one": {"type": "LambdaLR", "lambdas": ["exp95"]},
    "lambda_per_group": {"type": "LambdaLR", "lambdas": ["exp95", "warmup_inv"]},
    "onecycle_cos": {"type": "OneCycleLR", "max_lr": [0.5, 0.1], "total_steps": 31,
                     "optimizer": "SGD_momentum"},
    "onecycle_linear_three_phase": {"type": "OneCycleLR", "max_lr": [0.4, 0.2], "total_steps": 40,
                                    "anneal_strategy": "linear", "three_phase": True, "pct_start": 0.25,
                                    "div_factor": 10.0, "final_div_factor": 100.0,
                                    "optimizer": "SGD_momentum"},
    "onecycle_adam_betas": {"type": "OneCycleLR", "max_lr": [0.01, 0.005], "total_steps": 35,
                            "pct_start": 0.4, "base_momentum": 0.8, "max_momentum": 0.92,
                            "optimizer": "Adam"},
    "onecycle_no_momentum": {"type": "OneCycleLR", "max_lr": [0.3, 0.1], "total_steps": 31,
                             "cycle_momentum": False, "three_phase": True},
    "cyclic_triangular": {"type": "CyclicLR", "base_lr": [0.01, 0.002], "max_lr": [0.1, 0.02],
                          "step_size_up": 4, "optimizer": "SGD_momentum"},
    "cyclic_triangular2_down": {"type": "CyclicLR", "base_lr": [0.01, 0.002], "max_lr": [0.1, 0.02],
                                "step_size_up": 3, "step_size_down": 5, "mode": "triangular2",
                                "optimizer": "SGD_momentum", "base_momentum": 0.7, "max_momentum": 0.95},
    "sequential_constant_poly": {
        "type": "SequentialLR", "milestones": [4],
        "schedulers": [{"type": "ConstantLR", "factor": 0.25, "total_iters": 4},
                       {"type": "PolynomialLR", "total_iters": 20, "power": 2.0}]},
    "chained_lambda_constant": {
        "type": "ChainedScheduler",
        "schedulers": [{"type": "LambdaLR", "lambdas": ["exp95"]},
                       {"type": "ConstantLR", "factor": 0.5, "total_iters": 6}]},
    "cyclic_exp_range": {"type": "CyclicLR", "base_lr": [0.01, 0.002], "max_lr": [0.1, 0.02],
                         "step_size_up": 5, "mode": "exp_range", "gamma": 0.9, "cycle_momentum": False},
}

LAMBDAS = {
    "exp95": lambda epoch: 0.95 ** epoch,
    "warmup_inv": lambda epoch: (epoch + 1) / 5 if epoch < 5 else 1.0 / (1 + 0.1 * (epoch - 5)),
}

ARG_KEYS = {
    "StepLR": ["step_size", "gamma"],
    "MultiStepLR": ["milestones", "gamma"],
    "ExponentialLR": ["gamma"],
    "CosineAnnealingLR": ["T_max", "eta_min"],
    "CosineAnnealingWarmRestarts": ["T_0", "T_mult", "eta_min"],
    "LinearLR": ["start_factor", "end_factor", "total_iters"],
    "ConstantLR": ["factor", "total_iters"],
    "PolynomialLR": ["total_iters", "power"],
    "OneCycleLR": ["max_lr", "total_steps", "pct_start", "anneal_strategy", "cycle_momentum",
                   "base_momentum", "max_momentum", "div_factor", "final_div_factor", "three_phase"],
    "CyclicLR": ["base_lr", "max_lr", "step_size_up", "step_size_down", "mode", "gamma",
                 "cycle_momentum", "base_momentum", "max_momentum"],
}


def build_scheduler(opt, spec):
    kind = spec["type"]
    if kind == "SequentialLR":
        children = [build_scheduler(opt, c) for c in spec["schedulers"]]
        return S.SequentialLR(opt, children, milestones=spec["milestones"])
    if kind == "ChainedScheduler":
        return S.ChainedScheduler([build_scheduler(opt, c) for c in spec["schedulers"]])
    if kind == "LambdaLR":
        fns = [LAMBDAS[n] for n in spec["lambdas"]]
        return S.LambdaLR(opt, fns if len(fns) > 1 else fns[0])
    if kind == "ReduceLROnPlateau":
        min_lr = spec["min_lr"] if len(spec["min_lr"]) > 1 else spec["min_lr"][0]
        return S.ReduceLROnPlateau(opt, mode=spec["mode"], factor=spec["factor"], patience=spec["patience"],
                                   threshold=spec["threshold"], threshold_mode=spec["threshold_mode"],
                                   cooldown=spec["cooldown"], min_lr=min_lr)
    args = {k: spec[k] for k in ARG_KEYS[kind] if k in spec}
    return getattr(S, kind)(opt, **args)


def plateau_metrics():
    g = torch.Generator().manual_seed(7)
    noise = torch.rand(SCHED_STEPS, generator=g, dtype=torch.float64)
    # improves, stalls, improves a little, stalls, ...
    base = [1.0 / (1 + min(i, 6) + 0.2 * max(0, i - 15)) for i in range(SCHED_STEPS)]
    return [float(b + 0.05 * n) for b, n in zip(base, noise)]


def scheduler_case(spec):
    import warnings
    w = [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)]
    kind = spec.get("optimizer", "SGD")
    groups = [dict(params=[w[0]], lr=0.1), dict(params=[w[1]], lr=0.02)]
    if kind == "Adam":
        opt = torch.optim.Adam(groups, lr=0.1)
    else:
        opt = torch.optim.SGD(groups, lr=0.1, momentum=0.9 if kind == "SGD_momentum" else 0.0)

    def momenta():
        return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = build_scheduler(opt, spec)
        out = {"spec": spec, "group_lrs": [0.1, 0.02]}
        if spec["type"] == "ReduceLROnPlateau":
            metrics = plateau_metrics()
            lrs = []
            for m in metrics:
                opt.step()
                sched.step(m)
                lrs.append([g["lr"] for g in opt.param_groups])
            out["metrics"] = metrics
        else:
            lrs = [list(sched.get_last_lr())]
            moms = [momenta()]
            for _ in range(SCHED_STEPS):
                opt.step()
                sched.step()
                lrs.append(list(sched.get_last_lr()))
                moms.append(momenta())
                assert lrs[-1] == [g["lr"] for g in opt.param_groups] or spec["type"] == "SequentialLR"
            out["momenta"] = moms
            out["state_keys"] = sorted(k for k in sched.state_dict().keys())
        out["lrs"] = lrs
    return out


# ----------------------------------------------------------------------------------------
# LBFGS (float64): loss(p0[2,3], p1[4], p2[3,2]) =
#   sum((p0 @ p2 - target)^2) + 0.5 * sum((p1 - centre)^2) + 0.1 * sum(p1^4)

LBFGS_CASES = {
    "lbfgs_plain": dict(lr=0.5, max_iter=5, history_size=3),
    "lbfgs_defaults": dict(),
    "lbfgs_strong_wolfe": dict(lr=1.0, max_iter=6, history_size=4, line_search_fn="strong_wolfe"),
    "lbfgs_wolfe_tolerances": dict(max_iter=10, max_eval=12, tolerance_grad=1e-5,
                                   tolerance_change=1e-7, line_search_fn="strong_wolfe"),
}
LBFGS_STEPS = 5


def lbfgs_loss(p, target, centre):
    return (((p[0] @ p[2]) - target) ** 2).sum() + 0.5 * ((p[1] - centre) ** 2).sum() + \
        0.1 * (p[1] ** 4).sum()


def lbfgs_cases():
    g = torch.Generator().manual_seed(77)
    target = torch.randn(2, 2, generator=g, dtype=torch.float64)
    centre = torch.randn(4, generator=g, dtype=torch.float64)
    init = make_params(55, torch.float64)
    cases = {}
    for name, opts in LBFGS_CASES.items():
        params = [p.clone().requires_grad_(True) for p in init]
        opt = torch.optim.LBFGS(params, **opts)
        evals = [0]

        def closure():
            opt.zero_grad()
            loss = lbfgs_loss(params, target, centre)
            loss.backward()
            evals[0] += 1
            return loss

        losses, trajectory, state = [], [], []
        for _ in range(LBFGS_STEPS):
            losses.append(float(opt.step(closure)))
            trajectory.append([flat(p) for p in params])
            st = opt.state[params[0]]
            state.append({"func_evals": st["func_evals"], "n_iter": st["n_iter"],
                          "history": len(st["old_dirs"])})
        cases[name] = {"options": opts, "losses": losses, "params": trajectory, "state": state,
                       "closure_calls": evals[0],
                       "final_loss": float(lbfgs_loss(params, target, centre))}
    return {"shapes": [list(s) for s in SHAPES], "init": [flat(p) for p in init],
            "target": flat(target), "centre": flat(centre), "cases": cases}


# ----------------------------------------------------------------------------------------
# gradient clipping


def clip_cases():
    cases = {}
    g = torch.Generator().manual_seed(11)
    grads = [torch.randn(s, generator=g) * 0.7 for s in SHAPES]
    for name, max_norm, norm_type in [("norm2", 1.0, 2.0), ("norm2_noclip", 100.0, 2.0),
                                      ("norm1", 2.0, 1.0), ("norm_inf", 0.5, math.inf),
                                      ("norm_3p5", 0.8, 3.5)]:
        params = [torch.zeros(s, requires_grad=True) for s in SHAPES]
        for p, gr in zip(params, grads):
            p.grad = gr.clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
        cases[name] = {"kind": "norm", "max_norm": max_norm, "norm_type": norm_type,
                       "grads": [flat(x) for x in grads], "total_norm": float(total),
                       "clipped": [flat(p.grad) for p in params]}
    params = [torch.zeros(s, requires_grad=True) for s in SHAPES]
    for p, gr in zip(params, grads):
        p.grad = gr.clone()
    torch.nn.utils.clip_grad_value_(params, 0.5)
    cases["value"] = {"kind": "value", "clip_value": 0.5, "grads": [flat(x) for x in grads],
                      "clipped": [flat(p.grad) for p in params]}
    return cases


# ----------------------------------------------------------------------------------------
# end to end: 20 steps of an MLP


def e2e_case():
    torch.manual_seed(1234)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
    init = {k: v.detach().clone() for k, v in net.state_dict().items()}
    g = torch.Generator().manual_seed(99)
    x = torch.randn(32, 8, generator=g)
    y = torch.randint(0, 3, (32,), generator=g)
    runs = {}
    for name, make in [("adam", lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False)),
                       ("sgd_momentum", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=False))]:
        net.load_state_dict(init)
        opt = make(net.parameters())
        losses = []
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(x), y)
            losses.append(float(loss))
            loss.backward()
            opt.step()
        runs[name] = {"losses": losses, "final": {k: flat(v) for k, v in net.state_dict().items()}}
    return {
        "layers": [8, 16, 16, 3],
        "state_dict": {k: {"shape": list(v.shape), "data": flat(v)} for k, v in init.items()},
        "x": {"shape": list(x.shape), "data": flat(x)},
        "y": flat(y),
        "runs": runs,
    }


def main():
    doc = {
        "generator": "tests/gen_optim_fixtures.py",
        "torch_version": torch.__version__,
        "steps": STEPS,
        "optimizers": {name: optimizer_case(i, name, spec) for i, (name, spec) in enumerate(OPTIMIZERS.items())},
        "schedulers": {name: scheduler_case(spec) for name, spec in SCHEDULERS.items()},
        "more_optimizers": {name: optimizer_case(200 + i, name, spec)
                            for i, (name, spec) in enumerate(MORE_OPTIMIZERS.items())},
        "more_schedulers": {name: scheduler_case(spec) for name, spec in MORE_SCHEDULERS.items()},
        "lbfgs": lbfgs_cases(),
        "clip": clip_cases(),
        "e2e": e2e_case(),
    }
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    text = emit(doc) + "\n"
    json.loads(text)  # well-formed
    with open(OUT_PATH, "w") as f:
        f.write(text)
    print("wrote %s (%d bytes)" % (OUT_PATH, len(text)))


if __name__ == "__main__":
    main()

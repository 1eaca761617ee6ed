#!/usr/bin/python3
"""Writes tests/data/swa_fixtures.json: PyTorch 1.13 references for ASGD, Rprop,
MultiplicativeLR and torch.optim.swa_utils (AveragedModel, SWALR, update_bn), read by
tests/test_optim_swa.cpp.

Run with Debian's interpreter (torch 1.13 lives there):   /usr/bin/python3 tests/gen_swa_fixtures.py

Sections:
  optimizers  ASGD and Rprop as gen_optim_fixtures.py's `optimizers` (20 steps of fixed
              gradients, foreach=False, f32 and *_f64), plus "final_state": each parameter's
              state tensors after the last step (ASGD's ax, Rprop's prev and step_size).
  schedulers  MultiplicativeLR (named lambdas, MUL_LAMBDAS) and SWALR as gen_optim_fixtures.py's
              `schedulers`: the lrs of two SGD groups (0.1, 0.02) after construction and after
              each of 30 steps.
  averaged    AveragedModel on a Linear(3, 2) -> BatchNorm1d(2) model: the model's parameters and
              buffers at each of 5 updates, and the averaged model's state_dict after each, for
              the default running average, an EMA (avg_fn 0.8·a + 0.2·p), both with use_buffers.
  update_bn   a Linear(4, 3) -> BatchNorm1d(3) -> ReLU -> Linear(3, 5) -> BatchNorm1d(5, momentum
              0.3) model, four fixed input batches, and every running stat after update_bn.

Deterministic: fixed seeds, one thread.
"""
import os
import sys
import warnings

import torch
import torch.nn as nn
from torch.optim import swa_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_optim_fixtures as G  # noqa: E402  (flat, emit, optimizer_case, scheduler_case)

OUT_PATH = os.path.join(G.HERE, "data", "swa_fixtures.json")

MADE = []  # every optimizer optimizer_case builds, for its final state


def recording(cls):
    def make(*args, **kwargs):
        opt = cls(*args, **kwargs)
        MADE.append(opt)
        return opt
    return make


G.TORCH_OPTIM["ASGD"] = recording(torch.optim.ASGD)
G.TORCH_OPTIM["Rprop"] = recording(torch.optim.Rprop)

OPTIMIZERS = {
    "asgd": ("ASGD", [dict(lr=1e-2)], {}),
    "asgd_t0_wd": ("ASGD", [dict(lr=0.05, lambd=1e-2, alpha=0.6, t0=3, weight_decay=0.05)], {}),
    "asgd_two_groups_maximize": ("ASGD", [dict(lr=0.02, t0=5, maximize=True), dict(lr=0.1, lambd=0.05, t0=0)], {}),
    "asgd_skipped_grads": ("ASGD", [dict(lr=0.05, t0=2)], {"skip": lambda step, i: i == 1 and step % 3 == 1}),
    "rprop": ("Rprop", [dict()], {}),
    "rprop_etas_sizes": ("Rprop", [dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)], {}),
    "rprop_two_groups": ("Rprop", [dict(lr=0.01), dict(lr=0.2, etas=(0.6, 1.1), step_sizes=(0.05, 0.25))], {}),
    "rprop_skipped_grads": ("Rprop", [dict(lr=0.03)], {"skip": lambda step, i: i == 2 and step % 4 == 2}),
}
for _name, (_kind, _groups, _extra) in list(OPTIMIZERS.items()):
    if "skip" not in _extra:
        OPTIMIZERS[_name + "_f64"] = (_kind, _groups, dict(_extra, dtype="f64"))


def optimizer_case(index, name, spec):
    out = G.optimizer_case(index, name, spec)
    state = MADE[-1].state_dict()["state"]
    out["final_state"] = {str(k): {n: G.flat(v) for n, v in s.items() if torch.is_tensor(v) and v.dim() > 0}
                          for k, s in state.items()}
    return out


# ----------------------------------------------------------------------------------------
# schedulers

MUL_LAMBDAS = {
    "mul95": lambda epoch: 0.95,
    "mul_wave": lambda epoch: 0.8 if epoch % 3 == 0 else 1.05,
}

SCHEDULERS = {
    "multiplicative_one": {"type": "MultiplicativeLR", "lambdas": ["mul95"]},
    "multiplicative_per_group": {"type": "MultiplicativeLR", "lambdas": ["mul95", "mul_wave"]},
    "swalr_cos": {"type": "SWALR", "swa_lr": 0.05, "anneal_epochs": 10, "anneal_strategy": "cos"},
    "swalr_linear_per_group": {"type": "SWALR", "swa_lr": [0.01, 0.04], "anneal_epochs": 7,
                               "anneal_strategy": "linear"},
    "swalr_no_anneal": {"type": "SWALR", "swa_lr": 0.03, "anneal_epochs": 0},
    "swalr_after_multiplicative": {
        "type": "SequentialLR", "milestones": [6],
        "schedulers": [{"type": "MultiplicativeLR", "lambdas": ["mul_wave"]},
                       {"type": "SWALR", "swa_lr": 0.005, "anneal_epochs": 5, "anneal_strategy": "cos"}]},
}

_base_build = G.build_scheduler


def build_scheduler(opt, spec):
    kind = spec["type"]
    if kind == "MultiplicativeLR":
        fns = [MUL_LAMBDAS[n] for n in spec["lambdas"]]
        return torch.optim.lr_scheduler.MultiplicativeLR(opt, fns if len(fns) > 1 else fns[0])
    if kind == "SWALR":
        return swa_utils.SWALR(opt, spec["swa_lr"], anneal_epochs=spec["anneal_epochs"],
                               anneal_strategy=spec.get("anneal_strategy", "cos"))
    return _base_build(opt, spec)


G.build_scheduler = build_scheduler


# ----------------------------------------------------------------------------------------
# AveragedModel

AVG_UPDATES = 5


def small_model():
    return nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))


def averaged_case(avg_kind, use_buffers):
    torch.manual_seed(5)
    model = small_model()
    avg_fn = None
    if avg_kind == "ema":
        def avg_fn(a, p, n):
            return 0.8 * a + 0.2 * p
    g = torch.Generator().manual_seed(6)
    models, averaged = [], []
    swa = swa_utils.AveragedModel(model, avg_fn=avg_fn, use_buffers=use_buffers)
    for _ in range(AVG_UPDATES):
        with torch.no_grad():  # a "training step": new weights and new running stats
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=g))
            model.train()
            model(torch.randn(4, 3, generator=g))
        models.append({k: G.flat(v) for k, v in model.state_dict().items()})
        swa.update_parameters(model)
        averaged.append({k: G.flat(v) for k, v in swa.state_dict().items()})
    shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
    return {"avg": avg_kind, "use_buffers": use_buffers, "shapes": shapes, "models": models,
            "averaged": averaged}


# ----------------------------------------------------------------------------------------
# update_bn


def update_bn_case():
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 5),
                          nn.BatchNorm1d(5, momentum=0.3))
    g = torch.Generator().manual_seed(9)
    with torch.no_grad():  # running stats that update_bn must discard
        model(torch.randn(6, 4, generator=g))
    model.eval()
    before = {k: G.flat(v) for k, v in model.state_dict().items()}
    batches = [torch.randn(n, 4, generator=g) * 2 + 0.5 for n in (8, 8, 8, 5)]
    swa_utils.update_bn([(b, None) for b in batches], model)
    return {"state": before, "shapes": {k: list(v.shape) for k, v in model.state_dict().items()},
            "batches": [G.flat(b) for b in batches], "batch_sizes": [b.shape[0] for b in batches],
            "after": {k: G.flat(v) for k, v in model.state_dict().items()},
            "training_after": model.training}


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = {
            "generator": "tests/gen_swa_fixtures.py",
            "torch_version": torch.__version__,
            "optimizers": {name: optimizer_case(300 + i, name, spec)
                           for i, (name, spec) in enumerate(OPTIMIZERS.items())},
            "schedulers": {name: G.scheduler_case(spec) for name, spec in SCHEDULERS.items()},
            "averaged": {"running": averaged_case("running", False),
                         "running_buffers": averaged_case("running", True),
                         "ema": averaged_case("ema", False),
                         "ema_buffers": averaged_case("ema", True)},
            "update_bn": update_bn_case(),
        }
    text = G.emit(doc) + "\n"
    G.json.loads(text)
    with open(OUT_PATH, "w") as f:
        f.write(text)
    print("wrote %s (%d bytes)" % (OUT_PATH, len(text)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/torch/vocab_bench.py — the PyTorch side of bench/bench_vocab.cpp.

    python3 vocab_bench.py [--only lstm,unet1d,unet2d,einsum] [--device cuda|cpu]

The same four measurements as bench_vocab, timed the same way (torch.cuda.synchronize()
before the clock starts and before it stops, median of blocks):

  lstm    nn.LSTM(512, 512, num_layers=2) (cuDNN), input [128, 64, 512] (seq, batch, feature):
          one SGD step (lr 0.01) of mse_loss(output, target): ms per step.
  unet1d  Conv1d(8→32, k3, p1) · ReLU · Conv1d(32→64, k3, s2, p1) · ReLU ·
          ConvTranspose1d(64→32, k2, s2) · ReLU · cat(skip) · Conv1d(64→8, k3, p1) on
          [32, 8, 1024]; one SGD step of mse_loss: ms per step.
  unet2d  the same with Conv2d / ConvTranspose2d on [16, 3, 64, 64] (channels 3→32→64→32, cat,
          →3): ms per step.
  einsum  torch.einsum("bhqd,bhkd->bhqk") with b 8, h 16, q = k 1024, d 64, fp32 (TF32 off):
          ms per call and TFLOP/s.

--device cpu times the same steps on the CPU (with torch's threads, as many as ember's), with
fewer repetitions (a CPU LSTM step takes about a second). Prints one JSON object on the last
line of stdout.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# The timing loop and device are bench_cuda's (cuda_bench.py, next to this file).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_bench  # noqa: E402

DEV = cuda_bench.DEV
CPU = False  # --device cpu


def block_ms(fn, warmup, blocks, per_block):
    if CPU:  # a CPU run: nothing to wait for, and fewer repetitions of the long steps
        return cuda_bench.block_times(fn, min(warmup, 1), min(blocks, 3), min(per_block, 2),
                                      sync_fn=lambda: None)
    return cuda_bench.block_times(fn, warmup, blocks, per_block)


def sgd_step_fn(params, loss_fn):
    opt = torch.optim.SGD(params, lr=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
    return step


def bench_lstm():
    torch.manual_seed(0)
    lstm = nn.LSTM(512, 512, num_layers=2).to(DEV)
    x = torch.randn(128, 64, 512, device=DEV)
    y = torch.randn(128, 64, 512, device=DEV)
    step = sgd_step_fn(lstm.parameters(), lambda: F.mse_loss(lstm(x)[0], y))
    med, best = block_ms(step, 5, 9, 3)
    return {"ms": med, "best_ms": best}


class UNet(nn.Module):
    def __init__(self, dims):
        super().__init__()
        conv = nn.Conv1d if dims == 1 else nn.Conv2d
        up = nn.ConvTranspose1d if dims == 1 else nn.ConvTranspose2d
        cin = 8 if dims == 1 else 3
        self.c1 = conv(cin, 32, 3, padding=1)
        self.down = conv(32, 64, 3, stride=2, padding=1)
        self.up = up(64, 32, 2, stride=2)
        self.out = conv(64, cin, 3, padding=1)

    def forward(self, x):
        a = F.relu(self.c1(x))
        b = F.relu(self.down(a))
        c = F.relu(self.up(b))
        return self.out(torch.cat([c, a], 1))


def bench_unet(dims):
    torch.manual_seed(0)
    net = UNet(dims).to(DEV)
    shape = (32, 8, 1024) if dims == 1 else (16, 3, 64, 64)
    x = torch.randn(*shape, device=DEV)
    y = torch.randn(*shape, device=DEV)
    step = sgd_step_fn(net.parameters(), lambda: F.mse_loss(net(x), y))
    med, best = block_ms(step, 10, 15, 10)
    return {"ms": med, "best_ms": best}


def bench_einsum():
    if not CPU:
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    q = torch.randn(8, 16, 1024, 64, device=DEV)
    k = torch.randn(8, 16, 1024, 64, device=DEV)
    med, best = block_ms(lambda: torch.einsum("bhqd,bhkd->bhqk", q, k), 5, 15, 10)
    flops = 2.0 * 8 * 16 * 1024 * 1024 * 64
    return {"ms": med, "best_ms": best, "tflops": flops / (med * 1e-3) / 1e12}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="lstm,unet1d,unet2d,einsum")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args()
    only = args.only.split(",")
    global DEV, CPU
    if args.device == "cpu":
        DEV, CPU = torch.device("cpu"), True
    out = {"torch": torch.__version__,
           "device": "cpu" if CPU else torch.cuda.get_device_name(0),
           "threads": torch.get_num_threads()}
    if "lstm" in only:
        out["lstm"] = bench_lstm()
    if "unet1d" in only:
        out["unet1d"] = bench_unet(1)
    if "unet2d" in only:
        out["unet2d"] = bench_unet(2)
    if "einsum" in only:
        out["einsum"] = bench_einsum()
    print(json.dumps(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/torch/amp_bench.py — the PyTorch (CUDA) side of bench/bench_amp.cpp.

    python3 amp_bench.py

On cuda:0 under torch.autocast("cuda", dtype=torch.bfloat16) (forward and loss; backward and
the fused optimizer outside), timed as bench_amp (median over blocks, synchronised):

  wide         784-4096-4096-10 MLP, batch 4096, cross-entropy, fused Adam lr 1e-3: ms per
               step and TFLOP/s counting 6·(784·4096 + 4096·4096 + 4096·10)·4096; also the
               f32 step (TF32 off) for the ratio.
  transformer  torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout 0.1, batch_first),
               batch 32, seq 256, MSE against a fixed target, fused AdamW lr 1e-4: ms per step
               and TFLOP/s counting 3 x forward (2·tokens·(4·d² + 2·d·ff) + 4·B·S²·d).

Prints one JSON object on the last line of stdout.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_bench import DEV, block_times, mlp  # noqa: E402

WIDE_FLOPS = 6.0 * (784 * 4096 + 4096 * 4096 + 4096 * 10) * 4096
B, S, D, H, FF = 32, 256, 512, 8, 2048
TEL_FLOPS = 3.0 * (2.0 * B * S * (4 * D * D + 2 * D * FF) + 4.0 * B * S * S * D)


def step_fn(net, opt, loss_fn, x, y, autocast):
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def bench_wide():
    torch.manual_seed(0)
    x = torch.rand(4096, 784, device=DEV)
    y = torch.randint(0, 10, (4096,), device=DEV)
    out = {}
    for name, autocast in (("bf16", True), ("f32", False)):
        net = mlp([784, 4096, 4096, 10])
        opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
        step = step_fn(net, opt, torch.nn.functional.cross_entropy, x, y, autocast)
        med, best = block_times(step, 5, 9, 5)
        out[name + "_ms"] = med
        out[name + "_tflops"] = WIDE_FLOPS / (med * 1e-3) / 1e12
    return out


def bench_transformer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=0.1, batch_first=True).to(DEV)
    layer.train()
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4, fused=True)
    x = torch.randn(B, S, D, device=DEV)
    y = torch.randn(B, S, D, device=DEV)
    step = step_fn(layer, opt, torch.nn.functional.mse_loss, x, y, True)
    med, best = block_times(step, 10, 15, 10)
    return {"ms": med, "best_ms": best, "tflops": TEL_FLOPS / (med * 1e-3) / 1e12}


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(DEV)}
    out["wide"] = bench_wide()
    out["transformer"] = bench_transformer()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/torch/anomaly_bench.py — the PyTorch side of bench/bench_anomaly.cpp.

    python3 anomaly_bench.py --device cpu|cuda --threads T --steps 20 --warmup 3

Times an Adam step (lr 1e-3) of the MLP 784-256-256-10 (ember's train::mlp(784, {256, 256}, 10))
on a random batch of 128, with anomaly detection off and inside torch.autograd.detect_anomaly()
(PyTorch checks only the backward's gradients for NaN, and keeps each forward op's traceback).
Prints one JSON object: {"off_ms": median, "on_ms": median, "device": ..., "threads": T}.
"""
import argparse
import json
import statistics
import time
import warnings

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")  # detect_anomaly warns that it is slow
    dev = torch.device(args.device)
    torch.manual_seed(0)
    nn = torch.nn
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                        nn.Linear(256, 10)).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(128, 784, device=dev)
    y = torch.randint(0, 10, (128,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def time_ms(anomaly):
        sync()
        start = time.perf_counter()
        if anomaly:
            with torch.autograd.detect_anomaly():
                step()
        else:
            step()
        sync()
        return (time.perf_counter() - start) * 1e3

    # Off and on in turns, so that load from other processes falls on both alike.
    off_times, on_times = [], []
    for i in range(args.warmup + args.steps):
        off_ms, on_ms = time_ms(False), time_ms(True)
        if i >= args.warmup:
            off_times.append(off_ms)
            on_times.append(on_ms)
    off = statistics.median(off_times)
    on = statistics.median(on_times)
    print(json.dumps({"off_ms": off, "on_ms": on, "device": args.device,
                      "threads": args.threads}))


if __name__ == "__main__":
    main()

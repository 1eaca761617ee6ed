#!/usr/bin/env python3
"""bench/torch/pth_bench.py — the PyTorch side of bench/bench_pth.cpp.

    python3 pth_bench.py FILE [LAYERS] [WIDTH]

Writes a state dict of LAYERS Linear(WIDTH, WIDTH) layers (f32 weights and biases, seeded;
16 x 4096 x 4096 is 1.07 GB) with torch.save to FILE, then times torch.load(FILE) with a
warm page cache: the median of 3 after a warm-up. Prints one JSON object: the load time, the
bytes, and each tensor's sum (f64) for bench_pth's validation of io::load_pth.
"""
import json
import statistics
import sys
import time

import torch


def main():
    path = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    width = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    torch.manual_seed(0)
    sd = {}
    for i in range(layers):
        sd[f"{i}.weight"] = torch.randn(width, width)
        sd[f"{i}.bias"] = torch.randn(width)
    torch.save(sd, path)
    sums = {k: float(v.double().sum()) for k, v in sd.items()}
    nbytes = sum(v.numel() * v.element_size() for v in sd.values())
    del sd
    torch.load(path)  # warm-up (and the page cache)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        loaded = torch.load(path)
        times.append(time.perf_counter() - t0)
        del loaded
    print(json.dumps({"torch": torch.__version__, "bytes": nbytes,
                      "load_s": statistics.median(times), "sums": sums}))


if __name__ == "__main__":
    main()

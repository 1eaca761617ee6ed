#!/usr/bin/env python3
"""bench/torch/matmul_precision_bench.py — the PyTorch side of bench/bench_matmul_precision.cpp.

    python3 matmul_precision_bench.py --n 8192 --reps 10

Times torch.mm of two n x n f32 CUDA matrices under torch.set_float32_matmul_precision
"highest" and "high", and the relative error (Frobenius) of each against the f64 product.
Prints one JSON object: {"highest_tflops": ..., "high_tflops": ..., "highest_err": ...,
"high_err": ...}; {"skipped": "no CUDA"} without a GPU.
"""
import argparse
import json
import statistics

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA"}))
        return
    torch.manual_seed(3)
    a = torch.randn(args.n, args.n, device="cuda")
    b = torch.randn(args.n, args.n, device="cuda")
    exact = a.double() @ b.double()
    out = {}
    for precision in ("highest", "high"):
        torch.set_float32_matmul_precision(precision)
        c = a @ b
        out[precision + "_err"] = float((c.double() - exact).norm() / exact.norm())
        ms = []
        for _ in range(3):
            a @ b
        for _ in range(args.reps):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a @ b
            stop.record()
            torch.cuda.synchronize()
            ms.append(start.elapsed_time(stop))
        out[precision + "_tflops"] = 2.0 * args.n ** 3 / (statistics.median(ms) * 1e-3) / 1e12
    torch.set_float32_matmul_precision("highest")
    print(json.dumps(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/torch/linalg_bench.py — the PyTorch side of bench/bench_linalg.cpp.

    python3 linalg_bench.py --sizes 16,64,256 --batch 1 --dtype f32

Times torch.linalg's inv, det, solve, cholesky, qr, svd, eigh, lu_factor and
solve_triangular on CUDA (its default backend choice) on operands built as bench_linalg builds
them; ms per call (wall clock to a synchronised end), median of 5 after 2
warm-ups. Prints one JSON object {"<op>_<n>": ms, ...};
{"skipped": "no CUDA"} without a GPU.
"""
import argparse
import json
import statistics
import time

import torch


def operand(op, batch, n, dtype):
    torch.manual_seed(7)
    a = torch.randn(batch, n, n, dtype=dtype, device="cuda")
    eye = torch.eye(n, dtype=dtype, device="cuda")
    if op in ("cholesky", "eigh"):
        return a @ a.transpose(-2, -1) / n + eye
    a = a / n ** 0.5 + 2 * eye
    return torch.tril(a) if op == "solve_triangular" else a


OPS = {
    "inv": (lambda a, b: torch.linalg.inv(a), 4096),
    "det": (lambda a, b: torch.linalg.det(a), 4096),
    "solve": (lambda a, b: torch.linalg.solve(a, b), 4096),
    "cholesky": (lambda a, b: torch.linalg.cholesky(a), 4096),
    "qr": (lambda a, b: torch.linalg.qr(a).R, 4096),
    "svd": (lambda a, b: torch.linalg.svd(a, full_matrices=False).S, 1024),
    "eigh": (lambda a, b: torch.linalg.eigh(a).eigenvalues, 2048),
    "lu_factor": (lambda a, b: torch.linalg.lu_factor(a).LU, 4096),
    "solve_triangular": (lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), 4096),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16,64,256")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA"}))
        return
    dtype = torch.float32 if args.dtype == "f32" else torch.float64
    out = {}
    for name, (fn, max_size) in OPS.items():
        for n in (int(s) for s in args.sizes.split(",")):
            if n > max_size:
                continue
            a = operand(name, args.batch, n, dtype)
            b = torch.randn(args.batch, n, 4, dtype=dtype, device="cuda")
            for _ in range(2):
                fn(a, b)
            torch.cuda.synchronize()
            ms = []
            for _ in range(5):  # wall clock to the end of the work, as bench_linalg times
                start = time.perf_counter()
                fn(a, b)
                torch.cuda.synchronize()
                ms.append((time.perf_counter() - start) * 1e3)
            out[f"{name}_{n}"] = statistics.median(ms)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/torch/load_gpu.py — the safetensors side of bench/bench_load_gpu.cpp.

    python3 load_gpu.py FILE

Times safetensors.torch.load_file(FILE, device="cuda:0") with a warm page cache (median of 3
after a warm-up) and a cold one (the file's pages dropped with posix_fadvise(DONTNEED) before
each of 3 loads), the device synchronised before the clock stops. Prints one JSON object.
"""
import json
import os
import statistics
import sys
import time

import torch
from safetensors.torch import load_file


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(path):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    tensors = load_file(path, device="cuda:0")
    torch.cuda.synchronize()
    s = time.perf_counter() - t0
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    del tensors
    return s, nbytes


def main():
    path = sys.argv[1]
    timed(path)  # warm-up (and the page cache)
    warm, cold = [], []
    for _ in range(3):
        s, nbytes = timed(path)
        warm.append(s)
    for _ in range(3):
        drop_cache(path)
        s, nbytes = timed(path)
        cold.append(s)
    gb = nbytes / 1e9
    print(json.dumps({"torch": torch.__version__, "gb": gb,
                      "warm_gbps": gb / statistics.median(warm),
                      "cold_gbps": gb / statistics.median(cold)}))


if __name__ == "__main__":
    main()

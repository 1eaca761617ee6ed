#!/usr/bin/env python3
"""bench/torch/cuda_bench.py — the PyTorch (CUDA) side of bench/bench_cuda.cpp.

    python3 cuda_bench.py [--data-dir DIR] [--only tiny,mlp,wide,gemm,epoch]
    python3 cuda_bench.py --only profile    (3 mlp steps for ncu --profile-from-start off)

Runs on cuda:0 the same four measurements as bench_cuda, timed the same way (wall clock
around a block of work, torch.cuda.synchronize() before the clock starts and before it
stops; no host sync inside a block):

  tiny   16 f32 elements, z = z * a + b 500 times = 1000 ops: µs per op, under
         torch.no_grad() and with the graph recorded (x.requires_grad), forward only.
  mlp    784-256-256-10 MLP, batch 128, data on the GPU: one Adam step (fused=True, lr 1e-3)
         = zero_grad(set_to_none), forward, cross_entropy, backward, step. ms per step: median
         of blocks of 10 steps (25 blocks = 250 steps after 30 warm-up steps).
  wide   784-4096-4096-10 MLP, batch 4096, fp32, fused Adam: ms per step (median of 6 blocks
         of 5 steps after 5 warm-up) and TFLOP/s counting 6·(784·4096 + 4096·4096 + 4096·10)·4096.
  gemm   torch.mm 8192³ fp32: TFLOP/s (median of 10), with TF32 off (PyTorch's default,
         torch.backends.cuda.matmul.allow_tf32 = False) and, for information, with TF32 on.
  epoch  Fashion-MNIST, all 60000 training images resident on the GPU: one epoch of the mlp
         step over a random permutation (torch.randperm on the GPU, batch 128, last batch
         partial), then test accuracy (10000 images). Wall time of the epoch (after one
         untimed warm-up epoch on a separate model) and accuracy.

Prints one JSON object on the last line of stdout: {"torch": version, "device": name, "tiny":
{...}, "mlp": {...}, ...}. Reads the IDX .gz files itself (no torchvision needed).
"""
import argparse
import gzip
import json
import os
import statistics
import struct
import time

import torch

KSTEPS = 500  # 2 ops each
DEV = torch.device("cuda:0")


def sync():
    torch.cuda.synchronize(DEV)


def block_times(fn, warmup, blocks, per_block, sync_fn=None):
    """ms per call: median and best over `blocks` blocks of `per_block` calls each (sync_fn
    waits for the device; the default is the GPU's)."""
    wait = sync_fn or sync
    for _ in range(warmup):
        fn()
    wait()
    out = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(per_block):
            fn()
        wait()
        out.append((time.perf_counter() - start) * 1e3 / per_block)
    return statistics.median(out), min(out)


def bench_tiny():
    x = torch.rand(16, device=DEV) * 2 - 1
    a = torch.full((16,), 1.0001, device=DEV)
    b = torch.full((16,), 0.0001, device=DEV)

    def chain(z):
        for _ in range(KSTEPS):
            z = z * a + b
        return z

    res = {}
    with torch.no_grad():
        med, best = block_times(lambda: chain(x), 3, 21, 1)
    res["nograd_us_per_op"] = med * 1e3 / (2 * KSTEPS)
    xg = x.clone().requires_grad_()
    med, best = block_times(lambda: chain(xg), 3, 21, 1)
    res["grad_us_per_op"] = med * 1e3 / (2 * KSTEPS)
    return res


def mlp(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(DEV)


def make_step(net, fused=True):
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=fused)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def bench_mlp():
    torch.manual_seed(0)
    net = mlp([784, 256, 256, 10])
    step = make_step(net)
    x = torch.rand(128, 784, device=DEV)
    y = torch.randint(0, 10, (128,), device=DEV)
    med, best = block_times(lambda: step(x, y), 30, 25, 10)
    res = {"ms_per_step": med, "best_ms_per_step": best}
    # The same step with the default (foreach) Adam, for information.
    step2 = make_step(mlp([784, 256, 256, 10]), fused=False)
    res["foreach_ms_per_step"] = block_times(lambda: step2(x, y), 30, 25, 10)[0]
    # Phases (a sync after each, so they overlap nothing): forward+loss, backward, step.
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
    phases = {"forward": [], "backward": [], "step": []}
    for i in range(60):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        sync()
        t1 = time.perf_counter()
        loss.backward()
        sync()
        t2 = time.perf_counter()
        opt.step()
        sync()
        t3 = time.perf_counter()
        if i >= 10:
            phases["forward"].append(t1 - t0)
            phases["backward"].append(t2 - t1)
            phases["step"].append(t3 - t2)
    for k, v in phases.items():
        res[k + "_ms"] = statistics.median(v) * 1e3
    return res


def bench_wide():
    torch.manual_seed(0)
    net = mlp([784, 4096, 4096, 10])
    step = make_step(net)
    x = torch.rand(4096, 784, device=DEV)
    y = torch.randint(0, 10, (4096,), device=DEV)
    med, best = block_times(lambda: step(x, y), 5, 6, 5)
    flops = 6.0 * (784 * 4096 + 4096 * 4096 + 4096 * 10) * 4096
    return {"ms_per_step": med, "best_ms_per_step": best, "tflops": flops / (med * 1e-3) / 1e12}


def bench_gemm():
    n = 8192
    a = torch.randn(n, n, device=DEV)
    b = torch.randn(n, n, device=DEV)
    res = {}
    old = torch.backends.cuda.matmul.allow_tf32
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        med, best = block_times(lambda: torch.mm(a, b), 3, 10, 1)
        res["tf32_tflops" if tf32 else "tflops"] = 2.0 * n**3 / (med * 1e-3) / 1e12
    torch.backends.cuda.matmul.allow_tf32 = old
    return res


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    t = torch.frombuffer(bytearray(raw[4 + 4 * ndim :]), dtype=torch.uint8)
    return t.reshape(dims)


def load_split(data_dir, prefix):
    def find(stem):
        for name in (stem + ".gz", stem):
            p = os.path.join(data_dir, name)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(os.path.join(data_dir, stem))

    images = read_idx(find(prefix + "-images-idx3-ubyte")).reshape(-1, 784).float() / 255.0
    labels = read_idx(find(prefix + "-labels-idx1-ubyte")).long()
    return images.to(DEV), labels.to(DEV)


def bench_epoch(data_dir):
    if data_dir and os.path.isdir(data_dir):
        xtr, ytr = load_split(data_dir, "train")
        xte, yte = load_split(data_dir, "t10k")
        source = "fashion-mnist"
    else:
        g = torch.Generator(device=DEV).manual_seed(0)
        xtr = torch.rand(60000, 784, device=DEV, generator=g)
        ytr = torch.randint(0, 10, (60000,), device=DEV, generator=g)
        xte = torch.rand(10000, 784, device=DEV, generator=g)
        yte = torch.randint(0, 10, (10000,), device=DEV, generator=g)
        source = "synthetic"

    def epoch(net, step):
        perm = torch.randperm(xtr.shape[0], device=DEV)
        for i in range(0, xtr.shape[0], 128):
            idx = perm[i : i + 128]
            step(xtr[idx], ytr[idx])

    def accuracy(net):
        correct = torch.zeros((), dtype=torch.int64, device=DEV)
        with torch.no_grad():
            for i in range(0, xte.shape[0], 1000):
                correct += (net(xte[i : i + 1000]).argmax(1) == yte[i : i + 1000]).sum()
        return correct.item() / xte.shape[0]

    torch.manual_seed(0)
    warm = mlp([784, 256, 256, 10])
    epoch(warm, make_step(warm))  # warm-up: kernels loaded, allocator filled
    torch.manual_seed(1)
    net = mlp([784, 256, 256, 10])
    step = make_step(net)
    sync()
    start = time.perf_counter()
    epoch(net, step)
    sync()
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    acc = accuracy(net)
    eval_seconds = time.perf_counter() - start
    return {"seconds": seconds, "eval_seconds": eval_seconds, "accuracy": acc, "data": source}


def profile_mlp(steps=3):
    """`steps` mlp steps between cudaProfilerStart/Stop, for ncu --profile-from-start off."""
    torch.manual_seed(0)
    net = mlp([784, 256, 256, 10])
    step = make_step(net)
    x = torch.rand(128, 784, device=DEV)
    y = torch.randint(0, 10, (128,), device=DEV)
    for _ in range(5):
        step(x, y)
    sync()
    torch.cuda.profiler.start()
    for _ in range(steps):
        step(x, y)
    sync()
    torch.cuda.profiler.stop()
    return {"steps": steps}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--only", default="tiny,mlp,wide,gemm,epoch")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default, stated explicitly
    torch.backends.cudnn.allow_tf32 = False
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(DEV)}
    torch.ones(1, device=DEV)  # context
    for name in args.only.split(","):
        t0 = time.perf_counter()
        if name == "tiny":
            out[name] = bench_tiny()
        elif name == "mlp":
            out[name] = bench_mlp()
        elif name == "wide":
            out[name] = bench_wide()
        elif name == "gemm":
            out[name] = bench_gemm()
        elif name == "epoch":
            out[name] = bench_epoch(args.data_dir)
        elif name == "profile":
            out[name] = profile_mlp()
        print(f"cuda_bench.py: {name} done in {time.perf_counter() - t0:.1f} s: {out[name]}",
              flush=True)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

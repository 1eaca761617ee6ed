#!/usr/bin/env python3
"""bench/torch/train_step.py — the PyTorch (Python) side of bench/bench_train_step.cpp.

    python3 train_step.py --model mlp|cnn --init INIT.safetensors --batch BATCH.safetensors \
        --threads T --validate-steps 3 --steps 50 --warmup 5

Builds the same network as ember's train::mlp(784, {256, 256}, 10) or train::fashion_cnn(10)
(torch.nn.Sequential, so the state_dict names are the same), loads ember's initial weights
from INIT, runs `--validate-steps` Adam steps (lr 1e-3) on the batch in BATCH (x, y) and
reports the loss of every step, then times `--steps` further steps. Prints one JSON object:
{"losses": [...], "ms_per_step": median, "best_ms_per_step": ..., "threads": T}.

Reads safetensors with json + torch.frombuffer so that it runs on Debian's python3-torch,
which has no `safetensors` module.
"""
import argparse
import json
import statistics
import struct
import time

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        data = bytearray(raw[base + begin : base + end])
        out[name] = torch.frombuffer(data, dtype=dtype).reshape(entry["shape"]).clone()
    return out


def build(model):
    nn = torch.nn
    if model == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "cnn"], required=True)
    ap.add_argument("--init", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--validate-steps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    net = build(args.model)
    net.load_state_dict(read_safetensors(args.init), strict=True)
    batch = read_safetensors(args.batch)
    x, y = batch["x"], batch["y"]
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    net.train()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    losses = [step().item() for _ in range(args.validate_steps)]
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(json.dumps({"losses": losses, "ms_per_step": statistics.median(times) * 1e3,
                      "best_ms_per_step": min(times) * 1e3, "threads": args.threads,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()

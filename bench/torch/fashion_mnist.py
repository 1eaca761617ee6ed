#!/usr/bin/env python3
"""bench/torch/fashion_mnist.py — what `ember train --dataset fashion-mnist` does, in PyTorch.

    python3 fashion_mnist.py --model mlp|cnn --epochs 1 --threads 1 [--data-dir DIR]

Reads the gzip IDX files of the Debian package dataset-fashion-mnist, scales pixels to
[0, 1], trains the same network as ember's (MLP 784-256-256-10 or the CNN of
train::fashion_cnn) with Adam (lr 1e-3), batch 128, shuffled, then evaluates the 10 000 test
images in batches of 1024 under no_grad. Prints one JSON line:
{"test_accuracy": percent, "test_loss": ..., "train_seconds": ..., "torch": version}.
"""
import argparse
import gzip
import json
import os
import struct
import time

import torch

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    assert raw[0] == 0 and raw[1] == 0, f"{path}: not an IDX file"
    dtype_code, rank = raw[2], raw[3]
    dims = struct.unpack(">" + "I" * rank, raw[4 : 4 + 4 * rank])
    assert dtype_code == 0x08, f"{path}: expected unsigned bytes"
    data = torch.frombuffer(bytearray(raw[4 + 4 * rank :]), dtype=torch.uint8)
    return data.reshape(dims)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    raise SystemExit(f"fashion_mnist.py: {stem}(.gz) not found in {data_dir} "
                     "(install the Debian package dataset-fashion-mnist)")


def build(model):
    nn = torch.nn
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--scheduler", choices=["none", "cosine"], default="none",
                    help="cosine: CosineAnnealingLR over every batch of every epoch (ember's --scheduler cosine)")
    ap.add_argument("--data-dir", default=os.environ.get("EMBER_FASHION_MNIST_DIR", DEFAULT_DIR))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    def images(stem):
        return (read_idx(find(args.data_dir, stem)).float() / 255.0).unsqueeze(1)

    def labels(stem):
        return read_idx(find(args.data_dir, stem)).long()

    x_train, y_train = images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte")
    x_test, y_test = images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte")

    net = build(args.model)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = (x_train.shape[0] + args.batch_size - 1) // args.batch_size
    sched = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * batches)
             if args.scheduler == "cosine" else None)
    start = time.perf_counter()
    for _ in range(args.epochs):
        net.train()
        order = torch.randperm(x_train.shape[0])
        for i in range(0, x_train.shape[0], args.batch_size):
            idx = order[i : i + args.batch_size]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
    train_seconds = time.perf_counter() - start

    net.eval()
    correct, total_loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, x_test.shape[0], 1024):
            out = net(x_test[i : i + 1024])
            total_loss += loss_fn(out, y_test[i : i + 1024]).item() * out.shape[0]
            correct += (out.argmax(1) == y_test[i : i + 1024]).sum().item()
    print(json.dumps({"test_accuracy": 100.0 * correct / x_test.shape[0],
                      "test_loss": total_loss / x_test.shape[0], "train_seconds": train_seconds,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()

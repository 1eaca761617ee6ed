#!/usr/bin/env python3
"""bench/torch/resnet_bench.py — the PyTorch side of bench/bench_resnet.cpp: a ResNet training
step, eager (and torch.compile where PyTorch 2 has it).

    python3 resnet_bench.py --model resnet18|resnet50 --init INIT.safetensors \
        --batch BATCH.safetensors [--device cpu|cuda] [--precision f32|bf16] [--lr 0.1]
        [--momentum 0.9] [--weight-decay 1e-4] [--threads N] [--channels-last]
        [--mode eager|compile|both] [--validate-steps 2] [--warmup 3] [--steps 10]

torchvision's model (or, where torchvision is missing, this script's copy of it: the same modules
and names) with ember's initial weights from INIT, trained in train mode on the batch in BATCH
(x [B, 3, S, S] f32, y [B] i64): zero_grad(set_to_none), forward and cross_entropy (under
torch.autocast(bf16) with --precision bf16), backward, SGD(lr, momentum, weight_decay).step().
Each mode first reports the losses of --validate-steps steps from INIT, then times --steps steps
one by one after --warmup (synchronised on CUDA; peak memory reset after the warm-up).

Prints one JSON line {"torch": version, "results": [{"impl": "torch_eager", "losses": [...],
"ms_step": median, "best_ms_step", "peak_allocated_gb" (CUDA), "channels_last", "threads"}, ...]}.
Reads safetensors without the `safetensors` module (Debian has none): train_step.py's reader.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import read_safetensors  # noqa: E402

try:
    import torchvision

    MODELS = {"resnet18": torchvision.models.resnet18, "resnet50": torchvision.models.resnet50,
              # dropout 0, as bench_resnet's: the validated losses are then deterministic
              "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(dropout=0.0)}
    SOURCE = "torchvision " + torchvision.__version__
except ImportError:  # the GPU machine's pip torch may come without torchvision
    MODELS, SOURCE = None, "this script's copy of torchvision's ResNet (torchvision missing)"


class Block(nn.Module):
    """torchvision's BasicBlock (bottleneck=False) or Bottleneck, same child names."""

    def __init__(self, inplanes, planes, stride, bottleneck):
        super().__init__()
        out = planes * (4 if bottleneck else 1)
        width = planes
        if bottleneck:
            self.conv1, self.bn1 = nn.Conv2d(inplanes, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out)
        else:
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False), nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False),
                                            nn.BatchNorm2d(out))
        self.bottleneck = bottleneck

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.bottleneck:
            out = self.bn3(self.conv3(self.relu(out)))
        return self.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self, layers, bottleneck, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1, self.relu, self.maxpool = nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        inplanes = 64
        for i, n in enumerate(layers):
            planes = 64 << i
            blocks = []
            for j in range(n):
                blocks.append(Block(inplanes, planes, 2 if i > 0 and j == 0 else 1, bottleneck))
                inplanes = planes * (4 if bottleneck else 1)
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d((1, 1)), nn.Linear(inplanes, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(name):
    if MODELS is not None:
        return MODELS[name]()
    if name == "mobilenet_v2":
        sys.exit("resnet_bench: mobilenet_v2 needs torchvision (this script copies only the ResNet)")
    return ResNet([2, 2, 2, 2], False) if name == "resnet18" else ResNet([3, 4, 6, 3], True)


def run(a, dev, compiled, init, batch):
    impl = "torch_compile" if compiled else "torch_eager"
    model = build(a.model)
    model.load_state_dict(init, strict=True)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(dev, memory_format=fmt).train()
    x = batch["x"].to(dev).contiguous(memory_format=fmt)
    y = batch["y"].to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    forward = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    losses = [step().item() for _ in range(a.validate_steps)]
    for _ in range(a.warmup):
        step()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    ms = []
    for _ in range(a.steps):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"impl": impl, "losses": losses, "ms_step": statistics.median(ms), "best_ms_step": min(ms),
            "peak_allocated_gb": torch.cuda.max_memory_allocated(dev) / 1e9 if dev.type == "cuda" else None,
            "channels_last": a.channels_last, "threads": torch.get_num_threads(), "model_source": SOURCE}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["resnet18", "resnet50", "mobilenet_v2"], required=True)
    ap.add_argument("--init", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--mode", choices=["eager", "compile", "both"], default="eager")
    ap.add_argument("--validate-steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.device == "cuda":
        torch.backends.cudnn.benchmark = True
    dev = torch.device(a.device)
    init, batch = read_safetensors(a.init), read_safetensors(a.batch)
    results = []
    for mode in (["eager", "compile"] if a.mode == "both" else [a.mode]):
        if mode == "compile" and not hasattr(torch, "compile"):
            print(f"resnet_bench: torch.compile needs PyTorch 2 (this is {torch.__version__}); skipped",
                  file=sys.stderr)
            continue
        results.append(run(a, dev, mode == "compile", init, batch))
    print(json.dumps({"torch": torch.__version__, "results": results}), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""tests/gen_resnet_fixtures.py — torchvision's ResNets and MobileNetV2 as the reference for
ember's (include/ember/models/resnet.hpp, mobilenet.hpp; tests/test_resnet.cpp,
test_mobilenet.cpp).

Two jobs:

    /usr/bin/python3 tests/gen_resnet_fixtures.py --names tests/data/resnet_names.json
    /usr/bin/python3 tests/gen_resnet_fixtures.py --names tests/data/mobilenet_names.json \
        --names-of mobilenet_v2

writes every state_dict entry (name, shape, dtype, parameter or buffer, in order) of
torchvision 0.14's resnet18/34/50/101/152, resnext50_32x4d and wide_resnet50_2 (or of the
architectures --names-of lists): the committed fixtures the name tests read without Python.

    /usr/bin/python3 tests/gen_resnet_fixtures.py --out DIR --arch resnet18 [--steps 3] [--grads]
        [--pth]

is run by the test itself (the weights are too big to commit): a seeded torchvision model (for
MobileNetV2 with its classifier's dropout 0, so train mode is deterministic) whose
BatchNorm statistics are calibrated on random batches, written as DIR/ARCH.weights.safetensors
(its state_dict, num_batches_tracked included; with --pth also DIR/ARCH.pth, torch.save's
archive of it), and DIR/ARCH.expected.safetensors holding
  x, y                          the batch ([B, 3, S, S] f32, [B] i64)
  logits_eval, logits_train_f32 eval-mode and train-mode logits of the f32 model
and, of the same model in f64 (model.double(): train mode's exact checks, see reference()):
  logits_eval_f64               eval-mode logits
  logits_train, loss            the first train-mode forward and its cross-entropy
  after.<buffer>                every BatchNorm buffer after that forward (running stats)
  grad.<parameter>              (--grads) the gradients of that loss
  losses                        (--steps N) the losses of N SGD steps (lr 0.01, momentum
                                0.9, weight decay 1e-4) on the batch, in train mode
Exits 77 (the skip code) when torch or torchvision cannot be imported.
"""
import argparse
import copy
import json
import os
import struct
import sys

SKIP = 77

try:
    import torch
    import torchvision
except ImportError as e:  # the C++ test reports the reason and skips
    print(f"gen_resnet_fixtures: SKIP: torch/torchvision not importable by {sys.executable} ({e})")
    sys.exit(SKIP)

RESNETS = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
           "wide_resnet50_2"]
ARCHS = RESNETS + ["mobilenet_v2"]
ST_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64"}


def save_safetensors(tensors, path):
    """The safetensors layout (u64 header length, JSON header padded to 8, raw data): Debian
    has no `safetensors` module. Larger elements first keeps every tensor aligned."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors, key=lambda k: (-tensors[k].element_size(), k)):
        t = tensors[name].detach().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def names(out_path, archs):
    doc = {"torchvision": torchvision.__version__, "models": {}}
    for arch in archs:
        m = getattr(torchvision.models, arch)()
        buffers = {n for n, _ in m.named_buffers()}
        doc["models"][arch] = [
            [n, list(t.shape), str(t.dtype).replace("torch.", ""),
             "buffer" if n in buffers else "parameter"] for n, t in m.state_dict().items()]
    with open(out_path, "w") as f:
        f.write("{\n" + f'  "generator": "tests/gen_resnet_fixtures.py --names",\n'
                f'  "torchvision": "{doc["torchvision"]}",\n  "models": {{\n')
        for i, arch in enumerate(archs):
            rows = ",\n".join("      " + json.dumps(r, separators=(",", ":"))
                              for r in doc["models"][arch])
            f.write(f'    "{arch}": [\n{rows}\n    ]' + ("," if i + 1 < len(archs) else "") + "\n")
        f.write("  }\n}\n")


def reference(a):
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    extra = {"dropout": 0.0} if a.arch == "mobilenet_v2" else {}
    m = getattr(torchvision.models, a.arch)(num_classes=a.classes, **extra)
    bns = [b for b in m.modules() if isinstance(b, torch.nn.BatchNorm2d)]
    with torch.no_grad():  # BatchNorm away from its start: affine and running stats of data
        for b in bns:
            b.weight.uniform_(0.5, 1.5)
            b.bias.uniform_(-0.2, 0.2)
        m.train()
        for _ in range(3):
            m(torch.randn(a.batch, 3, a.size, a.size))
    save_safetensors(m.state_dict(), os.path.join(a.out, f"{a.arch}.weights.safetensors"))
    if a.pth:  # torch.save's zip archive, as torchvision's downloaded weights are
        torch.save(m.state_dict(), os.path.join(a.out, f"{a.arch}.pth"))

    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.randint(0, a.classes, (a.batch,))
    out = {"x": x, "y": y}
    m64 = copy.deepcopy(m).double()  # before any forward changes the running statistics
    m.eval()
    with torch.no_grad():
        out["logits_eval"] = m(x)
        m.train()
        out["logits_train_f32"] = m(x)
    # Train mode in f64: batch statistics over the few values of layer4 (8 per channel at
    # batch 2 of 64x64) amplify f32 rounding, and a ReLU near 0 flips, so the exact checks of
    # train mode are made in f64 where the two computations agree to ~1e-12.
    x64 = x.double()
    m64.eval()
    with torch.no_grad():
        out["logits_eval_f64"] = m64(x64)
    m64.train()
    opt = torch.optim.SGD(m64.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    losses = []
    for step in range(max(a.steps, 1)):
        opt.zero_grad(set_to_none=True)
        logits = m64(x64)
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        if step == 0:
            out["logits_train"], out["loss"] = logits.detach(), loss.detach()
            for n, t in m64.named_buffers():
                out["after." + n] = t.clone()
            if a.grads:
                for n, p in m64.named_parameters():
                    out["grad." + n] = p.grad.clone()
        losses.append(loss.item())
        opt.step()
    if a.steps:
        out["losses"] = torch.tensor(losses, dtype=torch.float64)
    save_safetensors(out, os.path.join(a.out, f"{a.arch}.expected.safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--names", help="write the state_dict names of every architecture here")
    ap.add_argument("--out", help="folder for ARCH.weights/expected.safetensors")
    ap.add_argument("--names-of", nargs="+", default=RESNETS, choices=ARCHS,
                    help="the architectures --names lists (default: the ResNets)")
    ap.add_argument("--arch", default="resnet18", choices=ARCHS)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--grads", action="store_true")
    ap.add_argument("--pth", action="store_true", help="also write ARCH.pth with torch.save")
    a = ap.parse_args()
    if a.names:
        names(a.names, a.names_of)
    if a.out:
        reference(a)
    if not a.names and not a.out:
        ap.error("nothing to do: give --names and/or --out")


if __name__ == "__main__":
    main()

"""bench/torch/image_folder_bench.py — PyTorch's side of bench/bench_image_folder.cpp:
torchvision's ImageFolder (PIL decoding) + DataLoader with the same transforms, batch size
and worker count; decoded + augmented images per second over whole epochs.

Prints progress, then one JSON line: {"images": N, "classes": C, "first_sum": S,
"images_per_s": median over the timed epochs, "epochs": [...]}; first_sum is the sum of
sample 0's RGB bytes as PIL decodes them, which the C++ side checks against ember's.
"""
import argparse
import json
import sys
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision import transforms as T


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--size", type=int, default=224)
    a = p.parse_args()
    torch.set_num_threads(1)  # the workers decode; the main process only collects
    tf = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(a.root, transform=tf)
    first = int(np.array(Image.open(ds.samples[0][0]).convert("RGB"), dtype=np.int64).sum())
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers,
                                         persistent_workers=a.workers > 0)
    rates = []
    for epoch in range(a.epochs + 1):  # epoch 0 warms up (workers start, page cache)
        start, n = time.perf_counter(), 0
        for x, y in loader:
            n += x.shape[0]
        seconds = time.perf_counter() - start
        assert n == len(ds), (n, len(ds))
        if epoch > 0:
            rates.append(n / seconds)
        print(f"torch epoch {epoch}: {n} images in {seconds:.2f} s ({n / seconds:.0f} images/s)",
              file=sys.stderr)
    print(json.dumps({"images": len(ds), "classes": len(ds.classes), "first_sum": first,
                      "images_per_s": float(np.median(rates)), "epochs": rates,
                      "torch": torch.__version__, "torchvision": torchvision.__version__}))


if __name__ == "__main__":
    main()

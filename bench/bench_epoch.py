#!/usr/bin/env python3
"""bench/bench_epoch.py — a full Fashion-MNIST training run: `ember train` against the
PyTorch script bench/torch/fashion_mnist.py doing the same, in one run.

Both: load the IDX files from the Debian package, train for EPOCHS (default 1) with Adam
(lr 1e-3), batch 128, shuffled, then evaluate on the 10 000 test images. The figure is the
wall time of the whole command (process start, data loading, training, evaluation; ember also
saves the model). Each side uses its best thread count (1 or 2, measured here: ember runs
with both, PyTorch with both). Prints one JSON line per model:

  {"bench": "epoch_mlp", "ember": s, "reference": s, "unit": "s", "speedup": ...,
   "ember_accuracy": ..., "reference_accuracy": ...}

Environment: EMBER_BUILD_DIR (where tools/ember is; set by bench/run_all.sh),
EMBER_SOURCE_DIR, EMBER_EPOCH_MODELS (default "mlp cnn"), EMBER_EPOCHS (default 1).
Validation: both accuracies must be above 80% after one epoch (a broken run is not timed).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

SOURCE = os.environ.get("EMBER_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("EMBER_BUILD_DIR", os.path.join(SOURCE, "build"))
EPOCHS = int(os.environ.get("EMBER_EPOCHS", "1"))
MODELS = os.environ.get("EMBER_EPOCH_MODELS", "mlp cnn").split()
MIN_ACCURACY = 80.0


def timed(cmd, env):
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(f"bench_epoch: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}\n")
        sys.exit(1)
    return wall, proc.stdout


def run_ember(model, threads, out_dir):
    env = dict(os.environ, EMBER_NUM_THREADS=str(threads))
    cmd = [os.path.join(BUILD, "tools", "ember"), "train", "--dataset", "fashion-mnist", "--model", model,
           "--epochs", str(EPOCHS), "--lr", "1e-3", "--batch-size", "128", "--seed", "42",
           "--progress", "none", "--output", os.path.join(out_dir, f"{model}.safetensors")]
    wall, out = timed(cmd, env)
    m = re.search(r"^test: loss [0-9.eE+-]+, accuracy ([0-9.]+)%", out, re.M)
    if not m:
        sys.stderr.write(f"bench_epoch: no test accuracy in ember's output:\n{out}\n")
        sys.exit(1)
    return wall, float(m.group(1))


def run_torch(model, threads):
    script = os.path.join(SOURCE, "bench", "torch", "fashion_mnist.py")
    cmd = ["/usr/bin/python3", script, "--model", model, "--epochs", str(EPOCHS), "--threads", str(threads)]
    wall, out = timed(cmd, dict(os.environ))
    result = json.loads(out.strip().splitlines()[-1])
    return wall, float(result["test_accuracy"]), result


def main():
    with tempfile.TemporaryDirectory() as out_dir:
        for model in MODELS:
            ember_runs = [(run_ember(model, t, out_dir), t) for t in (1, 2)]
            torch_runs = [(run_torch(model, t), t) for t in (1, 2)]
            (e_wall, e_acc), e_threads = min(ember_runs, key=lambda r: r[0][0])
            (t_wall, t_acc, t_info), t_threads = min(torch_runs, key=lambda r: r[0][0])
            for (wall, acc, *_), threads in ember_runs + torch_runs:
                if acc < MIN_ACCURACY:
                    sys.stderr.write(f"bench_epoch: {model} accuracy {acc:.2f}% < {MIN_ACCURACY}%: not timed\n")
                    sys.exit(1)
            print(json.dumps({
                "bench": f"epoch_{model}", "ember": round(e_wall, 3), "reference": round(t_wall, 3),
                "unit": "s", "speedup": round(t_wall / e_wall, 3), "epochs": EPOCHS,
                "ember_accuracy": e_acc, "reference_accuracy": t_acc, "ember_threads": e_threads,
                "reference_threads": t_threads,
                "reference_impl": f"PyTorch {t_info['torch']} (Python), bench/torch/fashion_mnist.py",
                "reference_train_seconds": t_info["train_seconds"]}))
            sys.stderr.write(
                f"epoch_{model}: {EPOCHS} epoch(s) wall: ember {e_wall:.1f} s ({e_threads} thr, test {e_acc:.2f}%), "
                f"PyTorch {t_wall:.1f} s ({t_threads} thr, test {t_acc:.2f}%) -> {t_wall / e_wall:.2f}x; "
                f"all runs: ember {[round(r[0][0], 1) for r in ember_runs]} s, "
                f"PyTorch {[round(r[0][0], 1) for r in torch_runs]} s for 1 and 2 threads\n")


if __name__ == "__main__":
    main()

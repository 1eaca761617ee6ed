#!/usr/bin/env python3
"""bench/checkpoint_torch.py — ember's checkpoint save/load against Python's: safetensors.torch
save_file/load_file and torch.save/torch.load, on a ~1 GB f32 model, in one run.

  EMBER_BUILD_DIR=build-io /usr/bin/python3 bench/checkpoint_torch.py

The model is 4 × nn.Linear(8192, 8192) (268.5 M parameters, 1.074 GB), as in
bench/bench_checkpoint.cpp. ember's figures come from EMBER_BUILD_DIR/bench/bench_checkpoint_ember
(the same benchmark without libtorch) run first, on the same machine and files folder.
Python side, warm page cache, median of 3 after a warm-up:
  save: safetensors.torch.save_file(model.state_dict()) and torch.save(model.state_dict()),
        neither fsyncs (ember's save does: file and folder); also timed followed by an fsync
  load: load_file / torch.load, then model.load_state_dict(strict=True) into an existing model
        (ember: io::load_state into an existing model; io::load_model; each also as a first
        load, with ember's allocator cache emptied before it so its buffers are new pages)
Values are validated (bitwise) before timing. One JSON line per comparison; speedup > 1 means
ember is faster. Without the safetensors package its two references are left out (said so).
Environment: EMBER_BUILD_DIR, EMBER_BENCH_DIR (files folder; default: a temporary folder
in EMBER_BUILD_DIR).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import torch
    from torch import nn
except ImportError as e:
    print(f"checkpoint_torch: torch not importable ({e}); nothing to compare", file=sys.stderr)
    sys.exit(0)
try:
    from safetensors.torch import load_file, save_file
except ImportError:
    load_file = save_file = None

SOURCE = os.environ.get("EMBER_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("EMBER_BUILD_DIR", os.path.join(SOURCE, "build"))
WIDTH, LAYERS, WARMUP, REPS = 8192, 4, 1, 3


def median_time(fn):
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def emit(name, ember_s, ref_s, ref_name, gb, **extra):
    line = {"bench": name, "ember": round(gb / ember_s, 4), "reference": round(gb / ref_s, 4), "unit": "GB/s",
            "speedup": round(ref_s / ember_s, 4), "target": 1.0, "met": ref_s / ember_s >= 1.0,
            "reference_name": ref_name, "ember_s": round(ember_s, 4), "reference_s": round(ref_s, 4)}
    line.update(extra)
    print(json.dumps(line), flush=True)


def main():
    exe = os.path.join(BUILD, "bench", "bench_checkpoint_ember")
    if not os.path.exists(exe):
        print(f"checkpoint_torch: {exe} is missing (build the bench_checkpoint_ember target)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(dir=os.environ.get("EMBER_BENCH_DIR") or BUILD) as work:
        env = dict(os.environ, EMBER_BENCH_DIR=work)
        out = subprocess.run([exe], env=env, check=True, capture_output=True, text=True)
        sys.stderr.write(out.stderr)
        ember = {}
        for line in out.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                ember[r["bench"]] = r
        ember_save = ember["checkpoint_save_1gb"]["ember_s"]
        ember_load = ember["checkpoint_load_state_1gb"]["ember_s"]
        ember_load_model = ember["checkpoint_load_model_1gb"]["ember_s"]
        ember_load_first = ember["checkpoint_load_state_first_1gb"]["ember_s"]
        ember_load_model_first = ember["checkpoint_load_model_first_1gb"]["ember_s"]

        torch.manual_seed(1)
        model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
        into = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
        state = model.state_dict()
        gb = sum(t.numel() * t.element_size() for t in state.values()) / 1e9
        print(f"checkpoint_torch: torch {torch.__version__}, {gb:.3f} GB, safetensors "
              f"{'present' if save_file else 'MISSING (its references are skipped)'}", file=sys.stderr)
        st_path, pt_path = os.path.join(work, "m.safetensors"), os.path.join(work, "m.pt")

        refs = []  # (name, save fn, load fn)
        if save_file:
            refs.append(("safetensors.torch", lambda: save_file(state, st_path),
                         lambda: into.load_state_dict(load_file(st_path), strict=True), st_path))
        refs.append(("torch.save/torch.load", lambda: torch.save(state, pt_path),
                     lambda: into.load_state_dict(torch.load(pt_path), strict=True), pt_path))
        for name, save, load, path in refs:
            with torch.no_grad():
                save()
                for p in into.parameters():
                    p.zero_()
                load()
                for a, b in zip(model.parameters(), into.parameters()):
                    if not torch.equal(a, b):
                        print(f"checkpoint_torch: VALIDATION FAILED for {name}", file=sys.stderr)
                        return 1
            save_s = median_time(save)
            save_fsync_s = median_time(lambda: (save(), fsync_path(path)))
            load_s = median_time(load)
            key = "safetensors" if name.startswith("safetensors") else "torch"
            emit(f"checkpoint_py_save_vs_{key}", ember_save, save_s, name + " save (no fsync)", gb,
                 note="ember includes fsync of file and folder")
            emit(f"checkpoint_py_save_vs_{key}_fsync", ember_save, save_fsync_s, name + " save + fsync", gb)
            emit(f"checkpoint_py_load_vs_{key}", ember_load, load_s, name + " load + load_state_dict", gb,
                 ember_api="io::load_state")
            emit(f"checkpoint_py_load_model_vs_{key}", ember_load_model, load_s, name + " load + load_state_dict", gb,
                 ember_api="io::load_model (rebuilds the module)")
            emit(f"checkpoint_py_load_first_vs_{key}", ember_load_first, load_s, name + " load + load_state_dict", gb,
                 ember_api="io::load_state, allocator cache emptied first (new pages)")
            emit(f"checkpoint_py_load_model_first_vs_{key}", ember_load_model_first, load_s,
                 name + " load + load_state_dict", gb,
                 ember_api="io::load_model, allocator cache emptied first (new pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""bench/torch/capture_bench.py — the PyTorch (CUDA) side of bench/bench_capture.cpp.

    python3 capture_bench.py [tiny | profile]

On cuda:0, timed as bench_capture (wall clock around a block of calls, torch.cuda.synchronize()
before the clock starts and before it stops):

  tiny  16 f32 elements, z = z * a + b 500 times = 1000 ops under torch.no_grad(): µs per op
        eager, and replaying the chain captured in a torch.cuda.CUDAGraph.
  mlp   784-256-256-10 MLP, batch 128, data on the GPU, Adam lr 1e-3: ms per step eagerly with
        fused Adam, and the whole step (zero_grad, forward, cross_entropy, backward, step)
        captured in a CUDA graph with capturable Adam (fused and foreach; the faster is the
        figure). Five runs each, every run the median of 25 blocks of 10 steps.
  cnn   the Fashion-MNIST CNN of train::fashion_cnn (two conv3x3 + BatchNorm + ReLU + MaxPool
        blocks of 32 and 64 channels, Linear(3136, 128), ReLU, Linear(128, 10)), batch 128,
        28x28 inputs: the same two figures.
  kernels_per_step of the eager step, counted with torch.profiler.

With `tiny`, only the tiny figures. Prints one JSON object on the last line of stdout. With
`profile`, torch.profiler's kernel tables of the cnn step, eager and graphed (text, no JSON).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_bench import DEV, block_times, sync  # noqa: E402

RUNS = 5


def block_ms(fn, warmup, blocks, per_block):
    """ms per call, the median over blocks (cuda_bench's timing)."""
    return block_times(fn, warmup, blocks, per_block)[0]


def bench_tiny():
    x = torch.rand(16, device=DEV) * 2 - 1
    a = torch.full((16,), 1.0001, device=DEV)
    b = torch.full((16,), 0.0001, device=DEV)

    def chain(z):
        for _ in range(500):
            z = z * a + b
        return z

    with torch.no_grad():
        eager = block_ms(lambda: chain(x), 3, 21, 1)
        static_x = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            chain(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            chain(static_x)
        replay = block_ms(graph.replay, 3, 21, 10)
    return {"eager_us_per_op": eager * 1e3 / 1000, "graph_us_per_op": replay * 1e3 / 1000}


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 10))


def cnn():
    def block(cin, cout):
        return [torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU(), torch.nn.MaxPool2d(2)]

    return torch.nn.Sequential(*block(1, 32), *block(32, 64), torch.nn.Flatten(),
                               torch.nn.Linear(64 * 7 * 7, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def eager_step(net, opt):
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def graphed_step(make, x, y, fused):
    """The whole step captured with capturable Adam (PyTorch's documented recipe)."""
    torch.manual_seed(0)
    net = make().to(DEV)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, capturable=True, fused=fused,
                           foreach=None if fused else True)
    step = eager_step(net, opt)
    static_x, static_y = x.clone(), y.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_x, static_y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = torch.nn.functional.cross_entropy(net(static_x), static_y)
        loss.backward()
        opt.step()
    keep = (net, opt, static_x, static_y, loss)  # the graph reads and writes their memory

    def replay():
        graph.replay()
        return keep

    return replay


def kernels_per_step(step, x, y):
    step(x, y)
    sync()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step(x, y)
        sync()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def bench_step(make, x, y):
    torch.manual_seed(0)
    net = make().to(DEV)
    step = eager_step(net, torch.optim.Adam(net.parameters(), lr=1e-3, fused=True))
    replays = {fused: graphed_step(make, x, y, fused) for fused in (True, False)}
    eager, graph = [], []
    for _ in range(RUNS):
        eager.append(block_ms(lambda: step(x, y), 10, 25, 10))
        graph.append(min(block_ms(r, 10, 25, 10) for r in replays.values()))
    return {"eager_ms": eager, "graph_ms": graph, "kernels_per_step": kernels_per_step(step, x, y)}


def profile_cnn():
    """PyTorch's kernels of the CNN's eager step (fused Adam) and of its graphed step."""
    torch.manual_seed(1)
    x, y = torch.rand(128, 1, 28, 28, device=DEV), torch.randint(0, 10, (128,), device=DEV)
    net = cnn().to(DEV)
    step = eager_step(net, torch.optim.Adam(net.parameters(), lr=1e-3, fused=True))
    replay = graphed_step(cnn, x, y, True)
    for name, fn in (("eager", lambda: step(x, y)), ("graphed", replay)):
        for _ in range(3):
            fn()
        sync()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fn()
            sync()
        print(f"PyTorch cnn {name} step, 10 steps:")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=40, max_name_column_width=90))


def main():
    torch.manual_seed(1)
    if sys.argv[1:] == ["profile"]:
        profile_cnn()
        return
    if sys.argv[1:] == ["tiny"]:
        print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name(DEV),
                          "tiny": bench_tiny()}))
        return
    flat = (torch.rand(128, 784, device=DEV), torch.randint(0, 10, (128,), device=DEV))
    images = (torch.rand(128, 1, 28, 28, device=DEV), torch.randint(0, 10, (128,), device=DEV))
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(DEV),
           "tiny": bench_tiny(), "mlp": bench_step(mlp, *flat), "cnn": bench_step(cnn, *images)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

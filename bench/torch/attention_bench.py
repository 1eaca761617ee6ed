#!/usr/bin/env python3
"""bench/torch/attention_bench.py — the PyTorch side of bench/bench_attention.cpp.

    python3 attention_bench.py

On cuda:0, PyTorch's default F.scaled_dot_product_attention (whichever backend it picks; the
enabled backends are reported) on bf16 [B, H, L, D] tensors, timed as bench_attention:
forward under no_grad, and forward + backward (out.backward(g), the inputs' .grad reset to
None first), ms per call = median of
blocks of calls with torch.cuda.synchronize() around each block; backward = the difference.
TFLOP/s count 4·B·H·L·S·D for the forward (halved when causal) and 2.5 times that for the
backward. Peak memory: torch.cuda.max_memory_allocated over one forward + backward, beyond
the inputs, at sequence lengths 4k, 16k, 64k (B 1, H 16, D 128, causal).

Prints one JSON object on the last line of stdout.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_bench import DEV, block_times, sync  # noqa: E402

CONFIGS = [("b4_h16_s4096_d128", 4, 16, 4096, 128, False),
           ("b4_h16_s4096_d128_causal", 4, 16, 4096, 128, True),
           ("b4_h32_s4096_d64", 4, 32, 4096, 64, False)]
MEMORY_SEQS = [4096, 16384, 65536]


def flops_fwd(b, h, s, d, causal):
    f = 4.0 * b * h * s * s * d
    return f / 2 if causal else f


def bench_config(b, h, s, d, causal):
    g = torch.Generator(device=DEV).manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    grad = torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, generator=g)

    def fwd():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def fwd_bwd():
        q.grad = k.grad = v.grad = None  # as bench_attention: no accumulation
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.backward(grad)

    f_ms = block_times(fwd, 3, 7, 5)[0]
    fb_ms = block_times(fwd_bwd, 3, 7, 5)[0]
    b_ms = fb_ms - f_ms
    ff = flops_fwd(b, h, s, d, causal)
    return {"fwd_ms": f_ms, "bwd_ms": b_ms, "fwd_tflops": ff / f_ms / 1e9,
            "bwd_tflops": 2.5 * ff / b_ms / 1e9}


def peak_memory(s, b=1, h=16, d=128):
    try:
        q, k, v = (torch.randn(b, h, s, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        sync()
        torch.cuda.reset_peak_memory_stats(DEV)
        base = torch.cuda.memory_allocated(DEV)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(torch.ones_like(out))
        sync()
        peak = torch.cuda.max_memory_allocated(DEV) - base
        del q, k, v, out
        torch.cuda.empty_cache()
        return peak
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None


def main():
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(DEV),
           "cudnn": torch.backends.cudnn.version(),
           "backends": {"cudnn": torch.backends.cuda.cudnn_sdp_enabled(),
                        "flash": torch.backends.cuda.flash_sdp_enabled(),
                        "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled()}}
    for name, b, h, s, d, causal in CONFIGS:
        res[name] = bench_config(b, h, s, d, causal)
        print(name, res[name], file=sys.stderr)
    res["memory"] = {str(s): peak_memory(s) for s in MEMORY_SEQS}
    print(json.dumps(res))


if __name__ == "__main__":
    main()

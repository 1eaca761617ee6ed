#!/usr/bin/env python3
"""bench/torch/gpt2_bench.py — the PyTorch side of bench/bench_gpt2.cpp: GPT-2 training, eager
and torch.compile.

    python3 gpt2_bench.py --data TOKENS.bin [--device cuda|cpu] [--small] [--layers 12 --d 768
        --heads 12 --B 16 --T 1024 --vocab 50304] [--steps 200] [--warmup-steps 20]
        [--time-steps 20] [--time-warmup 5] [--split-steps 10] [--precision bf16|f32]
        [--mode eager|compile|both] [--threads N] [--combined]

The same model as bench_gpt2 (nanoGPT's layout and names: transformer.wte/wpe/h.N.ln_1/
attn.c_attn/attn.c_proj/ln_2/mlp.c_fc/mlp.c_proj/ln_f, head tied to wte), GPT-2's init (N(0,
0.02), c_proj weights 0.02/sqrt(2·layers), biases 0), F.scaled_dot_product_attention(is_causal)
(PyTorch < 2.0 has none: the composed masked softmax instead, said in the output), GELU tanh,
forward and loss under torch.autocast(bf16), cross_entropy, clip_grad_norm_(1.0), AdamW (lr 6e-4,
betas 0.9/0.95, eps 1e-8, fused on CUDA) with weight decay 0.1 on the 2-D tensors and 0 on the
rest, LambdaLR linear warm-up. Batches: window i (wrapping) of B·(T+1) tokens of llm.c's token
file, inputs and targets shifted by one. Each mode trains --steps steps (the loss curve), then
after --time-warmup steps resets the peak memory statistics and times --time-steps steps one by
one (synchronised); the forward / backward / optimizer split comes from --split-steps further
steps synchronised between phases. FLOPs per token: 6·N + 12·L·T·d, N without wpe (nanoGPT's).

Prints one JSON line per mode ({"bench": "gpt2", "impl": "torch_eager", ...}); with --combined
(how bench_gpt2 runs it) only one final line {"torch": ..., "results": [those lines]}.
"""
import argparse
import gc
import json
import math
import statistics
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONTEXT = 1024  # rows of wpe
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.d, self.heads = d, heads

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        q, k, v = (t.view(B, T, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        if HAVE_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch 1.x: the composed form
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, d))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(a.vocab, a.d), wpe=nn.Embedding(CONTEXT, a.d),
            h=nn.ModuleList([Block(a.d, a.heads) for _ in range(a.layers)]),
            ln_f=nn.LayerNorm(a.d)))
        self.lm_head = nn.Linear(a.d, a.vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT
        proj_std = 0.02 / math.sqrt(2 * a.layers)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, proj_std if name.endswith("c_proj.weight") else 0.02)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        t = self.transformer
        pos = torch.arange(idx.size(1), device=idx.device)
        x = t.wte(idx) + t.wpe(pos)
        for block in t.h:
            x = block(x)
        return self.lm_head(t.ln_f(x))


def read_tokens(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        if header[0] != 20240520 or header[1] != 1 or header[2] <= 0:
            sys.exit(f"{path}: not an llm.c token file (make one with bench/gpt2_data.py)")
        data = f.read(2 * header[2])
    if len(data) != 2 * header[2]:
        sys.exit(f"{path}: fewer tokens than its header says")
    import array
    tokens = array.array("H")
    tokens.frombytes(data)
    if sys.byteorder != "little":
        tokens.byteswap()
    return torch.tensor(tokens, dtype=torch.int64)


def batch(tokens, step, B, T):
    window = B * (T + 1)
    start = (step % (tokens.numel() // window)) * window
    rows = tokens[start:start + window].view(B, T + 1)
    return rows[:, :T].contiguous(), rows[:, 1:].contiguous()


class Trainer:
    def __init__(self, a, dev, compiled):
        torch.manual_seed(a.seed)
        self.model = GPT2(a).to(dev)
        params = list(self.model.parameters())  # the tied weight once
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
        kwargs = dict(lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
        self.fused = False
        if dev.type == "cuda":
            try:
                self.opt = torch.optim.AdamW(groups, fused=True, **kwargs)
                self.fused = True
            except (TypeError, RuntimeError):
                self.opt = torch.optim.AdamW(groups, **kwargs)
        else:
            self.opt = torch.optim.AdamW(groups, **kwargs)
        warmup = max(a.warmup_steps, 1)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: min(1.0, (s + 1) / warmup))
        self.params = params
        self.forward = torch.compile(self.model) if compiled else self.model
        self.autocast = a.precision == "bf16"
        self.dev = dev

    def step(self, x, y, mark=None):
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=self.autocast):
            logits = self.forward(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        if mark:
            mark(0)
        loss.backward()
        if mark:
            mark(1)
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.sched.step()
        if mark:
            mark(2)
        return loss


def run(a, tokens, dev, compiled):
    impl = "torch_compile" if compiled else "torch_eager"
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    gc.collect()  # the previous mode's model and optimizer, then their cached blocks
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    tr = Trainer(a, dev, compiled)
    losses = []
    for i in range(a.steps):
        x, y = batch(tokens, i, a.B, a.T)
        losses.append(tr.step(x.to(dev), y.to(dev)).item())
        if i == 0 or (i + 1) % 50 == 0 or i + 1 == a.steps:
            print(f"gpt2_bench: {impl} step {i + 1} loss {losses[-1]:.4f}", file=sys.stderr,
                  flush=True)
    batches = [batch(tokens, a.steps + i, a.B, a.T)
               for i in range(a.time_warmup + a.time_steps + a.split_steps)]
    it = iter(batches)
    for _ in range(a.time_warmup):
        x, y = next(it)
        tr.step(x.to(dev), y.to(dev))
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    ms = []
    for _ in range(a.time_steps):
        x, y = next(it)
        sync()
        t0 = time.perf_counter()
        tr.step(x.to(dev), y.to(dev))
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
    peak_alloc = torch.cuda.max_memory_allocated(dev) / 1e9 if dev.type == "cuda" else None
    peak_resv = torch.cuda.max_memory_reserved(dev) / 1e9 if dev.type == "cuda" else None
    phase = [[], [], []]
    last = [0.0]

    def mark(p):
        sync()
        now = time.perf_counter()
        phase[p].append((now - last[0]) * 1e3)
        last[0] = now

    for _ in range(a.split_steps):
        x, y = next(it)
        x, y = x.to(dev), y.to(dev)
        sync()
        last[0] = time.perf_counter()
        tr.step(x, y, mark)

    n_params = sum(p.numel() for p in tr.params)
    n_no_wpe = n_params - tr.model.transformer.wpe.weight.numel()
    flops_per_token = 6 * n_no_wpe + 12 * a.layers * a.T * a.d
    ms_step = statistics.median(ms)
    tps = a.B * a.T / (ms_step * 1e-3)
    med = lambda v: statistics.median(v) if v else None  # noqa: E731
    config = "small" if a.small else "custom"
    if (a.layers, a.d, a.heads, a.T, a.vocab) == (12, 768, 12, 1024, 50304):
        config = "gpt2_124M"
    return {"bench": "gpt2", "impl": impl, "device": a.device, "config": config,
            "layers": a.layers, "d": a.d, "heads": a.heads, "B": a.B, "T": a.T, "vocab": a.vocab,
            "params": n_params, "precision": a.precision, "tokens_per_s": tps, "ms_step": ms_step,
            "fwd_ms": med(phase[0]), "bwd_ms": med(phase[1]), "opt_ms": med(phase[2]),
            "tflops": flops_per_token * tps / 1e12, "peak_allocated_gb": peak_alloc,
            "peak_reserved_gb": peak_resv, "loss_first": losses[0], "loss_last": losses[-1],
            "steps": len(losses), "torch": torch.__version__, "fused_adamw": tr.fused,
            "sdpa": "F.scaled_dot_product_attention" if HAVE_SDPA else "composed (no F.sdpa)",
            "threads": torch.get_num_threads()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--mode", choices=["eager", "compile", "both"], default="both")
    ap.add_argument("--small", action="store_true", help="4 layers, d 256, 4 heads, B 8, T 256")
    for flag, default in (("layers", 12), ("d", 768), ("heads", 12), ("B", 16), ("T", 1024),
                          ("vocab", 50304), ("steps", 200), ("warmup-steps", 20),
                          ("time-steps", 20), ("time-warmup", 5), ("split-steps", 10),
                          ("threads", 0), ("seed", 0)):
        ap.add_argument("--" + flag, type=int, default=None if flag in (
            "layers", "d", "heads", "B", "T") else default)
    ap.add_argument("--precision", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--combined", action="store_true")
    a = ap.parse_args()
    base = dict(layers=4, d=256, heads=4, B=8, T=256) if a.small else dict(
        layers=12, d=768, heads=12, B=16, T=1024)
    for k, v in base.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device("cuda:0" if a.device == "cuda" else "cpu")
    tokens = read_tokens(a.data)
    results = []
    modes = ["eager", "compile"] if a.mode == "both" else [a.mode]
    for mode in modes:
        if mode == "compile" and not hasattr(torch, "compile"):
            print(f"gpt2_bench: torch.compile needs PyTorch 2 (this is {torch.__version__}); "
                  "skipped", file=sys.stderr)
            continue
        r = run(a, tokens, dev, mode == "compile")
        results.append(r)
        if not a.combined:
            print(json.dumps(r), flush=True)
    if a.combined:
        print(json.dumps({"torch": torch.__version__, "device": a.device, "results": results}),
              flush=True)


if __name__ == "__main__":
    main()

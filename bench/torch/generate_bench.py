#!/usr/bin/env python3
"""bench/torch/generate_bench.py — the transformers side of bench/bench_generate.cpp.

    python3 generate_bench.py --model DIR --new 256 --batches 1,16

DIR is the GPT-2 folder bench_generate saved with models::save_pretrained (config.json,
model.safetensors), with prompt.json (the prompt ids) and ember_logits.safetensors (ember's f32
logits of the prompt). Loads it with transformers' GPT2LMHeadModel.from_pretrained (the check
that transformers reads ember's saved model), compares its f32 logits with ember's, then times
greedy generate() in bf16 (min_new_tokens = max_new_tokens, so every run makes all the tokens)
at each batch size. Prints one JSON line.
"""
import argparse
import json
import time

import torch
from safetensors.torch import load_file
from transformers import GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--new", type=int, default=256)
ap.add_argument("--batches", default="1,16")
a = ap.parse_args()

model = GPT2LMHeadModel.from_pretrained(a.model).cuda().eval()
ids = torch.tensor(json.load(open(a.model + "/prompt.json")), device="cuda").reshape(1, -1)
with torch.no_grad():
    logits = model(ids).logits[0].float()
ember = load_file(a.model + "/ember_logits.safetensors")["logits"].cuda()
diff = (logits - ember).abs().max().item()
model = model.to(torch.bfloat16)
results = []
for B in [int(b) for b in a.batches.split(",")]:
    x = ids.repeat(B, 1)
    mask = torch.ones_like(x)
    kw = dict(attention_mask=mask, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        model.generate(x, max_new_tokens=8, min_new_tokens=8, **kw)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(x, max_new_tokens=a.new, min_new_tokens=a.new, **kw)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    assert out.shape[1] == ids.shape[1] + a.new
    results.append({"batch": B, "tokens_per_s": B * a.new / dt, "ms_per_token": 1e3 * dt / a.new})
print(json.dumps({"logits_max_abs_diff": diff, "results": results,
                  "transformers": __import__("transformers").__version__}))

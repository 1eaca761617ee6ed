#!/usr/bin/env python3
"""bench/torch/pretrained_bench.py — full-size random models made by transformers, for
bench/bench_generate.cpp's --hf mode (issue 33's checks on the H200).

    python3 pretrained_bench.py --arch gpt2|llama1b --out DIR --prompt 128 --new 256

Makes the model with transformers from its config (GPT-2 124M in f32; a Llama 3.2 1B shaped
model in bf16: 16 layers, width 2048, 32 heads over 8 key heads, SwiGLU 8192, vocabulary
128256, tied embeddings, llama3 rope scaling), random weights (seed 0), save_pretrained into
DIR, writes the logits of the prompt (ids (i * 7919 + 13) % vocab) to DIR/hf_logits.safetensors
(`logits`: the model in its file's dtype; `logits_f32` and `logits_bf16`: the same weights
loaded by from_pretrained in f32 and in bf16), then times greedy generate() at batch 1 in bf16
(all new tokens made). Prints one JSON line.
"""
import argparse
import json
import os
import time

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--arch", required=True, choices=["gpt2", "llama1b"])
ap.add_argument("--out", required=True)
ap.add_argument("--prompt", type=int, default=128)
ap.add_argument("--new", type=int, default=256)
a = ap.parse_args()

torch.manual_seed(0)
if a.arch == "gpt2":
    Model, config, dtype = GPT2LMHeadModel, GPT2Config(), torch.float32
else:
    Model, dtype = LlamaForCausalLM, torch.bfloat16
    config = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                         num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=64, max_position_embeddings=131072, rope_theta=500000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 8192},
                         tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001)
# Made in f32 and saved in its dtype; then read back with from_pretrained as a user would (a
# model cast with .to(bf16) would also round its rotary frequencies, which from_pretrained
# keeps in f32).
with torch.device("cuda"):
    made = Model(config)
made.to(dtype).save_pretrained(a.out)
del made
os.makedirs(a.out, exist_ok=True)
vocab = config.vocab_size
ids = torch.tensor([(i * 7919 + 13) % vocab for i in range(a.prompt)], device="cuda")[None]
with torch.no_grad():
    f32 = Model.from_pretrained(a.out, dtype=torch.float32).cuda().eval()
    logits_f32 = f32(ids).logits[0].float()
    del f32
    if dtype != torch.bfloat16:  # the file's dtype too, besides f32 and bf16
        logits = Model.from_pretrained(a.out, dtype=dtype).cuda().eval()(ids).logits[0].float()
    model = Model.from_pretrained(a.out, dtype=torch.bfloat16).cuda().eval()
    logits_bf16 = model(ids).logits[0].float()
    if dtype == torch.bfloat16:
        logits = logits_bf16
save_file({"logits": logits.cpu().contiguous(), "logits_f32": logits_f32.cpu().contiguous(),
           "logits_bf16": logits_bf16.cpu().contiguous()}, a.out + "/hf_logits.safetensors")
params = sum(p.numel() for p in model.parameters())
kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, pad_token_id=0)
with torch.no_grad():
    model.generate(ids, max_new_tokens=8, min_new_tokens=8, **kw)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(ids, max_new_tokens=a.new, min_new_tokens=a.new, **kw)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
assert out.shape[1] == ids.shape[1] + a.new
print(json.dumps({"arch": a.arch, "params": params, "weight_bytes_bf16": 2 * params,
                  "tokens_per_s": a.new / dt, "ms_per_token": 1e3 * dt / a.new,
                  "transformers": __import__("transformers").__version__}))

#!/usr/bin/env python3
"""tests/gen_lm_fixtures.py — the language-model fixtures in tests/data/lm (issue 33).

    python3 tests/gen_lm_fixtures.py /usr/share/common-licenses/GPL-3 tests/data/lm

Needs torch, transformers, tokenizers and safetensors (the GPU machine has them; Debian
here does not). Everything is seeded, so a rerun writes the same tokenizers and weights.

It writes, under OUT:
  gpt2_tok/tokenizer.json    byte-level BPE with GPT-2's pre-tokenisation, trained on CORPUS
  llama_tok/tokenizer.json   byte-level BPE with Llama-3's split pattern and ignore_merges
  tokenizer_cases.json       every line of awkward.txt (and the whole file) with the ids the
                             `tokenizers` library gives, with and without special tokens
  gpt2/                      GPT2LMHeadModel, 2 layers, f32, tied head (no lm_head.weight)
  llama/                     LlamaForCausalLM, 2 layers, GQA, llama3 rope scaling, bf16,
                             sharded (model.safetensors.index.json), untied head
  llama_tied/                LlamaForCausalLM, 1 layer, MHA, plain rope, f32, tied head
  expected.json              per model: prompts (ids), greedy continuations
  expected.safetensors       per model and prompt: the f32 logits [T, vocab]

The weights are drawn wider than transformers' default (initializer_range 0.2, norms
perturbed) so the logits separate and a wrong name, transpose or rope would show.
"""
import copy
import json
import os
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

corpus_path, out = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
awkward = open(os.path.join(here, "data", "lm", "awkward.txt"), encoding="utf-8", newline="").read()
corpus = open(corpus_path, encoding="utf-8").read()
train_lines = corpus.splitlines() + awkward.splitlines()

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def train(pre, specials, vocab, ignore_merges):
    try:
        model = models.BPE(ignore_merges=ignore_merges)
    except TypeError:  # older tokenizers
        assert not ignore_merges, "this tokenizers has no ignore_merges"
        model = models.BPE()
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_lines, trainer)
    return tok


gpt2_tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"], 640, False)
gpt2_tok.post_processor = processors.ByteLevel(trim_offsets=False)
llama_tok = train(
    pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
    ["<|begin_of_text|>", "<|end_of_text|>"], 720, True)
bos = llama_tok.token_to_id("<|begin_of_text|>")
llama_tok.post_processor = processors.TemplateProcessing(
    single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
    special_tokens=[("<|begin_of_text|>", bos)])

for name, tok in (("gpt2_tok", gpt2_tok), ("llama_tok", llama_tok)):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    tok.save(os.path.join(out, name, "tokenizer.json"))

texts = awkward.split("\n")[:-1] + [awkward, "", " ", "\n\n", "a  b", "'S'LL"]
cases = {}
for name, tok in (("gpt2_tok", gpt2_tok), ("llama_tok", llama_tok)):
    rows = []
    for t in texts:
        plain = tok.encode(t, add_special_tokens=False).ids
        special = tok.encode(t, add_special_tokens=True).ids
        rows.append({"text": t, "ids": plain, "ids_special": special,
                     "decoded": tok.decode(plain, skip_special_tokens=False)})
    cases[name] = rows
with open(os.path.join(out, "tokenizer_cases.json"), "w", encoding="utf-8") as f:
    json.dump(cases, f, ensure_ascii=False, indent=0)


def perturb_norms(model, gen):
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "ln" in n or "norm" in n:
                p.add_(0.3 * torch.randn(p.shape, generator=gen))


def greedy(model, ids, n):
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq])).logits[0, -1]
            seq.append(int(torch.argmax(logits)))
    return seq[len(ids):]


prompts = {"gpt2": ["The quick brown fox", "Hello, world! It's"],
           "llama": ["The quick brown fox", "Numbers: 42 and café"],
           "llama_tied": ["The quick brown fox"]}
expected, tensors = {}, {}
gen = torch.Generator().manual_seed(33)

torch.manual_seed(0)
eot = gpt2_tok.token_to_id("<|endoftext|>")
gcfg = GPT2Config(vocab_size=gpt2_tok.get_vocab_size(), n_positions=64, n_embd=32, n_layer=2,
                  n_head=4, initializer_range=0.2, bos_token_id=eot, eos_token_id=eot,
                  activation_function="gelu_new", layer_norm_epsilon=1e-5)
gpt2 = GPT2LMHeadModel(gcfg).eval()
perturb_norms(gpt2, gen)
gpt2.save_pretrained(os.path.join(out, "gpt2"), safe_serialization=True)

torch.manual_seed(1)
eos = llama_tok.token_to_id("<|end_of_text|>")
lcfg = LlamaConfig(vocab_size=llama_tok.get_vocab_size(), hidden_size=64, intermediate_size=96,
                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                   max_position_embeddings=128, rope_theta=500000.0, rms_norm_eps=1e-5,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
                   tie_word_embeddings=False, initializer_range=0.2, bos_token_id=bos,
                   eos_token_id=eos, attention_bias=False, mlp_bias=False)
llama = LlamaForCausalLM(lcfg).eval()
perturb_norms(llama, gen)
with torch.no_grad():  # the weights bf16 values, the model f32: logits in f32
    for p in llama.parameters():
        p.copy_(p.to(torch.bfloat16).float())
# Saved from a bf16 copy: casting `llama` itself to bf16 and back would round its rotary
# inv_freq buffer to bf16 too, and the logits would no longer be those of the checkpoint.
copy.deepcopy(llama).to(torch.bfloat16).save_pretrained(
    os.path.join(out, "llama"), safe_serialization=True, max_shard_size="150KB")

torch.manual_seed(2)
tcfg = LlamaConfig(vocab_size=llama_tok.get_vocab_size(), hidden_size=32, intermediate_size=64,
                   num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4,
                   max_position_embeddings=64, rope_theta=10000.0, rms_norm_eps=1e-6,
                   tie_word_embeddings=True, initializer_range=0.2, bos_token_id=bos,
                   eos_token_id=eos)
llama_tied = LlamaForCausalLM(tcfg).eval()
perturb_norms(llama_tied, gen)
llama_tied.save_pretrained(os.path.join(out, "llama_tied"), safe_serialization=True)

for name, model, tok in (("gpt2", gpt2, gpt2_tok), ("llama", llama, llama_tok),
                         ("llama_tied", llama_tied, llama_tok)):
    rows = []
    for i, p in enumerate(prompts[name]):
        ids = tok.encode(p, add_special_tokens=True).ids
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().contiguous()
        tensors[f"{name}.logits.{i}"] = logits
        rows.append({"prompt": p, "ids": ids, "greedy": greedy(model, ids, 12)})
    expected[name] = rows
save_file(tensors, os.path.join(out, "expected.safetensors"))
with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
    json.dump(expected, f, ensure_ascii=False, indent=1)
for root, _, files in os.walk(out):
    for fn in sorted(files):
        print(os.path.join(root, fn), os.path.getsize(os.path.join(root, fn)))

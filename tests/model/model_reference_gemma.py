#!/usr/bin/env python3
"""model_reference_gemma.py: the independent reference for the model
runtime's Gemma 3 tests. Runs Gemma 3 270M from the same GGUF file
(models/gemma-3-270m-q4_k_m.gguf) with PyTorch + Hugging Face transformers
(gguf_file=, CPU, float32: the weights dequantized by the gguf package,
the model computed in float32) and writes the golden files that
tests/model/test_model_gemma.c compares against on every run, so CI needs none of
these packages:

  tests/model/data/gemma_tokenizer_golden.txt  for each text: the text (escaped)
                                         and its token ids from transformers'
                                         GGUF tokenizer (Hugging Face
                                         tokenizers), special tokens parsed
  tests/model/data/gemma_logits_golden.txt     for each prompt: token ids, then per
                                         position max|logit|, the top-K ids
                                         and logits, and the logits of every
                                         STRIDE-th vocabulary id

The long prompt (past the 512-token sliding window, so that which layers
are local matters) keeps only its last LONG_KEEP positions (L lines give the
first position kept).

Usage: python3 tests/model/model_reference_gemma.py [models/gemma-3-270m-q4_k_m.gguf]
Needs: torch, transformers, accelerate, gguf, numpy (none in CI)."""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
OUT = os.path.join(ROOT, "tests", "model", "data")
TOPK = 16
STRIDE = 4099  # 64 entries of the 262144-token vocabulary
LONG_KEEP = 2

TEXTS = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
    "Café déjà vu: naïve façades, Zürich's Straße, 東京タワー, Москва, 🙂 emoji — and ‘smart quotes’.",
    "In 1813, 2,500 copies sold at 18s.  Numbers: 3.14159, 1e-5, 0x1F; tabs\tand\nnewlines\n\n  indented  ",
    "<start_of_turn>user\nWhat's 12+30? I'm sure they'll say we've done it.<end_of_turn>\n<start_of_turn>model\n",
    "    def f(x):\n        return x**2  # comment\n\n\n\n<div>html</div>   trailing   ",
    " leading space, \u0000 NUL, \x7f DEL, \U0001F600\U0001F600 and a rare script: \u16A0\u16A1\u16A2",
]
PROMPTS = [
    "The capital of France is",
    "<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
    "Mr. Darcy looked at Elizabeth, and for 3 minutes said nothing; then:",
]


def esc(s):
    return s.encode("unicode_escape").decode("ascii")


def write_rows(fo, logits):
    for row in logits:
        top = np.argsort(-row)[:TOPK]
        fo.write("M %.6g\n" % np.abs(row).max())
        fo.write("K " + " ".join("%d:%.6g" % (i, row[i]) for i in top) + "\n")
        fo.write("S " + " ".join("%.5g" % v for v in row[::STRIDE]) + "\n")


def main():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    d, name = os.path.split(os.path.abspath(MODEL))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "gemma_tokenizer_golden.txt"), "w") as fo:
        fo.write("# text (unicode-escaped), then its token ids (transformers' GGUF tokenizer, no BOS)\n")
        for t in TEXTS:
            ids = tok.encode(t, add_special_tokens=False)
            fo.write("T " + esc(t) + "\n")
            fo.write("I " + " ".join(map(str, ids)) + "\n")
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
    model.eval()
    novel = open(os.path.join(ROOT, "data", "pride_and_prejudice.txt"), encoding="utf-8").read()
    long_ids = tok.encode(novel[20000:23000], add_special_tokens=True)[:600]
    with open(os.path.join(OUT, "gemma_logits_golden.txt"), "w") as fo:
        fo.write("# transformers %s, torch %s, float32 CPU; K=%d STRIDE=%d\n" % (
            __import__("transformers").__version__, torch.__version__, TOPK, STRIDE))
        fo.write("# per prompt: P ids (BOS first); L first position kept; per position: M max|logit|, "
                 "K top ids:logits, S logits of ids 0,STRIDE,...\n")
        for p in PROMPTS + [None]:
            ids = tok.encode(p, add_special_tokens=True) if p is not None else long_ids
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0].double().numpy()
            keep = 0 if p is not None else len(ids) - LONG_KEEP
            fo.write("P " + " ".join(map(str, ids)) + "\n")
            fo.write("L %d\n" % keep)
            write_rows(fo, logits[keep:])
            print("prompt %r: %d tokens, argmax of last %d (%r)" % ((p or "novel")[:30], len(ids),
                  int(np.argmax(logits[-1])), tok.decode([int(np.argmax(logits[-1]))])))


if __name__ == "__main__":
    main()

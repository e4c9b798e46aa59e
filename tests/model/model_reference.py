#!/usr/bin/env python3
"""model_reference.py: the independent reference for the model runtime's
tests. Runs SmolLM2-135M-Instruct from the same GGUF file with
PyTorch + Hugging Face transformers (gguf_file=, CPU, float32) and writes
the golden files that tests/test_model_*.c compare against on every run, so
CI needs none of these packages:

  tests/model/data/tokenizer_golden.txt  for each text: the text (escaped) and its
                                   token ids from Hugging Face tokenizers
  tests/model/data/logits_golden.txt     for each prompt: token ids, then per
                                   position max|logit|, the top-K ids and
                                   logits, and the logits of every STRIDE-th
                                   vocabulary id

The tokenizer reference is Hugging Face `tokenizers` (Rust) built from the
GGUF vocabulary and merges with SmolLM2's own pre-tokenizer (tokenizer.json
of HuggingFaceTB/SmolLM2-135M-Instruct: Digits(individual_digits=True) then
ByteLevel(add_prefix_space=False, use_regex=True)); transformers' GGUF
tokenizer conversion is checked against it and its ids are used when equal.

Usage: python3 tests/model/model_reference.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]
Needs: torch, transformers, gguf, numpy, tokenizers."""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests", "model", "data")
TOPK = 16
STRIDE = 97

TEXTS = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
    "Café déjà vu: naïve façades, Zürich's Straße, 東京タワー, Москва, 🙂 emoji — and ‘smart quotes’.",
    "In 1813, 2,500 copies sold at 18s.  Numbers: 3.14159, 1e-5, 0x1F; tabs\tand\nnewlines\n\n  indented  ",
    "<|im_start|>user\nWhat's 12+30? I'm sure they'll say we've done it.<|im_end|>\n",
    "    def f(x):\n        return x**2  # comment\n",
]
PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "Mr. Darcy looked at Elizabeth, and for 3 minutes said nothing; then:",
]


def esc(s):
    return s.encode("unicode_escape").decode("ascii")


def hf_tokenizer(gguf_path):
    from gguf import GGUFReader
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, AddedToken

    r = GGUFReader(gguf_path)
    f = r.fields
    def strs(name):
        fld = f[name]
        return [bytes(fld.parts[i]).decode("utf-8") for i in fld.data]
    tokens = strs("tokenizer.ggml.tokens")
    merges = strs("tokenizer.ggml.merges")
    ttype = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if ttype[i] in (3, 4)])
    return tok


def main():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    d, name = os.path.split(os.path.abspath(MODEL))
    ref_tok = hf_tokenizer(MODEL)
    tf_tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tokenizer_golden.txt"), "w") as fo:
        fo.write("# text (unicode-escaped), then its token ids (tokenizers, SmolLM2's pre-tokenizer)\n")
        for t in TEXTS:
            ids = ref_tok.encode(t, add_special_tokens=False).ids
            tf_ids = tf_tok.encode(t, add_special_tokens=False)
            if tf_ids != ids:
                print("note: transformers' GGUF tokenizer differs on %r:\n  %s\n  %s" % (t[:40], tf_ids, ids))
            fo.write("T " + esc(t) + "\n")
            fo.write("I " + " ".join(map(str, ids)) + "\n")
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, torch_dtype=torch.float32)
    model.eval()
    with open(os.path.join(OUT, "logits_golden.txt"), "w") as fo:
        fo.write("# transformers %s, torch %s, float32 CPU; K=%d STRIDE=%d\n" % (
            __import__("transformers").__version__, torch.__version__, TOPK, STRIDE))
        fo.write("# per prompt: P ids; per position: M max|logit|, K top ids:logits, S logits of ids 0,STRIDE,...\n")
        for p in PROMPTS:
            ids = ref_tok.encode(p, add_special_tokens=False).ids
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0].double().numpy()
            fo.write("P " + " ".join(map(str, ids)) + "\n")
            for row in logits:
                top = np.argsort(-row)[:TOPK]
                fo.write("M %.6g\n" % np.abs(row).max())
                fo.write("K " + " ".join("%d:%.6g" % (i, row[i]) for i in top) + "\n")
                fo.write("S " + " ".join("%.5g" % v for v in row[::STRIDE]) + "\n")
            print("prompt %r: %d tokens, argmax of last %d" % (p[:30], len(ids), int(np.argmax(logits[-1]))))


if __name__ == "__main__":
    main()

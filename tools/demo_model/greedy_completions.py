#!/usr/bin/env python3
"""Greedy completions of code prompts, computed by `tetra logits` (the CPU reference forward)
one token at a time, with the checkpoint's own tokenizer through `tetra tokenize`/`detokenize`.
Each step re-runs the whole prefix: slow but needs nothing beyond the tetra binary.

usage: greedy_completions.py TETRA MODEL_DIR [--tokens N] [--no-bos] [--kv-cache-dtype D] [--indexer-cache-dtype D] PROMPT...
Prints one Markdown section per prompt: the prompt and its completion in a code block.
"""
import argparse
import json
import os
import struct
import subprocess
import tempfile


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def next_token(args, ids, work):
    tokens, out = os.path.join(work, "ids.json"), os.path.join(work, "logits.f32")
    with open(tokens, "w") as f:
        json.dump([ids], f)
    run([args.tetra, "logits", "--model", args.model, "--tokens-file", tokens, "--out", out,
         "--kv-cache-dtype", args.kv_cache_dtype, "--indexer-cache-dtype", args.indexer_cache_dtype])
    data = open(out, "rb").read()
    vocab = len(data) // 4 // len(ids)
    last = struct.unpack(f"<{vocab}f", data[-4 * vocab:])
    return max(range(vocab), key=lambda i: last[i])  # the first of equal maxima, as argmax does


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tetra")
    ap.add_argument("model")
    ap.add_argument("prompts", nargs="+")
    ap.add_argument("--tokens", type=int, default=48)
    # Training windows started anywhere in a file; BOS marks a file's start, where licence
    # headers and docstrings are likely.
    ap.add_argument("--no-bos", action="store_true")
    ap.add_argument("--kv-cache-dtype", default="fp8")
    ap.add_argument("--indexer-cache-dtype", default="fp4")
    args = ap.parse_args()
    tokenizer = os.path.join(args.model, "tokenizer.json")
    config = json.load(open(os.path.join(args.model, "config.json")))
    with tempfile.TemporaryDirectory() as work:
        for prompt in args.prompts:
            ids = ([] if args.no_bos else [config["bos_token_id"]]) + json.loads(run([args.tetra, "tokenize", "--tokenizer", tokenizer,
                                                              "--text", prompt]))
            start = len(ids)
            for _ in range(args.tokens):
                ids.append(next_token(args, ids, work))
                if ids[-1] == config["eos_token_id"]:
                    break
            completion = run([args.tetra, "detokenize", "--tokenizer", tokenizer, "--ids", json.dumps(ids[start:])])
            print(f"prompt `{json.dumps(prompt)}`:\n\n```python\n{prompt}{completion}\n```\n", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Train the Tetra demo model: a small DeepSeek-V4 on Python source code (the standard library
and the packages installed on the GPU machine).

Runs on the GPU machine (torch 2.11, transformers 5.17, tokenizers) in one call of at most
10 minutes. Steps:
  1. byte-level BPE tokenizer (DeepSeek's pre-tokenizer, decoder and chat tokens) trained with
     the `tokenizers` library on those .py files; files whose path (relative to the library
     root) hashes to 0 mod 20 are held out (never seen by the tokenizer or the model);
  2. a DeepseekV4ForCausalLM with every layer kind (sliding-only, CSA, HCA; hash-routed and
     score-routed MoE; mHC) trained for a fixed wall-clock budget (bf16 autocast, AdamW,
     aux-loss-free expert balancing through the router's selection bias as in DeepSeek-V3);
  3. the bf16 checkpoint (save_pretrained, shards < 8 MB), tokenizer.json, tokenizer_config.json,
     held-out token ids, and transformers' float32 per-token log-probs on those ids (CPU, so
     the numbers are deterministic) -> OUT/demo.tar.gz.

usage: train.py OUT_DIR [--train-seconds S]
"""
import argparse
import copy
import hashlib
import json
import math
import os
import site
import sysconfig
import tarfile
import time

import torch
import torch.nn.functional as F
import transformers
from tokenizers import AddedToken, Tokenizer, pre_tokenizers, trainers
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 8192
CONTEXT = 512          # training and evaluation window
HELDOUT_WINDOWS = 16   # windows of held-out ids written out (the CI test uses the first few)
MAX_GPU_WINDOWS = 128  # held-out windows evaluated on the GPU for the model card
MAX_FILE_BYTES = 300_000
MAX_CORPUS_CHARS = 60_000_000
BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
# Tokens of the V4 chat format (src/text/v4_tokens.h, chat_encoding.cpp): added, not special,
# as in DeepSeek's own tokenizer.json.
CHAT_TOKENS = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>",
               "<｜action｜>", "<｜query｜>", "<｜authority｜>", "<｜domain｜>", "<｜title｜>", "<｜read_url｜>"]


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def corpus_files():
    """(root, path) of every .py file of the standard library and the installed packages, in a
    fixed pseudo-random order; generated giants (> MAX_FILE_BYTES) are skipped."""
    roots = [sysconfig.get_paths()["stdlib"]] + site.getsitepackages() + [sysconfig.get_paths()["purelib"]]
    roots = [r for i, r in enumerate(roots) if os.path.isdir(r) and r not in roots[:i]]
    files = []
    for root in roots:
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "dist-packages", "__pycache__"))
            files += [(root, os.path.join(d, n)) for n in sorted(names)
                      if n.endswith(".py") and os.path.getsize(os.path.join(d, n)) <= MAX_FILE_BYTES]
    files.sort(key=lambda f: hashlib.sha1(f[1].encode()).hexdigest())
    return roots, files


def is_heldout(rel_path):
    return int(hashlib.sha1(rel_path.encode()).hexdigest(), 16) % 20 == 0


def read_texts(files):
    train, heldout, total = [], [], 0
    for root, f in files:
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        if text.strip():
            (heldout if is_heldout(os.path.relpath(f, root)) else train).append(text)
            total += len(text)
        if total > MAX_CORPUS_CHARS:
            break
    return train, heldout


def train_tokenizer(texts):
    settings = json.load(open(os.path.join(HERE, "deepseek_tokenizer_settings.json"), encoding="utf-8"))
    empty_bpe = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": {}, "merges": []}
    tok = Tokenizer.from_str(json.dumps({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                                         **settings, "model": empty_bpe}))
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(CHAT_TOKENS), special_tokens=[BOS, EOS, PAD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
                                  min_frequency=2)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in CHAT_TOKENS])
    assert [tok.token_to_id(t) for t in (BOS, EOS, PAD)] == [0, 1, 2]
    return tok


def encode_stream(tok, texts):
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.append(0)  # BOS starts every file
        ids += enc.ids
    return torch.tensor(ids, dtype=torch.long)


def model_config(vocab):
    layers = ["sliding_attention", "sliding_attention", "compressed_sparse_attention",
              "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    return DeepseekV4Config(
        vocab_size=vocab, hidden_size=128, num_hidden_layers=len(layers),
        num_attention_heads=4, num_key_value_heads=1, head_dim=128, partial_rotary_factor=0.5,
        q_lora_rank=128, o_groups=2, o_lora_rank=128,
        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=128,
        index_n_heads=8, index_head_dim=128, index_topk=32, sliding_window=64,
        hc_mult=4, hc_sinkhorn_iters=20, max_position_embeddings=4096,
        scoring_func="sqrtsoftplus", routed_scaling_factor=1.5, swiglu_limit=10.0,
        layer_types=layers, mlp_layer_types=["hash_moe", "hash_moe"] + ["moe"] * (len(layers) - 2),
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 32},
        rope_parameters={"rope_type": "yarn", "factor": 16, "original_max_position_embeddings": 256,
                         "beta_fast": 32, "beta_slow": 1},
        bos_token_id=0, eos_token_id=1, pad_token_id=2, tie_word_embeddings=False,
    )


def fill_routing_buffers(model, cfg, gen):
    # transformers' init leaves the hash table at zero: give every token k distinct experts.
    for name, b in model.named_buffers():
        if name.endswith("tid2eid"):
            rows = torch.rand(b.shape[0], cfg.n_routed_experts, generator=gen).argsort(dim=-1)
            b.copy_(rows[:, : b.shape[1]].to(b.device))


class ExpertBalancer:
    """Aux-loss-free balancing (DeepSeek-V3): nudge each score router's selection bias toward
    under-loaded experts after every step."""

    def __init__(self, model, rate=1e-3):
        self.rate, self.routers, self.loads = rate, [], {}
        for m in model.modules():
            if type(m).__name__ == "DeepseekV4TopKRouter":
                self.routers.append(m)
                m.register_forward_hook(self.record)

    def record(self, module, inputs, output):
        indices = output[2]
        self.loads[id(module)] = torch.bincount(indices.reshape(-1), minlength=module.num_experts).float()

    @torch.no_grad()
    def update(self):
        for r in self.routers:
            load = self.loads.get(id(r))
            if load is not None:
                r.e_score_correction_bias += self.rate * torch.sign(load.mean() - load)


def lr_at(frac, peak, warmup_frac=0.03):
    if frac < warmup_frac:
        return peak * frac / warmup_frac
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (frac - warmup_frac) / (1 - warmup_frac)))))


def train(model, stream, seconds, batch=32, peak_lr=3e-3):
    dev = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    balancer = ExpertBalancer(model)
    gen = torch.Generator().manual_seed(1)
    start, step, smooth = time.time(), 0, None
    model.train()
    while True:
        frac = (time.time() - start) / seconds
        if frac >= 1:
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(frac, peak_lr)
        offs = torch.randint(0, len(stream) - CONTEXT - 1, (batch,), generator=gen)
        x = torch.stack([stream[o:o + CONTEXT] for o in offs.tolist()]).to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        balancer.update()
        step += 1
        smooth = loss.item() if smooth is None else 0.95 * smooth + 0.05 * loss.item()
        if step % 50 == 0 or step <= 3:
            log(f"step {step} loss {loss.item():.3f} smooth {smooth:.3f} lr {opt.param_groups[0]['lr']:.2e} "
                f"tokens {step * batch * CONTEXT / 1e6:.1f}M")
    log(f"trained {step} steps, {step * batch * CONTEXT / 1e6:.1f}M tokens")


@torch.no_grad()
def window_logprobs(model, windows, device):
    """Per window: log p(token t | tokens < t) for t = 1..len-1, in float32."""
    out = []
    for w in windows:
        logits = model(input_ids=torch.tensor([w], device=device), use_cache=False).logits[0].float()
        lp = F.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(w[1:], device=device)[:, None])[:, 0]
        out.append(lp.cpu().double().tolist())
    return out


def perplexity(logprobs):
    flat = [x for w in logprobs for x in w]
    return math.exp(-sum(flat) / len(flat)), len(flat)


@torch.no_grad()
def greedy(model, tok, prompt, n, device):
    ids = [0] + tok.encode(prompt, add_special_tokens=False).ids
    for _ in range(n):
        logits = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0, -1]
        ids.append(int(logits.argmax()))
    return tok.decode(ids[1:])


def round_to_bf16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(b.to(torch.bfloat16).float())


def card_numbers(model, tok, heldout_ids, demo):
    """Perplexity on more of the held-out split (GPU, f32 without TF32) and a few greedy
    completions, for the model card."""
    torch.backends.cuda.matmul.allow_tf32 = False
    gpu_model = model.cuda()
    all_windows = [heldout_ids[i:i + CONTEXT].tolist()
                   for i in range(0, len(heldout_ids) - CONTEXT + 1, CONTEXT)][:MAX_GPU_WINDOWS]
    full_ppl, full_n = perplexity(window_logprobs(gpu_model, all_windows, "cuda"))
    log(f"held-out perplexity, {len(all_windows)} windows (GPU f32): {full_ppl:.4f} over {full_n} tokens")
    with open(os.path.join(demo, "heldout_gpu_windows.json"), "w") as f:
        json.dump({"perplexity": full_ppl, "tokens_scored": full_n, "windows": len(all_windows),
                   "context": CONTEXT}, f)
    for p in ["def fibonacci(n):", "import os\n\ndef ", "class Stack:\n    def __init__(self):"]:
        log("greedy", repr(p), "->", repr(greedy(gpu_model, tok, p, 48, "cuda")))


def smoke_test(model, heldout_ids):
    """Runs the post-training steps on the untrained model first, so a mistake in them costs
    seconds of device time rather than the whole training run."""
    import tempfile
    probe = copy.deepcopy(model).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as d:
        probe.save_pretrained(d, max_shard_size="7MB")
        log("smoke: save_pretrained files", sorted(os.listdir(d)))
    lp = window_logprobs(probe.float(), [heldout_ids[:40].tolist()], "cpu")
    log(f"smoke: untrained perplexity {perplexity(lp)[0]:.1f}")
    probe = copy.deepcopy(model).cuda()
    x = heldout_ids[:2 * 160].view(2, 160).cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = probe(input_ids=x, labels=x, use_cache=False).loss
    loss.backward()
    log(f"smoke: training step ok, loss {loss.item():.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--train-seconds", type=float, default=250)
    args = ap.parse_args()
    log("transformers", transformers.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())
    demo = os.path.join(args.out, "demo")
    bf16_dir = os.path.join(demo, "bf16")
    os.makedirs(bf16_dir, exist_ok=True)

    roots, files = corpus_files()
    train_texts, heldout_texts = read_texts(files)
    log(f"{roots}: {len(train_texts)} train files ({sum(map(len, train_texts)) / 1e6:.1f} MB), "
        f"{len(heldout_texts)} held out ({sum(map(len, heldout_texts)) / 1e6:.1f} MB)")
    tok = train_tokenizer(train_texts)
    tok.save(os.path.join(bf16_dir, "tokenizer.json"))
    with open(os.path.join(bf16_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": BOS, "eos_token": EOS,
                   "pad_token": PAD, "clean_up_tokenization_spaces": False, "model_max_length": 4096,
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=2, ensure_ascii=False)
    train_ids, heldout_ids = encode_stream(tok, train_texts), encode_stream(tok, heldout_texts)
    log(f"tokenizer: vocab {tok.get_vocab_size()}; train {len(train_ids) / 1e6:.2f}M tokens, "
        f"held out {len(heldout_ids) / 1e6:.3f}M tokens")

    vocab = -(-tok.get_vocab_size() // 64) * 64  # the model's vocab: the tokenizer's, rounded up
    cfg = model_config(vocab)
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(cfg)
    fill_routing_buffers(model, cfg, torch.Generator().manual_seed(2))
    log(f"parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")
    smoke_test(model, heldout_ids)
    torch.backends.cuda.matmul.allow_tf32 = True
    model.cuda()
    remaining = args.train_seconds - (time.time() - T0)
    train(model, train_ids, remaining)

    # The checkpoint is bf16; every reference number comes from exactly those values, computed
    # in f32 (a plain .to(bfloat16) would also round the RoPE frequency buffers).
    model = model.cpu().eval()
    round_to_bf16(model)
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(bf16_dir, max_shard_size="7MB")
    torch.set_num_threads(os.cpu_count() or 1)
    windows = [heldout_ids[i * CONTEXT:(i + 1) * CONTEXT].tolist() for i in range(HELDOUT_WINDOWS)]
    with open(os.path.join(demo, "heldout_ids.json"), "w") as f:
        json.dump([t for w in windows for t in w], f)
    lps = window_logprobs(model, windows, "cpu")
    ppl, n = perplexity(lps)
    log(f"held-out perplexity (transformers, f32, CPU): {ppl:.4f} over {n} tokens; "
        f"first 4 windows {perplexity(lps[:4])[0]:.4f}")
    with open(os.path.join(demo, "heldout_reference.json"), "w") as f:
        json.dump({"made_by": f"transformers {transformers.__version__}, torch {torch.__version__}, float32 on CPU",
                   "context": CONTEXT, "scored": "every token after the first of each window",
                   "windows": [{"tokens_scored": len(w), "nll_sum": -sum(w)} for w in lps],
                   "perplexity": ppl, "tokens_scored": n, "logprobs": lps}, f)
    try:
        card_numbers(model, tok, heldout_ids, demo)
    except Exception as e:  # the checkpoint and reference above are what matter; keep them
        log("card numbers failed:", repr(e))

    with tarfile.open(os.path.join(args.out, "demo.tar.gz"), "w:gz") as t:
        t.add(demo, arcname="demo")
    log("wrote", os.path.join(args.out, "demo.tar.gz"))


T0 = time.time()
if __name__ == "__main__":
    main()

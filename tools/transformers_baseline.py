#!/usr/bin/env python3
"""The peer baseline of `tetra bench --synthetic`: the same geometry through transformers'
DeepseekV4ForCausalLM in bf16 (random init, on the GPU), timing a prefill of P tokens and
decode steps at batch 1 continuing that sequence (context P). Prints one JSON object.

bf16 V4-Flash takes about 13 GB per layer (256 experts of 3 x 2048 x 4096), so 20 layers do not
fit one H200: run as many as fit (e.g. 4) and compare with `tetra bench --layers` at the same
count in the same run (scripts/bench-h200.sh does).

usage: transformers_baseline.py --synthetic v4-flash|v4-pro --layers N --prefill P
                                [--decode-steps S] [--json FILE]
Runs on the GPU machine (transformers 5.17, torch 2.11).
"""
import argparse
import inspect
import json
import os
import statistics
import sys
import time

import torch
import transformers
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEOMETRIES = {"v4-flash": "tests/data/v4_flash/config.json", "v4-pro": "tests/data/v4_pro/config.json"}
LAYER_TYPES = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}


def v4_config(published, layers):
    """transformers' config of the published one, cut to its first `layers` layers."""
    p = published
    ratios = p["compress_ratios"][:layers]
    rope = p["rope_scaling"]
    return DeepseekV4Config(
        vocab_size=p["vocab_size"], hidden_size=p["hidden_size"], moe_intermediate_size=p["moe_intermediate_size"],
        num_hidden_layers=layers, num_attention_heads=p["num_attention_heads"],
        num_key_value_heads=p["num_key_value_heads"], head_dim=p["head_dim"],
        partial_rotary_factor=p["qk_rope_head_dim"] / p["head_dim"], q_lora_rank=p["q_lora_rank"],
        num_experts_per_tok=p["num_experts_per_tok"], n_routed_experts=p["n_routed_experts"],
        n_shared_experts=p["n_shared_experts"], scoring_func=p["scoring_func"], norm_topk_prob=p["norm_topk_prob"],
        routed_scaling_factor=p["routed_scaling_factor"], max_position_embeddings=p["max_position_embeddings"],
        rope_theta=p["rope_theta"], compress_rope_theta=p["compress_rope_theta"], hc_mult=p["hc_mult"],
        hc_sinkhorn_iters=p["hc_sinkhorn_iters"], hc_eps=p["hc_eps"], swiglu_limit=p["swiglu_limit"],
        sliding_window=p["sliding_window"], o_groups=p["o_groups"], o_lora_rank=p["o_lora_rank"],
        index_n_heads=p["index_n_heads"], index_head_dim=p["index_head_dim"], index_topk=p["index_topk"],
        rms_norm_eps=p["rms_norm_eps"], tie_word_embeddings=p["tie_word_embeddings"],
        layer_types=[LAYER_TYPES[r] for r in ratios],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
        mlp_layer_types=["hash_moe" if i < p["num_hash_layers"] else "moe" for i in range(layers)],
        rope_parameters={"rope_type": "yarn", "factor": rope["factor"],
                         "original_max_position_embeddings": rope["original_max_position_embeddings"],
                         "beta_fast": rope["beta_fast"], "beta_slow": rope["beta_slow"]},
    )


def randomize_routing(model, cfg, gen):
    """transformers' init leaves the hash table at expert 0: give every token k distinct random
    experts, as a trained model has, so the experts hit are real. The router bias stays at zero,
    as tetra's synthetic one is (a random bias sends a batch's tokens to the same few experts)."""
    for name, b in model.named_buffers():
        if name.endswith("tid2eid"):
            rows = torch.rand(b.shape[0], cfg.n_routed_experts, generator=gen, device=b.device).argsort(dim=-1)
            b.copy_(rows[:, : b.shape[1]])


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", choices=sorted(GEOMETRIES), required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--prefill", type=int, required=True)
    ap.add_argument("--decode-steps", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()

    with open(os.path.join(ROOT, GEOMETRIES[a.synthetic])) as f:
        cfg = v4_config(json.load(f), a.layers)
    torch.manual_seed(1)
    gen = torch.Generator(device="cuda").manual_seed(1)
    torch.set_default_dtype(torch.bfloat16)
    t0 = time.perf_counter()
    with torch.device("cuda"):
        model = DeepseekV4ForCausalLM(cfg)
    model.eval()
    randomize_routing(model, cfg, gen)
    torch.cuda.synchronize()
    build_seconds = time.perf_counter() - t0
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    print(f"transformers {transformers.__version__}: {a.layers} layers, {weight_bytes / 1e9:.1f} GB of bf16 weights "
          f"built in {build_seconds:.1f} s", file=sys.stderr)

    ids = torch.randint(0, cfg.vocab_size, (1, a.prefill), device="cuda", generator=gen)
    # The prefill computes the last token's logits only, as generate() and tetra's server do.
    last_only = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    with torch.inference_mode():
        timed(lambda: model(input_ids=ids[:, : min(a.prefill, 256)], use_cache=True, **last_only))  # warm-up
        prefill, spent = [], 0.0
        while len(prefill) < 3 and spent < 20:
            out, s = timed(lambda: model(input_ids=ids, use_cache=True, **last_only))
            prefill.append(s)
            spent += s
        print(f"prefill {a.prefill} tokens: {statistics.median(prefill):.3f} s", file=sys.stderr)
        cache = out.past_key_values
        del out
        decode = []
        for step in range(a.decode_steps + 1):  # the first step warms up
            token = torch.randint(0, cfg.vocab_size, (1, 1), device="cuda", generator=gen)
            out, s = timed(lambda: model(input_ids=token, past_key_values=cache, use_cache=True))
            cache = out.past_key_values
            if step:
                decode.append(s)
        print(f"decode at context {a.prefill}: {statistics.median(decode) * 1e3:.1f} ms per step", file=sys.stderr)

    result = {
        "transformers": transformers.__version__, "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0), "geometry": a.synthetic, "layers": a.layers, "dtype": "bfloat16",
        "attn_implementation": cfg._attn_implementation,
        "experts_implementation": getattr(cfg, "_experts_implementation", None),
        "weight_bytes": weight_bytes, "build_seconds": build_seconds,
        "prefill_tokens": a.prefill, "prefill_seconds": statistics.median(prefill), "prefill_samples": prefill,
        "prefill_logits": "last token" if last_only else "every token",
        "decode_batch": 1, "decode_context": a.prefill, "decode_step_seconds": statistics.median(decode),
        "decode_samples": decode, "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

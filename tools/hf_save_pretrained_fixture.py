#!/usr/bin/env python3
"""Write a tiny DeepSeek-V4 checkpoint with transformers' own save_pretrained.

Runs on the GPU machine (transformers 5.17, torch 2.11). The output directory is committed
under tests/data/ so that tetra's loader is tested against a real peer's files, not only
against checkpoints tetra wrote itself.

usage: hf_save_pretrained_fixture.py OUT_DIR [--dump-source DIR]
"""
import argparse
import os
import sys
import tarfile

import torch
import transformers
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM


def tiny_config():
    # Small, but every layer kind is present: sliding-only, CSA (ratio 4), HCA (ratio 8 here,
    # 128 in the real model), hash-routed and score-routed MoE, YaRN on the compressed layers.
    return DeepseekV4Config(
        vocab_size=512, hidden_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=1, head_dim=64, partial_rotary_factor=0.25,
        q_lora_rank=32, o_groups=2, o_lora_rank=32,
        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
        index_n_heads=4, index_head_dim=32, index_topk=4, sliding_window=8,
        hc_mult=4, hc_sinkhorn_iters=20, max_position_embeddings=4096,
        layer_types=["sliding_attention", "compressed_sparse_attention",
                     "heavily_compressed_attention", "compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
        rope_parameters={"rope_type": "yarn", "factor": 16, "original_max_position_embeddings": 256,
                         "beta_fast": 32, "beta_slow": 1},
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dump-source")
    args = ap.parse_args()
    print("transformers", transformers.__version__, "torch", torch.__version__)
    if args.dump_source:
        src = os.path.dirname(sys.modules[DeepseekV4Config.__module__].__file__)
        with tarfile.open(os.path.join(args.dump_source, "hf_deepseek_v4_src.tar.gz"), "w:gz") as t:
            t.add(src, arcname="deepseek_v4")
    cfg = tiny_config()
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(cfg).to(torch.bfloat16)
    # transformers' init leaves the hash table and the selection bias at zero: fill them so the
    # fixture's values are distinguishable.
    for name, buf in model.named_buffers():
        if name.endswith("tid2eid"):
            buf.copy_(torch.randint(0, cfg.n_routed_experts, buf.shape))
        elif name.endswith("e_score_correction_bias"):
            buf.copy_(torch.randn(buf.shape) * 0.1)
    model.save_pretrained(args.out)
    from safetensors import safe_open
    for f in sorted(os.listdir(args.out)):
        print("file", f, os.path.getsize(os.path.join(args.out, f)))
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(args.out, f), "pt") as st:
                for k in st.keys():
                    t = st.get_slice(k)
                    print("  ", k, t.get_shape(), t.get_dtype())
    print(open(os.path.join(args.out, "config.json")).read())


if __name__ == "__main__":
    main()

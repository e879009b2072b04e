#!/usr/bin/env python3
"""Golden fixtures for tetra's CPU reference: tiny DeepSeek-V4 checkpoints and transformers' fp32 logits.

Runs on the GPU machine (transformers 5.17, torch 2.11); the model runs on the CPU in float32
(no TF32, deterministic). Writes OUT/golden.tar.gz holding golden/<name>/ with:
  config.json, *.safetensors   the checkpoint (see below)
  tokens.json                  a batch of token-id lists of different lengths
  logits.f32                   transformers' fp32 logits, [seq][pos][vocab] little-endian float32,
                               each sequence run on its own (no padding)

Fixtures:
  dense       save_pretrained (bf16), sqrtsoftplus, sliding / CSA / HCA / CSA, hash layer 0
  sigmoid     save_pretrained (bf16), sigmoid scoring, CSA / HCA(16) / sliding, hash layers 0-1
  softmax     save_pretrained (bf16), softmax scoring, HCA / CSA, no hash layer
  fp8_mxfp4   the dense weights as the official release stores them: official names, legacy
              config.json, FP8 e4m3 128x128 blocks with ue8m0 scales (attention, shared
              expert, indexer wq_b) and MXFP4 experts (e2m1 + ue8m0 per 32); logits of
              transformers run on the dequantized weights
  nvfp4       the dense weights as a ModelOpt NVFP4 export: transformers module names, NVFP4
              (e2m1 + e4m3 per 16 + f32 global) everywhere but wo_a / router / compressors

Weights are well scaled (std 1/sqrt(fan_in), norms near 1, non-zero sinks, position biases,
selection bias and a random hash table) so that every branch moves the logits.

usage: make_golden_fixtures.py OUT_DIR
"""
import copy
import json
import math
import os
import shutil
import struct
import sys
import tarfile
import tempfile

import torch
import transformers
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

VOCAB = 256


def config(scoring, layer_types, mlp_layer_types, rates, scale, limit, topk):
    return DeepseekV4Config(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=len(layer_types),
        num_attention_heads=4, num_key_value_heads=1, head_dim=64, partial_rotary_factor=0.25,
        q_lora_rank=32, o_groups=2, o_lora_rank=32,
        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
        # 16 indexer heads: scores tied at exactly zero (every head's ReLU at zero) stay rare, so
        # the top-k set does not depend on how a top-k implementation breaks ties
        index_n_heads=16, index_head_dim=32, index_topk=topk, sliding_window=8,
        hc_mult=4, hc_sinkhorn_iters=20, max_position_embeddings=4096,
        scoring_func=scoring, routed_scaling_factor=scale, swiglu_limit=limit,
        layer_types=layer_types, compress_rates=rates, mlp_layer_types=mlp_layer_types,
        # factor = max_position_embeddings / original: both readings of YaRN's factor agree.
        rope_parameters={"rope_type": "yarn", "factor": 16, "original_max_position_embeddings": 256,
                         "beta_fast": 32, "beta_slow": 1},
    )


FIXTURES = {
    "dense": dict(cfg=lambda: config("sqrtsoftplus",
                                     ["sliding_attention", "compressed_sparse_attention",
                                      "heavily_compressed_attention", "compressed_sparse_attention"],
                                     ["hash_moe", "moe", "moe", "moe"],
                                     {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                                     1.5, 2.0, 3),
                  lengths=[97, 61, 30, 5], seed=1),
    "sigmoid": dict(cfg=lambda: config("sigmoid",
                                       ["compressed_sparse_attention", "heavily_compressed_attention",
                                        "sliding_attention"],
                                       ["hash_moe", "hash_moe", "moe"],
                                       {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
                                       2.5, 3.0, 5),
                    lengths=[83, 37], seed=2),
    "softmax": dict(cfg=lambda: config("softmax",
                                       ["heavily_compressed_attention", "compressed_sparse_attention"],
                                       ["moe", "moe"],
                                       {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                                       1.0, 1.5, 2),
                    lengths=[72, 19], seed=3),
}


def init_weights(model, cfg, gen):
    def normal(shape, std):
        return torch.randn(shape, generator=gen) * std

    with torch.no_grad():
        for name, p in model.named_parameters():
            shape, leaf = p.shape, name.split(".")[-1]
            if name.endswith("embed_tokens.weight"):
                v = normal(shape, 1.0)
            elif "norm" in name.split(".")[-2] or name == "model.norm.weight":
                v = 1 + normal(shape, 0.2)  # RMSNorm weights
            elif leaf in ("fn", "hc_fn"):
                v = normal(shape, 1 / math.sqrt(shape[1]))
            elif leaf in ("scale", "hc_scale"):
                v = 0.5 + torch.rand(shape, generator=gen)
            elif leaf in ("base", "hc_base"):
                v = normal(shape, 0.5)
            elif leaf == "sinks":
                v = normal(shape, 1.0)
            elif leaf == "position_bias":
                v = normal(shape, 0.5)
            elif len(shape) == 3:  # fused experts [E, out, in]
                v = normal(shape, 1 / math.sqrt(shape[2]))
            elif len(shape) == 2:
                v = normal(shape, 1 / math.sqrt(shape[1]))
            else:
                raise SystemExit(f"no init rule for {name} {tuple(shape)}")
            p.copy_(v)
        for name, b in model.named_buffers():
            if name.endswith("tid2eid"):
                rows = torch.rand(b.shape[0], cfg.n_routed_experts, generator=gen).argsort(dim=-1)
                b.copy_(rows[:, : b.shape[1]])
            elif name.endswith("e_score_correction_bias"):
                b.copy_(normal(b.shape, 0.3))
        # The checkpoint is bf16: make the fp32 model hold exactly the bf16 values.
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(b.to(torch.bfloat16).float())


def token_batch(lengths, seed):
    g = torch.Generator().manual_seed(1000 + seed)
    return [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in lengths]


@torch.no_grad()
def hf_logits(model, batch):
    out = []
    for seq in batch:
        logits = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0]
        out.append(logits.float().contiguous())
    return torch.cat(out, dim=0)


def write_common(d, batch, logits):
    with open(os.path.join(d, "tokens.json"), "w") as f:
        json.dump(batch, f)
    logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.f32"))


# ---------------------------------------------------------------- safetensors writer (raw dtypes)

def tensor_bytes(t):
    t = t.contiguous().cpu().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def write_safetensors(path, tensors):
    """tensors: {name: (dtype_string, shape, bytes)}"""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def dense_entry(t):
    t = t.to(torch.bfloat16) if t.is_floating_point() else t
    name = {torch.bfloat16: "BF16", torch.float32: "F32", torch.int64: "I64", torch.int32: "I32"}[t.dtype]
    return (name, tuple(t.shape), tensor_bytes(t))


# ---------------------------------------------------------------- quantizers (SPEC.md's format table)

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_codes(x):
    """Round to nearest e2m1 code, ties to the even code; |x| <= 6 expected."""
    a = x.abs()
    code = torch.zeros_like(a, dtype=torch.int64)
    mids = (E2M1[1:] + E2M1[:-1]) / 2
    for k, m in enumerate(mids.tolist()):
        up = (a > m) | ((a == m) & (k % 2 == 1))  # the tie goes to code k+1 when it is even
        code += up.long()
    return code | ((x < 0).long() << 3) * (code > 0).long()


def e2m1_values(codes):
    return E2M1[codes & 7] * torch.where(codes & 8 > 0, -1.0, 1.0)


def pack_nibbles(codes):
    c = codes.to(torch.uint8).reshape(codes.shape[0], -1, 2)
    return (c[..., 0] | (c[..., 1] << 4)).contiguous()


def pow2_exponent_at_least(x):
    return torch.ceil(torch.log2(x)).to(torch.int64)


def quant_fp8_block(w):
    out_, in_ = w.shape
    bo, bi = -(-out_ // 128), -(-in_ // 128)
    exps = torch.zeros(bo, bi, dtype=torch.int64)
    unscaled = torch.zeros(out_, in_)  # the e4m3 values, held in f32
    deq = torch.zeros(out_, in_)
    for i in range(bo):
        for j in range(bi):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            e = int(pow2_exponent_at_least(torch.clamp(blk.abs().max() / 448, min=2.0**-120)))
            exps[i, j] = e
            qb = (blk / 2.0**e).to(torch.float8_e4m3fn)
            unscaled[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = qb.float()
            deq[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = qb.float() * 2.0**e
    q = unscaled.to(torch.float8_e4m3fn)
    assert torch.equal(q.float(), unscaled)
    return {"weight": ("F8_E4M3", (out_, in_), tensor_bytes(q.view(torch.uint8))),
            "scale": ("F8_E8M0", (bo, bi), tensor_bytes((exps + 127).to(torch.uint8)))}, deq


def quant_mxfp4(w):
    out_, in_ = w.shape
    blocks = w.reshape(out_, in_ // 32, 32)
    e = pow2_exponent_at_least(torch.clamp(blocks.abs().amax(-1) / 6, min=2.0**-120))
    scale = torch.pow(2.0, e.float())
    codes = e2m1_codes(blocks / scale[..., None]).reshape(out_, in_)
    deq = (e2m1_values(codes).reshape(out_, in_ // 32, 32) * scale[..., None]).reshape(out_, in_)
    return {"weight": ("I8", (out_, in_ // 2), tensor_bytes(pack_nibbles(codes))),
            "scale": ("F8_E8M0", (out_, in_ // 32), tensor_bytes((e + 127).to(torch.uint8)))}, deq


def quant_nvfp4(w):
    out_, in_ = w.shape
    gs = torch.tensor(float(w.abs().max()) / (6 * 448), dtype=torch.float32)
    blocks = w.reshape(out_, in_ // 16, 16)
    bs = (blocks.abs().amax(-1) / 6 / gs).to(torch.float8_e4m3fn)
    step = (bs.float() * gs).clamp(min=1e-30)
    codes = e2m1_codes(torch.clamp(blocks / step[..., None], -6, 6)).reshape(out_, in_)
    deq = ((e2m1_values(codes).reshape(out_, in_ // 16, 16) * bs.float()[..., None]) * gs).reshape(out_, in_)
    return {"weight": ("U8", (out_, in_ // 2), tensor_bytes(pack_nibbles(codes))),
            "weight_scale": ("F8_E4M3", (out_, in_ // 16), tensor_bytes(bs.view(torch.uint8))),
            "weight_scale_2": ("F32", (), tensor_bytes(gs.reshape(()))),
            # a calibration value that must never be used as the activation scale
            "input_scale": ("F32", (), tensor_bytes(torch.tensor(1234.5, dtype=torch.float32)))}, deq


def check_fp4_rounding():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0, 0.3, 6.0, -0.74])
    want = torch.tensor([0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 0.0, -4.0, 0.5, 6.0, -0.5])
    got = e2m1_values(e2m1_codes(x))
    assert torch.equal(got, want), (got, want)


# ---------------------------------------------------------------- fixtures

def load_saved(dir_):
    from safetensors.torch import load_file
    tensors = {}
    for f in sorted(os.listdir(dir_)):
        if f.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(dir_, f)))
    return tensors


def official_name(save_name):
    n = save_name[len("model."):] if save_name.startswith("model.") else save_name
    if n == "embed_tokens.weight":
        return "embed.weight"
    if n.startswith("hc_head.hc_"):
        return "hc_head_" + n[len("hc_head.hc_"):]
    return n.replace(".attn.norm.weight", ".attn.kv_norm.weight")


def modelopt_name(save_name, in_memory_names):
    """Maps a save_pretrained name to transformers' module name (per-expert for experts)."""
    n = save_name
    if n == "head.weight":
        return "lm_head.weight"
    repl = [(".attn.wq_a.", ".self_attn.q_a_proj."), (".attn.q_norm.", ".self_attn.q_a_norm."),
            (".attn.wq_b.", ".self_attn.q_b_proj."), (".attn.wkv.", ".self_attn.kv_proj."),
            (".attn.norm.", ".self_attn.kv_norm."), (".attn.wo_a.", ".self_attn.o_a_proj."),
            (".attn.wo_b.", ".self_attn.o_b_proj."), (".attn.attn_sink", ".self_attn.sinks"),
            (".attn.indexer.compressor.", ".self_attn.compressor.indexer."),
            (".attn.indexer.wq_b.", ".self_attn.compressor.indexer.q_b_proj."),
            (".attn.indexer.weights_proj.", ".self_attn.compressor.indexer.scorer.weights_proj."),
            (".attn.compressor.", ".self_attn.compressor."),
            (".attn_norm.", ".input_layernorm."), (".ffn_norm.", ".post_attention_layernorm."),
            (".hc_attn_", ".attn_hc."), (".hc_ffn_", ".ffn_hc."),
            (".ffn.gate.bias", ".mlp.gate.e_score_correction_bias"), (".ffn.", ".mlp."),
            (".w1.", ".gate_proj."), (".w2.", ".down_proj."), (".w3.", ".up_proj.")]
    for a, b in repl:
        n = n.replace(a, b)
    for a, b in [(".compressor.wkv.", ".compressor.kv_proj."), (".compressor.wgate.", ".compressor.gate_proj."),
                 (".compressor.ape", ".compressor.position_bias"), (".compressor.norm.", ".compressor.kv_norm."),
                 (".indexer.wkv.", ".indexer.kv_proj."), (".indexer.wgate.", ".indexer.gate_proj."),
                 (".indexer.ape", ".indexer.position_bias"), (".indexer.norm.", ".indexer.kv_norm.")]:
        n = n.replace(a, b)
    if ".mlp.experts." not in n:
        assert n in in_memory_names, f"{save_name} -> {n} is not a transformers module name"
    return n


def fp8_mxfp4_role(off):
    if ".ffn.experts." in off and off.endswith(".weight"):
        return "mxfp4"
    fp8 = [".attn.wq_a.", ".attn.wq_b.", ".attn.wkv.", ".attn.wo_a.", ".attn.wo_b.",
           ".attn.indexer.wq_b.", ".ffn.shared_experts."]
    return "fp8" if any(s in off for s in fp8) and off.endswith(".weight") else None


def nvfp4_role(save_name):
    if not save_name.endswith(".weight"):
        return None
    q = [".attn.wq_a.", ".attn.wq_b.", ".attn.wkv.", ".attn.wo_b.", ".attn.indexer.wq_b.",
         ".ffn.experts.", ".ffn.shared_experts."]
    return "nvfp4" if any(s in save_name for s in q) else None


def goldens_on(save_dir, saved, batch):
    """transformers' fp32 logits for a save_pretrained-format dir whose tensors are `saved`."""
    from safetensors.torch import save_file
    with tempfile.TemporaryDirectory() as tmp:
        for f in os.listdir(save_dir):
            if f.endswith(".json"):
                shutil.copy(os.path.join(save_dir, f), tmp)
        save_file({k: v.contiguous() for k, v in saved.items()}, os.path.join(tmp, "model.safetensors"))
        model = DeepseekV4ForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
        return hf_logits(model, batch), model


def main():
    out = sys.argv[1]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(8)
    print("transformers", transformers.__version__, "torch", torch.__version__)
    check_fp4_rounding()
    root = os.path.join(tempfile.mkdtemp(), "golden")
    os.makedirs(root)
    from transformers.activations import ACT2FN
    for name, spec in FIXTURES.items():
        cfg = spec["cfg"]()
        if cfg.scoring_func not in ACT2FN:
            print(f"SKIP {name}: transformers has no '{cfg.scoring_func}' activation")
            continue
        gen = torch.Generator().manual_seed(spec["seed"])
        model = DeepseekV4ForCausalLM(cfg).float().eval()
        init_weights(model, cfg, gen)
        batch = token_batch(spec["lengths"], spec["seed"])
        d = os.path.join(root, name)
        # a copy: converting the model itself would round its fp32 rotary buffers to bf16
        copy.deepcopy(model).to(torch.bfloat16).save_pretrained(d)
        logits = hf_logits(model, batch)
        # the goldens must also be what transformers computes from the saved files
        reloaded, reloaded_model = goldens_on(d, {k: v.float() if v.is_floating_point() else v for k, v in load_saved(d).items()}, batch)
        sd, rd = model.state_dict(), reloaded_model.state_dict()
        for k in sd:
            assert torch.equal(sd[k].float(), rd[k].float()), f"{name}: {k} differs after reload"
        assert torch.equal(logits, reloaded), f"{name}: reloaded logits differ"
        write_common(d, batch, logits)
        print(name, "logits", tuple(logits.shape), "rms", float(logits.pow(2).mean().sqrt()),
              "files", sorted(os.listdir(d)))
        if name != "dense":
            continue

        saved = load_saved(d)
        in_memory = set(model.state_dict().keys())
        hf_cfg = json.load(open(os.path.join(d, "config.json")))

        # ---- official FP8 block + MXFP4, legacy config
        od = os.path.join(root, "fp8_mxfp4")
        os.makedirs(od)
        tensors, deq_saved = {}, {}
        for k, v in saved.items():
            off = official_name(k)
            role = fp8_mxfp4_role(off)
            if role is None:
                tensors[off] = dense_entry(v)
                deq_saved[k] = v.float() if v.is_floating_point() else v
                continue
            parts, deq = (quant_fp8_block if role == "fp8" else quant_mxfp4)(v.float())
            base = off[: -len(".weight")]
            for suffix, entry in parts.items():
                tensors[base + "." + suffix] = entry
            deq_saved[k] = deq
        write_safetensors(os.path.join(od, "model.safetensors"), tensors)
        legacy = {k: v for k, v in hf_cfg.items() if k not in (
            "layer_types", "compress_rates", "mlp_layer_types", "rope_parameters", "partial_rotary_factor",
            "architectures", "transformers_version", "dtype")}
        rates = hf_cfg["compress_rates"]
        ratio = {"sliding_attention": 0, "compressed_sparse_attention": rates["compressed_sparse_attention"],
                 "heavily_compressed_attention": rates["heavily_compressed_attention"]}
        legacy["compress_ratios"] = [ratio[t] for t in hf_cfg["layer_types"]] + [0]
        legacy["num_hash_layers"] = hf_cfg["mlp_layer_types"].count("hash_moe")
        legacy["qk_rope_head_dim"] = int(hf_cfg["head_dim"] * hf_cfg["partial_rotary_factor"])
        comp = hf_cfg["rope_parameters"]["compress"]
        legacy["rope_scaling"] = {"type": "yarn", "factor": comp["factor"],
                                  "original_max_position_embeddings": comp["original_max_position_embeddings"],
                                  "beta_fast": comp["beta_fast"], "beta_slow": comp["beta_slow"]}
        legacy["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                         "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
        legacy["expert_dtype"] = "fp4"
        json.dump(legacy, open(os.path.join(od, "config.json"), "w"), indent=2)
        ql, _ = goldens_on(d, deq_saved, batch)
        write_common(od, batch, ql)
        print("fp8_mxfp4 relative change vs dense", float((ql - logits).norm() / logits.norm()))

        # ---- ModelOpt NVFP4 (transformers module names), NVFP4 everywhere but wo_a
        nd = os.path.join(root, "nvfp4")
        os.makedirs(nd)
        tensors, deq_saved = {}, {}
        for k, v in saved.items():
            role = nvfp4_role(k)
            mname = modelopt_name(k, in_memory)
            if role is None:
                tensors[mname] = dense_entry(v)
                deq_saved[k] = v.float() if v.is_floating_point() else v
                continue
            parts, deq = quant_nvfp4(v.float())
            base = mname[: -len(".weight")]
            for suffix, entry in parts.items():
                tensors[base + "." + suffix] = entry
            deq_saved[k] = deq
        write_safetensors(os.path.join(nd, "model.safetensors"), tensors)
        mo = dict(hf_cfg)
        mo["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                     "exclude_modules": ["lm_head", "*o_a_proj*", "*compressor*", "*gate"]}
        json.dump(mo, open(os.path.join(nd, "config.json"), "w"), indent=2)
        json.dump({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}},
                  open(os.path.join(nd, "hf_quant_config.json"), "w"), indent=2)
        nl, _ = goldens_on(d, deq_saved, batch)
        write_common(nd, batch, nl)
        print("nvfp4 relative change vs dense", float((nl - logits).norm() / logits.norm()))

    os.makedirs(out, exist_ok=True)
    with tarfile.open(os.path.join(out, "golden.tar.gz"), "w:gz") as t:
        t.add(root, arcname="golden")
    for dp, _, fs in os.walk(root):
        for f in fs:
            print(os.path.join(dp, f)[len(root):], os.path.getsize(os.path.join(dp, f)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The PyTorch side of bench/cuda_small_ops_bench.cu: the same small per-layer ops at the same
V4-Flash shapes (hc_mult 4, dim 4096, 64 heads of 512 with 64 rope dims, 20 Sinkhorn
iterations) and row counts (1, 32, 8192), run the way transformers 5.17 runs them: its own
DeepseekV4HyperConnection, DeepseekV4HyperHead and DeepseekV4RMSNorm modules in f32 (the
modules transformers keeps in f32), and interleaved rope as plain torch ops. Eager calls, timed
with CUDA events (median of 50 after a warm-up), in microseconds per call. Prints a table; with
--json, also writes it.

usage: torch_small_ops.py [--json FILE]
Runs on the GPU machine (torch 2.11, transformers 5.17).
"""
import argparse
import json
import os
import statistics

import torch
from transformers import DeepseekV4Config
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4

HC, DIM, HEADS, HEAD_DIM, ROPE_HALF, Q_LORA = 4, 4096, 64, 512, 32, 1024


def us_per_call(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(50):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def rope_interleaved(x, positions, inv_freq):
    """Rotates pairs (2i, 2i+1) of the last 2·half dims of every head by position·inv_freq[i]."""
    angles = positions[:, None].float() * inv_freq[None, :]  # [rows, half]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    tail = x[..., -2 * ROPE_HALF:].view(*x.shape[:-1], ROPE_HALF, 2)
    a, b = tail[..., 0], tail[..., 1]
    rotated = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    return torch.cat((x[..., :-2 * ROPE_HALF], rotated), dim=-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    device = torch.device("cuda")
    config = DeepseekV4Config(hidden_size=DIM, hc_mult=HC, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6)
    with torch.device(device):
        hc = v4.DeepseekV4HyperConnection(config)
        head = v4.DeepseekV4HyperHead(config)
        torch.nn.init.normal_(hc.fn, std=0.02), torch.nn.init.zeros_(hc.base), torch.nn.init.ones_(hc.scale)
        torch.nn.init.normal_(head.hc_fn, std=0.02), torch.nn.init.zeros_(head.hc_base), torch.nn.init.ones_(head.hc_scale)
        norms = {"rms_norm dim 4096": v4.DeepseekV4RMSNorm(DIM, eps=1e-6),
                 "rms_norm q_lora 1024": v4.DeepseekV4RMSNorm(Q_LORA, eps=1e-6),
                 "rms_norm 64 heads x 512": v4.DeepseekV4RMSNorm(HEAD_DIM, eps=1e-6),
                 "rms_norm kv 512": v4.DeepseekV4RMSNorm(HEAD_DIM, eps=1e-6)}
        inv_freq = torch.rand(ROPE_HALF) * 0.5
    rows_out = []
    print(f"{'op':<28} {'rows':>6} {'us/call':>10}")
    with torch.no_grad():
        for n in (1, 32, 8192):
            h = torch.randn(1, n, HC, DIM, device=device)
            y = torch.randn(1, n, DIM, device=device)
            q = torch.randn(n, HEADS, HEAD_DIM, device=device)
            positions = torch.arange(4096, 4096 + n, device=device)
            post, comb, _ = hc(h)
            ops = {
                # the mixed row into the sub-block's RMSNorm, as tetra's hc_pre returns it
                "mhc pre + norm (Sinkhorn 20)": lambda: norms["rms_norm dim 4096"](hc(h)[2]),
                "mhc post": lambda: post.unsqueeze(-1) * y.unsqueeze(-2) + torch.matmul(comb, h),
                "mhc head + norm": lambda: norms["rms_norm dim 4096"](head(h)),
                "rms_norm dim 4096": lambda: norms["rms_norm dim 4096"](q.view(n, -1)[:, :DIM]),
                "rms_norm q_lora 1024": lambda: norms["rms_norm q_lora 1024"](q.view(n, -1)[:, :Q_LORA]),
                "rms_norm 64 heads x 512": lambda: norms["rms_norm 64 heads x 512"](q),
                "rms_norm kv 512": lambda: norms["rms_norm kv 512"](q[:, 0]),
                "rope 64 query heads": lambda: rope_interleaved(q, positions, inv_freq),
                "rope kv head": lambda: rope_interleaved(q[:, :1], positions, inv_freq),
            }
            for name, fn in ops.items():
                us = us_per_call(fn)
                rows_out.append({"op": name, "rows": n, "us": us})
                print(f"{name:<28} {n:>6} {us:>10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows_out}, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The headline figures of issue 8 from one run of scripts/bench-h200.sh, as one JSON file
(docs/perf/h200-v4-flash.json): the keys of its "Done when" 6, each a ratio measured in that
run, or null with a note saying why when the run could not measure it (never a guess).

Inputs, all JSON written in the same run:
  --tetra F        tetra bench --synthetic v4-flash (20 layers): decode points, prefill, ceilings
  --tetra-peer F   tetra bench at the baseline's layer count: batch-1 decode at context P, P-token prefill
  --baseline F     tools/transformers_baseline.py at that layer count and P
  --kernel F ...   kernel benchmarks' --json summaries, when they write one: their headline keys
                   (gemm_m1_*, attn_1m_bw_fraction, ...) are taken as they are; the whole file is kept
usage: perf_summary.py --tetra F --tetra-peer F --baseline F [--kernel F ...] --command S --out F
"""
import argparse
import json
import os

KEYS = ["decode_b1_step_over_floor", "decode_b32_over_b1", "gemm_m1_min_bw_fraction",
        "gemm_m1_min_speedup_vs_cublas_bf16", "prefill8k_bf16_rate_fraction", "attn_1m_bw_fraction",
        "speedup_vs_transformers_decode", "speedup_vs_transformers_prefill"]
TARGETS = {"decode_b1_step_over_floor": "<= 1.3", "decode_b32_over_b1": "<= 2",
           "gemm_m1_min_bw_fraction": ">= 0.8 (every linear of 8 MB or more)",
           "gemm_m1_min_speedup_vs_cublas_bf16": ">= 3", "prefill8k_bf16_rate_fraction": ">= 0.5",
           "attn_1m_bw_fraction": ">= 0.7", "speedup_vs_transformers_decode": "reported",
           "speedup_vs_transformers_prefill": "reported"}


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read().strip()
    return json.loads(text) if text else None


def point(tetra, batch, context):
    for d in (tetra or {}).get("decode", []):
        if d["batch"] == batch and d["context"] == context:
            return d
    return None


def context_bandwidth_fraction(tetra):
    """No attention kernel benchmark: what whole batch-1 steps say instead. The cache bytes that
    the longest context adds over the shortest, over the time it adds, against the copy
    bandwidth: the rate at which the step reads what grows with context (window, selected
    entries, indexer keys, and whatever else today's path does per entry)."""
    points = sorted((d for d in tetra.get("decode", []) if d["batch"] == 1 and d.get("step_seconds")),
                    key=lambda d: d["context"])
    if len(points) < 2 or points[-1]["context"] < (1 << 20) - 1:
        return None
    short, long = points[0], points[-1]
    extra_bytes = long["floor"]["kv_bytes"] - short["floor"]["kv_bytes"]
    extra_seconds = long["step_seconds"] - short["step_seconds"]
    if extra_seconds <= 0:
        return None
    value = extra_bytes / extra_seconds / tetra["ceilings"]["copy_bytes_per_s"]
    return value, (f"derived from whole decode steps at batch 1 (no attention kernel benchmark in this run): the KV and "
                   f"indexer bytes context {long['context']} adds over context {short['context']} "
                   f"({extra_bytes / 1e6:.1f} MB) / the step time it adds ({extra_seconds * 1e3:.2f} ms) / copy bandwidth")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tetra")
    ap.add_argument("--tetra-peer")
    ap.add_argument("--baseline")
    ap.add_argument("--kernel", nargs="*", default=[])
    ap.add_argument("--command", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    tetra, peer, base = load(a.tetra), load(a.tetra_peer), load(a.baseline)
    out = {"gpu": None, "date": None, "command": a.command, "kernel_launches": None}
    notes = {}
    out.update({k: None for k in KEYS})

    if tetra:
        out["gpu"] = tetra["device"]["name"]
        out["kernel_launches"] = tetra["device"].get("kernel_launches")  # "plain" or "early (PDL)"
        out["date"] = tetra["date"]
        h = tetra["headline"]
        ctx, layers = h["decode_context"], tetra["layers"]
        where = f"{tetra['geometry']}, {layers} layers, {tetra['format']}, context {ctx}"
        out["decode_b1_step_over_floor"] = h["decode_b1_step_over_floor"]
        out["decode_b32_over_b1"] = h["decode_b32_over_b1"]
        b1, b32 = point(tetra, 1, ctx), point(tetra, 32, ctx)
        notes["decode_b1_step_over_floor"] = (
            f"median whole-step time at batch 1 ({where}) over its byte floor: (weight bytes the step reads + KV "
            f"bytes at that context) / measured copy bandwidth" if b1 and b1.get("error") is None
            else f"batch 1 at context {ctx} did not run: {b1['error'] if b1 else 'not in the run'}")
        floors = h.get("decode_b32_floor_over_b1_floor")
        measured = h.get("decode_b32_measured_floor_over_b1_floor")
        touched = b32 and b32["floor"].get("measured_experts_per_layer")
        notes["decode_b32_over_b1"] = (
            f"median step time at batch 32 over batch 1 ({where})"
            + (f"; batch 32's byte floor is {floors:.2f}x batch 1's (the experts uniformly random routing would "
               f"touch)" if floors else "")
            + (f", {measured:.2f}x with the {touched:.1f} experts a layer its step's routing touched"
               if measured and touched else "")
            if h["decode_b32_over_b1"] is not None
            else f"batch 32 at context {ctx} did not run: {b32['error'] if b32 else 'not in the run'}")
        p = tetra.get("prefill")
        if p and p["tokens"] == 8192 and p.get("bf16_rate_fraction") is not None:
            out["prefill8k_bf16_rate_fraction"] = p["bf16_rate_fraction"]
            notes["prefill8k_bf16_rate_fraction"] = (
                f"prefill FLOPs of 8192 tokens ({where.rsplit(',', 1)[0]}; linear layers, the head on the last token only as a server's prefill, "
                f"attention, indexer scores) / time / measured cuBLAS bf16 8192^3 rate")
        else:
            why = ("no prefill in the run" if not p else p.get("error") or f"the prefill had {p['tokens']} tokens, not 8192")
            notes["prefill8k_bf16_rate_fraction"] = f"not measured: {why}"
    else:
        for k in ("decode_b1_step_over_floor", "decode_b32_over_b1", "prefill8k_bf16_rate_fraction"):
            notes[k] = "tetra bench did not produce its JSON in this run"

    if peer and out["gpu"] is None:
        out["gpu"], out["date"] = peer["device"]["name"], peer["date"]
    pd = point(peer, 1, (base or {}).get("decode_context"))
    if base and pd and pd.get("step_seconds"):
        out["speedup_vs_transformers_decode"] = base["decode_step_seconds"] / pd["step_seconds"]
        notes["speedup_vs_transformers_decode"] = (
            f"transformers {base['transformers']} DeepseekV4ForCausalLM bf16 decode step / tetra's ({peer['format']}) "
            f"at batch 1, context {base['decode_context']}, both {base['layers']} layers of {base['geometry']}")
    else:
        notes["speedup_vs_transformers_decode"] = "not measured: the baseline or tetra's run at its layer count is missing"
    pp = (peer or {}).get("prefill")
    if base and pp and pp.get("seconds") and pp["tokens"] == base["prefill_tokens"]:
        out["speedup_vs_transformers_prefill"] = base["prefill_seconds"] / pp["seconds"]
        notes["speedup_vs_transformers_prefill"] = (
            f"transformers prefill time / tetra's, {base['prefill_tokens']} tokens, both {base['layers']} layers")
    else:
        notes["speedup_vs_transformers_prefill"] = "not measured: the baseline or tetra's prefill at its layer count is missing"

    kernels = {}
    for path in a.kernel:
        k = load(path)
        if k is None:
            continue
        kernels[os.path.basename(path)] = k
        for key in KEYS:
            for src in (k, k.get("headline", {}) if isinstance(k, dict) else {}):
                if isinstance(src, dict) and src.get(key) is not None and out[key] is None:
                    out[key] = src[key]
                    notes[key] = f"from {os.path.basename(path)}" + (f": {k['notes'][key]}" if key in k.get("notes", {}) else "")
    if out["attn_1m_bw_fraction"] is None and tetra:
        derived = context_bandwidth_fraction(tetra)
        if derived:
            out["attn_1m_bw_fraction"], notes["attn_1m_bw_fraction"] = derived
    for key in ("gemm_m1_min_bw_fraction", "gemm_m1_min_speedup_vs_cublas_bf16", "attn_1m_bw_fraction"):
        if out[key] is None:
            notes.setdefault(key, "not measured: no kernel benchmark of this run wrote it (see kernels)")

    out["targets"] = TARGETS
    out["notes"] = notes
    out["tetra"] = tetra
    out["peer"] = {"tetra": peer, "transformers": base}
    out["kernels"] = kernels
    with open(a.out, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    width = max(len(k) for k in KEYS)
    for k in KEYS:
        v = out[k]
        print(f"{k:<{width}}  {'null' if v is None else f'{v:.3f}':>8}  target {TARGETS[k]}")


if __name__ == "__main__":
    main()

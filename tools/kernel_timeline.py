#!/usr/bin/env python3
"""Where a graph-replayed step's time goes, from bench/kernel_trace.cpp's CSV.

Each launch id is one API call: a CUDA graph launch (a decode step) records all of its kernels
under one id. For each step with at least --min-kernels kernels this prints its span and idle
time; for the median-span step of each distinct kernel count (batch 1, batch 32, ...) it attributes the
span to kernels by completion: sorted by end time, each kernel is charged the time from the
previous kernel's end to its own (what it added to the step if the chain is serial; a side
branch finishing inside a longer kernel takes part of that kernel's charge). With programmatic
dependent launch a kernel starts before the one ahead ends (it waits in griddepcontrol.wait),
so its own duration overstates its work; the charge does not.

Usage: tools/kernel_timeline.py TRACE.csv [--min-kernels 100] [--sequence N] [--all] [--eager-gap-us G]
  --sequence N: also list the step's first N kernels in end order (start, end, charge).
  --all: the per-kernel table for every step, not only the median one of each kernel count.
  --eager-gap-us G: instead, the last run of kernels launched one per API call (not in a graph)
      that no idle gap of G us or more interrupts: a prefill, when the traced bench's last work
      is one (`tetra bench --prefill P` without --batch).
"""
import argparse
import collections
import csv
import gzip
import re
import subprocess
import sys


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        return dict(zip(names, out.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def short_name(full):
    """tetra::cuda::(anonymous namespace)::expert_up_mma_kernel<(WeightFormat)4, 1, 3>(...) ->
    expert_up_mma_kernel<4,1,3>"""
    depth, cut = 0, len(full)
    # the function name ends at the '(' of the parameter list, outside template brackets
    for i, ch in enumerate(full):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not full[i:].startswith("(anonymous"):
            cut = i
            break
    name = full[:cut]
    if name.startswith("void "):
        name = name[5:]
    name = re.sub(r"\(anonymous namespace\)::", "", name)
    name = re.sub(r"\btetra::cuda::", "", name)
    name = re.sub(r"\((?:tetra::cuda::)?[A-Za-z_:]+\)", "", name)  # enum casts in template arguments
    name = re.sub(r"\s+", "", name)
    return name[:90]


def load(path):
    with (gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")) as f:
        rows = list(csv.DictReader(f))
    names = demangle(sorted({r["name"] for r in rows}))
    steps = collections.defaultdict(list)
    for r in rows:
        steps[int(r["launch"])].append(
            dict(start=int(r["start_ns"]), end=int(r["end_ns"]), stream=r["stream"], grid=r["grid"],
                 block=r["block"], name=short_name(names.get(r["name"], r["name"]))))
    return steps


def span_ns(kernels):
    return max(k["end"] for k in kernels) - min(k["start"] for k in kernels)


def busy_ns(kernels):
    total, cur_start, cur_end = 0, None, None
    for k in sorted(kernels, key=lambda k: k["start"]):
        if cur_end is None or k["start"] > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = k["start"], k["end"]
        else:
            cur_end = max(cur_end, k["end"])
    return total + (cur_end - cur_start if cur_end is not None else 0)


def charges(kernels):
    prev = min(k["start"] for k in kernels)
    out = []
    for k in sorted(kernels, key=lambda k: k["end"]):
        out.append((k, k["end"] - prev))
        prev = k["end"]
    return out


def last_eager_run(steps, gap_ns):
    """The kernels of one-kernel launches after the last idle gap of gap_ns or more between them."""
    eager = sorted((ks[0] for ks in steps.values() if len(ks) == 1), key=lambda k: k["start"])
    if not eager:
        sys.exit("no kernel was launched outside a graph")
    first, done = 0, eager[0]["end"]  # done: when every kernel so far had ended
    for i, k in enumerate(eager[1:], 1):
        if k["start"] - done >= gap_ns:
            first = i
        done = max(done, k["end"])
    return eager[first:]


def print_charges(title, ks, sequence):
    span = span_ns(ks)
    charged = collections.defaultdict(lambda: [0, 0, 0])  # count, charge ns, duration ns
    for k, c in charges(ks):
        e = charged[k["name"]]
        e[0] += 1
        e[1] += c
        e[2] += k["end"] - k["start"]
    print(f"\n{title}: {len(ks)} kernels, span {span / 1e3:.1f} us; charge = time added by "
          f"completion order (the charges sum to the span)")
    print(f"{'charge us':>10} {'share':>6} {'calls':>6} {'charge/call':>11} {'dur/call':>9}  kernel")
    for name, (n, c, d) in sorted(charged.items(), key=lambda kv: -kv[1][1]):
        print(f"{c / 1e3:>10.1f} {100 * c / span:>5.1f}% {n:>6} {c / n / 1e3:>11.2f} {d / n / 1e3:>9.2f}  {name}")
    if sequence:
        t0 = min(k["start"] for k in ks)
        print(f"\nfirst {sequence} kernels by end: start, end (us from the first start), charge us, "
              f"stream, grid, block")
        for k, c in charges(ks)[:sequence]:
            print(f"{(k['start'] - t0) / 1e3:>8.2f} {(k['end'] - t0) / 1e3:>8.2f} {c / 1e3:>7.2f} {k['stream']:>4} "
                  f"{k['grid']:>12} {k['block']:>10}  {k['name']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--min-kernels", type=int, default=100)
    ap.add_argument("--sequence", type=int, default=0)
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--eager-gap-us", type=float, default=0)
    a = ap.parse_args()
    steps = load(a.trace)
    if a.eager_gap_us > 0:
        ks = last_eager_run(steps, a.eager_gap_us * 1e3)
        print_charges("the last eager run", ks, a.sequence)
        return
    big = [(launch, ks) for launch, ks in sorted(steps.items()) if len(ks) >= a.min_kernels]
    if not big:
        sys.exit(f"{a.trace}: no launch with {a.min_kernels} kernels or more")
    print(f"{'launch':>8} {'kernels':>8} {'span us':>9} {'busy us':>9} {'idle us':>8} {'streams':>8}")
    for launch, ks in big:
        span, busy = span_ns(ks), busy_ns(ks)
        print(f"{launch:>8} {len(ks):>8} {span / 1e3:>9.1f} {busy / 1e3:>9.1f} {(span - busy) / 1e3:>8.1f} "
              f"{len({k['stream'] for k in ks}):>8}")
    by_count = collections.defaultdict(list)
    for launch, ks in big:
        by_count[len(ks)].append((span_ns(ks), launch, ks))
    # each kernel count's median-span step (a bench's reported step is the median one)
    chosen = big if a.all else sorted((launch, ks) for steps in by_count.values()
                                      for _, launch, ks in [sorted(steps, key=lambda s: s[0])[len(steps) // 2]])
    for launch, ks in chosen:
        print_charges(f"launch {launch}", ks, a.sequence)


if __name__ == "__main__":
    main()

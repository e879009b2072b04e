#!/usr/bin/env python3
"""Summarize an `ncu --page source --csv --print-source sass` export: instruction mix (share of
executed instructions and of stall samples per opcode), the stall reasons, and the hottest
straight-line regions (runs of instructions with one execution count), to map back to the source
by reading the SASS. An export of several profiled kernels (`ncu -c N`) holds one section per
kernel, each opened by a "Kernel Name" row; each distinct section is summarized in turn (ncu
repeats some sections verbatim)."""
import collections, csv, gzip, re, signal, sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`


def sections(rows):
    """(kernel name, header, data rows) per section, verbatim repeats dropped."""
    found, seen = [], set()
    starts = [i for i, r in enumerate(rows) if r and r[0] == "Kernel Name"] or [-1]
    for n, i in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(rows)
        name = rows[i][1] if i >= 0 else "(unnamed)"
        header, data = rows[i + 1], [r for r in rows[i + 2:end] if len(r) > 1]
        key = (name, tuple(tuple(r) for r in data))
        if key not in seen:
            seen.add(key)
            found.append((name, header, data))
    return found


def summarize(name, header, data):
    col = {h: i for i, h in enumerate(header)}
    E, S, SRC = col["Instructions Executed"], col["Warp Stall Sampling (All Samples)"], col["Source"]
    number = lambda r, c: int(r[c]) if c < len(r) and r[c].strip().isdigit() else 0
    ex = [number(r, E) for r in data]
    st = [number(r, S) for r in data]
    te, ts = sum(ex) or 1, sum(st) or 1
    print(f"== {name[:150]}")
    print(f"{len(data)} instructions, {te} executed, {ts} stall samples")
    by_op, by_op_s = collections.Counter(), collections.Counter()
    for r, e, s in zip(data, ex, st):
        m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)", r[SRC])
        op = m.group(2) if m else "?"
        by_op[op] += e
        by_op_s[op] += s
    for op, e in by_op.most_common(20):
        print(f"  {op:12s} executed {100 * e / te:5.1f}%  stalls {100 * by_op_s[op] / ts:5.1f}%")
    reasons = collections.Counter()
    for h, c in col.items():
        if h.startswith("stall_") and "Not Issued" not in h:
            reasons[h[len("stall_"):]] = sum(number(r, c) for r in data)
    total = sum(reasons.values()) or 1
    print("stall reasons: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in reasons.most_common(8)))
    runs, start = [], 0
    for i in range(1, len(data) + 1):
        if i == len(data) or ex[i] != ex[start]:
            runs.append((start, i - 1))
            start = i
    runs.sort(key=lambda r: -(r[1] - r[0] + 1) * ex[r[0]])
    print("hottest runs (first, last, executions each, share of executed, share of stalls, first instruction):")
    for a, b in runs[:20]:
        n = b - a + 1
        print(f"  {a:5d}-{b:5d} x{ex[a]:<10d} {100 * n * ex[a] / te:5.1f}% {100 * sum(st[a:b + 1]) / ts:5.1f}%  {data[a][SRC].strip()[:60]}")


rows = list(csv.reader(gzip.open(sys.argv[1], "rt") if sys.argv[1].endswith(".gz") else open(sys.argv[1])))
for name, header, data in sections(rows):
    summarize(name, header, data)

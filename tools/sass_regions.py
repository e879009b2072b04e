#!/usr/bin/env python3
"""Summarize an `ncu --page source --csv --print-source sass` export: instruction mix (share of
executed instructions and of stall samples per opcode) and the hottest straight-line regions
(runs of instructions with one execution count), to map back to the source by reading the SASS."""
import collections, csv, gzip, re, signal, sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`

rows = list(csv.reader(gzip.open(sys.argv[1], "rt") if sys.argv[1].endswith(".gz") else open(sys.argv[1])))
header, data = rows[1], rows[2:]
col = {h: i for i, h in enumerate(header)}
E, S, SRC = col["Instructions Executed"], col["Warp Stall Sampling (All Samples)"], col["Source"]
ex = [int(r[E] or 0) for r in data]
st = [int(r[S] or 0) for r in data]
te, ts = sum(ex) or 1, sum(st) or 1
print(f"{len(data)} instructions, {te} executed, {ts} stall samples")
by_op, by_op_s = collections.Counter(), collections.Counter()
for r, e, s in zip(data, ex, st):
    m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)", r[SRC])
    op = m.group(2) if m else "?"
    by_op[op] += e
    by_op_s[op] += s
for op, e in by_op.most_common(20):
    print(f"  {op:12s} executed {100 * e / te:5.1f}%  stalls {100 * by_op_s[op] / ts:5.1f}%")
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

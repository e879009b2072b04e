#!/usr/bin/env python3
"""tools/kernel_timeline.py on a small tracer CSV: a graph launch of several kernels (a decode
step) and one-kernel launches in two runs split by an idle gap (two prefills). --eager-gap-us
charges the second run only, graph kernels left out, the charges adding up to its span."""
import csv, subprocess, sys, tempfile

tool = sys.argv[1]
rows = []


def kernel(launch, start_us, end_us, name, stream=7):
    rows.append({"launch": launch, "stream": stream, "start_ns": int(start_us * 1000), "end_ns": int(end_us * 1000),
                 "grid": "1x1x1", "block": "32x1x1", "registers": 16, "shared_bytes": 0, "name": name})


kernel(1, 0, 10, "setup")                      # a first eager run
kernel(2, 12, 20, "setup")
for i in range(4):                             # a graph launch: four kernels under one id
    kernel(3, 30 + 5 * i, 34 + 5 * i, "step_kernel", stream=8)
kernel(4, 5000, 5100, "gemm")                  # the last eager run, after a gap of ~5 ms
kernel(5, 5101, 5131, "norm")
kernel(6, 5132, 5232, "gemm")
with tempfile.NamedTemporaryFile("w", suffix=".csv", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    f.flush()
    text = subprocess.run([sys.executable, tool, f.name, "--eager-gap-us", "1000"], capture_output=True, text=True,
                          check=True).stdout
print(text)
assert "the last eager run: 3 kernels, span 232.0 us" in text, "the run after the gap, graph kernels left out"
lines = {l.split()[-1]: l.split() for l in text.splitlines() if l.strip().endswith(("gemm", "norm"))}
assert lines["gemm"][:3] == ["201.0", "86.6%", "2"], lines["gemm"]  # 100 + 101 us (the 1 us before the second)
assert lines["norm"][:3] == ["31.0", "13.4%", "1"], lines["norm"]
assert "setup" not in text and "step_kernel" not in text
print("ok")

#!/usr/bin/env python3
"""tools/sass_regions.py on a small ncu source export with two kernels, one of them repeated
verbatim (as ncu writes some sections): each distinct kernel is summarized once, with its counts."""
import csv, io, subprocess, sys, tempfile

tool = sys.argv[1]
header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed", "stall_long_sb",
          "stall_wait", "stall_long_sb (Not Issued)"]
kernels = {
    "void k_a(float *)": [["0x0", "  LDG.E R2, [R4]", "30", "10", "20", "10", "99"],
                          ["0x10", "  LOP3.LUT R3, R2, 0xff, RZ, 0xc0, !PT", "10", "10", "10", "0", "99"],
                          ["0x20", "  @P0 BRA 0x0", "0", "10", "0", "0", "99"]],
    "void k_b(int)": [["0x0", "  HMMA.16816.F32.BF16 R0, R4, R8, R0", "6", "4", "0", "6", "0"]],
}
out = io.StringIO()
w = csv.writer(out, quoting=csv.QUOTE_ALL)
for name in ["void k_a(float *)", "void k_a(float *)", "void k_b(int)"]:
    w.writerow(["Kernel Name", name])
    w.writerow(header)
    w.writerows(kernels[name])
with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
    f.write(out.getvalue())
    f.flush()
    text = subprocess.run([sys.executable, tool, f.name], capture_output=True, text=True, check=True).stdout
print(text)
sections = text.split("== ")[1:]
assert len(sections) == 2, f"expected one summary per distinct kernel, got {len(sections)}"
a, b = sections
assert a.startswith("void k_a") and "3 instructions, 30 executed, 40 stall samples" in a, a
assert "long_sb 75.0%" in a and "wait 25.0%" in a, "stall reasons of k_a (Not Issued columns left out)"
assert "LOP3" in a and "BRA" in a, "opcodes, predicated ones too"
assert b.startswith("void k_b") and "1 instructions, 4 executed, 6 stall samples" in b, b
assert "HMMA         executed 100.0%  stalls 100.0%" in b, b
print("ok")

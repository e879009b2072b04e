#!/usr/bin/env python3
"""tools/sass_loops.py on a small cuobjdump listing of two kernels: the matching kernel's loops,
largest first, with their loads and products in order and instructions per weight load, the other kernel left out, and a clear
error when nothing matches."""
import subprocess, sys, tempfile

tool = sys.argv[1]


def function(name, lines):
    body = "\n".join(f"        /*{a:04x}*/                   {t} ;" + " " * 20 + "/* 0x0 */" for a, t in lines)
    return f"\n\t\tFunction : {name}\n\t.headerflags\t@\"EF_CUDA_SM90\"\n{body}\n"


listing = "\tcode for sm_90a\n" + function("_Z8k_decodePf", [
    (0x00, "LDC R1, c[0x0][0x28]"),
    (0x10, "LDG.E.NA.128.CONSTANT R4, desc[UR6][R2.64]"),      # the big loop starts here
    (0x20, "LDG.E.128.CONSTANT R8, desc[UR6][R12.64]"),
    (0x30, "@!P0 LD.E.U16 R14, desc[UR6][R16.64]"),
    (0x40, "HMMA.16816.F32.BF16 R20, R4, R8, R20"),
    (0x50, "LDG.E.64 R18, desc[UR6][R22.64+0x10]"),
    (0x60, "LOP3.LUT R5, R4, 0x81c081c0, RZ, 0xc0, !PT"),     # an inner loop 0x60-0x70
    (0x70, "@P1 BRA 0x60"),
    (0x80, "@!P0 BRA 0x10"),
    (0x90, "EXIT"),
]) + function("_Z7k_otherv", [(0x00, "HMMA.16816.F32.BF16 R0, R4, R8, R0"), (0x10, "@P0 BRA 0x0")])

with tempfile.NamedTemporaryFile("w", suffix=".sass") as f:
    f.write(listing)
    f.flush()
    run = lambda *a: subprocess.run([sys.executable, tool, f.name, *a], capture_output=True, text=True)
    out = run("k_decode", "--mix")
    missing = run("k_none")
print(out.stdout, out.stderr)
assert out.returncode == 0, out.stderr
lines = out.stdout.splitlines()
assert lines[0] == "_Z8k_decodePf" and "k_other" not in out.stdout, "only the matching kernel"
assert "loop 0x10-0x80: 8 instructions, 8.0 per weight load  Wxsmp" in lines[1], "the outer loop first, its loads and mma in order"
assert "loop 0x60-0x70: 2 instructions  " in out.stdout, "the inner loop second, no weight load: no per-load figure"
assert any(l.split() == ["1", "LOP3.LUT"] for l in lines), "opcode counts with --mix (predicates stripped)"
assert missing.returncode != 0 and "no function matches 'k_none'" in missing.stderr, missing.stderr
print("ok")

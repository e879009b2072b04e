#!/usr/bin/env python3
"""tools/pdl_sass_check.py on small cuobjdump listings: an activation load (non-coherent) or a
store issued before griddepcontrol.wait is reported with its kernel; the weights' streaming loads
before the wait, and a loop whose first pass waits (`if (!waited) wait`) before its activation
loads, are not; kernels that never wait are not checked; exit 1 on a violation, 0 when clean, 2
when no kernel in the input waits."""
import subprocess, sys, tempfile

tool = sys.argv[1]


def function(name, lines):
    body = "\n".join(f"        /*{a:04x}*/                   {t} ;" + " " * 20 + "/* 0x0 */" for a, t in lines)
    return f"\n\t\tFunction : {name}\n\t.headerflags\t@\"EF_CUDA_SM90\"\n{body}\n"


# The FP8 linears' bug: the activations' __ldg went out above the wait.
hoisted = function("_Z7hoistedPKfPf", [
    (0x00, "LDG.E.NA.128.CONSTANT R4, desc[UR6][R2.64]"),   # weights: allowed
    (0x10, "LDG.E.128.CONSTANT R8, desc[UR6][R12.64]"),     # activations: too early
    (0x20, "ACQBULK"),
    (0x30, "HMMA.16816.F32.BF16 R20, R4, R8, R20"),
    (0x40, "EXIT"),
])
# A loop whose first pass waits: `@P1 BRA` skips the wait once `waited` is set; the activation
# loads come after it, and the back edge reaches them again only after a wait.
loop = function("_Z4loopPKfPf", [
    (0x00, "LDG.E.NA.128.CONSTANT R4, desc[UR6][R2.64]"),
    (0x10, "ISETP.NE.AND P1, PT, R30, RZ, PT"),
    (0x20, "@P1 BRA 0x50"),
    (0x30, "IMAD.MOV.U32 R30, RZ, RZ, 0x1"),
    (0x40, "ACQBULK"),
    (0x50, "LDG.E.128.CONSTANT R8, desc[UR6][R12.64]"),
    (0x60, "HMMA.16816.F32.BF16 R20, R4, R8, R20"),
    (0x70, "@P2 BRA 0x0"),
    (0x80, "STG.E desc[UR6][R14.64], R20"),
    (0x90, "EXIT"),
])
# A store on the path that skips the wait altogether (an early return before it).
store = function("_Z5storePf", [
    (0x00, "@P0 BRA 0x30"),
    (0x10, "ACQBULK"),
    (0x20, "EXIT"),
    (0x30, "STG.E desc[UR6][R2.64], RZ"),
    (0x40, "EXIT"),
])
never_waits = function("_Z6nowaitPKf", [(0x00, "LDG.E.128.CONSTANT R8, desc[UR6][R12.64]"), (0x10, "EXIT")])
# A divergence branch is conditional: its target is followed too; an indirect one cannot be.
divergent = function("_Z3divPKf", [
    (0x00, "BRA.DIV UR4, 0x30"),
    (0x10, "ACQBULK"),
    (0x20, "EXIT"),
    (0x30, "LDG.E.64.CONSTANT R8, desc[UR6][R12.64]"),
    (0x40, "BRA 0x10"),
])
indirect = function("_Z8indirectPKf", [(0x00, "BRX R4 -0x10"), (0x10, "ACQBULK"), (0x20, "EXIT")])


def check(listing):
    with tempfile.NamedTemporaryFile("w", suffix=".sass") as f:
        f.write("\tcode for sm_90a\n" + listing)
        f.flush()
        return subprocess.run([sys.executable, tool, f.name], capture_output=True, text=True)


bad = check(hoisted + loop + store + never_waits + divergent + indirect)
print(bad.stdout, bad.stderr)
assert bad.returncode == 1, "violations exit 1"
assert "_Z7hoistedPKfPf: 1 instruction(s) before griddepcontrol.wait" in bad.stdout, "the hoisted activation load"
assert "0x0010 LDG.E.128.CONSTANT" in bad.stdout and "non-coherent load before the wait" in bad.stdout
assert "_Z5storePf: 1 instruction(s)" in bad.stdout and "global write before the wait" in bad.stdout
assert "_Z4loopPKfPf" not in bad.stdout, "the first pass waits before its activation loads"
assert "_Z6nowaitPKf" not in bad.stdout, "a kernel that never waits is not checked"
assert "_Z3divPKf: 1 instruction(s)" in bad.stdout, "the divergence branch's target"
assert "_Z8indirectPKf: 1 instruction(s)" in bad.stdout and "indirect branch before the wait" in bad.stdout
assert "5 kernels wait for the kernel ahead; 4 read or write before the wait" in bad.stdout

clean = check(loop + never_waits)
print(clean.stdout, clean.stderr)
assert clean.returncode == 0 and "1 kernels wait for the kernel ahead; 0 read or write" in clean.stdout

none = check(never_waits)
assert none.returncode == 2 and "no kernel that waits" in none.stderr, none.stderr

print("ok")

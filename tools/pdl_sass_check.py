#!/usr/bin/env python3
"""Checks the machine code of CUDA kernels against the contract of an early launch (launch.cuh):
before `griddepcontrol.wait` (SASS `ACQBULK`) a kernel may read only immutable data (weights)
and may write nothing in global memory. The compiler keeps the source's loads after the wait
unless they are non-coherent (`__ldg`, `const __restrict__`): ptxas treats their data as
constant for the kernel's whole run and may issue them early, and did (the FP8 linears' activation
loads went out before the wait and decoded NaN on the H200). So in every kernel that waits, this
reports each instruction reachable from the entry without passing a wait that is
  - a non-coherent global load other than the weights' streaming loads (`LDG...CONSTANT` without
    `.NA`, the L1::no_allocate of `load_streaming`): data an earlier kernel may still be writing;
  - a global store, atomic or reduction: memory an earlier kernel may still be reading;
  - an indirect branch, whose targets the walk cannot follow (so it cannot vouch for them).
A conditional branch a few instructions ahead over a wait that runs straight on into the branch's
target is the `if (!waited) wait` of a loop's first pass: before the first wait it is not taken,
and the walk follows the wait.

Input: objects, static libraries or cubins (their embedded CUDA ELF images are extracted and
disassembled: sass_listing.py says with what), or SASS listings (`cuobjdump -sass` output, *.sass).

Usage: tools/pdl_sass_check.py FILE... ; exit 0 clean, 1 violations, 2 could not check."""
import re, sys

from sass_listing import functions, listings

TARGET = re.compile(r"0x([0-9a-f]+)")
LOOKAHEAD = 6  # instructions between a branch and the wait it skips


def opcode(text):
    body = text.split(None, 1)[1] if text.startswith("@") else text
    return body.split()[0] if body.split() else ""


def violation(op):
    if op.startswith("LDG") and "CONSTANT" in op and ".NA" not in op:
        return "non-coherent load before the wait"
    if op.startswith(("STG", "ATOMG", "REDG", "RED.", "ATOM.")) or op in ("ST", "RED", "ATOM") or op.startswith("ST.E"):
        return "global write before the wait"
    return None


def skipped_wait(code, branch, target):
    """Whether code[branch + 1 : target] holds a wait that runs straight on into target: the
    `if (!waited) wait` of a loop, whose branch is not taken before the first wait. An early exit
    over a wait is not that (the wait's path never reaches the target)."""
    waits = [j for j in range(branch + 1, target) if opcode(code[j][1]) == "ACQBULK" and not code[j][1].startswith("@")]
    return bool(waits) and all(not opcode(code[j][1]).startswith(("BRA", "BRX", "JMP", "JMX", "EXIT", "RET"))
                               for j in range(waits[-1], target))


def check_function(code):
    """Violations [(address, instruction, why)] of one function's [(address, text)], or None when
    it never waits."""
    if not any(opcode(t) == "ACQBULK" for _, t in code):
        return None
    index = {a: k for k, (a, _) in enumerate(code)}
    seen, stack, found = set(), [0], []
    while stack:
        k = stack.pop()
        while k < len(code) and k not in seen:
            seen.add(k)
            address, text = code[k]
            predicated, op = text.startswith("@"), opcode(text)
            if op == "ACQBULK" and not predicated:
                break
            why = violation(op)
            if why:
                found.append((address, text, why))
            if op.startswith("BRX") or op.startswith("JMX"):
                found.append((address, text, "indirect branch before the wait: its targets are not followed"))
                break
            if op.startswith("BRA") or op.startswith("JMP"):
                # BRA.DIV, BRA.U.ANY: taken on a condition of their own, like a predicated branch
                conditional = predicated or op not in ("BRA", "JMP")
                m = TARGET.search(text.split(None, 1)[1] if predicated else text)
                target = index.get(int(m.group(1), 16)) if m else None
                skips_wait = conditional and target is not None and 0 < target - k <= LOOKAHEAD and skipped_wait(code, k, target)
                if target is not None and not skips_wait:
                    stack.append(target)
                if not conditional:
                    break
            if (op.startswith("EXIT") or op.startswith("RET") or op.startswith("BPT.TRAP")) and not predicated:
                break
            k += 1
    return sorted(found)


def main(paths):
    if not paths:
        print(__doc__.split("Usage: ")[1].split("\n")[0], file=sys.stderr)
        return 2
    waiting = bad = 0
    try:
        for path in paths:
            for listing in listings(path):
                for name, code in functions(listing):
                    found = check_function(code)
                    if found is None:
                        continue
                    waiting += 1
                    if found:
                        bad += 1
                        print(f"{path}: {name}: {len(found)} instruction(s) before griddepcontrol.wait")
                        for address, text, why in found[:4]:
                            print(f"  {address:#06x} {text}  ({why})")
    except (OSError, RuntimeError) as e:
        print(f"pdl_sass_check: {e}", file=sys.stderr)
        return 2
    if waiting == 0:
        print("pdl_sass_check: no kernel that waits (griddepcontrol.wait) in the input", file=sys.stderr)
        return 2
    print(f"pdl_sass_check: {waiting} kernels wait for the kernel ahead; {bad} read or write before the wait")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""The loops of CUDA kernels in a `cuobjdump -sass` listing: for each function whose mangled name
matches REGEX, its largest loops (a backward branch's span) with their instruction count, the order
of their memory loads and tensor-core products as one letter each, and (--mix) their opcode counts.
Shows at a glance whether a decode loop issues all its weight loads before its first product.

Letters: W streaming weight load (ld.global.nc.L1::no_allocate: LDG.E.NA), x other 16-byte global
load (activations), s narrow global load (scales), p 8-byte global load (a pointer), m mma.

Usage (on the GPU machine, no cuobjdump here):
  cuobjdump -sass build-gpu/src/backend/cuda/CMakeFiles/tetra_cuda.dir/moe.cu.o > moe.sass
  tools/sass_loops.py moe.sass 'expert_up_mma_kernelILNS_12WeightFormatE4ELi1E' [--loops 2] [--mix]"""
import argparse, collections, re, signal

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRANCH = re.compile(r"BRA (0x[0-9a-f]+)")
PREDICATE = re.compile(r"^@!?U?P[T\d]+ ")


def letter(text):
    if "HMMA" in text:
        return "m"
    if "LDG.E.NA.128" in text:
        return "W"
    if "LDG.E.128" in text:
        return "x"
    if "LDG.E.64" in text:
        return "p"
    if re.search(r"\bLDG?\.E(\.U8|\.U16|\.S16)?\s", text):
        return "s"
    return ""


def functions(listing):
    """(name, [(address, instruction text)]) per function of the listing."""
    for part in re.split(r"\n\s+Function : ", listing)[1:]:
        name = part.split("\n", 1)[0].strip()
        code = [(int(m.group(1), 16), re.sub(r"\s+", " ", m.group(2))) for m in map(INSTRUCTION.match, part.splitlines()) if m]
        yield name, code


def loops(code):
    """(first, last) address of every backward branch's span, largest first."""
    spans = set()
    for address, text in code:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < address:
            spans.add((int(m.group(1), 16), address))
    return sorted(spans, key=lambda s: s[0] - s[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("listing", help="cuobjdump -sass output")
    parser.add_argument("pattern", help="regular expression on the mangled function name")
    parser.add_argument("--loops", type=int, default=2, help="loops shown per function (largest first)")
    parser.add_argument("--mix", action="store_true", help="also each loop's opcode counts")
    args = parser.parse_args()
    with open(args.listing) as f:
        listing = f.read()
    found = False
    for name, code in functions(listing):
        if not re.search(args.pattern, name):
            continue
        found = True
        print(name)
        for first, last in loops(code)[: args.loops]:
            body = [text for address, text in code if first <= address <= last]
            print(f"  loop {first:#x}-{last:#x}: {len(body)} instructions  "
                  + "".join(letter(t) for t in body))
            if args.mix:
                mix = collections.Counter(PREDICATE.sub("", t).split()[0] for t in body)
                for op, n in mix.most_common(25):
                    print(f"    {n:5d} {op}")
    if not found:
        raise SystemExit(f"no function matches {args.pattern!r}")


if __name__ == "__main__":
    main()

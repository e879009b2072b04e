#!/usr/bin/env python3
"""The loops of CUDA kernels in a `cuobjdump -sass` listing, or in an object, static library or
cubin (disassembled as sass_listing.py says): for each function whose mangled name
matches REGEX, its largest loops (a backward branch's span) with their instruction count, the order
of their memory loads and tensor-core products as one letter each, and (--mix) their opcode counts.
Shows at a glance whether a decode loop issues all its weight loads before its first product.

A loop with streaming weight loads also gets its instructions per such load (one 16-byte load a
lane: 512 bytes a warp). Times the bytes an SM must take per clock at copy bandwidth (H200: 4.26
TB/s / 132 SMs / 1.98 GHz = 16.3 bytes) over 512, that is the warp instructions an SM must issue
per clock to stream at copy bandwidth; an SM issues at most four (one a scheduler), fewer when
they wait on each other. Both sides of a branch inside the loop count, so a loop with two
variants of its body (MXFP4's large scales) reads about twice its real cost.

Letters: W streaming weight load (ld.global.nc.L1::no_allocate: LDG.E.NA), x other 16-byte global
load (activations), s narrow global load (scales), p 8-byte global load (a pointer), m mma.

Usage:
  tools/sass_loops.py build/src/backend/cuda/CMakeFiles/tetra_cuda.dir/moe.cu.o \
    'expert_up_mma_kernelILNS_12WeightFormatE4ELi1E' [--loops 2] [--mix]"""
import argparse, collections, re, signal

from sass_listing import functions, listings

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`

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
    parser.add_argument("input", help="cuobjdump -sass output (*.sass), or an object, library or cubin")
    parser.add_argument("pattern", help="regular expression on the mangled function name")
    parser.add_argument("--loops", type=int, default=2, help="loops shown per function (largest first)")
    parser.add_argument("--mix", action="store_true", help="also each loop's opcode counts")
    args = parser.parse_args()
    try:
        found_functions = [f for listing in listings(args.input) for f in functions(listing)]
    except (OSError, RuntimeError) as e:
        raise SystemExit(f"sass_loops: {e}")
    found = False
    for name, code in found_functions:
        if not re.search(args.pattern, name):
            continue
        found = True
        print(name)
        for first, last in loops(code)[: args.loops]:
            body = [text for address, text in code if first <= address <= last]
            letters = "".join(letter(t) for t in body)
            weights = letters.count("W")
            per_load = f", {len(body) / weights:.1f} per weight load" if weights else ""
            print(f"  loop {first:#x}-{last:#x}: {len(body)} instructions{per_load}  {letters}")
            if args.mix:
                mix = collections.Counter(PREDICATE.sub("", t).split()[0] for t in body)
                for op, n in mix.most_common(25):
                    print(f"    {n:5d} {op}")
    if not found:
        raise SystemExit(f"no function matches {args.pattern!r}")


if __name__ == "__main__":
    main()

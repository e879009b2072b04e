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

Input: objects, static libraries or cubins (their embedded CUDA ELF images are extracted), or SASS
listings (`cuobjdump -sass` output, *.sass). The disassembler: `cuobjdump` of the CUDA toolkit
(CUDA_PATH, /usr/local/cuda, PATH), or TETRA_CUOBJDUMP (scripts/setup.sh fetches Debian's CUDA 11.8
cuobjdump where the toolkit has none; that one reads sm_90 images once their ELF header is written
in its older form, which this does).

Usage: tools/pdl_sass_check.py FILE... ; exit 0 clean, 1 violations, 2 could not check."""
import concurrent.futures, os, re, shutil, struct, subprocess, sys, tempfile

from sass_loops import functions  # a listing's functions: (name, [(address, instruction)])

TARGET = re.compile(r"0x([0-9a-f]+)")
EM_CUDA = 190
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


def cuda_images(data):
    """The CUDA ELF images inside an object, archive or cubin (uncompressed fatbin entries)."""
    start = 0
    while (start := data.find(b"\x7fELF", start)) >= 0:
        if len(data) >= start + 64 and data[start + 4] == 2 and struct.unpack_from("<H", data, start + 18)[0] == EM_CUDA:
            shoff, = struct.unpack_from("<Q", data, start + 40)
            phoff, = struct.unpack_from("<Q", data, start + 32)
            phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, start + 54)
            end = max(shoff + shentsize * shnum, phoff + phentsize * phnum)
            for s in range(shnum):  # a section may lie after the header table
                off, size = struct.unpack_from("<QQ", data, start + shoff + s * shentsize + 24)
                stype, = struct.unpack_from("<I", data, start + shoff + s * shentsize + 4)
                if stype != 8:  # SHT_NOBITS
                    end = max(end, off + size)
            yield data[start:start + end]
            start += end
        else:
            start += 4


def legacy_header(image):
    """The image with its ELF header in the form CUDA 11 tools read (ABI 7, sm in the low flags),
    or None when it is another architecture than sm_90."""
    b = bytearray(image)
    if b[8] < 8:
        return bytes(b)
    flags, = struct.unpack_from("<I", b, 0x30)
    sm = (flags >> 8) & 0xFF
    if sm != 90:
        return None
    b[7], b[8] = 0x33, 7
    struct.pack_into("<I", b, 0x14, 0x76)
    struct.pack_into("<I", b, 0x30, sm | (sm << 16) | 0x500)
    return bytes(b)


def find_cuobjdump():
    if os.environ.get("TETRA_CUOBJDUMP"):
        return os.environ["TETRA_CUOBJDUMP"]
    for root in (os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "cuobjdump"), os.X_OK):
            return os.path.join(root, "bin", "cuobjdump")
    return shutil.which("cuobjdump")


def cuobjdump_major(tool):
    out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+)", out)
    return int(m.group(1)) if m else 0


def listings(path, tool, legacy):
    """SASS text of each CUDA image in path (the images disassembled side by side, one a core)."""
    if path.endswith(".sass"):
        yield open(path).read()
        return
    with open(path, "rb") as f:
        images = list(cuda_images(f.read()))
    if not images:
        raise RuntimeError(f"{path}: no uncompressed CUDA ELF image inside")
    env = dict(os.environ, NVDISASM_PATH=os.path.dirname(os.path.abspath(tool)))  # cuobjdump runs nvdisasm
    with tempfile.TemporaryDirectory() as tmp:
        cubins = []
        for n, image in enumerate(images):
            if legacy:
                image = legacy_header(image)
                if image is None:
                    print(f"{path}: image {n} is not sm_90, which CUDA 11's cuobjdump cannot read: not checked")
                    continue
            cubins.append(os.path.join(tmp, f"{n}.cubin"))
            with open(cubins[-1], "wb") as f:
                f.write(image)
        disassemble = lambda cubin: subprocess.run([tool, "-sass", cubin], capture_output=True, text=True, env=env)
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            for run in pool.map(disassemble, cubins):
                if run.returncode != 0:
                    raise RuntimeError(f"{path}: {tool} -sass failed: {run.stderr.strip()}")
                yield run.stdout


def main(paths):
    if not paths:
        print(__doc__.split("Usage: ")[1].split("\n")[0], file=sys.stderr)
        return 2
    tool = find_cuobjdump()
    needs_tool = any(not p.endswith(".sass") for p in paths)
    if needs_tool and not tool:
        print("pdl_sass_check: no cuobjdump (CUDA toolkit, PATH or TETRA_CUOBJDUMP; scripts/setup.sh fetches one)", file=sys.stderr)
        return 2
    legacy = needs_tool and cuobjdump_major(tool) < 12
    waiting = bad = 0
    try:
        for path in paths:
            for listing in listings(path, tool, legacy):
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

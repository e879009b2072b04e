#!/usr/bin/env python3
"""SASS listings of CUDA kernels, for the tools that read machine code (sass_loops.py,
pdl_sass_check.py): the functions of a `cuobjdump -sass` listing, and the listings of objects,
static libraries and cubins, whose embedded CUDA ELF images are cut out and disassembled.

The disassembler: TETRA_CUOBJDUMP, else `cuobjdump` of the CUDA toolkit (CUDA_PATH, /usr/local/cuda,
PATH), else /usr/local/lib/tetra/cuobjdump (where scripts/setup.sh puts Debian's CUDA 11.8 one when
the toolkit has none). That one reads sm_90 images once their ELF header is written in its older
form, which this does; other architectures' images are left out with a line saying so."""
import concurrent.futures, os, re, shutil, struct, subprocess, sys, tempfile

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
EM_CUDA = 190


def functions(listing):
    """(name, [(address, instruction text)]) per function of the listing."""
    for part in re.split(r"\n\s+Function : ", listing)[1:]:
        name = part.split("\n", 1)[0].strip()
        code = [(int(m.group(1), 16), re.sub(r"\s+", " ", m.group(2))) for m in map(INSTRUCTION.match, part.splitlines()) if m]
        yield name, code


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
    found = shutil.which("cuobjdump")
    fetched = "/usr/local/lib/tetra/cuobjdump"  # where scripts/setup.sh puts Debian's
    return found or (fetched if os.access(fetched, os.X_OK) else None)


def cuobjdump_major(tool):
    out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+)", out)
    return int(m.group(1)) if m else 0


def listings(path):
    """SASS text of each CUDA image in path (the images disassembled side by side, one a core), or
    of the listing itself for a *.sass file. RuntimeError when it cannot be read or disassembled."""
    if path.endswith(".sass"):
        with open(path) as f:
            yield f.read()
        return
    tool = find_cuobjdump()
    if not tool:
        raise RuntimeError("no cuobjdump (CUDA toolkit, PATH or TETRA_CUOBJDUMP; scripts/setup.sh fetches one)")
    legacy = cuobjdump_major(tool) < 12
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
                    print(f"{path}: image {n} is not sm_90, which CUDA 11's cuobjdump cannot read: left out", file=sys.stderr)
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

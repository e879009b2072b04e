#!/usr/bin/env python3
"""tools/sass_listing.py: the CUDA ELF images it cuts out of an object, the header it rewrites for
CUDA 11's cuobjdump (sm_90 only), and the error naming a file that holds no image."""
import importlib.util, os, struct, sys, tempfile

tool = sys.argv[1]
spec = importlib.util.spec_from_file_location("sass_listing", tool)
listing = importlib.util.module_from_spec(spec)
spec.loader.exec_module(listing)

# The images inside an object: a CUDA ELF (CUDA 13's header: ABI 8, sm_90a) amid other bytes is
# found whole, its sections included; the header rewritten for CUDA 11's cuobjdump names sm_90.

def cuda_elf(payload):
    header = bytearray(64)
    header[0:4], header[4], header[5], header[7], header[8] = b"\x7fELF", 2, 1, 0x41, 8
    struct.pack_into("<HHI", header, 16, 2, listing.EM_CUDA, 1)
    struct.pack_into("<QQQI", header, 24, 0, 0, 64 + len(payload), 0x6005A04)  # entry, phoff, shoff, flags
    struct.pack_into("<HHHHHH", header, 52, 64, 56, 0, 64, 2, 0)  # no program headers, two sections
    null = bytes(64)
    text = bytearray(64)
    struct.pack_into("<IIQQQQ", text, 0, 1, 1, 0, 0, 64, len(payload))  # PROGBITS at 64
    return bytes(header) + payload + null + bytes(text)


image = cuda_elf(b"SASS" * 8)
found = list(listing.cuda_images(b"host ELF\x7fELF\x02junk" + image + b"trailing bytes"))
assert found == [image], "one image, cut at its end"
legacy = listing.legacy_header(image)
assert legacy[7] == 0x33 and legacy[8] == 7 and struct.unpack_from("<I", legacy, 0x30)[0] == 0x5A055A
sm100 = bytearray(image)
struct.pack_into("<I", sm100, 0x30, 0x6006404)
assert listing.legacy_header(bytes(sm100)) is None, "not sm_90: left out"
# A file without an image: an error naming it (any disassembler: none is run).
os.environ["TETRA_CUOBJDUMP"] = "/bin/true"
with tempfile.NamedTemporaryFile(suffix=".o") as f:
    f.write(b"host object, no CUDA image")
    f.flush()
    try:
        list(listing.listings(f.name))
        raise AssertionError("no error")
    except RuntimeError as e:
        assert f"{f.name}: no uncompressed CUDA ELF image inside" in str(e), e
print("ok")

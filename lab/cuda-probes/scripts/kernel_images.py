#!/usr/bin/env python3
"""The sm_90 machine code of the CUDA backend's kernels, without a GPU.

    LD_LIBRARY_PATH=<site-packages>/nvidia/cu13/lib python3 lab/cuda-probes/scripts/kernel_images.py
        [UNIT ...] [--arch sm_90] [--lineinfo] [--resources] [--out DIR]

Compiles each unit of shaders/cuda with NVRTC as the backend does (backend-cuda's module.rs:
lde.cu and hash.cu one kernel per program, `-DKERNEL_SELECT=1 -DWANT_<kernel>=1`; the other
files whole) and prints, per unit, the CUBIN's size and SHA-256. A unit is `lde.cu:<kernel>`,
`hash.cu:<kernel>` or a light file's name; the default is every unit.

- Without `--lineinfo` (the default) the image holds no source line numbers, so two checkouts
  whose kernels compile to the same machine code print the same digest: run it before and after
  an edit of a kernel file (comments, dead code, a refactor) to show that the edit changed no
  instruction. `--lineinfo` compiles exactly as the backend does. Compare digests of runs with
  the same flags: every flag (`--resources` too) changes the image's bytes.
- `--resources` prints ptxas's report (registers, spills, shared memory) of each unit.
- `--out DIR` writes `<unit>.cubin` there, for `nvdisasm` / `cuobjdump -sass`.
"""

import argparse
import ctypes
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CUDA = os.path.join(ROOT, "shaders", "cuda")
HEADERS = ["common.cuh", "hashes.cuh", "poseidon2.cuh", "poseidon2_constants.cuh"]
FILES = ["transpose.cu", "copy.cu", "hash.cu", "merkle.cu", "lde.cu", "open.cu", "quotient.cu"]
PER_KERNEL = {"hash.cu", "lde.cu"}
GUARD = re.compile(r"^#if ALL_KERNELS \|\| WANT_(\w+)\s*$")


def units():
    """Every unit, as the backend compiles them: (file, kernel or None)."""
    out = []
    for f in FILES:
        if f in PER_KERNEL:
            with open(os.path.join(CUDA, f)) as src:
                out += [(f, m.group(1)) for m in map(GUARD.match, src.read().splitlines()) if m]
        else:
            out.append((f, None))
    return out


def label(unit):
    return f"{unit[0]}:{unit[1]}" if unit[1] else unit[0]


def check(nvrtc, status, what):
    if status != 0:
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        sys.exit(f"{what}: {nvrtc.nvrtcGetErrorString(status).decode()}")


def compile_unit(nvrtc, unit, arch, lineinfo, resources):
    """(CUBIN bytes, NVRTC log) of one unit."""
    name, kernel = unit
    with open(os.path.join(CUDA, name), "rb") as f:
        src = f.read()
    hdrs = []
    for h in HEADERS:
        with open(os.path.join(CUDA, h), "rb") as f:
            hdrs.append(f.read())
    arr = ctypes.c_char_p * len(HEADERS)
    prog = ctypes.c_void_p()
    status = nvrtc.nvrtcCreateProgram(
        ctypes.byref(prog), src, name.encode(), len(HEADERS), arr(*hdrs), arr(*[h.encode() for h in HEADERS])
    )
    check(nvrtc, status, "nvrtcCreateProgram")
    # backend-cuda's module.rs: compile_options and Unit::options.
    opts = [f"--gpu-architecture={arch}", "-std=c++17"] + (["-lineinfo"] if lineinfo else []) + ["-DNVRTC_BUILD=1"]
    if kernel:
        opts += ["-DKERNEL_SELECT=1", f"-DWANT_{kernel}=1"]
    if resources:
        opts.append("--ptxas-options=-v")
    copts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    status = nvrtc.nvrtcCompileProgram(prog, len(opts), copts)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    log = log.value.decode(errors="replace")
    if status != 0:
        sys.exit(f"{label(unit)} does not compile for {arch}:\n{log}")
    check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
    cubin = ctypes.create_string_buffer(size.value)
    check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw, log


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("units", nargs="*", help="lde.cu:<kernel>, hash.cu:<kernel> or a light file (default: all)")
    ap.add_argument("--arch", default="sm_90", help="an sm_XX target (CUBIN)")
    ap.add_argument("--lineinfo", action="store_true", help="compile with -lineinfo, as the backend does")
    ap.add_argument("--resources", action="store_true", help="print ptxas's resource report")
    ap.add_argument("--out", help="write <unit>.cubin into this directory")
    args = ap.parse_args()
    if not args.arch.startswith("sm_"):
        sys.exit(f"--arch {args.arch}: an sm_XX target (the digest is of a CUBIN)")
    try:
        nvrtc = ctypes.CDLL("libnvrtc.so.13")
    except OSError as e:
        sys.exit(f"NVRTC not found ({e}): pip install nvidia-cuda-nvrtc, put site-packages/nvidia/cu13/lib on LD_LIBRARY_PATH")
    known = {label(u): u for u in units()}
    chosen = args.units or list(known)
    for name in chosen:
        if name not in known:
            sys.exit(f"no unit {name}; the units are: {', '.join(known)}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    for name in chosen:
        cubin, log = compile_unit(nvrtc, known[name], args.arch, args.lineinfo, args.resources)
        print(f"{name:<36} {len(cubin):>8} B  sha256 {hashlib.sha256(cubin).hexdigest()}")
        if args.resources:
            print("\n".join("    " + line for line in log.splitlines() if line.strip()))
        if args.out:
            with open(os.path.join(args.out, name.replace(":", ".") + ".cubin"), "wb") as f:
                f.write(cubin)


if __name__ == "__main__":
    main()

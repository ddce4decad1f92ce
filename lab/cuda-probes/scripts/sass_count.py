#!/usr/bin/env python3
"""Static SASS instruction counts of the CUDA NTT kernels, without a GPU.

    LD_LIBRARY_PATH=<site-packages>/nvidia/cu13/lib python3 scripts/sass_count.py [KERNEL ...]
        [--cubins DIR] [--nvdisasm PATH] [--lines]

1. Unless --cubins names a directory of images already written, runs backend-cuda's ignored
   test `lde_sass_images`, which compiles every kernel of shaders/cuda/lde.cu for sm_90 one
   kernel per NVRTC program with the backend's own options (module.rs, `-lineinfo` included),
   plus the lazy butterfly floor kernels `bfly_floor_dit` / `bfly_floor_dif`.
2. Disassembles each CUBIN with `nvdisasm -gi` (pip package nvidia-cuda-nvdisasm; its `nvdisasm`
   is looked up on PATH, then next to the nvidia-cuda-nvrtc wheel's library).
3. Attributes every instruction to its source through the inlined line information: the field
   arithmetic by function (gl_mul_lazy with gl_reduce_words_lazy = "mul", gl_add_lazy = "add",
   gl_sub_lazy = "sub"), the rest of `reg_stage` (one radix-2 stage of a register window) by
   line (twiddle index, twiddle load, other), and the rest of the kernel by what its lines do.

Prints, per kernel: code size (instructions, bytes: 16 per sm_90 instruction), and for the
register-window stages (one `reg_stage<BIT>` body per bit of the radix, as `reg_stage_at` has
them: 5 x 16 = 80 butterflies, one radix-32 window; 4 x 8 = 32 for the radix-16 kernels, twice
that for the radix-16 inverse kernel's two copies) the opcode classes per part, per butterfly.
KERNEL
defaults to the lazy radix-32 passes and their power-of-two form. --lines prints the kernel's instructions per
source line.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHADERS = os.path.join(ROOT, "shaders", "cuda")
DEFAULT_KERNELS = [
    "ntt_dit_pass_lazy",
    "ntt_dif_pass_lazy",
    "ntt_dit_pass_pow2",
    "ntt_dif_pass_pow2",
    "bfly_floor",
]

# Opcode classes, in report order. IMAD forms issue to the FMA-heavy pipe; IADD3, LOP3, SHF,
# ISETP, SEL, LEA and PRMT to the ALU.
CLASSES = [
    ("IMAD", re.compile(r"^(IMAD|IMUL)")),
    ("IADD3", re.compile(r"^(IADD3|VIADD)")),
    ("LOP3", re.compile(r"^LOP3")),
    ("SHF", re.compile(r"^SHF")),
    ("ISETP", re.compile(r"^ISETP")),
    ("SEL", re.compile(r"^SEL")),
    ("LEA", re.compile(r"^LEA")),
    ("MOV", re.compile(r"^(MOV|PRMT|CS2R)")),
    ("LDG", re.compile(r"^LDG")),
    ("STG", re.compile(r"^STG")),
    ("LDS/STS", re.compile(r"^(LDS|STS)")),
    ("LDL/STL", re.compile(r"^(LDL|STL)")),
    ("BRA", re.compile(r"^(BRA|BRX|JMP|EXIT|RET|CALL|BSSY|BSYNC|WARPSYNC)")),
    ("uniform", re.compile(r"^(U|R2UR|S2UR)")),
]


def op_class(op):
    for name, rx in CLASSES:
        if rx.match(op):
            return name
    return "other"


def find_nvdisasm(arg):
    if arg:
        return arg
    found = shutil.which("nvdisasm")
    if found:
        return found
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        cand = os.path.join(os.path.dirname(d.rstrip("/")), "bin", "nvdisasm")
        if d and os.path.exists(cand):
            return cand
    try:
        import nvidia  # the pip wheels' namespace package

        for base in nvidia.__path__:
            cand = os.path.join(base, "cu13", "bin", "nvdisasm")
            if os.path.exists(cand):
                return cand
    except ImportError:
        pass
    sys.exit("nvdisasm not found: pip install nvidia-cuda-nvdisasm, or pass --nvdisasm")


def write_cubins(out_dir):
    env = dict(os.environ, SASS_OUT=out_dir, REQUIRE_NVRTC="1")
    cmd = ["cargo", "test", "-q", "-p", "backend-cuda", "--release", "--lib", "lde_sass_images", "--", "--ignored"]
    r = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout}")


class Functions:
    """Which function of a source file a line belongs to (the last definition at or above it)."""

    DEF = re.compile(r"(__device__|__global__).*?\b(\w+)\s*\(")

    def __init__(self):
        self.cache = {}

    def lines(self, path):
        base = os.path.basename(path)
        if base not in self.cache:
            src = os.path.join(SHADERS, base)
            text = open(src).read().splitlines() if os.path.exists(src) else []
            owner, cur = [], "?"
            for line in text:
                m = self.DEF.search(line)
                if m and not line.lstrip().startswith("//"):
                    cur = m.group(2)
                owner.append(cur)
            self.cache[base] = (text, owner)
        return self.cache[base]

    def function(self, path, line):
        text, owner = self.lines(path)
        return owner[line - 1] if 0 < line <= len(owner) else "?"

    # ntt_pass_reg's phases, by the comment that opens each (the lines from one to the next).
    PHASES = [
        ("// The first window", "load"),
        ("// Stages e:", "control"),
        ("// Exchange through shared memory", "exchange"),
        ("// Store.", "store"),
    ]

    def phase(self, path, line):
        """load, exchange, store or control: where `line` of ntt_pass_reg lies."""
        text, owner = self.lines(path)
        starts = []
        for marker, name in self.PHASES:
            at = [i + 1 for i, t in enumerate(text) if owner[i] == "ntt_pass_reg" and marker in t]
            if at:
                starts.append((at[0], name))
        current = "control"
        for start, name in sorted(starts):
            if line >= start:
                current = name
        return current

    def text(self, path, line):
        text, _ = self.lines(path)
        return text[line - 1].strip() if 0 < line <= len(text) else ""


LOC = re.compile(r'//## File "([^"]+)", line (\d+)')
INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
FUNC = re.compile(r"^\.text\.(\S+):")


def disassemble(nvdisasm, cubin):
    """{function: [(opcode, [(file, line), ...] innermost first)]}."""
    out = subprocess.run([nvdisasm, "-gi", "-c", cubin], stdout=subprocess.PIPE, check=True, text=True).stdout
    funcs, cur, stack, pending = {}, None, [], []
    for line in out.splitlines():
        m = FUNC.match(line.strip())
        if m:
            cur = m.group(1)
            funcs[cur] = []
            stack, pending = [], []
            continue
        m = LOC.search(line)
        if m:
            pending.append((m.group(1), int(m.group(2))))
            continue
        m = INSN.match(line)
        if m and cur is not None:
            if pending:
                stack, pending = pending, []
            funcs[cur].append((m.group(2), stack))
    return funcs


ARITH = {
    "gl_mul_lazy": "mul",
    "gl_reduce_words_lazy": "mul",
    "gl_add_lazy": "add",
    "gl_sub_lazy": "sub",
    "gl_mul": "mul",
    "gl_add": "add",
    "gl_sub": "sub",
    "gl_canon_rare": "add",
    "gl_mul_pow2_lazy": "mul 2^e",
    "gl_pow2_red": "mul 2^e",
    "gl_add_red": "add",
    "gl_sub_red": "sub",
}


def part(stack, fns):
    """(region, part) of one instruction from its inline stack."""
    names = [(fns.function(f, l), f, l) for f, l in stack]
    chain = [n for n, _, _ in names]
    inner = names[0] if names else ("?", "", 0)
    arith = ARITH.get(inner[0])
    if "reg_stage" in chain:
        region = "window"
        if arith:
            return region, arith
        # The innermost lde.cu line inside reg_stage.
        for n, f, l in names:
            if n == "reg_stage":
                t = fns.text(f, l)
                if "p.tw[" in t:
                    return region, "twiddle load"
                if "const u32 t =" in t:
                    return region, "twiddle index"
                if "tw_shift" in t or "low =" in t:
                    return region, "stage setup"
                return region, "other"
    if "dit_first_window_pow2" in chain or "dif_last_window_pow2" in chain:
        return "pow2 window", arith or "other"
    if "pow2_scale" in chain:
        return "pow2 scale", arith or "other"
    if "reg_stage_at" in chain:
        return "stage dispatch", "switch"
    if any(os.path.basename(f) == "bfly_floor.cu" for f, _ in stack):
        return "floor", arith or "load/store/index"
    if any(n in ("tile_exchange", "tile_put", "tile_get") for n in chain):
        return "exchange", arith or "exchange"
    for n, f, l in names:
        if n == "ntt_pass_reg":
            phase = fns.phase(f, l)
            return phase, arith or phase
    return "control", arith or "other"


def report(name, insns, fns, show_lines):
    n = len(insns)
    print(f"\n== {name}: {n} instructions, {16 * n} bytes ({16 * n / 1024:.1f} KiB)")
    by = collections.defaultdict(collections.Counter)
    for op, stack in insns:
        by[part(stack, fns)][op_class(op)] += 1
    cols = [c for c, _ in CLASSES] + ["other"]
    used = [c for c in cols if any(cnt[c] for cnt in by.values())]
    hdr = f"{'region':<15} {'part':<17} {'total':>6} " + " ".join(f"{c:>7}" for c in used)
    print(hdr)
    window = 0
    for key in sorted(by, key=lambda k: (k[0] != "window", k)):
        cnt = by[key]
        tot = sum(cnt.values())
        if key[0] == "window":
            window += tot
        print(f"{key[0]:<15} {key[1]:<17} {tot:>6} " + " ".join(f"{cnt[c]:>7}" for c in used))
    if window:
        # log2(R) reg_stage bodies (reg_stage_at's cases, one per bit) of R/2 butterflies each:
        # R = 16 for the radix-16 kernels (names with "16"), else 32; the radix-16 inverse kernel
        # has two copies of the pass (the last inverse pass's and the others', lde.cu's FINISH).
        log_r = 4 if "16" in name else 5
        half = 1 << (log_r - 1)
        copies = 2 if name == "ntt_dif_pass_lean16" else 1
        bflies = log_r * half * copies
        print(f"window ({copies} x {log_r} stages x {half} butterflies = {bflies}): {window} instructions, {window / bflies:.1f} per butterfly")
        for key in sorted(k for k in by if k[0] == "window"):
            print(f"  {key[1]:<17} {sum(by[key].values()) / bflies:6.2f} per butterfly")
    if show_lines:
        per_line = collections.Counter()
        for op, stack in insns:
            if stack:
                f, l = stack[0]
                per_line[(os.path.basename(f), l)] += 1
        for (f, l), c in sorted(per_line.items()):
            print(f"  {f}:{l:<5} {c:>5}  {fns.text(f, l)[:80]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", nargs="*", default=DEFAULT_KERNELS)
    ap.add_argument("--cubins", help="a directory of <kernel>.cubin written by lde_sass_images")
    ap.add_argument("--nvdisasm")
    ap.add_argument("--lines", action="store_true", help="instructions per innermost source line")
    args = ap.parse_args()
    nvdisasm = find_nvdisasm(args.nvdisasm)
    tmp = None
    cubins = args.cubins
    if not cubins:
        tmp = tempfile.mkdtemp(prefix="sass_count.")
        write_cubins(tmp)
        cubins = tmp
    fns = Functions()
    try:
        for k in args.kernels:
            path = os.path.join(cubins, f"{k}.cubin")
            if not os.path.exists(path):
                sys.exit(f"{path}: no such image (kernels are named as in lde.cu's WANT_ guards)")
            for fname, insns in disassemble(nvdisasm, path).items():
                report(fname, insns, fns, args.lines)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

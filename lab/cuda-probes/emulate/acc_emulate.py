#!/usr/bin/env python3
"""Runs the inline PTX of the 96-bit sums in shaders/cuda/common.cuh (gl_acc_add, gl_acc_sub,
gl_acc_reduce) on the host, instruction by instruction, and checks them against exact integers.

The host build of common.cuh (backend-cuda/tests/poseidon2_host.rs) compiles the portable branch,
not this PTX; the conformance suite checks the whole Poseidon2 kernel only on a GPU. This reads
the asm text of the device branch itself, so a wrong carry or sign in it shows here, on any
machine: a sum of up to 24 random terms (added and subtracted, u64 and 96-bit, edge values
included) must equal the integer sum, and its reduction must be congruent to it mod p.

Usage: python3 lab/cuda-probes/emulate/acc_emulate.py [CASES]   (no GPU; about 20 s for 100,000)
"""

import random
import re
import sys
from pathlib import Path

M32 = (1 << 32) - 1
P = 0xFFFFFFFF00000001
COMMON = Path(__file__).resolve().parents[3] / "shaders" / "cuda" / "common.cuh"


def device_asm(signature):
    """The instructions of the inline asm of the function declared `signature`: its first
    definition in common.cuh, the device branch (`#ifdef __CUDA_ARCH__` comes first)."""
    text = COMMON.read_text()
    start = text.index("asm(", text.index(signature))
    strings = re.findall(r'"((?:[^"\\]|\\.)*)"', text[start:text.index(': "=', start)])
    asm = "".join(strings).replace("\\n", "\n").replace("\\t", "")
    lines = [line.strip().rstrip(";") for line in asm.split("\n")]
    return [line for line in lines if line and line not in ("{", "}") and not line.startswith(".reg")]


class Machine:
    """A 32-bit register file with PTX's carry flag."""

    def __init__(self, operands):
        self.regs = {f"%{i}": v & M32 for i, v in enumerate(operands)}
        self.cf = 0

    def get(self, x):
        return int(x, 0) & M32 if re.fullmatch(r"-?\d+|0x[0-9a-fA-F]+", x) else self.regs[x]

    def run(self, program):
        for line in program:
            op, args = line.split(None, 1)
            d, a, b = [s.strip() for s in args.split(",")]
            a, b = self.get(a), self.get(b)
            base = op.split(".")[0]
            cc = ".cc" in op
            if base in ("add", "addc"):
                s = a + b + (self.cf if base == "addc" else 0)
                carry = s >> 32
            elif base in ("sub", "subc"):
                s = a - b - (self.cf if base == "subc" else 0)
                carry = 1 if s < 0 else 0
            elif base == "shr" and op.endswith(".s32"):
                s = (a - (1 << 32) if a >> 31 else a) >> b
                carry = None
            else:
                raise ValueError(f"unemulated instruction: {line}")
            if cc:
                self.cf = carry
            self.regs[d] = s & M32
        return self


def signed(x):
    return x - (1 << 32) if x >> 31 else x


def acc_op(program, a, b_words):
    lo, hi = a
    m = Machine([0, 0, 0, lo & M32, lo >> 32, hi & M32, *b_words]).run(program)
    return (m.regs["%1"] << 32) | m.regs["%0"], signed(m.regs["%2"])


def main():
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    add_u64 = device_asm("gl_acc gl_acc_add(gl_acc a, u64 b)")
    add_acc = device_asm("gl_acc gl_acc_add(gl_acc a, gl_acc b)")
    sub_u64 = device_asm("gl_acc gl_acc_sub(gl_acc a, u64 b)")
    reduce = device_asm("u64 gl_acc_reduce(gl_acc a)")
    rng = random.Random(7)
    edge = [0, 1, P - 1, P, P + 1, (1 << 64) - 1, 1 << 63, M32]
    word = lambda: rng.choice(edge) if rng.random() < 0.3 else rng.getrandbits(64)
    bad = 0
    for _ in range(cases):
        x = word()
        a, exact = (x, 0), x
        for _ in range(rng.randint(0, 24)):
            pick = rng.random()
            if pick < 0.2:
                b = (word(), rng.randint(0, 6))
                a = acc_op(add_acc, a, [b[0] & M32, b[0] >> 32, b[1]])
                exact += b[0] + (b[1] << 64)
            else:
                y = word()
                a = acc_op(add_u64 if pick < 0.6 else sub_u64, a, [y & M32, y >> 32])
                exact += y if pick < 0.6 else -y
        if a[0] + (a[1] << 64) != exact:
            bad += 1
            continue
        m = Machine([0, 0, a[0] & M32, a[0] >> 32, a[1] & M32]).run(reduce)
        r = (m.regs["%1"] << 32) | m.regs["%0"]
        if (r - exact) % P != 0:
            bad += 1
            if bad <= 3:
                print(f"reduce of lo {a[0]:#x} hi {a[1]}: {r:#x}, not {exact % P:#x} mod p")
    print(f"{cases - bad} of {cases} sums and reductions exact")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Packs the workspace's GPU suites for a machine that has a GPU but no Rust toolchain.

Builds (release, every feature) the test binaries, the prove bench and the executables the tests
run by path (`CARGO_BIN_EXE_*`: prover, commit-example, toy-prover), then writes one lane per
directory under `.device/<lane>/`: `pack.tar.xz` (the binaries), `tests.txt` (one line per
binary: file, kind, target name), and `run.sh` with `run_common.sh` (from this folder). Lanes:

- `adapter`: plonky3-adapter's test binaries and the prove bench;
- `suites`: every other test binary, with the executables the tests run by path.

Each lane stays under about 50 MB compressed, so one lane and a few files fit a 64 MiB carry.

    python3 lab/gpu-suite/pack.py adapter suites      # from the repository root
    # on the GPU machine, from the repository root:
    OUT=/some/dir bash .device/adapter/run.sh       # logs and summary.txt under $OUT

The build is the slow part on a 2-core machine (about 30 minutes from clean, most of it the CUDA
backend's kernel images; they are kept in `<target>/kernel-images` afterwards).
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXECUTABLES = ["prover", "commit-example", "toy-prover"]


def cargo_json(args):
    """The artifacts of a `cargo ... --message-format=json` build, failing loudly."""
    out = subprocess.run(["cargo", *args, "--message-format=json"], stdout=subprocess.PIPE, check=True)
    for line in out.stdout.decode().splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            yield msg


def main(lanes):
    unknown = set(lanes) - {"adapter", "suites"}
    if not lanes or unknown:
        sys.exit(f"usage: pack.py adapter|suites ... (unknown: {sorted(unknown)})")
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], stdout=subprocess.PIPE, check=True)
    os.chdir(root.stdout.decode().strip())
    tests = list(cargo_json(["test", "--release", "--workspace", "--all-features", "--no-run"]))
    bench = list(cargo_json(["bench", "--workspace", "--all-features", "--bench", "prove", "--no-run"]))
    subprocess.run(["cargo", "build", "--release", "--workspace", "--all-features", "--bins"], check=True)
    for lane in lanes:
        pack(lane, tests, bench)


def pack(lane, tests, bench):
    chosen = {}
    for msg in tests + bench:
        adapter = "plonky3-adapter" in msg["package_id"]
        is_bench = "bench" in msg["target"]["kind"]
        if not (msg["profile"]["test"] or is_bench):
            continue
        if (lane == "adapter") != adapter or (is_bench and lane != "adapter"):
            continue
        exe = msg["executable"]
        chosen[os.path.basename(exe)] = (msg["target"]["kind"][0], msg["target"]["name"], exe)
    out = os.path.join(".device", lane)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "bin"))
    os.makedirs(os.path.join(out, "rel"))
    with open(os.path.join(out, "tests.txt"), "w") as listing:
        for name, (kind, target, exe) in sorted(chosen.items()):
            shutil.copy2(exe, os.path.join(out, "bin", name))
            subprocess.run(["strip", os.path.join(out, "bin", name)], check=False)
            listing.write(f"{name} {kind} {target}\n")
    for name in EXECUTABLES if lane == "suites" else []:
        shutil.copy2(os.path.join("target", "release", name), os.path.join(out, "rel", name))
        subprocess.run(["strip", os.path.join(out, "rel", name)], check=False)
    subprocess.run(["tar", "cJf", "pack.tar.xz", "bin", "rel", "tests.txt"], cwd=out, check=True)
    shutil.rmtree(os.path.join(out, "bin"))
    shutil.rmtree(os.path.join(out, "rel"))
    shutil.copy2(os.path.join(HERE, "run_common.sh"), os.path.join(out, "run_common.sh"))
    shutil.copy2(os.path.join(HERE, f"run_{lane}.sh"), os.path.join(out, "run.sh"))
    size = os.path.getsize(os.path.join(out, "pack.tar.xz")) / 2**20
    print(f"{out}: {len(chosen)} binaries, {size:.1f} MiB")


if __name__ == "__main__":
    main(sys.argv[1:])

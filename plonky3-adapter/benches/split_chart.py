#!/usr/bin/env python3
"""Draws the prove bench's split as an SVG: one pair of stacked bars per statement, stock above
ours, each bar split into Plonky3's phases (commit, quotient, quotient commit, open, FRI, other).

    cargo bench -p plonky3-adapter --features cuda --bench prove | tee prove.log
    python3 plonky3-adapter/benches/split_chart.py prove.log "H100, 2026-12-06" > docs/prove-split.svg

It reads the bench's `PROOF <statement> stock: total ... = commit ... + ...` and
`PROOF <statement> ours: ...` lines (the best run of each side) and nothing else; the standard
library only.
"""

import re
import sys
from html import escape

PHASES = ["commit", "quotient", "quotient commit", "open", "fri", "other"]
COLOURS = ["#4e79a7", "#e15759", "#f28e2b", "#76b7b2", "#59a14f", "#bab0ac"]
LINE = re.compile(r"^PROOF (?P<label>.+?) (?P<side>stock|ours):\s+total (?P<total>[\d.]+) ms = (?P<rest>.*)$")
TERM = re.compile(r"(?P<name>[a-z ]+?) (?P<ms>-?[\d.]+)")


def parse(lines):
    """{statement: {side: (total, {phase: ms})}} in the order the statements first appear."""
    out = {}
    for line in lines:
        m = LINE.match(line.strip())
        if not m:
            continue
        rest = m.group("rest").split(" [")[0]
        phases = {}
        for term in rest.split(" + "):
            t = TERM.fullmatch(term.strip())
            if t and t.group("name") in PHASES:
                phases[t.group("name")] = max(0.0, float(t.group("ms")))
        out.setdefault(m.group("label"), {})[m.group("side")] = (float(m.group("total")), phases)
    return {k: v for k, v in out.items() if "stock" in v and "ours" in v}


def svg(statements, caption):
    width, left, right, bar, gap, top = 980, 330, 20, 18, 16, 56
    rows = len(statements)
    height = top + rows * (2 * bar + gap) + 40
    scale_max = max(max(s["stock"][0], s["ours"][0]) for s in statements.values())
    px = (width - left - right) / scale_max
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<text x="10" y="20" font-size="14" font-weight="bold">Whole proof, stock Plonky3 against '
        f"plonky3-adapter ({escape(caption)})</text>",
    ]
    x = 10
    for name, colour in zip(PHASES, COLOURS):
        out.append(f'<rect x="{x}" y="32" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{x + 16}" y="42">{name}</text>')
        x += 24 + 7 * len(name)
    y = top
    for label, sides in statements.items():
        ratio = sides["stock"][0] / sides["ours"][0]
        out.append(f'<text x="10" y="{y + bar + 4}">{escape(label)}</text>')
        out.append(f'<text x="10" y="{y + bar + 18}" fill="#555">{ratio:.2f}x</text>')
        for side in ("stock", "ours"):
            total, phases = sides[side]
            x = left
            for name, colour in zip(PHASES, COLOURS):
                w = phases.get(name, 0.0) * px
                if w > 0:
                    out.append(
                        f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar - 2}" fill="{colour}">'
                        f"<title>{side} {name}: {phases.get(name, 0.0):.1f} ms</title></rect>"
                    )
                x += w
            out.append(f'<text x="{left - 6}" y="{y + bar - 6}" text-anchor="end" fill="#555">{side}</text>')
            out.append(f'<text x="{x + 4:.1f}" y="{y + bar - 6}">{total:.1f} ms</text>')
            y += bar
        y += gap
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: split_chart.py BENCH_OUTPUT CAPTION > chart.svg")
    with open(sys.argv[1], encoding="utf-8") as f:
        statements = parse(f)
    if not statements:
        sys.exit(f"{sys.argv[1]}: no pair of 'PROOF ... stock:' and 'PROOF ... ours:' lines")
    sys.stdout.write(svg(statements, sys.argv[2]))


if __name__ == "__main__":
    main()

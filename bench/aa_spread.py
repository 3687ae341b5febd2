#!/usr/bin/env python3
"""How far apart pairs of runs read, against a reference pair: is a switch (telemetry on, a pad,
another mode) any wider than two runs without it?

    python bench/aa_spread.py ROOT REF_A:REF_B A:B [A:B ...] [--metric speedup] [--boot 4000] [--seed 1]

ROOT holds the run dirs; each pair names two of them. For the graph-timed rows measured in both
runs of a pair, ``|ln(B/A)|`` of the metric (the speedup, or ``lib_ms`` / ``torch_ms``); for each
pair its median and p90, and the p90's difference from the reference pair's with a 95 % interval
from a bootstrap over ops (the op is the unit of replication: its rows share its process). An
interval that holds 0 says the switch moved nothing the reference pair's own spread does not
cover. The figures of docs/telemetry.md and bench/results/2026-12-04-h200-noise-three-draws.md.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from opscreen.results.summary import COL, load_or_build  # noqa: E402


def spreads(a, b, metric: str = "speedup") -> dict[str, list[float]]:
    """op -> ``|ln(B/A)|`` of ``metric`` over the graph rows both summaries measured."""
    def graph(s):
        return {(r[COL["op"]], r[COL["variant"]] or "", r[COL["dtype"]], r[COL["shape"]]): r[COL[metric]] for r in s.rows
                if r[COL["status"]] == "ok" and r[COL["torch_timer"]] == r[COL["lib_timer"]] == "graph"
                and isinstance(r[COL[metric]], (int, float)) and r[COL[metric]] > 0}
    ra, rb = graph(a), graph(b)
    out: dict[str, list[float]] = defaultdict(list)
    for k in sorted(ra.keys() & rb.keys()):
        out[k[0]].append(abs(math.log(rb[k] / ra[k])))
    return dict(out)


def quantile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] if xs else math.nan


def p90_difference(ref: dict, test: dict, boot: int = 4000, seed: int = 1) -> tuple[float, float, float]:
    """p90(test) - p90(ref) over the ops both hold, and its 95 % bootstrap interval (ops resampled)."""
    ops = sorted(ref.keys() & test.keys())
    if not ops:
        raise ValueError("the pairs share no op")

    def diff(pick):
        return quantile([x for o in pick for x in test[o]], 0.9) - quantile([x for o in pick for x in ref[o]], 0.9)

    rng = random.Random(seed)
    ds = sorted(diff([rng.choice(ops) for _ in ops]) for _ in range(boot))
    return diff(ops), ds[int(0.025 * (boot - 1))], ds[int(0.975 * (boot - 1))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="the folder that holds the run dirs")
    ap.add_argument("pairs", nargs="+", metavar="A:B", help="the reference pair first, then the pairs to judge")
    ap.add_argument("--metric", choices=("speedup", "lib_ms", "torch_ms"), default="speedup")
    ap.add_argument("--boot", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    pairs = [p.split(":") for p in a.pairs]
    if len(pairs) < 2 or any(len(p) != 2 for p in pairs):
        ap.error("give a reference pair and one or more pairs, each A:B")
    cache: dict[str, object] = {}

    def run(name):
        if name not in cache:
            cache[name] = load_or_build(Path(a.root) / name)[0]
        return cache[name]

    ref = spreads(run(pairs[0][0]), run(pairs[0][1]), a.metric)
    for k, (x, y) in enumerate(pairs):
        s = spreads(run(x), run(y), a.metric)
        flat = [v for vs in s.values() for v in vs]
        line = (f"{x}/{y}: {len(flat)} graph rows of {len(s)} ops, |ln B/A| of {a.metric} median "
                f"{100 * quantile(flat, 0.5):.2f} %, p90 {100 * quantile(flat, 0.9):.2f} %")
        if k:
            d, lo, hi = p90_difference(ref, s, a.boot, a.seed)
            line += (f"; p90 minus the reference's {100 * d:+.2f} points, 95 % interval by op "
                     f"[{100 * lo:+.2f}, {100 * hi:+.2f}]" + (" (holds 0)" if lo <= 0 <= hi else ""))
        else:
            line += " (reference)"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

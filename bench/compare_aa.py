"""What `opscreen compare` calls changed between two runs of one setup, by kernel size.

    python bench/compare_aa.py A B [A2 B2 ...] [--json OUT]

Each pair is a baseline A and a run B measured the same way (an A/A: a rerun, or a run that
differs on purpose in something that should not matter, such as where its memory lands).
Every pair is joined as ``opscreen compare A B --allow-mismatch all`` joins it, with its
default bands. Then the rows measured in both are counted by the size of their faster side
in A: under 10 us, 10-100 us, 100 us and more. For each size it prints the verdicts and how
many rows were called faster or slower. On an A/A pair, each of those is a false call. It
also prints the |change| that 90 % and 95 % of the rows stay within: the band that would have
called them all same. Pairs are pooled after the last pair.
(bench/results/2026-12-02-h200-autotune-placement.md)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from opscreen.results.compare import MUST_MATCH, SMALL_KERNEL_MS, compare_summaries  # noqa: E402
from opscreen.results.summary import load_or_build  # noqa: E402

BINS = ((SMALL_KERNEL_MS, "<10us"), (0.100, "10-100us"), (math.inf, ">=100us"))  # ms, by the faster side
VERDICTS = ("same", "faster", "slower", "unresolved")


def size_bin(torch_ms: float | None, lib_ms: float | None) -> str | None:
    """The bin of a row by its faster side (None when a side has no latency)."""
    if not torch_ms or not lib_ms:
        return None
    fast = min(torch_ms, lib_ms)
    return next(name for edge, name in BINS if fast < edge)


def pair_rows(a: Path, b: Path) -> list[tuple[str, str, float]]:
    """(bin, verdict, |ln(1 + change)|) of every row both runs measured."""
    sa, _ = load_or_build(a)
    sb, _ = load_or_build(b)
    out = []
    for r in compare_summaries(sa, sb, allow=MUST_MATCH).rows:
        size = size_bin(r.a_torch_ms, r.a_lib_ms)
        if size is None or r.change is None or r.verdict.value not in VERDICTS:
            continue
        out.append((size, r.verdict.value, abs(math.log1p(r.change))))
    return out


def quantile(values: list[float], q: float) -> float | None:
    """The q-quantile of ``values`` (nearest rank), None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def tally(rows: list[tuple[str, str, float]]) -> dict:
    """Per bin: rows, verdict counts, false calls (faster + slower), and the p90 / p95 |change| in %."""
    out = {}
    for _, name in BINS:
        mine = [(v, d) for b, v, d in rows if b == name]
        if not mine:
            continue
        counts = {v: sum(1 for x, _ in mine if x == v) for v in VERDICTS}
        deltas = [d for _, d in mine]
        out[name] = {"rows": len(mine), **counts, "called_changed": counts["faster"] + counts["slower"],
                     "p90_pct": round(100 * math.expm1(quantile(deltas, 0.90)), 3),
                     "p95_pct": round(100 * math.expm1(quantile(deltas, 0.95)), 3)}
    return out


def _line(label: str, t: dict) -> str:
    parts = [f"{name} {v['called_changed']}/{v['rows']} called changed (p90 {v['p90_pct']:.2f} %, "
             f"p95 {v['p95_pct']:.2f} %)" for name, v in t.items()]
    return f"{label}: " + "; ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="pairs of run dirs (or op dirs, or summary.json): A B [A2 B2 ...]")
    ap.add_argument("--json", help="write the tallies here")
    args = ap.parse_args(argv)
    if len(args.runs) % 2:
        ap.error(f"give runs in pairs (A B ...); got {len(args.runs)}")
    pooled: list = []
    report = {"pairs": {}}
    for a, b in zip(args.runs[::2], args.runs[1::2]):
        rows = pair_rows(Path(a), Path(b))
        pooled += rows
        report["pairs"][f"{a} -> {b}"] = t = tally(rows)
        print(_line(f"{a} -> {b}", t))
    if len(args.runs) > 2:
        report["pooled"] = t = tally(pooled)
        print(_line("pooled", t))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

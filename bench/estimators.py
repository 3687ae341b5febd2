#!/usr/bin/env python3
"""Which per-case statistic over processes reproduces best? Split and compare.

Input: one or more op folders written by ``opscreen op OP --repeats N`` (or by a batch
run with ``--repeats``), each with ``repeats/<k>/record.log``; the processes of all
folders given are pooled (give the same op's folders only). The script draws many
splits of those processes into two disjoint pretend runs of ``--n`` processes each,
merges each pretend run with each statistic below, and prints, per statistic, the
per-case |delta speedup| between the two (median / p90 / max over cases, averaged over
the splits) and the share of splits that meet the A/A target (p90 <= 1 %, max <= 3 %):

* ``median-speedup``: the median of the per-process speedups (what ``--repeats``
  writes into the op's record.log);
* ``trimmed-speedup``: the mean of the per-process speedups without the largest and
  the smallest (the median below 4 processes);
* ``median``, ``mean``, ``trimmed``, ``min``: that statistic of each side's latencies, speedup =
  torch / library.
* ``low-half``: the mean of the lower half of each side's latencies (n // 2 values,
  at least one).

The library's numbers only; the harness's parser reads the record logs. Standard
library only, runs anywhere (``python bench/estimators.py DIR [DIR ...] --n 3``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from opscreen.results.parse import parse_record_log  # noqa: E402
from opscreen.results.summary import percentile  # noqa: E402


def processes(dirs: list[Path]) -> list[dict]:
    """Per process (repeat folder), {case key: (torch ms, library ms)}."""
    out = []
    for d in dirs:
        repeat_dirs = sorted((d / "repeats").glob("*/record.log"), key=lambda p: int(p.parent.name))
        if not repeat_dirs and (d / "record.log").is_file():
            repeat_dirs = [d / "record.log"]
        for rec in repeat_dirs:
            cases = {}
            for row in parse_record_log(rec).rows:
                if row.torch_ms and row.lib_ms and row.torch_ms > 0 and row.lib_ms > 0:
                    cases[(row.op, row.dtype, row.shape, row.occurrence)] = (row.torch_ms, row.lib_ms)
            if cases:
                out.append(cases)
    return out


def _trimmed(vals: list[float]) -> float:
    """Mean without the largest and the smallest value (the median below 4 values)."""
    s = sorted(vals)
    return statistics.fmean(s[1:-1]) if len(s) >= 4 else statistics.median(s)


def _low_half(vals: list[float]) -> float:
    s = sorted(vals)
    return statistics.fmean(s[: max(1, len(s) // 2)])


SIDE_STATS = {"median": statistics.median, "mean": statistics.fmean, "trimmed": _trimmed, "min": min,
              "low-half": _low_half}
SPEEDUP_STATS = {"median-speedup": statistics.median, "trimmed-speedup": _trimmed}
STATS = [*SPEEDUP_STATS, *SIDE_STATS]


def speedup(procs: list[dict], key, stat: str) -> float:
    pairs = [p[key] for p in procs]
    if stat in SPEEDUP_STATS:
        return SPEEDUP_STATS[stat]([t / lib for t, lib in pairs])
    f = SIDE_STATS[stat]
    return f([t for t, _ in pairs]) / f([lib for _, lib in pairs])


def splits(total: int, n: int, count: int, rng: random.Random):
    """Up to ``count`` distinct (A, B) pairs of disjoint n-subsets of range(total)."""
    combos = [(a, b) for a in itertools.combinations(range(total), n)
              for b in itertools.combinations([i for i in range(total) if i not in a], n) if a < b]
    rng.shuffle(combos)
    return combos[:count]


def evaluate(procs: list[dict], n: int, count: int, seed: int) -> dict:
    keys = sorted(set.intersection(*(set(p) for p in procs)), key=str)
    if not keys:
        raise SystemExit("estimators: no case was measured by every process")
    pairs = splits(len(procs), n, count, random.Random(seed))
    report = {"processes": len(procs), "cases": len(keys), "n": n, "splits": len(pairs), "stats": {}}
    for stat in STATS:
        med, p90, mx, ok = [], [], [], 0
        worst: dict = {}
        for a, b in pairs:
            pa, pb = [procs[i] for i in a], [procs[i] for i in b]
            deltas = []
            for key in keys:
                d = abs(speedup(pb, key, stat) / speedup(pa, key, stat) - 1.0) * 100.0
                deltas.append(d)
                worst[key] = max(worst.get(key, 0.0), d)
            deltas.sort()
            med.append(statistics.median(deltas))
            p90.append(percentile(deltas, 90))
            mx.append(deltas[-1])
            ok += p90[-1] <= 1.0 and mx[-1] <= 3.0
        top = sorted(worst.items(), key=lambda kv: -kv[1])[:3]
        report["stats"][stat] = {
            "median": statistics.fmean(med), "p90": statistics.fmean(p90), "max": statistics.fmean(mx),
            "max_of_max": max(mx), "target_met": ok / len(pairs),
            "worst_cases": [{"case": list(map(str, k)), "max_delta": v} for k, v in top],
        }
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="op folders with repeats/<k>/record.log")
    ap.add_argument("--n", type=int, default=3, help="processes per pretend run (default 3)")
    ap.add_argument("--splits", type=int, default=200, help="most splits to draw (default 200)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the report here")
    args = ap.parse_args(argv)
    for d in args.dirs:
        if not d.is_dir():
            print(f"estimators: {d} is not a folder; give op folders written with --repeats", file=sys.stderr)
            return 2
    procs = processes(args.dirs)
    if args.n < 1 or len(procs) < 2 * args.n:
        print(f"estimators: {len(procs)} processes found, need at least {2 * args.n} for --n {args.n}",
              file=sys.stderr)
        return 2
    rep = evaluate(procs, args.n, args.splits, args.seed)
    names = ", ".join(str(d) for d in args.dirs)
    print(f"{names}: {rep['processes']} processes, {rep['cases']} cases, {rep['splits']} splits of {args.n} vs {args.n}")
    print(f"{'statistic':<15} {'median':>7} {'p90':>7} {'max':>7} {'worst':>7} {'target met':>10}")
    for stat, r in rep["stats"].items():
        print(f"{stat:<15} {r['median']:6.2f}% {r['p90']:6.2f}% {r['max']:6.2f}% {r['max_of_max']:6.2f}% "
              f"{r['target_met'] * 100:9.0f}%")
    if args.json:
        args.json.write_text(json.dumps(rep, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

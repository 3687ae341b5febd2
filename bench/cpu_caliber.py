#!/usr/bin/env python3
"""The CPU caliber's two host-side rules, on and off, on the bundled sample suite: the
``target_ci`` stop (a case stops once its median is pinned) and ``host_malloc`` steady
(glibc's mmap and trim thresholds held). For each caliber it runs ``opscreen run
--backend cpu --devices 0,1`` three times, ``--isolation op`` twice and ``worker`` once
(the order turns round by round), and prints the walls and the A/A of every row both
runs measured: |speedup_B / speedup_A - 1|, median, p90 and max, op against op and
worker against op.

    .venv/bin/python bench/cpu_caliber.py [--rounds 1] [--keep DIR]

``old`` is ``OPSCREEN_TARGET_CI=0 OPSCREEN_HOST_MALLOC=system`` (the caliber before both
rules), ``new`` the defaults.
"""

from __future__ import annotations

import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker_ab import pct, rows  # noqa: E402
from worker_cpu import bench_args, screen  # noqa: E402

KNOBS = ("OPSCREEN_TARGET_CI", "OPSCREEN_HOST_MALLOC")
CALIBERS = {"old": {"OPSCREEN_TARGET_CI": "0", "OPSCREEN_HOST_MALLOC": "system"}, "new": {}}
RUNS = (("op", "op"), ("op2", "op"), ("wk", "worker"))


def speedups(run: Path) -> dict:
    """(op, row key) -> speedup of every row of a run's record logs (worker_ab's reading)."""
    ops = run / "ops"
    return {(op.name, key): r.speedup for op in sorted(ops.iterdir()) if op.is_dir()
            for key, r in rows(run, op.name).items()} if ops.is_dir() else {}


def spread(a: dict, b: dict) -> str:
    d = sorted(abs(b[k] / a[k] - 1) * 100 for k in a if k in b)
    if not d:
        return "no common rows"
    return (f"rows {len(d)} median {statistics.median(d):.2f} % p90 {pct(d, 0.9):.2f} % "
            f"max {d[-1]:.1f} %")


def main(argv=None) -> int:
    args, base = bench_args(__doc__, argv, "opscreen-cpu-caliber-")
    for r in range(args.rounds):
        order = list(CALIBERS) if r % 2 == 0 else list(reversed(CALIBERS))
        for cal in order:
            walls = {}
            runs = RUNS if r % 2 == 0 else tuple(reversed(RUNS))
            for name, iso in runs:
                out = base / f"{cal}-{r}" / name
                shutil.rmtree(out, ignore_errors=True)
                walls[name] = screen(out, iso, CALIBERS[cal], env_drop=KNOBS)
            rows = {name: speedups(base / f"{cal}-{r}" / name) for name, _ in RUNS}
            print(f"round {r} {cal}: wall op {walls['op']:.1f} s, op2 {walls['op2']:.1f} s, worker {walls['wk']:.1f} s "
                  f"(op / worker {min(walls['op'], walls['op2']) / walls['wk']:.2f}x)", flush=True)
            print(f"  A/A op2 vs op    {spread(rows['op'], rows['op2'])}")
            print(f"  A/A worker vs op {spread(rows['op'], rows['wk'])}", flush=True)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Pool the speed figures of several worker-against-op pairs (bench/worker_ab.py JSONs).

    python bench/worker_pool.py A.json[:PAIR] B.json[:PAIR] ... [--leave-out OP,OP] [--corpus 1054]

A sample too large for one session's device time is measured chunk by chunk, each chunk in
both modes on one lease (the speedpair step of bench/device/h200_checks.sh, retired; see git
history at 8afd9f0), across sessions. Each input is a JSON that ``bench/worker_ab.py
--json`` wrote (its ``per_op``: each op's wall in the worker run and in the op run), or a
results JSON holding such reports under ``pairs`` (``:PAIR`` names one, e.g.
``2026-12-01-h200-speedpair.json:wk2_vs_op``). An op in two inputs is an error: the pool is
one sample. Prints, per mode, the op walls' median, mean, p90 and sum, the ratio of the
sums, the median of the per-op ratios, and the full corpus's GPU-hours from each mode's mean
op wall; with ``--leave-out``, the same without those ops.

Its p90 is bench/worker_ab.py's (``pct``), so that a pool reads like one pair.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker_ab import pct  # noqa: E402


def per_op(spec: str) -> dict[str, dict]:
    path, _, pair = spec.partition(":")
    data = json.loads(Path(path).read_text())
    if pair:
        data = (data.get("pairs") or {}).get(pair)
        if data is None:
            sys.exit(f"{path}: no pair {pair!r} under 'pairs'")
    ops = data.get("per_op")
    if not isinstance(ops, dict):
        sys.exit(f"{spec}: no per_op (write it with bench/worker_ab.py --json)")
    return ops


def pool(specs: list[str]) -> dict[str, tuple[float, float]]:
    """op -> (worker wall, op wall), from every input; an op in two inputs is an error."""
    walls: dict[str, tuple[float, float]] = {}
    for spec in specs:
        for op, d in per_op(spec).items():
            if op in walls:
                sys.exit(f"{op} is in two inputs ({spec}): pool disjoint samples")
            w, o = d["wall_s"]
            walls[op] = (float(w), float(o))
    return walls


def figures(walls: dict[str, tuple[float, float]], corpus: int) -> dict:
    out: dict = {"ops": len(walls)}
    for i, mode in enumerate(("worker", "op")):
        v = [w[i] for w in walls.values()]
        out[mode] = {"median": round(statistics.median(v), 2), "mean": round(statistics.fmean(v), 2),
                     "p90": round(pct(v, 0.9), 2), "sum": round(sum(v), 1),
                     "corpus_gpu_hours": round(statistics.fmean(v) * corpus / 3600, 2)}
    out["sum_ratio_op_over_worker"] = round(out["op"]["sum"] / out["worker"]["sum"], 3)
    out["median_per_op_ratio"] = round(statistics.median(o / w for w, o in walls.values() if w > 0), 3)
    return out


def show(title: str, f: dict) -> None:
    print(f"{title}: {f['ops']} ops")
    for mode in ("worker", "op"):
        m = f[mode]
        print(f"  {mode:6s} op wall median {m['median']:.1f} s, mean {m['mean']:.1f}, p90 {m['p90']:.1f}, "
              f"sum {m['sum']:.0f} s; full corpus {m['corpus_gpu_hours']:.1f} GPU-h")
    print(f"  sum of op walls: op / worker = {f['sum_ratio_op_over_worker']:.2f}x; "
          f"median of the per-op ratios {f['median_per_op_ratio']:.2f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="worker_ab JSONs, or results JSON:PAIR")
    ap.add_argument("--leave-out", default="", help="comma-separated ops: also the figures without them")
    ap.add_argument("--corpus", type=int, default=1054, help="ops in the full corpus (default 1054)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    walls = pool(args.inputs)
    report = {"all": figures(walls, args.corpus)}
    show("pooled", report["all"])
    out = [o for o in args.leave_out.split(",") if o]
    if out:
        missing = [o for o in out if o not in walls]
        if missing:
            sys.exit(f"--leave-out: not in the pool: {', '.join(missing)}")
        report["left_out"] = out
        report["without"] = figures({k: v for k, v in walls.items() if k not in out}, args.corpus)
        show(f"pooled less {', '.join(out)}", report["without"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

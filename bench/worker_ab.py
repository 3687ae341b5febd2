#!/usr/bin/env python3
"""Warm workers against a fresh process per op: speed and A/A, from two run dirs.

    python bench/worker_ab.py RUN_WORKER RUN_OP [--corpus 1054] [--json out.json] [--only OP,OP] [--third RUN]

RUN_WORKER and RUN_OP are two ``opscreen run`` dirs of the same ops on the same
devices (``--isolation worker`` and ``--isolation op``, ``--no-steal`` so that every op
runs on the same device in both). Prints:

- speed: op walls (median, mean, p90, sum) of each run, the ratio of the sums, and
  the full corpus's GPU-hours extrapolated from each run's mean op wall;
- where the time went: the sums of the phases in each (start+imports, collection,
  measurement, teardown), the workers' import time, how many workers ran and why;
- workers: resident memory after each op (first, max, growth per op), device memory
  still allocated after the hygiene, hygiene time;
- A/A: per-case |speedup_worker / speedup_op - 1| over the rows both runs measured
  on the same device with the same timer, split by timer (graph rows, fallback
  rows): median, p90, max; and on graph rows the median signed shift of each side's
  latency (torch's, the library's), small kernels apart. Rows that either run calls
  unresolved (their own band, ``NOISE_K`` x their recorded noise, wider than
  ``DEFAULT_MAX_BAND``: ``opscreen summary`` and ``compare`` say a change within it
  cannot be told from noise, e.g. a view op that launches no kernel) are counted, not
  compared;
- with ``--third RUN`` (a second run of either mode, same ops, same device): on every
  graph row where one of the three runs reads its speedup more than 1 % off the median
  of the three, which run is the odd one out. A mode that measures differently is the
  odd one out more often than a third of the time; process-to-process spread is not.

Standard library and opscreen's results layer only (no torch).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from opscreen.results.parse import parse_record_log  # noqa: E402
from opscreen.results.compare import SMALL_KERNEL_MS  # noqa: E402
from opscreen.results.summary import DEFAULT_MAX_BAND, NOISE_K  # noqa: E402


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def load(run: Path) -> dict[str, dict]:
    ops = {}
    for res in sorted((run / "ops").glob("*/result.json")):
        d = json.loads(res.read_text())
        if (res.parent / ".complete").is_file():
            ops[d["op"]] = d
    return ops


def speed(ops: dict[str, dict]) -> dict:
    walls = [float(d.get("duration_s") or 0) for d in ops.values()]
    out = {"ops": len(walls), "passed": sum(d["status"] == "passed" for d in ops.values())}
    if walls:
        out.update(median=statistics.median(walls), mean=statistics.fmean(walls), p90=pct(walls, 0.9), sum=sum(walls))
    phases: dict[str, float] = {}
    workers: dict[int, float] = {}
    for d in ops.values():
        for k, v in (d.get("phases") or {}).items():
            if isinstance(v, (int, float)):
                phases[k] = phases.get(k, 0.0) + v
        w = (d.get("phases") or {}).get("worker")
        if w and w.get("pid") is not None:
            workers[w["pid"]] = w.get("imports_s") or 0.0
    out["phases"] = {k: round(v, 1) for k, v in phases.items()}
    out["workers"] = len(workers)
    out["worker_imports_s"] = round(sum(workers.values()), 1)
    out["fresh_reruns"] = sum(1 for d in ops.values() if (d.get("phases") or {}).get("worker_attempt"))
    return out


def _growth(by_worker: dict, key: str) -> list[float]:
    """Per worker with two readings of ``key`` or more: its growth per op, first to last."""
    out = []
    for ws in by_worker.values():
        ws.sort(key=lambda t: t[0])
        pts = [(i, w[key]) for i, w in ws if w.get(key)]
        if len(pts) >= 2 and pts[-1][0] > pts[0][0]:
            out.append((pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0]))
    return out


def memory(ops: dict[str, dict]) -> dict:
    by_worker: dict[int, list[tuple[int, dict]]] = {}
    for d in ops.values():
        w = (d.get("phases") or {}).get("worker")
        if w and w.get("pid") is not None:
            by_worker.setdefault(w["pid"], []).append((w.get("op_index") or 0, w))
    rss = [w.get("rss_mb") for ws in by_worker.values() for _, w in ws if w.get("rss_mb")]
    dev = [w.get("device_allocated_mb") for ws in by_worker.values() for _, w in ws if w.get("device_allocated_mb") is not None]
    hyg = [w.get("hygiene_s") for ws in by_worker.values() for _, w in ws if w.get("hygiene_s") is not None]
    used = [w.get("device_used_mb") for ws in by_worker.values() for _, w in ws if w.get("device_used_mb") is not None]
    growth, used_growth = _growth(by_worker, "rss_mb"), _growth(by_worker, "device_used_mb")
    return {"rss_mb_max": max(rss) if rss else None, "rss_mb_median": statistics.median(rss) if rss else None,
            "rss_growth_mb_per_op": round(statistics.median(growth), 1) if growth else None,
            "device_allocated_mb_max": max(dev) if dev else None,
            # the device's total less free memory after the hygiene (context, loaded kernels' code, reserve)
            "device_used_mb_max": max(used) if used else None,
            "device_used_growth_mb_per_op": round(statistics.median(used_growth), 1) if used_growth else None,
            "hygiene_s_median": statistics.median(hyg) if hyg else None,
            "ops_per_worker_max": max((max(i for i, _ in ws) for ws in by_worker.values()), default=0)}


def rows(run: Path, op: str) -> dict:
    path = run / "ops" / op / "record.log"
    if not path.is_file():
        return {}
    return {r.key: r for r in parse_record_log(path).rows if r.speedup}


SMALL_MS = SMALL_KERNEL_MS  # a row whose faster side is under 10 us: a "small kernel" (as compare counts it)


def pairs(a_ops: dict, b_ops: dict, a: Path, b: Path):
    """(place of the op in its worker, row of the first run, the same row of the second)
    for every row both runs measured, of the ops both ran on the same device."""
    for op in sorted(set(a_ops) & set(b_ops)):
        if a_ops[op].get("device") != b_ops[op].get("device"):
            continue
        index = ((a_ops[op].get("phases") or {}).get("worker") or {}).get("op_index")
        place = "first op of a worker" if index == 1 else "later op of a worker" if index else "no worker"
        ra, rb = rows(a, op), rows(b, op)
        for key in set(ra) & set(rb):
            yield place, ra[key], rb[key]


def graph_size(x, y) -> str | None:
    """``<10us`` or ``>=10us`` for a row both runs graph-timed (by the second run's faster
    side), None for any other row."""
    if not (x.lib_timer == y.lib_timer == "graph" and x.torch_timer == y.torch_timer == "graph"):
        return None
    if not (y.torch_ms and y.lib_ms):
        return None
    return "<10us" if min(y.torch_ms, y.lib_ms) < SMALL_MS else ">=10us"


def unresolved(row) -> bool:
    """The row's own band (NOISE_K x sqrt(torch_rsd^2 + lib_rsd^2)) is wider than
    DEFAULT_MAX_BAND, as ``opscreen summary`` counts it (no noise recorded: resolved)."""
    if row.torch_rsd is None or row.lib_rsd is None:
        return False
    return NOISE_K * math.hypot(row.torch_rsd, row.lib_rsd) > DEFAULT_MAX_BAND


def aa(a_ops: dict, b_ops: dict, a: Path, b: Path) -> dict:
    """Per-case |delta speedup| by timer, and the graph rows split by the op's place in its
    worker (first, or later) and by kernel size (under SMALL_MS, or not). Rows either run
    calls unresolved are only counted (group ``unresolved``, |delta| kept for the record)."""
    groups: dict[str, list[float]] = {}
    for place, x, y in pairs(a_ops, b_ops, a, b):
        if unresolved(x) or unresolved(y):
            groups.setdefault("unresolved (left out)", []).append(abs(x.speedup / y.speedup - 1))
            continue
        d = abs(x.speedup / y.speedup - 1)
        timer = x.lib_timer or "?"
        if timer != y.lib_timer or x.torch_timer != y.torch_timer:
            groups.setdefault("timer differs", []).append(d)
            continue
        groups.setdefault("graph" if timer == "graph" and x.torch_timer == "graph" else timer, []).append(d)
        size = graph_size(x, y)
        if size:
            groups.setdefault(f"graph, {size}", []).append(d)
            groups.setdefault(f"graph, {place}, {size}", []).append(d)
    return {g: {"rows": len(v), "median_pct": 100 * statistics.median(v), "p90_pct": 100 * pct(v, 0.9),
                "max_pct": 100 * max(v)} for g, v in sorted(groups.items())}


def per_op(a_ops: dict, b_ops: dict, a: Path, b: Path) -> dict:
    """Per op both runs completed: its status and wall in each run, and over its resolved
    graph rows (same device, same timers) the median and max |delta speedup|."""
    deltas: dict[str, list[float]] = {}
    for _, x, y in pairs(a_ops, b_ops, a, b):
        if graph_size(x, y) and not (unresolved(x) or unresolved(y)):
            deltas.setdefault(x.op, []).append(abs(x.speedup / y.speedup - 1))
    out = {}
    for op in sorted(set(a_ops) & set(b_ops)):
        d = deltas.get(op, [])
        out[op] = {"graph_rows": len(d), "median_pct": round(100 * statistics.median(d), 3) if d else None,
                   "max_pct": round(100 * max(d), 2) if d else None,
                   "wall_s": [a_ops[op].get("duration_s"), b_ops[op].get("duration_s")],
                   "status": [a_ops[op].get("status"), b_ops[op].get("status")]}
    return out


def odd_one_out(runs: list[Path], threshold_pct: float = 1.0) -> dict:
    """Three runs of the same ops: on each resolved graph row where one run's speedup is more
    than ``threshold_pct`` off the median of the three, the run farthest from it."""
    loaded = [load(r) for r in runs]
    names = [str(r) for r in runs]
    count = {n: 0 for n in names}
    by_op: dict[str, dict[str, int]] = {}
    compared = 0
    for op in sorted(set(loaded[0]) & set(loaded[1]) & set(loaded[2])):
        if len({d[op].get("device") for d in loaded}) != 1:
            continue
        rs = [rows(r, op) for r in runs]
        for key in set(rs[0]) & set(rs[1]) & set(rs[2]):
            xs = [r[key] for r in rs]
            if any(graph_size(xs[i], xs[(i + 1) % 3]) is None or unresolved(xs[i]) for i in range(3)):
                continue
            compared += 1
            med = statistics.median(x.speedup for x in xs)
            dev = [abs(x.speedup / med - 1) * 100 for x in xs]
            if max(dev) <= threshold_pct:
                continue
            odd = names[max(range(3), key=lambda i: dev[i])]
            count[odd] += 1
            by_op.setdefault(op, {n: 0 for n in names})[odd] += 1
    return {"threshold_pct": threshold_pct, "rows": compared, "moved": sum(count.values()),
            "odd_one_out": count, "by_op": by_op}


def shifts(a_ops: dict, b_ops: dict, a: Path, b: Path) -> dict:
    """On graph rows measured on the same device in both runs: the median signed shift of
    each side's latency, first run over second (``torch_pct``, ``lib_pct``), small kernels
    and the rest apart. A worker that reads both sides slower says "the process", one side
    only says "that side's kernels"."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for _, x, y in pairs(a_ops, b_ops, a, b):
        size = graph_size(x, y)
        if size and x.torch_ms and x.lib_ms and not (unresolved(x) or unresolved(y)):
            groups.setdefault(size, []).append((x.torch_ms / y.torch_ms - 1, x.lib_ms / y.lib_ms - 1))
    return {g: {"rows": len(v), "torch_pct": 100 * statistics.median(t for t, _ in v),
                "lib_pct": 100 * statistics.median(lib for _, lib in v)} for g, v in sorted(groups.items())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("worker_run", type=Path)
    ap.add_argument("op_run", type=Path)
    ap.add_argument("--corpus", type=int, default=1054, help="ops in the full corpus (default 1054)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", help="comma-separated ops: compare these only (e.g. the ops both runs did on one lease)")
    ap.add_argument("--third", type=Path, help="a second run of either mode: which of the three runs is the odd one "
                    "out on the rows that move")
    args = ap.parse_args(argv)
    a_ops, b_ops = load(args.worker_run), load(args.op_run)
    if args.only:
        keep = set(args.only.split(","))
        a_ops = {o: d for o, d in a_ops.items() if o in keep}
    common = set(a_ops) & set(b_ops)
    report = {"common_ops": len(common),
              "worker": speed({o: a_ops[o] for o in common}), "op": speed({o: b_ops[o] for o in common}),
              "memory": memory(a_ops), "aa": aa(a_ops, b_ops, args.worker_run, args.op_run),
              "shifts": shifts(a_ops, b_ops, args.worker_run, args.op_run),
              "per_op": per_op(a_ops, b_ops, args.worker_run, args.op_run)}
    if args.third:
        report["odd_one_out"] = odd_one_out([args.worker_run, args.op_run, args.third])
    w, o = report["worker"], report["op"]
    if w.get("sum") and o.get("sum"):
        report["sum_ratio_op_over_worker"] = o["sum"] / w["sum"]
        report["corpus_gpu_hours"] = {k: report[k]["mean"] * args.corpus / 3600 for k in ("worker", "op")}
    for mode in ("worker", "op"):
        s = report[mode]
        print(f"{mode:6s}: {s['ops']} ops ({s['passed']} passed), op wall median {s.get('median', 0):.1f} s, "
              f"mean {s.get('mean', 0):.1f}, p90 {s.get('p90', 0):.1f}, sum {s.get('sum', 0):.0f} s; "
              f"workers {s['workers']} (imports {s['worker_imports_s']} s), fresh re-runs {s['fresh_reruns']}")
        print(f"        phases: {s['phases']}")
    if "sum_ratio_op_over_worker" in report:
        g = report["corpus_gpu_hours"]
        print(f"sum of op walls: op / worker = {report['sum_ratio_op_over_worker']:.2f}x; "
              f"full corpus ({args.corpus} ops): {g['worker']:.1f} GPU-h in worker mode, {g['op']:.1f} in op mode")
    print(f"memory: {report['memory']}")
    for group, s in report["aa"].items():
        print(f"A/A {group:45s} rows {s['rows']:4d} |d speedup| median {s['median_pct']:.3f} % "
              f"p90 {s['p90_pct']:.3f} % max {s['max_pct']:.3f} %")
    for size, s in report["shifts"].items():
        print(f"A/A graph, {size}: latency shift (first run over second, median) torch {s['torch_pct']:+.3f} %, "
              f"library {s['lib_pct']:+.3f} % ({s['rows']} rows)")
    if "odd_one_out" in report:
        t = report["odd_one_out"]
        print(f"odd one out: {t['moved']} of {t['rows']} resolved graph rows have one run more than "
              f"{t['threshold_pct']:g} % off the median of three: {t['odd_one_out']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

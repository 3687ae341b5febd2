#!/usr/bin/env python3
"""Which estimator should the direct timers report? Decide it on real samples.

``collect`` starts ``--processes`` fresh Python processes, one after the other; each
times a few torch ops on the host CPU call by call (``time.perf_counter`` around one
call, GC off, after a warm-up: the shape of the samples the direct, wallclock and
profiler timers collect) and writes its samples. ``analyse`` (run after ``collect``,
or on a saved JSON with ``--from``) computes, per op and estimator, the estimate of
every process and reports:

* the A/A figure that matters to a screen: ``|ln(e_i / e_j)|`` over every pair of
  processes (median, p90, max);
* the bootstrap 95 % interval half-width inside one process (median over processes):
  what one process believes about its own estimate.

Estimators: ``median``, ``trimmed_mean`` (20 % cut at each end), ``mean``, ``min`` of
the single-call samples, and ``median`` / ``trimmed_mean`` of samples of ``K`` calls
(the mean of K consecutive calls: what a timer that times K calls at once records).
The choice is the estimator with the lowest mean p90 over the ops; estimators within
:data:`TIE` (relative) of the best tie, and the earliest of them in the list wins (the
median first: the suite's own statistic, and the graph timer's). Collect under the
conditions the timers run under: pinned and with capped threads (``--threads 1 --cpus
N``, what ``--cpu-pinning auto`` gives a child). Standard library in the analysis;
torch in the collecting processes. ``--out`` ending in ``.gz`` writes gzip.

    python bench/estimator_choice.py --processes 8 --threads 1 --cpus 1 --out bench/results/<date>-cpu-estimator.json
    python bench/estimator_choice.py --from bench/results/<date>-cpu-estimator.json
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from opscreen.child.estimator import estimate, relative_halfwidth  # noqa: E402

K = 8
TIE = 0.10
SINGLE = ("median", "trimmed_mean", "mean", "min")
GROUPED = ("median", "trimmed_mean")

CHILD = r"""
import gc, json, os, sys, time
import torch
torch.manual_seed(0)
n = int(sys.argv[1])
if len(sys.argv) > 2 and sys.argv[2]:
    torch.set_num_threads(int(sys.argv[2]))
if len(sys.argv) > 3 and sys.argv[3]:
    os.sched_setaffinity(0, {int(c) for c in sys.argv[3].split(",")})
ops = {
    "add_256x256": (lambda a, b: torch.add(a, b), (torch.randn(256, 256), torch.randn(256, 256))),
    "softmax_512x512": (lambda a: torch.softmax(a, -1), (torch.randn(512, 512),)),
    "sum_1M": (lambda a: a.sum(), (torch.randn(1 << 20),)),
    "nonzero_64k": (lambda a: torch.nonzero(a > 0), (torch.randn(1 << 16),)),
    "layer_norm_256x1024": (lambda a: torch.nn.functional.layer_norm(a, (1024,)), (torch.randn(256, 1024),)),
    "mm_128": (lambda a, b: a @ b, (torch.randn(128, 128), torch.randn(128, 128))),
}
out = {}
for name, (fn, args) in ops.items():
    for _ in range(50):
        fn(*args)
    gc.collect(); gc.disable()
    xs = []
    for _ in range(n):
        t = time.perf_counter(); fn(*args); xs.append((time.perf_counter() - t) * 1e3)
    gc.enable()
    out[name] = xs
print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                  "cpus": sorted(os.sched_getaffinity(0)), "samples": out}))
"""


def collect(processes: int, samples: int, python: str, threads: int | None = None, cpus: str | None = None) -> dict:
    runs = []
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    for i in range(processes):
        res = subprocess.run([python, "-c", CHILD, str(samples), str(threads or ""), cpus or ""], capture_output=True,
                             text=True, check=True, env=env)
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        print(f"process {i + 1}/{processes} done", file=sys.stderr)
    return {"k": K, "samples_per_op": samples, "torch": runs[0]["torch"], "threads": runs[0]["threads"],
            "cpus": runs[0]["cpus"], "processes": [r["samples"] for r in runs]}


def grouped(xs: list[float], k: int) -> list[float]:
    return [statistics.fmean(xs[i: i + k]) for i in range(0, len(xs) - k + 1, k)]


def variants(xs: list[float], k: int) -> dict[str, tuple[str, list[float]]]:
    out = {name: (name, xs) for name in SINGLE}
    g = grouped(xs, k)
    for name in GROUPED:
        out[f"{name}_of_{k}"] = (name, g)
    return out


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def analyse(data: dict) -> dict:
    """Per op and estimator: A/A |ln ratio| between processes and the in-process CI."""
    k = int(data.get("k", K))
    procs = data["processes"]
    ops = sorted(procs[0])
    table: dict = {}
    for op in ops:
        per_est: dict = {}
        for p in procs:
            for est, (fn, xs) in variants(p[op], k).items():
                per_est.setdefault(est, {"est": [], "ci": []})
                per_est[est]["est"].append(estimate(xs, fn))
                per_est[est]["ci"].append(relative_halfwidth(xs, fn))
        table[op] = {}
        for est, v in per_est.items():
            diffs = [abs(math.log(a / b)) for a, b in itertools.combinations(v["est"], 2) if a > 0 and b > 0]
            cis = [c for c in v["ci"] if c is not None]
            table[op][est] = {"aa_median": _pct(diffs, 50), "aa_p90": _pct(diffs, 90), "aa_max": max(diffs),
                              "ci_median": statistics.median(cis) if cis else None}
    names = list(next(iter(table.values())))
    mean_p90 = {est: statistics.fmean(table[op][est]["aa_p90"] for op in ops) for est in names}
    best = min(mean_p90.values())
    choice = next(e for e in names if mean_p90[e] <= best * (1 + TIE))
    return {"ops": table, "mean_p90": mean_p90, "choice": choice, "processes": len(procs)}


def report(res: dict) -> str:
    lines = [f"A/A between {res['processes']} processes: |ln(e_i/e_j)| over all pairs (p90 | max), "
             "and the median in-process bootstrap 95 % half-width (ci)"]
    names = list(res["mean_p90"])
    lines.append("op".ljust(22) + "".join(n.rjust(24) for n in names))
    for op, row in res["ops"].items():
        cells = "".join(f"{100 * row[n]['aa_p90']:6.2f}|{100 * row[n]['aa_max']:6.2f} ci{100 * (row[n]['ci_median'] or 0):5.2f}".rjust(24)
                        for n in names)
        lines.append(op.ljust(22) + cells)
    lines.append("mean p90".ljust(22) + "".join(f"{100 * res['mean_p90'][n]:.2f}%".rjust(24) for n in names))
    lines.append(f"choice: {res['choice']}")
    return "\n".join(lines)


def load(path: str) -> dict:
    raw = Path(path).read_bytes()
    return json.loads(gzip.decompress(raw) if path.endswith(".gz") else raw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--samples", type=int, default=400, help="single-call samples per op and process")
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch for the collecting processes")
    ap.add_argument("--threads", type=int, help="intra-op threads of the collecting processes (OMP_NUM_THREADS too)")
    ap.add_argument("--cpus", help="pin the collecting processes to these CPUs (comma-separated)")
    ap.add_argument("--out", help="write the samples and the analysis to this JSON")
    ap.add_argument("--from", dest="source", help="analyse a JSON written by --out instead of collecting")
    a = ap.parse_args(argv)
    if a.source:
        data = load(a.source)
    else:
        data = collect(a.processes, a.samples, a.python, a.threads, a.cpus)
    res = analyse(data)
    if a.out:
        data["processes"] = [{op: [float(f"{x:.5g}") for x in xs] for op, xs in p.items()} for p in data["processes"]]
        text = json.dumps({**data, "analysis": res}, separators=(",", ":"))
        if a.out.endswith(".gz"):
            Path(a.out).write_bytes(gzip.compress(text.encode(), mtime=0))
        else:
            Path(a.out).write_text(text)
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

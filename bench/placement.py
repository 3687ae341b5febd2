#!/usr/bin/env python3
"""Where does the between-process spread of graph-replay timings come from?

Two identical ``opscreen op`` runs agree on most cases to 0.5 %, but some cases
(layer_norm on an H200: tiny shapes, and [20, 6, 65536]) differ by 10-20 %
between processes while each process measures them with an rsd of 0.01-0.2 %.
This bench separates the candidate causes inside one process, for one op on a
few shapes, timing each case the way opscreen's graph timer does (a graph of
``n`` back-to-back calls, about 1 ms of device time, replayed between two
device events, median of the samples):

``retime``
    the same graph timed again: the within-run noise;
``recapture``
    the same input tensors, a new graph (a new private memory pool, so the
    outputs move; old graphs are kept alive so their memory is not reused);
``relocate``
    new input tensors (copies, behind a spacer of random size so they land on
    other pages) and a new graph: the inputs move too.

Run it in several processes (``--runs``; each a fresh interpreter) and it also
reports the spread of the first measurement between processes. If
``relocate`` spreads as much inside one process as the processes differ, the
spread is where the memory lies, and a timer can sample placements inside one
process instead of running several.

    python bench/placement.py --op layer_norm --impl torch --runs 4 --out placement.json
    python bench/placement.py --op layer_norm --impl gems --runs 4 --out placement-gems.json

``--impl gems`` needs FlagGems importable (``$FLAGGEMS_ROOT/src`` on PYTHONPATH).
Needs torch and a CUDA device; prints one table per case and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys

OPS = ("layer_norm", "softmax", "sum", "abs", "add")
DEFAULT_SHAPES = "20,6,65536;16,16,64;1,8,4,4;4096,512;16,8,128,128"


def parse_shapes(text):
    return [tuple(int(x) for x in s.split(",")) for s in text.split(";") if s.strip()]


# -- inside one process ---------------------------------------------------------------


def make_inputs(torch, op, shape, dtype):
    x = torch.randn(shape, dtype=dtype, device="cuda")
    if op == "layer_norm":
        return [x, torch.randn(shape[1:], dtype=dtype, device="cuda"), torch.randn(shape[1:], dtype=dtype, device="cuda")]
    if op == "add":
        return [x, torch.randn(shape, dtype=dtype, device="cuda")]
    return [x]


def make_call(torch, op, shape, tensors):
    if op == "layer_norm":
        x, w, b = tensors
        return lambda: torch.layer_norm(x, shape[1:], w, b)
    if op == "softmax":
        return lambda: torch.softmax(tensors[0], dim=-1)
    if op == "sum":
        return lambda: torch.sum(tensors[0])
    if op == "abs":
        return lambda: torch.abs(tensors[0])
    return lambda: torch.add(tensors[0], tensors[1])


class Timer:
    def __init__(self, torch, samples):
        self.torch = torch
        self.samples = samples
        self.stream = torch.cuda.Stream()
        self.keep = []  # graphs kept alive so their pools are not reused

    def capture(self, call, n):
        torch = self.torch
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(self.stream):
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=self.stream):
                for _ in range(n):
                    call()
        torch.cuda.synchronize()
        self.keep.append(g)
        return g

    def time(self, g, n):
        torch = self.torch
        with torch.cuda.stream(self.stream):
            g.replay()
            evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(self.samples)]
            for a, b in evs:
                a.record()
                g.replay()
                b.record()
            torch.cuda.synchronize()
        out = [a.elapsed_time(b) * 1000.0 / n for a, b in evs]  # us per call
        return statistics.median(out), statistics.pstdev(out) / statistics.fmean(out)


def one_process(args):
    import torch

    if args.impl == "gems":
        import flag_gems

        ctx = flag_gems.use_gems()
    else:
        import contextlib

        ctx = contextlib.nullcontext()
    rng = random.Random(args.seed)
    # a spacer allocated first moves everything this process allocates after it
    spacer = torch.empty(int(args.spacer_mb * (1 << 20)), dtype=torch.uint8, device="cuda") if args.spacer_mb else None
    timer = Timer(torch, args.samples)
    rows = []
    with ctx:
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            for shape in parse_shapes(args.shapes):
                tensors = make_inputs(torch, args.op, shape, dtype)
                call = make_call(torch, args.op, shape, tensors)
                # size the graph: ~1 ms of device time, a power of two of calls
                probe = timer.capture(call, 16)
                us, _ = timer.time(probe, 16)
                n = 1
                while n < 1024 and n * us < 1000.0:
                    n *= 2
                g = timer.capture(call, n)
                row = {"shape": list(shape), "dtype": dtype_name, "calls": n, "retime": [], "recapture": [],
                       "relocate": [], "rsd": []}
                for _ in range(args.placements):
                    v, noise = timer.time(g, n)
                    row["retime"].append(v)
                    row["rsd"].append(noise)
                for _ in range(args.placements):
                    row["recapture"].append(timer.time(timer.capture(call, n), n)[0])
                spacers = []
                for _ in range(args.placements):
                    spacers.append(torch.empty(rng.randrange(1, 64) * (1 << 20) + rng.randrange(0, 1 << 20),
                                               dtype=torch.uint8, device="cuda"))
                    moved = [t.clone() for t in tensors]
                    spacers.append(moved)
                    mcall = make_call(torch, args.op, shape, moved)
                    row["relocate"].append(timer.time(timer.capture(mcall, n), n)[0])
                rows.append(row)
                timer.keep.clear()
                del spacers
                torch.cuda.empty_cache()
    del spacer  # held to the end: everything above was allocated behind it
    json.dump(rows, sys.stdout)


# -- the driver -------------------------------------------------------------------------


def spread(values):
    return max(values) / min(values) - 1.0 if values and min(values) > 0 else None


def summarize(runs):
    """runs: one list of rows per process -> one summary row per case."""
    out = []
    for i, row in enumerate(runs[0]):
        per = [r[i] for r in runs]
        firsts = [p["retime"][0] for p in per]
        out.append({
            "shape": row["shape"], "dtype": row["dtype"], "calls": [p["calls"] for p in per],
            "first_us": firsts,
            "between_processes": spread(firsts),
            "retime": max(spread(p["retime"]) for p in per),
            "recapture": max(spread(p["recapture"]) for p in per),
            "relocate": max(spread(p["relocate"]) for p in per),
            "relocate_median_between": spread([statistics.median(p["relocate"]) for p in per]),
            "recapture_median_between": spread([statistics.median(p["recapture"]) for p in per]),
            "raw": per,
        })
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", choices=OPS, default="layer_norm")
    ap.add_argument("--impl", choices=("torch", "gems"), default="torch")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="';'-separated shapes, e.g. '20,6,65536;16,16,64'")
    ap.add_argument("--dtypes", default="float16,float32,bfloat16")
    ap.add_argument("--placements", type=int, default=6, help="measurements per level inside one process")
    ap.add_argument("--samples", type=int, default=20, help="timed replays per measurement")
    ap.add_argument("--runs", type=int, default=4, help="processes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spacers", default="",
                    help="comma-separated MB, one process each (overrides --runs): a spacer each process "
                         "allocates first, e.g. 0,0,0,61,122,183 (same placement three times, then three others)")
    ap.add_argument("--spacer-mb", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        one_process(args)
        return 0
    runs = []
    spacers = [float(x) for x in args.spacers.split(",") if x.strip()] if args.spacers else [0.0] * args.runs
    args.runs = len(spacers)
    for k, mb in enumerate(spacers):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--seed", str(k), "--spacer-mb", str(mb)]
        for name in ("op", "impl", "shapes", "dtypes", "placements", "samples"):
            cmd += [f"--{name}", str(getattr(args, name))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"placement: process {k} failed (rc {proc.returncode}): {proc.stderr.strip()[-2000:]}", file=sys.stderr)
            return 1
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rows = summarize(runs)
    pct = lambda v: "-" if v is None else f"{100 * v:6.2f}%"
    print(f"{args.impl} {args.op}: max/min - 1 (within one process: worst process; between: {args.runs} processes)")
    print(f"{'case':28} {'us/call':>9} {'between':>8} {'retime':>8} {'recapt':>8} {'reloc':>8} {'med(recapt)':>11} {'med(reloc)':>10}")
    for r in rows:
        case = f"{'x'.join(map(str, r['shape']))} {r['dtype']}"
        print(f"{case:28} {statistics.median(r['first_us']):9.3f} {pct(r['between_processes'])} {pct(r['retime'])} "
              f"{pct(r['recapture'])} {pct(r['relocate'])} {pct(r['recapture_median_between']):>11} "
              f"{pct(r['relocate_median_between']):>10}")
    if args.spacers:
        print("first measurement per process (us/call), spacers MB " + ",".join(f"{x:g}" for x in spacers))
        for r in rows:
            case = f"{'x'.join(map(str, r['shape']))} {r['dtype']}"
            print(f"{case:28} " + " ".join(f"{v:8.3f}" for v in r["first_us"]))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"op": args.op, "impl": args.impl, "runs": args.runs, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Warm workers against a fresh process per op on the CPU: the bundled sample suite,
``opscreen run --backend cpu --devices 0,1`` once with ``--isolation worker`` and once
with ``--isolation op``, back to back in one bench run (the order alternates with
``--rounds``). Prints each run's wall, the ratio, and bench/worker_ab.py's breakdown.

    .venv/bin/python bench/worker_cpu.py [--rounds 1] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def screen(out: Path, isolation: str, env_set: dict | None = None, env_drop: tuple = ()) -> float:
    """One ``opscreen run`` of the sample suite on CPU slots 0 and 1 into ``out``: its wall (s).
    ``env_set`` adds to the environment, after ``env_drop`` is taken out of it."""
    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    env["PYTHONPATH"] = str(ROOT / "src")
    env.update(env_set or {})
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "opscreen", "run", "--backend", "cpu", "--devices", "0,1", "--plain",
                          "--isolation", isolation, "--out", str(out)], env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if res.returncode != 0:
        sys.exit(f"{isolation} run failed ({res.returncode}): {res.stdout[-2000:]}{res.stderr[-2000:]}")
    return wall


def bench_args(doc: str, argv, prefix: str):
    """``--rounds`` and ``--keep`` of a CPU bench, and the folder its runs go to."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="keep the run dirs here")
    args = ap.parse_args(argv)
    return args, args.keep or Path(tempfile.mkdtemp(prefix=prefix))


def main(argv=None) -> int:
    args, base = bench_args(__doc__, argv, "opscreen-worker-cpu-")
    walls: dict[str, list[float]] = {"worker": [], "op": []}
    for r in range(args.rounds):
        order = ("worker", "op") if r % 2 == 0 else ("op", "worker")
        for iso in order:
            out = base / f"{iso}-{r}"
            shutil.rmtree(out, ignore_errors=True)
            walls[iso].append(screen(out, iso))
            print(f"round {r}: --isolation {iso}: {walls[iso][-1]:.1f} s wall", flush=True)
    w, o = min(walls["worker"]), min(walls["op"])
    print(f"sample suite, cpu, devices 0,1, {os.cpu_count()} cores: worker {w:.1f} s, op {o:.1f} s wall "
          f"(best of {args.rounds}): op / worker = {o / w:.2f}x")
    if args.rounds > 1:  # a round's two runs are back to back: their ratio drifts less with the host than best-of-each
        paired = [op / wk for wk, op in zip(walls["worker"], walls["op"])]
        print("per round: " + ", ".join(f"{r:.2f}x" for r in paired) + f"; median {statistics.median(paired):.2f}x")
    subprocess.run([sys.executable, str(ROOT / "bench" / "worker_ab.py"), str(base / "worker-0"), str(base / "op-0")])
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

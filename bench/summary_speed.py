"""Time `opscreen summary` on a synthetic 1000-op run directory.

    .venv/bin/python bench/summary_speed.py [--ops 1000] [--keep DIR]

The run dir follows docs/contracts.md (tests/synth.py): per op a run.log in
opscreen's table format, a record.log with opscreen's extra fields, result.json,
run_identity.json; ~3 dtypes x 5-12 shapes per op, a few failed / timed-out /
device-fatal ops. Prints the time of building + writing summary.csv/summary.json
in-process (best of --repeat), and of the whole `python -m opscreen summary` command.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))  # synth.py: synthetic run dirs

from opscreen.results.summary import build_summary, write_summary  # noqa: E402
from synth import make_run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", metavar="DIR", help="build the run dir here and keep it")
    args = ap.parse_args()
    tmp = None
    if args.keep:
        run_dir = Path(args.keep)
    else:
        tmp = tempfile.mkdtemp(prefix="opscreen-bench-")
        run_dir = Path(tmp) / "run"
    try:
        t0 = time.perf_counter()
        ops = make_run(run_dir, n_ops=args.ops, seed=1)
        t_make = time.perf_counter() - t0
        nrows = sum(len(o.rows) for o in ops)
        size = sum(f.stat().st_size for f in run_dir.rglob("*") if f.is_file())
        print(f"synthesised {len(ops)} ops, {nrows} case rows, {size / 1e6:.1f} MB in {t_make:.2f} s: {run_dir}")
        best = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            s = build_summary(run_dir)
            write_summary(s)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        print(f"summary in-process: {best:.3f} s (best of {args.repeat}; {len(s.rows)} rows, {len(s.ops)} ops)")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "opscreen", "summary", str(run_dir)],
            cwd=ROOT, capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")},
        )
        dt = time.perf_counter() - t0
        if proc.returncode == 0:
            print(f"opscreen summary command (process start included): {dt:.3f} s")
        else:
            print(f"opscreen summary command failed (rc {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
        return 0
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""The results store at scale: a store of N screens of R rows each (issue 33's target: 500
screens of 20 000 rows), then the time of the real commands on it.

The screens are synthesised in memory as summaries (the importer's own input: one caliber,
one device model, ``--ops`` ops of R / ops cases each, a library latency with 0.4 % noise
between screens) and imported through ``opscreen.store.importer.add_one``, the path
``opscreen store add`` takes. Then, each as its own process, as a user runs them:

- ``opscreen store add`` of one more screen of R rows (its summary.json written first, as
  ``opscreen summary`` leaves it), into the full store;
- ``opscreen history OP`` for two ops (each R / ops cases over the N + 1 screens),
  ``--repeat`` times each: the best and the median.

The extra screen is taken out of the store again at the end (and at the start, when an
interrupted run left it), so the store holds the N screens between runs and a second run
measures the same as the first. The bench says whether Python may write its bytecode
cache (``PYTHONDONTWRITEBYTECODE``): without it each command compiles every module it
imports whose cached bytecode is stale, about 0.2 s more for ``history OP``.

Usage: ``.venv/bin/python bench/store_scale.py --screens 500 --rows 20000 --db /tmp/scale.sqlite``
(the store is reused when it holds the N screens: filling it takes about 20 minutes on a
2-core host; ``--fresh`` starts over). Results: bench/results/2026-12-03-store-scale.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from opscreen.results.summary import COLUMNS, Summary, write_summary  # noqa: E402
from opscreen.store.db import open_store, rows, runs  # noqa: E402
from opscreen.store.importer import add_one, run_key  # noqa: E402

CALIBER = {"timer": "graph", "use_flagtune": "0", "use_flagtune_cost_model": "0", "triton_cache_autotuning": "0",
           "shape_mode": "upstream", "level": "core", "isolation": "op", "device_name": "Scale GPU",
           "backend": "cuda", "vendor": "nvidia"}


def summary(i: int, rows: int, ops: int) -> Summary:
    """Screen ``i``: the same cases in every screen, the library's latency off by 0.4 %."""
    rng = random.Random(i)
    per_op = max(1, rows // ops)
    out = []
    for k in range(rows):
        op, j = f"op{k // per_op:04d}", k % per_op
        torch_ms = 0.005 + 0.001 * (j + 1)
        lib_ms = torch_ms / (0.8 + 0.01 * j) * math.exp(rng.gauss(0, 0.004))
        r = dict.fromkeys(COLUMNS)
        r.update(op=op, test=f"test_{op}", variant="", dtype=("float16", "float32", "bfloat16")[j % 3],
                 shape=f"[[{64 * (j + 1)},{64 * (j + 1)}]]", status="ok", torch_ms=torch_ms, lib_ms=lib_ms,
                 speedup=torch_ms / lib_ms, torch_timer="graph", lib_timer="graph", torch_samples=100,
                 lib_samples=100, torch_noise_pct=0.1, lib_noise_pct=0.1, op_status="passed", backend="cuda",
                 device=str(k % 8), device_name="Scale GPU", truncated=False, source="record.log",
                 run=f"screen-{i:04d}", run_started_at=_date(i), suite_commit=f"{i:040x}")
        out.append([r[c] for c in COLUMNS])
    ident = {"schema": "opscreen.identity/1", "kind": "run", "caliber": {**CALIBER, "suite_commit": f"{i:040x}"},
             "host": "scale", "started_at": _date(i), "state": "finished", "suite": {"commit": f"{i:040x}"}}
    return Summary(kind="run", name=f"screen-{i:04d}", identity=ident, caliber=ident["caliber"], ops=[], rows=out)


def _date(i: int) -> str:
    return f"{2026 + i // 336}-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}T08:00:00Z"


def fill(db: str, screens: int, rows: int, ops: int) -> float:
    store = open_store(db, create=True)
    t0 = time.perf_counter()
    try:
        for i in range(screens):
            add_one(store, f"screen-{i:04d}", summary(i, rows, ops))
            if i % 50 == 49:
                print(f"  {i + 1} screens in {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        store.close()
    return time.perf_counter() - t0


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "opscreen", *argv], capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, res


def screens_in(db: str) -> int:
    store = open_store(db, create=False)
    try:
        with store.read() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(runs)).scalar_one()
    finally:
        store.close()


def take_out(db: str, s: Summary) -> bool:
    """The run of ``s`` and its rows out of the store (the extra screen); whether it was there."""
    store = open_store(db, create=False)
    try:
        with store.write() as conn:
            rid = conn.execute(sa.select(runs.c.id).where(runs.c.run_key == run_key(s))).scalar_one_or_none()
            if rid is not None:
                conn.execute(sa.delete(rows).where(rows.c.run_id == rid))
                conn.execute(sa.delete(runs).where(runs.c.id == rid))
            return rid is not None
    finally:
        store.close()


def history_times(db: str, op: str, repeat: int) -> tuple[list[float], str]:
    out, head = [], ""
    for _ in range(repeat):
        s, res = timed(["history", op, "--db", db])
        if res.returncode != 0:
            raise SystemExit(f"history {op}: rc {res.returncode}: {res.stderr.strip()}")
        out.append(s)
        head = res.stdout.splitlines()[0]
    return out, head


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--screens", type=int, default=500)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5, help="history runs per op (default 5)")
    ap.add_argument("--db", default=str(Path(tempfile.gettempdir()) / "opscreen-store-scale.sqlite"))
    ap.add_argument("--fresh", action="store_true")
    a = ap.parse_args()
    if a.fresh and os.path.exists(a.db):
        os.unlink(a.db)
    extra_s = summary(a.screens + 100000, a.rows, a.ops)
    if not os.path.exists(a.db):
        print(f"filling {a.db}: {a.screens} screens of {a.rows} rows", flush=True)
        print(f"filled in {fill(a.db, a.screens, a.rows, a.ops):.0f} s")
    elif take_out(a.db, extra_s):
        print("took out the extra screen an earlier run left")
    if screens_in(a.db) != a.screens:
        print(f"{a.db} holds {screens_in(a.db)} screens, not {a.screens}: give --fresh to fill it again")
        return 2
    print(f"python bytecode cache: {'off (PYTHONDONTWRITEBYTECODE)' if sys.flags.dont_write_bytecode else 'on'}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            extra = Path(tmp) / "screen-extra"
            extra.mkdir()
            extra_s.path = extra
            write_summary(extra_s)
            add_s, res = timed(["store", "add", str(extra / "summary.json"), "--db", a.db])
        if res.returncode != 0 or "1 runs added" not in res.stdout:
            raise SystemExit(f"store add: rc {res.returncode}: {res.stdout.strip()} {res.stderr.strip()}")
        print(f"store add of one screen of {a.rows} rows: {add_s:.2f} s")
        hist = {}
        for op in ("op0000", f"op{a.ops // 2:04d}"):
            ts, head = history_times(a.db, op, a.repeat)
            hist[op] = {"best": round(min(ts), 2), "median": round(statistics.median(ts), 2)}
            print(f"history {op}: best {min(ts):.2f} s, median {statistics.median(ts):.2f} s of {a.repeat}: "
                  f"{head[:100]}")
    finally:
        take_out(a.db, extra_s)
    mib = os.path.getsize(a.db) / 2**20
    print(f"store file: {mib:.0f} MiB")
    print(json.dumps({"screens": a.screens, "rows": a.rows, "store_add_s": round(add_s, 2), "history_s": hist,
                      "store_mib": round(mib)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

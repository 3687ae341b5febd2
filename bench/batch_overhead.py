"""What `opscreen run` itself costs per op, and how well it keeps two lanes busy.

    .venv/bin/python bench/batch_overhead.py [--ops 200] [--fault-rounds 2]
        [--sample-ops abs,add,relu,mul | --sample-ops all | --skip-sample]

Three measurements, all on the CPU backend:

1. Bookkeeping (in-process): the batch runner (scheduler, journal with fsync'd
   result.json + .complete + ops_status.csv per op, retry logic, progress lines)
   over ``--ops`` trivial ops whose work is one ``python -c pass`` child, against
   a plain loop of the same children. Difference / ops = the runner's own cost.
2. Per-op harness (real CLI, real run_op): ``opscreen run`` on the fault suite's
   trivial ops (pytest children that do nothing, torch stubbed) on one lane:
   wall time minus the children's own time (result.json ``duration_s``), per op,
   with and without the CLI's fixed start-up cost (measured by a second run
   over the complete run dir, which runs nothing).
3. Scaling: a 2-lane screen of the sample suite (real torch children) against the
   sum of the per-op times: efficiency = sum / (lanes x wall).
   ``OPSCREEN_MAX_TIME`` is lowered to keep this short; the default op subset
   takes ~2 minutes on a 2-core machine, ``--sample-ops all`` ~8.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))

FAULTS = ROOT / "tests" / "fixtures" / "suites" / "faults"


# -- 1. bookkeeping ------------------------------------------------------------------


def trivial_work(request, out_dir: Path, *, stop=None, echo=None):
    """One ``python -c pass`` child, with the files run_op writes (run.log, result.json)."""
    from opscreen.op.process import run_streaming
    from opscreen.op.request import OpOutcome

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "run.log", "w") as log:
        res = run_streaming([sys.executable, "-S", "-c", "pass"], on_line=log.write, timeout=30, grace=1, stop=stop)
    (out_dir / "result.json").write_text(json.dumps({"status": "passed"}))
    return OpOutcome("passed", 0, res.returncode, res.duration_s, None, out_dir, "wallclock")


def bench_bookkeeping(n: int, tmp: Path) -> dict:
    from opscreen.backends import resolve
    from opscreen.batch.executor import LocalExecutor
    from opscreen.batch.journal import Journal
    from opscreen.batch.progress import PlainProgress
    from opscreen.batch.config import BatchConfig
    from opscreen.batch.session import BatchRunner
    from opscreen.op.process import run_streaming

    # plain loop: the same children, nothing else
    t0 = time.perf_counter()
    for _ in range(n):
        run_streaming([sys.executable, "-S", "-c", "pass"], on_line=lambda s: None, timeout=30, grace=1)
    raw = time.perf_counter() - t0

    ops = [f"op{i:04d}" for i in range(n)]
    suite = SimpleNamespace(root=tmp, python=sys.executable, name="bench", git={"commit": None, "dirty": None}, files=[])
    cfg = BatchConfig(
        suite=suite,
        backend=resolve("cpu"),
        devices=[0],
        ops=ops,
        targets={op: SimpleNamespace(describe=lambda op=op: op) for op in ops},
        timeout=30,
        grace=1,
    )
    journal = Journal(tmp / "bookkeeping-run")
    journal.lock()
    devnull = open(os.devnull, "w")
    try:
        runner = BatchRunner(
            cfg,
            journal,
            executor=LocalExecutor(work=trivial_work),
            progress=PlainProgress(devnull),
            request_factory=lambda op, device, dtypes: None,
            handle_signals=False,
        )
        t0 = time.perf_counter()
        summary = runner.run()
        batch = time.perf_counter() - t0
    finally:
        journal.unlock()
        devnull.close()
    assert summary.counts.get("passed") == n, summary.counts
    return {"ops": n, "raw_s": raw, "batch_s": batch, "per_op_ms": (batch - raw) / n * 1000}


# -- 2. real CLI on trivial pytest ops ------------------------------------------------


def cli_env(state: Path) -> dict:
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(SRC), str(FAULTS / "stub_torch")]),
            "FAULTS_STATE_DIR": str(state),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    env.pop("OPSCREEN_BATCH_RUN", None)
    return env


def bench_cli(rounds: int, tmp: Path) -> dict:
    suite = tmp / "faults"
    shutil.copytree(FAULTS, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    ops = [f"ok_{c}" for c in "abcdefgh"]
    per_op, fixed, child_sum, walls, raw_child = [], [], [], [], []
    for r in range(rounds):
        state = tmp / f"state{r}"
        state.mkdir()
        out = tmp / f"cli-run{r}"
        argv = [sys.executable, "-m", "opscreen", "run", "--suite", str(suite), "--backend", "cpu", "--devices", "0",
                "--ops", ",".join(ops), "--out", str(out), "--plain", "--timeout", "60"]
        t0 = time.perf_counter()
        subprocess.run(argv, env=cli_env(state), check=True, capture_output=True)
        wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run(argv, env=cli_env(state), check=True, capture_output=True)  # nothing left to run
        empty = time.perf_counter() - t0
        durations = [json.loads((out / "ops" / op / "result.json").read_text())["duration_s"] for op in ops]
        # the same children without opscreen: the argv run_op used, run directly
        t0 = time.perf_counter()
        for op in ops:
            cfg = json.loads((out / "ops" / op / "child_config.json").read_text())
            env = cli_env(state)
            env["OPSCREEN_CHILD_CONFIG"] = str(out / "ops" / op / "child_config.json")
            env["PYTHONPATH"] = os.pathsep.join([str(out / "ops" / op / ".pyshim"), env["PYTHONPATH"]])
            subprocess.run(cfg["argv"], env=env, cwd=suite, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        raw_child.append(time.perf_counter() - t0)
        walls.append(wall)
        fixed.append(empty)
        child_sum.append(sum(durations))
        per_op.append((wall - sum(durations)) / len(ops))
    best = min(range(rounds), key=lambda i: walls[i])
    return {
        "ops": len(ops),
        "wall_s": walls[best],
        "child_sum_s": child_sum[best],
        "raw_children_s": raw_child[best],
        "cli_fixed_s": fixed[best],
        "per_op_ms": per_op[best] * 1000,
        "per_op_no_startup_ms": (walls[best] - fixed[best] - child_sum[best]) / len(ops) * 1000,
        "per_op_vs_raw_ms": (walls[best] - fixed[best] - raw_child[best]) / len(ops) * 1000,
    }


# -- 3. scaling on the sample suite ---------------------------------------------------


def bench_sample(ops: str, tmp: Path) -> dict:
    out = tmp / "sample-run"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC)
    env.setdefault("OPSCREEN_MAX_TIME", "0.25")
    env.pop("OPSCREEN_BATCH_RUN", None)
    env.pop("FLAGGEMS_ROOT", None)
    argv = [sys.executable, "-m", "opscreen", "run", "--backend", "cpu", "--devices", "0,1", "--out", str(out), "--plain", "--timeout", "900"]
    if ops != "all":
        argv += ["--ops", ops]
    t0 = time.perf_counter()
    res = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    import csv

    with open(out / "ops_status.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    total = sum(float(r["duration_s"] or 0) for r in rows)
    return {
        "exit": res.returncode,
        "ops": len(rows),
        "statuses": sorted({r["status"] for r in rows}),
        "wall_s": wall,
        "sum_op_s": total,
        "lanes": 2,
        "efficiency": total / (2 * wall) if wall else 0.0,
        "per_device": {d: sum(float(r["duration_s"] or 0) for r in rows if r["device"] == d) for d in sorted({r["device"] for r in rows})},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200, help="trivial ops for the bookkeeping measurement")
    ap.add_argument("--fault-rounds", type=int, default=2, help="repetitions of the CLI measurement (best kept)")
    ap.add_argument("--sample-ops", default="abs,add,relu,mul", help="sample-suite ops for the scaling run, or 'all'")
    ap.add_argument("--skip-sample", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="opscreen-batch-bench-"))
    try:
        b = bench_bookkeeping(args.ops, tmp)
        print(
            f"1. bookkeeping: {b['ops']} trivial ops ('python -c pass' children), one lane: "
            f"batch {b['batch_s']:.2f} s vs plain loop {b['raw_s']:.2f} s -> "
            f"{b['per_op_ms']:.1f} ms per op of scheduling, journal (fsync'd result.json, .complete, "
            "ops_status.csv) and progress"
        )
        c = bench_cli(args.fault_rounds, tmp)
        print(
            f"2. per-op harness, real 'opscreen run' + run_op on {c['ops']} trivial pytest ops, one lane: "
            f"wall {c['wall_s']:.2f} s, children {c['child_sum_s']:.2f} s (same argv run directly: "
            f"{c['raw_children_s']:.2f} s), CLI start-up {c['cli_fixed_s']:.2f} s -> "
            f"{c['per_op_ms']:.0f} ms per op incl. start-up, {c['per_op_no_startup_ms']:.0f} ms without; "
            f"{c['per_op_vs_raw_ms']:.0f} ms per op against running the children directly"
        )
        if not args.skip_sample:
            s = bench_sample(args.sample_ops, tmp)
            print(
                f"3. scaling, sample suite ({s['ops']} ops, statuses {','.join(s['statuses'])}) on 2 cpu lanes: "
                f"wall {s['wall_s']:.1f} s, sum of per-op times {s['sum_op_s']:.1f} s -> efficiency "
                f"{s['efficiency'] * 100:.0f}% (per device: "
                + ", ".join(f"dev {d} {v:.1f} s" for d, v in s["per_device"].items())
                + ")"
            )
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

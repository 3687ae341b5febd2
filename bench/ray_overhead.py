"""Ops per second through the Ray executor against the local executor, on the CPU.

    .venv/bin/python bench/ray_overhead.py [--sample-ops abs,add,relu,mul,exp,gelu | all]
        [--lanes 2] [--skip-sample]

A local Ray cluster is started in this process (``opscreen_slot`` = ``--lanes``: the
cpu backend's lanes), and every ``opscreen run`` joins it with ``--address`` as a
separate driver, as on a real cluster. Two workloads, each run by the local executor
and by the Ray executor on the same number of lanes:

1. trivial ops: the fault suite's eight ``ok_*`` ops (pytest children that do nothing,
   torch stubbed), where nearly all the time is harness: ops per second, and the
   harness's lane time per op, ``(lanes x wall - sum of the children's walls) / ops``;
2. the sample suite (real torch children; ``OPSCREEN_MAX_TIME`` lowered to keep it
   short): ops per second and the same overhead per op.

3. the executor round trip alone: ``--roundtrip-jobs`` jobs on one lane through each
   executor with a lane runner that starts no process (it writes a run.log and a
   result.json): milliseconds per job, what Ray adds per op without the noise of
   real children.

Each wall is also given without the command's fixed start-up (measured by a second
run over the complete run dir, which runs nothing; for Ray that includes joining the
cluster and starting one worker per lane).
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
FAULTS = ROOT / "tests" / "fixtures" / "suites" / "faults"


def run_once(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"failed ({res.returncode}): {' '.join(argv)}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return wall


def measure(argv: list[str], out: Path, env: dict, lanes: int) -> dict:
    wall = run_once(argv, env)
    fixed = run_once(argv, env)  # the same command over the complete run dir: nothing runs
    with open(out / "ops_status.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    child = sum(float(r["duration_s"] or 0) for r in rows)
    n = len(rows)
    return {
        "ops": n, "wall_s": wall, "fixed_s": fixed, "child_s": child,
        "ops_per_s": n / wall, "ops_per_s_no_startup": n / max(wall - fixed, 1e-9),
        "overhead_ms": (lanes * wall - child) / n * 1000,
        "overhead_no_startup_ms": (lanes * (wall - fixed) - child) / n * 1000,
    }


def base_argv(suite: Path | None, out: Path, lanes: int) -> list[str]:
    argv = [sys.executable, "-m", "opscreen", "run", "--backend", "cpu", "--devices", ",".join(map(str, range(lanes))),
            "--out", str(out), "--plain", "--timeout", "900"]
    return argv + (["--suite", str(suite)] if suite else [])


def bench_pair(name: str, argv_for, env: dict, tmp: Path, lanes: int, address: str) -> dict:
    out = {}
    for kind in ("local", "ray"):
        run_dir = tmp / f"{name}-{kind}"
        argv = argv_for(run_dir)
        if kind == "ray":
            argv += ["--executor", "ray", "--address", address, "--ray-env", "FAULTS_*"]
        out[kind] = measure(argv, run_dir, env, lanes)
    return out


def say(title: str, r: dict, lanes: int) -> None:
    loc, ray = r["local"], r["ray"]
    print(f"{title} ({loc['ops']} ops, {lanes} cpu lanes)")
    for kind, m in (("local", loc), ("ray", ray)):
        print(f"  {kind:5}: wall {m['wall_s']:6.2f} s (start-up {m['fixed_s']:5.2f} s), children {m['child_s']:6.2f} s -> "
              f"{m['ops_per_s']:5.2f} ops/s ({m['ops_per_s_no_startup']:5.2f} without start-up); harness lane time "
              f"{m['overhead_ms']:6.0f} ms/op ({m['overhead_no_startup_ms']:6.0f} without start-up)")
    print(f"  ray/local ops per second: {ray['ops_per_s'] / loc['ops_per_s']:.2f} "
          f"({ray['ops_per_s_no_startup'] / loc['ops_per_s_no_startup']:.2f} without start-up); Ray adds "
          f"{ray['overhead_no_startup_ms'] - loc['overhead_no_startup_ms']:.0f} ms of lane time per op")


# -- 3. the executor round trip alone ---------------------------------------------------


class TrivialRunner:
    """A lane runner without a child process: writes a run.log and a result.json."""

    def __init__(self, lane: int):
        self.lane = lane

    def run(self, request, out_dir: Path, *, stop=None, echo=None):
        from opscreen.op.request import OpOutcome

        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "run.log").write_text("a line of output\n" * 200)
        (out_dir / "result.json").write_text('{"status": "passed"}')
        return OpOutcome("passed", 0, 0, 0.0, None, out_dir, "wallclock")

    def close(self) -> None:
        pass


def roundtrip(address: str, n: int) -> None:
    """(In a process of its own: this one is the cluster's head.) ``n`` jobs on one lane
    through each executor; prints the milliseconds per job of each."""
    sys.path.insert(0, str(SRC))
    from opscreen.backends import resolve
    from opscreen.batch.executor import Job, LocalExecutor
    from opscreen.batch.ray_executor import RayExecutor

    tmp = Path(tempfile.mkdtemp(prefix="opscreen-roundtrip-"))
    runner = TrivialRunner(0)
    local = LocalExecutor(work=lambda req, out, stop=None, echo=None: runner.run(req, out, stop=stop))
    ray_ex = RayExecutor(resolve("cpu"), address=address, runner_factory=TrivialRunner)
    for name, ex in (("local", local), ("ray", ray_ex)):
        ex.start([0])
        t0 = time.perf_counter()
        for i in range(n):
            ex.submit(Job(i, f"op{i}", 0, None, tmp / name / f"op{i}"))
            while not ex.wait(1.0):
                pass
        print(f"{name} {(time.perf_counter() - t0) / n * 1000:.2f}")
        ex.close()
    shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--sample-ops", default="abs,add,relu,mul,exp,gelu", help="sample-suite ops, or 'all'")
    ap.add_argument("--skip-sample", action="store_true")
    ap.add_argument("--roundtrip-jobs", type=int, default=200, help="jobs for the executor round trip")
    ap.add_argument("--roundtrip", metavar="ADDRESS", help=argparse.SUPPRESS)  # internal: measurement 3's process
    args = ap.parse_args()
    if args.roundtrip:
        roundtrip(args.roundtrip, args.roundtrip_jobs)
        return 0
    import ray

    ray.init(num_cpus=1, resources={"opscreen_slot": args.lanes}, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR, namespace="opscreen-bench")
    address = ray.get_runtime_context().gcs_address
    tmp = Path(tempfile.mkdtemp(prefix="opscreen-ray-bench-"))
    env = {k: v for k, v in os.environ.items() if k not in ("OPSCREEN_BATCH_RUN", "FLAGGEMS_ROOT")}
    try:
        suite = tmp / "faults"
        shutil.copytree(FAULTS, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
        (tmp / "state").mkdir()
        fenv = {**env, "PYTHONPATH": os.pathsep.join([str(SRC), str(FAULTS / "stub_torch")]),
                "FAULTS_STATE_DIR": str(tmp / "state"), "PYTHONDONTWRITEBYTECODE": "1"}
        ops = ",".join(f"ok_{c}" for c in "abcdefgh")  # every trivial op the fault suite has
        r = bench_pair("trivial", lambda d: base_argv(suite, d, args.lanes) + ["--ops", ops], fenv, tmp, args.lanes, address)
        say("1. trivial pytest ops (fault suite, torch stubbed)", r, args.lanes)
        if not args.skip_sample:
            senv = {**env, "PYTHONPATH": str(SRC), "OPSCREEN_MAX_TIME": env.get("OPSCREEN_MAX_TIME", "0.25")}
            extra = [] if args.sample_ops == "all" else ["--ops", args.sample_ops]
            r = bench_pair("sample", lambda d: base_argv(None, d, args.lanes) + extra, senv, tmp, args.lanes, address)
            say("2. sample suite (real torch children)", r, args.lanes)
        res = subprocess.run([sys.executable, __file__, "--roundtrip", address, "--roundtrip-jobs", str(args.roundtrip_jobs)],
                             env={**env, "PYTHONPATH": str(SRC)}, capture_output=True, text=True, check=True)
        ms = dict(line.split() for line in res.stdout.splitlines() if line.split()[:1] in (["local"], ["ray"]))
        print(f"3. executor round trip alone ({args.roundtrip_jobs} jobs on one lane, a runner that writes two small "
              f"files and starts no process): local {float(ms['local']):.1f} ms/job, ray {float(ms['ray']):.1f} ms/job "
              "(submit, the actor call, the op dir packed on the node and unpacked into the run dir)")
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

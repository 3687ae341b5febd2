"""``opscreen run --executor ray`` on a local Ray cluster on the CPU: real processes,
real signals, no shared files between the driver and its lanes' workers but the
suite (the run dir is written by the driver only, from what the lanes send back).

One cluster for the module (this process is its head; the cpu backend's lanes are
the ``opscreen_slot`` resource, declared here as three fake accelerators). Each
test's runner is a separate ``opscreen run`` process that joins the cluster with
``--address``. The fault suite's variables reach the lanes' children through
``--ray-env FAULTS_*``, so every process of a test, the lanes' workers and their
guards included, carries the test's ``FAULTS_TAG`` and is checked to be gone at the end.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch_faults import SRC, Faults, faults, is_alive, result, reaped, status_rows  # noqa: E402,F401

LANES = 3
FAULT_OPS = "ok_a,hang,segv,flaky,broken,fatal,dtype_mixed"


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, resources={"opscreen_slot": LANES}, include_dashboard=False, log_to_driver=False,
             namespace="opscreen-tests", logging_level=logging.ERROR)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def ray_args(address: str, *args) -> list[str]:
    return ["--executor", "ray", "--address", address, "--ray-env", "FAULTS_*", *args]


def completed(out: Path) -> set[str]:
    return {p.parent.name for p in (out / "ops").glob("*/.complete")} if (out / "ops").is_dir() else set()


def wait_for_children(faults, n: int, timeout: float = 90) -> list[int]:
    """The pids of the first ``n`` op children (recorded by the fault suite) once they run."""
    pid_dir = faults.state / "pids"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [int(p.name) for p in pid_dir.iterdir()] if pid_dir.is_dir() else []
        if len(pids) >= n:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} children started within {timeout} s")


def dies(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not is_alive(pid)


def op_of(faults, pid: int, ops: list[str]) -> str:
    """The op whose child ``pid`` is (each run of an op appends ``pid device`` to its runs file)."""
    for op in ops:
        p = faults.state / f"{op}.runs"
        if p.exists() and any(line.split()[0] == str(pid) for line in p.read_text().splitlines()):
            return op
    raise AssertionError(f"no op ran as pid {pid}")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        data = fh.read()
    return int(data[data.rindex(b")") + 2:].split()[1])


def test_ray_is_imported_only_when_asked_for_and_a_missing_ray_is_one_line(cli, tmp_path):
    code = ("import sys, opscreen.cli as c; c.build_parser(); import opscreen.batch.session, opscreen.commands.run, "
            "opscreen.batch.ray_executor, opscreen.batch.join; print('ray' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stdout + res.stderr

    no_ray = tmp_path / "no_ray"
    (no_ray / "ray").mkdir(parents=True)
    (no_ray / "ray" / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    out = tmp_path / "run"
    res = cli("run", "--backend", "cpu", "--ops", "abs", "--out", out, "--executor", "ray",
              env={"PYTHONPATH": os.pathsep.join([str(no_ray), str(SRC)])})
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        "opscreen run: --executor ray needs Ray (No module named 'ray'): pip install -e '.[ray]' in opscreen's checkout"]
    assert not out.exists()
    res = cli("run", "--backend", "cpu", "--ops", "abs", "--out", out, "--address", "auto")
    assert res.returncode == 2 and "--address is for --executor ray" in res.stderr and not out.exists()


def test_lanes_are_every_unit_of_the_resource_on_every_alive_node():
    from opscreen.backends import resolve
    from opscreen.batch.ray_executor import forwarded_env, plan_lanes, resource_for

    nodes = [
        {"NodeID": "b" * 8, "Alive": True, "NodeManagerAddress": "10.0.0.2", "NodeManagerHostname": "n2", "Resources": {"NPU": 2.0}},
        {"NodeID": "a" * 8, "Alive": True, "NodeManagerAddress": "10.0.0.1", "NodeManagerHostname": "n1", "Resources": {"NPU": 8.0, "GPU": 1.0}},
        {"NodeID": "c" * 8, "Alive": False, "NodeManagerAddress": "10.0.0.0", "Resources": {"NPU": 8.0}},
        {"NodeID": "d" * 8, "Alive": True, "NodeManagerAddress": "10.0.0.3", "Resources": {"CPU": 8.0}},
    ]
    lanes = plan_lanes(nodes, "NPU")
    assert [(l.lane, l.host, l.index) for l in lanes] == [(i, "n1", i) for i in range(8)] + [(8, "n2", 0), (9, "n2", 1)]
    assert [resource_for(resolve(b)) for b in ("cuda", "rocm", "ascend", "musa", "mlu", "cpu")] == \
        ["GPU", "GPU", "NPU", "MUSA", "MLU", "opscreen_slot"]
    env = {"PYTHONPATH": "/p", "OPSCREEN_MAX_TIME": "1", "CUDA_VISIBLE_DEVICES": "0", "OPSCREEN_BATCH_RUN": "/r",
           "HOME": "/h", "MY_A": "1", "MY_B": "2", "OTHER": "x", "TRITON_CACHE_DIR": "/t"}
    assert forwarded_env(env, ["MY_*"]) == {"PYTHONPATH": "/p", "OPSCREEN_MAX_TIME": "1", "MY_A": "1", "MY_B": "2",
                                             "TRITON_CACHE_DIR": "/t"}
    assert forwarded_env({**env, "CUDA_VISIBLE_DEVICES": "3"}, ["CUDA_*"]) == forwarded_env(env)


@pytest.mark.parametrize("isolation", ["op", "worker"])
def test_sample_suite_runs_through_ray(cluster, cli, tmp_path, isolation):
    """Real torch children on two lanes, fresh per op or in each lane's warm worker on its
    node; the driver's run dir holds what they measured."""
    out = tmp_path / "run"
    res = cli("run", "--backend", "cpu", "--ops", "abs,relu,exp", "--out", out, "--plain", "--timeout", "300",
              "--executor", "ray", "--address", cluster, "--isolation", isolation, env={"OPSCREEN_MAX_TIME": "0.05"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "resource opscreen_slot, lanes" in res.stderr
    rows = status_rows(out)
    assert set(rows) == {"abs", "relu", "exp"} and {r["status"] for r in rows.values()} == {"passed"}
    modes = {json.loads((out / "ops" / op / "result.json").read_text())["phases"]["mode"] for op in rows}
    assert modes == {"worker" if isolation == "worker" else "process"}
    for op in rows:
        d = out / "ops" / op
        assert (d / ".complete").is_file() and (d / "record.log").stat().st_size > 0
        cfg = json.loads((d / "child_config.json").read_text())
        assert not cfg["out_dir"].startswith(str(out)), "the op ran in a directory of its node, not in the run dir"
        assert not (d / ".pyshim").exists()
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["settings"]["executor"] == "ray" and ident["settings"]["address"] == cluster
    assert ident["caliber"]["device_name"]
    res = cli("summary", out)
    assert res.returncode == 0, res.stdout + res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["ops"] == {"passed": 3} and {r[0] for r in summary["rows"]} == {"abs", "relu", "exp"}


def test_fault_suite_statuses_match_the_local_executor(cluster, tmp_path):
    """Timeouts, crashes, flaky and deterministic failures, device-fatal moves, dtype
    fallback: the same rows through Ray as through the local executor."""
    rows = {}
    for kind in ("local", "ray"):
        (tmp_path / kind).mkdir()
        f = Faults(tmp_path / kind)
        out = f.tmp / "run"
        extra = ray_args(cluster) if kind == "ray" else []
        res = f.run(out, "--devices", "0,1", "--ops", FAULT_OPS, "--timeout", "3", "--grace", "0.5", *extra)
        assert res.returncode == 1, res.stdout + res.stderr
        rows[kind] = {op: (r["status"], r["attempts"], r["dtype_level"]) for op, r in status_rows(out).items()}
        if kind == "ray":
            assert f.runs("hang") == 3 and f.runs("flaky") == 2 and f.runs("broken") == 2
            assert set(result(out, "fatal")["devices"]) == {0, 1}
            mixed = result(out, "dtype_mixed")
            assert sorted(mixed["dtypes_passed"]) == ["float16", "float32"]
            assert (out / "ops" / "dtype_mixed" / "dtypes" / "float64" / "run.log").is_file()
            assert (out / "ops" / "flaky" / "attempts" / "attempt-1.log").is_file()
        f.assert_no_leftovers(wait=15)
    assert rows["ray"] == rows["local"]
    assert rows["ray"]["hang"] == ("timeout", "3", "0") and rows["ray"]["segv"] == ("crashed", "2", "0")
    assert rows["ray"]["fatal"][0] == "device_fatal" and rows["ray"]["flaky"] == ("passed", "2", "0")
    assert rows["ray"]["dtype_mixed"][0] == "passed" and rows["ray"]["dtype_mixed"][2] == "2"


def test_a_lane_lost_mid_op_runs_the_op_again_elsewhere(cluster, faults):
    """SIGKILL the Ray worker of a lane while its op runs: the lane's guard kills the
    op's child at once (it runs in a session of its own), the op runs again on another
    lane and is recorded once, and the lost lane leaves the run."""
    out = faults.tmp / "run"
    ops = [f"ok_{c}" for c in "abc"]
    proc = faults.popen(out, "--ops", ",".join(ops), "--timeout", "60", *ray_args(cluster), env={"FAULTS_OP_SLEEP": "8"})
    with reaped(proc):
        child = wait_for_children(faults, 1)[0]
        victim_op = op_of(faults, child, ops)
        os.kill(parent_of(child), signal.SIGKILL)
        assert dies(child, within=4), "the child of a killed worker must not run on (it sleeps 8 s)"
        stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stdout
    assert "marked bad: lost:" in stdout
    rows = status_rows(out)
    assert set(rows) == set(ops) and {r["status"] for r in rows.values()} == {"passed"}
    res = result(out, victim_op)
    assert faults.runs(victim_op) == 2 and res["attempts"] == 1 and len(res["attempt_log"]) == 1
    lost = res["lanes_lost"]
    assert len(lost) == 1 and res["device"] != lost[0]["lane"]
    ident = json.loads((out / "run_identity.json").read_text())
    assert list(ident["bad_devices"]) == [str(lost[0]["lane"])]
    faults.assert_no_leftovers(wait=15)


def test_sigint_stops_every_lane_and_a_resume_finishes(cluster, faults):
    out = faults.tmp / "run"
    ops = [f"ok_{c}" for c in "abcde"]
    args = ["--ops", ",".join(ops), "--timeout", "60", "--grace", "1", *ray_args(cluster)]
    proc = faults.popen(out, *args, env={"FAULTS_OP_SLEEP": "30"})
    with reaped(proc):
        children = wait_for_children(faults, LANES)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
        assert time.monotonic() - t0 < 20  # grace 1 s: the 30 s ops are not waited for
    assert proc.returncode == 130, stdout
    assert "SIGINT: stopping" in stdout
    assert not [p for p in children if is_alive(p)]
    assert not completed(out)
    faults.assert_no_leftovers(wait=15)
    res = faults.run(out, env={"FAULTS_OP_SLEEP": "0"})  # resumes with the recorded settings (executor ray)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "resource opscreen_slot" in res.stderr
    assert set(status_rows(out)) == set(ops)
    faults.assert_no_leftovers(wait=15)


def test_driver_sigkill_then_resume_loses_and_repeats_nothing(cluster, faults):
    """SIGKILL the driver mid-run, while ops run on its lanes: its lanes' workers end
    and their children with them (no resume needed for that); the resume records
    every op once, and no op complete at the kill runs again."""
    out = faults.tmp / "run"
    ops = [f"ok_{c}" for c in "abcdefgh"]
    args = ["--ops", ",".join(ops), "--timeout", "60", "--grace", "0.5", *ray_args(cluster)]
    env = {"FAULTS_OP_SLEEP": "1.5"}
    proc = faults.popen(out, *args, env=env)
    with reaped(proc):
        deadline = time.monotonic() + 120
        running: list[int] = []
        while time.monotonic() < deadline:
            pid_dir = faults.state / "pids"
            running = [int(p.name) for p in pid_dir.iterdir() if is_alive(int(p.name))] if pid_dir.is_dir() else []
            if len(completed(out)) >= 2 and running:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert running and len(completed(out)) < len(ops), "the kill came mid-run"
    assert all(dies(pid, within=10) for pid in running), "the killed driver's children run on"
    faults.assert_no_leftovers(wait=15)
    done = {op: faults.runs(op) for op in completed(out)}
    res = faults.run(out, *args, env={"FAULTS_OP_SLEEP": "0"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(done)} already complete" in res.stdout
    rows = status_rows(out)
    assert set(rows) == set(ops) and {r["status"] for r in rows.values()} == {"passed"}
    assert {op: faults.runs(op) for op in done} == done, "an op complete at the kill ran again"
    for op in ops:
        assert result(out, op)["attempts"] == 1
    faults.assert_no_leftovers(wait=15)

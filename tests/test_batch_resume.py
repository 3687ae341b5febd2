"""Resume, replay and kill safety of ``opscreen run`` (real processes, the fault suite)."""

from __future__ import annotations

import json
import random
import re
import signal
import sys
import time
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch_faults import faults, kill_after, result, reaped, status_rows  # noqa: E402,F401  (faults: the shared fixture)


OK_OPS = [f"ok_{c}" for c in "abcdefgh"]


def completed(out: Path) -> set[str]:
    ops = out / "ops"
    return {p.parent.name for p in ops.glob("*/.complete")} if ops.is_dir() else set()


def last_invocation(out: Path, op: str) -> int:
    text = (out / "ops" / op / "run.log").read_text()
    found = re.findall(rf"faults: {op} invocation (\d+)", text)
    assert found, f"no invocation line in {op}/run.log"
    return int(found[-1])


@pytest.mark.parametrize("isolation", ["op", "worker"])
def test_sigkill_at_random_points_then_resume(faults, isolation):
    """SIGKILL the runner at >= 20 random moments; each restart resumes. In the end
    every op is recorded exactly once and no completed op ever ran again, in a fresh
    process per op and with warm workers (which the next runner reaps)."""
    out = faults.tmp / "run"
    ops = OK_OPS + ["flaky", "broken"]
    args = ["--ops", ",".join(ops), "--devices", "0,1", "--timeout", "30", "--grace", "0.5", "--isolation", isolation]
    # Each op must outlast most kill intervals, or the run ends before 20 kill points
    # (ops got faster once the cpu device check stopped importing torch).
    env = {"FAULTS_OP_SLEEP": "1.0"}
    rng = random.Random(20260817)
    runs_when_complete: dict[str, int] = {}
    kills = 0
    for _ in range(40):
        kills += kill_after(faults, out, args, env, rng.uniform(0.05, 1.2))
        # invariants at every kill point
        done = completed(out)
        for op in done:
            assert (out / "ops" / op / "result.json").is_file()
            runs_when_complete.setdefault(op, faults.runs(op))
        if (out / "ops_status.csv").exists():
            rows = status_rows(out)  # asserts no duplicate rows
            # a row with a result only for a complete op; every other op of the run is not_run
            assert {op for op, r in rows.items() if r["status"] not in ("not_run", "interrupted")} <= done
            assert set(rows) <= set(ops) and all(r["status"] == "not_run" for op, r in rows.items() if op not in done)
        if kills >= 24 or done == set(ops):
            break
    assert kills >= 20, f"only {kills} kill points (the run finished too early)"
    res = faults.run(out, *args, env=env)
    assert res.returncode == 1, res.stdout + res.stderr  # 'broken' fails by design
    rows = status_rows(out)
    assert set(rows) == set(ops)
    assert completed(out) == set(ops)
    for op in OK_OPS + ["flaky"]:
        assert rows[op]["status"] == "passed", rows[op]
    assert rows["broken"]["status"] == "failed"
    for op in ops:
        # the results shown come from the op's last run: nothing ran after it
        assert last_invocation(out, op) == faults.runs(op), op
        # and an op complete at some kill point never ran again
        if op in runs_when_complete:
            assert faults.runs(op) == runs_when_complete[op], op
    faults.assert_no_leftovers()


def test_resume_skips_complete_and_clears_partial(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--timeout", "20")
    assert res.returncode == 0, res.stdout + res.stderr
    # a partial op dir (as a kill mid-op leaves it)
    partial = out / "ops" / "ok_c"
    partial.mkdir(parents=True)
    (partial / "run.log").write_text("half a log\n")
    (partial / "junk.bin").write_text("x")
    res = faults.run(out, "--ops", "ok_a,ok_b,ok_c", "--devices", "0", "--timeout", "20")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 already complete" in res.stdout
    assert faults.runs("ok_a") == 1 and faults.runs("ok_b") == 1 and faults.runs("ok_c") == 1
    assert not (partial / "junk.bin").exists()
    assert "half a log" not in (partial / "run.log").read_text()
    assert set(status_rows(out)) == {"ok_a", "ok_b", "ok_c"}
    ident = json.loads((out / "run_identity.json").read_text())
    assert len(ident["sessions"]) == 2


def test_resume_refuses_other_caliber_settings(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--timer", "wallclock")
    assert res.returncode == 0, res.stdout + res.stderr
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--timer", "direct")
    assert res.returncode == 2
    assert "measured with other settings" in res.stderr and "timer" in res.stderr
    res = faults.run(out, "--no-resume")
    assert res.returncode == 2 and "already holds a run" in res.stderr


def test_resume_refuses_another_isolation_and_auto_means_the_recorded_one(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0")  # auto: a fresh process per op
    assert res.returncode == 0, res.stdout + res.stderr
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["settings"]["isolation"] == ident["caliber"]["isolation"] == "op"
    for args, env in ((["--isolation", "worker"], {}), ([], {"OPSCREEN_ISOLATION": "worker"})):
        res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", *args, env=env)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "isolation: recorded 'op', asked 'worker'" in res.stderr
        assert not (out / "ops" / "ok_b").exists()
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--isolation", "auto")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((out / "ops" / "ok_b" / "result.json").read_text())["phases"]["mode"] == "process"


def test_replay_from_reruns_what_did_not_pass_with_recorded_settings(faults):
    first = faults.tmp / "first"
    res = faults.run(first, "--ops", "ok_a,broken", "--devices", "0", "--timeout", "7", "--retries", "1")
    assert res.returncode == 1
    assert faults.runs("broken") == 2 and faults.runs("ok_a") == 1
    second = faults.tmp / "second"
    res = faults.run(second, "--replay-from", first)
    assert res.returncode == 1, res.stdout + res.stderr
    assert set(status_rows(second)) == {"broken"}
    assert faults.runs("ok_a") == 1 and faults.runs("broken") == 4
    ident = json.loads((second / "run_identity.json").read_text())
    assert ident["batch"]["timeout"] == 7.0 and ident["batch"]["retries"] == 1
    assert ident["batch"]["replay_of"] == str(first)
    # replay in place: the op is reset and run again inside the same run dir
    res = faults.run(first, "--replay-from", first, "--ops", "ok_a")
    assert res.returncode == 1  # 'broken' is still recorded as failed in that run
    assert faults.runs("ok_a") == 2
    assert set(status_rows(first)) == {"ok_a", "broken"}
    assert result(first, "ok_a")["status"] == "passed"
    faults.assert_no_leftovers()


def test_leftovers_of_a_killed_runner_are_reaped_on_resume(faults):
    """A runner SIGKILLed while an op holds a grandchild: the restart kills it."""
    out = faults.tmp / "run"
    proc = faults.popen(out, "--ops", "hang", "--devices", "0", "--timeout", "120")
    sigkill_when_children_run(proc, faults.state / "pids", 2)  # pytest child + its sleep
    assert faults.tagged(), "the killed runner's children should still be there"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--timeout", "20")
    assert res.returncode == 0, res.stdout + res.stderr
    faults.assert_no_leftovers(wait=2)


def sigkill_when_children_run(proc, pid_dir, n: int) -> None:
    """SIGKILL the runner ``proc`` once ``n`` of its children have written their pid
    files into ``pid_dir`` (at most 60 s), so they outlive it."""
    with reaped(proc):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if pid_dir.is_dir() and len(list(pid_dir.iterdir())) >= n:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)


def _alive_pids(pids: list[int]) -> list[int]:
    from test_batch_faults import is_alive

    return [p for p in pids if is_alive(p)]


@pytest.mark.parametrize("first,second", [("real", "link"), ("link", "real")])
def test_resume_through_the_other_name_of_a_symlinked_run_dir_kills_leftovers(faults, first, second):
    """A runner SIGKILLed while its children run, resumed through the other name of
    the same run dir (symlink vs. real path): the resume kills the old children
    before it runs anything, so no two processes of one op write to one op dir."""
    real = faults.tmp / "real"
    link = faults.tmp / "link"
    link.symlink_to(real, target_is_directory=True)
    names = {"real": real, "link": link}
    args = ["--ops", "ok_a,ok_b,ok_c,ok_d", "--devices", "0,1", "--timeout", "120", "--grace", "0.5"]
    proc = faults.popen(names[first], *args, env={"FAULTS_OP_SLEEP": "60"})
    pid_dir = faults.state / "pids"
    sigkill_when_children_run(proc, pid_dir, 2)  # one child per device
    old = sorted(int(p.name) for p in pid_dir.iterdir())
    assert len(_alive_pids(old)) >= 2, "the killed runner's children should still be running"

    resume = faults.popen(names[second], *args, env={"FAULTS_OP_SLEEP": "0"})
    try:
        # The header line comes after the leftovers were reaped and before any op runs.
        header = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = resume.stdout.readline()
            if not line or "ops to run" in line:
                header = line
                break
        assert "ops to run" in header, header
        time.sleep(2)
        assert not _alive_pids(old), f"old children alive 2 s into the resume through the {second} path: {_alive_pids(old)}"
        rest, _ = resume.communicate(timeout=120)
    finally:
        if resume.poll() is None:
            resume.kill()
            resume.wait()
    assert resume.returncode == 0, header + rest
    rows = status_rows(real)
    assert set(rows) == {"ok_a", "ok_b", "ok_c", "ok_d"} and {r["status"] for r in rows.values()} == {"passed"}
    assert str(real) in header  # the run dir is named by its real path
    faults.assert_no_leftovers(wait=2)

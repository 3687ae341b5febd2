"""The run directory journal: atomic files, .complete markers, resume scan, lock."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from opscreen.batch.attempts import Attempt, DeviceHealth, RetryPolicy
from opscreen.batch.journal import (
    COMPLETE,
    STATUS_COLUMNS,
    Journal,
    OpRecord,
    atomic_write_text,
    op_dirname,
    read_status_csv,
)
from opscreen.errors import UsageError


def result(op, status="passed", **kw):
    d = {"schema": 1, "op": op, "status": status, "attempts": 1, "dtype_level": 0, "duration_s": 1.5, "backend": "cpu", "device": 0, "timer": "wallclock", "error": None}
    d.update(kw)
    return d


def test_op_dirname_is_safe():
    assert op_dirname("abs") == "abs"
    assert op_dirname("div.Tensor_mode-1") == "div.Tensor_mode-1"
    for bad in ("..", ".", "a/b", "../x", "a b", ""):
        name = op_dirname(bad)
        assert "/" not in name and name not in (".", "..", "")
    assert op_dirname("a/b") != op_dirname("a_b")


def test_complete_writes_result_then_marker_and_scan_rebuilds(tmp_path):
    j = Journal(tmp_path / "run")
    j.lock()
    try:
        d = j.op_dir("abs")
        d.mkdir(parents=True)
        (d / "run.log").write_text("log")
        rec = j.complete("abs", result("abs"))
        assert (d / COMPLETE).is_file()
        assert json.loads((d / "result.json").read_text())["status"] == "passed"
        assert rec.path == "ops/abs"
        # a partial op: output but no marker
        p = j.op_dir("mm")
        p.mkdir(parents=True)
        (p / "run.log").write_text("half")
        done = j.scan()
        assert list(done) == ["abs"]
        assert done["abs"].status == "passed" and done["abs"].attempts == 1
        gone = j.clear_incomplete()
        assert gone == [p] and not p.exists()
        assert (d / "run.log").exists()
    finally:
        j.unlock()


def test_status_csv_columns_and_roundtrip(tmp_path):
    j = Journal(tmp_path)
    rows = [
        OpRecord("abs", "passed", 1, 0, 1.25, "cpu", 0, "wallclock", None, "ops/abs"),
        OpRecord("mm", "failed", 2, 1, 3.0, "cpu", 1, "wallclock", 'RuntimeError: x, "y"', "ops/mm"),
        OpRecord("where", "dismissed", 0, None, None, "cpu", None, "", "needs a GPU", ""),
    ]
    j.write_status(rows)
    with open(tmp_path / "ops_status.csv", newline="") as fh:
        header = next(csv.reader(fh))
    assert tuple(header) == STATUS_COLUMNS
    back = read_status_csv(tmp_path / "ops_status.csv")
    assert [r["op"] for r in back] == ["abs", "mm", "where"]
    assert back[1]["error"] == 'RuntimeError: x, "y"'
    assert back[0]["duration_s"] == "1.250"
    assert back[2]["dtype_level"] == ""


def test_reset_op_removes_marker_first(tmp_path):
    j = Journal(tmp_path)
    j.op_dir("abs").mkdir(parents=True)
    j.complete("abs", result("abs", "failed"))
    d = j.reset_op("abs")
    assert d.is_dir() and not any(d.iterdir())
    assert j.scan() == {}


def test_lock_refuses_second_runner_and_dies_with_holder(tmp_path):
    code = (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from opscreen.batch.journal import Journal\n"
        "j = Journal(%r); j.lock(); print('locked', flush=True); time.sleep(60)\n"
    ) % (str(os.path.join(os.path.dirname(__file__), "..", "src")), str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(UsageError, match="in use by another opscreen run"):
            Journal(tmp_path).lock()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        j = Journal(tmp_path)
        j.lock()  # the kernel released the dead holder's lock
        j.unlock()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_atomic_write_never_leaves_a_torn_file(tmp_path):
    """A writer SIGKILLed in a loop of atomic rewrites leaves the old or the new file."""
    target = tmp_path / "ops_status.csv"
    atomic_write_text(target, "v,0\n" * 1000)
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from opscreen.batch.journal import atomic_write_text\n"
        "i = 0\n"
        "while True:\n"
        "    i += 1\n"
        "    atomic_write_text(%r, ('v,%%d\\n' %% i) * 1000, fsync=False)\n"
    ) % (str(os.path.join(os.path.dirname(__file__), "..", "src")), str(target))
    for k in range(5):
        proc = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(0.15 + 0.05 * k)
        proc.kill()
        proc.wait()
        lines = target.read_text().splitlines()
        assert len(lines) == 1000 and len(set(lines)) == 1
    Journal(tmp_path).clear_incomplete()
    assert not list(tmp_path.glob(".*.tmp"))


def att(status, sig=None, n=1, dtype_error=False):
    return Attempt(n, 0, None, 0, status, None, None, 0.1, sig, sig, dtype_error)


def test_retry_policy():
    p = RetryPolicy(retries=2)
    assert not p.decide([att("passed")]).retry
    # deterministic: the same signature twice stops before the retries run out
    assert p.decide([att("failed", "E: x")]).retry
    d = p.decide([att("failed", "E: x"), att("failed", "E: x")])
    assert not d.retry and "deterministic" in d.reason
    # different failures keep going until the budget ends
    assert p.decide([att("failed", "E: x"), att("failed", "E: y")]).retry
    assert not p.decide([att("failed", "a"), att("failed", "b"), att("failed", "c")]).retry
    # timeouts and device-fatal exits are possibly transient
    assert p.decide([att("timeout", "timeout"), att("timeout", "timeout")]).retry
    fatal = p.decide([att("device_fatal", "fatal: x")])
    assert fatal.retry and fatal.other_device
    # a crash twice the same way is deterministic too
    assert not p.decide([att("crashed", "python-fatal: Segmentation fault")] * 2).retry
    # a dtype failure moves down the ladder, no retry
    assert not p.decide([att("failed", "ValueError: Given dtype(s)", dtype_error=True)]).retry
    assert not RetryPolicy(0).decide([att("timeout")]).retry


def test_device_health_counts_distinct_ops_in_a_row():
    h = DeviceHealth(threshold=3)
    assert not h.record(1, "a", "device_fatal")
    assert not h.record(1, "a", "device_fatal")  # the same op again does not count
    assert not h.record(1, "b", "device_fatal")
    assert not h.record(0, "c", "device_fatal")  # another device
    assert h.record(1, "c", "device_fatal")
    assert h.is_bad(1) and "3 device-fatal exits in a row" in h.bad[1]
    h2 = DeviceHealth(threshold=2)
    h2.record(0, "a", "device_fatal")
    h2.record(0, "b", "passed")  # resets
    assert not h2.record(0, "c", "device_fatal")


def test_result_json_is_assembled_from_the_attempts_in_one_function(tmp_path):
    from opscreen.batch.attempts import AttemptMachine
    from opscreen.batch.journal import op_result, status_records

    m = AttemptMachine(op_dtypes={"abs": ["float16", "float32"]})
    s = m.start("abs", home=1)
    s.devices = [1, 0]

    def a(status, dtype_error=False, error=None):
        return Attempt(len(s.attempts) + 1, s.level, s.request_dtypes(), 0, status, 0 if status == "passed" else 1, 0,
                       1.25, error, None, dtype_error)

    m.after(s, a("failed", True, "dtype"))
    m.after(s, a("passed"))
    act = m.after(s, a("failed", True, "no f32"))
    s.last_outcome = {"timer": "cuda_event", "repeats": {"n": 3}}
    r = op_result(s, status=act.status, error=act.error, backend="cuda", node="n", stolen_from=1, lane=0,
                  extra={"dtypes_passed": ["float16"]})
    assert (r["status"], r["exit_code"], r["dtype_level"], r["attempts"], r["duration_s"]) == ("passed", 0, 2, 3, 3.75)
    assert (r["home_device"], r["stolen_from"], r["devices"], r["timer"], r["repeats"]) == (1, 1, [1, 0], "cuda_event", {"n": 3})
    assert r["error"] == "dtype fallback kept float16; failed float32: no f32" and r["dtypes_passed"] == ["float16"]
    assert [x["status"] for x in r["attempt_log"]] == ["failed", "passed", "failed"]
    rows = status_records({"b": OpRecord("b", "passed")}, {"a": "slow", "b": "x"}, "cuda")
    assert [(x.op, x.status, x.error) for x in rows] == [("a", "dismissed", "slow"), ("b", "passed", None)]


def test_level2_merge_when_no_dtype_passed_appends_to_run_log(tmp_path):
    from opscreen.results.merge import merge_level2

    (tmp_path / "run.log").write_text("level 0 failed\n")
    got = merge_level2(tmp_path, [], {"float16": "no f16"}, lambda d: d)
    assert got == {"dtypes_passed": [], "dtypes_failed": {"float16": "no f16"}}
    text = (tmp_path / "run.log").read_text()
    assert text.startswith("level 0 failed\n[opscreen] dtype fallback level 2: each dtype alone; passed: none; failed: float16")
    assert not (tmp_path / "record.log").exists()


def test_the_runs_caliber_takes_its_device_from_an_op_and_keeps_what_the_run_decides(tmp_path):
    """An op that did not pass in a warm worker ran again in a fresh process: its identity
    says isolation op, the run's caliber keeps worker (and the run's dtypes)."""
    from opscreen import contracts
    from opscreen.batch.journal import identity_device_name

    op_dir = tmp_path / "ops" / "a"
    op_dir.mkdir(parents=True)
    op_cal = {"timer": "graph", "device_name": "NVIDIA H200", "isolation": "op", "dtypes": ["float16"], "level": "core"}
    contracts.write(contracts.RUN_IDENTITY, op_dir / "run_identity.json", {"kind": "op", "caliber": op_cal})
    run = {"kind": "run", "caliber": {"timer": "graph", "device_name": None, "isolation": "worker", "dtypes": None}}
    assert identity_device_name(run, [tmp_path / "ops" / "missing", op_dir], None)
    assert run["caliber"] == {"timer": "graph", "device_name": "NVIDIA H200", "isolation": "worker", "dtypes": None,
                              "level": "core"}
    assert not identity_device_name(run, [op_dir], None)  # named once, kept

"""The real batch session driven end to end through its ``executor=`` and
``request_factory=`` hooks: a fake executor completes each job from a script, so
retries, device moves, the dtype fallback and the journal's records are checked
without a single process."""

from __future__ import annotations

import csv
import io
import json
import sys
from types import SimpleNamespace

from opscreen.backends import resolve
from opscreen.batch.executor import Done
from opscreen.batch.journal import Journal
from opscreen.batch.progress import PlainProgress
from opscreen.batch.session import EXIT_FAILURES, BatchConfig, BatchRunner

DTYPE_ERR = "E   ValueError: Given dtype(s) 'torch.float64'can't be supported by this op 'dt'\n"


def fail(line: str) -> tuple[str, str]:
    return "failed", f"E   {line}\nFAILED bench/test_x.py::test_x - {line}\n"


class ScriptedExecutor:
    """Each job takes the next (status, run.log text) of its op's script ("passed" when
    the script is spent; per dtype at level 2: key ``op/dtype``); the job's run.log
    and record.log are written as run_op would, and the job comes back at once."""

    def __init__(self, script: dict[str, list[tuple[str, str]]], bad_lanes=()):
        self.script = {k: list(v) for k, v in script.items()}
        self.bad_lanes = set(bad_lanes)  # every job there dies device-fatal
        self.pending: list = []
        self.jobs: list = []
        self.started: list[int] = []
        self.closed = False

    def start(self, lanes):
        self.started = list(lanes)

    def submit(self, job):
        self.jobs.append(job)
        self.pending.append(job)

    def wait(self, timeout):
        out = []
        for job in self.pending:
            dtypes = job.meta.get("dtypes")
            key = f"{job.op}/{dtypes[0]}" if job.meta.get("level") == 2 else job.op
            steps = self.script.get(key) or []
            status, log = steps.pop(0) if steps else ("passed", "1 passed\n")
            if job.lane in self.bad_lanes:
                status, log = "device_fatal", "OPSCREEN-FATAL: illegal memory access\n"
            job.out_dir.mkdir(parents=True, exist_ok=True)
            (job.out_dir / "run.log").write_text(f"[{job.op} on {job.lane} {dtypes}]\n{log}")
            if status == "passed":
                (job.out_dir / "record.log").write_text(f"record {key}\n")
            error = None if status == "passed" else log.splitlines()[-1]
            outcome = SimpleNamespace(status=status, exit_code=0 if status == "passed" else 1, child_returncode=0,
                                      duration_s=0.5, error=error, timer="wallclock", repeats=None)
            out.append(Done(job, outcome, None, 0.5))
        self.pending = []
        return out

    def stop(self):
        pass

    def close(self):
        self.closed = True


def make_cfg(tmp_path, ops, **kw) -> BatchConfig:
    suite = SimpleNamespace(root=tmp_path / "suite", python=sys.executable, name="fake", git={})
    return BatchConfig(suite=suite, backend=resolve("cpu"), devices=kw.pop("devices", [0, 1]), ops=ops,
                       targets={op: f"bench/test_{op}.py::test_{op}" for op in ops}, timer="wallclock",
                       timeout=30, grace=1, **kw)


def run(tmp_path, cfg, ex, requests):
    journal = Journal(tmp_path / "run")
    journal.lock()
    try:
        return journal, BatchRunner(cfg, journal, executor=ex, progress=PlainProgress(io.StringIO()), handle_signals=False,
                                    request_factory=lambda op, dev, dtypes: requests.append((op, dev, dtypes)) or op).run()
    finally:
        journal.unlock()


def result(journal, op) -> dict:
    return json.loads((journal.op_dir(op) / "result.json").read_text())


def test_fake_executor_drives_the_real_session(tmp_path):
    ops = ["ok", "flaky", "det", "fatal", "dt"]
    ex = ScriptedExecutor({
        "flaky": [("timeout", "killed at --timeout\n")],
        "det": [fail("RuntimeError: boom at 0x7f01"), fail("RuntimeError: boom at 0x7f02")],
        "fatal": [("device_fatal", "OPSCREEN-FATAL: illegal memory access\n")],
        "dt": [("failed", DTYPE_ERR)],
        "dt/float32": [("failed", DTYPE_ERR)],
    })
    requests: list = []
    cfg = make_cfg(tmp_path, ops, op_dtypes={"dt": ["float16", "float32"]})
    journal, summary = run(tmp_path, cfg, ex, requests)

    assert ex.started == [0, 1] and ex.closed
    assert summary.exit_code == EXIT_FAILURES and summary.unrun == []
    assert summary.counts == {"passed": 4, "failed": 1}
    # every request came from the factory, with the dtypes of its step
    assert all(req == job.request for req, job in zip([r[0] for r in requests], ex.jobs))
    assert ("dt", requests[-1][1], ["float32"]) in requests and any(r[0] == "dt" and r[2] == ["float16"] for r in requests)

    assert result(journal, "ok")["attempts"] == 1
    flaky = result(journal, "flaky")
    assert (flaky["status"], flaky["attempts"]) == ("passed", 2)
    assert flaky["attempt_log"][0]["log"] == "attempts/attempt-1.log"
    det = result(journal, "det")
    assert (det["status"], det["attempts"], det["stop_reason"]) == ("failed", 2, "deterministic: same failure twice")
    assert "RuntimeError: boom" in det["error"]
    fatal = result(journal, "fatal")
    assert fatal["status"] == "passed" and len(fatal["devices"]) == 2  # moved to the other device

    dt = result(journal, "dt")
    assert (dt["status"], dt["dtype_level"], dt["exit_code"]) == ("passed", 2, 0)
    assert dt["dtypes_passed"] == ["float16"] and list(dt["dtypes_failed"]) == ["float32"]
    assert dt["error"].startswith("dtype fallback kept float16; failed float32:")
    op_dir = journal.op_dir("dt")
    assert (op_dir / "record.log").read_text() == "record dt/float16\n"
    assert "[opscreen] ===== dtype float16 (from dtypes/float16/run.log) =====" in (op_dir / "run.log").read_text()

    with open(journal.root / "ops_status.csv", newline="") as fh:
        rows = {r["op"]: r for r in csv.DictReader(fh)}
    assert {op: rows[op]["status"] for op in ops} == {"ok": "passed", "flaky": "passed", "det": "failed", "fatal": "passed",
                                                      "dt": "passed"}
    assert all((journal.op_dir(op) / ".complete").is_file() for op in ops)
    ident = json.loads((journal.root / "run_identity.json").read_text())
    assert ident["state"] == "finished" and ident["kind"] == "run"


def test_fake_executor_resume_runs_only_what_is_left(tmp_path):
    ex = ScriptedExecutor({})
    cfg = make_cfg(tmp_path, ["a", "b"], devices=[0])
    journal, first = run(tmp_path, cfg, ex, [])
    assert first.exit_code == 0 and len(ex.jobs) == 2
    (journal.op_dir("b") / ".complete").unlink()  # as if killed before b's marker
    ex2 = ScriptedExecutor({})
    _, again = run(tmp_path, make_cfg(tmp_path, ["a", "b"], devices=[0]), ex2, [])
    assert [j.op for j in ex2.jobs] == ["b"] and again.exit_code == 0
    ident = json.loads((journal.root / "run_identity.json").read_text())
    assert len(ident["sessions"]) == 2


def test_a_device_going_bad_moves_its_ops(tmp_path):
    ops = [f"op{i}" for i in range(8)]
    ex = ScriptedExecutor({}, bad_lanes={0})
    cfg = make_cfg(tmp_path, ops, devices=[0, 1], fatal_threshold=2, retries=1)
    journal, summary = run(tmp_path, cfg, ex, [])
    # the ops on device 0 die device-fatal and pass when moved to device 1; two fatal
    # exits in a row from distinct ops take device 0 out, and its queue moves
    assert list(summary.bad_devices) == [0] and summary.unrun == [] and summary.exit_code == 0
    results = {op: result(journal, op) for op in ops}
    assert all(r["status"] == "passed" and r["device"] == 1 for r in results.values())
    assert sum(1 for r in results.values() if r["devices"] == [0, 1]) == 2  # only two ran on 0
    ident = json.loads((journal.root / "run_identity.json").read_text())
    assert list(ident["bad_devices"]) == ["0"]


class LosingExecutor(ScriptedExecutor):
    """Every job on a lane of ``lost`` comes back as its worker's loss (the Ray executor's
    ``LaneLost``): nothing of the attempt, no run.log."""

    def __init__(self, script, lost):
        super().__init__(script)
        self.lost = set(lost)

    def wait(self, timeout):
        from opscreen.batch.lanes import LaneLost

        lost = [j for j in self.pending if j.lane in self.lost]
        self.pending = [j for j in self.pending if j.lane not in self.lost]
        return [Done(j, None, "LaneLost: node n2 died", 0.1, LaneLost("node n2 died")) for j in lost] + super().wait(timeout)


def test_a_lost_lane_leaves_the_run_and_its_op_runs_again_elsewhere_recorded_once(tmp_path):
    ops = [f"op{i}" for i in range(8)]
    ex = LosingExecutor({"op3": [("timeout", "killed at --timeout\n")]}, lost={1})
    journal, summary = run(tmp_path, make_cfg(tmp_path, ops, devices=[0, 1, 2]), ex, [])
    assert summary.exit_code == 0 and summary.counts == {"passed": 8} and summary.bad_devices == {1: "lost: node n2 died"}
    on_lost = [j for j in ex.jobs if j.lane == 1]
    assert len(on_lost) == 1, "one job on the lost lane, then none"
    victim = result(journal, on_lost[0].op)
    assert victim["lanes_lost"] == [{"lane": 1, "reason": "node n2 died"}]
    assert victim["attempts"] == 1 + (on_lost[0].op == "op3") and victim["device"] in (0, 2)
    assert all(a["device"] != 1 for a in victim["attempt_log"]), "the lost attempt is not recorded"
    ident = json.loads((journal.root / "run_identity.json").read_text())
    assert ident["bad_devices"] == {"1": "lost: node n2 died"}
    with open(journal.root / "ops_status.csv", newline="") as fh:
        assert sorted(r["op"] for r in csv.DictReader(fh)) == ops


def test_an_op_that_loses_three_lanes_is_recorded_crashed_and_no_lane_left_is_unrun(tmp_path):
    ex = LosingExecutor({}, lost={0, 1, 2})
    journal, summary = run(tmp_path, make_cfg(tmp_path, ["x"], devices=[0, 1, 2]), ex, [])
    assert sorted(j.lane for j in ex.jobs) == [0, 1, 2]
    x = result(journal, "x")
    assert x["status"] == "crashed" and x["error"] == "its lane was lost 3 times; last: node n2 died"
    assert x["attempts"] == 0 and [lost["lane"] for lost in x["lanes_lost"]] == [j.lane for j in ex.jobs]
    assert summary.exit_code == EXIT_FAILURES and summary.counts == {"crashed": 1}

    ex = LosingExecutor({}, lost={0, 1})  # two ops, two lanes, both lost: nothing left to run on
    journal, summary = run(tmp_path / "two", make_cfg(tmp_path, ["x", "y"], devices=[0, 1]), ex, [])
    assert summary.unrun == ["x", "y"] and summary.exit_code == 3
    assert not (journal.op_dir("x") / ".complete").exists()

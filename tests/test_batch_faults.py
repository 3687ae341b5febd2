"""``opscreen run`` against the fault suite: real processes, real signals.

The fault suite (tests/fixtures/suites/faults/) is copied into a temp dir per test
(so its git identity and stray files stay out of the repo). Every process of a
test carries ``FAULTS_TAG=<unique>`` in its environment; each test ends by
checking that no such process is left (zombies count as gone: their parent or
init reaps them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
FAULTS = ROOT / "tests" / "fixtures" / "suites" / "faults"
STUB_TORCH = FAULTS / "stub_torch"
CONTROLLED = ("OP", "OP_FILE", "TEST_NODE", "DTYPES", "USE_FLAGTUNE", "SHAPE_MODE", "ZL_BACKEND", "REPLAY_FROM", "FLAGGEMS_ROOT", "OPSCREEN_BATCH_RUN")


@contextlib.contextmanager
def reaped(proc: subprocess.Popen):
    """Whatever happens inside, the runner ``proc`` is not left running (killed, reaped)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def default_signals() -> None:
    """The runner starts as from a terminal (SIGINT and SIGHUP at their defaults), even when
    the tests themselves run under nohup or as a script's background job."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class Faults:
    """One test's fault suite copy, state dir, environment and process tag."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.suite = tmp_path / "suite"
        shutil.copytree(FAULTS, self.suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.tag = uuid.uuid4().hex
        self.env = dict(os.environ)
        for k in CONTROLLED:
            self.env.pop(k, None)
        self.env.update(
            {
                "PYTHONPATH": os.pathsep.join([str(SRC), str(STUB_TORCH)]),
                "FAULTS_STATE_DIR": str(self.state),
                "FAULTS_TAG": self.tag,
                "PYTHONDONTWRITEBYTECODE": "1",
                # a fresh process per op unless a test asks for --isolation worker: the
                # tests count the suite's invocations, and a worker adds one to an op
                # that does not pass (its fresh re-run)
                "OPSCREEN_ISOLATION": "op",
            }
        )

    def argv(self, out: Path, *args) -> list[str]:
        return [
            sys.executable,
            "-m",
            "opscreen",
            "run",
            "--suite",
            str(self.suite),
            "--backend",
            "cpu",
            "--out",
            str(out),
            "--plain",
            *map(str, args),
        ]

    def run(self, out: Path, *args, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run(
            self.argv(out, *args), env=e, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )

    def popen(self, out: Path, *args, env: dict | None = None) -> subprocess.Popen:
        e = dict(self.env)
        e.update(env or {})
        return subprocess.Popen(
            self.argv(out, *args), env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
            preexec_fn=default_signals,
        )


    def runs(self, op: str) -> int:
        p = self.state / f"{op}.runs"
        return len(p.read_text().splitlines()) if p.exists() else 0

    def tagged(self) -> list[int]:
        return tagged_pids("FAULTS_TAG", self.tag)

    def assert_no_leftovers(self, wait: float = 5.0) -> None:
        deadline = time.monotonic() + wait
        left = self.tagged()
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = self.tagged()
        assert not left, f"processes left behind: {describe(left)}"
        pid_dir = self.state / "pids"
        if pid_dir.is_dir():
            alive = [int(p.name) for p in pid_dir.iterdir() if is_alive(int(p.name)) and has_tag(int(p.name), self.tag)]
            assert not alive, f"recorded fault pids still alive: {describe(alive)}"


def is_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] not in (b"Z", b"X")


def has_tag(pid: int, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return f"FAULTS_TAG={tag}".encode() in fh.read().split(b"\0")
    except OSError:
        return False


def tagged_pids(key: str, value: str) -> list[int]:
    needle = f"{key}={value}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0") and is_alive(int(name)):
            out.append(int(name))
    return out


def describe(pids: list[int]) -> str:
    parts = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
            parts.append(f"{pid}: {cmd}")
        except OSError:
            parts.append(str(pid))
    return "; ".join(parts)


def status_rows(out: Path) -> dict[str, dict]:
    import csv

    with open(out / "ops_status.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    ops = [r["op"] for r in rows]
    assert len(ops) == len(set(ops)), f"duplicate rows in ops_status.csv: {ops}"
    return {r["op"]: r for r in rows}


def kill_after(faults: "Faults", out: Path, args: list, env: dict, delay: float) -> bool:
    """Start the runner, SIGKILL it after ``delay`` seconds unless it ended; True if killed."""
    proc = faults.popen(out, *args, env=env)
    time.sleep(delay)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    return killed


def result(out: Path, op: str) -> dict:
    return json.loads((out / "ops" / op / "result.json").read_text())


@pytest.fixture
def faults(tmp_path):
    f = Faults(tmp_path)
    yield f
    # whatever happened, kill what the test left (then the test's own assert reports it)
    for pid in f.tagged():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# isolation -> how often the suite ran each op: in a warm worker, an op that does not
# pass runs once more (its fresh re-run), and its later attempts run fresh
RUNS = {"op": {"hang": 3, "flaky": 2, "broken": 2, "flaky_attempts": "2"},
        "worker": {"hang": 4, "flaky": 2, "broken": 3, "flaky_attempts": "1"}}


@pytest.mark.parametrize("isolation", ["op", "worker"])
def test_fault_outcomes(faults, isolation):
    """Each fault ends as the right row, with the right number of attempts, in both
    isolation modes (the same statuses)."""
    out = faults.tmp / "run"
    ops = "ok_a,hang,segv,flaky,broken,fatal,dtype_mixed"
    runs = RUNS[isolation]
    res = faults.run(out, "--devices", "0,1", "--ops", ops, "--timeout", "3", "--grace", "0.5", "--isolation", isolation)
    assert res.returncode == 1, res.stdout + res.stderr
    rows = status_rows(out)
    assert set(rows) == set(ops.split(","))

    assert rows["ok_a"]["status"] == "passed" and rows["ok_a"]["attempts"] == "1" and rows["ok_a"]["dtype_level"] == "0"

    # a hang holding a grandchild: killed as a group at --timeout, retried (possibly transient)
    hang = rows["hang"]
    assert hang["status"] == "timeout" and hang["attempts"] == "3", hang
    assert "timed out after 3 s" in hang["error"]
    assert faults.runs("hang") == runs["hang"]

    # a segfault twice the same way is deterministic: 2 attempts, not 3
    segv = rows["segv"]
    assert segv["status"] == "crashed" and segv["attempts"] == "2", segv
    assert "SIGSEGV" in segv["error"]

    # fails once, then passes in a fresh process (a worker's fresh re-run is not an attempt)
    assert rows["flaky"]["status"] == "passed" and rows["flaky"]["attempts"] == runs["flaky_attempts"]
    assert faults.runs("flaky") == runs["flaky"]
    flaky = result(out, "flaky")
    if isolation == "op":
        assert flaky["attempt_log"][0]["status"] == "failed"
        assert (out / "ops" / "flaky" / "attempts" / "attempt-1.log").is_file()
    else:
        assert flaky["phases"]["worker_attempt"]["status"] == "failed"
        assert (out / "ops" / "flaky" / "worker.log").is_file()

    # the same failure (modulo an address and a number) twice: deterministic, stop
    broken = rows["broken"]
    assert broken["status"] == "failed" and broken["attempts"] == "2", broken
    assert broken["error"].startswith("RuntimeError: kernel produced garbage at 0x")
    assert faults.runs("broken") == runs["broken"]
    sigs = {a["signature"] for a in result(out, "broken")["attempt_log"]}
    assert len(sigs) == 1

    # device-fatal exits are retried, on another device when there is one
    fatal = result(out, "fatal")
    assert fatal["status"] == "device_fatal" and fatal["attempts"] == 3
    assert set(fatal["devices"]) == {0, 1}
    assert rows["fatal"]["error"].startswith("OPSCREEN-FATAL: illegal-address")

    # dtype fallback level 2: float64 fails alone, float16 and float32 are kept and merged
    mixed = result(out, "dtype_mixed")
    assert mixed["status"] == "passed" and mixed["dtype_level"] == 2
    assert sorted(mixed["dtypes_passed"]) == ["float16", "float32"]
    assert list(mixed["dtypes_failed"]) == ["float64"]
    assert rows["dtype_mixed"]["dtype_level"] == "2"
    record = (out / "ops" / "dtype_mixed" / "record.log").read_text()
    assert '"dtype": "torch.float16"' in record and '"dtype": "torch.float32"' in record
    assert "torch.float64" not in record
    run_log = (out / "ops" / "dtype_mixed" / "run.log").read_text()
    assert "dtype fallback level 2" in run_log and "SUCCESS" in run_log
    for d in ("float16", "float32", "float64"):
        assert (out / "ops" / "dtype_mixed" / "dtypes" / d / "run.log").is_file()

    # every op dir is complete; the run identity is a batch one with a caliber
    for op in rows:
        assert (out / "ops" / op / ".complete").is_file()
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["kind"] == "run" and ident["state"] == "finished"
    assert ident["caliber"]["backend"] == "cpu" and ident["caliber"]["device_name"]
    assert ident["batch"]["retries"] == 2 and ident["batch"]["timeout"] == 3.0
    faults.assert_no_leftovers()


def test_dtype_fallback_level1_with_requested_dtypes(faults):
    """--dtypes the op cannot run (FlagGems' ValueError) -> the op's own dtypes."""
    out = faults.tmp / "run"
    res = faults.run(out, "--devices", "0", "--ops", "dtype_f64,ok_b", "--dtypes", "float64,float32", "--timeout", "20")
    assert res.returncode == 0, res.stdout + res.stderr  # measured, though not with the dtypes asked for
    rows = status_rows(out)
    for op in ("dtype_f64", "ok_b"):
        assert rows[op]["status"] == "passed_own_dtypes" and rows[op]["dtype_level"] == "1", rows[op]
        assert rows[op]["attempts"] == "2"
        assert "Given dtype(s)" in rows[op]["error"]
    first = (out / "ops" / "dtype_f64" / "attempts" / "attempt-1.log").read_text()
    assert "--dtypes=float64 --dtypes=float32" in first
    final = (out / "ops" / "dtype_f64" / "run.log").read_text()
    assert "dtypes suite default" in final and "SUCCESS" in final
    faults.assert_no_leftovers()


def test_bad_device_is_taken_out_and_its_ops_move(faults):
    """A device whose every op exits device-fatal is marked bad after 3 distinct ops."""
    out = faults.tmp / "run"
    ops = ",".join(f"ok_{c}" for c in "abcdefgh")
    res = faults.run(out, "--devices", "0,1", "--ops", ops, "--timeout", "20", env={"FAULTS_SICK_DEVICE": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "device 1 marked bad" in res.stdout
    rows = status_rows(out)
    assert all(r["status"] == "passed" and r["device"] == "0" for r in rows.values()), rows
    ident = json.loads((out / "run_identity.json").read_text())
    assert "1" in ident["bad_devices"] and "device-fatal exits in a row" in ident["bad_devices"]["1"]
    moved = [op for op in rows if 1 in result(out, op)["devices"]]
    assert len(moved) == 3  # exactly the three that condemned the device
    for op in moved:
        assert result(out, op)["attempts"] == 2
    faults.assert_no_leftovers()


def test_unknown_ops_are_reported_at_once_and_nothing_runs(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,no_such_op,ok_b,nope_either")
    assert res.returncode == 2
    assert "no_such_op" in res.stderr and "nope_either" in res.stderr
    assert "2 of 4 ops cannot be run" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (out / "ops").exists()
    assert faults.runs("ok_a") == 0


def test_many_unknown_ops_name_the_first_five_and_count_the_rest(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", ",".join(["ok_a"] + [f"no_such_op_{i}" for i in range(8)]))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "8 of 9 ops cannot be run" in res.stderr and "; and 3 more" in res.stderr
    assert res.stderr.count("no_such_op_") == 5
    assert not (out / "ops").exists()


def test_ops_file_comments_and_blank_lines(faults):
    out = faults.tmp / "run"
    f = faults.tmp / "ops.txt"
    f.write_text("# smoke set\nok_a\n\n  ok_b   # trailing comment\n#ok_c\n")
    res = faults.run(out, "--ops-file", f, "--devices", "0,1", "--timeout", "20")
    assert res.returncode == 0, res.stdout + res.stderr
    assert set(status_rows(out)) == {"ok_a", "ok_b"}
    # off a terminal: one plain line per finished op
    lines = [l for l in res.stdout.splitlines() if l.startswith("[")]
    assert len(lines) == 2 and all("passed" in l for l in lines)


def test_shard_splits_ops_without_overlap(faults):
    ops = ",".join(f"ok_{c}" for c in "abcdefgh")
    seen = []
    for i in range(2):
        out = faults.tmp / f"shard{i}"
        res = faults.run(out, "--ops", ops, "--shard", f"{i}/2", "--devices", "0,1", "--timeout", "20")
        assert res.returncode == 0, res.stdout + res.stderr
        seen.append(set(status_rows(out)))
    assert seen[0].isdisjoint(seen[1])
    assert seen[0] | seen[1] == set(ops.split(","))


@pytest.mark.parametrize("signum,isolation", [(signal.SIGTERM, "op"), (signal.SIGINT, "op"), (signal.SIGHUP, "op"),
                                              (signal.SIGINT, "worker")],
                         ids=["SIGTERM", "SIGINT", "SIGHUP", "SIGINT-worker"])
def test_signal_stops_cleanly_and_resumes(faults, signum, isolation):
    """SIGTERM / Ctrl-C / a closed terminal (SIGHUP) mid-run: children (warm workers too)
    killed, exit 130, complete ops kept; a resume (with the recorded isolation) finishes."""
    out = faults.tmp / "run"
    ops = ",".join(f"ok_{c}" for c in "abcdef")
    env = {"FAULTS_OP_SLEEP": "30"}
    proc = faults.popen(out, "--ops", ops, "--devices", "0,1", "--timeout", "60", "--grace", "1", "--isolation", isolation,
                        env=env)
    with reaped(proc):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(faults.runs(f"ok_{c}") for c in "abcdef") < 2:
            time.sleep(0.1)
        assert sum(faults.runs(f"ok_{c}") for c in "abcdef") == 2
        t0 = time.monotonic()
        proc.send_signal(signum)
        stdout, _ = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 10  # grace 1 s: no waiting for the 30 s ops
    assert proc.returncode == 130, stdout
    assert f"{signal.Signals(signum).name}: stopping" in stdout
    faults.assert_no_leftovers()
    assert not list((out / "ops").glob("*/.complete"))
    res = faults.run(out, "--isolation", isolation, env={"FAULTS_OP_SLEEP": "0"})  # the same run dir: resume
    assert res.returncode == 0, res.stdout + res.stderr
    rows = status_rows(out)
    assert set(rows) == set(ops.split(",")) and all(r["status"] == "passed" for r in rows.values())
    modes = {result(out, op)["phases"]["mode"] for op in rows}
    assert modes == {"worker" if isolation == "worker" else "process"}
    faults.assert_no_leftovers()


def test_dismissed_ops_are_listed_not_run(faults):
    out = faults.tmp / "run"
    dismiss = faults.tmp / "dismiss.yaml"
    dismiss.write_text(
        "- op: ok_b\n  reason: needs a vendor baseline this machine lacks\n  evidence: issue 42\n  date: 2026-08-21\n"
    )
    res = faults.run(out, "--ops", "ok_a,ok_b", "--dismiss", dismiss, "--devices", "0", "--timeout", "20")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = status_rows(out)
    assert rows["ok_b"]["status"] == "dismissed"
    assert rows["ok_b"]["error"] == "needs a vendor baseline this machine lacks"
    assert rows["ok_a"]["status"] == "passed"
    assert faults.runs("ok_b") == 0 and not (out / "ops" / "ok_b").exists()
    # a dismiss entry for an op the suite does not have is a usage error
    dismiss.write_text("- op: not_an_op\n  reason: x\n  date: 2026-08-21\n")
    res = faults.run(faults.tmp / "run2", "--ops", "ok_a", "--dismiss", dismiss)
    assert res.returncode == 2 and "not_an_op" in res.stderr


def test_inventory_ops_and_gpus_alias_all(faults):
    out = faults.tmp / "run"
    inv = faults.tmp / "inventory.json"
    inv.write_text(json.dumps({"schema": "opscreen.inventory/1", "ops": {"ok_a": {}, "ok_d": {"files": ["benchmark/test_ok.py"]}}}))
    res = faults.run(out, "--inventory", inv, "--gpus", "all", "--timeout", "20")
    assert res.returncode == 0, res.stdout + res.stderr
    assert set(status_rows(out)) == {"ok_a", "ok_d"}
    ident = json.loads((out / "run_identity.json").read_text())
    # on cpu, 'all' is min(2, cores) parallel slots
    assert ident["batch"]["devices"] == list(range(min(2, os.cpu_count() or 1)))
    assert ident["settings"]["ops_source"].startswith("--inventory")


def test_a_child_that_never_starts_pytest_is_not_a_truncated_log(faults, monkeypatch, cli):
    """A child that exits on its own before pytest starts (here: an interpreter
    without pytest) leaves a complete log: the summary and the report must not call
    it truncated ("killed or timed out"). A child killed at --timeout still is."""
    from opscreen.backends import resolve
    from opscreen.providers.flaggems import Suite
    from opscreen.op.request import OpRequest
    from opscreen.op.run import run_op

    no_pytest = faults.tmp / "bin" / "python"
    no_pytest.parent.mkdir()
    no_pytest.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" -m pytest "*) echo "$0: No module named pytest" >&2; exit 1;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    no_pytest.chmod(0o755)
    for k, v in faults.env.items():
        monkeypatch.setenv(k, v)
    for k in CONTROLLED:
        monkeypatch.delenv(k, raising=False)

    def op_dir(op: str, python: str, timeout: float) -> Path:
        suite = Suite.locate(str(faults.suite), python=python)
        out = faults.tmp / f"op-{op}"
        req = OpRequest(op=op, target=suite.resolve(op), suite=suite, backend=resolve("cpu"), timer="wallclock",
                        timeout=timeout, grace=0.5)
        run_op(req, out)
        return out

    never = op_dir("ok_a", str(no_pytest), 60)
    assert "No module named pytest" in (never / "run.log").read_text()
    assert json.loads((never / "result.json").read_text())["status"] == "failed"
    killed = op_dir("hang", sys.executable, 3)
    assert json.loads((killed / "result.json").read_text())["status"] == "timeout"

    res = cli("summary", never)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "truncated" not in res.stdout, res.stdout
    assert json.loads((never / "summary.json").read_text())["ops"][0]["truncated"] is False
    res = cli("report", never)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "truncated log" not in (never / "report.html").read_text()

    res = cli("summary", killed)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ops with a truncated log: 1" in res.stdout, res.stdout
    faults.assert_no_leftovers()


def test_a_timeout_says_how_long_the_op_had_been_silent(faults):
    """A timed-out op's error says when it last printed before the kill: a hang fell silent
    seconds before, an op still busy (a cold cache compiling, rows coming one by one) printed
    moments before; the stack dump the kill itself prints does not count as output."""
    import re

    out = faults.tmp / "run"
    res = faults.run(out, "--devices", "0", "--ops", "hang,crawl", "--timeout", "6", "--grace", "0.5", "--retries", "0")
    assert res.returncode == 1, res.stdout + res.stderr
    rows = status_rows(out)
    quiet = {}
    for op in ("hang", "crawl"):
        assert rows[op]["status"] == "timeout", rows[op]
        m = re.search(r"timed out after 6 s in .*; its last output ([\d.]+) s before the kill", rows[op]["error"])
        assert m, rows[op]["error"]
        quiet[op] = float(m.group(1))
    assert quiet["crawl"] <= 1.5 and quiet["hang"] >= 2.5, quiet
    assert "Current thread 0x" in (out / "ops" / "crawl" / "run.log").read_text()  # its dump came after

"""End-to-end ``opscreen op`` runs through the real CLI and real child processes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

CONFTEST = '''
import pytest

def pytest_addoption(parser):
    for opt in ("--level", "--record", "--mode", "--warmup", "--iter", "--shape_file", "--output"):
        parser.addoption(opt, default=None)
    parser.addoption("--dtypes", action="append", default=None)
'''

TESTS = '''
import os, subprocess, sys, time
import pytest

@pytest.mark.ok
def test_ok():
    print("SUCCESS all good")

@pytest.mark.boom
def test_boom():
    raise ValueError("Given dtype(s) 'torch.float64'can't be supported by this op 'boom'")

@pytest.mark.hang
def test_hang():
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    with open(os.environ["PIDFILE"], "w") as fh:
        fh.write(f"{os.getpid()} {child.pid}\\n")
    time.sleep(600)

@pytest.mark.segv
def test_segv():
    import signal
    os.kill(os.getpid(), signal.SIGSEGV)
'''


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.fixture
def fault_suite(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSCREEN_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "suite"
    (root / "benchmark").mkdir(parents=True)
    (root / "benchmark" / "__init__.py").write_text("")
    (root / "benchmark" / "conftest.py").write_text(CONFTEST)
    (root / "benchmark" / "test_faults.py").write_text(TESTS)
    (root / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    ignore::pytest.PytestUnknownMarkWarning\n")
    return root


def test_sample_suite_add_passes_with_all_artifacts(cli, tmp_path):
    out = tmp_path / "add"
    res = cli("op", "add", "--out", out, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    log = (out / "run.log").read_text()
    assert "Operator: add  Performance Test" in log and "SUCCESS" in log
    assert "\x1b[" not in log
    assert "[opscreen] result passed" in log
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["schema"] == "opscreen.identity/1" and ident["child_reported"] is True
    assert ident["caliber"]["timer"] == "wallclock" and ident["caliber"]["backend"] == "cpu"
    assert ident["caliber"]["use_flagtune"] == "0" and ident["torch_version"]
    assert ident["finished_at"] and ident["outcome"] == "passed"
    rec = [ln for ln in (out / "record.log").read_text().splitlines() if ln.startswith("[INFO] {")]
    assert rec, "record log rows missing"
    row = json.loads(rec[0][len("[INFO] "):])["result"][0]
    assert row["timer"] == "wallclock" and row["samples"] >= 1
    calls = row["calls"]  # calls per sample: a power of two
    assert row["timer_base"] == "wallclock" and calls >= 1 and calls & (calls - 1) == 0
    assert json.loads((out / "result.json").read_text())["status"] == "passed"
    # the suite root is left clean: the record log was moved, no cache dir written
    suite = Path(ident["suite"]["root"])
    assert not list(suite.glob("result_*.log")) and not (suite / ".pytest_cache").exists()


def test_op_through_environment(cli, tmp_path):
    out = tmp_path / "softmax"
    res = cli("op", "--out", out, env={"OP": "softmax", "DTYPES": "float32"}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    log = (out / "run.log").read_text()
    assert "dtype=torch.float32" in log and "dtype=torch.bfloat16" not in log
    cfg = json.loads((out / "child_config.json").read_text())
    assert cfg["dtypes"] == ["float32"] and cfg["op"] == "softmax"


def test_identity_records_the_tuning_caches_found_at_start(cli, tmp_path):
    cache = tmp_path / "gems-cache"
    cache.mkdir()
    (cache / "TunedConfig_nvidia_triton_3_6.db").write_bytes(b"x" * 4096)
    (cache / "notes.txt").write_text("not a database")
    out = tmp_path / "abs"
    env = {"FLAGGEMS_CACHE_DIR": str(cache), "TRITON_CACHE_AUTOTUNING": "1"}
    res = cli("op", "abs", "--dtypes", "float32", "--out", out, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    caches = json.loads((out / "run_identity.json").read_text())["tuning_caches_at_start"]
    assert caches == {"flaggems_cache_dir": str(cache),
                      "flaggems_tuned_db_bytes": {"TunedConfig_nvidia_triton_3_6.db": 4096},
                      "triton_cache_autotuning": True}


def test_replay_from_reuses_settings(cli, tmp_path):
    first = tmp_path / "first"
    assert cli("op", "mul", "--dtypes", "float32", "--out", first, cwd=tmp_path).returncode == 0
    again = tmp_path / "again"
    res = cli("op", "--out", again, env={"REPLAY_FROM": str(first)}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    cfg = json.loads((again / "child_config.json").read_text())
    assert cfg["op"] == "mul" and cfg["dtypes"] == ["float32"]


def test_failing_op_exit_1_with_error_line(cli, fault_suite, tmp_path):
    out = tmp_path / "boom"
    res = cli("op", "boom", "--suite", fault_suite, "--out", out, cwd=tmp_path)
    assert res.returncode == 1
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "failed" and "can't be supported" in result["error"]


def test_segfault_is_crashed(cli, fault_suite, tmp_path):
    out = tmp_path / "segv"
    res = cli("op", "segv", "--suite", fault_suite, "--out", out, cwd=tmp_path)
    assert res.returncode == 5
    assert "SIGSEGV" in json.loads((out / "result.json").read_text())["error"]


def test_timeout_kills_whole_group(cli, fault_suite, tmp_path):
    out = tmp_path / "hang"
    pidfile = tmp_path / "pids"
    t0 = time.monotonic()
    res = cli("op", "hang", "--suite", fault_suite, "--out", out, "--timeout", "6", "--grace", "1", env={"PIDFILE": str(pidfile)}, cwd=tmp_path)
    elapsed = time.monotonic() - t0
    assert res.returncode == 3, res.stdout[-2000:]
    assert elapsed < 6 + 1 + 8  # timeout + grace + process start/teardown slack
    pids = [int(x) for x in pidfile.read_text().split()]
    deadline = time.monotonic() + 3
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids), "a child or grandchild survived the timeout"
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "timeout"
    # the child dumped its stacks on SIGTERM: the log and the error say where it hung
    assert "most recent call first" in (out / "run.log").read_text()
    assert "in test_hang (benchmark/test_faults.py:" in result["error"], result["error"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["op", "nosuch_op"], "unknown op"),
        (["op", "../etc"], "bad op name"),
        (["op", "add", "--backend", "nosuch"], "unknown backend"),
        (["op", "add", "--timer", "graph"], "graph capture"),
        (["op", "add", "--shape-mode", "/no/such/file.yaml"], "SHAPE_MODE"),
        (["op", "add", "--use-flagtune", "2"], "invalid choice"),
        (["op", "add", "--suite", "/nonexistent"], "no benchmark/"),
        (["op", "add", "--timeout", "0"], "--timeout 0.0: give a positive number of seconds"),
        (["op", "add", "--timeout", "nan"], "--timeout nan"),
        (["op", "add", "--grace", "-1"], "--grace -1.0: give a number of seconds >= 0"),
        (["run", "--ops", "add", "--grace", "-1"], "--grace -1.0"),
        (["run", "--ops", "add", "--timeout", "inf"], "--timeout inf"),
    ],
)
def test_usage_errors_exit_2_one_line_nothing_written(cli, tmp_path, args, needle):
    res = cli(*args, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("cmd", [["op", "abs"], ["run", "--ops", "abs,add"]])
def test_a_malformed_shape_file_is_refused_before_anything_is_written(cli, tmp_path, cmd):
    """Not a crash of every op of a batch: one line, exit 2, no run or op dir."""
    bad = tmp_path / "shapes.yaml"
    bad.write_text("abs: [\n")
    out = tmp_path / "out"
    res = cli(*cmd, "--shape-mode", bad, "--out", out, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"shape file {bad}:2: not valid YAML" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_env_knob_usage_error(cli, tmp_path):
    res = cli("op", "add", env={"USE_FLAGTUNE": "yes"}, cwd=tmp_path)
    assert res.returncode == 2 and "USE_FLAGTUNE" in res.stderr


# -- signals (issue 14 item 11) -----------------------------------------------------------


@pytest.fixture
def tag():
    """A value every process of the test carries in OPSCREEN_TEST_TAG: whatever the test's
    outcome, none of them outlives it."""
    import signal
    import uuid

    from test_batch_faults import tagged_pids

    value = uuid.uuid4().hex
    yield value
    for pid in tagged_pids("OPSCREEN_TEST_TAG", value):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def start_harness(args, *, cwd, env, tag, ignore=()):
    """``python -m opscreen ARGS`` with ``ignore`` signals ignored from its start, as a
    shell starts a background job of a script (SIGINT) or nohup does (SIGHUP)."""
    import signal
    import subprocess
    import sys

    from conftest import SRC

    def preexec():
        for name in ("SIGINT", "SIGHUP"):  # as a terminal starts it, even when these tests run under nohup
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        for name in ignore:
            signal.signal(getattr(signal, name), signal.SIG_IGN)

    env = dict(os.environ, **env, OPSCREEN_TEST_TAG=tag)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    for k in ("OP", "OP_FILE", "TEST_NODE", "DTYPES", "USE_FLAGTUNE", "SHAPE_MODE", "ZL_BACKEND", "REPLAY_FROM", "FLAGGEMS_ROOT"):
        env.pop(k, None)
    return subprocess.Popen(
        [sys.executable, "-m", "opscreen", *map(str, args)], cwd=cwd, env=env, preexec_fn=preexec,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def wait_for(pred, what, proc, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not pred():
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.communicate(timeout=30)[0] if proc.poll() is not None else ""
            raise AssertionError(f"{what} never happened (harness exit {proc.returncode}): {out[-3000:]}")
        time.sleep(0.1)


def ignores(pid: int, signum: int) -> bool:
    """True once process ``pid`` ignores ``signum`` (its SigIgn mask in /proc)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            mask = next(int(ln.split()[1], 16) for ln in fh if ln.startswith("SigIgn:"))
    except (OSError, StopIteration, ValueError):
        return False
    return bool(mask >> (signum - 1) & 1)


def assert_group_gone(tag, wait=5.0):
    from test_batch_faults import describe, tagged_pids

    deadline = time.monotonic() + wait
    left = tagged_pids("OPSCREEN_TEST_TAG", tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = tagged_pids("OPSCREEN_TEST_TAG", tag)
    assert not left, f"processes left behind: {describe(left)}"


@pytest.mark.parametrize("ignored", [(), ("SIGINT",)], ids=["sigint-default", "sigint-ignored-at-start"])
def test_ctrl_c_stops_the_child_group_and_records_interrupted(fault_suite, tmp_path, tag, ignored):
    """Ctrl-C reaches only the harness (the child has its own session). A harness started
    with SIGINT ignored (a background job of a script, or this test run as one) stops too."""
    import signal

    out = tmp_path / "hang"
    pidfile = tmp_path / "pids"
    proc = start_harness(["op", "hang", "--suite", fault_suite, "--out", out, "--grace", "1"],
                         cwd=tmp_path, env={"PIDFILE": str(pidfile)}, tag=tag, ignore=ignored)
    wait_for(lambda: pidfile.exists() and len(pidfile.read_text().split()) == 2, "the hanging op's start", proc)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, output[-3000:]
    assert_group_gone(tag)  # the child, and its grandchild that ignores SIGTERM
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "interrupted" and result["error"] == "interrupted by SIGINT"


FAULTS_SUITE = Path(__file__).resolve().parent / "fixtures" / "suites" / "faults"


@pytest.fixture
def faults_env(tmp_path):
    """The fault suite (tests/fixtures/suites/faults) with its stub torch and state dir."""
    state = tmp_path / "state"
    state.mkdir()
    return {"PYTHONPATH": str(FAULTS_SUITE / "stub_torch"), "FAULTS_STATE_DIR": str(state), "PYTHONDONTWRITEBYTECODE": "1"}


def _hanging_op(tmp_path, faults_env, tag, ignore=(), grace="2"):
    import shutil

    suite = tmp_path / "suite"
    shutil.copytree(FAULTS_SUITE, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    out = tmp_path / "out"
    proc = start_harness(["op", "hang", "--suite", suite, "--backend", "cpu", "--out", out, "--grace", grace],
                         cwd=tmp_path, env=faults_env, tag=tag, ignore=ignore)
    pids = Path(faults_env["FAULTS_STATE_DIR"]) / "pids"
    # the child and its grandchild (sleep 1000) have both recorded their pids
    wait_for(lambda: pids.is_dir() and len(list(pids.iterdir())) == 2, "the hanging op's start", proc)
    return proc, out, [int(p.name) for p in pids.iterdir()]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_the_op_like_ctrl_c(tmp_path, faults_env, tag, signame):
    """Issue 14 item 11: SIGTERM to `opscreen op` left the child group running and wrote
    no result.json. Now the group is killed, result.json says interrupted, exit 130."""
    import signal

    proc, out, pids = _hanging_op(tmp_path, faults_env, tag)
    proc.send_signal(getattr(signal, signame))
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, output[-3000:]
    assert f"opscreen op: {signame}: stopping" in output
    assert not any(alive(p) for p in pids), "the child or its grandchild survived"
    assert_group_gone(tag)
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "interrupted" and result["exit_code"] == 130
    assert result["error"] == f"interrupted by {signame}"
    assert json.loads((out / "run_identity.json").read_text())["outcome"] == "interrupted"
    assert "[opscreen] result interrupted" in (out / "run.log").read_text()


def test_sighup_ignored_at_start_stays_ignored(tmp_path, faults_env, tag):
    """nohup's promise holds: SIGHUP does not stop the op; SIGTERM still does."""
    import signal

    proc, out, pids = _hanging_op(tmp_path, faults_env, tag, ignore=("SIGHUP",))
    proc.send_signal(signal.SIGHUP)
    time.sleep(1.5)
    assert proc.poll() is None and all(alive(p) for p in pids) and not (out / "result.json").exists()
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, output[-3000:]
    assert_group_gone(tag)
    assert json.loads((out / "result.json").read_text())["error"] == "interrupted by SIGTERM"


def test_a_second_signal_kills_the_group_at_once(fault_suite, tmp_path, tag):
    """The grandchild ignores SIGTERM and --grace is 600 s: the first SIGTERM waits for it,
    a second one SIGKILLs the group."""
    import signal

    out = tmp_path / "hang"
    pidfile = tmp_path / "pids"
    proc = start_harness(["op", "hang", "--suite", fault_suite, "--out", out, "--grace", "600"],
                         cwd=tmp_path, env={"PIDFILE": str(pidfile)}, tag=tag)
    wait_for(lambda: pidfile.exists() and len(pidfile.read_text().split()) == 2, "the hanging op's start", proc)
    child, grandchild = (int(x) for x in pidfile.read_text().split())
    wait_for(lambda: ignores(grandchild, signal.SIGTERM), "the grandchild's SIG_IGN", proc, timeout=30)
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: not alive(child), "the child's exit on SIGTERM", proc, timeout=30)
    assert proc.poll() is None and alive(grandchild)  # waiting out the grace period
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, output[-3000:]
    assert "SIGTERM again: killing" in output
    assert_group_gone(tag)
    assert json.loads((out / "result.json").read_text())["status"] == "interrupted"


def test_long_out_path_and_curated_shapes_do_not_break_the_record_log_name(cli, tmp_path):
    # The suite names its record log after the command line; plugins, dtypes and the
    # merged shape file's path travel in PYTEST_ADDOPTS so that name stays short.
    out = tmp_path.joinpath(*(["a-rather-long-directory-name-for-runs"] * 4), "ops", "mm")
    res = cli("op", "mm", "--shape-mode", "curated", "--dtypes", "float32,bfloat16", "--out", out, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    cfg = json.loads((out / "child_config.json").read_text())
    assert any(a.startswith("--shape_file=") for a in cfg["pytest_addopts"]) and "-p" in cfg["pytest_addopts"]
    assert not any(a.startswith("--shape_file") for a in cfg["argv"])
    log = (out / "run.log").read_text()
    assert log.count("Operator: mm  Performance Test") == 2
    rec = [ln for ln in (out / "record.log").read_text().splitlines() if ln.startswith("[INFO] {")]
    assert len(rec) == 2


def test_bad_timing_knob_is_refused_before_anything_is_written(cli, tmp_path):
    res = cli("op", "relu", "--out", tmp_path / "out", env={"OPSCREEN_MIN_SAMPLES": "abc"}, cwd=tmp_path)
    assert res.returncode == 2 and "OPSCREEN_MIN_SAMPLES" in res.stderr
    assert not (tmp_path / "out").exists()


FAST = {"OPSCREEN_MAX_TIME": "0.02", "OPSCREEN_MIN_SAMPLES": "3", "OPSCREEN_MAX_SAMPLES": "10", "OPSCREEN_WARMUP_CALLS": "1"}


@pytest.fixture
def checkout(tmp_path):
    """A checkout like this repository's: a pyproject.toml with pytest settings at its
    root and the suite inside it (a copy of the sample suite)."""
    import shutil

    from conftest import ROOT, SRC

    co = tmp_path / "checkout"
    shutil.copytree(SRC / "opscreen" / "sample_suite", co / "suite", ignore=shutil.ignore_patterns("__pycache__"))
    (co / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    # only the absolute src: a relative PYTHONPATH=src of the shell would resolve to the
    # suite's own src/ in the child's cwd and hide a lost pytest.ini
    env = dict(FAST, OPSCREEN_CURATED_SHAPES=str(ROOT / "ops" / "shapes.sample.yaml"), PYTHONPATH=str(SRC))
    return co, env


@pytest.mark.parametrize("cmd", [["op", "abs"], ["run", "--ops", "abs,add", "--devices", "0", "--plain"]])
def test_curated_shapes_with_the_output_inside_the_checkout(cli, checkout, cmd):
    """Issue 14 item 3: ``--shape_file PATH`` as two words made pytest take PATH for a path
    to test; with the output inside the checkout the rootdir became the checkout and the
    suite's pytest.ini (pythonpath = src) was not read: 'No module named minigems'."""
    co, env = checkout
    res = cli(*cmd, "--suite", "suite", "--shape-mode", "curated", "--dtypes", "float32", "--out", "runs/cur",
              env=env, cwd=co, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    logs = sorted((co / "runs" / "cur").rglob("run.log"))
    assert len(logs) == (1 if cmd[0] == "op" else 2)
    for log in logs:
        text = log.read_text()
        assert f"rootdir: {co / 'suite'}" in text and "configfile: pytest.ini" in text, text[-3000:]
        assert "minigems" not in text
        cfg = json.loads((log.parent / "child_config.json").read_text())
        words = cfg["argv"] + cfg["pytest_addopts"]
        # every suite option with a value is one word
        assert not {"--level", "--record", "--dtypes", "--shape_file"} & set(words), words
        assert "--shape_file=" + cfg["shape_file"] in words


def test_kernel_caches_default_under_the_cache_root_and_the_users_own_wins(cli, tmp_path):
    root = tmp_path / "cache-root"
    out = tmp_path / "default"
    res = cli("op", "abs", "--dtypes", "float32", "--out", out, env={"OPSCREEN_CACHE_DIR": str(root)}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    ident = json.loads((out / "run_identity.json").read_text())
    for name, key in (("triton", "TRITON_CACHE_DIR"), ("flaggems", "FLAGGEMS_CACHE_DIR")):
        want = str(root / name)
        assert ident["env"][key] == want  # what the child's environment held
        assert ident["kernel_caches"][name] == {"env": key, "dir": want, "source": "default", "seen": want}
        assert (root / name).is_dir()
    assert ident["tuning_caches_at_start"]["flaggems_cache_dir"] == str(root / "flaggems")

    mine = tmp_path / "my-triton"
    out = tmp_path / "user"
    env = {"OPSCREEN_CACHE_DIR": str(root), "TRITON_CACHE_DIR": str(mine)}
    res = cli("op", "abs", "--dtypes", "float32", "--out", out, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["env"]["TRITON_CACHE_DIR"] == str(mine)
    assert ident["kernel_caches"]["triton"] == {"env": "TRITON_CACHE_DIR", "dir": str(mine), "source": "user",
                                                "seen": str(mine)}
    assert ident["kernel_caches"]["flaggems"]["source"] == "default"


def test_result_records_where_the_time_went(cli, tmp_path):
    out = tmp_path / "abs"
    res = cli("op", "abs", "--dtypes", "float32", "--out", out, env={"OPSCREEN_CACHE_DIR": str(tmp_path / "c")}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    result = json.loads((out / "result.json").read_text())
    phases = result["phases"]
    keys = ("start_imports_s", "collection_s", "measurement_s", "teardown_s")
    assert phases["mode"] == "process" and set(keys) < set(phases)
    assert all(isinstance(phases[k], float) and phases[k] >= 0 for k in keys), phases
    assert phases["start_imports_s"] > 0 and phases["measurement_s"] > 0  # torch imported, the tests ran
    assert phases["child_wall_s"] == result["duration_s"] > 0
    assert sum(phases[k] for k in keys) <= phases["child_wall_s"], phases
    ident = json.loads((out / "run_identity.json").read_text())
    assert {k: ident["phases"][k] for k in keys} == {k: phases[k] for k in keys}

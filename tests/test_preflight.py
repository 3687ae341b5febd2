"""The preflight (opscreen.op.preflight): bad child arguments and a bad interpreter are one
line and exit 2 before anything is written; a collection that fails for other reasons
(the library does not import: no device) does not block the run.

Real processes throughout: the fault suite (tests/fixtures/suites/faults, no torch) for
speed, and the bundled sample suite where its own conftest must be the one that refuses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch_faults import faults, reaped, status_rows  # noqa: E402,F401  (faults: the shared fixture)

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def one_line_usage(res) -> str:
    """The run ended with exit 2 and exactly one line on stderr; that line."""
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def op_argv(faults, *args) -> list[str]:
    return [sys.executable, "-m", "opscreen", "op", "--suite", str(faults.suite), "--backend", "cpu", *map(str, args)]


def run_op_cli(faults, *args, cwd=None, env=None) -> subprocess.CompletedProcess:
    e = dict(faults.env)
    e.update(env or {})
    return subprocess.run(op_argv(faults, *args), env=e, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL, cwd=cwd)


# -- bad child arguments: found once, before any op runs ------------------------------------


def test_unknown_pytest_argument_is_one_line_before_any_op_runs(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--", "--bogus")
    line = one_line_usage(res)
    assert "unrecognized arguments: --bogus" in line, line
    assert not out.exists(), "nothing may be written before the preflight"
    assert faults.runs("ok_a") == faults.runs("ok_b") == 0  # no op ran, let alone twice
    assert not list(faults.suite.glob("result_*.log"))  # the collection wrote nothing into the suite
    faults.assert_no_leftovers()


def test_bad_level_is_refused_by_the_suites_own_choices(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--level", "bogus")
    line = one_line_usage(res)
    assert "argument --level: invalid choice: 'bogus'" in line, line
    assert not out.exists()
    assert faults.runs("ok_a") == 0


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--warmup"], "argument --warmup: expected one argument"),
        (["benchmark/test_nothing_here.py"], "file or directory not found: benchmark/test_nothing_here.py"),
        (["-k", "((("], "Wrong expression passed to '-k'"),
        (["-p", "no_such_plugin_xyz"], 'Error importing plugin "no_such_plugin_xyz"'),
    ],
    ids=["missing-value", "missing-path", "bad-k", "bad-plugin"],
)
def test_other_pytest_usage_errors_are_one_line(faults, extra, says):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--", *extra)
    assert says in one_line_usage(res)
    assert not out.exists()
    assert faults.runs("ok_a") == 0


def test_sample_suite_level_bogus(cli, tmp_path):
    """The bundled sample suite's conftest declares --level choices: its collection refuses."""
    out = tmp_path / "run"
    res = cli("run", "--backend", "cpu", "--devices", "0", "--ops", "abs", "--level", "bogus", "--out", out, "--plain",
              cwd=tmp_path)
    line = one_line_usage(res)
    assert "invalid choice: 'bogus' (choose from 'comprehensive', 'core')" in line, line
    assert not out.exists()


def test_op_bad_level_keeps_the_earlier_result(faults):
    """`opscreen op`: the preflight runs before the output dir is touched."""
    out = faults.tmp / "op"
    res = run_op_cli(faults, "ok_a", "--out", out)
    assert res.returncode == 0, res.stdout + res.stderr
    before = (out / "result.json").read_bytes()
    res = run_op_cli(faults, "ok_a", "--out", out, "--level", "bogus")
    assert "invalid choice: 'bogus'" in one_line_usage(res)
    assert (out / "result.json").read_bytes() == before
    assert json.loads(before)["status"] == "passed"
    assert faults.runs("ok_a") == 1


# -- the interpreter --------------------------------------------------------------------------


def test_missing_interpreter_is_one_line(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--python", "/nonexistent/python")
    line = one_line_usage(res)
    assert "/nonexistent/python does not exist" in line and "--python" in line, line
    assert not out.exists()
    res = run_op_cli(faults, "ok_a", "--python", "/nonexistent/python", "--out", faults.tmp / "op")
    assert "/nonexistent/python does not exist" in one_line_usage(res)
    assert not (faults.tmp / "op").exists()


def test_interpreter_without_pytest_is_one_line_naming_it(faults):
    """A fresh virtual environment without the suite's requirements (the demo on a
    fresh clone): one line that names the interpreter and says what to install."""
    venv = faults.tmp / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    assert subprocess.run([str(py), "-c", "import pytest"], capture_output=True, cwd=faults.tmp).returncode != 0
    out = faults.tmp / "run"
    # PYTHONPATH of the fault env points at opscreen's src and the stub torch, not at pytest
    res = faults.run(out, "--ops", "ok_a", "--python", py)
    line = one_line_usage(res)
    assert f"{py} cannot import pytest" in line and "pip install pytest" in line, line
    assert not out.exists()


def test_relative_python_path_is_taken_from_the_current_dir(faults):
    """The children start in the suite root: a relative --python is made absolute first."""
    link_dir = faults.tmp / "bin"
    link_dir.mkdir()
    (link_dir / "py").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (link_dir / "py").chmod(0o755)
    out = faults.tmp / "run"
    e = dict(faults.env)
    res = subprocess.run(faults.argv(out, "--ops", "ok_a", "--devices", "0", "--python", "bin/py"), env=e,
                         capture_output=True, text=True, timeout=240, cwd=faults.tmp, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout + res.stderr
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["settings"]["python"] == str(faults.tmp / "bin" / "py")


# -- what is not a usage error does not block ------------------------------------------------

BREAK_ONCE = '''
import os as _os
_flag = _os.path.join(_os.environ["FAULTS_STATE_DIR"], "conftest-broke-once")
if not _os.path.exists(_flag):
    open(_flag, "w").close()
    raise ImportError("no device: the library could not initialise")
'''


def test_collection_failing_for_other_reasons_does_not_block(faults):
    """Like FlagGems' conftest importing flag_gems without a device: pytest exits 4
    ("ImportError while loading conftest"), which is not the arguments' fault. The
    preflight says so in one line and the run goes on (here the ops then pass)."""
    conftest = faults.suite / "benchmark" / "conftest.py"
    conftest.write_text(conftest.read_text() + BREAK_ONCE)
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0")
    assert res.returncode == 0, res.stdout + res.stderr
    pre = [ln for ln in res.stderr.splitlines() if "preflight" in ln]
    assert len(pre) == 1 and "not an argument error" in pre[0] and "no device" in pre[0], res.stderr
    rows = status_rows(out)
    assert rows["ok_a"]["status"] == rows["ok_b"]["status"] == "passed"
    assert faults.runs("ok_a") == faults.runs("ok_b") == 1


def test_resume_with_every_op_complete_skips_the_collection(faults):
    out = faults.tmp / "run"
    assert faults.run(out, "--ops", "ok_a", "--devices", "0").returncode == 0
    # the suite now refuses every collection: a resume with nothing left to run must not care
    conftest = faults.suite / "benchmark" / "conftest.py"
    conftest.write_text(conftest.read_text() + "\nraise ImportError('would fail')\n")
    res = faults.run(out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "preflight" not in res.stderr


SLOW_IMPORT = '''
import os as _os, time as _time
if _os.environ.get("FAULTS_SLOW_CONFTEST"):
    open(_os.path.join(_os.environ["FAULTS_STATE_DIR"], "conftest-started"), "w").write(str(_os.getpid()))
    _time.sleep(300)
'''


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_during_the_collection_kills_it(faults, signum):
    """SIGTERM / Ctrl-C while the preflight collects: its child group is killed, exit
    130, nothing written."""
    conftest = faults.suite / "benchmark" / "conftest.py"
    conftest.write_text(conftest.read_text() + SLOW_IMPORT)
    out = faults.tmp / "run"
    proc = faults.popen(out, "--ops", "ok_a", "--devices", "0", env={"FAULTS_SLOW_CONFTEST": "1"})
    with reaped(proc):
        started = faults.state / "conftest-started"
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), "the collection never started"
        proc.send_signal(signum)
        stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout
    assert not out.exists()
    faults.assert_no_leftovers()


# -- the classification itself -----------------------------------------------------------------


def test_usage_problem_tells_usage_from_environment():
    from opscreen.op.preflight import usage_problem

    argparse_lines = [
        "ERROR: usage: python -m pytest [options] [file_or_dir] [file_or_dir] [...]",
        "python -m pytest: error: unrecognized arguments: --bogus",
        "  inifile: /s/pytest.ini",
    ]
    assert usage_problem(4, argparse_lines) == "unrecognized arguments: --bogus"
    conftest_lines = [
        "ImportError while loading conftest '/s/benchmark/conftest.py'.",
        "E   ModuleNotFoundError: No module named 'flag_gems'",
    ]
    assert usage_problem(4, conftest_lines) is None
    assert usage_problem(86, ["OPSCREEN-FATAL: device-unavailable: no visible cuda device 0"]) is None
    assert usage_problem(2, ["E   ValueError: 'bogus' is not a valid BenchLevel"], level="bogus") == (
        "--level bogus: 'bogus' is not a valid BenchLevel"
    )
    assert usage_problem(2, ["E   ValueError: 'x' is not a valid BenchLevel"], level="core") is None
    plugin = ['ERROR: Error importing plugin "mine": No module named \'mine\'']
    assert usage_problem(4, plugin, extra_args=["-p", "mine"]).startswith("Error importing plugin")
    assert usage_problem(4, plugin, extra_args=[]) is None

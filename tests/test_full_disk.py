"""A full disk under the run dir: a real tiny filesystem (tmpfs), real children.

The run dir lives on a tmpfs of a few hundred KiB, mounted for the test (root
only: the test is skipped where ``mount`` is not permitted). Chatty children fill
it. Expected: one line on stderr naming the file and its filesystem, no
traceback, the children killed, nothing written outside the run dir, the run dir
left resumable, and a resume after the space is back finishes the run.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch_faults import faults, status_rows  # noqa: E402,F401  (faults: the shared fixture)

from opscreen.op.process import OutputError, run_streaming  # noqa: E402

SMALL = "320k"


@pytest.fixture
def tiny_fs(tmp_path):
    """A tmpfs of ``SMALL`` bytes at ``tmp_path/fs``; unmounted at the end."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL},mode=0755", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip() or res.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def remount(mnt: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mnt)], check=True, capture_output=True)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}


def test_reader_keeps_draining_when_the_log_write_fails(tiny_fs):
    """The output reader survives a failing write: the child is killed at once (not at
    the timeout), the caller gets the write error, and no thread dies."""
    log = open(tiny_fs / "run.log", "w", encoding="utf-8")
    chatty = [sys.executable, "-c", "import sys\nfor i in range(200000): print('x' * 200, flush=True)\nimport time; time.sleep(600)"]
    died: list = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: died.append(args.exc_value)

    def on_line(line: str) -> None:
        log.write(line)
        log.flush()

    try:
        with pytest.raises(OutputError) as info:
            run_streaming(chatty, on_line=on_line, timeout=120, grace=1)
    finally:
        threading.excepthook = old_hook
        try:
            log.close()
        except OSError:
            pass
    err = info.value
    assert isinstance(err.cause, OSError) and err.cause.errno == errno.ENOSPC
    assert not err.result.timed_out  # killed because its output could not be written
    assert err.result.returncode is not None and err.result.returncode < 0
    assert not died, died


def test_full_disk_stops_the_run_with_one_line_and_resumes(faults, tiny_fs, tmp_path):
    out = tiny_fs / "run"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    suite_before = files_under(faults.suite)
    env = dict(faults.env, FAULTS_CHATTY_KIB="4000")
    ops = ["ok_a", "ok_b", "ok_c", "ok_d"]
    args = faults.argv(out, "--ops", ",".join(ops), "--devices", "0,1", "--timeout", "60", "--grace", "1")
    res = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL)

    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr  # one line, no traceback
    line = lines[0]
    assert "No space left on device" in line and f"filesystem {tiny_fs} (tmpfs)" in line, line
    assert f"resume with: opscreen run --out {out}" in line
    assert "Traceback" not in res.stdout
    faults.assert_no_leftovers(wait=2)  # the chatty children were killed

    # nothing outside the run dir: not the suite root (its record logs), not the cwd
    assert files_under(faults.suite) == suite_before
    assert not list(cwd.iterdir())

    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["state"] == "interrupted" and "No space left on device" in ident["error"]
    assert not any((out / "ops").glob("*/.complete"))
    assert not [d for d in (out / "ops").iterdir()]  # the partial op dirs were removed

    # still full (a filler takes what is left): a resume refuses in one line, starts nothing
    filler = tiny_fs / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        except OSError:
            pass
    runs_before = sum(faults.runs(op) for op in ops)
    res = subprocess.run(faults.argv(out), env=faults.env, cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert res.returncode == 1, res.stdout + res.stderr
    assert len(res.stderr.splitlines()) == 1 and "No space left on device" in res.stderr, res.stderr
    assert "nothing was started" in res.stderr
    assert sum(faults.runs(op) for op in ops) == runs_before

    # space back: the resume finishes the run
    filler.unlink()
    remount(tiny_fs, "64m")
    res = subprocess.run(faults.argv(out), env=faults.env, cwd=cwd, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = status_rows(out)
    assert set(rows) == set(ops) and all(r["status"] == "passed" for r in rows.values()), rows
    assert json.loads((out / "run_identity.json").read_text())["state"] == "finished"
    for op in ops:  # the record logs went to the op dirs
        record = (out / "ops" / op / "record.log").read_text()
        assert "Benchmark record logger enabled" in record and f'"op_name": "{op}"' in record
    assert files_under(faults.suite) == suite_before
    assert not list(cwd.iterdir())
    faults.assert_no_leftovers()



def test_a_journal_write_on_a_full_disk_stops_the_run(faults, tiny_fs, capsys):
    """The disk fills between an attempt and the journal's writes (here the attempt
    itself fills it, then reports success): result.json cannot be written. The
    runner stops in one line naming that file, removes the partial op dir, which
    frees the space to record the run as interrupted, and runs nothing more."""
    import io

    from opscreen.backends import resolve
    from opscreen.batch.executor import LocalExecutor
    from opscreen.batch.journal import Journal
    from opscreen.batch.progress import PlainProgress
    from opscreen.batch.config import BatchConfig
    from opscreen.batch.session import BatchRunner
    from opscreen.providers.flaggems import Suite
    from opscreen.op.request import OpOutcome

    suite = Suite.locate(str(faults.suite))
    ops = ["ok_a", "ok_b"]
    cfg = BatchConfig(suite=suite, backend=resolve("cpu"), devices=[0], ops=ops, targets={op: suite.resolve(op) for op in ops},
                      timer="wallclock", timeout=30, grace=1)
    calls: list[str] = []

    def work(request, out_dir, stop=None):  # stands in for run_op: the files, then a full disk
        calls.append(request.op)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "run.log").write_text("a child that filled the disk\n")
        with open(out_dir / "blob", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        return OpOutcome("passed", 0, 0, 0.1, None, out_dir, "wallclock")

    journal = Journal(tiny_fs / "run")
    journal.lock()
    try:
        summary = BatchRunner(cfg, journal, executor=LocalExecutor(work), progress=PlainProgress(io.StringIO()),
                              handle_signals=False).run()
    finally:
        journal.unlock()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert f"cannot write {tiny_fs / 'run' / 'ops'}" in err[0] and "result.json: No space left on device" in err[0], err[0]
    assert f"filesystem {tiny_fs} (tmpfs): 0 B free" in err[0]
    assert summary.exit_code == 1 and summary.unrun == ops
    assert len(calls) == 1  # nothing ran after the failure
    assert not (tiny_fs / "run" / "ops" / calls[0]).exists()
    ident = json.loads((tiny_fs / "run" / "run_identity.json").read_text())
    assert ident["state"] == "interrupted" and "result.json" in ident["error"]


def test_op_on_a_full_disk_is_one_line(faults, tiny_fs, tmp_path):
    """``opscreen op`` whose output fills the filesystem: one line naming the file and the
    filesystem, exit 1, no traceback, the child killed."""
    out = tiny_fs / "op"
    env = dict(faults.env, FAULTS_CHATTY_KIB="4000")
    args = [sys.executable, "-m", "opscreen", "op", "ok_a", "--backend", "cpu", "--suite", str(faults.suite),
            "--out", str(out), "--timeout", "60", "--grace", "1"]
    res = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=200, stdin=subprocess.DEVNULL)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "No space left on device" in lines[0] and f"filesystem {tiny_fs} (tmpfs)" in lines[0], lines[0]
    faults.assert_no_leftovers(wait=2)

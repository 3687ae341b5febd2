"""Bad input is one line on stderr, exit 2, and nothing written (issue 14, items 6, 7, 12).

Every case runs the real CLI in a subprocess, in an empty working directory, so
that "nothing written" covers the defaults too (runs/run-<time>, runs/op/<op>).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SRC, run_cli

FAULTS = Path(__file__).resolve().parent / "fixtures" / "suites" / "faults"
STUB_TORCH = FAULTS / "stub_torch"
CORES = os.cpu_count() or 1


def refused(res, *needles: str) -> str:
    """Exit 2 with exactly one line on stderr that holds every needle; that line."""
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert "Traceback" not in res.stderr
    return lines[0]


def nothing_in(folder: Path) -> None:
    assert list(folder.iterdir()) == [], list(folder.iterdir())


@pytest.fixture
def empty(tmp_path) -> Path:
    d = tmp_path / "cwd"
    d.mkdir()
    return d


def run_in(empty: Path, *args, env=None, timeout=240):
    return run_cli(*args, env=env, cwd=empty, timeout=timeout)


# -- item 6: tracebacks become one line --------------------------------------------------------


def test_very_long_op_names(empty):
    res = run_in(empty, "run", "--backend", "cpu", "--ops", "a" * 5000, "--plain")
    assert res.returncode == 2, res.stderr
    assert "5000 characters" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr) < 600  # the name is not echoed in full
    nothing_in(empty)
    refused(run_in(empty, "op", "a" * 300, "--backend", "cpu"), "300 characters", "at most 128")
    nothing_in(empty)


def test_very_long_paths(empty):
    long = "/tmp/" + "b" * 300
    for flag in ("--suite", "--out", "--shape-mode", "--ops-file", "--replay-from", "--python"):
        args = ["run", "--backend", "cpu", flag, long, "--plain"]
        if flag != "--ops-file":
            args += ["--ops", "abs"]
        refused(run_in(empty, *args), flag, "File name too long")
    for flag in ("--suite", "--out", "--shape-mode", "--python"):
        refused(run_in(empty, "op", "abs", "--backend", "cpu", flag, long), flag, "File name too long")
    nothing_in(empty)


def test_ops_file_that_is_not_utf8(empty, tmp_path):
    f = tmp_path / "ops.txt"
    f.write_bytes(b"\xff\xfe")
    refused(run_in(empty, "run", "--backend", "cpu", "--ops-file", f, "--plain"), str(f), "not UTF-8 text (byte 0xff")
    nothing_in(empty)


def _readonly_mount_works(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o ro,size=64k none '{where}'"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def test_out_on_a_read_only_file_system(empty, tmp_path):
    """A real read-only mount (tmpfs mounted ro in a private mount namespace, so the
    host sees nothing): the run dir inside it, or the mount point itself."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if not _readonly_mount_works(ro):
        pytest.skip("no private mount namespace here (unshare -rm) to mount a read-only file system")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC)
    for k in ("OP", "SHAPE_MODE", "DTYPES", "FLAGGEMS_ROOT", "ZL_BACKEND", "REPLAY_FROM"):
        env.pop(k, None)
    py = sys.executable
    script = (
        f"mount -t tmpfs -o ro,size=64k none '{ro}' || exit 99\n"
        f"'{py}' -m opscreen run --backend cpu --ops abs --plain --out '{ro}/run'; echo \"rc=$?\" >&2\n"
        f"'{py}' -m opscreen run --backend cpu --ops abs --plain --out '{ro}'; echo \"rc=$?\" >&2\n"
        f"cd '{ro}' && '{py}' -m opscreen op abs --backend cpu; echo \"rc=$?\" >&2\n"
    )
    res = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=env,
                         cwd=empty, timeout=240)
    lines = res.stderr.strip().splitlines()
    assert lines == [lines[0], "rc=2", lines[2], "rc=2", lines[4], "rc=2"], res.stderr
    for line in (lines[0], lines[2], lines[4]):
        assert "Read-only file system" in line and "choose another --out" in line, line
    nothing_in(empty)
    nothing_in(ro)  # the host's view: the mount was private


# -- item 7: silent fallbacks become errors ----------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--suite", ""], "--suite ''"),
        (["--out", ""], "--out ''"),
        (["--devices", ""], "--devices ''"),
        (["--python", ""], "--python ''"),
        (["--dtypes", ""], "--dtypes ''"),
        (["--shard", ""], "--shard ''"),
        (["--devices", "99"], "cpu slots are 0.."),
        (["--devices", f"0-{CORES + 3}"], f"({CORES} cores)"),
        (["--devices", "0-99999999999"], "beyond"),
    ],
    ids=["suite", "out", "devices", "python", "dtypes", "shard", "dev99", "beyond-cores", "huge-range"],
)
def test_run_refuses_empty_and_impossible_values(empty, args, needle):
    refused(run_in(empty, "run", "--backend", "cpu", "--ops", "abs", "--plain", *args), needle)
    nothing_in(empty)


@pytest.mark.parametrize("command", [["run", "--ops", "abs", "--plain"], ["op", "abs"]], ids=["run", "op"])
@pytest.mark.parametrize("name, value", [("OPSCREEN_WORKER_MAX_RSS_MB", "lots"), ("OPSCREEN_WORKER_MAX_DEVICE_MB", "-1"),
                                         ("OPSCREEN_WORKER_CANARY_TOL", "0")])
def test_bad_worker_bounds_in_the_environment(empty, command, name, value):
    res = run_in(empty, *command, "--backend", "cpu", "--isolation", "worker", env={name: value})
    refused(res, f"{name}={value!r}", "not a positive number")
    nothing_in(empty)


def test_ops_with_a_line_break(empty):
    refused(run_in(empty, "run", "--backend", "cpu", "--ops", "abs\nadd", "--plain"), "line break", "--ops-file")
    nothing_in(empty)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--suite", ""], "--suite ''"),
        (["--out", ""], "--out ''"),
        (["--device", "99"], "cpu slots are 0.."),
        (["--device", str(CORES)], f"({CORES} cores)"),
    ],
    ids=["suite", "out", "dev99", "dev-cores"],
)
def test_op_refuses_empty_and_impossible_values(empty, args, needle):
    refused(run_in(empty, "op", "abs", "--backend", "cpu", *args), needle)
    nothing_in(empty)


# -- item 12: op on a device that is not there ------------------------------------------------


def test_op_on_a_missing_gpu_is_refused_and_keeps_the_earlier_result(tmp_path):
    """`opscreen op --backend cuda` where no GPU is found: exit 2 before anything is
    written; the earlier passing result stays. Made GPU-less on any machine (and fast):
    no vendor CLI on PATH, and the fault suite's stub torch, which has no torch.cuda."""
    suite = tmp_path / "suite"
    shutil.copytree(FAULTS, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    (tmp_path / "state").mkdir()
    nopath = tmp_path / "empty-path"
    nopath.mkdir()
    env = {"PYTHONPATH": os.pathsep.join([str(SRC), str(STUB_TORCH)]), "FAULTS_STATE_DIR": str(tmp_path / "state")}
    out = tmp_path / "op"
    res = run_cli("op", "ok_a", "--suite", suite, "--backend", "cpu", "--out", out, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert json.loads(before["result.json"])["status"] == "passed"

    for extra in ([], ["--device", "0"], ["--device", "1"]):
        res = run_cli("op", "ok_a", "--suite", suite, "--backend", "cuda", "--out", out, *extra,
                      env={**env, "PATH": str(nopath)}, cwd=tmp_path, timeout=120)
        refused(res, "--device", "backend cuda found no devices")
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before

    # `run` says the same for explicit --devices (it used to start every op on them)
    res = run_cli("run", "--suite", suite, "--backend", "cuda", "--devices", "0", "--ops", "ok_a",
                  "--out", tmp_path / "run", "--plain", env={**env, "PATH": str(nopath)}, cwd=tmp_path, timeout=120)
    refused(res, "--devices 0", "backend cuda found no devices")
    assert not (tmp_path / "run").exists()


# -- the output paths and values of the results commands (a new user's mistakes) ----------------


@pytest.fixture
def two_runs(tmp_path):
    """Two finished synthetic run dirs of one caliber, outside the working directory."""
    from synth import make_run

    runs = []
    for k in range(2):
        d = tmp_path / f"run{k}"
        make_run(d, n_ops=3, seed=3, fail_rate=0, timeout_rate=0, fatal_rate=0,
                 perturb=lambda op, dt, si, lib, k=k: lib * (1 + 0.002 * k))
        runs.append(str(d))
    return runs


@pytest.mark.parametrize("args, needle", [
    (["compare", "{a}", "{b}", "--out", "{file}/x.csv"], "is not a directory"),
    (["compare", "{a}", "{b}", "--out", "{dir}"], "is a directory"),
    (["compare", "{a}", "{b}", "--top", "-3"], "--top -3"),
    (["compare", "{a}", "{b}", "--margin", "inf"], "not a finite percentage"),
    (["compare", "{a}", "{b}", "--threshold", "nan"], "not a finite percentage"),
    (["compare", "{a}", "{b}", "--unresolved", "fail"], "give it with --fail-on"),
    (["store", "add", "{a}", "--db", "sqlite:///{file}/s.db"], "is not a folder"),
    (["calibrate", "{a}", "{b}", "--out", "{file}/f.json"], "is not a directory"),
    (["calibrate", "{a}", "{b}", "--out", "{dir}"], "is a directory"),
    (["calibrate", "{a}", "{b}", "--match", "(", "--out", "f.json"], "not a regular expression"),
    (["calibrate", "{a}", "{a}", "--out", "f.json"], "given twice"),
    (["calibrate", "{a},{b}", "{a},{b}", "--out", "f.json"], "given twice"),
    (["calibrate", "{a}", "{b}", "--sample", "-1", "--out", "f.json"], "--sample is for screen mode"),
    (["calibrate", "--backend", "cpu", "--sample", "2", "--work", "{file}"], "is not a directory"),
    (["publish", "--out", "{file}/site", "--db", "sqlite:///{tmp}/s.db"], "is not a directory"),
    (["devices", "--backend", "cpu", "--peaks", "--devices", "99"], "no device 99"),
    (["devices", "--backend", "cpu", "--peaks", "--peaks-dir", "{file}/x"], "is not a directory"),
    (["shapes", "check", "--op", "nosuch", "-q"], "unknown op"),
])
def test_results_commands_refuse_bad_outputs_and_values(empty, tmp_path, two_runs, args, needle):
    """Each is one line and exit 2 before anything is measured or written (it was a traceback,
    a silent exit 0, or an unusable table)."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    fill = dict(a=two_runs[0], b=two_runs[1], file=tmp_path / "afile", dir=tmp_path / "adir", tmp=tmp_path)
    before = {p: p.stat().st_mtime_ns for r in two_runs for p in Path(r).rglob("*")}
    refused(run_in(empty, *[a.format(**fill) for a in args]), needle)
    nothing_in(empty)
    assert list((tmp_path / "adir").iterdir()) == [] and (tmp_path / "afile").read_text() == "x"
    assert not (tmp_path / "s.db").exists()
    assert {p: p.stat().st_mtime_ns for r in two_runs for p in Path(r).rglob("*")} == before


def test_a_refused_calibrate_screen_leaves_no_work_dir(empty):
    """The first screen's run refuses its arguments: calibrate removes the sample it wrote."""
    res = run_in(empty, "calibrate", "--backend", "cpu", "--devices", "0", "--sample", "2", "--histories", "op,op",
                 "--work", "cw", "--timeout", "0")
    refused(res, "--timeout")
    nothing_in(empty)


def test_write_ops_is_written_only_once_the_preflight_passed(empty):
    """A run the preflight refuses leaves an existing --write-ops file as it was."""
    keep = empty / "keep.txt"
    keep.write_text("old\n")
    res = run_in(empty, "run", "--backend", "cpu", "--plain", "--out", "r", "--ops", "abs", "--devices", "0",
                 "--write-ops", "keep.txt", "--level", "bogus")
    refused(res, "--level")
    assert keep.read_text() == "old\n" and sorted(p.name for p in empty.iterdir()) == ["keep.txt"]

"""Issue 34: rough edges and reliability findings, each with a test that fails without its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SRC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch_faults import faults, status_rows  # noqa: E402,F401  (faults: the shared fixture)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def settled_snapshot(root: Path, timeout: float = 60.0) -> dict[str, bytes]:
    """The run dir once the hang op is in place: its child prints one last line after it
    records its grandchild's pid, so wait for that line, then for two equal snapshots."""
    import time

    deadline = time.monotonic() + timeout
    log = root / "ops" / "hang" / "run.log"
    while time.monotonic() < deadline and not (
        log.is_file() and b"hang started grandchild" in log.read_bytes()
    ):
        time.sleep(0.1)
    before = snapshot(root)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = snapshot(root)
        if now == before:
            return now
        before = now
    raise AssertionError(f"{root} kept changing for {timeout:.0f} s")


def one_line(res, *needles: str) -> str:
    """Exit 2, one line on stderr holding every needle, no traceback: that line."""
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def op_cli(faults, *args) -> subprocess.CompletedProcess:
    """``opscreen op`` on the fault suite, with its environment."""
    return subprocess.run([sys.executable, "-m", "opscreen", "op", "--suite", str(faults.suite), "--backend", "cpu",
                           *map(str, args)], env=faults.env, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL, cwd=faults.tmp)


def cli_into_closed_pipe(*args, cwd=None, env=None, timeout=120):
    """The real CLI with stdout a pipe whose reader is gone (``opscreen ... | true``):
    every write to it fails with EPIPE, deterministically."""
    r, w = os.pipe()
    os.close(r)
    full_env = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    try:
        return subprocess.run([sys.executable, "-m", "opscreen", *map(str, args)], stdout=w,
                              stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    finally:
        os.close(w)


# -- item 1: a closed pipe is a quiet exit ------------------------------------------------------


@pytest.mark.parametrize("args", [["backends", "--json"], ["backends"], ["devices", "--json"], ["shapes", "check"]],
                         ids=["backends-json", "backends", "devices-json", "shapes-check"])
def test_output_into_a_closed_pipe_exits_quietly(args, tmp_path):
    res = cli_into_closed_pipe(*args, cwd=tmp_path)
    assert res.returncode == 141, res.stderr  # 128 + SIGPIPE, as the shell reports for `yes | head -1`
    assert res.stderr == ""


# -- item 2: `opscreen op --out RUN_DIR` is refused --------------------------------------------


def test_op_into_a_run_dir_is_refused_and_the_screen_resumes(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    before = snapshot(out)
    for where in (out, out / "ops" / "ok_a"):
        one_line(op_cli(faults, "ok_a", "--out", where), "--out", "opscreen run --out", "choose another --out")
        assert snapshot(out) == before  # nothing written, run_identity.json included
    assert faults.runs("ok_a") == 1
    res = faults.run(out)  # the screen still resumes: nothing left to run
    assert res.returncode == 0, res.stdout + res.stderr
    # beside the run dir, or in it but outside its op dirs, the op runs
    res = op_cli(faults, "ok_a", "--out", out / "debug" / "ok_a")
    assert res.returncode == 0, res.stdout + res.stderr


# -- item 3: the lock and the leftovers first, the preflight after ------------------------------


def test_a_second_runner_is_refused_before_its_checks_and_preflight(faults):
    """While a runner holds the run dir, a second one is refused by the lock, not by its
    own preflight (`-- --bogus`, which the collection would refuse): nothing of it ran."""
    from test_batch_faults import reaped

    out = faults.tmp / "run"
    first = faults.popen(out, "--ops", "hang", "--devices", "0", "--timeout", "120")
    with reaped(first):
        before = settled_snapshot(out)
        res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--", "--bogus")
        one_line(res, "in use by another opscreen run", f"pid {first.pid}")
        assert snapshot(out) == before
        first.terminate()
        first.communicate(timeout=60)
    faults.assert_no_leftovers()


def test_a_refused_resume_still_kills_what_a_killed_runner_left(faults):
    """SIGKILL the runner while an op and its grandchild run; a resume refused by its checks
    (`-- --bogus`: other settings than the run's) has killed them first, and wrote nothing."""
    from test_batch_resume import sigkill_when_children_run

    out = faults.tmp / "run"
    proc = faults.popen(out, "--ops", "hang,ok_a", "--devices", "0", "--timeout", "120")
    sigkill_when_children_run(proc, faults.state / "pids", 2)  # pytest child + its sleep
    assert faults.tagged(), "the killed runner's children should still be there"
    before = settled_snapshot(out)
    res = faults.run(out, "--ops", "hang,ok_a", "--devices", "0", "--timeout", "120", "--", "--bogus")
    assert res.returncode == 2 and "measured with other settings" in res.stderr, res.stderr
    assert snapshot(out) == before
    faults.assert_no_leftovers(wait=2)


def test_a_refused_new_run_leaves_no_run_dir(faults):
    out = faults.tmp / "new" / "run"
    one_line(faults.run(out, "--ops", "ok_a", "--devices", "0", "--", "--bogus"), "--bogus")
    assert not (faults.tmp / "new").exists()


# -- item 4: tracebacks become one line; report writes nothing into its input before it fails ---


def cli(*args, cwd=None, env=None):
    from conftest import run_cli

    return run_cli(*args, cwd=cwd, env=env, timeout=120)


def test_summary_and_report_outputs_that_cannot_be_written(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    a_file = faults.tmp / "a_file"
    a_file.write_text("keep me\n")
    before = snapshot(out)

    one_line(cli("summary", out, "--out", a_file), str(a_file), "not a directory")
    one_line(cli("summary", out, "--out", ""), "--out ''")
    one_line(cli("report", out, "--out", faults.tmp), "is a directory", "report.html")
    one_line(cli("report", out, "--out", ""), "--out ''")
    assert a_file.read_text() == "keep me\n"
    assert snapshot(out) == before  # no summary.csv / summary.json left in the input

    (out / "ops_status.csv").write_bytes(b"\xff\xfe\x00binary")
    one_line(cli("summary", out), "ops_status.csv is damaged", "not UTF-8", f"opscreen run --out {out}")
    assert not (out / "summary.json").exists()


@pytest.mark.parametrize("args, needles", [
    (["--out", "DIR"], ["is a directory", "inventory.yaml"]),
    (["--out", ""], ["--out ''"]),
    (["--timeout", "1e308"], ["--timeout", "at most 31536000"]),
], ids=["out-dir", "out-empty", "huge-timeout"])
def test_inventory_refuses_before_it_collects(tmp_path, args, needles):
    args = [str(tmp_path) if a == "DIR" else a for a in args]
    one_line(cli("inventory", *args, cwd=tmp_path), *needles)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["run", "--ops", "abs", "--plain"], ["op", "abs"]], ids=["run", "op"])
@pytest.mark.parametrize("flag", ["--timeout", "--grace"])
def test_waits_too_long_for_a_timer_are_refused(tmp_path, command, flag):
    one_line(cli(*command, "--backend", "cpu", flag, "1e308", cwd=tmp_path), f"{flag} 1e+308", "at most")
    assert list(tmp_path.iterdir()) == []


# -- item 5: a damaged record is damaged in the summary, not passed ----------------------------


@pytest.mark.parametrize("damage", ["truncated", "empty", "missing"])
def test_summary_of_a_damaged_result_says_damaged(faults, damage):
    import json

    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    result = out / "ops" / "ok_a" / "result.json"
    text = result.read_text()
    if damage == "missing":
        result.unlink()
    else:
        result.write_text(text[: len(text) // 2] if damage == "truncated" else "")
    res = cli("summary", out)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [res.stderr.strip()], res.stderr
    assert "ok_a: result.json is" in res.stderr and "run it again" in res.stderr
    ops = {o["op"]: o for o in json.loads((out / "summary.json").read_text())["ops"]}
    assert ops["ok_a"]["status"] == "damaged" and "result.json is" in ops["ok_a"]["error"]
    assert ops["ok_b"]["status"] == "passed"


def test_summary_of_a_run_whose_identity_is_damaged_is_refused(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    ident = out / "run_identity.json"
    ident.write_text(ident.read_text()[:200])
    before = snapshot(out)
    one_line(cli("summary", out), "run_identity.json is truncated or not JSON", "cannot be summarised")
    assert snapshot(out) == before
    res = faults.run(out)
    assert res.returncode == 2 and "run_identity.json is damaged" in res.stderr  # as the runner says


# -- item 6: a result.json whose schema is no version runs again ------------------------------


@pytest.mark.parametrize("schema", ["one", 1.5, None, 0])
def test_a_result_whose_schema_is_no_version_runs_again(faults, schema):
    import json

    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a,ok_b", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    result = out / "ops" / "ok_a" / "result.json"
    obj = json.loads(result.read_text())
    obj["schema"] = schema
    result.write_text(json.dumps(obj))
    res = faults.run(out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok_a: result.json has schema" in res.stdout and "it runs again" in res.stdout
    assert faults.runs("ok_a") == 2 and faults.runs("ok_b") == 1
    rows = status_rows(out)
    assert rows["ok_a"]["status"] == "passed" and rows["ok_a"]["attempts"] == "1"
    from opscreen.contracts import RESULT

    assert json.loads(result.read_text())["schema"] == RESULT.tag()


# -- item 7: merge --out inside an input is refused --------------------------------------------


def _two_shards(faults) -> list:
    """Two shard run dirs of one screen of ok_a, ok_b and ok_c (``--shard I/2``)."""
    shards = []
    for i in range(2):
        out = faults.tmp / f"shard-{i}"
        res = faults.run(out, "--ops", "ok_a,ok_b,ok_c", "--shard", f"{i}/2", "--devices", "0", "--timeout", "30")
        assert res.returncode == 0, res.stdout + res.stderr
        shards.append(out)
    return shards


def test_merge_into_one_of_its_inputs_is_refused(faults):
    shards = _two_shards(faults)
    before = [snapshot(s) for s in shards]
    for where in (shards[0] / "ops" / "merged", shards[1] / "merged", shards[0] / "ops" / "x" / "y"):
        one_line(cli("merge", *shards, "--out", where), "lies inside the input run dir", "outside the inputs")
        assert [snapshot(s) for s in shards] == before
        assert not where.exists()
    res = cli("merge", *shards, "--out", faults.tmp / "merged")  # beside them it merges
    assert res.returncode == 0, res.stdout + res.stderr


# -- item 8: a resume removes the temp dirs its killed predecessor left ------------------------


def test_a_resume_removes_the_temp_dirs_of_its_killed_runner_only(faults):
    from test_batch_resume import sigkill_when_children_run

    from opscreen.op import scratch

    tmp = faults.tmp / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp), "OPSCREEN_ISOLATION": "worker"}
    out = faults.tmp / "run"
    proc = faults.popen(out, "--ops", "hang,ok_a", "--devices", "0", "--timeout", "120", env=env)
    sigkill_when_children_run(proc, faults.state / "pids", 2)  # the worker's hang test + its sleep
    tag = scratch.run_tag(out)
    left = sorted(p.name for p in tmp.glob(f"opscreen-worker-run{tag}-*"))
    assert left, f"the killed runner's worker left no temp dir: {sorted(p.name for p in tmp.iterdir())}"
    # a preflight's, as a SIGKILL during the collection leaves it; another run's; an `opscreen op`'s
    others = [tmp / f"opscreen-worker-run{scratch.run_tag(faults.tmp / 'other')}-abc", tmp / "opscreen-worker-abc",
              tmp / "opscreen-preflight-xyz"]
    mine = tmp / f"opscreen-preflight-run{tag}-xyz"
    for d in others + [mine]:
        d.mkdir()
        (d / "run.log").write_text("log\n")
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--timeout", "20", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not list(tmp.glob(f"opscreen-*-run{tag}-*")), sorted(p.name for p in tmp.iterdir())
    assert all(d.is_dir() for d in others)
    faults.assert_no_leftovers(wait=2)


# -- item 9: ops_status.csv of an interrupted run lists every op of the screen -----------------


def test_an_interrupted_run_lists_its_interrupted_and_unrun_ops(faults):
    import json
    import signal
    import time

    from test_batch_faults import reaped

    out = faults.tmp / "run"
    ops = ["ok_a", "ok_b", "hang", "ok_c", "ok_d"]
    proc = faults.popen(out, "--ops", ",".join(ops), "--devices", "0", "--timeout", "120", "--grace", "0.5")
    with reaped(proc):
        deadline = time.monotonic() + 60
        while faults.runs("hang") < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert faults.runs("hang") == 1
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout
    rows = status_rows(out)
    assert set(rows) == set(ops)
    complete = {op for op in ops if (out / "ops" / op / ".complete").is_file()}
    assert rows["hang"]["status"] == "interrupted" and "resume" in rows["hang"]["error"]
    for op in ops:
        want = "passed" if op in complete else "interrupted" if op == "hang" else "not_run"
        assert rows[op]["status"] == want, (op, rows[op])

    res = cli("summary", out)
    assert res.returncode == 0, res.stdout + res.stderr
    seen = {o["op"]: o["status"] for o in json.loads((out / "summary.json").read_text())["ops"]}
    assert seen == {op: rows[op]["status"] for op in ops}

    # the resume runs what did not run (here without the op that hangs) and lists that
    res = faults.run(out, "--ops", "ok_a,ok_b,ok_c,ok_d", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = status_rows(out)
    assert set(rows) == {"ok_a", "ok_b", "ok_c", "ok_d"} and {r["status"] for r in rows.values()} == {"passed"}
    assert all(faults.runs(op) == 1 for op in rows)
    faults.assert_no_leftovers()


# -- item 10: small ones ------------------------------------------------------------------------


def test_read_only_out_is_a_usage_error_for_summary_report_merge_and_inventory(faults):
    import shutil

    shards = _two_shards(faults)
    ro = faults.tmp / "ro"
    ro.mkdir()
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o ro,size=64k none '{ro}'"], capture_output=True).returncode:
        pytest.skip("no private mount namespace here (unshare -rm) to mount a read-only file system")
    py, s0, s1 = sys.executable, shards[0], shards[1]
    commands = [f"summary '{s0}' --out '{ro}/sum'", f"report '{s0}' --out '{ro}/r.html'",
                f"merge '{s0}' '{s1}' --out '{ro}/m'", f"inventory --no-collect --out '{ro}/inv.yaml'"]
    script = f"mount -t tmpfs -o ro,size=64k none '{ro}' || exit 99\n" + "".join(
        f"'{py}' -m opscreen {c}; echo \"rc=$?\" >&2\n" for c in commands)
    res = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, cwd=faults.tmp,
                         env={**faults.env, "PYTHONPATH": str(SRC)}, timeout=240)
    lines = res.stderr.strip().splitlines()
    assert lines[1::2] == ["rc=2"] * len(commands), res.stderr
    for line in lines[0::2]:
        assert "Read-only file system" in line and "choose another --out" in line, line
    assert not (s0 / "summary.json").exists()  # nothing written beside the input either


BAD_SMALL = [
    (["run", "--backend", "cpu", "--ops", "abs", "--plain", "--devices", "\u0661"], {}, ["--devices", "0,1,4-7"]),
    (["op", "abs", "--backend", "cpu", "--device", "\u0661"], {}, ["--device", "ASCII digits"]),
    (["run", "--backend", "cpu", "--ops", "abs", "--plain"], {"OPSCREEN_CLI_TIMEOUT": "-1"},
     ["OPSCREEN_CLI_TIMEOUT='-1'", "not a positive number"]),
    (["devices"], {"OPSCREEN_PROBE_TIMEOUT": "-5"}, ["OPSCREEN_PROBE_TIMEOUT='-5'", "not a positive number"]),
    (["op", "abs", "--backend", "cpu"], {"OPSCREEN_CACHE_DIR": "FILE"}, ["OPSCREEN_CACHE_DIR", "is a file"]),
    (["run", "--backend", "cpu", "--ops", "abs", "--plain"], {"OPSCREEN_CACHE_DIR": "FILE"},
     ["OPSCREEN_CACHE_DIR", "is a file"]),
    (["inventory", "--no-collect"], {"OPSCREEN_CACHE_DIR": "FILE"}, ["OPSCREEN_CACHE_DIR", "is a file"]),
    (["inventory", "--no-collect", "--cache-dir", "FILE"], {}, ["--cache-dir", "is a file"]),
    (["shapes", "check", "--suite", ""], {}, ["--suite ''"]),
    (["dismiss", "check", "--suite", ""], {}, ["--suite ''"]),
    (["shapes"], {}, ["give an action: check"]),
    (["dismiss"], {}, ["give an action: check"]),
    (["shapes", "check", "--op", "\x1b[31mred"], {}, ["unknown op", "'\\x1b[31mred'"]),
]


@pytest.mark.parametrize("args, env, needles", BAD_SMALL, ids=[
    "run-devices-arabic-digit", "op-device-arabic-digit", "cli-timeout", "probe-timeout", "op-cache-file",
    "run-cache-file", "inventory-cache-file", "inventory-cache-dir-file", "shapes-suite-empty", "dismiss-suite-empty",
    "shapes-no-action", "dismiss-no-action", "shapes-op-escapes"])
def test_small_bad_inputs_are_one_line(tmp_path, args, env, needles):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    args = [str(a_file) if a == "FILE" else a for a in args]
    env = {k: str(a_file) if v == "FILE" else v for k, v in env.items()}
    res = cli(*args, cwd=cwd, env=env)
    line = one_line(res, *needles)
    assert "\x1b" not in res.stderr and "Traceback" not in res.stderr, line
    assert list(cwd.iterdir()) == [] and a_file.read_text() == ""


# -- item 11: the cpu device is named by its model, not its architecture ------------------------

INTEL = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
AMD = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
ARM = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"
LSCPU = "Architecture:  aarch64\nVendor ID:     ARM\nModel name:    Neoverse-V2\nModel:         0\n"


def test_cpu_names_come_from_the_model_and_differ_between_models():
    from opscreen.backends.cpuinfo import name_from_cpuinfo, name_from_lscpu

    assert name_from_cpuinfo(INTEL) == "Intel(R) Xeon(R) Platinum 8480+"
    assert name_from_cpuinfo(AMD) == "AMD EPYC 9654 96-Core Processor"
    assert name_from_cpuinfo(INTEL) != name_from_cpuinfo(AMD)  # both were "x86_64"
    assert name_from_cpuinfo(ARM) is None and name_from_lscpu(LSCPU) == "Neoverse-V2"


def test_devices_and_op_identities_name_the_cpu_model(faults):
    import json
    import platform

    from opscreen.backends.cpuinfo import cpu_name

    name = cpu_name()
    if name in (platform.machine(), platform.processor()):
        pytest.skip("this host does not say its CPU model (/proc/cpuinfo, lscpu)")
    res = cli("devices", "--backend", "cpu", "--json")
    assert res.returncode == 0, res.stderr
    assert [d["name"] for d in json.loads(res.stdout)["devices"]] == [name]
    res = op_cli(faults, "ok_a", "--out", faults.tmp / "op")
    assert res.returncode == 0, res.stdout + res.stderr
    ident = json.loads((faults.tmp / "op" / "run_identity.json").read_text())
    assert ident["device_name"] == name and ident["caliber"]["device_name"] == name
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((out / "run_identity.json").read_text())["caliber"]["device_name"] == name


# -- item 12: inventory says what it does while it works ---------------------------------------


def test_inventory_prints_its_progress_on_stderr(faults):
    res = subprocess.run([sys.executable, "-m", "opscreen", "inventory", "--suite", str(faults.suite), "--jobs", "2",
                          "--out", str(faults.tmp / "inv.yaml")], env=faults.env, capture_output=True, text=True,
                         timeout=240, stdin=subprocess.DEVNULL, cwd=faults.tmp)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    n = len(list((faults.suite / "benchmark").glob("test_*.py")))
    assert lines[0] == f"opscreen inventory: scanning {faults.suite}", lines
    assert lines[1].startswith(f"opscreen inventory: collecting {n} files of suite (2 at a time"), lines
    counts = [ln for ln in lines if ln.startswith("  collected ")]
    assert counts and counts[-1] == f"  collected {n}/{n} files" and len(counts) <= n, lines
    assert lines.index(counts[-1]) < len(lines) - 2  # before the closing summary lines
    assert res.stdout == ""


# -- item 13: plain progress lines carry an ETA ------------------------------------------------


def test_plain_progress_lines_say_the_eta(monkeypatch):
    import io

    from opscreen.batch import progress

    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    out = io.StringIO()
    p = progress.PlainProgress(out)
    p.start(total=5, done_before=1, devices=[0])
    p.c.started_at = 100.0  # (the counters' clock was bound before the patch)
    now[0] = 110.0
    p.op_finished("a", "passed", 0, 10.0)  # 1 op in 10 s this session, 3 left
    now[0] = 120.0
    p.op_finished("b", "passed", 0, 10.0)  # 2 in 20 s, 2 left
    p.op_finished("c", "failed", 0, 0.5, "boom")
    now[0] = 125.0
    p.op_finished("d", "passed", 0, 5.0)  # the last: nothing left to wait for
    lines = out.getvalue().splitlines()
    assert [ln.split("  ETA ")[1].split()[0] if "  ETA " in ln else None for ln in lines] == ["30.0s", "20.0s",
                                                                                              "6.7s", None]
    assert lines[2].endswith("ETA 6.7s  boom")


def test_run_with_plain_prints_the_eta(faults):
    res = faults.run(faults.tmp / "run", "--ops", "ok_a,ok_b,ok_c", "--devices", "0", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("[")]
    assert len(lines) == 3 and all("  ETA " in ln for ln in lines[:2]) and "ETA" not in lines[2], lines


# -- item 14: a pass with the op's own dtypes instead of the requested ones says so -------------


def test_requested_dtypes_the_op_lacks_end_as_passed_own_dtypes(faults):
    import json

    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--dtypes", "int32,float32", "--timeout", "30")
    assert res.returncode == 0, res.stdout + res.stderr  # measured: with the op's own dtypes
    row = status_rows(out)["ok_a"]
    assert (row["status"], row["dtype_level"]) == ("passed_own_dtypes", "1"), row
    assert "ran the op's own dtypes" in row["error"]
    assert "passed_own_dtypes" in next(ln for ln in res.stdout.splitlines() if ln.startswith("["))
    assert "1 passed_own_dtypes" in res.stdout
    res = cli("summary", out)
    assert res.returncode == 0, res.stdout + res.stderr
    assert [o["status"] for o in json.loads((out / "summary.json").read_text())["ops"]] == ["passed_own_dtypes"]
    res = faults.run(faults.tmp / "replay", "--replay-from", out)  # counted as measured: nothing to replay
    assert res.returncode == 0 and "0 ops to run" in res.stdout, res.stdout + res.stderr


# -- a stopped `opscreen op`: the child's dying stacks go to run.log, not the terminal ----------


def test_ctrl_c_on_op_repeats_keeps_the_childs_stacks_in_run_log(faults):
    """SIGINT while `opscreen op --repeats 3` runs a hung op: the harness kills the child's
    group, whose SIGTERM handler dumps every thread's stack; that dump lands in run.log,
    and the terminal gets one line saying so, then the harness's own lines."""
    import signal
    import time

    out = faults.tmp / "op"
    proc = subprocess.Popen([sys.executable, "-m", "opscreen", "op", "hang", "--suite", str(faults.suite), "--backend",
                             "cpu", "--repeats", "3", "--out", str(out), "--grace", "5"], env=faults.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            cwd=faults.tmp)
    try:
        deadline = time.monotonic() + 60
        while faults.runs("hang") < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # inside the test's sleep
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stdout[-2000:] + stderr[-2000:]
    assert "File \"" not in stdout and "Current thread" not in stdout, stdout[-3000:]
    assert "goes to run.log only" in stdout and "opscreen op: hang interrupted" in stdout
    log = (out / "repeats" / "1" / "run.log").read_text()
    assert "File \"" in log  # the stack dump of the kill, kept


def test_the_suites_budgets_passed_to_a_timer_that_ignores_them_are_warned_about(faults):
    """`-- --warmup 25 --iter 100` are the suite's do_bench budgets: the wallclock (and graph)
    timer samples by its own knobs, so `opscreen op` says so in one line; with --timer direct,
    which is the suite's do_bench, it says nothing."""
    res = op_cli(faults, "ok_a", "--out", faults.tmp / "a", "--", "--warmup", "25", "--iter", "100")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    warned = [ln for ln in res.stderr.splitlines() if "do_bench budgets" in ln]
    assert len(warned) == 1 and "wallclock timer does not use" in warned[0] and "--timer direct" in warned[0]
    res = op_cli(faults, "ok_a", "--out", faults.tmp / "b", "--timer", "direct", "--", "--warmup=25")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "do_bench budgets" not in res.stderr

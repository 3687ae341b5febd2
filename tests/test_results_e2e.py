"""End to end on the bundled sample suite (CPU): opscreen run -> summary -> report, and
compare of two real runs (same caliber joins; a changed USE_FLAGTUNE or --timer is refused).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from opscreen.results.parse import parse_record_log, parse_run_log


# keep each op's measurement short: this is about the plumbing, not the numbers
FAST = {
    "OPSCREEN_MAX_TIME": "0.02",
    "OPSCREEN_MIN_SAMPLES": "3",
    "OPSCREEN_MAX_SAMPLES": "10",
    "OPSCREEN_WARMUP_CALLS": "1",
}
OPS = "relu,add"


def _run(cli, out, *extra, env=None):
    res = cli("run", "--backend", "cpu", "--devices", "0,1", "--ops", OPS, "--dtypes", "float32",
              "--out", out, "--plain", *extra, env={**FAST, **(env or {})}, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (Path(out) / "run_identity.json").is_file()
    return Path(out)


@pytest.fixture(scope="module")
def base_runs(tmp_path_factory):
    from conftest import run_cli

    root = tmp_path_factory.mktemp("e2e")
    return _run(run_cli, root / "a"), _run(run_cli, root / "b"), root


def _csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_run_summary_report(base_runs, cli):
    a, _, _ = base_runs
    res = cli("summary", a)
    assert res.returncode == 0, res.stderr
    assert "ops:  2  passed 2" in res.stdout and "float32" in res.stdout and "overall" in res.stdout
    rows = _csv(a / "summary.csv")
    assert {r["op"] for r in rows} == {"relu", "add"}
    assert {r["dtype"] for r in rows} == {"float32"} and {r["status"] for r in rows} == {"ok"}
    for r in rows:
        assert r["backend"] == "cpu" and r["op_status"] == "passed" and r["truncated"] == "false"
        assert r["lib_timer"] == "wallclock" and int(r["lib_samples"]) >= 1 and r["lib_noise_pct"] != ""
        assert float(r["speedup"]) > 0
    # the record log and the printed tables of the real run give the same cases
    for op in ("relu", "add"):
        rec = parse_record_log(a / "ops" / op / "record.log")
        log = parse_run_log(a / "ops" / op / "run.log")
        assert [r.key for r in rec.rows] == [r.key for r in log.rows] and rec.rows
        assert not log.truncated
        assert len([r for r in rows if r["op"] == op]) == len(rec.rows)
        for x, y in zip(rec.rows, log.rows):
            assert abs(x.torch_ms - y.torch_ms) <= 1e-6 and (x.lib_timer, x.lib_samples) == (y.lib_timer, y.lib_samples)
    js = json.loads((a / "summary.json").read_text())
    assert js["caliber"]["timer"] == "wallclock" and js["caliber"]["use_flagtune"] == "0"
    assert js["counts"]["ops"] == {"passed": 2}
    # report
    res = cli("report", a)
    assert res.returncode == 0, res.stderr
    html = (a / "report.html").read_text()
    for sec in ("identity", "status", "distribution", "ops", "slowest", "failures"):
        assert f'<section id="{sec}">' in html
    assert "<svg" in html and "wallclock" in html
    for link in re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", html):
        assert not re.match(r"^(https?:)?//", link)


def test_single_op_dir(cli, tmp_path):
    out = tmp_path / "relu"
    res = cli("op", "relu", "--backend", "cpu", "--dtypes", "float32", "--out", out, env=FAST, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    res = cli("summary", out)
    assert res.returncode == 0, res.stderr
    rows = _csv(out / "summary.csv")
    assert rows and {r["op"] for r in rows} == {"relu"} and {r["op_status"] for r in rows} == {"passed"}
    res = cli("report", out)
    assert res.returncode == 0, res.stderr
    assert (out / "report.html").is_file()


def test_compare_same_caliber(base_runs, cli):
    a, b, _ = base_runs
    res = cli("compare", a, b)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "same caliber: timer wallclock, use_flagtune 0" in res.stdout
    rows = _csv(b / "compare.csv")
    assert rows and not {r["verdict"] for r in rows} & {"new", "gone", "broken"}
    res = cli("report", b, "--against", a)
    assert res.returncode == 0, res.stderr
    assert '<section id="compare">' in (b / "report.html").read_text()


def test_changed_flagtune_is_refused(base_runs, cli):
    a, _, root = base_runs
    c = _run(cli, root / "flagtune", "--use-flagtune", "1")
    assert json.loads((c / "run_identity.json").read_text())["caliber"]["use_flagtune"] == "1"
    res = cli("compare", a, c)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "use_flagtune: A 0, B 1" in res.stderr
    res = cli("compare", a, c, "--allow-mismatch", "use_flagtune")
    assert res.returncode == 0, res.stderr
    assert "use_flagtune 0 -> 1" in res.stdout


def test_changed_timer_is_refused(base_runs, cli):
    a, _, root = base_runs
    d = root / "direct"
    res = cli("run", "--backend", "cpu", "--devices", "0,1", "--ops", OPS, "--dtypes", "float32", "--timer", "direct",
              "--out", d, "--plain", env=FAST, timeout=600)  # fmt: skip
    assert (d / "run_identity.json").is_file(), res.stdout[-3000:] + res.stderr[-3000:]
    assert json.loads((d / "run_identity.json").read_text())["caliber"]["timer"] == "direct"
    res = cli("compare", a, d)
    assert res.returncode == 2
    assert "timer: A wallclock, B direct" in res.stderr
    assert cli("compare", a, d, "--allow-mismatch", "timer").returncode == 0


def test_summary_says_where_the_time_went(base_runs, cli):
    a, _, _ = base_runs
    for op in ("relu", "add"):  # a batch op's result.json keeps its process's phases
        result = json.loads((a / "ops" / op / "result.json").read_text())
        ph = result["phases"]
        parts = [ph[k] for k in ("start_imports_s", "collection_s", "measurement_s", "teardown_s")]
        assert all(v >= 0 for v in parts) and sum(parts) <= ph["child_wall_s"] <= result["duration_s"], ph
        # of the measurement: what opscreen's timer took (the CPU's wallclock timer: warm-up and samples)
        tm = ph["timer"]
        assert tm["measurements"] >= 2 and 0 < tm["timer_s"] <= ph["measurement_s"], ph
        assert tm["warmup_s"] > 0 and tm["samples_s"] > 0 and tm["capture_s"] == 0, tm
        assert tm["first_s"] > 0, tm  # each callable's first call, apart from the rest of the warm-up
        assert tm["first_s"] + tm["warmup_s"] + tm["samples_s"] + tm["other_s"] == pytest.approx(tm["timer_s"], abs=0.004), tm
    res = cli("summary", a)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "where the time went: 2 ops" in out, out
    for label in ("start+imports", "collection", "measurement", "teardown", "other"):
        assert label in out
    assert "slowest ops: " in out and "relu" in out.split("slowest ops: ")[1] and "add" in out.split("slowest ops: ")[1]
    t = json.loads((a / "summary.json").read_text())["time"]
    assert t["ops"] == 2 and t["with_phases"] == 2 and t["wall_s"] > 0
    assert t["phases"]["measurement_s"]["s"] > 0 and t["phases"]["start_imports_s"]["s"] > 0
    assert sum(p["s"] for p in t["phases"].values()) == pytest.approx(t["wall_s"], abs=0.01)
    assert [o["op"] for o in t["slowest"]] and len(t["slowest"]) == 2
    tm = t["timers"]
    assert tm["ops"] == 2 and 0 < tm["timer_s"] <= tm["measurement_s"]
    assert tm["suite_s"] == pytest.approx(tm["measurement_s"] - tm["timer_s"], abs=0.002)
    assert f"of the measurement (2 ops, {tm['measurement_s']:.1f} s): opscreen's timers {tm['timer_s']:.1f} s" in out, out

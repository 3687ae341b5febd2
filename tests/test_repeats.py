"""``--repeats N``: one op in N fresh processes, merged into per-case medians and spreads."""

from __future__ import annotations

import json
import math
import random
import re
import statistics
import sys
from pathlib import Path

import pytest

from opscreen.errors import UsageError
from opscreen.results.records import merge_metrics, merge_record_texts
from opscreen.settings import validate_repeats
from opscreen.results.compare import Verdict, compare_summaries
from opscreen.results.parse import parse_record_log, parse_record_log_text
from opscreen.results.summary import COLUMNS, Summary, build_summary, format_summary

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_batch_faults import faults, kill_after, result, status_rows  # noqa: E402,F401  (faults: the shared fixture)

FIXTURE_RECORD = Path(__file__).resolve().parent / "fixtures" / "flaggems-h200" / "abs_record.log"


# -- validation ---------------------------------------------------------------------


@pytest.mark.parametrize("value,n", [("1", 1), ("3", 3), (" 7 ", 7), (100, 100)])
def test_validate_repeats_accepts_whole_numbers(value, n):
    assert validate_repeats(value) == n


@pytest.mark.parametrize("value", ["0", "-2", "101", "2.5", "three", ""])
def test_validate_repeats_refuses_in_one_line(value):
    with pytest.raises(UsageError) as exc:
        validate_repeats(value)
    msg = str(exc.value)
    assert "\n" not in msg and "--repeats" in msg and "1 to 100" in msg


# -- merging one case -----------------------------------------------------------------


def metric(base, lib, **tags):
    m = {"shape_detail": [[64, 64]], "latency_base": base, "latency": lib, "speedup": base / lib,
         "gbps_base": None, "gbps": None, "tflops": None, "error_msg": None,
         "timer_base": "graph", "timer": "graph", "samples_base": 10, "samples": 12,
         "rsd_base": 0.001, "rsd": 0.002, "calls_base": 64, "calls": 64}
    m.update(tags)
    return m


def test_merge_takes_medians_and_the_median_of_per_process_speedups():
    # process 2 ran slow on both sides: its speedup is like the others'
    ms = [metric(1.0, 0.5), metric(2.0, 1.0, rsd=0.004), metric(1.1, 0.5, rsd=0.001, samples=20)]
    out = merge_metrics(ms)
    assert out["latency_base"] == pytest.approx(1.1) and out["latency"] == pytest.approx(0.5)
    # median of (2.0, 2.0, 2.2), not latency_base / latency (2.2)
    assert out["speedup"] == pytest.approx(2.0)
    assert out["samples"] == 12 + 12 + 20 and out["samples_base"] == 30
    assert out["rsd"] == pytest.approx(0.002)
    assert out["repeats"] == 3
    assert out["spread_base"] == pytest.approx(2.0 / 1.0 - 1)
    assert out["spread"] == pytest.approx(1.0 / 0.5 - 1)
    assert out["speedup_spread"] == pytest.approx(2.2 / 2.0 - 1)
    assert out["calls"] == 64 and out["shape_detail"] == [[64, 64]]
    assert ms[0]["latency_base"] == 1.0  # inputs untouched


def test_merge_keeps_a_fallback_tag_and_skips_processes_without_a_number():
    failed = metric(1.0, 1.0, latency=None, latency_base=None, speedup=None, error_msg="CUDA error: boom")
    ms = [metric(1.0, 0.5), failed, metric(1.0, 0.4, timer="graph-fallback:capture")]
    out = merge_metrics(ms)
    assert out["repeats"] == 2 and out["error_msg"] is None
    assert out["timer"] == "graph-fallback:capture" and out["timer_base"] == "graph"
    assert out["latency"] == pytest.approx(0.45) and out["speedup"] == pytest.approx(2.25)


def test_merge_of_a_case_no_process_measured_keeps_its_error():
    failed = metric(1.0, 1.0, latency=None, latency_base=None, speedup=None, error_msg="boom")
    out = merge_metrics([failed, dict(failed, error_msg="boom again")])
    assert out["repeats"] == 0 and out["error_msg"] == "boom"
    assert "spread" not in out


def test_a_single_process_has_no_spread():
    out = merge_metrics([metric(1.0, 0.5)])
    assert out["repeats"] == 1 and out["spread"] is None and out["speedup_spread"] is None


# -- merging record logs ----------------------------------------------------------------


def scaled(text: str, factor: float) -> str:
    """The record log with every library latency scaled (a slower process)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("[INFO] {"):
            e = json.loads(line[7:])
            for r in e.get("result", []):
                if r.get("latency") is not None:
                    r["latency"] *= factor
                    r["speedup"] = r["latency_base"] / r["latency"]
            line = "[INFO] " + json.dumps(e)
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_merge_record_logs_of_the_real_suite():
    text = FIXTURE_RECORD.read_text()
    merged, counts = merge_record_texts([text, scaled(text, 1.2), scaled(text, 0.9)])
    one = parse_record_log_text(text).rows
    rows = parse_record_log_text(merged).rows
    assert counts["cases"] == len(one) == len(rows) and counts["truncated_repeats"] == 0
    assert [r.key for r in rows] == [r.key for r in one]
    for a, m in zip(one, rows):
        assert m.repeats == 3
        assert m.lib_ms == pytest.approx(a.lib_ms)  # the median of 0.9x, 1x, 1.2x
        assert m.torch_ms == pytest.approx(a.torch_ms)
        assert m.lib_spread == pytest.approx(1.2 / 0.9 - 1)
        assert m.torch_spread == pytest.approx(0.0)
        assert m.speedup_spread == pytest.approx(1.2 / 0.9 - 1)


def test_merge_record_logs_aligns_cases_some_processes_lack():
    text = FIXTURE_RECORD.read_text()
    entries = [ln for ln in text.splitlines() if ln.startswith("[INFO] {")]
    first = json.loads(entries[0][7:])
    short = dict(first, result=first["result"][:1])
    cut = "[INFO] " + json.dumps(short) + "\n" + entries[1][: len(entries[1]) // 2]  # killed mid-line
    merged, counts = merge_record_texts([text, cut])
    assert counts["truncated_repeats"] == 1
    rows = {r.key: r for r in parse_record_log_text(merged).rows}
    assert len(rows) == len(parse_record_log_text(text).rows)
    key0 = parse_record_log_text(text).rows[0].key
    assert rows[key0].repeats == 2
    assert sum(1 for r in rows.values() if r.repeats == 1) == len(rows) - 1


# -- compare ----------------------------------------------------------------------------


def summary_of(speedup, spread, noise_pct=0.05):
    d = dict.fromkeys(COLUMNS)
    d.update(op="abs", test="", dtype="float16", shape="[[64,64]]", status="ok", speedup=speedup,
             torch_noise_pct=noise_pct, lib_noise_pct=noise_pct, speedup_spread=spread,
             repeats=3 if spread is not None else None)
    return Summary(kind="op", name="x", identity={}, caliber={"timer": "graph"}, ops=[], rows=[[d[c] for c in COLUMNS]])


def test_compare_widens_the_band_to_the_spread_between_processes():
    """With --repeats on both runs the band is at least a test over processes: each run's
    spread over its N processes gives sigma = ln(1 + spread) / d2(N), and the band is Welch's
    t x sqrt(sigma_A^2/N_A + sigma_B^2/N_B)."""
    from opscreen.results.noise import t_critical

    def welch(sa, sb, n=3, d2=1.693):
        va, vb = (math.log1p(sa) / d2) ** 2 / n, (math.log1p(sb) / d2) ** 2 / n
        df = (va + vb) ** 2 / (va ** 2 / (n - 1) + vb ** 2 / (n - 1))
        return t_critical(df, 0.01) * math.sqrt(va + vb)

    quiet = compare_summaries(summary_of(1.0, None), summary_of(0.96, None), table=False).rows[0]
    assert quiet.verdict == Verdict.SLOWER and quiet.basis == "samples"
    # processes 5 % and 1 % apart: a 4 % move is inside the test's band, whose interval is too wide for same
    wide = compare_summaries(summary_of(1.0, 0.05), summary_of(0.96, 0.01), table=False).rows[0]
    assert wide.verdict == Verdict.UNRESOLVED and wide.basis == "repeats"
    assert wide.band == pytest.approx(welch(0.05, 0.01), rel=1e-6)
    assert compare_summaries(summary_of(1.0, 0.05), summary_of(0.96, 0.01), table=False,
                             max_band=0.25).rows[0].verdict == Verdict.SAME
    # processes 0.5 % apart: the same 4 % move is beyond the band
    beyond = compare_summaries(summary_of(1.0, 0.005), summary_of(0.96, 0.005), table=False).rows[0]
    assert beyond.verdict == Verdict.SLOWER and beyond.basis == "repeats"
    assert beyond.band == pytest.approx(welch(0.005, 0.005), rel=1e-6) and beyond.band < 0.04
    # samples 30 % apart within each process (a shared CPU), medians 0.5 % apart over the
    # processes: the processes are the samples, and one process's noise does not set the band
    host = compare_summaries(summary_of(1.0, 0.005, 30.0), summary_of(0.96, 0.005, 30.0), table=False).rows[0]
    assert host.basis == "repeats" and host.band == pytest.approx(beyond.band) and host.verdict == Verdict.SLOWER
    single = compare_summaries(summary_of(1.0, None, 30.0), summary_of(0.96, None, 30.0), table=False).rows[0]
    assert single.basis == "samples" and single.band > 0.5 and single.verdict == Verdict.UNRESOLVED
    # no table for the device, and the default set no band: said so, never "--no-floors"
    from opscreen.results.compare import format_comparison

    text = format_comparison(compare_summaries(summary_of(1.0, None, 30.0), summary_of(0.96, None, 30.0)))
    assert "the conservative default set no row's band here" in text and "--no-floors" not in text
    assert "--no-floors" in format_comparison(compare_summaries(summary_of(1.0, None), summary_of(0.96, None), table=False))


def test_summary_says_how_far_processes_disagreed():
    def row(shape, spread, repeats=3, status="ok"):
        d = dict.fromkeys(COLUMNS)
        d.update(op="sum", dtype="float16", shape=shape, status=status, speedup=1.0,
                 repeats=repeats, speedup_spread=spread)
        return [d[c] for c in COLUMNS]

    rows = [row(f"[[{k}]]", k / 100) for k in range(1, 11)]  # 1 % .. 10 %
    rows += [row("[[1]]", 0.5, repeats=1), row("[[2]]", 0.9, status="failed"), row("[[3]]", None)]
    s = Summary(kind="op", name="x", identity={}, caliber={}, ops=[], rows=rows)
    sp = s.spread_stats()
    assert sp["rows"] == 10 and sp["max"] == pytest.approx(0.10)  # one process, failed, no spread: left out
    assert sp["median"] == pytest.approx(0.055) and sp["p90"] == pytest.approx(0.091)
    assert sp["over"] == 7 and [w["shape"] for w in sp["worst"]] == ["[[10]]", "[[9]]", "[[8]]", "[[7]]", "[[6]]"]
    text = format_summary(s)
    assert "between processes" in text and "7 over 3%" in text and "max 10.0%" in text
    assert any(line.split() == ["10.0%", "sum", "float16", "[[10]]", "3"] for line in text.splitlines()), text
    assert json.loads(s.to_json_text())["spread"]["over"] == 7
    single = Summary(kind="op", name="x", identity={}, caliber={}, ops=[], rows=[row("[[1]]", None, repeats=None)])
    assert single.spread_stats() is None and "between processes" not in format_summary(single)
    assert json.loads(single.to_json_text())["spread"] is None


# -- end to end ---------------------------------------------------------------------------


def test_op_repeats_on_the_sample_suite(cli, tmp_path):
    out = tmp_path / "abs"
    res = cli("op", "abs", "--dtypes", "float32", "--repeats", "3", "--out", out, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    reps = [out / "repeats" / str(k) for k in (1, 2, 3)]
    for d in reps:
        assert json.loads((d / "result.json").read_text())["status"] == "passed"
        assert (d / "record.log").is_file() and "Operator: abs" in (d / "run.log").read_text()
    per = [{r.key: r for r in parse_record_log(d / "record.log").rows} for d in reps]
    merged = parse_record_log(out / "record.log").rows
    assert merged and len(merged) == len(per[0])
    for row in merged:
        libs = [p[row.key].lib_ms for p in per]
        speedups = [p[row.key].speedup for p in per]
        assert row.repeats == 3
        assert row.lib_ms == pytest.approx(statistics.median(libs))
        assert row.speedup == pytest.approx(statistics.median(speedups))
        assert row.lib_spread == pytest.approx(max(libs) / min(libs) - 1)
        assert row.lib_samples == sum(p[row.key].lib_samples for p in per)
    log = (out / "run.log").read_text()
    assert log.count("[opscreen] repeat ") == 6 and "[opscreen] result passed" in log
    assert "merged 3 of 3 repeats" in log
    res_json = json.loads((out / "result.json").read_text())
    assert res_json["status"] == "passed" and res_json["repeats"]["ran"] == 3 and res_json["repeats"]["passed"] == 3
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["repeats"]["requested"] == 3 and ident["caliber"]["repeats"] == 3 and ident["outcome"] == "passed"
    s = build_summary(out)
    rows = list(s.row_dicts())
    assert rows and all(r["repeats"] == 3 and r["speedup_spread"] is not None for r in rows)
    assert s.ops[0].status == "passed"
    assert s.spread_stats()["rows"] == len(rows)
    res = cli("summary", out, cwd=tmp_path)
    assert res.returncode == 0 and f"between processes (--repeats; speedup max/min - 1 per row): {len(rows)} rows" in res.stdout
    res = cli("report", out, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "3 processes: ±" in (out / "report.html").read_text()
    # a later single run in the same folder leaves no repeats behind
    res = cli("op", "abs", "--dtypes", "float32", "--out", out, cwd=tmp_path)
    assert res.returncode == 0 and not (out / "repeats").exists()
    assert all(r.repeats is None for r in parse_record_log(out / "record.log").rows)


def test_op_repeats_stop_at_the_first_process_that_fails(cli, tmp_path):
    suite = tmp_path / "suite"
    (suite / "benchmark").mkdir(parents=True)
    (suite / "benchmark" / "__init__.py").write_text("")
    (suite / "benchmark" / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    for opt in ('--level', '--record', '--mode', '--warmup', '--iter', '--shape_file', '--output'):\n"
        "        parser.addoption(opt, default=None)\n"
        "    parser.addoption('--dtypes', action='append', default=None)\n")
    (suite / "benchmark" / "test_flaky.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.flaky2\n"
        "def test_flaky2():\n"
        "    p = os.environ['FLAKY_COUNT']\n"
        "    n = (len(open(p).read()) if os.path.exists(p) else 0) + 1\n"
        "    open(p, 'a').write('x')\n"
        "    assert n != 2, 'the second process fails'\n")
    (suite / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    ignore::pytest.PytestUnknownMarkWarning\n")
    out = tmp_path / "flaky2"
    counter = tmp_path / "count"
    res = cli("op", "flaky2", "--suite", suite, "--repeats", "4", "--out", out, cwd=tmp_path,
              env={"FLAKY_COUNT": str(counter)})
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr
    assert counter.read_text() == "xx"  # repeats 3 and 4 never ran
    assert sorted(p.name for p in (out / "repeats").iterdir()) == ["1", "2"]
    res_json = json.loads((out / "result.json").read_text())
    assert res_json["status"] == "failed" and res_json["repeats"] == {
        "requested": 4, "ran": 2, "passed": 1, "dir": "repeats", "outcomes": ["passed", "failed"]}
    assert "[opscreen] repeat 2/4 failed" in (out / "run.log").read_text()
    s = build_summary(out)
    assert s.ops[0].status == "failed"
    assert any("second process fails" in (f["reason"] or "") for f in s.ops[0].failures), s.ops[0].failures


def test_usage_error_for_bad_repeats_writes_nothing(cli, tmp_path):
    out = tmp_path / "abs"
    res = cli("op", "abs", "--repeats", "0", "--out", out, cwd=tmp_path)
    assert res.returncode == 2 and "--repeats 0" in res.stderr and not out.exists()
    res = cli("run", "--ops", "abs", "--repeats", "x", "--out", tmp_path / "run", "--plain", cwd=tmp_path)
    assert res.returncode == 2 and "--repeats 'x'" in res.stderr and not (tmp_path / "run").exists()


def invocations(op_dir: Path, op: str) -> list[int]:
    found = []
    for log in sorted((op_dir / "repeats").glob("*/run.log")):
        found += [int(n) for n in re.findall(rf"faults: {op} invocation (\d+)", log.read_text())]
    return found


def test_batch_repeats_survive_sigkill_and_resume(faults):
    """SIGKILL the runner while ops run their repeats; each resume reruns only ops
    without a .complete marker, from their first repeat. In the end every op has
    its repeats, each from the op's last run."""
    out = faults.tmp / "run"
    ops = ["ok_a", "ok_b", "ok_c", "ok_d", "flaky"]
    args = ["--ops", ",".join(ops), "--devices", "0,1", "--repeats", "2", "--timeout", "30", "--grace", "0.5"]
    env = {"FAULTS_OP_SLEEP": "0.6"}
    rng = random.Random(20261129)
    kills = 0
    for _ in range(12):
        kills += kill_after(faults, out, args, env, rng.uniform(0.5, 2.0))
        if kills >= 4:
            break
    assert kills >= 4, "the run finished before four kills"
    res = faults.run(out, *args, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = status_rows(out)
    assert set(rows) == set(ops) and all(r["status"] == "passed" for r in rows.values())
    for op in ops:
        op_dir = out / "ops" / op
        rep = result(out, op)["repeats"]
        assert rep["ran"] == 2 and rep["passed"] == 2, (op, rep)
        seen = invocations(op_dir, op)
        # the two repeats of the op's last run are its last two invocations
        assert seen == [faults.runs(op) - 1, faults.runs(op)], (op, seen, faults.runs(op))
    faults.assert_no_leftovers()


def test_resume_refuses_another_number_of_repeats(faults):
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--repeats", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    assert result(out, "ok_a")["repeats"]["ran"] == 2
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", "--repeats", "3")
    assert res.returncode == 2 and "measured with other settings" in res.stderr and "repeats" in res.stderr


def test_resume_refuses_other_timing_knobs(faults):
    """A resume measures the rest of the ops as the first session did: another
    OPSCREEN_* timing knob is refused in a usage error, nothing rerun; the CPU's
    wallclock timer records no timing method, so an older run of it resumes."""
    out = faults.tmp / "run"
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", env={"OPSCREEN_MAX_TIME": "0.05"})
    assert res.returncode == 0, res.stdout + res.stderr
    ident = json.loads((out / "run_identity.json").read_text())
    assert ident["caliber"]["timing"]["max_time_s"] == 0.05
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", env={"OPSCREEN_MAX_TIME": "0.2"})
    assert res.returncode == 2 and "timing knobs (OPSCREEN_* variables)" in res.stderr, res.stderr
    assert "'max_time_s': 0.05" in res.stderr and "'max_time_s': 0.2" in res.stderr
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", env={"OPSCREEN_MAX_TIME": "0.05"})
    assert res.returncode == 0, res.stdout + res.stderr  # the same knobs resume
    assert ident["caliber"]["timing_method"] is None  # the CPU's wallclock timer: its method never changed
    ident["caliber"].pop("timing_method")  # as written by an older opscreen
    (out / "run_identity.json").write_text(json.dumps(ident))
    res = faults.run(out, "--ops", "ok_a", "--devices", "0", env={"OPSCREEN_MAX_TIME": "0.05"})
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_graph_run_from_before_the_resting_timer_is_not_resumed(tmp_path, monkeypatch):
    from opscreen.backends import resolve
    from opscreen.batch.resume import refuse_other_timing as _refuse_other_timing

    monkeypatch.delenv("OPSCREEN_REST_RATIO", raising=False)
    cuda = resolve("cuda")
    with pytest.raises(UsageError, match="timing method: recorded 1, this opscreen measures with 3"):
        _refuse_other_timing(tmp_path, {"timing": {}}, cuda, "graph")
    with pytest.raises(UsageError, match="timing method: recorded 2, this opscreen measures with 3"):
        _refuse_other_timing(tmp_path, {"timing": {}, "timing_method": 2}, cuda, "graph")  # before settling
    _refuse_other_timing(tmp_path, {"timing": {}, "timing_method": 3}, cuda, "graph")  # the same: resumes
    _refuse_other_timing(tmp_path, {"timing": {}}, cuda, "direct")  # not the graph timer: its method is unchanged
    with pytest.raises(UsageError, match="timing knobs"):
        _refuse_other_timing(tmp_path, {"timing": {"rest_ratio": 0.0}, "timing_method": 3}, cuda, "graph")


def test_a_cpu_run_of_an_older_opscreen_resumes_only_as_recorded(tmp_path, monkeypatch):
    from opscreen.backends import resolve
    from opscreen.batch.resume import refuse_other_timing as _refuse_other_timing

    for key in ("OPSCREEN_TARGET_CI", "OPSCREEN_HOST_MALLOC", "OPSCREEN_REST_RATIO"):
        monkeypatch.delenv(key, raising=False)
    cpu, older = resolve("cpu"), {"timing": {"max_time_s": 0.1, "min_samples": 5}}
    with pytest.raises(UsageError, match=r"to measure the rest as recorded: OPSCREEN_HOST_MALLOC=system "
                                         r"OPSCREEN_TARGET_CI=0\); resuming would mix measurements: use another --out$"):
        _refuse_other_timing(tmp_path, older, cpu, "wallclock")
    monkeypatch.setenv("OPSCREEN_TARGET_CI", "0")
    monkeypatch.setenv("OPSCREEN_HOST_MALLOC", "system")
    _refuse_other_timing(tmp_path, older, cpu, "wallclock")  # knobs at their defaults measure as recorded
    monkeypatch.setenv("OPSCREEN_REST_RATIO", "0")  # a knob the run left at its default
    with pytest.raises(UsageError, match="as recorded: OPSCREEN_REST_RATIO=1\\); resuming"):
        _refuse_other_timing(tmp_path, older, cpu, "wallclock")
    monkeypatch.delenv("OPSCREEN_REST_RATIO")
    with pytest.raises(UsageError, match="timing knobs") as err:  # the run set a knob this one does not
        _refuse_other_timing(tmp_path, {"timing": {**older["timing"], "rest_ratio": 0.0}}, cpu, "wallclock")
    assert "as recorded" not in str(err.value)
    _refuse_other_timing(tmp_path, {"timing": {"rest_ratio": 1.0}, "timing_method": 3}, resolve("cuda"), "graph")


def test_aa_bench_counts_cases_within_the_recorded_spread():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from timing_aa import within_spread

    a = {"speedup": 1.0, "speedup_spread": 0.05}
    assert within_spread(a, {"speedup": 0.96, "speedup_spread": 0.01}) is True
    assert within_spread(a, {"speedup": 0.94, "speedup_spread": 0.01}) is False
    assert within_spread(dict(a, speedup_spread=None), {"speedup": 1.004, "speedup_spread": None}) is None
    assert within_spread({"speedup": 1.0, "speedup_spread": 0.0}, {"speedup": 1.004, "speedup_spread": 0.0}) is True  # the 0.5 % floor
    assert within_spread(None, a) is None


def test_aa_bench_keeps_a_shape_the_suite_lists_twice(tmp_path):
    """test_mm lists [4096,4096] twice; the bench's reader keeps both rows (the second
    as ``#2``) instead of letting the second overwrite the first, and reads each entry
    once when two log handlers wrote it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from timing_aa import read_record_log

    entry = {"op_name": "mm", "dtype": "torch.float16", "mode": "kernel", "level": "core", "result": [
        {"shape_detail": [[4096, 4096], [4096, 4096]], "latency_base": 0.18, "latency": 0.20, "speedup": 0.9},
        {"shape_detail": [[384, 384], [384, 384]], "latency_base": 0.003, "latency": 0.003, "speedup": 1.0},
        {"shape_detail": [[4096, 4096], [4096, 4096]], "latency_base": 0.19, "latency": 0.20, "speedup": 0.95},
    ]}  # fmt: skip
    body = json.dumps(entry)
    rec = tmp_path / "record.log"
    rec.write_text(f"[INFO] {body}\nINFO     root:attri_util.py:94 {body}\n")
    cases = read_record_log(rec)
    big = "[[4096,4096],[4096,4096]]"
    assert sorted(k[2] for k in cases) == sorted([big, big + "#2", "[[384,384],[384,384]]"])
    assert cases[("mm", "torch.float16", big)]["speedup"] == 0.9
    assert cases[("mm", "torch.float16", big + "#2")]["speedup"] == 0.95


def test_a_stop_between_repeats_leaves_the_op_interrupted(tmp_path):
    """The batch runner's stop event set while repeat 1 runs: repeat 2 never starts and
    the op is 'interrupted' (a resume runs it again), not 'passed' on one process."""
    import threading

    from opscreen.op.repeats import run_repeated
    from opscreen.op.request import OpOutcome

    stop = threading.Event()
    ran = []

    def run_once(req, out_dir, *, stop=None, echo=None):
        out_dir.mkdir(parents=True)
        (out_dir / "record.log").write_text(FIXTURE_RECORD.read_text())
        ran.append(out_dir.name)
        stop.set()  # the runner is told to stop while this repeat runs
        return OpOutcome("passed", 0, 0, 1.5, None, out_dir, "graph")

    class Req:
        op, repeats, device = "abs", 3, 0
        target = type("T", (), {"describe": staticmethod(lambda: "benchmark/test_abs.py -m abs")})()
        backend = type("B", (), {"name": "cuda"})()

    out = run_repeated(Req(), tmp_path / "abs", run_once, stop=stop)
    assert ran == ["1"]
    assert out.status == "interrupted" and out.exit_code == 130 and "1 of 3" in out.error
    assert out.repeats["ran"] == 1 and out.repeats["requested"] == 3
    assert json.loads((tmp_path / "abs" / "result.json").read_text())["status"] == "interrupted"
    # what the one process measured is still merged
    assert all(r.repeats == 1 for r in parse_record_log(tmp_path / "abs" / "record.log").rows)

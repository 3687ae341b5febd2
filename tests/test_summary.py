"""opscreen summary: summary.csv / summary.json from run directories and op directories."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from opscreen.cli import main
from opscreen.errors import UsageError
from opscreen.results.summary import COLUMNS, SUMMARY_VERSION, build_summary, load_summary, write_summary
from synth import make_run

FIX = Path(__file__).parent / "fixtures" / "flaggems-h200"

STATUSES = {"op0001": "failed", "op0002": "timeout", "op0003": "device_fatal", "op0004": "crashed"}


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    ops = make_run(d, n_ops=10, seed=5, statuses={**STATUSES, **{f"op{i:04d}": "passed" for i in (0, 5, 6, 7, 8, 9)}})
    return d, ops


def _csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_summary_of_a_run(run_dir, capsys):
    d, ops = run_dir
    assert main(["summary", str(d)]) == 0
    out = capsys.readouterr().out
    rows = _csv(d / "summary.csv")
    assert list(rows[0].keys()) == COLUMNS
    assert len(rows) == sum(len(o.rows) for o in ops)
    by_op = {}
    for r in rows:
        by_op.setdefault(r["op"], []).append(r)
    assert set(by_op) == {o.name for o in ops if o.rows}
    for o in ops:
        got = by_op.get(o.name, [])
        assert len(got) == len(o.rows)
        for want, r in zip(o.rows, got):
            assert float(r["torch_ms"]) == want["torch_ms"] and float(r["lib_ms"]) == want["lib_ms"]
            assert r["dtype"] == want["dtype"] and r["status"] == "ok" and r["op_status"] == o.status
            assert r["backend"] == "cuda" and r["device_name"] == "NVIDIA H200"
            assert r["truncated"] == ("true" if o.status in ("timeout", "device_fatal", "crashed") else "false")
            assert r["source"] == "record.log" and r["lib_timer"].startswith("graph")
            assert float(r["lib_noise_pct"]) < 1 and int(r["lib_samples"]) >= 10  # percent: the record's rsd x 100
            # the median's interval: the record's ci (relative) times the latency, in ms
            assert float(r["lib_ci_ms"]) == pytest.approx(float(r["lib_noise_pct"]) / 300 * want["lib_ms"], rel=1e-2)
            ident = json.loads((d / "run_identity.json").read_text())
            assert (r["run"], r["run_started_at"], r["suite_commit"]) == (
                d.name, ident["started_at"], ident["caliber"]["suite_commit"]) and r["suite_commit"] and r["run_started_at"]
    # text output: counts by status, per-dtype and overall geometric means
    assert "ops:  10  crashed 1, device_fatal 1, failed 1, passed 6, timeout 1" in out
    for dt in ("float16", "float32", "bfloat16", "overall"):
        assert f"  {dt}" in out
    js = json.loads((d / "summary.json").read_text())
    assert js["schema"] == f"opscreen.summary/{SUMMARY_VERSION}" and "version" not in js and "kind" not in js
    assert js["counts"]["ops"] == {"crashed": 1, "device_fatal": 1, "failed": 1, "passed": 6, "timeout": 1}
    assert js["counts"]["rows"] == {"ok": len(rows)}
    assert js["caliber"]["timer"] == "graph" and js["caliber"]["use_flagtune"] == "0"
    assert set(js["geomean"]["by_dtype"]) == {"float16", "float32", "bfloat16"}
    assert len(js["rows"]) == len(rows) and js["columns"] == COLUMNS
    failed = next(o for o in js["ops"] if o["op"] == "op0001")
    assert failed["run_log"] == "ops/op0001/run.log" and "CUDA error" in failed["error"]
    assert failed["failures"][0]["node"] == "benchmark/test_op0001.py::test_op0001"


def test_idempotent_and_atomic(run_dir):
    d, _ = run_dir
    assert main(["summary", str(d)]) == 0
    first = ((d / "summary.csv").read_bytes(), (d / "summary.json").read_bytes())
    assert main(["summary", str(d)]) == 0
    assert ((d / "summary.csv").read_bytes(), (d / "summary.json").read_bytes()) == first
    # a copy elsewhere summarises to the same bytes (no absolute paths, no clocks)
    other = d.parent / "elsewhere"
    shutil.copytree(d, other)
    (other / "summary.csv").unlink()
    write_summary(build_summary(other))
    # the same bytes but for the run column, which names the copy's folder: the run's name
    head, _, body = first[0].partition(b"\n")
    want = head + b"\n" + body.replace(b"," + d.name.encode() + b",", b",elsewhere,")
    assert (other / "summary.csv").read_bytes() == want and want != first[0]
    ri = COLUMNS.index("run")
    moved = json.loads((other / "summary.json").read_text())["rows"]
    assert {r[ri] for r in moved} == {"elsewhere"}
    assert [r[:ri] + r[ri + 1:] for r in moved] == [r[:ri] + r[ri + 1:] for r in json.loads(first[1])["rows"]]
    assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]


def test_ops_status_csv_wins_and_lists_ops_without_dirs(run_dir):
    d, _ = run_dir
    with open(d / "ops_status.csv", "a") as fh:
        fh.write("ghost,skipped,0,,,cuda,,graph,not collected,\n")
    text = (d / "ops_status.csv").read_text().replace("op0009,passed,1", "op0009,dismissed,2")
    (d / "ops_status.csv").write_text(text)
    s = build_summary(d)
    ops = {o.op: o for o in s.ops}
    assert ops["ghost"].status == "skipped" and ops["ghost"].rows == 0
    assert ops["op0009"].status == "dismissed" and ops["op0009"].attempts == 2
    assert s.op_counts()["skipped"] == 1


def test_record_preferred_run_log_fills_and_falls_back(tmp_path):
    run = tmp_path / "run"
    # abs: the upstream record (no opscreen fields) + an opscreen run.log of the same run
    a = run / "ops" / "abs"
    a.mkdir(parents=True)
    shutil.copy(FIX / "abs_record.log", a / "record.log")
    log = (FIX / "abs_kernel_default_warm.out").read_text()
    log = log.replace("TFLOPS", "TFLOPS    Timer    Samples    Noise(%)").replace(" [torch.Size", " graph 10|20 0.50|0.70 [torch.Size")
    (a / "run.log").write_text(log)
    (a / "result.json").write_text(json.dumps({"schema": 1, "op": "abs", "status": "passed", "exit_code": 0}))
    # add: run.log only (FlagGems' own format)
    b = run / "ops" / "add"
    b.mkdir(parents=True)
    shutil.copy(FIX / "add_cudagraph.out", b / "run.log")
    # mm: killed by a timeout
    m = run / "ops" / "mm"
    m.mkdir(parents=True)
    shutil.copy(FIX / "mm_kernel_w100_timeout.out", m / "run.log")
    (m / "result.json").write_text(json.dumps({"schema": 1, "op": "mm", "status": "timeout", "exit_code": 3, "error": "timed out after 150 s"}))
    s = build_summary(run)
    rows = list(s.row_dicts())
    abs0 = next(r for r in rows if r["op"] == "abs")
    assert abs0["torch_ms"] == 1.0043200254440308 and abs0["speedup"] == 0.9437395021076018  # record.log
    assert (abs0["lib_timer"], abs0["lib_samples"], abs0["lib_noise_pct"]) == ("graph", 20, 0.7)  # run.log's 0.70 %
    add = [r for r in rows if r["op"] == "add"]
    assert len(add) == 20 and add[1]["torch_ms"] == 0.001111 and add[1]["source"] == "run.log"
    mm = [r for r in rows if r["op"] == "mm"]
    assert len(mm) == 5 and all(r["truncated"] and r["op_status"] == "timeout" for r in mm)
    ops = {o.op: o for o in s.ops}
    assert ops["add"].status == "incomplete"  # no result.json, no ops_status.csv
    assert ops["mm"].truncated and ops["mm"].error == "timed out after 150 s"


def test_single_op_dir(tmp_path, capsys):
    d = tmp_path / "opdir"
    d.mkdir()
    shutil.copy(FIX / "abs_cudagraph.out", d / "run.log")
    (d / "result.json").write_text(json.dumps({"schema": 1, "op": "abs", "status": "passed", "exit_code": 0, "backend": "cuda", "device": 0}))
    assert main(["summary", str(d)]) == 0
    rows = _csv(d / "summary.csv")
    assert len(rows) == 15 and {r["op"] for r in rows} == {"abs"}
    r = next(r for r in rows if r["dtype"] == "float16" and r["shape"] == "[[64,64]]")
    assert (r["torch_ms"], r["lib_ms"], r["speedup"], r["tflops"]) == ("0.001086", "0.001053", "1.031", "0.004")
    assert (r["backend"], r["device"], r["op_status"]) == ("cuda", "0", "passed")
    assert "op opdir" in capsys.readouterr().out


def test_usage_errors(tmp_path, capsys):
    assert main(["summary", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["summary", str(tmp_path / "empty")]) == 2
    assert "opscreen run" in capsys.readouterr().err


def test_loader_rejects_unknown_versions(run_dir):
    d, _ = run_dir
    write_summary(build_summary(d))
    s = load_summary(d)
    assert len(s.rows) > 0 and s.caliber["timer"] == "graph"
    js = json.loads((d / "summary.json").read_text())
    js["schema"] = "opscreen.summary/99"
    (d / "summary.json").write_text(json.dumps(js))
    with pytest.raises(UsageError, match="schema 99"):
        load_summary(d)


def test_cli_subprocess(run_dir, cli):
    d, _ = run_dir
    p = cli("summary", d, "--json")
    assert p.returncode == 0, p.stderr
    head = json.loads(p.stdout)
    assert head["schema"] == f"opscreen.summary/{SUMMARY_VERSION}" and "rows" not in head


# -- the test column: the test function that measured each row ---------------------------

def test_test_column_from_real_flaggems_record_files(tmp_path):
    # FlagGems' record log names no test (its entries hold op_name, dtype, mode, level,
    # result): the column stays empty, and the rows are still keyed as before.
    a = tmp_path / "run" / "ops" / "abs"
    a.mkdir(parents=True)
    shutil.copy(FIX / "abs_record.log", a / "record.log")
    # FlagGems' --record json names it per op (test_case): every row gets its function.
    b = tmp_path / "run" / "ops" / "add"
    b.mkdir(parents=True)
    shutil.copy(FIX / "add_result.json", b / "record.json")
    # The same real record log as opscreen's child writes it: each entry with test_case.
    c = tmp_path / "run" / "ops" / "abs_"
    c.mkdir(parents=True)
    lines = []
    for line in (FIX / "abs_record.log").read_text().splitlines():
        if line.startswith("[INFO] {"):
            entry = json.loads(line[len("[INFO] "):])
            entry.update(op_name="abs_", test_case="benchmark/test_abs.py::test_abs_inplace")
            line = "[INFO] " + json.dumps(entry)
        lines.append(line)
    (c / "record.log").write_text("\n".join(lines) + "\n")
    s = build_summary(tmp_path / "run")
    by = {}
    for r in s.row_dicts():
        by.setdefault(r["op"], []).append(r)
    assert len(by["abs"]) == 15 and {r["test"] for r in by["abs"]} == {""}
    assert len(by["add"]) == 20 and {r["test"] for r in by["add"]} == {"test_add"}
    assert len(by["abs_"]) == 15 and {r["test"] for r in by["abs_"]} == {"test_abs_inplace"}
    assert {r["variant"] for rows in by.values() for r in rows} == {""}


def test_test_column_from_a_fresh_sample_suite_run(tmp_path, cli):
    fast = {"OPSCREEN_MAX_TIME": "0.02", "OPSCREEN_MIN_SAMPLES": "3", "OPSCREEN_MAX_SAMPLES": "10",
            "OPSCREEN_WARMUP_CALLS": "1"}
    out = tmp_path / "run"
    res = cli("run", "--backend", "cpu", "--devices", "0", "--ops", "abs_,mm", "--dtypes", "float32",
              "--out", out, "--plain", env=fast, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    res = cli("summary", out)
    assert res.returncode == 0, res.stderr
    rows = _csv(out / "summary.csv")
    assert {r["op"] for r in rows} == {"abs_", "mm"}
    for r in rows:
        assert r["test"] == {"abs_": "test_abs_inplace", "mm": "test_mm"}[r["op"]], r
    # the sample suite's mm lists one shape twice: the variant tells the two rows apart
    assert {r["variant"] for r in rows} <= {"", "#2"}


def test_version_1_summary_still_loads_and_joins(run_dir, tmp_path, capsys):
    d, _ = run_dir
    s = build_summary(d)
    assert {r["test"] for r in s.row_dicts() if r["op"] == "op0000"} == {"test_op0000"}
    write_summary(s)
    js = json.loads((d / "summary.json").read_text())
    # as version 1 wrote it: no variant column, the variant in test, no test names, noise as
    # fractions (rsd), no interval, no run columns, the version in "version"
    keep = [c for c in js["columns"] if c not in ("torch_ci_ms", "lib_ci_ms", "run", "run_started_at", "suite_commit")]
    js["rows"] = [[dict(zip(js["columns"], r))[c] for c in keep] for r in js["rows"]]
    js["columns"] = keep
    for side in ("torch", "lib"):
        i = keep.index(f"{side}_noise_pct")
        keep[i] = f"{side}_rsd"
        for r in js["rows"]:
            r[i] = None if r[i] is None else r[i] / 100
    iv, it = js["columns"].index("variant"), js["columns"].index("test")
    js = {"version": 1, "kind": "opscreen.summary", **{k: v for k, v in js.items() if k != "schema"}}
    js["columns"] = [c for c in js["columns"] if c != "variant"]
    js["rows"] = [[x for i, x in enumerate(r[:it] + [r[iv]] + r[it + 1:]) if i != iv] for r in js["rows"]]
    old = tmp_path / "old"
    old.mkdir()
    (old / "summary.json").write_text(json.dumps(js))
    loaded = load_summary(old)
    assert [r["variant"] for r in loaded.row_dicts()] == [r["variant"] for r in s.row_dicts()]
    assert {r["test"] for r in loaded.row_dicts()} == {""}
    # a baseline summarized before the tests were named joins row for row with a new run
    assert main(["compare", str(old / "summary.json"), str(d), "--out", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    n = sum(1 for r in s.row_dicts())
    assert f"rows: {n}; " in out and "gone 0, new 0" in out


def test_where_the_measurement_went_names_the_graph_timers_parts_only_when_it_ran():
    from opscreen.results.summary import format_time_stats, timer_stats

    class Op:
        def __init__(self, measurement, timer):
            self.phases = {"measurement_s": measurement, "timer": timer}

    graph = {"timer_s": 6.0, "warmup_s": 1.0, "capture_s": 0.5, "samples_s": 3.0, "other_s": 1.5, "measurements": 30}
    # (a result written before first_s existed: its first calls are inside warmup_s, and none is printed)
    tm = timer_stats([Op(5.0, graph), Op(3.0, None), Op(3.0, {**graph, "measurements": 2})])
    assert tm["ops"] == 2 and tm["measurement_s"] == 8.0 and tm["timer_s"] == 12.0 and tm["suite_s"] == 0.0
    tm = timer_stats([Op(8.0, graph)])
    assert tm["suite_s"] == 2.0 and tm["measurements"] == 30
    base = {"ops": 1, "with_phases": 1, "wall_s": 10.0, "isolation": {}, "slowest": [{"op": "a", "wall_s": 10.0}],
            "phases": {k: {"s": 1.0, "share": 0.1} for k in ("start_imports_s", "collection_s", "measurement_s",
                                                              "teardown_s", "other")}}
    line = [x for x in format_time_stats({**base, "timers": tm}) if isinstance(x, str) and x.startswith("of the")][0]
    assert line == ("of the measurement (1 ops, 8.0 s): opscreen's timers 6.0 s (75 %; 30 measurements: warm-up "
                    "1.0 s, graph capture 0.5 s, samples 3.0 s, other 1.5 s), the suite's own code 2.0 s (25 %: "
                    "inputs, references, its loops)")
    first = timer_stats([Op(8.0, {**graph, "first_s": 0.4, "warmup_s": 0.6})])
    line = [x for x in format_time_stats({**base, "timers": first}) if isinstance(x, str) and x.startswith("of the")][0]
    assert "30 measurements: first calls 0.4 s (compile, autotune, load), warm-up 0.6 s, graph capture" in line
    prof = timer_stats([Op(8.0, {**graph, "samples_s": 1.0, "host_s": 2.0})])
    line = [x for x in format_time_stats({**base, "timers": prof}) if isinstance(x, str) and x.startswith("of the")][0]
    assert "samples 1.0 s, the profiler's host latency 2.0 s, other 1.5 s" in line
    direct = timer_stats([Op(8.0, {**graph, "warmup_s": 0.0, "capture_s": 0.0, "samples_s": 0.0, "other_s": 6.0})])
    line = [x for x in format_time_stats({**base, "timers": direct}) if isinstance(x, str) and x.startswith("of the")][0]
    assert "warm-up" not in line and "6.0 s (75 %; 30 measurements)" in line  # no parts to tell
    assert timer_stats([Op(8.0, None)]) is None

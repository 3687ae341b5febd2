"""opscreen compare: caliber check, noise-aware verdicts, compare.csv, --fail-on."""

from __future__ import annotations

import csv
import json
import math
import os

import pytest

from opscreen.cli import main
from opscreen.errors import UsageError
from opscreen.results.compare import (
    Verdict,
    _moved_list,
    aa_floors,
    check_caliber,
    compare_summaries,
    format_comparison,
    parse_allow,
)
from opscreen.results.summary import COLUMNS, OpSummary, Summary, build_summary
from synth import DEFAULT_CALIBER, make_run

N_OPS = 8


def _slower(ops, factor, dtype=None):
    def perturb(op, dt, si, lib_ms):
        if op in ops and (dtype is None or dt == dtype):
            return lib_ms * factor
        return lib_ms

    return perturb


def _passing(n=N_OPS):
    return {f"op{i:04d}": "passed" for i in range(n)}


@pytest.fixture
def runs(tmp_path):
    def make(name, **kw):
        d = tmp_path / name
        kw.setdefault("statuses", _passing())
        make_run(d, n_ops=N_OPS, seed=11, **kw)
        return d

    return make


def _tree(root):
    """Every file under root with its size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_refused_compare_writes_nothing(runs, tmp_path, capsys):
    a, b = runs("a"), runs("b", caliber={"timer": "direct"})
    before = _tree(tmp_path)
    assert not (a / "summary.json").exists() and not (b / "summary.json").exists()
    assert main(["compare", str(a), str(b), "--rebuild"]) == 2
    assert main(["compare", str(a), str(tmp_path / "no_such_run")]) == 2  # B unusable: A's summary not made
    assert main(["report", str(b), "--against", str(a)]) == 2
    assert main(["report", str(b), "--against", str(tmp_path / "no_such_run")]) == 2
    assert _tree(tmp_path) == before
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--allow-mismatch", "timer"]) == 0
    assert (a / "summary.json").is_file() and (b / "summary.json").is_file() and (b / "compare.csv").is_file()


def _csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_same_runs_compare_equal(runs, capsys):
    a, b = runs("a"), runs("b")
    assert main(["compare", str(a), str(b), "--fail-on", "1", "--no-floors"]) == 0
    out = capsys.readouterr().out
    assert "slower 0, faster 0" in out
    assert "axis: none of" in out
    rows = _csv(b / "compare.csv")
    assert rows and {r["verdict"] for r in rows} == {"same"}
    assert (a / "summary.json").is_file() and (b / "summary.json").is_file()  # made when missing
    # with the floors (the shipped H200 table: the runs say NVIDIA H200): nothing called either;
    # rows of a timer the table has no cell for (fallback rows) take the conservative default
    assert main(["compare", str(a), str(b), "--fail-on", "1"]) == 0
    out = capsys.readouterr().out
    assert "slower 0, faster 0" in out and "floors: NVIDIA H200" in out
    rows = _csv(b / "compare.csv")
    assert {r["verdict"] for r in rows} <= {"same", "unresolved"}
    assert all(r["basis"] == "floors-default" for r in rows if r["verdict"] == "unresolved")
    assert any(r["basis"] == "floors" and r["floors"].startswith("rerun/graph/") for r in rows)


@pytest.mark.parametrize(
    "field,value",
    [("use_flagtune", "1"), ("timer", "direct"), ("shape_mode", "curated"), ("level", "comprehensive"),
     ("isolation", "worker")],
)
def test_caliber_mismatch_is_refused(runs, capsys, field, value):
    a, b = runs("a"), runs("b", caliber={field: value})
    before = _tree(a.parent)
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "refusing to compare" in err
    assert f"{field}: A {DEFAULT_CALIBER[field]}, B {value}" in err
    assert f"--allow-mismatch {field}" in err
    assert _tree(a.parent) == before  # a refusal writes nothing: no compare.csv, no summaries
    # named, the difference becomes the axis
    assert main(["compare", str(a), str(b), "--allow-mismatch", field]) == 0
    out = capsys.readouterr().out
    assert f"{field} {DEFAULT_CALIBER[field]} -> {value}" in out
    assert (b / "compare.csv").is_file()


def _older_identity(run, settings_isolation):
    """Make ``run`` look written before the caliber named its isolation (the run's settings
    did, since warm workers exist)."""
    path = run / "run_identity.json"
    ident = json.loads(path.read_text())
    del ident["caliber"]["isolation"]
    if settings_isolation:
        ident["settings"] = {"isolation": settings_isolation}
    path.write_text(json.dumps(ident))


def test_a_caliber_without_isolation_takes_the_runs_settings_else_op(runs, capsys):
    a, b = runs("a"), runs("b")
    _older_identity(a, "worker")
    assert main(["compare", str(a), str(b)]) == 2
    assert "isolation: A worker, B op" in capsys.readouterr().err
    _older_identity(b, None)  # before warm workers: every run was a fresh process per op
    assert main(["compare", str(b), str(runs("c"))]) == 0
    assert "isolation op" in capsys.readouterr().out
    # and the summary.json it wrote keeps what it filled in
    assert json.loads((b / "summary.json").read_text())["caliber"]["isolation"] == "op"


def test_triton_cache_autotuning_must_match_unless_a_run_did_not_record_it(runs, capsys):
    a, b = runs("a"), runs("b", caliber={"triton_cache_autotuning": "1"})
    assert main(["compare", str(a), str(b)]) == 2
    assert "triton_cache_autotuning: A 0, B 1" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--allow-mismatch", "triton_cache_autotuning"]) == 0
    assert "triton_cache_autotuning 0 -> 1" in capsys.readouterr().out
    # a run of an opscreen that did not record it: what it ran with is unknown, so it is
    # reported, not refused
    path = a / "run_identity.json"
    ident = json.loads(path.read_text())
    del ident["caliber"]["triton_cache_autotuning"]
    path.write_text(json.dumps(ident))
    assert main(["compare", str(a), str(b), "--rebuild"]) == 0
    assert "also differs: triton_cache_autotuning: A (unknown), B 1" in capsys.readouterr().out


def test_an_op_identity_without_the_field_takes_what_its_child_found_at_start():
    from opscreen.results.summary import caliber_of

    cal = {k: v for k, v in DEFAULT_CALIBER.items() if k != "triton_cache_autotuning"}
    on = caliber_of({"caliber": cal, "tuning_caches_at_start": {"triton_cache_autotuning": True}})
    assert on["triton_cache_autotuning"] == "1"
    assert caliber_of({"caliber": cal, "tuning_caches_at_start": {"triton_cache_autotuning": False}})[
        "triton_cache_autotuning"] == "0"
    assert "triton_cache_autotuning" not in caliber_of({"caliber": cal})  # a run identity of that time
    assert caliber_of({"caliber": {**cal, "triton_cache_autotuning": "0"},
                       "tuning_caches_at_start": {"triton_cache_autotuning": True}})["triton_cache_autotuning"] == "0"


def test_small_kernels_called_changed_on_noise_alone_get_a_note(runs, capsys):
    """Rows under 10 us that moved 3 %: called slower on their samples' noise, and the report
    says how many of the calls are such rows and how to widen their bands; a rerun with no
    move prints no note, and neither does a move of larger kernels only."""
    a = runs("a")
    moved = runs("moved", perturb=lambda op, dt, si, lib: lib * 1.03 if lib < 0.008 else lib)
    big = runs("big", perturb=lambda op, dt, si, lib: lib * 1.03 if lib > 0.2 else lib)
    assert main(["compare", str(a), str(runs("same")), "--no-floors"]) == 0
    assert "small kernels:" not in capsys.readouterr().out
    assert main(["compare", str(a), str(big), "--no-floors"]) == 0
    out = capsys.readouterr().out
    assert "small kernels:" not in out and "slower 0" not in out
    assert main(["compare", str(a), str(moved), "--no-floors"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("small kernels:"))
    slower = int(out.split("slower ", 1)[1].split(",")[0])
    small = int(line.split()[2])
    assert 0 < small <= slower and f"of the {slower} rows called faster or slower" in line
    assert "floors" in line and "--repeats 3" in line


def test_several_mismatches_need_each_named(runs, capsys):
    a, b = runs("a"), runs("b", caliber={"use_flagtune": "1", "timer": "direct"})
    assert main(["compare", str(a), str(b), "--allow-mismatch", "timer"]) == 2
    err = capsys.readouterr().err
    assert "use_flagtune" in err and "timer: A" not in err
    assert main(["compare", str(a), str(b), "--allow-mismatch", "timer,use_flagtune"]) == 0
    assert main(["compare", str(a), str(b), "--allow-mismatch", "bogus"]) == 2
    assert "bogus" in capsys.readouterr().err


def test_axis_fields_may_differ(runs, capsys):
    a = runs("a")
    b = runs("b", caliber={"suite_commit": "deadbeef", "device_name": "AMD Instinct MI300X", "backend": "rocm", "vendor": "amd"})
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "suite_commit ed2508bcb5a03000e9774734201d840ba362cd11 -> deadbeef" in out
    assert "device_name NVIDIA H200 -> AMD Instinct MI300X" in out
    assert "backend cuda -> rocm" in out and "vendor nvidia -> amd" in out


def test_dtypes_difference_is_reported_and_rows_join_where_both_have_them(runs, capsys):
    a = runs("a", caliber={"dtypes": ["float16", "float32"]}, dtypes=("float16", "float32"))
    b = runs("b", caliber={"dtypes": ["float16"]}, dtypes=("float16",))
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "dtypes differ: A float16,float32, B float16" in out
    rows = _csv(b / "compare.csv")
    assert {r["dtype"] for r in rows if r["verdict"] == "same"} == {"float16"}
    assert {r["dtype"] for r in rows if r["verdict"] == "gone"} == {"float32"}


def test_regression_fails_on_threshold(runs, capsys, tmp_path):
    a = runs("a")
    b = runs("b", perturb=_slower({"op0003"}, 1.25, "float16"))
    out_csv = tmp_path / "cmp.csv"
    assert main(["compare", str(a), str(b), "--fail-on", "10", "--out", str(out_csv)]) == 1
    out = capsys.readouterr().out
    assert "top regressions" in out and "op0003" in out and "-20.0%" in out
    assert "FAIL:" in out
    rows = _csv(out_csv)
    slow = [r for r in rows if r["verdict"] == "slower"]
    assert slow and {r["op"] for r in slow} == {"op0003"} and {r["dtype"] for r in slow} == {"float16"}
    assert rows[0]["verdict"] == "slower"  # regressions first
    assert float(slow[0]["change_pct"]) == pytest.approx(-20.0, abs=0.01)
    assert main(["compare", str(a), str(b), "--fail-on", "25"]) == 0  # a 20% regression passes a 25% gate
    assert main(["compare", str(a), str(b)]) == 0  # no gate: report only


def test_improvement_and_per_op_geomean(runs, capsys):
    a = runs("a")
    b = runs("b", perturb=_slower({"op0002"}, 0.5))
    assert main(["compare", str(a), str(b), "--fail-on", "5"]) == 0
    out = capsys.readouterr().out
    assert "top improvements" in out and "+100.0%" in out
    per_op = out[out.index("per-op geometric mean"):]
    line = next(l for l in per_op.splitlines() if l.strip().startswith("op0002"))
    assert line.split()[:2] == ["op0002", "2.000"]


def test_broken_op_fails_the_gate(runs, capsys):
    a = runs("a")
    b = runs("b", statuses={**_passing(), "op0004": "timeout"})
    assert main(["compare", str(a), str(b), "--fail-on", "50"]) == 1
    out = capsys.readouterr().out
    assert "broken in B" in out and "op0004" in out and "timeout" in out


def _summary(rows, caliber=None, name="x"):
    full = []
    for r in rows:
        d = dict.fromkeys(COLUMNS)
        d.update(op="op", test="", dtype="float16", status="ok", op_status="passed")
        d.update(r)
        full.append([d[c] for c in COLUMNS])
    ops = [OpSummary(op=o, status="passed") for o in sorted({r[0] for r in full})]
    return Summary(kind="run", name=name, identity={}, caliber=caliber or {}, ops=ops, rows=full)


def _one(a_row, b_row, **kw):
    a = _summary([{"shape": "[1]", **a_row}])
    b = _summary([{"shape": "[1]", **b_row}])
    c = compare_summaries(a, b, **kw)
    assert len(c.rows) == 1
    return c.rows[0]


def test_noise_aware_verdicts():
    # 4% slower but each speedup carries ~4% noise: inside 2 x sqrt(noise_a^2 + noise_b^2) -> same
    # (with --max-band above that 12% band; at the default 5% the row is unresolved)
    wide = ({"speedup": 1.0, "torch_noise_pct": 3.0, "lib_noise_pct": 3.0}, {"speedup": 0.96, "torch_noise_pct": 3.0, "lib_noise_pct": 3.0})
    r = _one(*wide, max_band=0.2, table=False)
    assert r.verdict == Verdict.SAME and r.basis == "samples" and r.band == pytest.approx(2 * 0.06, rel=1e-6)
    assert _one(*wide, table=False).verdict == Verdict.UNRESOLVED  # 4 % + its 12 % band reach past the 5 % margin
    # 2% slower with 0.1% noise: a real change, although the 3% threshold would call it same
    r = _one({"speedup": 1.0, "torch_noise_pct": 0.1, "lib_noise_pct": 0.1}, {"speedup": 0.98, "torch_noise_pct": 0.1, "lib_noise_pct": 0.1},
             table=False)
    assert r.verdict == Verdict.SLOWER and r.change == pytest.approx(-0.02)
    # tiny noise: the 1 % minimum practical change keeps a 0.3 % change "same", beyond its band as it is
    r = _one({"speedup": 1.0, "torch_noise_pct": 0.01, "lib_noise_pct": 0.01}, {"speedup": 1.003, "torch_noise_pct": 0.01, "lib_noise_pct": 0.01},
             table=False)
    assert r.verdict == Verdict.SAME and r.band < 0.003 < 0.01
    # no noise on one side: the relative threshold decides
    r = _one({"speedup": 1.0}, {"speedup": 0.985, "torch_noise_pct": 0.1, "lib_noise_pct": 0.1}, table=False)
    assert r.verdict == Verdict.SAME and r.basis == "threshold"  # 1.5 % +- 3 % lies within the 5 % margin
    r = _one({"speedup": 1.0}, {"speedup": 0.96}, table=False)
    assert r.verdict == Verdict.SLOWER
    r = _one({"speedup": 1.0}, {"speedup": 0.98}, threshold=0.01, table=False)
    assert r.verdict == Verdict.SLOWER
    r = _one({"speedup": 1.0}, {"speedup": 1.05}, table=False)
    assert r.verdict == Verdict.FASTER and r.change == pytest.approx(0.05)
    # k is a knob
    r = _one({"speedup": 1.0, "torch_noise_pct": 1.0, "lib_noise_pct": 0.0}, {"speedup": 0.97, "torch_noise_pct": 1.0, "lib_noise_pct": 0.0}, k=1.0,
             table=False)
    assert r.verdict == Verdict.SLOWER
    # lib_ms metric uses the library's noise only and latency ratio A/B
    r = _one({"lib_ms": 1.0, "speedup": 1.0, "lib_noise_pct": 0.1}, {"lib_ms": 1.1, "speedup": 1.0, "lib_noise_pct": 0.1},
             metric="lib_ms", table=False)
    assert r.verdict == Verdict.SLOWER and r.change == pytest.approx(1 / 1.1 - 1)
    # the same rows with no floors table for their device: the conservative default widens the bands, and says so
    g = {"torch_timer": "graph", "lib_timer": "graph", "torch_noise_pct": 0.1, "lib_noise_pct": 0.1, "torch_ms": 0.1}
    # (graph >= 10 us: rms 1.5 % of 10 ops, so a call needs 3.25 x 1.5 = 4.9 %, and same needs the 90 %
    # interval, 3 % ± 1.833 x 1.5 %, inside the 5 % margin: it is not)
    r = _one({**g, "speedup": 1.0, "lib_ms": 0.1}, {**g, "speedup": 0.97, "lib_ms": 0.1 / 0.97})
    assert r.verdict == Verdict.UNRESOLVED and r.basis == "floors-default" and r.floors == "rerun/graph/>=10us"


def _aa_report(path, worst: dict):
    ops = {op: {"group": "main", "speedup_delta": {"n": 10, "median": w / 4, "p90": w / 2, "max": w}}
           for op, w in worst.items()}
    path.write_text(json.dumps({"schema": "opscreen.bench.timing_aa/1", "ops": ops}))
    return path


def test_aa_floor_keeps_between_process_drift_same(tmp_path):
    floors = aa_floors([_aa_report(tmp_path / "aa1.json", {"op": 0.05, "other": 0.5}),
                        _aa_report(tmp_path / "aa2.json", {"op": 0.08})])
    assert floors["op"] == pytest.approx(math.log1p(0.08))  # the largest over all reports
    quiet = {"torch_noise_pct": 0.02, "lib_noise_pct": 0.02}
    # 6% slower with 0.02% noise per run: a regression by the samples alone ...
    r = _one({"speedup": 1.0, **quiet}, {"speedup": 0.94, **quiet}, table=False)
    assert r.verdict == Verdict.SLOWER
    # ... but within the 8% this op drifted between two identical processes: not called; and
    # with the 5 % margin its interval (6.2 % +- 7.7 %) is too wide to call it same
    assert _one({"speedup": 1.0, **quiet}, {"speedup": 0.94, **quiet}, floors=floors, table=False).verdict == Verdict.UNRESOLVED
    r = _one({"speedup": 1.0, **quiet}, {"speedup": 0.94, **quiet}, floors=floors, max_band=0.15, table=False)
    assert r.verdict == Verdict.SAME and r.basis == "aa" and r.band == pytest.approx(math.log1p(0.08))
    r = _one({"speedup": 1.0, **quiet}, {"speedup": 0.90, **quiet}, floors=floors, max_band=0.1, table=False)
    assert r.verdict == Verdict.SLOWER
    # rows without noise: the floor widens the threshold too; ops the A/A lacks keep theirs
    r = _one({"speedup": 1.0}, {"speedup": 0.94}, floors=floors, max_band=0.15, table=False)
    assert r.verdict == Verdict.SAME and r.basis == "aa"
    r = _one({"speedup": 1.0}, {"speedup": 0.94}, floors={"not_this_op": 1.0}, table=False)
    assert r.verdict == Verdict.SLOWER and r.basis == "threshold"


def test_aa_option_end_to_end_and_a_bad_report(runs, tmp_path, capsys):
    a, b = runs("a"), runs("b")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "something else"}))
    assert main(["compare", str(a), str(b), "--aa", str(bad)]) == 2
    assert "not an A/A report" in capsys.readouterr().err
    assert not (a / "summary.json").exists()  # refused before anything was written
    good = _aa_report(tmp_path / "aa.json", {"op000": 0.1})
    assert main(["compare", str(a), str(b), "--aa", str(good)]) == 0
    assert "A/A drift of 1 ops" in capsys.readouterr().out


def test_row_presence_verdicts():
    a = _summary([
        {"shape": "[1]", "speedup": 1.0}, {"shape": "[2]", "speedup": 1.0}, {"shape": "[3]", "status": "failed"},
        {"shape": "[4]", "status": "failed"}, {"shape": "[5]", "speedup": 1.0},
    ])  # fmt: skip
    b = _summary([
        {"shape": "[1]", "status": "failed"}, {"shape": "[3]", "speedup": 1.0}, {"shape": "[4]", "status": "failed"},
        {"shape": "[6]", "speedup": 1.0}, {"shape": "[5]", "speedup": 1.0},
    ])  # fmt: skip
    c = compare_summaries(a, b)
    v = {r.shape: r.verdict for r in c.rows}
    assert v == {"[1]": Verdict.BROKEN, "[2]": Verdict.GONE, "[3]": Verdict.FIXED, "[4]": Verdict.FAILED,
                 "[5]": Verdict.SAME, "[6]": Verdict.NEW}  # fmt: skip
    assert [r.shape for r in c.failing(10)] == ["[1]"]


def test_an_unfinished_side_is_named_with_the_command_that_resumes_it(tmp_path):
    """Ops a screen never ran (not_run, interrupted) leave broken rows, which still fail the gate,
    and compare names the side that stopped and the command that resumes it."""
    rows = [{"op": op, "shape": f"[{i}]", "speedup": 1.0} for op in ("x", "y", "z") for i in range(2)]
    full, part = _summary(rows, name="full"), _summary(rows[:2], name="part")
    part.ops = [OpSummary(op="x", status="passed"), OpSummary(op="y", status="not_run"),
                OpSummary(op="z", status="interrupted")]  # fmt: skip
    part.path = tmp_path / "part"
    c = compare_summaries(full, part)
    assert {r.op: r.verdict for r in c.rows if r.op != "x"} == {"y": Verdict.BROKEN, "z": Verdict.BROKEN}
    assert {r.op for r in c.failing(50)} == {"y", "z"}
    text = format_comparison(c)
    assert (f"unfinished: B stopped before 2 ops ran (y, z; 4 rows counted broken for that); "
            f"`opscreen run --out {tmp_path / 'part'}` resumes it") in text
    text = format_comparison(compare_summaries(part, full))
    assert "unfinished: A stopped before 2 ops ran (y, z; 4 rows counted new for that)" in text
    assert "unfinished:" not in format_comparison(compare_summaries(full, _summary(rows, name="again")))


def test_ops_measured_on_another_device_are_named():
    """Two H200s read torch's sum on [1024,1024,1024] float32 at 978-981 us and 939-942
    us, every process of each agreeing: compare says which ops moved."""
    a = _summary([{"op": f"op{i}", "shape": "[1]", "speedup": 1.0, "device": str(i % 2)} for i in range(12)]
                 + [{"op": "gone", "shape": "[1]", "speedup": 1.0, "device": "0"},
                    {"op": "bad", "shape": "[1]", "status": "failed", "device": "0"}])
    b = _summary([{"op": f"op{i}", "shape": "[1]", "speedup": 1.0, "device": "1"} for i in range(12)]
                 + [{"op": "bad", "shape": "[1]", "status": "failed", "device": "1"}])
    c = compare_summaries(a, b)
    moved = c.moved_ops()
    assert list(moved) == sorted(f"op{i}" for i in range(0, 12, 2))  # only ok rows of ops in both
    assert moved["op0"] == ("0", "1")
    text = format_comparison(c)
    assert "devices: 6 ops ran on another device in B (op0 0 -> 1, op10 0 -> 1, op2 0 -> 1" in text
    same = compare_summaries(a, a)
    assert same.moved_ops() == {} and "devices:" not in format_comparison(same)
    one = compare_summaries(_summary([{"shape": "[1]", "speedup": 1.0, "device": "0"}]),
                            _summary([{"shape": "[1]", "speedup": 1.0, "device": "3"}]))
    assert "devices: 1 op ran on another device in B (op 0 -> 3)" in format_comparison(one)
    # UUIDs, where both runs have them, decide: another host's GPU 0 is another device,
    # and the same GPU under another index is not
    def with_uuids(rows, uuids):
        s = _summary(rows)
        s.ops = [OpSummary(op=o, status="passed", device_uuid=uuids.get(o)) for o in sorted({r["op"] for r in rows})]
        return s

    ua = {"h": "GPU-aaaaaaaa-1111", "k": "GPU-cccccccc-3333", "n": None}
    ub = {"h": "GPU-bbbbbbbb-2222", "k": "GPU-cccccccc-3333", "n": None}
    rows_a = [{"op": o, "shape": "[1]", "speedup": 1.0, "device": "0"} for o in "hkn"]
    rows_b = [{"op": "h", "shape": "[1]", "speedup": 1.0, "device": "0"},
              {"op": "k", "shape": "[1]", "speedup": 1.0, "device": "5"},
              {"op": "n", "shape": "[1]", "speedup": 1.0, "device": "1"}]
    moved = compare_summaries(with_uuids(rows_a, ua), with_uuids(rows_b, ub)).moved_ops()
    assert moved == {"h": ("0:GPU-aaaaaaaa", "0:GPU-bbbbbbbb"), "n": ("0", "1")}
    many = {f"op{i:02d}": ("0", "1") for i in range(11)}
    assert _moved_list(many).endswith("op07 0 -> 1, and 3 more")


def test_a_run_from_before_the_resting_timer_is_flagged():
    """Runs recorded before graph samples rested (no timing_method) compare, and the
    text says the timing method differs."""
    old = dict(DEFAULT_CALIBER)
    old.pop("timing_method", None)
    new = {**DEFAULT_CALIBER, "timing_method": 2}
    chk = check_caliber(old, new)
    assert not chk.refused and ("timing_method", None, 2) in chk.info
    c = compare_summaries(_summary([{"shape": "[1]", "speedup": 1.0}], caliber=old),
                          _summary([{"shape": "[1]", "speedup": 1.0}], caliber=new))
    assert "also differs: timing_method: A (unknown), B 2" in format_comparison(c)


def test_caliber_check_unit():
    cal = dict(DEFAULT_CALIBER)
    chk = check_caliber(cal, {**cal, "use_flagtune": 1, "timing": {**cal["timing"], "target_rsd": 0.01}})
    assert not chk.ok  # 1 (int) vs "0": values are compared as text
    assert [f for f, _, _ in chk.refused] == ["use_flagtune"]
    assert [f for f, _, _ in chk.info] == ["timing"]
    chk = check_caliber(cal, {**cal, "use_flagtune": "1"}, allow={"use_flagtune"})
    assert chk.ok and [f for f, _, _ in chk.allowed] == ["use_flagtune"]
    chk = check_caliber({}, cal)
    assert chk.unknown == ["A"] and not chk.ok  # an unknown caliber cannot be shown to match
    assert check_caliber({}, {}).ok
    assert parse_allow(["timer,level", "use_flagtune"]) == {"timer", "level", "use_flagtune"}
    with pytest.raises(UsageError):
        parse_allow(["device_name"])


def test_summary_json_input_and_bad_version(runs, tmp_path, capsys):
    a, b = runs("a"), runs("b")
    assert main(["summary", str(a)]) == 0
    assert main(["summary", str(b)]) == 0
    capsys.readouterr()
    assert main(["compare", str(a / "summary.json"), str(b / "summary.json"), "--out", str(tmp_path / "c.csv")]) == 0
    js = json.loads((b / "summary.json").read_text())
    js["schema"] = "opscreen.summary/99"
    (b / "summary.json").write_text(json.dumps(js))
    assert main(["compare", str(a), str(b)]) == 2
    assert "schema 99" in capsys.readouterr().err


def test_a_summary_older_than_its_run_is_built_again(runs, capsys):
    """compare on a run interrupted half-way writes its summary.json; a resume then finishes
    an op: the next compare must see it, not the summary of the half run."""
    a, b = runs("a"), runs("b")
    assert main(["compare", str(a), str(b)]) == 0
    op = sorted((b / "ops").iterdir())[0]
    res = op / "result.json"
    before = json.loads((b / "summary.json").read_text())["ops"]
    d = json.loads(res.read_text())
    assert d["status"] == "passed"
    d.update(status="timeout", error="timed out after 300 s")  # what the resumed op recorded
    res.write_text(json.dumps(d))
    status = b / "ops_status.csv"
    rows = list(csv.reader(status.read_text().splitlines()))
    col = rows[0].index("status")
    for r in rows[1:]:
        if r[0] == op.name:
            r[col] = "timeout"
    with status.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    later = (b / "summary.json").stat().st_mtime_ns + 10**9
    for f in (res, status):
        os.utime(f, ns=(later, later))
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 0
    after = json.loads((b / "summary.json").read_text())["ops"]
    assert before[0]["status"] == "passed" and after[0]["op"] == op.name and after[0]["status"] == "timeout"

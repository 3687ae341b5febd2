"""The verdict rule of ``opscreen compare`` (issue 31): floors tables of the noise between
processes, each side on its own band, the three verdicts, ``pick``, the test over
processes, the gate's exit codes, and ``opscreen calibrate``."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from opscreen.cli import main
from opscreen.results import noise
from opscreen.results.compare import COL, Verdict, compare_summaries, format_comparison
from opscreen.results.summary import COLUMNS, OpSummary, Summary
from synth import make_run

H200 = {"device_name": "NVIDIA H200", "backend": "cuda", "isolation": "op", "timer": "graph"}


def _row(**kw) -> list:
    d = dict.fromkeys(COLUMNS)
    d.update(op="op", test="", dtype="float32", shape="[1]", status="ok", op_status="passed",
             torch_timer="graph", lib_timer="graph", torch_noise_pct=0.05, lib_noise_pct=0.05)
    d.update(kw)
    if d["speedup"] is None and d["torch_ms"] and d["lib_ms"]:
        d["speedup"] = d["torch_ms"] / d["lib_ms"]
    return [d[c] for c in COLUMNS]


def _summary(rows, caliber=None, name="x", autotune=None) -> Summary:
    ops = [OpSummary(op=o, status="passed", autotune=(autotune or {}).get(o)) for o in sorted({r[0] for r in rows})]
    return Summary(kind="run", name=name, identity={}, caliber=dict(caliber or H200), ops=ops, rows=rows)


def _table(rms=0.01, rms_torch=0.01, rms_lib=0.002, ops=11, history="rerun") -> noise.FloorsTable:
    cells = [noise.Cell(history=history, timer="graph", lo_ms=lo, hi_ms=hi, rows=100, ops=ops, rms=rms,
                        rms_lib=rms_lib, rms_torch=rms_torch)
             for lo, hi in ((0.0, 0.010), (0.010, math.inf))]
    return noise.FloorsTable(name="test table", match="NVIDIA H200", cells=cells, provenance={"seed": 1})


def _one(a_kw, b_kw, **kw):
    a, b = _summary([_row(**a_kw)], name="A"), _summary([_row(**b_kw)], name="B")
    kw.setdefault("table", _table())
    c = compare_summaries(a, b, **kw)
    return c.rows[0], c


def test_t_critical_is_students_t():
    assert noise.t_critical(1, 0.01) == pytest.approx(63.657)
    assert noise.t_critical(10, 0.01) == pytest.approx(3.169)
    assert noise.t_critical(10, 0.05) == pytest.approx(2.228)
    assert noise.t_critical(math.inf, 0.01) == pytest.approx(2.576)
    assert 2.576 < noise.t_critical(500, 0.01) < noise.t_critical(120, 0.01) == pytest.approx(2.617)
    assert noise.t_critical(2.5, 0.01) < noise.t_critical(2, 0.01)  # between rows, monotone
    with pytest.raises(Exception, match="alpha"):
        noise.t_critical(10, 0.2)


def test_each_side_on_its_own_band():
    band_lib = 3.169 * 0.002  # t(10) x rms_lib
    # the library 3 % slower, torch unchanged: beyond the library's 0.63 % band and the 1 % minimum
    r, _ = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.103})
    assert r.verdict == Verdict.SLOWER and r.side == "lib" and r.basis == "floors"
    assert r.band == pytest.approx(band_lib, rel=1e-3) and r.floors == "rerun/graph/>=10us"
    # the library 0.5 % slower: beyond its band but under the minimum practical change: same
    r, _ = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.1005})
    assert r.verdict == Verdict.SAME
    # torch alone 8 % slower (the speedup moved 8 %): the baseline moved, not the library
    r, _ = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.108, "lib_ms": 0.1})
    assert r.verdict == Verdict.UNRESOLVED and r.basis == "baseline" and r.side == "torch"
    assert r.change == pytest.approx(0.08)
    # both 5 % slower (a drift of the whole process): the speedup did not move: same
    r, _ = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.105, "lib_ms": 0.105})
    assert r.verdict == Verdict.SAME and r.side == "speedup"
    # across device models the speedup alone is judged (latencies are not comparable)
    a = _summary([_row(torch_ms=0.1, lib_ms=0.1)], name="A")
    b = _summary([_row(torch_ms=0.05, lib_ms=0.05)], caliber={**H200, "device_name": "NVIDIA H100"}, name="B")
    r = compare_summaries(a, b, table=_table()).rows[0]
    assert r.side == "speedup" and r.verdict == Verdict.SAME and r.basis == "floors"


def test_alpha_sizes_the_floors_band():
    r01, _ = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.103})
    r05, _ = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.103}, alpha=0.05)
    assert r05.band == pytest.approx(r01.band * 2.228 / 3.169, rel=1e-3)  # t(10) at 95 % and 99 %


def test_same_or_unresolved_by_margin():
    """`same` is an equivalence test (TOST at 5 % a side): the change's 90 % interval, d ± t(10, 0.95)
    x rms, inside the margin; `faster`/`slower` need d beyond the 99 % band, t(10, 0.995) x rms."""
    wide = _table(rms_lib=0.015)  # band_lib 3.169 x 1.5 = 4.75 %; the same test's 1.812 x 1.5 = 2.72 %
    inside = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.1015}, table=wide)[0]
    assert inside.verdict == Verdict.SAME  # 1.49 % + 2.72 % <= 5 %
    assert inside.band == pytest.approx(3.169 * 0.015, rel=1e-3) and inside.band_same == pytest.approx(1.812 * 0.015, rel=1e-3)
    outside = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.1025}, table=wide)[0]
    assert outside.verdict == Verdict.UNRESOLVED  # 2.47 % + 2.72 % > 5 %, and not beyond the 4.75 % band
    assert _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.1025}, table=wide,
                max_band=0.06)[0].verdict == Verdict.SAME
    # at the old level (the same test at the calls' 99 %), the first is unresolved too: 1.49 % + 4.75 % > 5 %
    assert _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.1015}, table=wide,
                eq_alpha=0.01)[0].verdict == Verdict.UNRESOLVED


def test_repeats_narrow_the_floors_band_and_test_over_processes():
    t = _table(rms_lib=0.01)
    one = _one({"torch_ms": 0.1, "lib_ms": 0.1}, {"torch_ms": 0.1, "lib_ms": 0.1025}, table=t)[0]
    rep = dict(repeats=3, lib_spread=0.001, torch_spread=0.001, speedup_spread=0.001)
    three = _one({"torch_ms": 0.1, "lib_ms": 0.1, **rep}, {"torch_ms": 0.1, "lib_ms": 0.1025, **rep}, table=t)[0]
    assert three.band == pytest.approx(one.band / math.sqrt(3), rel=1e-3)
    # one process each: 2.47 % is inside the 3.17 % band, and its 90 % interval (± 1.81 %) inside the
    # 5 % margin: the same within the margin; three each: beyond the narrower band, a 2.4 % slowdown
    assert one.verdict == Verdict.SAME and three.verdict == Verdict.SLOWER
    # a wide spread between the processes: the Welch test's band decides
    noisy = dict(repeats=3, lib_spread=0.2, torch_spread=0.001, speedup_spread=0.2)
    r = _one({"torch_ms": 0.1, "lib_ms": 0.1, **noisy}, {"torch_ms": 0.1, "lib_ms": 0.105, **noisy}, table=t)[0]
    sigma = math.log1p(0.2) / 1.693
    se = math.sqrt(2 * sigma**2 / 3)
    assert r.basis == "repeats" and r.band == pytest.approx(noise.t_critical(4, 0.01) * se, rel=1e-3)
    assert r.verdict == Verdict.UNRESOLVED


def test_no_table_gets_the_conservative_default_and_says_so():
    a = _summary([_row(torch_ms=0.1, lib_ms=0.1)], caliber={**H200, "device_name": "Vendor X1"}, name="A")
    b = _summary([_row(torch_ms=0.1, lib_ms=0.1)], caliber={**H200, "device_name": "Vendor X1"}, name="B")
    c = compare_summaries(a, b)  # no table matches "Vendor X1"
    assert c.table is None and c.rows[0].basis == "floors-default"
    assert "no table for Vendor X1: a conservative default decided" in format_comparison(c)
    c = compare_summaries(a, b, table=False)
    assert c.rows[0].basis == "samples" and "--no-floors" in format_comparison(c)


def test_the_shipped_h200_table_is_found_by_device_name():
    t = noise.find("NVIDIA H200")
    assert t is not None and t.path.endswith("nvidia-h200.json")
    assert [d["seed"] for d in t.provenance["draws"]] == [20261208, 20261219, 20261230] and len(t.provenance["ops"]) >= 30
    assert t.provenance["device_name"] == "NVIDIA H200" and t.provenance["triton_version"]
    assert t.cell("rerun", "graph", 0.005) is not None and t.cell("cross", "graph", 0.5) is not None
    assert t.cell("worker", "graph", 0.005) is not None and t.cell("chip", "graph", 0.5) is not None
    assert noise.find("AMD Instinct MI300X") is None


def test_pick_when_the_autotune_picks_differ():
    at = lambda cfg: {"source": "triton.runtime.autotuner",  # noqa: E731
                      "kernels": {"lib.k": {"picks": {"(64,)": cfg}, "from": "cache", "configs": 2}}}
    a = _summary([_row(torch_ms=0.1, lib_ms=0.1)], name="A", autotune={"op": at("BLOCK: 64")})
    b = _summary([_row(torch_ms=0.1, lib_ms=0.2)], name="B", autotune={"op": at("BLOCK: 128")})
    c = compare_summaries(a, b, table=_table())
    r = c.rows[0]
    assert r.verdict == Verdict.PICK and r.basis == "pick"
    text = format_comparison(c)
    assert "autotune picks differ in 1 op" in text and "A BLOCK: 64 | B BLOCK: 128" in text
    assert c.failing(5, "ignore") == [] and c.failing(5, "fail") == [r]
    # the same picks: a plain regression
    b2 = _summary([_row(torch_ms=0.1, lib_ms=0.2)], name="B", autotune={"op": at("BLOCK: 64")})
    assert compare_summaries(a, b2, table=_table()).rows[0].verdict == Verdict.SLOWER


def test_fit_recovers_the_scale_of_known_noise():
    import random

    rng = random.Random(7)
    def run(name):
        rows = []
        for op in range(20):
            for i in range(10):
                t, lib = 0.05 * math.exp(rng.gauss(0, 0.01)), 0.05 * math.exp(rng.gauss(0, 0.002))
                rows.append(_row(op=f"op{op}", shape=f"[{i}]", torch_ms=t, lib_ms=lib))
        return _summary(rows, name=name)
    a, b = run("a"), run("b")
    t = noise.fit([(a, b, "rerun")], name="fit", match=".*", provenance={})
    (cell,) = t.cells
    assert (cell.history, cell.timer, cell.lo_ms, cell.rows, cell.ops) == ("rerun", "graph", 0.010, 200, 20)
    # a difference of two processes has sqrt(2) x each one's scale
    assert cell.rms_torch == pytest.approx(0.01 * math.sqrt(2), rel=0.15)
    assert cell.rms_lib == pytest.approx(0.002 * math.sqrt(2), rel=0.15)
    # a rerun of the same noise judged with that table: about alpha x rows called, no more
    calls = 0
    for k in range(5):
        c = compare_summaries(run(f"a{k}"), run(f"b{k}"), table=t)
        calls += sum(r.verdict in (Verdict.FASTER, Verdict.SLOWER) for r in c.rows)
    assert calls <= 5  # of 1000 rows, alpha 1 %: expected <= 10 (the minimum change cuts more)


def test_fit_leaves_out_the_ops_whose_autotune_picks_differ():
    """An op whose recorded picks differ between the two processes reads two levels (`pick` in
    compare): its spread is not the noise the other ops' bands must cover, so the fit leaves its
    rows out and names it in the provenance."""
    at = lambda cfg: {"source": "triton.runtime.autotuner",  # noqa: E731
                      "kernels": {"lib.k": {"picks": {"(64,)": cfg}, "from": "tuned", "configs": 2}}}
    steady = [_row(op=f"op{k}", shape=f"[{i}]", torch_ms=0.05, lib_ms=0.05) for k in range(4) for i in range(5)]
    def run(name, level, cfg):
        rows = steady + [_row(op="flip", shape=f"[{i}]", torch_ms=0.05, lib_ms=level) for i in range(5)]
        return _summary(rows, name=name, autotune={"flip": at(cfg)})
    a = run("A", 0.05, "BLOCK: 64")
    t = noise.fit([(a, run("B", 0.09, "BLOCK: 128"), "rerun")], name="fit", match=".*", provenance={"x": 1})
    (cell,) = t.cells
    assert (cell.ops, cell.rows, cell.rms_lib) == (4, 20, 0.0)
    assert t.provenance == {"x": 1, "pick_ops_left_out": {"flip": ["A->B"]}}
    # the same picks: the op's 58 % step is noise of the setup, and the fit keeps it
    t2 = noise.fit([(a, run("B", 0.09, "BLOCK: 64"), "rerun")], name="fit", match=".*", provenance={})
    (cell2,) = t2.cells
    assert (cell2.ops, cell2.rows) == (5, 25) and cell2.q_lib == pytest.approx(math.log(0.09 / 0.05), rel=1e-4)
    assert "pick_ops_left_out" not in t2.provenance


def test_a_library_that_launched_no_kernel_is_same_not_slower():
    """A view (H100, expand_): the graph replays no kernel, so a call reads 8-19 ns, the replay's
    own overhead, and one process reads 1.7 x the other. That ratio is no kernel's change."""
    r, c = _one(dict(torch_ms=8.5e-6, lib_ms=8.4e-6), dict(torch_ms=1.49e-5, lib_ms=1.43e-5))
    assert (r.verdict, r.basis, r.side, r.judged) == (Verdict.SAME, "no-kernel", "lib", None)
    assert "no-kernel" in format_comparison(c)
    # one reading under the limit is not enough: the library launched a kernel in B (2 us) and is slower
    r, _ = _one(dict(torch_ms=8.5e-6, lib_ms=8.4e-6), dict(torch_ms=8.5e-6, lib_ms=0.002))
    assert r.verdict == Verdict.SLOWER
    # under the limit but not a graph replay (a host timer on the CPU): judged as any row
    r, _ = _one(dict(torch_ms=1e-4, lib_ms=1e-4, torch_timer="wallclock", lib_timer="wallclock", torch_noise_pct=1.0, lib_noise_pct=1.0),
                dict(torch_ms=1e-4, lib_ms=1.5e-4, torch_timer="wallclock", lib_timer="wallclock", torch_noise_pct=1.0, lib_noise_pct=1.0))
    assert r.basis != "no-kernel" and r.verdict in (Verdict.SLOWER, Verdict.UNRESOLVED)
    # across device models (the speedup judged alone) as well
    a = _summary([_row(torch_ms=8.5e-6, lib_ms=8.4e-6)], name="A")
    b = _summary([_row(torch_ms=1.49e-5, lib_ms=1.43e-5)], name="B", caliber={**H200, "device_name": "NVIDIA H100"})
    (r,) = compare_summaries(a, b, table=None, allow=("device_name",)).rows
    assert (r.verdict, r.basis) == (Verdict.SAME, "no-kernel")


def test_a_row_whose_own_samples_spread_past_max_noise_is_never_called():
    """H100, a warm worker on a disturbed host (normal_tensor_float 64x64): the library read
    3.0 us in one process and 20.9 us in the other at an rsd of 41 %. Its samples band (2 x the
    combined noise) does not hold a 7x step, but a reading that noisy was disturbed: unresolved,
    basis noisy, and neither the gate nor the counts take it for a regression."""
    quiet = dict(torch_ms=0.003, lib_ms=0.003)
    r, c = _one(quiet, dict(torch_ms=0.003, lib_ms=0.0209, lib_noise_pct=41.0))
    assert (r.verdict, r.basis, r.side) == (Verdict.UNRESOLVED, "noisy", "lib")
    text = format_comparison(c)
    assert "noisy: 1 rows moved past their band" in text and "spread past 10%" in text
    assert "or, basis noisy, a run's own samples spread past 10%" in text  # the unresolved table's title
    assert c.failing(5, "ignore") == [] and c.failing(5, "fail") == [r]
    # just under the limit: called as before; a wider limit lets the noisy row be called
    assert _one(quiet, dict(torch_ms=0.003, lib_ms=0.0209, lib_noise_pct=9.9))[0].verdict == Verdict.SLOWER
    assert _one(quiet, dict(torch_ms=0.003, lib_ms=0.0209, lib_noise_pct=41.0), max_noise=0.5)[0].verdict == Verdict.SLOWER
    # a noisy torch side does not stop the library's own move from being called (the library is judged alone)
    r, _ = _one(quiet, dict(torch_ms=0.003, lib_ms=0.0209, torch_noise_pct=30.0))
    assert (r.verdict, r.side) == (Verdict.SLOWER, "lib")
    # nor a pick: the noisy row is unresolved, not pick
    at = lambda cfg: {"source": "triton.runtime.autotuner",  # noqa: E731
                      "kernels": {"lib.k": {"picks": {"(64,)": cfg}, "from": "cache", "configs": 2}}}
    a = _summary([_row(**quiet)], name="A", autotune={"op": at("BLOCK: 64")})
    b = _summary([_row(torch_ms=0.003, lib_ms=0.0209, lib_noise_pct=41.0)], name="B", autotune={"op": at("BLOCK: 128")})
    assert compare_summaries(a, b, table=_table()).rows[0].basis == "noisy"
    # a host timer's samples (a shared CPU: 10-100 %) are not a disturbance: its samples band decides
    host = dict(torch_timer="wallclock", lib_timer="wallclock", torch_noise_pct=12.0, lib_noise_pct=12.0)
    r, _ = _one({**quiet, **host}, {**host, "torch_ms": 0.003, "lib_ms": 0.0209})
    assert r.verdict == Verdict.SLOWER and r.basis != "noisy"
    # a quiet row that stayed put is still same, whatever the limit
    assert _one(quiet, quiet, max_noise=0.0)[0].verdict == Verdict.SAME


def test_fit_leaves_out_noisy_rows_and_counts_them():
    steady = [_row(op=f"op{k}", shape=f"[{i}]", torch_ms=0.005, lib_ms=0.005) for k in range(3) for i in range(4)]
    a = _summary(steady + [_row(op="loud", shape=f"[{i}]", torch_ms=0.003, lib_ms=0.003) for i in range(4)], name="A")
    b = _summary(steady + [_row(op="loud", shape=f"[{i}]", torch_ms=0.003, lib_ms=0.003 * (1 + i), lib_noise_pct=20.0)
                           for i in range(4)], name="B")
    t = noise.fit([(a, b, "rerun")], name="fit", match=".*", provenance={})
    (cell,) = t.cells
    assert (cell.ops, cell.rows, cell.rms_lib) == (3, 12, 0.0)
    assert t.provenance == {"noisy_rows_left_out": {"loud": 4}}
    assert "left out: 4 noisy row(s) of 1 op(s), their own samples past 10% (loud)" in "\n".join(noise.format_table(t))


def test_fit_leaves_out_readings_of_no_kernel():
    steady = [_row(op=f"op{k}", shape=f"[{i}]", torch_ms=0.005, lib_ms=0.005) for k in range(3) for i in range(4)]
    a = _summary(steady + [_row(op="view", shape=f"[{i}]", torch_ms=8.5e-6, lib_ms=8.4e-6) for i in range(4)], name="A")
    b = _summary(steady + [_row(op="view", shape=f"[{i}]", torch_ms=1.49e-5, lib_ms=1.43e-5) for i in range(4)], name="B")
    (cell,) = noise.fit([(a, b, "rerun")], name="fit", match=".*", provenance={}).cells
    assert (cell.ops, cell.rows, cell.rms_lib) == (3, 12, 0.0)


def test_op_weighted_quantile_weighs_each_op_alike():
    # 100 rows of one op at 1 %, one row of another at 5 %: by rows the 75th percentile is 1 %,
    # by ops (each weighing 1) it is 5 %
    assert noise._op_weighted_quantile({"a": [0.01] * 100, "b": [-0.05]}, 0.75) == 0.05
    assert noise._op_weighted_quantile({"a": [0.01] * 100, "b": [-0.05]}, 0.25) == 0.01
    c = noise.Cell(history="rerun", timer="graph", lo_ms=0.010, hi_ms=math.inf, rows=100, ops=11, rms=0.01,
                   rms_lib=0.002, rms_torch=0.01, q_lib=0.02)
    assert c.band("lib") == pytest.approx(0.02)  # the quantile, wider than t(10) x 0.2 % = 0.63 %
    assert c.band("lib", 3, 3) == pytest.approx(0.02 / math.sqrt(3))
    assert c.band("lib", alpha=0.05) == pytest.approx(2.228 * 0.002)  # measured at the table's alpha only
    assert c.band("torch") == pytest.approx(3.169 * 0.01)  # no q_torch: t x rms


def test_a_few_loud_ops_are_covered_by_the_quantile_band():
    """18 ops whose library kernel reads 0.2 % apart between processes and 2 that read 1 %: one
    pooled scale (t x rms) under-covers the loud two; the op-weighted quantile covers them."""
    import random

    rng = random.Random(11)
    def run(name, ops):
        rows = []
        for op in ops:
            sd = 0.01 if op in ("loud0", "loud1") else 0.002
            for i in range(10):
                rows.append(_row(op=op, shape=f"[{i}]", torch_ms=0.05, lib_ms=0.05 * math.exp(rng.gauss(0, sd)),
                                 torch_noise_pct=0.05, lib_noise_pct=0.05))
        return _summary(rows, name=name)
    ops = [f"quiet{k}" for k in range(18)] + ["loud0", "loud1"]
    t = noise.fit([(run("a", ops), run("b", ops), "rerun")], name="fit", match=".*", provenance={})
    (cell,) = t.cells
    assert cell.q_lib > 1.5 * noise.t_critical(cell.nu) * cell.rms_lib
    pooled = noise.FloorsTable(name="t x rms", match=".*",
                               cells=[noise.Cell(**{**cell.__dict__, "q_lib": None, "q_speedup": None})])
    calls = {"quantile": 0, "pooled": 0}
    for k in range(5):
        a, b = run(f"a{k}", ["loud0", "loud1"]), run(f"b{k}", ["loud0", "loud1"])
        for key, table in (("quantile", t), ("pooled", pooled)):
            c = compare_summaries(a, b, table=table)
            calls[key] += sum(r.verdict in (Verdict.FASTER, Verdict.SLOWER) for r in c.rows)
    # of the loud ops' 100 rows: 14 and 37 here (the quantile covers the mix of ops at alpha/2, so the
    # loud ops alone still see more than alpha; --repeats narrows them further)
    assert calls["quantile"] <= 20 and calls["pooled"] >= 2 * max(1, calls["quantile"]), calls


def _on(summary: Summary, uuids: dict) -> Summary:
    """``summary`` with its ops' device UUIDs (the op's identity records them)."""
    summary.ops = [OpSummary(op=o.op, status=o.status, device_uuid=uuids.get(o.op)) for o in summary.ops]
    return summary


def test_row_history_names_a_rerun_on_another_chip():
    assert noise.row_history("rerun", "gpu-a", "gpu-b") == "chip"
    assert noise.row_history("rerun", "gpu-a", "gpu-a") == "rerun"
    assert noise.row_history("rerun", None, "gpu-b") == "rerun"  # unknown: not claimed as another chip
    assert noise.row_history("cross", "gpu-a", "gpu-b") == "cross"  # cross cells hold any device


def test_fit_and_compare_keep_two_chips_apart():
    """Ops that ran on another chip in B are fitted into chip cells and judged by them; a
    table without chip cells judges them by its rerun cells and the output says so."""
    import random

    rng = random.Random(5)
    ops = [f"op{k}" for k in range(12)]

    def run(name, sd_of):
        rows = [_row(op=op, shape=f"[{i}]", device=0, torch_ms=0.05, lib_ms=0.05 * math.exp(rng.gauss(0, sd_of(op))))
                for op in ops for i in range(8)]
        return _summary(rows, name=name)

    # ops 0-5 stay on chip "a" (0.2 % apart), ops 6-11 move to chip "b" (1.5 % apart, per case)
    moved = {f"op{k}" for k in range(6, 12)}
    sd = lambda op: 0.015 if op in moved else 0.002  # noqa: E731
    a = _on(run("a", sd), dict.fromkeys(ops, "gpu-a"))
    b = _on(run("b", sd), {op: "gpu-b" if op in moved else "gpu-a" for op in ops})
    t = noise.fit([(a, b, "rerun")], name="fit", match=".*", provenance={})
    cells = {c.history: c for c in t.cells}
    assert set(cells) == {"rerun", "chip"} and cells["rerun"].ops == 6 and cells["chip"].ops == 6
    assert cells["chip"].band("lib") > 3 * cells["rerun"].band("lib")
    c = compare_summaries(a, b, table=t)
    hist = {r.op: r.floors.split("/")[0] for r in c.rows}
    assert {hist[o] for o in moved} == {"chip"} and {hist[o] for o in set(ops) - moved} == {"rerun"}
    text = format_comparison(c)
    assert "judged by the floors table's chip cells" in text and "history rerun (chip cells 48 rows, rerun cells 48 rows)" in text
    # no table for the device: the moved ops are judged by the conservative default's chip cells, and it says so
    for s in (a, b):
        s.caliber = {**s.caliber, "device_name": "Vendor X1"}  # a device no shipped table matches
    c0 = compare_summaries(a, b)
    assert {r.basis for r in c0.rows} == {"floors-default"}
    text0 = format_comparison(c0)
    assert "rows were judged by the conservative default's chip cells (no floors table for this device)" in text0
    assert "floors table's chip cells" not in text0
    # a table made on one GPU: the moved ops fall back to its rerun cells, and compare says they are under-covered
    one_gpu = noise.FloorsTable(name="one gpu", match=".*", cells=[cells["rerun"]])
    c = compare_summaries(a, b, table=one_gpu)
    assert {r.floors.split("/")[0] for r in c.rows} == {"rerun"}
    assert "has no chip cells (made on one device)" in format_comparison(c)
    # a table with chip cells, but runs that recorded no device UUIDs: the moved ops' rows fall to its
    # rerun cells (another index alone does not prove another chip), and compare says why
    bare = [_summary(list(s.rows), caliber=s.caliber, name=s.name) for s in (a, b)]
    for s, dev in zip(bare, (0, 1)):
        idev = COL["device"]
        s.rows = [[*r[:idev], dev if r[0] in moved else 0, *r[idev + 1:]] for r in s.rows]
    c = compare_summaries(*bare, table=t)
    assert set(c.moved_ops()) == moved and {r.floors.split("/")[0] for r in c.rows} == {"rerun"}
    assert "did not record the devices' UUIDs that tell two chips apart" in format_comparison(c)
    text = format_comparison(compare_summaries(a, b, table=False))  # no table: no cells to speak of
    assert "which no band here covers" in text and "chip cells" not in text
    # the conservative default has chip cells as wide as its rerun cells
    d = noise.conservative()
    assert d.cell("chip", "graph", 0.005).band() == d.cell("rerun", "graph", 0.005).band()


def test_throttled_rows_get_cells_of_their_own_and_thin_ones_defer_to_the_default():
    """Rows whose op a side measured while its device throttled (summary.csv ``throttled``) are
    fitted into throttled cells, so they widen no other row's band; compare judges a throttled row
    by a throttled cell only when it is backed by as many ops as the conservative default's (10),
    else by the default, and says which; a row with no telemetry (empty cell) is not throttled."""
    import random

    rng = random.Random(3)

    def run(name, ops, hot):
        rows = [_row(op=op, shape=f"[{i}]", torch_ms=0.05, lib_ms=0.05 * math.exp(rng.gauss(0, 0.012 if op in hot else 0.002)),
                     throttled="sw_power_cap 40%" if op in hot else ("no" if i % 2 else None))
                for op in ops for i in range(8)]
        return _summary(rows, name=name)

    quiet = [f"q{k}" for k in range(12)]
    for n_hot, judged_by_own in ((2, False), (12, True)):
        hot = {f"h{k}" for k in range(n_hot)}
        ops = quiet + sorted(hot)
        t = noise.fit([(run("a", ops, hot), run("b", ops, hot), "rerun")], name="fit", match=".*", provenance={})
        cells = {c.throttled: c for c in t.cells}
        assert set(cells) == {False, True} and cells[False].ops == 12 and cells[True].ops == n_hot
        assert cells[True].label() == "rerun/graph/>=10us/throttled" and cells[False].label() == "rerun/graph/>=10us"
        # the quiet cell saw none of the hot ops' spread
        assert cells[False].band("lib") < 0.01 < cells[True].band("lib")
        # calibrate's printout says when its throttled cells are too thin to judge
        assert ("throttled cells of fewer than 10 ops (rerun/graph/>=10us/throttled)" in "\n".join(noise.format_table(t))) \
            == (not judged_by_own)
        c = compare_summaries(run("a2", ops, hot), run("b2", ops, hot), table=t)
        hot_rows = [r for r in c.rows if r.op in hot]
        assert {r.throttled for r in hot_rows} == {"A+B"} and not any(r.throttled for r in c.rows if r.op not in hot)
        assert {r.floors for r in c.rows if r.op not in hot} == {"rerun/graph/>=10us"}
        if judged_by_own:
            assert {r.floors for r in hot_rows} == {"rerun/graph/>=10us/throttled"}
        else:  # 2 ops: t(1) = 63.7 would make a band of tens of %; the default's (t(9) x 1.5 %) judges
            assert {r.floors for r in hot_rows} == {"rerun/graph/>=10us"}
            assert {r.basis for r in hot_rows} == {"floors-default"}
        text = format_comparison(c)
        own = 8 * n_hot if judged_by_own else 0
        assert (f"throttled: {8 * n_hot} rows were measured while a side's device throttled; {own} were judged by "
                f"the floors table's throttled cells, {8 * n_hot - own} by the conservative default") in text
    # a table made before throttled cells (none in it): throttled rows go to the default too
    old = noise.FloorsTable(name="old", match=".*", cells=[cells[False]])
    assert noise.judging(old, "rerun", "graph", 0.05, throttled=True)[1] == "floors-default"
    assert noise.judging(old, "rerun", "graph", 0.05)[1] == "floors"


def test_worker_reruns_have_a_history_of_their_own():
    assert noise.history_of("op", "op") == "rerun" and noise.history_of(None, "op") == "rerun"
    assert noise.history_of("worker", "worker") == "worker"
    assert noise.history_of("op", "worker") == noise.history_of("worker", None) == "cross"
    assert noise.row_history("worker", "gpu-a", "gpu-b") == "worker"  # a worker's own spread is the wider one
    assert "worker" in noise.HISTORIES and noise.conservative().cell("worker", "graph", 0.005) is not None


def _fresh_and_worker(seed=7):
    """Two fresh-process screens (0.2 % apart per case) and two warm-worker screens (1.5 % apart)
    of the same 10 ops on one chip, as an H200 reads them."""
    import random

    rng = random.Random(seed)
    ops = [f"op{k}" for k in range(10)]

    def run(name, sd, iso):
        rows = [_row(op=op, shape=f"[{i}]", torch_ms=0.05 * math.exp(rng.gauss(0, sd)),
                     lib_ms=0.05 * math.exp(rng.gauss(0, sd))) for op in ops for i in range(8)]
        return _summary(rows, name=name, caliber={**H200, "isolation": iso})

    return run("op", 0.002, "op"), run("op2", 0.002, "op"), run("wk", 0.015, "worker"), run("wk2", 0.015, "worker")


def test_fit_and_compare_keep_worker_reruns_apart():
    """Two warm-worker screens fit worker cells, wider than the fresh reruns' (an H200 read them
    4-7 times further apart); compare judges a worker pair by them. A floors 1 table, which has
    no worker cells, judges a worker pair by its cross cells and says so."""
    op, op2, wk, wk2 = _fresh_and_worker()
    t = noise.fit([(op, op2, "rerun"), (wk, wk2, "worker"), (op, wk, "cross")], name="fit", match=".*", provenance={})
    cells = {(c.history, c.lo_ms): c for c in t.cells}
    assert {h for h, _ in cells} == {"rerun", "worker", "cross"}
    assert cells["worker", 0.010].band("lib") > 3 * cells["rerun", 0.010].band("lib")
    c = compare_summaries(wk, wk2, table=t)
    assert c.history == "worker" and {r.floors for r in c.rows} == {"worker/graph/>=10us"}
    assert c.counts()["slower"] + c.counts()["faster"] == 0
    text = format_comparison(c)
    assert "; history worker\n" in text + "\n"
    # without worker cells: the cross cells judge, and the floors line says why
    old = noise.FloorsTable(name="v1", match=".*", cells=[x for x in t.cells if x.history != "worker"])
    c = compare_summaries(wk, wk2, table=old)
    assert {r.floors.split("/")[0] for r in c.rows} == {"cross"}
    assert "this table has no worker cells" in format_comparison(c)
    # fresh reruns keep their narrow cells: a 3 % library step is called there
    slow = _summary([_row(**{**dict(zip(COLUMNS, r)), "lib_ms": r[COLUMNS.index("lib_ms")] * 1.03, "speedup": None})
                     for r in op2.rows], name="slow", caliber=dict(op2.caliber))
    c = compare_summaries(op, slow, table=t)
    assert c.counts()["slower"] == len(c.rows)


def test_a_floors_1_table_is_read_and_judges_worker_reruns_by_its_cross_cells(tmp_path, capsys):
    """The H200 table opscreen shipped before the worker history (floors 1, a real file) loads,
    keeps its cells, and compare on two worker screens falls back to its cross cells."""
    from opscreen import contracts

    v1 = Path(__file__).parent / "fixtures" / "old_outputs" / "h200-floors-v1.json"
    raw = json.loads(v1.read_text())
    assert raw["schema"] == "opscreen.floors/1"
    t = noise.load(v1)
    assert [c["history"] for c in raw["cells"]] == [c.history for c in t.cells]
    assert "worker" not in {c.history for c in t.cells}
    assert contracts.FLOORS.version == 2
    _, _, wk, wk2 = _fresh_and_worker()
    c = compare_summaries(wk, wk2, table=t)
    assert {r.floors.split("/")[0] for r in c.rows} == {"cross"}
    assert "this table has no worker cells" in format_comparison(c)


def test_floors_files_load_and_bad_ones_are_one_line(tmp_path, capsys):
    t = _table()
    p = noise.write(t, tmp_path / "t.json")
    back = noise.load(p)
    assert [c.to_json() for c in back.cells] == [c.to_json() for c in t.cells]
    assert json.loads(p.read_text())["schema"] == "opscreen.floors/2"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for args in (["--floors", str(bad)], ["--floors", str(tmp_path / "missing.json")], ["--alpha", "0.3"],
                 ["--floors", str(p), "--no-floors"]):
        a = make_run(tmp_path / "a", n_ops=2, seed=1) and tmp_path / "a"
        assert main(["compare", str(a), str(a), *args]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_gate_exit_codes(tmp_path, capsys):
    a, same, slow = tmp_path / "a", tmp_path / "same", tmp_path / "slow"
    for d in (a, same):
        make_run(d, n_ops=6, seed=5, fail_rate=0, timeout_rate=0, fatal_rate=0)
    make_run(slow, n_ops=6, seed=5, fail_rate=0, timeout_rate=0, fatal_rate=0,
             perturb=lambda op, dt, si, lib: lib * 1.25 if op == "op0001" else lib)
    assert main(["compare", str(a), str(same), "--fail-on", "5"]) == 0
    assert "PASS:" in capsys.readouterr().out
    assert main(["compare", str(a), str(slow), "--fail-on", "5"]) == 1
    out = capsys.readouterr().out
    assert "FAIL:" in out and "op0001" in out
    assert main(["compare", str(a), str(slow), "--fail-on", "30"]) == 0  # -20 % is under the gate's 30 %
    rows = _csv(slow / "compare.csv")
    assert {r["verdict"] for r in rows if r["op"] == "op0001" and r["a_timer"] == "graph"} == {"slower"}


def test_calibrate_from_run_dirs(tmp_path, capsys):
    runs = []
    for k in range(3):
        d = tmp_path / f"r{k}"
        make_run(d, n_ops=6, seed=5, fail_rate=0, timeout_rate=0, fatal_rate=0,
                 perturb=lambda op, dt, si, lib, k=k: lib * (1 + 0.003 * ((hash((op, dt, si, k)) % 7) - 3)))
        runs.append(str(d))
    out = tmp_path / "floors.json"
    assert main(["calibrate", *runs, "--seed", "42", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "floors table: NVIDIA H200" in text and f"wrote {out}" in text
    t = noise.load(out)
    assert t.provenance["seed"] == 42 and len(t.provenance["runs"]) == 3
    assert t.cells and all(c.history == "rerun" and c.rows > 0 for c in t.cells)
    assert main(["compare", runs[0], runs[1], "--floors", str(out)]) == 0
    assert f"floors: NVIDIA H200 ({out})" in capsys.readouterr().out
    # bad input: one line, exit 2, nothing written
    for args in ([runs[0]], [], [runs[0], runs[1], "--backend", "cpu"], [*runs, "--histories", "op"],
                 [*runs, "--timers-from", runs[0]], ["--backend", "cpu", "--timers-from", str(tmp_path / "nowhere")],
                 ["--backend", "cpu", "--timers-from", runs[0], "--min-per-timer", "0"], ["--backend", "cpu", "--sample", "0"],
                 ["--backend", "cpu", "--timers-from", f"{runs[0]},{tmp_path / 'nowhere'}"]):
        assert main(["calibrate", *args, "--out", str(tmp_path / "no.json")]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "no.json").exists()


def test_calibrate_pairs_runs_within_their_draws(tmp_path, capsys):
    """RUN,RUN,... is one draw: two sessions' screens pool into one table without pairing a run of
    one with a run of the other (they share ops here, so pairing across would join their rows)."""
    draws = []
    for g in range(2):
        runs = []
        for k in range(2):
            d = tmp_path / f"d{g}" / f"r{k}"
            make_run(d, n_ops=6, seed=5, fail_rate=0, timeout_rate=0, fatal_rate=0,
                     perturb=lambda op, dt, si, lib, k=k, g=g: lib * (1 + 0.003 * ((hash((op, dt, si, k, g)) % 7) - 3)))
            runs.append(str(d))
        draws.append(",".join(runs))
    out = tmp_path / "floors.json"
    assert main(["calibrate", *draws, "--seed", "11,12", "--out", str(out)]) == 0
    capsys.readouterr()
    t = noise.load(out)
    assert max(c.pairs for c in t.cells) == 2  # one pair per draw, not the 6 of four runs paired freely
    assert [(d["seed"], len(d["runs"])) for d in t.provenance["draws"]] == [(11, 2), (12, 2)]
    assert t.provenance["seed"] is None and len(t.provenance["runs"]) == 4
    assert main(["compare", draws[0].split(",")[0], draws[0].split(",")[1], "--floors", str(out)]) == 0
    assert "2 draws, seeds 11,12" in capsys.readouterr().out
    # bad input: one line, exit 2, nothing written
    for args in ([draws[0], draws[1].split(",")[0] + ","], [*draws, "--seed", "1,2,3"], [*draws, "--seed", "x"],
                 [draws[0], "--seed", "1,2"], [*draws, "--seed", "7"]):
        assert main(["calibrate", *args, "--out", str(tmp_path / "no.json")]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "no.json").exists()


def test_calibrate_screens_a_seeded_draw_and_resumes(tmp_path):
    """Screen mode on the fault suite: the draw (from an inventory, seeded) is screened once
    per history into --work as ordinary run dirs, the table is fitted and written; a second
    call resumes the screens (nothing runs again) and writes the same table."""
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    faults = root / "tests" / "fixtures" / "suites" / "faults"
    suite = tmp_path / "suite"
    shutil.copytree(faults, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    inv = tmp_path / "inv.yaml"
    inv.write_text("schema: opscreen.inventory/1\nops:\n" + "".join(f"  ok_{c}: {{}}\n" for c in "abcdefgh"))
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCREEN_")}
    env.update(PYTHONPATH=os.pathsep.join([str(root / "src"), str(faults / "stub_torch")]), FAULTS_STATE_DIR=str(state),
               PYTHONDONTWRITEBYTECODE="1")
    argv = [sys.executable, "-m", "opscreen", "calibrate", "--backend", "cpu", "--devices", "0", "--suite", str(suite),
            "--inventory", str(inv), "--sample", "3", "--seed", "7", "--histories", "op,worker,op", "--work",
            str(tmp_path / "work"), "--out", str(tmp_path / "floors.json")]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    drawn = (tmp_path / "work" / "sample.txt").read_text().split()
    import random

    assert drawn == random.Random(7).sample([f"ok_{c}" for c in "abcdefgh"], 3)
    assert sorted(p.name for p in (tmp_path / "work").iterdir() if p.is_dir()) == ["op-1", "op-2", "worker-1"]
    # the second fresh-process screen is placed one device along (every op on another chip with 2+ devices)
    shifts = {d: json.loads((tmp_path / "work" / d / "run_identity.json").read_text())["settings"]["placement_shift"]
              for d in ("op-1", "op-2", "worker-1")}
    assert shifts == {"op-1": 0, "op-2": 1, "worker-1": 0}
    t = noise.load(tmp_path / "floors.json")
    assert t.provenance["seed"] == 7 and t.provenance["ops"] == sorted(drawn)
    # one device: the shift moves nothing, so op-1 and op-2 are a rerun on one chip, not a chip pair
    assert {c.history for c in t.cells} == {"rerun", "cross"} and all(c.rows > 0 for c in t.cells)
    runs_before = sorted(p.read_text() for p in state.glob("*.runs"))
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert sorted(p.read_text() for p in state.glob("*.runs")) == runs_before  # resumed: nothing ran again


def test_calibrate_extends_a_table_with_new_ops_only(tmp_path, capsys):
    """``--extends FLOORS``: a second session's draw takes none of the ops the table measured
    (the same seed without it would retake them), the provenance says what it extends, and the
    printed command pools the two draws into one table, each paired within itself."""
    import os
    import random
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    faults = root / "tests" / "fixtures" / "suites" / "faults"
    suite = tmp_path / "suite"
    shutil.copytree(faults, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    every = [f"ok_{c}" for c in "abcdefgh"]
    inv = tmp_path / "inv.yaml"
    inv.write_text("schema: opscreen.inventory/1\nops:\n" + "".join(f"  {o}: {{}}\n" for o in every))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCREEN_")}
    env.update(PYTHONPATH=os.pathsep.join([str(root / "src"), str(faults / "stub_torch")]),
               FAULTS_STATE_DIR=str(tmp_path / "state"), PYTHONDONTWRITEBYTECODE="1")

    def calibrate(*extra, work, out, seed):
        argv = [sys.executable, "-m", "opscreen", "calibrate", "--backend", "cpu", "--devices", "0", "--suite",
                str(suite), "--inventory", str(inv), "--histories", "op,op", "--seed", str(seed), "--work",
                str(tmp_path / work), "--out", str(tmp_path / out), *extra]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)

    res = calibrate("--sample", "4", work="w1", out="f1.json", seed=3)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    first = (tmp_path / "w1" / "sample.txt").read_text().split()
    assert first == random.Random(3).sample(every, 4)
    assert random.Random(3).sample(every, 3) == first[:3]  # the same seed alone would draw them again
    res = calibrate("--sample", "3", "--extends", str(tmp_path / "f1.json"), work="w2", out="f2.json", seed=3)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    second = (tmp_path / "w2" / "sample.txt").read_text().split()
    assert second == random.Random(3).sample([o for o in every if o not in first], 3)
    assert not set(second) & set(first)
    t2 = noise.load(tmp_path / "f2.json")
    assert t2.provenance["extends"] == str(tmp_path / "f1.json") and t2.provenance["ops"] == sorted(second)
    assert t2.provenance["work"] == str(tmp_path / "w2")
    hint = [ln.strip() for ln in res.stdout.splitlines() if ln.strip().startswith("opscreen calibrate ")]
    w1, w2 = tmp_path / "w1", tmp_path / "w2"
    assert hint == [f"opscreen calibrate {w1 / 'op-1'},{w1 / 'op-2'} {w2 / 'op-1'},{w2 / 'op-2'} --seed 3,3"]
    assert "warning" not in res.stdout and "not where its provenance names them" not in res.stdout
    # the printed command fits one table of both draws
    pooled = tmp_path / "pooled.json"
    assert main([*hint[0].split()[1:], "--out", str(pooled)]) == 0
    capsys.readouterr()
    t = noise.load(pooled)
    assert [sorted(d["ops"]) for d in t.provenance["draws"]] == [sorted(first), sorted(second)]
    assert max(c.pairs for c in t.cells) == 2 and max(c.ops for c in t.cells) == 7
    # bad input: one line, exit 2, no work dir (a table that measured every op leaves nothing to add)
    full = json.loads(pooled.read_text())
    full["provenance"]["ops"] = every
    (tmp_path / "all.json").write_text(json.dumps(full))
    other = json.loads((tmp_path / "f1.json").read_text())
    other.update(name="NVIDIA H200", match="NVIDIA H200")
    (tmp_path / "h200.json").write_text(json.dumps(other))
    for bad, says in ((tmp_path / "nowhere.json", "--extends"), (inv, "--extends"),
                      (tmp_path / "all.json", "nothing is left to add"),
                      (tmp_path / "h200.json", "that table is for 'NVIDIA H200'")):
        res = calibrate("--sample", "2", "--extends", str(bad), work="w3", out="f3.json", seed=4)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and says in res.stderr, res.stderr
        assert not (tmp_path / "w3").exists() and not (tmp_path / "f3.json").exists()
    assert main(["calibrate", str(w1 / "op-1"), str(w1 / "op-2"), "--extends", str(pooled), "--out",
                 str(tmp_path / "f4.json")]) == 2
    assert "--extends is for screen mode" in capsys.readouterr().err

"""bench/worker_ab.py on real H200 runs (tests/fixtures/worker_ab: two ops of seed
20261204 in three runs of one lease, bench/results/2026-12-01-h200-speedpair.md):
``wk`` a worker on a cold cache, ``op`` fresh processes, ``wk2`` a worker again.

``flatten`` is a view op that launches no kernel (0.01 us a call, 15-26 % noise): every
row is unresolved and must be counted, not compared. ``norm_scalaropt_dim`` bfloat16
[64,512,512] read its library side 13.53 us in ``wk`` and 11.58 us in the two others."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchload import load_bench

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "tests" / "fixtures" / "worker_ab"


@pytest.fixture(scope="module")
def ab():
    return load_bench("worker_ab")


def test_rows_a_run_calls_unresolved_are_counted_not_compared(ab):
    a, b = RUNS / "wk2", RUNS / "op"
    groups = ab.aa(ab.load(a), ab.load(b), a, b)
    assert groups["unresolved (left out)"]["rows"] == 15  # flatten's, all of them
    assert groups["graph"]["rows"] == 15  # norm_scalaropt_dim's
    assert all(ab.unresolved(r) for r in ab.rows(a, "flatten").values())
    assert not any(ab.unresolved(r) for r in ab.rows(a, "norm_scalaropt_dim").values())
    # what flatten's noise would have made of the A/A
    assert groups["unresolved (left out)"]["max_pct"] > 100 > 20 > groups["graph"]["max_pct"]


def test_the_odd_one_of_three_runs(ab):
    out = ab.odd_one_out([RUNS / "wk", RUNS / "op", RUNS / "wk2"])
    assert out["rows"] == 15
    names = {str(RUNS / n): n for n in ("wk", "op", "wk2")}
    odd = {names[k]: v for k, v in out["odd_one_out"].items()}
    assert out["moved"] == sum(odd.values()) >= 1
    # the bfloat16 [64,512,512] row moved in wk alone
    assert odd["wk"] >= 1
    assert out["by_op"]["norm_scalaropt_dim"][str(RUNS / "wk")] == odd["wk"]


def test_the_command_prints_the_figures(ab, capsys):
    assert ab.main([str(RUNS / "wk2"), str(RUNS / "op"), "--third", str(RUNS / "wk")]) == 0
    out = capsys.readouterr().out
    assert "A/A unresolved (left out)" in out and "rows   15" in out
    assert "odd one out: " in out and "of 15 resolved graph rows" in out


def test_per_op_figures_leave_unresolved_rows_out(ab):
    a, b = RUNS / "wk", RUNS / "op"
    a_ops, b_ops = ab.load(a), ab.load(b)
    per = ab.per_op(a_ops, b_ops, a, b)
    assert set(per) == {"flatten", "norm_scalaropt_dim"}
    assert per["flatten"]["graph_rows"] == 0 and per["flatten"]["median_pct"] is None
    norm = per["norm_scalaropt_dim"]
    assert norm["graph_rows"] == ab.aa(a_ops, b_ops, a, b)["graph"]["rows"] == 15
    # its bfloat16 [64,512,512] row: library 13.53 us in wk against 11.58 us in op
    assert norm["max_pct"] > 10 > norm["median_pct"]
    assert norm["wall_s"] == [a_ops["norm_scalaropt_dim"]["duration_s"], b_ops["norm_scalaropt_dim"]["duration_s"]]
    assert norm["status"] == ["passed", "passed"]

"""bench/worker_pool.py: the speed figures of worker-against-op pairs measured chunk by
chunk (bench/worker_ab.py JSONs of the real H200 runs in tests/fixtures/worker_ab, and a
results JSON holding its reports under ``pairs``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchload import load_bench

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "tests" / "fixtures" / "worker_ab"


_load = load_bench


@pytest.fixture(scope="module")
def pool():
    return _load("worker_pool")


@pytest.fixture()
def reports(tmp_path):
    """wk2-vs-op of the fixture as two disjoint one-op reports, the second inside a results JSON."""
    ab = _load("worker_ab")
    a, b = RUNS / "wk2", RUNS / "op"
    per = ab.per_op(ab.load(a), ab.load(b), a, b)
    first, second = tmp_path / "first.json", tmp_path / "results.json"
    first.write_text(json.dumps({"per_op": {"flatten": per["flatten"]}}))
    second.write_text(json.dumps({"pairs": {"wk2_vs_op": {"per_op": {"norm_scalaropt_dim": per["norm_scalaropt_dim"]}}}}))
    return per, str(first), f"{second}:wk2_vs_op"


def test_pooled_figures_are_those_of_the_ops_walls(pool, reports, tmp_path, capsys):
    per, first, second = reports
    out = tmp_path / "pool.json"
    assert pool.main([first, second, "--leave-out", "flatten", "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    walls = [per[o]["wall_s"] for o in ("flatten", "norm_scalaropt_dim")]
    assert got["all"]["ops"] == 2
    assert got["all"]["worker"]["sum"] == round(walls[0][0] + walls[1][0], 1)
    assert got["all"]["sum_ratio_op_over_worker"] == round(got["all"]["op"]["sum"] / got["all"]["worker"]["sum"], 3)
    assert got["without"]["ops"] == 1 and got["without"]["op"]["median"] == round(walls[1][1], 2)
    assert "pooled less flatten: 1 ops" in capsys.readouterr().out


def test_an_op_in_two_inputs_is_refused(pool, reports):
    _, first, _ = reports
    with pytest.raises(SystemExit, match="flatten is in two inputs"):
        pool.main([first, first])


def test_a_missing_pair_and_an_unknown_left_out_op_are_refused(pool, reports):
    _, first, second = reports
    with pytest.raises(SystemExit, match="no pair 'wk_vs_op'"):
        pool.main([second.replace(":wk2_vs_op", ":wk_vs_op")])
    with pytest.raises(SystemExit, match="not in the pool: mm"):
        pool.main([first, "--leave-out", "mm"])

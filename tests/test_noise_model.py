"""bench/noise_model.py on the real H200 screens of bench/results/2026-12-02-h200-noise-runs.tgz
(13 random FlagGems ops, two screens in fresh processes and three in warm workers): the verdict
rule judged out of sample keeps its false calls on reruns near alpha and catches injected
slowdowns. A change to the rule or the fit that breaks either fails here."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from benchload import load_bench

RUNS = Path(__file__).resolve().parent.parent / "bench" / "results" / "2026-12-02-h200-noise-runs.tgz"


@pytest.fixture(scope="module")
def screens(tmp_path_factory):
    d = tmp_path_factory.mktemp("h200")
    with tarfile.open(RUNS) as tf:
        tf.extractall(d, filter="data")
    return [d / m for m in ("op", "op2", "wk", "wk2", "wk3")]


def test_out_of_fold_rates_on_real_h200_screens(screens, capsys):
    nm = load_bench("noise_model")
    from opscreen.results.summary import load_or_build

    res = nm.evaluate([load_or_build(p)[0] for p in screens], folds=2, seed=1)
    rerun = res["rates"]["rerun"]
    assert rerun["rows"] == 789
    assert rerun["called"] / rerun["rows"] <= 0.02  # measured 1.14 %
    assert rerun["unresolved"] / rerun["rows"] <= 0.05  # measured 2.15 %
    for cell, e in res["power"].items():
        assert e["rows"] > 300 and e["slower"] / e["rows"] >= 0.95, cell  # measured 99.6 % and 99.7 %
    # worker against fresh processes: wider bands, more unresolved (why --isolation auto stays op)
    cross = res["rates"]["cross"]
    assert cross["unresolved"] / cross["rows"] > 5 * rerun["unresolved"] / rerun["rows"]


def test_the_shipped_table_is_the_fit_of_these_screens(screens):
    from opscreen.results import noise
    from opscreen.results.summary import load_or_build
    import itertools

    s = [load_or_build(p)[0] for p in screens]
    pairs = [(a, b, noise.history_of(a.caliber.get("isolation"), b.caliber.get("isolation")))
             for a, b in itertools.combinations(s, 2)]
    fitted = noise.fit(pairs, name="x", match=".*", provenance={})
    shipped = noise.find("NVIDIA H200")
    assert [(c.label(), c.rows, c.ops, c.rms, c.rms_torch, c.rms_lib) for c in fitted.cells] == \
           [(c.label(), c.rows, c.ops, c.rms, c.rms_torch, c.rms_lib) for c in shipped.cells]

"""Estimators and their bootstrap interval; the timers report the configured one (the
graph timer keeps the median); the default is the one the recorded CPU data chose."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from opscreen.child import config
from opscreen.child import estimator as E
from opscreen.child.timing import Result, SampleStats, Settings

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import estimator_choice  # noqa: E402

SAMPLES = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 5.0, 1.01, 0.97, 1.03]  # one slow outlier


def test_estimators():
    assert E.estimate(SAMPLES, "median") == pytest.approx(1.005)
    assert E.estimate(SAMPLES, "trimmed_mean") == pytest.approx(statistics.fmean(sorted(SAMPLES)[2:8]))
    assert E.estimate(SAMPLES, "mean") == pytest.approx(statistics.fmean(SAMPLES))
    assert E.estimate(SAMPLES, "min") == 0.97
    assert E.trimmed_mean([3.0]) == 3.0 and E.trimmed_mean([1.0, 9.0]) == 5.0
    with pytest.raises(ValueError, match="unknown estimator"):
        E.estimate(SAMPLES, "mode")


def test_bootstrap_interval_is_seeded_holds_the_estimate_and_shrinks_with_samples():
    lo, hi = E.bootstrap_ci(SAMPLES, "median")
    assert (lo, hi) == E.bootstrap_ci(SAMPLES, "median") and lo <= E.estimate(SAMPLES) <= hi
    assert E.bootstrap_ci(SAMPLES[:4]) is None
    narrow = E.relative_halfwidth([1.0 + 0.01 * ((i * 7) % 11 - 5) for i in range(400)])
    wide = E.relative_halfwidth([1.0 + 0.01 * ((i * 7) % 11 - 5) for i in range(12)])
    assert 0 < narrow < wide
    assert E.relative_halfwidth(SAMPLES, "mean") > E.relative_halfwidth(SAMPLES, "median")  # the outlier


def test_timers_report_the_configured_estimator_but_graph_keeps_the_median():
    stats = SampleStats(list(SAMPLES), "max_time")
    assert float(Result("direct", stats).output("median", "trimmed_mean")) == pytest.approx(
        E.estimate(SAMPLES, "trimmed_mean"))
    assert float(Result("graph", stats).output("median", "trimmed_mean")) == pytest.approx(1.005)
    assert float(Result("direct", stats).output("mean", "trimmed_mean")) == pytest.approx(statistics.fmean(SAMPLES))
    assert Result("direct", stats).output("median").ci == pytest.approx(E.relative_halfwidth(SAMPLES))


def test_estimator_knob_from_the_environment_and_a_bad_one_ignored(capsys):
    assert Settings.from_config({}, {"OPSCREEN_ESTIMATOR": "trimmed_mean"}).estimator == "trimmed_mean"
    assert Settings.from_config({}, {"OPSCREEN_ESTIMATOR": "mode"}).estimator == "median"
    assert "not a median|trimmed_mean|mean|min" in capsys.readouterr().err
    assert config.caliber({"timing": {"estimator": "min"}})["estimator"] == "min"
    assert config.caliber({})["estimator"] == E.DEFAULT


def test_bad_estimator_is_refused_before_anything_is_written(cli, tmp_path):
    res = cli("op", "abs", "--backend", "cpu", "--out", tmp_path / "o", env={"OPSCREEN_ESTIMATOR": "mode"})
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "OPSCREEN_ESTIMATOR='mode'" in res.stderr and "median" in res.stderr and not (tmp_path / "o").exists()


def test_the_default_is_what_the_recorded_cpu_data_chose():
    pinned = estimator_choice.analyse(estimator_choice.load(str(BENCH / "results" / "2026-11-30-cpu-estimator-pinned.json.gz")))
    assert pinned["choice"] == E.DEFAULT == config.TIMING_DEFAULTS["estimator"]
    assert pinned["mean_p90"]["mean"] > 3 * pinned["mean_p90"]["median"]
    unpinned = estimator_choice.analyse(
        estimator_choice.load(str(BENCH / "results" / "2026-11-30-cpu-estimator-unpinned.json.gz")))
    assert unpinned["mean_p90"]["median"] > 4 * pinned["mean_p90"]["median"]  # what pinning and thread caps buy


def test_gc_is_off_while_a_call_is_measured_and_back_on_after(monkeypatch):
    import gc
    import types

    from opscreen.child import timing

    mod = types.ModuleType("gc_suite_base")
    mod.do_bench = lambda fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean": fn() or 1.0
    monkeypatch.setitem(sys.modules, "gc_suite_base", mod)
    st = timing.TimingState()
    st.configure({"timer": "wallclock", "device_type": "cpu", "timing": {
        "min_samples": 3, "max_time_s": 0.02, "warmup_ms": 0.1, "warmup_calls": 1, "patch_modules": ["gc_suite_base"]}},
        environ={})
    st.install()
    seen = []
    generations = []
    collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda generation=2: generations.append(generation) or collect(generation))
    mod.do_bench(lambda: seen.append(gc.isenabled()), return_mode="median")
    st.uninstall()
    assert seen and not any(seen) and gc.isenabled()
    # never a full collection per measurement: 80 ms each with torch imported, seconds per op
    assert generations and max(generations) < 2


def test_median_interval_by_ranks():
    # 5 samples: their whole range (Conover's ranks 1 and 5); the median 3
    assert E.median_halfwidth([5.0, 1.0, 3.0, 2.0, 4.0]) == pytest.approx((5 - 1) / 2 / 3)
    assert E.median_halfwidth([1.0, 2.0, 3.0, 4.0]) is None  # too few
    assert E.median_halfwidth([0.0] * 9) is None  # no relative width around 0
    # 100 samples 1..100: 1-based ranks floor((100 - 19.6) / 2) = 40 and ceil(1 + 119.6 / 2) = 61
    xs = [float(i) for i in range(100, 0, -1)]
    assert E.median_halfwidth(xs) == pytest.approx((61 - 40) / 2 / 50.5)
    # one wild sample moves the median's interval by a rank at most: the rsd jumps, the width barely
    quiet = [1.0 + 0.001 * ((i * 7) % 11 - 5) for i in range(60)]
    wild = quiet[:-1] + [50.0]
    assert E.median_halfwidth(wild) < 2 * E.median_halfwidth(quiet) < 0.01


def test_median_interval_covers_the_true_median_about_95_percent():
    import random

    rng = random.Random(7)
    hits = 0
    for _ in range(400):
        xs = [rng.gauss(10.0, 1.0) for _ in range(40)]
        hw = E.median_halfwidth(xs) * statistics.median(xs)
        hits += abs(statistics.median(xs) - 10.0) <= hw
    assert 0.88 <= hits / 400 <= 1.0

"""The timing plugin: knobs, the adaptive stopping rule (fake clock, seeded noise),
warm-up, timer selection per config, the replacement's routing, and wallclock /
direct / fatal end to end through a tiny pytest run in a subprocess."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from opscreen.child import config, timing
from opscreen.child import timed_value as timed
from opscreen.child.timed_value import TimedFloat
from opscreen.child.timing import Result, SampleStats, Settings

SRC = Path(__file__).resolve().parent.parent / "src"


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


# -- knobs -------------------------------------------------------------------------


def test_settings_from_config_then_env_override():
    cfg = {"timing": {"target_rsd": 0.01, "min_samples": 7, "l2_flush": False, "max_time_s": 3}}
    s = Settings.from_config(cfg, environ={"OPSCREEN_MIN_SAMPLES": "12", "OPSCREEN_L2_FLUSH": "1"})
    assert (s.target_rsd, s.min_samples, s.l2_flush, s.max_time_s) == (0.01, 12, True, 3.0)
    d = Settings.from_config({}, environ={})
    assert (d.target_rsd, d.min_samples, d.max_samples, d.max_time_s) == (0.005, 10, 1000, 2.0)
    assert Settings(min_samples=20, max_samples=5).normalized().max_samples == 20


def test_bad_knob_values_are_ignored_with_a_warning(capsys):
    s = Settings.from_config({"timing": {"min_samples": "many"}}, environ={"OPSCREEN_TARGET_RSD": "tiny"})
    assert s.min_samples == 10 and s.target_rsd == 0.005
    err = capsys.readouterr().err
    assert "min_samples" in err and "target_rsd" in err


def test_config_load(tmp_path, monkeypatch):
    monkeypatch.delenv(config.ENV_CONFIG, raising=False)
    assert config.load() == {}
    p = tmp_path / "child_config.json"
    p.write_text(json.dumps({"schema": 1, "timer": "graph"}))
    monkeypatch.setenv(config.ENV_CONFIG, str(p))
    assert config.load()["timer"] == "graph"
    assert config.configured_timer(environ={}) == "graph"
    assert config.configured_timer(environ={"OPSCREEN_TIMER": "wallclock"}) == "wallclock"
    p.write_text("[1, 2]")
    os.utime(p, (1, 1))
    with pytest.raises(config.ConfigError):
        config.load()
    with pytest.raises(config.ConfigError):
        config.load(str(tmp_path / "missing.json"))
    with pytest.raises(config.ConfigError):
        config.configured_timer({"timer": "sundial"}, environ={})


# -- the stopping rule --------------------------------------------------------------


def _sampler(clock, rel_sigma, seed, per_sample_s=0.01, mean=1.0):
    rng = random.Random(seed)
    calls = []

    def take(k):
        out = []
        for _ in range(k):
            clock.t += per_sample_s
            out.append(max(1e-9, rng.gauss(mean, rel_sigma * mean)))
        calls.append(k)
        return out

    return take, calls


def test_low_noise_stops_at_min_samples():
    clock = FakeClock()
    take, calls = _sampler(clock, rel_sigma=0.001, seed=1)
    s = Settings(target_rsd=0.005, min_samples=10, max_samples=1000, max_time_s=2.0)
    stats = timing.adaptive_sample(take, s, clock)
    assert stats.reason == "target_rsd"
    assert stats.n == 10 and calls == [10]
    assert stats.rsd < 0.005
    assert stats.median == pytest.approx(1.0, rel=0.01)


def test_high_noise_runs_to_the_time_cap():
    clock = FakeClock()
    take, calls = _sampler(clock, rel_sigma=0.2, seed=2, per_sample_s=0.01)
    s = Settings(target_rsd=0.005, min_samples=10, max_samples=1000, max_time_s=2.0)
    stats = timing.adaptive_sample(take, s, clock)
    assert stats.reason == "max_time"
    assert stats.n == 200  # 2.0 s at 10 ms a sample: batches never overshoot the cap
    assert sum(calls) == stats.n and calls[0] == 10
    assert stats.rsd > 0.1


def test_high_noise_with_a_frozen_clock_stops_at_max_samples():
    clock = FakeClock()
    take, _ = _sampler(clock, rel_sigma=0.2, seed=3, per_sample_s=0.0)
    s = Settings(target_rsd=0.005, min_samples=10, max_samples=77, max_time_s=2.0)
    stats = timing.adaptive_sample(take, s, clock)
    assert (stats.reason, stats.n) == ("max_samples", 77)


def test_noise_that_settles_stops_early():
    clock = FakeClock()
    rng = random.Random(4)
    seq = iter([1.0 + (0.3 if i < 3 else 0.0) * rng.random() for i in range(1000)])
    s = Settings(target_rsd=0.01, min_samples=10, max_samples=1000, max_time_s=100.0)

    def take(k):
        clock.t += 0.001 * k
        return [next(seq) for _ in range(k)]

    stats = timing.adaptive_sample(take, s, clock)
    assert stats.reason == "target_rsd"
    assert 10 < stats.n < 1000


def test_target_ci_stops_where_outliers_keep_the_rsd_high():
    # host-like samples: quiet around 1.0, one in ten 3x slower; the rsd never gets under 0.5 %
    clock = FakeClock()
    made = []

    def take(k):
        clock.t += 0.001 * k
        for _ in range(k):
            i = len(made) % 100
            made.append(3.0 if i % 8 == 2 else 1.0 + 0.0002 * ((i * 37) % 10))
        return made[-k:]

    off = Settings(target_rsd=0.005, min_samples=5, max_samples=1000, max_time_s=0.1)
    stats = timing.adaptive_sample(take, off, clock)
    assert stats.reason == "max_time" and stats.n == 100 and stats.rsd > 0.3
    clock.t = 0.0
    made.clear()
    on = Settings(target_rsd=0.005, target_ci=0.005, min_samples=5, max_samples=1000, max_time_s=0.1)
    stats = timing.adaptive_sample(take, on, clock)
    assert stats.reason == "target_ci" and 5 <= stats.n < 40 and stats.rsd > 0.1
    assert stats.median == pytest.approx(1.001, abs=0.002)


def test_target_ci_waits_for_min_samples_and_leaves_a_wide_median_to_the_cap():
    clock = FakeClock()
    take, calls = _sampler(clock, rel_sigma=0.2, seed=6, per_sample_s=0.01)
    s = Settings(target_rsd=0.005, target_ci=0.001, min_samples=10, max_samples=1000, max_time_s=1.0)
    stats = timing.adaptive_sample(take, s, clock)
    assert stats.reason == "max_time" and stats.n == 100  # 20 % noise: the median is never pinned to 0.1 %
    clock.t = 0.0
    take, calls = _sampler(clock, rel_sigma=0.0002, seed=6, per_sample_s=0.01)
    s = Settings(target_rsd=0.0, target_ci=0.001, min_samples=10, max_samples=1000, max_time_s=1.0)
    stats = timing.adaptive_sample(take, s, clock)
    assert (stats.reason, stats.n, calls) == ("target_ci", 10, [10])


def test_rsd_and_statistics():
    assert timing.rsd([1.0]) is None
    assert timing.rsd([2.0, 2.0, 2.0]) == 0.0
    assert timing.rsd([1.0, 3.0]) == pytest.approx(1.41421356 / 2)
    st = SampleStats([3.0, 1.0, 2.0, 10.0], "x")
    assert (st.statistic("median"), st.statistic("min"), st.statistic("max"), st.statistic("mean")) == (2.5, 1.0, 10.0, 4.0)


# -- warm-up ---------------------------------------------------------------------------


def test_warmup_runs_the_first_call_alone_then_until_settled():
    clock = FakeClock()
    per_call = iter([50.0] + [0.3, 0.2, 0.12] + [0.1] * 100_000)  # compile, clock ramp, steady
    batches = []

    def run_batch(k):
        batches.append(k)
        ms = sum(next(per_call) for _ in range(k))
        clock.t += ms / 1e3
        return ms

    s = Settings(warmup_calls=3, warmup_ms=5.0, max_warmup_s=30.0)
    w = timing.warm_up(run_batch, s, clock)
    assert batches[0] == 1 and w.first_ms == 50.0
    assert w.reason == "settled"
    assert w.ms_per_call == pytest.approx(0.1)
    assert w.calls - 1 >= 3
    assert sum(batches[1:]) * 0.1 >= 5.0 - 0.5  # about warmup_ms of calls after the first


def test_warmup_marks_the_first_call_apart():
    """The first call (where a library compiles, autotunes and loads its kernels) is its
    own part of the timer's time (phases.timer.first_s), the rest of the warm-up another."""
    import time

    from opscreen.child import timed_value as T

    def run_batch(k):
        time.sleep(0.2 if not calls else 0.0005 * k)  # the first call: a compilation
        calls.append(k)
        return 0.1 * k

    calls: list = []
    T._timer_time.clear()
    parts = T.TimerParts()
    timing.warm_up(run_batch, Settings(warmup_calls=3, warmup_ms=1.0, max_warmup_s=30.0), time.perf_counter, parts)
    parts.commit()
    got = dict(T._timer_time)
    T._timer_time.clear()
    assert set(got) == {"first_s", "warmup_s"}
    assert got["first_s"] >= 0.2 and got["warmup_s"] < 0.2, got


def _flipping(clock):
    flip = [0]
    spent = [0.0]

    def run_batch(k):
        flip[0] += 1
        ms = k * (1.0 if flip[0] % 2 else 2.0)  # never settles
        clock.t += ms / 1e3
        spent[0] += ms
        return ms

    return run_batch, spent


def test_warmup_that_never_settles_is_capped():
    clock = FakeClock()
    run_batch, spent = _flipping(clock)
    w = timing.warm_up(run_batch, Settings(warmup_calls=1, warmup_ms=2.0, max_warmup_s=1000.0), clock)
    assert w.reason == "unsettled"
    assert 40.0 <= spent[0] - 1.0 < 200.0  # 20 x warmup_ms of calls after the first, not much more
    clock = FakeClock()
    run_batch, _ = _flipping(clock)
    w = timing.warm_up(run_batch, Settings(warmup_calls=1, warmup_ms=10_000.0, max_warmup_s=0.5), clock)
    assert w.reason == "max_warmup" and 0.5 <= clock.t < 5.0


def test_calls_per_sample():
    s = Settings(sample_ms=1.0, max_calls_per_sample=256)
    assert timing.calls_per_sample(0.01, s) == 128  # 100 wanted: the nearest power of two
    assert timing.calls_per_sample(0.0125, s) == 64  # 80 wanted
    assert timing.calls_per_sample(0.3, s) == 4  # 3.3 wanted
    assert timing.calls_per_sample(5.0, s) == 1
    assert timing.calls_per_sample(0.0001, s) == 256
    assert timing.calls_per_sample(0.0, s) == 256


def test_wallclock_timer_with_fake_clock():
    clock = FakeClock()

    def fn():
        clock.t += 20e-6  # 0.02 ms a call

    s = Settings(min_samples=5, max_samples=50, max_time_s=1.0, warmup_calls=2, warmup_ms=0.5, sample_ms=0.2)
    res = timing.WallclockTimer(s, clock=clock).measure(fn)
    out = res.output("median")
    assert out.timer == "wallclock" and out == pytest.approx(0.02)
    assert out.samples == 5 and out.rsd == pytest.approx(0.0, abs=1e-9)
    assert res.extra["calls_per_sample"] == 8  # 10 wanted: the nearest power of two
    assert out.calls == 8


# -- direct timer and argument handling ----------------------------------------------


def triton3_do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    assert return_mode in ["min", "max", "mean", "median", "all"]
    fn()
    times = [1.0, 2.0, 3.0, 4.0]
    return times if return_mode == "all" else {"median": 2.5, "mean": 2.5, "min": 1.0, "max": 4.0}[return_mode]


def triton2_do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, fast_flush=True, return_mode="mean"):
    assert return_mode in ["min", "max", "mean", "median"]
    fn()
    return 7.0


def test_direct_asks_for_all_samples():
    call = timing.parse_call("do_bench", triton3_do_bench, lambda: None, (), {"warmup": 5, "rep": 9, "return_mode": "median"})
    assert (call.warmup, call.rep, call.return_mode) == (5, 9, "median")
    res = timing.run_direct(triton3_do_bench, call)
    out = res.output("median")
    assert (out.timer, float(out), out.samples) == ("direct", 2.5, 4)
    assert out.rsd == pytest.approx(timing.rsd([1, 2, 3, 4]))


def test_direct_with_an_old_do_bench_and_a_failing_fn():
    call = timing.parse_call("do_bench", triton2_do_bench, lambda: None, (10, 20), {"return_mode": "median"})
    assert (call.warmup, call.rep) == (10, 20)
    out = timing.run_direct(triton2_do_bench, call).output("median")
    assert (float(out), out.timer, out.samples, out.rsd) == (7.0, "direct", None, None)

    def broken():
        assert False, "the op's own assertion"

    with pytest.raises(AssertionError, match="own assertion"):
        timing.run_direct(triton3_do_bench, timing.parse_call("do_bench", triton3_do_bench, broken, (), {}))


def test_parse_call_cudagraph_positional():
    def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
        pass

    call = timing.parse_call("do_bench_cudagraph", do_bench_cudagraph, print, (50,), {"return_mode": "median"})
    assert (call.rep, call.warmup, call.return_mode, call.quantiles) == (50, None, "median", None)


# -- selection and routing --------------------------------------------------------------


class FakeProvider:
    def __init__(self):
        self.calls = 0

    def measure(self, call, settings, direct):
        self.calls += 1
        call()
        return Result("graph", SampleStats([0.125] * settings.min_samples, "target_rsd"))


def _state(timer, monkeypatch, provider=None, modname="fake_suite_base"):
    mod = types.ModuleType(modname)
    mod.seen = []

    def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        mod.seen.append(return_mode)
        fn()
        return [0.5, 0.5, 0.5] if return_mode == "all" else 0.5

    mod.do_bench = do_bench
    monkeypatch.setitem(sys.modules, modname, mod)
    monkeypatch.setattr(timed, "_graph_provider", provider)
    st = timing.TimingState()
    cfg = {"timer": timer, "device_type": "cpu",
           "timing": {"min_samples": 3, "max_time_s": 0.05, "warmup_ms": 0.1, "warmup_calls": 1,
                      "sample_ms": 0.01, "patch_modules": [modname]}}
    st.configure(cfg, environ={})
    return st, mod


@pytest.mark.parametrize("timer", ["graph", "direct", "wallclock"])
def test_timer_selection_per_config(timer, monkeypatch):
    provider = FakeProvider()
    st, mod = _state(timer, monkeypatch, provider=provider)
    original = mod.do_bench
    assert st.install() == ["fake_suite_base.do_bench"]
    assert st.install() == []  # idempotent
    assert mod.do_bench is not original and mod.do_bench._opscreen_original is original
    ran = []
    out = mod.do_bench(lambda: ran.append(1), warmup=1, rep=1, return_mode="median")
    assert isinstance(out, TimedFloat) and out.timer == timer
    if timer == "graph":
        assert provider.calls == 1 and float(out) == 0.125 and mod.seen == []
    elif timer == "direct":
        assert mod.seen == ["all"] and float(out) == 0.5 and out.samples == 3
    else:
        assert mod.seen == [] and out.samples >= 3 and out.rsd is not None
    assert ran
    st.uninstall()
    assert mod.do_bench is original


def test_graph_timer_without_the_graph_plugin_times_directly(monkeypatch, capsys):
    st, mod = _state("graph", monkeypatch, provider=None)
    st.install()
    out = mod.do_bench(lambda: None, return_mode="median")
    assert out.timer == "direct"
    assert "not loaded" in capsys.readouterr().err
    assert "NOT loaded" in st.header()


def test_no_timer_in_config_leaves_the_suite_alone(monkeypatch):
    st, mod = _state("graph", monkeypatch)
    st.configure({}, environ={})
    assert not st.active and st.install() == []


def test_nested_and_quantile_calls_go_to_the_original(monkeypatch):
    st, mod = _state("wallclock", monkeypatch)
    st.install()
    inner = []

    def fn():
        if not inner:
            inner.append(mod.do_bench(lambda: None, return_mode="median"))  # e.g. an autotuner

    out = mod.do_bench(fn, return_mode="median")
    assert out.timer == "wallclock"
    assert inner == [0.5] and not isinstance(inner[0], TimedFloat)
    q = mod.do_bench(lambda: None, quantiles=[0.5])
    assert q == 0.5 and not isinstance(q, TimedFloat) and mod.seen[-1] == "mean"


def test_fatal_error_in_a_timed_call_exits(monkeypatch):
    st, mod = _state("wallclock", monkeypatch)
    st.install()

    class Exited(Exception):
        pass

    def fake_exit(kind, message):
        raise Exited(kind, message)

    monkeypatch.setattr(config, "fatal_exit", fake_exit)

    def fn():
        raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                           "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")

    with pytest.raises(Exited) as info:
        mod.do_bench(fn, return_mode="median")
    assert info.value.args[0] == "illegal-address"
    with pytest.raises(ValueError):  # a recoverable error propagates unchanged
        mod.do_bench(lambda: (_ for _ in ()).throw(ValueError("bad input")), return_mode="median")


def test_fallbacks_are_counted_in_the_summary(monkeypatch):
    class FallbackProvider:
        def measure(self, call, settings, direct):
            import opscreen.child.fatal as errors

            err = RuntimeError("CUDA error: operation not permitted when stream is capturing")
            return direct().as_fallback("capture", errors.classify(err), err)

    st, mod = _state("graph", monkeypatch, provider=FallbackProvider())
    st.install()
    out = mod.do_bench(lambda: None, return_mode="median")
    assert out.timer == "graph-fallback:capture" and out.samples == 3
    lines = st.summary_lines()
    assert any("graph-fallback:capture=1" in line for line in lines)
    assert any("1 x graph-fallback:capture (capture-unsupported)" in line for line in lines)


def test_triton_testing_is_patched_only_when_triton_is_imported(monkeypatch):
    st, _ = _state("direct", monkeypatch)
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    monkeypatch.delitem(sys.modules, "triton.testing", raising=False)
    assert "triton.testing.do_bench" not in st.install()
    triton = types.ModuleType("triton")
    testing = types.ModuleType("triton.testing")
    testing.do_bench = triton3_do_bench
    testing.do_bench_cudagraph = lambda fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean": 9.0
    triton.testing = testing
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.testing", testing)
    done = st.install()
    assert {"triton.testing.do_bench", "triton.testing.do_bench_cudagraph"} <= set(done)
    # direct mode routes a cudagraph call to the event timer do_bench
    out = testing.do_bench_cudagraph(lambda: None, rep=5, return_mode="median")
    assert (out.timer, float(out), out.samples) == ("direct", 2.5, 4)
    st.uninstall()
    assert testing.do_bench is triton3_do_bench


# -- end to end: a tiny pytest run in a subprocess ------------------------------------------

BASE = '''
CALLS = []

def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    CALLS.append(return_mode)
    fn()
    times = [0.5, 0.5, 0.75]
    return times if return_mode == "all" else 0.5

def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    raise RuntimeError("cudagraph mode needs a CUDA device")

def measure(fn, mode="kernel"):
    # looked up at call time, like the suite's base module
    if mode == "kernel":
        return do_bench(fn, warmup=1, rep=1, return_mode="median")
    return do_bench_cudagraph(fn, rep=1, return_mode="median")
'''

TESTS = '''
import json
from . import base

def work():
    return sum(range(300))

def report(tag, v):
    print("RESULT " + json.dumps({"tag": tag, "value": float(v), "timer": getattr(v, "timer", None),
          "samples": getattr(v, "samples", None), "rsd": getattr(v, "rsd", None), "calls": base.CALLS}))

def test_kernel_mode():
    report("kernel", base.measure(work))

def test_cudagraph_mode():
    report("cudagraph", base.measure(work, mode="cudagraph"))

def test_fatal_exit_without_plugins():
    from opscreen.child import config
    config.fatal_exit("illegal-address", "CUDA error: an illegal memory access was encountered")

def test_fatal():
    print("context printed before the fault")
    def fn():
        raise RuntimeError("CUDA error: device-side assert triggered\\n"
                           "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    base.measure(fn)
'''


def _suite(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    pkg = tmp_path / "benchmark"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text(textwrap.dedent(BASE))
    (pkg / "test_tiny.py").write_text(textwrap.dedent(TESTS))
    return tmp_path


def _run(root, timer, *select, capture=False, plugins=("opscreen.child.timing",)):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCREEN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(root)])
    if timer:
        cfg = root / f"child_config_{timer}.json"
        cfg.write_text(json.dumps({
            "schema": 1, "op": "tiny", "backend": "cpu", "device_type": "cpu", "timer": timer,
            "capabilities": {"graph_capture": False, "graph_api": None, "device_events": False, "l2_flush": False},
            "timing": {"target_rsd": 0.5, "min_samples": 5, "max_samples": 40, "max_time_s": 0.2,
                       "warmup_calls": 2, "warmup_ms": 1, "sample_ms": 0.05},
        }))
        env[config.ENV_CONFIG] = str(cfg)
    args = [sys.executable, "-m", "pytest", *(a for p in plugins for a in ("-p", p)), "-p", "no:cacheprovider",
            "benchmark/test_tiny.py", "-k", " or ".join(select)]
    if not capture:
        args.append("-s")
    proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    results = {}
    for line in proc.stdout.splitlines():
        if "RESULT {" in line:
            r = json.loads(line[line.index("RESULT {") + len("RESULT "):])
            results[r["tag"]] = r
    return proc, results


def test_wallclock_end_to_end(tmp_path):
    root = _suite(tmp_path)
    proc, res = _run(root, "wallclock", "kernel", "cudagraph")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "opscreen timing: timer=wallclock" in proc.stdout
    for tag in ("kernel", "cudagraph"):
        r = res[tag]
        assert r["timer"] == "wallclock"
        assert 5 <= r["samples"] <= 40 and r["rsd"] is not None and r["value"] > 0
    assert res["cudagraph"]["calls"] == []  # the suite's own timers never ran
    assert "opscreen timing: wallclock=2" in proc.stdout


def test_direct_end_to_end(tmp_path):
    root = _suite(tmp_path)
    proc, res = _run(root, "direct", "kernel", "cudagraph")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert res["kernel"]["timer"] == "direct" and res["kernel"]["samples"] == 3
    assert res["kernel"]["value"] == 0.5 and res["kernel"]["calls"] == ["all"]
    # cudagraph mode on a backend without graphs: the module's do_bench times it
    assert res["cudagraph"]["timer"] == "direct" and res["cudagraph"]["calls"] == ["all", "all"]


def test_no_config_means_no_patching(tmp_path):
    root = _suite(tmp_path)
    proc, res = _run(root, None, "kernel")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert res["kernel"]["timer"] is None and res["kernel"]["calls"] == ["median"]
    assert "opscreen timing: inactive" in proc.stdout


def test_fatal_end_to_end_leaves_with_86_despite_output_capture(tmp_path):
    root = _suite(tmp_path)
    proc, _ = _run(root, "wallclock", "test_fatal and not without_plugins", capture=True)
    assert proc.returncode == config.EXIT_DEVICE_FATAL, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    fatal = [line for line in lines if line.startswith(config.FATAL_PREFIX)]
    assert fatal == ["OPSCREEN-FATAL: device-assert: CUDA error: device-side assert triggered"]
    assert "context printed before the fault" in proc.stdout  # what pytest had captured


def test_fatal_line_reaches_stdout_under_capture_without_the_timing_plugin(tmp_path):
    # only config.py is imported early (as the device plugin does); nobody attached pytest
    root = _suite(tmp_path)
    proc, _ = _run(root, None, "fatal_exit_without_plugins", capture=True, plugins=("opscreen.child.config",))
    assert proc.returncode == config.EXIT_DEVICE_FATAL, proc.stdout + proc.stderr
    assert proc.stdout.count("OPSCREEN-FATAL: illegal-address: CUDA error: an illegal memory access was encountered") == 1

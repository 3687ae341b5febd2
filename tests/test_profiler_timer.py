"""The profiler timer: per-call device time from real profiler traces (recorded CUDA and
ROCm traces, and CPU traces torch.profiler writes here), its sampling with a fake
profiler, the graph timer's fallback to it, and like-with-like rows."""

from __future__ import annotations

import gzip
import json
import sys
import types
from pathlib import Path

import pytest

from opscreen.child import kernel_trace as K
from opscreen.child import profiler as P
from opscreen.child import report, timing
from opscreen.child import timed_value as timed
from opscreen.child.timed_value import ProfilerUnavailable, TimedFloat
from opscreen.child.timing import Result, SampleStats, Settings

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kineto"
FAST = Settings(target_rsd=0.05, min_samples=5, max_samples=40, max_time_s=5.0, warmup_calls=1, warmup_ms=0.0,
                sample_ms=0.1, max_calls_per_sample=8, max_warmup_s=1.0)


def fixture(name: str) -> dict:
    return json.loads(gzip.decompress((FIXTURES / name).read_bytes()))


def device_events(trace: dict) -> list:
    return [e for e in K.trace_events(trace) if e.get("cat") in K.DEVICE_CATS]


# -- attribution on recorded traces ------------------------------------------------------


def test_cuda_trace_sums_kernels_and_copies_of_the_step_not_its_syncs():
    trace = fixture("cuda_a100_event_sync.json.gz")
    pc = K.per_call(trace, marker="ProfilerStep#")
    assert len(pc.ms) == 101 and pc.events[100] == 5 and pc.unattributed == 0
    # three kernels, one device-to-host copy, one spin kernel; the "Stream Sync" /
    # "Event Sync" records (cat cuda_sync) are waits, not device work
    assert pc.ms[100] == pytest.approx(sum(e["dur"] for e in device_events(trace)) / 1000.0) == pytest.approx(0.051)
    assert sum(pc.ms[:100]) == 0.0


def test_triton_kernel_launched_through_the_driver_api_is_attributed():
    pc = K.per_call(fixture("cuda_a100_triton_driver_launch.json.gz"), marker="ProfilerStep#")
    assert pc.events == [0, 1] and pc.ms[1] == pytest.approx(0.00176)


def test_rocm_trace_attributes_kernels_launched_from_another_thread():
    trace = fixture("rocm_mi250_train_step.json.gz")
    launches = [e for e in K.trace_events(trace) if e.get("cat") == "cuda_runtime" and "Launch" in e["name"]]
    assert len({e["tid"] for e in launches}) == 2  # the backward pass launches from autograd's thread
    pc = K.per_call(trace, marker="ProfilerStep#")
    assert pc.events == [0, 16, 0] and pc.unattributed == 0
    assert pc.ms[1] == pytest.approx(sum(e["dur"] for e in device_events(trace)) / 1000.0)


def test_a_device_event_of_no_call_is_counted_unattributed():
    trace = fixture("cuda_a100_triton_driver_launch.json.gz")
    events = K.trace_events(trace)
    for e in events:
        if e.get("cat") == "user_annotation":
            e["ts"] += 10_000_000  # the range no longer holds the launch
    pc = K.per_call(events, n_calls=2, marker="ProfilerStep#")
    assert pc.seen == 0 and pc.unattributed == 1


def test_recorded_cpu_trace_ranges_and_host_ops():
    # torch 2.13 (CPU build): five calls of nonzero(x > 0) and add, each in opscreen.call#<i>
    trace = fixture("cpu_torch2.13_five_calls.json.gz")
    ranges = K.call_ranges(K.trace_events(trace))
    assert [r.index for r in ranges] == [0, 1, 2, 3, 4]
    assert all(a.end <= b.start for a, b in zip(ranges, ranges[1:]))
    assert K.per_call(trace).seen == 0  # no device: nothing to time
    ops = K.per_call(trace, work_cats=("cpu_op",))
    assert len(set(ops.events)) == 1 and ops.events[0] >= 3 and ops.unattributed == 0


# -- real torch.profiler output, captured here -------------------------------------------


class CpuProfiler(P.TorchProfiler):
    """The real torch.profiler driven by the timer's code, recording host activity only."""

    def _activity(self):
        from torch.profiler import ProfilerActivity

        return ProfilerActivity.CPU

    def synchronize(self):
        pass


def test_live_cpu_session_gives_one_range_per_call_and_host_ops_inside_each():
    torch = pytest.importorskip("torch")
    x = torch.randn(32, 32)
    trace = CpuProfiler().session(lambda: torch.add(x, x), 6)
    ops = K.per_call(trace, 6, work_cats=("cpu_op",))
    assert ops.events == [1] * 6 and ops.unattributed == 0 and all(ms > 0 for ms in ops.ms)
    assert K.per_call(trace, 6).seen == 0


def test_torch_profiler_on_a_cpu_build_says_it_cannot_see_kernels():
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, supported_activities

    if ProfilerActivity.CUDA in supported_activities():
        pytest.skip("this torch records CUDA activity")
    assert "no device activity" in P.TorchProfiler("cuda").unavailable()
    assert "does not record" in P.TorchProfiler("musa").unavailable()
    with pytest.raises(ProfilerUnavailable):
        P.measure_profiler(lambda: None, FAST, P.TorchProfiler("cuda"))


# -- the timer's bookkeeping with a fake profiler ----------------------------------------


class FakeProfiler:
    """Writes kineto-format traces: per call, a range, and per kernel a launch on the host
    (one of them from another thread) and the kernel on device 0 with its duration."""

    def __init__(self, kernels_us=(3.0, 1.0), jitter=None, sees=True):
        self.kernels_us = kernels_us
        self.jitter = jitter or (lambda i: 0.0)
        self.sees = sees
        self.primed = False
        self.sessions = []
        self.priming = 0  # sessions made before the timer marked CUPTI loaded
        self.syncs = 0
        self.n = 0
        self.clock = None  # a fake clock each call advances by per_call_s (the call, its trace)
        self.per_call_s = 0.0

    def unavailable(self):
        return None

    def synchronize(self):
        self.syncs += 1

    def session(self, call, n):
        self.priming += not self.primed
        if self.clock is not None:
            self.clock.t += self.per_call_s * n
        events, t, corr = [], 0.0, 0
        for i in range(n):
            call()
            start = t
            for j, us in enumerate(self.kernels_us):
                corr += 1
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7 + j,
                               "ts": t + 1, "dur": 1, "args": {"correlation": corr}})
                if self.sees:
                    events.append({"ph": "X", "cat": "kernel", "name": f"k{j}", "pid": 0, "tid": 7, "ts": t + 50,
                                   "dur": us + self.jitter(self.n), "args": {"correlation": corr}})
                t += 2
            events.append({"ph": "X", "cat": "user_annotation", "name": f"{K.MARKER}{i}", "pid": 7, "tid": 7,
                           "ts": start, "dur": t - start})
            t += 100
            self.n += 1
        self.sessions.append(n)
        return {"traceEvents": events}


def test_profiler_samples_are_the_summed_kernels_of_each_call_with_host_latency_beside():
    prof, calls = FakeProfiler(jitter=lambda i: 0.001 * (i % 3)), []
    res = P.measure_profiler(lambda: calls.append(1), FAST, prof, warm=False)
    # CUPTI loaded once, untimed; then a session of one call times what a call costs, and the
    # rest of the first batch fits in one session
    assert res.timer == "profiler" and prof.primed and prof.sessions[:3] == [1, 1, FAST.min_samples - 1]
    assert all(v == pytest.approx(0.004, abs=5e-6) for v in res.stats.values)
    assert res.extra["kernels_per_call"] == 2 and res.extra["host_ms"] is not None
    out = res.output("median")
    assert isinstance(out, TimedFloat) and out.host_ms == res.extra["host_ms"] and out.ci is not None
    again = P.measure_profiler(lambda: None, FAST, prof, warm=False)
    assert again.stats.n >= FAST.min_samples and prof.priming == 1


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.mark.parametrize("per_call_s, sessions, samples", [
    (4.0, [1, 1], 2),  # one call with its trace outlasts the 5 s cap: the two samples it needs, no more
    (0.9, [1, 4, 1], 6),  # the probe, the 4 calls that fit the 4.1 s left, then one last call past the cap
])
def test_the_time_cap_holds_inside_a_batch_of_profiler_sessions(per_call_s, sessions, samples):
    """On an H200, sessions of ten calls of torch's mode on a 4096x4096 tensor outlasted a
    300 s op timeout in the profiler's exit and the trace's parse. The first
    session holds one call and says what a call costs; the batch then takes what fits the
    time left, and stops at the cap once two samples exist (samples too noisy to stop on
    their rsd, so only the cap stops them)."""
    clock = _Clock()
    prof = FakeProfiler(jitter=lambda i: 3.0 * (i % 2))
    prof.primed = True  # CUPTI loaded by an earlier measurement
    prof.clock, prof.per_call_s = clock, per_call_s
    res = P.measure_profiler(lambda: None, FAST, prof, warm=False, clock=clock)
    assert prof.sessions == sessions
    assert res.stats.n == samples and res.stats.reason == "max_time"
    assert clock.t == pytest.approx(per_call_s * samples)


def test_a_cheap_call_keeps_the_first_batch_in_two_sessions():
    clock = _Clock()
    prof = FakeProfiler()
    prof.primed = True
    prof.clock, prof.per_call_s = clock, 0.001
    res = P.measure_profiler(lambda: None, FAST, prof, warm=False, clock=clock)
    assert prof.sessions[:2] == [1, FAST.min_samples - 1] and res.stats.n >= FAST.min_samples


def test_the_profiler_timers_parts_are_accounted():
    """Where a profiler measurement's wall time went (phases.timer): warm-up, sessions
    (CUPTI's priming with them), and the host-inclusive latency beside."""
    timed._timer_time.clear()

    def slow_sync():
        import time

        time.sleep(0.002)  # every host-latency sample waits for the "device" twice

    prof = FakeProfiler()
    prof.synchronize = slow_sync
    P.measure_profiler(lambda: None, FAST, prof, warm=True)
    parts = dict(timed._timer_time)
    assert set(parts) == {"first_s", "warmup_s", "samples_s", "host_s"}
    assert parts["host_s"] >= 0.004 * FAST.min_samples  # at least min_samples synced single calls
    assert parts["warmup_s"] > 0 and parts["samples_s"] > 0
    timed._timer_time.clear()


def test_profiler_that_sees_no_kernels_is_unavailable():
    with pytest.raises(ProfilerUnavailable, match="no device kernels"):
        P.measure_profiler(lambda: None, FAST, FakeProfiler(sees=False), warm=False)


# -- the graph timer's fallback, and like with like ---------------------------------------


CAPTURE_ERROR = "CUDA error: operation not permitted when stream is capturing\nSearch for `cudaErrorStreamCaptureUnsupported'"


class GraphFailsFor:
    """A graph provider: callables marked ``uncapturable`` fail capture, others read 0.125 ms."""

    def measure(self, call, settings, direct):
        from opscreen.child import fatal

        if getattr(call, "uncapturable", False):
            err = RuntimeError(CAPTURE_ERROR)
            return direct().as_fallback("capture", fatal.classify(err), err)
        call()
        return Result("graph", SampleStats([0.125] * settings.min_samples, "target_rsd"))


def marked(uncapturable: bool):
    def fn():
        return None

    fn.uncapturable = uncapturable
    return fn


def _state(monkeypatch, prof, modname="fake_profiled_suite"):
    mod = types.ModuleType(modname)

    def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        fn()
        return [0.9, 1.1, 1.0, 5.0, 1.0] if return_mode == "all" else 1.0

    mod.do_bench = do_bench
    monkeypatch.setitem(sys.modules, modname, mod)
    monkeypatch.setattr(timed, "_graph_provider", GraphFailsFor())
    monkeypatch.setattr(timed, "_profiler_provider", P.ProfilerProvider(prof) if prof else None)
    monkeypatch.setattr(timing, "make_call", lambda fn, grad=None: fn)  # keep the marks on the callable
    st = timing.TimingState()
    st.configure({"timer": "graph", "device_type": "cuda", "timing": {
        "min_samples": 5, "max_time_s": 1.0, "warmup_ms": 0.0, "warmup_calls": 1, "patch_modules": [modname]}},
        environ={})
    st.install()
    return st, mod


def test_capture_failure_is_timed_by_the_profiler_and_says_why(monkeypatch):
    st, mod = _state(monkeypatch, FakeProfiler())
    out = mod.do_bench(marked(True), return_mode="median")
    assert out.timer == "graph-fallback:capture+profiler" and out.host_ms is not None
    assert out.fallback == ("capture: capture-unsupported: CUDA error: operation not permitted when stream is "
                            "capturing")
    assert timed.timer_method(out.timer) == "profiler" and timed.fallback_phase(out.timer) == "capture"
    assert "profiler where it sees kernels" in st.header()


def test_without_kernels_the_fallback_is_direct_for_the_rest_of_the_process(monkeypatch, capsys):
    st, mod = _state(monkeypatch, FakeProfiler(sees=False))
    out = mod.do_bench(marked(True), return_mode="median")
    assert out.timer == "graph-fallback:capture" and float(out) == 1.0 and out.host_ms is None
    assert st.profiler_off and "profiler unavailable" in capsys.readouterr().err
    assert mod.do_bench(marked(True), return_mode="median").timer == "graph-fallback:capture"


class BrokenProfiler(FakeProfiler):
    """A profiler session that raises: the profiler's own failure, or the op's."""

    def __init__(self, error: str):
        super().__init__()
        self.error = error

    def session(self, call, n):
        raise RuntimeError(self.error)


def test_a_profiler_that_breaks_falls_back_to_the_direct_timer(monkeypatch, capsys):
    """An unexpected profiler error never costs the op its row: the shape is timed directly
    (where an error of the op itself would show again), and so is the rest of the process."""
    st, mod = _state(monkeypatch, BrokenProfiler("kineto: activity buffer overflow"))
    out = mod.do_bench(marked(True), return_mode="median")
    assert out.timer == "graph-fallback:capture" and float(out) == 1.0
    assert "RuntimeError: kineto: activity buffer overflow" in st.profiler_off
    assert "profiler failed" in capsys.readouterr().err


def test_profiler_fallback_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("OPSCREEN_PROFILER_FALLBACK", "0")
    st, mod = _state(monkeypatch, FakeProfiler())
    st.configure({**st.cfg}, environ={"OPSCREEN_PROFILER_FALLBACK": "0"})
    assert mod.do_bench(marked(True), return_mode="median").timer == "graph-fallback:capture"


def _metrics(base, lib):
    return types.SimpleNamespace(latency_base=base, latency=lib, speedup=float(base) / float(lib),
                                 gbps_base=100.0, gbps=50.0, tflops=2.0, shape_detail=[[4]], error_msg=None)


@pytest.mark.parametrize("torch_captures", [True, False])
def test_a_row_with_one_uncapturable_side_is_written_like_with_like(monkeypatch, torch_captures):
    st, mod = _state(monkeypatch, FakeProfiler(kernels_us=(2.0,)))
    base = mod.do_bench(marked(not torch_captures), return_mode="median")  # the suite: torch first,
    lib = mod.do_bench(marked(torch_captures), return_mode="median")  # then the library, same shape
    graph_side = base if torch_captures else lib
    assert graph_side.timer == "graph" and graph_side.alt is not None and graph_side.alt.timer == "profiler"
    m = _metrics(base, lib)
    assert report.like_for_like(m) and not report.like_for_like(m)  # idempotent
    assert timed.timer_method(m.latency_base.timer) == timed.timer_method(m.latency.timer) == "profiler"
    assert m.speedup == pytest.approx(float(m.latency_base) / float(m.latency)) == pytest.approx(1.0)
    replaced = m.latency_base if torch_captures else m.latency
    assert replaced.graph_ms == 0.125 and replaced.ci is not None
    tags = report.row_tags(m)
    assert tags["graph_ms_base" if torch_captures else "graph_ms"] == 0.125
    assert tags["fallback" if torch_captures else "fallback_base"].startswith("capture: capture-unsupported")
    if torch_captures:
        assert m.gbps_base == pytest.approx(100.0 * 0.125 / 0.002)
    else:
        assert m.gbps == pytest.approx(50.0 * 0.125 / 0.002) and m.tflops == pytest.approx(2.0 * 0.125 / 0.002)


def test_rows_of_one_timer_are_left_as_measured(monkeypatch):
    st, mod = _state(monkeypatch, FakeProfiler())
    base, lib = (mod.do_bench(marked(False), return_mode="median") for _ in range(2))
    assert base.alt is None and lib.alt is None
    m = _metrics(base, lib)
    assert not report.like_for_like(m) and m.latency_base is base


def test_the_gpu_check_script_builds_its_ops_and_parses_its_options():
    torch = pytest.importorskip("torch")
    import subprocess

    from benchload import BENCH, load_bench

    mod = load_bench("device/profiler_check")
    ops = mod.make_ops(torch, torch.device("cpu"))
    assert {"nonzero", "bincount", "add"} <= set(ops)
    for fn in ops.values():
        fn()
    res = subprocess.run([sys.executable, str(BENCH / "device" / "profiler_check.py"), "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "--processes" in res.stdout


def test_the_childs_closing_summary_names_the_timer_that_took_over(monkeypatch):
    st, mod = _state(monkeypatch, FakeProfiler())
    mod.do_bench(marked(True), return_mode="median")
    lines = st.summary_lines()
    assert any("1 x graph-fallback:capture+profiler (capture-unsupported): CUDA error: operation not permitted" in line
               for line in lines), lines

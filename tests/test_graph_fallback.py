"""Graph timer bookkeeping on the CPU, with a fake graph API: warm-up before capture,
per-shape fallback tagged by the failing phase, clean state after a failure,
fatal errors leave through the exit hook, and the real API's RNG guard."""

from __future__ import annotations

import contextlib

import pytest

from opscreen.child import graph as G
from opscreen.child import timing
from opscreen.child import timed_value as timed
from opscreen.child.timing import Result, SampleStats, Settings

CAPTURE_UNSUPPORTED = (
    "CUDA error: operation not permitted when stream is capturing\n"
    "Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
    "group__CUDART__TYPES.html for more information.\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
)
DEVICE_ASSERT = CAPTURE_UNSUPPORTED.replace(
    "operation not permitted when stream is capturing", "device-side assert triggered"
).replace("cudaErrorStreamCaptureUnsupported", "cudaErrorAssert")

FAST = Settings(target_rsd=0.05, min_samples=5, max_samples=50, max_time_s=10.0, warmup_calls=3,
                warmup_ms=1.0, sample_ms=0.1, max_calls_per_sample=64, max_warmup_s=10.0)


class FakeEvent:
    def __init__(self, api):
        self.api = api
        self.t = None

    def record(self):
        self.t = self.api.now

    def elapsed_time(self, end):
        return end.t - self.t


class FakeGraph:
    def __init__(self):
        self.cost = 0.0
        self.captured = False
        self.dropped = False


class FakeGraphAPI(G.GraphAPI):
    """A device with a clock in ms. The measured callable spends device time with
    ``work(ms)``; a captured graph replays the time its capture recorded."""

    name = "fake"

    def __init__(self):
        self.now = 0.0
        self.capturing = False
        self.in_stream = 0
        self.log: list = []
        self.graphs: list = []
        self.replay_error: Exception | None = None
        self.rng_depth = 0
        self.recovered = 0
        self.flushes = 0
        self.syncs = 0
        self._capture_cost = 0.0

    def work(self, ms):
        if self.capturing:
            self._capture_cost += ms
        else:
            self.now += ms

    @contextlib.contextmanager
    def stream(self):
        self.in_stream += 1
        try:
            yield
        finally:
            self.in_stream -= 1

    def synchronize(self):
        self.syncs += 1

    def event(self):
        return FakeEvent(self)

    def new_graph(self):
        g = FakeGraph()
        self.graphs.append(g)
        return g

    def capture(self, graph, body):
        assert self.in_stream, "capture must run on the side stream"
        self.log.append("capture-begin")
        self.capturing = True
        self._capture_cost = 0.0
        try:
            body()
        finally:
            self.capturing = False
            self.log.append("capture-end")
        graph.cost = self._capture_cost
        graph.captured = True

    def replay(self, graph):
        assert graph.captured and not graph.dropped
        if self.replay_error is not None:
            raise self.replay_error
        self.now += graph.cost

    def drop(self, graph):
        graph.dropped = True

    def is_capturing(self):
        return self.capturing

    @contextlib.contextmanager
    def rng_guard(self):
        self.rng_depth += 1
        self.log.append("rng-swap")
        try:
            yield
        finally:
            self.rng_depth -= 1
            self.log.append("rng-restore")

    def recover(self):
        self.recovered += 1
        super().recover()

    def can_flush_l2(self):
        return True

    def flush_l2(self):
        self.flushes += 1
        self.log.append("flush")


class Op:
    """A measured callable: costs ``ms`` of device time; can fail in a chosen phase."""

    def __init__(self, api, ms=0.01, fail_when_capturing=None, fail_on_call=None):
        self.api = api
        self.ms = ms
        self.fail_when_capturing = fail_when_capturing
        self.fail_on_call = fail_on_call
        self.calls = 0
        self.calls_before_capture = None

    def __call__(self):
        self.calls += 1
        if self.api.capturing and self.calls_before_capture is None:
            self.calls_before_capture = self.calls - 1
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise ValueError("boom in eager call")
        if self.api.capturing and self.fail_when_capturing is not None:
            raise self.fail_when_capturing
        self.api.work(self.ms)


class Direct:
    def __init__(self, value=0.5, error=None):
        self.calls = 0
        self.value = value
        self.error = error

    def __call__(self):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return Result(timed.TIMER_DIRECT, SampleStats([self.value] * 7, "direct"))


def _exits():
    seen = []
    return seen, lambda kind, message: seen.append((kind, message))


def _clean(api):
    assert not api.capturing
    assert api.rng_depth == 0
    assert all(g.dropped for g in api.graphs)


def test_graph_success_warms_up_before_capture():
    api = FakeGraphAPI()
    op = Op(api, ms=0.01)
    direct = Direct()
    res = G.measure_graph(op, FAST, api, direct)
    assert res.timer == "graph"
    assert direct.calls == 0
    assert res.fallback is None
    # warm-up: the first call plus at least warmup_calls more, and >= warmup_ms of calls
    assert op.calls_before_capture >= 1 + FAST.warmup_calls
    assert op.calls_before_capture * op.ms >= FAST.warmup_ms
    # k back-to-back calls per replay, about sample_ms worth (10), as a power of two
    assert res.extra["calls_per_replay"] == 8
    out = res.output("median")
    assert out.timer == "graph"
    assert out == pytest.approx(0.01)
    assert out.samples >= FAST.min_samples
    assert out.rsd == pytest.approx(0.0, abs=1e-9)
    assert out.calls == 8
    assert api.log.index("rng-swap") < api.log.index("capture-begin") < api.log.index("capture-end") < api.log.index("rng-restore")
    _clean(api)


def test_the_graph_timers_parts_are_accounted():
    """Where a graph measurement's wall time went (timed_value.timer_time: phases.timer)."""
    from opscreen.child import timed_value as T

    T._timer_time.clear()
    assert T.timer_time() == {}
    api = FakeGraphAPI()
    G.measure_graph(Op(api, ms=0.01), FAST, api, Direct())
    parts = dict(T._timer_time)
    assert set(parts) == {"first_s", "warmup_s", "capture_s", "samples_s"} and all(v >= 0 for v in parts.values())
    assert T.timer_time() == {}  # no whole measurement counted yet: that is the timing plugin's to add
    T.add_timer_time("timer_s", sum(parts.values()) + 0.5)
    got = T.timer_time()
    assert got["measurements"] == 1 and got["other_s"] == pytest.approx(0.5, abs=0.002) and got["host_s"] == 0.0
    assert got["timer_s"] == pytest.approx(got["first_s"] + got["warmup_s"] + got["capture_s"] + got["samples_s"] + 0.5,
                                           abs=0.003)
    T._timer_time.clear()


def test_capture_error_falls_back_for_that_shape_only():
    api = FakeGraphAPI()
    seen, exit_fn = _exits()
    bad = Op(api, fail_when_capturing=RuntimeError(CAPTURE_UNSUPPORTED))
    direct = Direct(value=0.25)
    res = G.measure_graph(bad, FAST, api, direct, exit_fn=exit_fn)
    assert res.timer == "graph-fallback:capture"
    assert direct.calls == 1
    assert seen == []  # the DSA hint in the text is not a fatal marker
    assert res.fallback["phase"] == "capture"
    assert res.fallback["class"] == "capture"
    assert res.fallback["kind"] == "capture-unsupported"
    out = res.output("median")
    assert out == pytest.approx(0.25) and out.timer == "graph-fallback:capture" and out.samples == 7
    assert api.recovered == 1
    _clean(api)
    # the next shape uses the graph again, on the same API
    good = G.measure_graph(Op(api, ms=0.02), FAST, api, Direct())
    assert good.timer == "graph"
    assert good.output() == pytest.approx(0.02)
    _clean(api)


def test_warmup_error_falls_back_without_capture():
    api = FakeGraphAPI()
    op = Op(api, fail_on_call=1)
    direct = Direct()
    res = G.measure_graph(op, FAST, api, direct)
    assert res.timer == "graph-fallback:warmup"
    assert res.fallback["class"] == "other"
    assert "capture-begin" not in api.log
    assert direct.calls == 1
    _clean(api)


def test_replay_error_falls_back():
    api = FakeGraphAPI()
    api.replay_error = RuntimeError("CUDA error: operation failed due to a previous error during capture")
    res = G.measure_graph(Op(api), FAST, api, Direct())
    assert res.timer == "graph-fallback:replay"
    assert res.fallback["kind"] == "capture-invalidated"
    _clean(api)


def test_fatal_error_in_capture_goes_to_the_exit_hook():
    api = FakeGraphAPI()
    seen, exit_fn = _exits()
    res = G.measure_graph(Op(api, fail_when_capturing=RuntimeError(DEVICE_ASSERT)), FAST, api, Direct(),
                          exit_fn=exit_fn)
    assert seen and seen[0][0] == "device-assert"
    assert "device-side assert triggered" in seen[0][1]
    # (the real exit hook never returns; this one did, so the fallback still ran)
    assert res.timer == "graph-fallback:capture"


def test_direct_failure_after_fallback_propagates():
    api = FakeGraphAPI()
    err = ValueError("the op itself is broken")
    with pytest.raises(ValueError, match="broken"):
        G.measure_graph(Op(api, fail_on_call=1), FAST, api, Direct(error=err))
    _clean(api)


def test_unclean_state_after_failure_is_reported_not_fatal(capsys):
    api = FakeGraphAPI()

    def stuck_recover():
        api.recovered += 1
        raise G.GraphStateError("the current stream is still capturing after a failed capture")

    api.recover = stuck_recover
    res = G.measure_graph(Op(api, fail_when_capturing=RuntimeError(CAPTURE_UNSUPPORTED)), FAST, api, Direct())
    assert res.timer == "graph-fallback:capture"
    assert "not clean" in capsys.readouterr().err


def test_l2_flush_uses_one_call_per_replay_and_flushes_each_sample():
    api = FakeGraphAPI()
    settings = Settings(**{**FAST.__dict__, "l2_flush": True})
    res = G.measure_graph(Op(api, ms=0.01), settings, api, Direct())
    assert res.timer == "graph"
    assert res.extra["calls_per_replay"] == 1
    assert api.flushes == res.stats.n


@pytest.mark.parametrize("ms, flushed", [(0.01, False), (0.5, True)])
def test_l2_flush_with_a_minimum_flushes_only_long_calls(ms, flushed):
    api = FakeGraphAPI()
    settings = Settings(**{**FAST.__dict__, "l2_flush": True, "l2_flush_min_ms": 0.1})
    res = G.measure_graph(Op(api, ms=ms), settings, api, Direct())
    assert res.timer == "graph" and res.extra["l2_flush"] is flushed
    assert res.output("median") == pytest.approx(ms)
    if flushed:
        assert res.extra["calls_per_replay"] == 1 and api.flushes == res.stats.n
    else:  # a short call keeps a warm L2 and many calls per sample
        assert res.extra["calls_per_replay"] == timing.calls_per_sample(ms, settings) > 1 and api.flushes == 0
    _clean(api)


def test_rest_ratio_idles_the_device_after_each_sample_and_times_no_launch_gap():
    """rest_ratio 1 (the default): every sample is a lead replay then the timed one,
    waited for, then a host sleep as long as both (a 50 % duty cycle); the numbers are
    unchanged."""
    api = FakeGraphAPI()
    replays = []
    real_replay = api.replay

    def replay(graph):
        replays.append(api.now)
        real_replay(graph)

    api.replay = replay
    slept = []
    settings = Settings(**{**FAST.__dict__, "rest_ratio": 1.0})
    res = G.measure_graph(Op(api, ms=0.05), settings, api, Direct(), sleep=slept.append)
    n_calls = res.extra["calls_per_replay"]
    assert res.timer == "graph" and res.extra["rest_ratio"] == 1.0
    assert res.output("median") == pytest.approx(0.05)
    assert len(slept) == res.stats.n
    # each sleep = rest x (lead + timed replay) in seconds
    assert slept == pytest.approx([2 * 0.05 * n_calls / 1000.0] * res.stats.n)
    assert api.syncs >= res.stats.n
    # sampling replays: 2 per sample (the probe's replays come before)
    assert len(replays) - (1 + G.PROBE_REPLAYS) == 2 * res.stats.n
    _clean(api)
    # rest_ratio 0: samples back to back, no sleep, no rest_ratio in the row's extras
    api2, slept2 = FakeGraphAPI(), []
    res2 = G.measure_graph(Op(api2, ms=0.05), Settings(**{**FAST.__dict__, "rest_ratio": 0.0}), api2, Direct(),
                           sleep=slept2.append)
    assert slept2 == [] and "rest_ratio" not in res2.extra and res2.output("median") == pytest.approx(0.05)


def test_rest_ratio_setting_from_the_environment():
    assert Settings.from_config({}, {"OPSCREEN_REST_RATIO": "0.5"}).rest_ratio == 0.5
    assert Settings.from_config({}, {"OPSCREEN_REST_RATIO": "-1"}).rest_ratio == 0.0
    assert Settings.from_config({}, {}).rest_ratio == 1.0 == Settings().rest_ratio  # on by default
    assert "rest_ratio=0.5" in Settings.from_config({}, {"OPSCREEN_REST_RATIO": "0.5"}).describe()


def test_graph_module_registers_its_provider():
    assert timed.graph_provider() is G.PROVIDER


def test_provider_with_injected_api():
    api = FakeGraphAPI()
    provider = G.GraphProvider(api)
    res = provider.measure(Op(api, ms=0.03), FAST, Direct())
    assert res.timer == "graph" and res.output() == pytest.approx(0.03)


def test_resolve_graph_api_finds_torch_cuda_graph():
    torch = pytest.importorskip("torch")
    dev, cls = G.resolve_graph_api("torch.cuda.CUDAGraph")
    assert dev is torch.cuda and cls is torch.cuda.CUDAGraph
    with pytest.raises(ImportError):
        G.resolve_graph_api("no_such_vendor_mod.npu.NPUGraph")


# -- TorchGraphAPI against fake torch objects ---------------------------------------


class FakeGen:
    def __init__(self):
        self.state = "real"
        self.sets = []

    def graphsafe_get_state(self):
        return self.state

    def clone_state(self):
        return "clone-of-" + self.state

    def graphsafe_set_state(self, s):
        self.sets.append(s)
        self.state = s


class FakeDev:
    __name__ = "fake.cuda"

    def __init__(self):
        self.default_generators = [FakeGen()]
        self.capturing = False
        self.pools = 0

    def graph_pool_handle(self):
        self.pools += 1
        return (0, self.pools)

    def current_device(self):
        return 0

    def is_current_stream_capturing(self):
        return self.capturing

    def synchronize(self):
        pass


class FakeTorchGraph:
    def __init__(self, dev, end_error=None):
        self.dev = dev
        self.end_error = end_error
        self.ended = 0

    def capture_begin(self, pool=None, capture_error_mode="global"):
        self.mode = capture_error_mode
        self.pool = pool
        self.dev.capturing = True

    def capture_end(self):
        self.ended += 1
        self.dev.capturing = False
        if self.end_error:
            raise self.end_error


class RecordingTorchAPI(G.TorchGraphAPI):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.allocator = []

    def _allocator_call(self, name, pool):
        self.allocator.append((name, pool))
        return True


def _torch_api(dev):
    api = RecordingTorchAPI("torch.cuda.CUDAGraph", device_type="cuda")
    api._dev, api._graph_cls = dev, None
    return api


def test_rng_guard_swaps_and_restores_the_generator_state():
    dev = FakeDev()
    api = _torch_api(dev)
    gen = dev.default_generators[0]
    with pytest.raises(RuntimeError):
        with api.rng_guard():
            assert gen.state == "clone-of-real"
            raise RuntimeError("capture died")
    assert gen.state == "real"
    assert gen.sets == ["clone-of-real", "real"]


def test_torch_capture_ends_an_invalidated_capture_and_reraises_the_body_error():
    dev = FakeDev()
    api = _torch_api(dev)
    g = FakeTorchGraph(dev, end_error=RuntimeError("CUDA error: operation failed due to a previous error during capture"))

    def body():
        raise RuntimeError(CAPTURE_UNSUPPORTED)

    with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
        api.capture(g, body)
    assert g.ended == 1 and not dev.capturing
    assert g.mode == "thread_local" and g.pool == (0, 1)
    # capture_end raised before telling the allocator: its pool is abandoned explicitly
    assert api.allocator == [("endAllocateToPool", (0, 1)), ("releasePool", (0, 1))]


def test_torch_capture_success_leaves_the_pool_to_reset():
    dev = FakeDev()
    api = _torch_api(dev)
    g = FakeTorchGraph(dev)
    api.capture(g, lambda: None)
    assert g.ended == 1 and api.allocator == []


def test_torch_capture_body_error_with_clean_end_keeps_the_pool_to_reset():
    dev = FakeDev()
    api = _torch_api(dev)
    g = FakeTorchGraph(dev)
    with pytest.raises(ValueError):
        api.capture(g, lambda: (_ for _ in ()).throw(ValueError("python error in the op")))
    assert g.ended == 1 and not dev.capturing and api.allocator == []


def test_torch_recover_refuses_a_stream_left_capturing():
    dev = FakeDev()
    api = _torch_api(dev)
    api._stream = object()
    dev.capturing = True
    with pytest.raises(G.GraphStateError):
        api.recover()
    assert api._stream is None  # a fresh side stream next time


class StreamDev(FakeDev):
    """A device module whose ``Stream()`` draws from a pool, as torch's does: each call
    gives the next stream."""

    def __init__(self):
        super().__init__()
        self.drawn = 0

    def Stream(self):
        self.drawn += 1
        return f"pool-stream-{self.drawn}"

    @contextlib.contextmanager
    def stream(self, s):
        self.current = s
        yield


def test_side_stream_is_the_processs_own_across_sessions_and_new_after_a_failed_capture():
    """A warm worker imports the graph plugin afresh for every op: each new API object
    must replay on the stream a fresh process's first op would (the first one drawn),
    not draw the pool's next one; after a failed capture the next one is new."""
    from opscreen.child import persist

    dev = StreamDev()
    persist.forget_side_stream("cuda", 0)
    seen = []
    for _ in range(3):  # three ops of one worker, each with its own plugin objects
        api = _torch_api(dev)
        with api.stream():
            seen.append(dev.current)
    assert seen == ["pool-stream-1"] * 3 and dev.drawn == 1
    api.recover()
    with _torch_api(dev).stream():
        assert dev.current == "pool-stream-2"
    persist.forget_side_stream("cuda", 0)


class LaunchBoundOp(Op):
    """A tiny kernel whose eager calls are dominated by host launch overhead:
    ``host_ms`` per eager call on top of ``ms`` of device time; a graph replays the
    device time only."""

    def __init__(self, api, ms, host_ms):
        super().__init__(api, ms=ms)
        self.host_ms = host_ms

    def __call__(self):
        super().__call__()
        if not self.api.capturing:
            self.api.now += self.host_ms


def test_graph_is_sized_from_device_time_not_eager_launch_time():
    api = FakeGraphAPI()
    op = LaunchBoundOp(api, ms=0.001, host_ms=0.09)
    res = G.measure_graph(op, FAST, api, Direct())
    assert res.timer == "graph"
    # eager: ~0.091 ms per call would give ~11 calls per sample; the device needs
    # 0.001 ms per call, so one sample holds sample_ms / 0.001 calls (capped).
    assert res.extra["calls_per_replay"] == timing.calls_per_sample(0.001, FAST)
    assert res.extra["calls_per_replay"] > 11
    assert res.output("median") == pytest.approx(0.001)
    _clean(api)


# -- a process that dies inside a capture (a library's C assert) --------------------------

def _child_config(tmp_path, monkeypatch, **extra):
    import json

    from opscreen.child import config as C

    cfg = tmp_path / "child_config.json"
    cfg.write_text(json.dumps({"schema": 1, "out_dir": str(tmp_path), **extra}))
    monkeypatch.setenv(C.ENV_CONFIG, str(cfg))
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "benchmark/test_x.py::test_x[a (b)] (call)")
    return tmp_path / C.CAPTURING_MARK


def test_the_capture_mark_names_the_test_while_capturing_and_is_gone_after(tmp_path, monkeypatch):
    mark = _child_config(tmp_path, monkeypatch)
    api = FakeGraphAPI()
    seen = []

    class Watching(Op):
        def __call__(self):
            if self.api.capturing:
                seen.append(mark.read_text().strip() if mark.exists() else None)
            super().__call__()

    res = G.GraphProvider(api).measure(Watching(api, ms=0.01), FAST, Direct())
    assert res.timer == "graph"
    assert seen and set(seen) == {"benchmark/test_x.py::test_x[a (b)]"}  # probe and final capture
    assert not mark.exists()


def test_the_capture_mark_is_gone_after_a_capture_that_raised(tmp_path, monkeypatch):
    mark = _child_config(tmp_path, monkeypatch)
    api = FakeGraphAPI()
    res = G.GraphProvider(api).measure(Op(api, fail_when_capturing=RuntimeError("operation not permitted when "
                                                                             "stream is capturing")), FAST, Direct())
    assert res.timer == "graph-fallback:capture"
    assert not mark.exists()


def test_a_test_listed_under_no_capture_is_timed_without_capture(tmp_path, monkeypatch):
    mark = _child_config(tmp_path, monkeypatch, no_capture=["benchmark/test_x.py::test_x[a (b)]"])
    api = FakeGraphAPI()
    op, direct = Op(api, ms=0.01), Direct()
    res = G.GraphProvider(api).measure(op, FAST, direct)
    assert res.timer == "graph-fallback:capture" and direct.calls == 1
    assert op.calls == 0 and not api.graphs and not mark.exists()
    assert res.fallback["kind"] == "capture-abort" and res.fallback["class"] == "capture"
    assert "died inside the graph capture of benchmark/test_x.py::test_x[a (b)]" in res.fallback["message"]
    # another test of the same op is still captured
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "benchmark/test_x.py::test_y (call)")
    assert G.GraphProvider(api).measure(Op(api, ms=0.01), FAST, Direct()).timer == "graph"


def test_a_capture_mark_that_cannot_be_written_does_not_cost_the_graph(tmp_path, monkeypatch):
    import json

    from opscreen.child import config as C

    cfg = tmp_path / "child_config.json"
    cfg.write_text(json.dumps({"schema": 1, "out_dir": str(tmp_path / "gone")}))  # no such folder
    monkeypatch.setenv(C.ENV_CONFIG, str(cfg))
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "benchmark/test_x.py::test_x (call)")
    api = FakeGraphAPI()
    assert G.GraphProvider(api).measure(Op(api, ms=0.01), FAST, Direct()).timer == "graph"

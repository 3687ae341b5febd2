"""Child plugin: graph capture and replay timing, with a per-shape fallback.

Loaded with ``-p opscreen.child.graph`` (before ``-p opscreen.child.timing``)
only where the plugin plan chose the graph timer; a run without graph capture
never imports this module. At import it registers :data:`PROVIDER` with
``opscreen.child.timed_value``; the timing plugin finds it there.

One measurement (:func:`measure_graph`), for each callable the suite times:

1. warm-up: on a side stream, the callable runs alone once (Triton compiles and
   autotunes there), then in growing batches until at least ``warmup_calls``
   calls and ``warmup_ms`` ms have passed and two consecutive batches agree on
   the per-call time within 10 %; no capture ever sees a first run;
2. capture: ``k`` back-to-back calls (about ``sample_ms`` worth; 1 with the L2
   flush) into a fresh graph, on the side stream, under a throwaway RNG state
   (the default generator's state is swapped for a clone during capture and
   restored after, so an aborted capture cannot leave it in capture mode and
   poison every later ``torch.randn``);
3. replay: one untimed replay, then samples, each one replay between two
   device events (after an L2 flush when enabled), ms / k per sample, batched
   without host sync in between; adaptive stopping as in timing.py.

When a phase raises, a device-fatal error ends the process (status 86, see
errors.py); anything else drops the graph, checks that no stream is left
capturing, waits for the device, and times that shape with the direct timer,
tagged ``graph-fallback:<phase>``. The run goes on; the next shape tries the
graph again.

The graph API is pluggable (:class:`GraphAPI`): :class:`TorchGraphAPI` drives
``torch.cuda.CUDAGraph`` (CUDA and HIP), and by the config's
``capabilities.graph_api`` also ``torch.musa.MUSAGraph`` or
``torch_npu.npu.NPUGraph``; tests inject a fake one on the CPU.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import time
from typing import Any, Callable, Optional

from . import config as _config
from . import fatal as _errors
from . import persist as _persist
from . import timed_value as _timed
from .timing import Result, Settings, adaptive_sample, calls_per_sample, warm_up

DEFAULT_GRAPH_API = "torch.cuda.CUDAGraph"
FALLBACK_L2_BYTES = 256 * 1024 * 1024  # triton's flush buffer size, when the L2 size is unknown


class GraphStateError(RuntimeError):
    """The device or stream state after a failed capture is not clean."""


class GraphAPI:
    """What the graph timer needs from a vendor's graph support.

    Methods: :meth:`stream` (a context manager making a non-default side stream
    current), :meth:`synchronize`, :meth:`event` (an object with ``record()`` and
    ``elapsed_time(end)`` in ms), :meth:`new_graph`, :meth:`capture` (run a body
    under capture; on failure leave no capture open and re-raise),
    :meth:`replay`, :meth:`drop` (release a graph and its memory),
    :meth:`is_capturing` (the current stream), :meth:`rng_guard` (a throwaway
    RNG state for the capture), :meth:`recover` (after a failure: clean state or
    raise), :meth:`can_flush_l2` / :meth:`flush_l2`.
    """

    name = "abstract"

    def stream(self):
        return contextlib.nullcontext()

    def synchronize(self) -> None:
        pass

    def event(self):
        raise NotImplementedError

    def new_graph(self):
        raise NotImplementedError

    def capture(self, graph, body: Callable[[], None]) -> None:
        raise NotImplementedError

    def replay(self, graph) -> None:
        raise NotImplementedError

    def drop(self, graph) -> None:
        pass

    def is_capturing(self) -> bool:
        return False

    def rng_guard(self):
        return contextlib.nullcontext()

    def recover(self) -> None:
        self.synchronize()
        if self.is_capturing():
            raise GraphStateError("the current stream is still capturing after a failed capture")

    def can_flush_l2(self) -> bool:
        return False

    def flush_l2(self) -> None:
        pass


def resolve_graph_api(dotted: str):
    """``"torch.cuda.CUDAGraph"`` -> (the module holding it, the class), importing
    the longest importable prefix (``torch_npu.npu.NPUGraph`` imports torch_npu)."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:-1]:
                obj = getattr(obj, p)
            return obj, getattr(obj, parts[-1])
        except AttributeError:
            continue
    raise ImportError(f"cannot resolve the graph API {dotted!r}")


class TorchGraphAPI(GraphAPI):
    """torch's graph classes (``torch.cuda.CUDAGraph`` and its vendor twins).

    Lifecycle: built once per process by :class:`GraphProvider`; resolves the
    device module lazily; keeps one side stream (the process's, from
    :mod:`opscreen.child.persist`), replaced after any failed capture, and one L2
    flush buffer (2 x the device's L2 size, or 256 MiB).
    """

    def __init__(self, graph_api: str = DEFAULT_GRAPH_API, device_type: Optional[str] = None,
                 capture_error_mode: str = "thread_local", device_index: Optional[int] = None):
        self.name = graph_api
        self.graph_api = graph_api
        self.device_type = device_type
        self.capture_error_mode = capture_error_mode
        self.device_index = device_index
        self._dev = None
        self._graph_cls = None
        self._stream = None
        self._flush_buf = None

    # -- plumbing
    def dev(self):
        if self._dev is None:
            self._dev, self._graph_cls = resolve_graph_api(self.graph_api)
            if self.device_type is None:
                self.device_type = getattr(self._dev, "__name__", "cuda").rsplit(".", 1)[-1]
        return self._dev

    def _index(self) -> int:
        if self.device_index is not None:
            return int(self.device_index)
        current = getattr(self.dev(), "current_device", None)
        return int(current()) if current else 0

    @contextlib.contextmanager
    def stream(self):
        dev = self.dev()
        if self._stream is None:  # one per process and device (a warm worker's ops share it: persist.py)
            # settled before the first measurement: the device in its steady state (persist.SETTLE_LAUNCHES)
            self._stream = _persist.settled_side_stream(sys.modules.get("torch"), self.device_type, self._index(),
                                                        dev.Stream)
        with dev.stream(self._stream):
            yield

    def synchronize(self) -> None:
        self.dev().synchronize()

    def event(self):
        return self.dev().Event(enable_timing=True)

    def new_graph(self):
        self.dev()
        return self._graph_cls()

    def is_capturing(self) -> bool:
        fn = getattr(self.dev(), "is_current_stream_capturing", None)
        return bool(fn()) if fn else False

    # -- capture
    def _new_pool(self):
        """A fresh memory-pool id for one capture (None where the vendor has no handle)."""
        handle = getattr(self.dev(), "graph_pool_handle", None)
        if handle is None:
            return None
        try:
            return handle()
        except Exception:
            return None

    def _begin(self, graph, pool) -> None:
        kwargs = {"capture_error_mode": self.capture_error_mode}
        if pool is not None:
            kwargs["pool"] = pool
        try:
            graph.capture_begin(**kwargs)
        except TypeError:
            graph.capture_begin(*(() if pool is None else (pool,)))

    def _allocator_call(self, name: str, pool) -> bool:
        """``torch._C._cuda_<name>(device, pool)``; False when absent or refused."""
        if pool is None or not self.graph_api.startswith("torch.cuda."):
            return False
        try:
            import torch

            fn = getattr(torch._C, f"_cuda_{name}", None)
            if fn is None:
                return False
            fn(self._index(), pool)
            return True
        except Exception:
            return False

    def abandon_pool(self, pool) -> None:
        """After a ``capture_end`` that raised before telling the allocator: stop
        routing allocations to the capture's pool and release it, so no stale
        capture stays registered with the caching allocator (``reset()`` only
        releases pools of captures that ended)."""
        if self._allocator_call("endAllocateToPool", pool):
            self._allocator_call("releasePool", pool)

    def capture(self, graph, body: Callable[[], None]) -> None:
        self.synchronize()
        pool = self._new_pool()
        self._begin(graph, pool)
        try:
            body()
        except BaseException:
            # end the capture on this stream (capture_end checks it is the same one);
            # an invalidated capture makes capture_end raise: the body's error matters
            ended = False
            if self.is_capturing():
                try:
                    graph.capture_end()
                    ended = True
                except Exception:
                    pass
            if not ended:
                self.abandon_pool(pool)
            raise
        try:
            graph.capture_end()
        except BaseException:
            self.abandon_pool(pool)
            raise

    def replay(self, graph) -> None:
        graph.replay()

    def drop(self, graph) -> None:
        try:
            graph.reset()
        except Exception:
            pass

    @contextlib.contextmanager
    def rng_guard(self):
        """Swap the default generator's state for a clone during capture.

        The graph registers whatever state is current when it captures, so it
        keeps the clone; a capture that dies half-way leaves only the clone in
        capture mode. The real state is restored whatever happens.
        """
        gen = None
        try:
            gens = getattr(self.dev(), "default_generators", None)
            gen = gens[self._index()] if gens else None
        except Exception:
            gen = None
        if gen is None or not all(hasattr(gen, a) for a in ("graphsafe_get_state", "graphsafe_set_state", "clone_state")):
            yield
            return
        try:
            saved = gen.graphsafe_get_state()
            gen.graphsafe_set_state(gen.clone_state())
        except Exception:
            yield
            return
        try:
            yield
        finally:
            gen.graphsafe_set_state(saved)

    def recover(self) -> None:
        if self._stream is not None:  # never capture again on a stream whose capture went wrong
            _persist.forget_side_stream(self.device_type, self._index())
        self._stream = None
        self.synchronize()
        if self.is_capturing():
            raise GraphStateError("the current stream is still capturing after a failed capture")

    # -- L2 flush
    def l2_flush_bytes(self) -> int:
        try:
            props = self.dev().get_device_properties(self._index())
            size = getattr(props, "L2_cache_size", None) or getattr(props, "l2_cache_size", None)
            if size:
                return 2 * int(size)
        except Exception:
            pass
        return FALLBACK_L2_BYTES

    def can_flush_l2(self) -> bool:
        return True

    def flush_l2(self) -> None:
        if self._flush_buf is None:
            import torch

            self.dev()
            device = torch.device(self.device_type, self._index())
            self._flush_buf = torch.empty(self.l2_flush_bytes(), dtype=torch.int8, device=device)
        self._flush_buf.zero_()


# The probe graph that sizes a sample: this many calls, replayed this many times.
PROBE_CALLS = 16
PROBE_REPLAYS = 3


def current_test() -> Optional[str]:
    """The node id of the test pytest is running (``PYTEST_CURRENT_TEST`` less its phase)."""
    cur = os.environ.get("PYTEST_CURRENT_TEST")
    return cur.rsplit(" (", 1)[0] if cur else None


class CaptureMark:
    """The op dir's :data:`~opscreen.child.config.CAPTURING_MARK` file, holding ``test``
    while a capture runs: what a process that dies inside the capture leaves behind."""

    def __init__(self, path: "os.PathLike[str] | str", test: Optional[str]):
        self.path, self.test = os.fspath(path), test or "?"

    @contextlib.contextmanager
    def held(self):
        """Hold the mark while the body runs. A mark that cannot be written (the op dir
        gone, a full disk) is left out: the capture itself must not fail for it."""
        try:
            with open(self.path, "w", encoding="utf-8") as fh:
                fh.write(self.test + "\n")
        except OSError:
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


def not_captured(test: str) -> Exception:
    """The error a test listed under ``no_capture`` falls back with (its rows say why)."""
    return RuntimeError(f"capture-abort: an earlier attempt died inside the graph capture of {test}; "
                        "this attempt times it without capture")


def measure_graph(call: Callable[[], Any], settings: Settings, api: GraphAPI,
                  direct: Callable[[], Result], clock: Callable[[], float] = time.perf_counter,
                  exit_fn: Optional[Callable[[str, str], Any]] = None,
                  sleep: Callable[[float], Any] = time.sleep, mark: Optional[CaptureMark] = None) -> Result:
    """Time ``call`` by graph replay; on a recoverable failure, time it with ``direct()``.

    Returns a :class:`~opscreen.child.timing.Result` with timer ``graph``, or the
    direct result retagged ``graph-fallback:<phase>`` with the error in
    ``fallback``. A device-fatal error calls ``exit_fn(kind, message)``
    (default: ``config.fatal_exit``, which does not return). ``mark``, when given,
    is held during each capture (a process that dies there leaves it behind).
    """
    run = _GraphRun(call, settings, api, sleep, mark)
    try:
        with api.stream():
            api.synchronize()
            parts = _timed.TimerParts()
            w = warm_up(run.run_batch, settings, clock, parts)
            run.size_and_capture(w.ms_per_call)
            run.phase = "replay"
            parts.mark("capture_s")
            stats = adaptive_sample(run.take, settings, clock)
            parts.mark("samples_s")
            parts.commit()
        extra = {"calls_per_replay": run.n_calls, "warmup_calls": w.calls, "l2_flush": run.flush}
        if settings.rest_ratio > 0:
            extra["rest_ratio"] = settings.rest_ratio
        return Result(_timed.TIMER_GRAPH, stats, extra=extra)
    except Exception as exc:
        verdict = _errors.exit_if_fatal(exc, exit_fn)
        if run.graph is not None:
            api.drop(run.graph)
            run.graph = None
        try:
            api.recover()
        except Exception as exc2:
            _errors.exit_if_fatal(exc2, exit_fn)
            print(f"opscreen graph: state after the failed {run.phase} is not clean: {_config.one_line(exc2, 200)}",
                  file=sys.stderr)
        return direct().as_fallback(run.phase, verdict, exc)
    finally:
        if run.graph is not None:
            api.drop(run.graph)


class _GraphRun:
    """The state of one :func:`measure_graph`: the phase it is in (named by a
    fallback), the captured graph (dropped on failure), the calls per replay and
    whether the L2 is flushed before each sample."""

    def __init__(self, call: Callable[[], Any], settings: Settings, api: GraphAPI, sleep: Callable[[float], Any],
                 mark: Optional[CaptureMark] = None):
        self.call, self.settings, self.api, self.sleep, self.mark = call, settings, api, sleep, mark
        self.phase = "warmup"
        self.graph = None
        self.n_calls = 1
        self.flush = False

    def run_batch(self, k: int) -> float:
        """``k`` eager calls, timed by device events (the warm-up's measure)."""
        api = self.api
        start, end = api.event(), api.event()
        start.record()
        for _ in range(k):
            self.call()
        end.record()
        api.synchronize()
        return float(start.elapsed_time(end))

    def capture(self, n: int) -> None:
        """Capture a graph of ``n`` calls."""
        self.graph = self.api.new_graph()  # set first: a failed capture is dropped by the caller

        def body():
            for _ in range(n):
                self.call()

        with self.api.rng_guard(), (self.mark.held() if self.mark else contextlib.nullcontext()):
            self.api.capture(self.graph, body)

    def size_and_capture(self, eager_ms_per_call: float) -> None:
        """Decide the calls per replay and the L2 flush, and capture that graph."""
        settings, api = self.settings, self.api
        want_flush = bool(settings.l2_flush and api.can_flush_l2())
        self.flush = want_flush and settings.l2_flush_min_ms <= 0
        self.phase = "capture"
        if self.flush:
            self.n_calls = 1
            self.capture(self.n_calls)
            return
        # Size the sample from the *device* time per call, measured on a small
        # probe graph: the eager warm-up time is mostly host launch overhead for
        # small shapes (abs on 64x64: ~90 us eager, ~1 us on the device), and a
        # graph sized from it would hold so few calls that the replay's own
        # launch latency and jitter would swamp the kernel.
        probe_n = max(1, min(PROBE_CALLS, calls_per_sample(eager_ms_per_call, settings)))
        self.capture(probe_n)
        self.phase = "replay"
        device_ms = self._probe_ms_per_call(probe_n)
        if want_flush and device_ms >= settings.l2_flush_min_ms:
            # long enough that one call per replay costs no accuracy: flush the L2
            # before each sample so every sample starts from the same cold cache
            self.flush, self.n_calls = True, 1
        else:
            self.n_calls = calls_per_sample(device_ms, settings)
        if self.n_calls != probe_n:
            self.phase = "capture"
            api.drop(self.graph)
            self.graph = None
            self.capture(self.n_calls)

    def _probe_ms_per_call(self, probe_n: int) -> float:
        """Device ms per call from PROBE_REPLAYS replays of the probe graph."""
        api = self.api
        api.replay(self.graph)  # untimed: keeps the device busy while the timed ones queue
        start, end = api.event(), api.event()
        start.record()
        for _ in range(PROBE_REPLAYS):
            api.replay(self.graph)
        end.record()
        api.synchronize()
        return float(start.elapsed_time(end)) / (PROBE_REPLAYS * probe_n)

    def timed_replay(self):
        if self.flush:
            self.api.flush_l2()
        start, end = self.api.event(), self.api.event()
        start.record()
        self.api.replay(self.graph)
        end.record()
        return start, end

    def take(self, b: int) -> list:
        """``b`` samples, ms per call each."""
        if self.settings.rest_ratio > 0:
            return self.take_rested(b)
        self.api.replay(self.graph)  # untimed: keeps the device busy while the timed ones queue
        pairs = [self.timed_replay() for _ in range(b)]
        self.api.synchronize()
        return [float(s.elapsed_time(e)) / self.n_calls for s, e in pairs]

    def take_rested(self, b: int) -> list:
        # Each sample: an untimed lead replay (the timed replay is launched while
        # it runs, so no launch gap is timed), the timed replay, then the device
        # idles rest x the busy time: a duty cycle of 1 / (1 + rest).
        rest = self.settings.rest_ratio
        out = []
        for _ in range(b):
            self.api.replay(self.graph)
            start, end = self.timed_replay()
            self.api.synchronize()
            ms = float(start.elapsed_time(end))
            out.append(ms / self.n_calls)
            self.sleep(rest * 2.0 * ms / 1000.0)
        return out


class GraphProvider:
    """What timing.py calls: ``measure(call, settings, direct) -> Result``.

    Builds its :class:`GraphAPI` on first use from the child config
    (``capabilities.graph_api``, ``device_type``, ``device_ordinal``) unless one
    is given (tests).
    """

    def __init__(self, api: Optional[GraphAPI] = None):
        self._api = api

    def api(self, settings: Settings) -> GraphAPI:
        if self._api is None:
            cfg = _config.load()
            caps = cfg.get("capabilities") or {}
            ordinal = cfg.get("device_ordinal")
            self._api = TorchGraphAPI(
                caps.get("graph_api") or DEFAULT_GRAPH_API,
                device_type=cfg.get("device_type"),
                capture_error_mode=settings.capture_error_mode,
                device_index=int(ordinal) if isinstance(ordinal, int) else None,
            )
        return self._api

    def set_api(self, api: Optional[GraphAPI]) -> None:
        self._api = api

    def measure(self, call: Callable[[], Any], settings: Settings, direct: Callable[[], Result]) -> Result:
        """Graph-time ``call``, but a test the child config lists under ``no_capture`` (its
        capture killed an earlier attempt) goes straight to the fallback, phase ``capture``."""
        cfg = _config.load()
        test = current_test()
        if test is not None and test in (cfg.get("no_capture") or ()):
            exc = not_captured(test)
            return direct().as_fallback("capture", _errors.Verdict(_errors.CAPTURE, "capture-abort", str(exc)), exc)
        out_dir = cfg.get("out_dir")
        mark = CaptureMark(os.path.join(out_dir, _config.CAPTURING_MARK), test) if out_dir else None
        return measure_graph(call, settings, self.api(settings), direct, mark=mark)


PROVIDER = GraphProvider()
_timed.register_graph_provider(PROVIDER)


def pytest_report_header(config):
    caps = _config.load().get("capabilities") or {}
    return (f"opscreen graph: {caps.get('graph_api') or DEFAULT_GRAPH_API} (per-shape fallback to the direct timer; "
            f"{_persist.SETTLE_LAUNCHES} launches settle the device first)")

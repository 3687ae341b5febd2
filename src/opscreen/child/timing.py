"""Child plugin: replaces the suite's timing call with a timer you can trust.

Loaded with ``-p opscreen.child.timing`` (after ``-p opscreen.child.graph`` when
graph capture is planned). It replaces ``triton.testing.do_bench`` and
``triton.testing.do_bench_cudagraph`` (and the vendor Triton timers FlagGems calls:
``triton.musa_testing``, ``triton.backends.ascend.testing``) and the ``do_bench`` /
``do_bench_cudagraph`` globals of the suite's base module (``benchmark.base``;
see ``timing.patch_modules``) with one measuring function, whose timer comes
from the child config's ``timer`` (the harness already resolved ``auto``):

``graph``
    explicit warm-up, capture on a side stream under a throwaway RNG state,
    replay timed with device events; a shape whose warm-up, capture or replay
    fails falls back to the direct timer, tagged ``graph-fallback:<phase>``
    (the machinery lives in ``opscreen.child.graph``; without that plugin the
    direct timer is used).
``profiler``
    the kernels' own device time per call from torch.profiler, with the
    host-inclusive latency beside it (``opscreen.child.profiler``, loaded where
    the backend declares ``device_profiler``). The graph timer's fallback uses it
    instead of the direct timer where it sees device kernels, tagged
    ``graph-fallback:<phase>+profiler``.
``direct``
    the suite's own ``do_bench`` (the function replaced), asked for all its
    samples so the value carries a sample count and noise.
``wallclock``
    a monotonic-clock timer for the CPU backend.

Graph and wallclock sample adaptively: after ``min_samples`` they stop as soon
as the relative standard deviation of the samples is at most ``target_rsd`` (in the
spirit of nvbench's ``stdrel`` criterion), or, with ``target_ci`` set (CPU slots), the
median's 95 % interval is that narrow, or at ``max_samples``, or when ``max_time_s``
is spent. With ``host_malloc`` steady (CPU slots) glibc's allocator thresholds are
held before the first measurement (:mod:`opscreen.child.host_malloc`). Each call returns a
:class:`~opscreen.child.timed_value.TimedFloat`.

Lifecycle: ``pytest_configure`` reads the config and patches what is already
imported; ``pytest_collection_finish`` and every ``pytest_runtest_setup``
patch again (idempotent) to catch modules the suite imported meanwhile;
``pytest_unconfigure`` restores the originals. A nested call (an autotuner
benchmarking inside a measured call) or a call with ``quantiles`` (the
autotuners' signature; the suite never passes it) goes to the original.
A device-fatal error seen by the replacement ends the process with status 86
(``OPSCREEN-FATAL:`` line; see errors.py). Python's garbage collector is off while
a call is measured (collected just before).

Like with like: when one side of a row (the suite measures torch's callable, then
the library's, for each shape) is graph-timed and the other fell back, the
graph-timed callable is timed again with the fallback's timer and the figure kept
in its value's ``alt``; the report plugin then writes the row with both sides of
one timer (child/report.py).

Imports only the standard library and pytest at module level; torch lazily.
Knobs and warm-up semantics: docs/timing.md.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import inspect
import math
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Optional, Sequence

import pytest

from . import autotune as _autotune
from . import config as _config
from . import estimator as _estimator
from . import fatal as _errors
from . import host_malloc as _host_malloc
from . import inputs as _inputs
from . import timed_value as _timed
from .timed_value import (
    FALLBACK_PREFIX,
    PROFILER_SUFFIX,
    TIMER_DIRECT,
    TIMER_GRAPH,
    TIMER_PROFILER,
    TIMER_WALLCLOCK,
    ProfilerUnavailable,
    TimedFloat,
    graph_provider,
    profiler_provider,
    timer_method,
)

TRITON_TESTING = "triton.testing"
BENCH_ATTRS = ("do_bench", "do_bench_cudagraph")
# Ascend's Triton exposes its own event timer that FlagGems calls on that vendor.
ASCEND_TESTING = "triton.backends.ascend.testing"
# Moore Threads' Triton: FlagGems' benchmark calls triton.musa_testing.do_bench on musa.
MUSA_TESTING = "triton.musa_testing"
MAX_WARMUP_CALLS = 1_000_000
SETTLE_TOLERANCE = 0.10  # warm-up: per-call time of two consecutive batches within 10 %
SETTLE_BUDGET = 20.0  # warm-up: give up waiting to settle after 20 x warmup_ms (at least 20 ms) of calls


# -- settings -------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The timing knobs (docs/timing.md). Build with :meth:`from_config`."""

    target_rsd: float = 0.005
    # Stop too once the median's 95 % interval is this narrow (a fraction of it; 0: off).
    # Host-timed samples carry rare slow outliers that keep the rsd over target_rsd for
    # good, while the median they report is pinned down long before the time cap.
    target_ci: float = 0.0
    min_samples: int = 10
    max_samples: int = 1000
    max_time_s: float = 2.0
    warmup_calls: int = 3
    warmup_ms: float = 25.0
    l2_flush: bool = False
    sample_ms: float = 1.0
    max_calls_per_sample: int = 1024
    max_warmup_s: float = 30.0
    # With l2_flush on: flush only for cases whose device time per call is at least
    # this (ms); smaller cases keep many calls per sample and a warm L2. 0: flush all.
    l2_flush_min_ms: float = 0.0
    # Graph timer: after each sample, leave the device idle for this many times its
    # busy time (0: samples back to back). A GEMM near the power limit lowers its
    # clocks under back-to-back replays and reads 10-20 % slower in some processes;
    # idle time between samples keeps it below the limit (docs/timing.md).
    rest_ratio: float = 1.0
    capture_error_mode: str = "thread_local"
    # What the direct, wallclock and profiler timers report of their samples
    # (opscreen.child.estimator; the graph timer keeps the median).
    estimator: str = _estimator.DEFAULT
    # Time a shape the graph timer cannot capture with the profiler, where it sees kernels.
    profiler_fallback: bool = True
    # The host allocator: "steady" holds glibc's mmap and trim thresholds (opscreen.child.host_malloc).
    host_malloc: str = "system"

    @classmethod
    def from_config(cls, cfg: Optional[dict] = None, environ: Optional[dict] = None) -> "Settings":
        raw = _config.timing_settings(cfg, environ)
        return cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw}).normalized()

    def normalized(self) -> "Settings":
        min_samples = max(1, int(self.min_samples))
        return Settings(
            target_rsd=max(0.0, float(self.target_rsd)),
            target_ci=max(0.0, float(self.target_ci)),
            min_samples=min_samples,
            max_samples=max(min_samples, int(self.max_samples)),
            max_time_s=max(1e-6, float(self.max_time_s)),
            warmup_calls=max(0, int(self.warmup_calls)),
            warmup_ms=max(0.0, float(self.warmup_ms)),
            l2_flush=bool(self.l2_flush),
            sample_ms=max(1e-6, float(self.sample_ms)),
            max_calls_per_sample=max(1, int(self.max_calls_per_sample)),
            max_warmup_s=max(1e-6, float(self.max_warmup_s)),
            l2_flush_min_ms=max(0.0, float(self.l2_flush_min_ms)),
            rest_ratio=max(0.0, float(self.rest_ratio)),
            capture_error_mode=str(self.capture_error_mode),
            estimator=self.estimator if self.estimator in _estimator.ESTIMATORS else _estimator.DEFAULT,
            profiler_fallback=bool(self.profiler_fallback),
            host_malloc=self.host_malloc if self.host_malloc in _host_malloc.MODES else "system",
        )

    def describe(self) -> str:
        return (f"target_rsd={self.target_rsd:g} target_ci={self.target_ci:g} min_samples={self.min_samples} "
                f"max_samples={self.max_samples} max_time_s={self.max_time_s:g} warmup_calls={self.warmup_calls} "
                f"warmup_ms={self.warmup_ms:g} sample_ms={self.sample_ms:g} l2_flush={self._flush_words()} rest_ratio={self.rest_ratio:g} "
                f"estimator={self.estimator} host_malloc={self.host_malloc}")

    def _flush_words(self) -> str:
        if not self.l2_flush:
            return "off"
        return f"on(>={self.l2_flush_min_ms:g}ms)" if self.l2_flush_min_ms > 0 else "on"


# -- statistics and the stopping rule ---------------------------------------------


def rsd(values: Sequence[float]) -> Optional[float]:
    """Relative standard deviation (sample stdev / |mean|); None below two samples."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    sd = statistics.stdev(values)
    if mean == 0:
        return 0.0 if sd == 0 else math.inf
    return sd / abs(mean)


@dataclass
class SampleStats:
    """The samples of one measurement (ms per call) and why sampling stopped:
    ``target_rsd``, ``target_ci``, ``max_samples``, ``max_time`` or ``direct`` (the suite's
    timer chose)."""

    values: list
    reason: str

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def rsd(self) -> Optional[float]:
        return rsd(self.values)

    def statistic(self, return_mode: Optional[str]) -> float:
        if return_mode == "mean":
            return self.mean
        if return_mode == "min":
            return min(self.values)
        if return_mode == "max":
            return max(self.values)
        return self.median


def adaptive_sample(take_batch: Callable[[int], Sequence[float]], settings: Settings,
                    clock: Callable[[], float] = time.perf_counter) -> SampleStats:
    """Collect samples in batches until the noise target, the sample cap or the time cap.

    ``take_batch(k)`` returns k samples (ms per call). The first batch is
    ``min_samples``; later ones grow by a quarter of what is there, never past
    the caps. After each batch: stop when at least ``min_samples`` samples have
    an rsd <= ``target_rsd``, or (with ``target_ci`` > 0) a median whose distribution-free
    95 % interval is at most ``target_ci`` of it wide each side; else at ``max_samples``;
    else when ``max_time_s`` (measured by ``clock``) is spent and at least two samples exist.
    """
    values: list = []
    start = clock()
    batch = settings.min_samples
    while True:
        got = list(take_batch(batch))
        if not got:
            raise RuntimeError("the sampler returned no samples")
        values.extend(float(v) for v in got)
        n = len(values)
        elapsed = clock() - start
        noise = rsd(values)
        if n >= settings.min_samples and noise is not None and noise <= settings.target_rsd:
            return SampleStats(values, "target_rsd")
        if settings.target_ci > 0 and n >= settings.min_samples:
            pinned = _estimator.median_halfwidth(values)
            if pinned is not None and pinned <= settings.target_ci:
                return SampleStats(values, "target_ci")
        if n >= settings.max_samples:
            return SampleStats(values, "max_samples")
        if elapsed >= settings.max_time_s and n >= min(2, settings.min_samples):
            return SampleStats(values, "max_time")
        batch = max(1, math.ceil(n / 4))
        if elapsed > 0:
            per_sample = elapsed / n
            batch = min(batch, max(1, math.ceil((settings.max_time_s - elapsed) / per_sample - 1e-9)))
        batch = max(1, min(batch, settings.max_samples - n))


@dataclass
class Warmup:
    """What the warm-up did: calls made (the first included), the first call's time,
    the last per-call time (ms) and why it stopped (``settled``, ``unsettled`` or
    ``max_warmup``)."""

    calls: int
    first_ms: float
    ms_per_call: float
    reason: str


def warm_up(run_batch: Callable[[int], float], settings: Settings,
            clock: Callable[[], float] = time.perf_counter, parts: Optional[_timed.TimerParts] = None) -> Warmup:
    """Call the measured callable until JIT compilation and autotuning are done and
    its per-call time has settled.

    ``run_batch(k)`` runs it k times, waits for the device and returns the
    elapsed ms. The first call runs alone and unbounded (Triton compiles and
    autotunes there). Then batches (growing towards ``warmup_ms``) run until
    at least ``warmup_calls`` calls and ``warmup_ms`` ms after the first, and
    two consecutive batches agree on the per-call time within 10 %
    (``settled``). A callable too noisy to settle stops after 20 x
    ``warmup_ms`` of calls (``unsettled``); ``max_warmup_s`` (host clock)
    caps the whole (``max_warmup``). ``parts``, when given, is marked with the
    first call (``first_s``) and the rest of the warm-up (``warmup_s``).
    """
    w = _warm_up(run_batch, settings, clock, parts)
    if parts is not None:
        parts.mark("warmup_s")
    return w


def _warm_up(run_batch: Callable[[int], float], settings: Settings, clock: Callable[[], float],
             parts: Optional[_timed.TimerParts]) -> Warmup:
    t0 = clock()
    first = float(run_batch(1))
    if parts is not None:
        parts.mark("first_s")
    calls = 1
    total = 0.0
    prev: Optional[float] = None
    batch = max(1, settings.warmup_calls)
    per = first
    while True:
        ms = float(run_batch(batch))
        calls += batch
        total += ms
        per = ms / batch
        settled = prev is not None and abs(per - prev) <= SETTLE_TOLERANCE * max(prev, 0.0)
        if calls - 1 >= settings.warmup_calls and total >= settings.warmup_ms:
            if settled:
                return Warmup(calls, first, per, "settled")
            if total >= SETTLE_BUDGET * max(settings.warmup_ms, 1.0):
                return Warmup(calls, first, per, "unsettled")
        if clock() - t0 >= settings.max_warmup_s or calls >= MAX_WARMUP_CALLS:
            return Warmup(calls, first, per, "max_warmup")
        prev = per
        need = math.ceil((settings.warmup_ms - total) / per) if per > 0 else batch * 2
        batch = max(1, min(batch * 2, max(need, batch)))


def calls_per_sample(ms_per_call: float, settings: Settings) -> int:
    """How many calls one sample (one graph replay, one timed loop) holds: about
    ``sample_ms`` worth, rounded to a power of two (so that two runs of the same
    case nearly always pick the same count, and any per-sample overhead amortises
    the same way), between 1 and ``max_calls_per_sample``."""
    cap = settings.max_calls_per_sample
    if not ms_per_call or ms_per_call <= 0 or math.isnan(ms_per_call):
        return cap
    want = settings.sample_ms / ms_per_call
    if want >= cap:
        return cap
    if want <= 1:
        return 1
    return int(min(cap, 2 ** round(math.log2(want))))


# -- results --------------------------------------------------------------------


@dataclass
class Result:
    """One measurement: the timer that made it, its samples (or a single value when
    the timer gave one number) and, for a graph fallback, what went wrong."""

    timer: str
    stats: Optional[SampleStats] = None
    value: Optional[float] = None
    fallback: Optional[dict] = None
    extra: dict = field(default_factory=dict)

    def as_fallback(self, phase: str, verdict: "_errors.Verdict", error: BaseException) -> "Result":
        return Result(
            FALLBACK_PREFIX + phase + (PROFILER_SUFFIX if self.timer == TIMER_PROFILER else ""),
            self.stats,
            self.value,
            {"phase": phase, "class": verdict.cls, "kind": verdict.kind,
             "message": _config.one_line(verdict.message or f"{type(error).__name__}: {error}", 300)},
            dict(self.extra),
        )

    def output(self, return_mode: Optional[str] = "median", estimator: str = _estimator.DEFAULT):
        """What the replaced function returns: a TimedFloat, or a list for ``all``. A
        caller asking for the median (the suite) gets ``estimator`` of the samples,
        except from the graph timer (its samples are replays of many calls: the median)."""
        tags = {"host_ms": self.extra.get("host_ms"), "fallback": self.fallback_text()}
        if self.stats is not None:
            if return_mode == "all":
                return list(self.stats.values)
            if return_mode not in (None, "median"):
                return TimedFloat(self.stats.statistic(return_mode), self.timer, self.stats.n, self.stats.rsd,
                                  self.calls(), **tags)
            est = _estimator.DEFAULT if self.timer == TIMER_GRAPH else estimator
            values = self.stats.values
            return TimedFloat(_estimator.estimate(values, est), self.timer, self.stats.n, self.stats.rsd, self.calls(),
                              ci=_estimator.relative_halfwidth(values, est), **tags)
        if isinstance(self.value, (list, tuple)):
            return list(self.value)
        return TimedFloat(self.value if self.value is not None else math.nan, self.timer, None, None, **tags)

    def fallback_text(self) -> Optional[str]:
        """``<phase>: <kind>: <the error's line>`` for a graph fallback (the row's ``fallback`` tag)."""
        f = self.fallback
        return f"{f['phase']}: {f['kind'] or f['class']}: {f['message']}" if f else None

    def calls(self) -> Optional[int]:
        """Calls of the measured callable per sample, where the timer said."""
        n = self.extra.get("calls_per_replay", self.extra.get("calls_per_sample"))
        return n if isinstance(n, int) else None


# -- the timers -------------------------------------------------------------------


def make_call(fn: Callable[[], Any], grad_to_none: Optional[Sequence[Any]] = None) -> Callable[[], Any]:
    """The measured callable: ``fn``, with gradients reset first when asked (as triton does)."""
    if not grad_to_none:
        return fn

    def call():
        for x in grad_to_none:
            x.grad = None
        return fn()

    return call


class WallclockTimer:
    """Monotonic-clock timing with adaptive sampling (the CPU backend's timer).

    One sample is ``k`` back-to-back calls timed together (``k`` from the
    warm-up, about ``sample_ms`` worth), divided by ``k``. ``sync`` waits for a
    device when wallclock timing is asked for one (None on the CPU).
    """

    name = TIMER_WALLCLOCK

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.perf_counter,
                 sync: Optional[Callable[[], None]] = None):
        self.settings = settings
        self.clock = clock
        self.sync = sync

    def measure(self, call: Callable[[], Any]) -> Result:
        clock, sync = self.clock, self.sync

        def run_batch(k: int) -> float:
            if sync:
                sync()
            t = clock()
            for _ in range(k):
                call()
            if sync:
                sync()
            return (clock() - t) * 1e3

        parts = _timed.TimerParts()
        w = warm_up(run_batch, self.settings, clock, parts)
        k = calls_per_sample(w.ms_per_call, self.settings)
        stats = adaptive_sample(lambda b: [run_batch(k) / k for _ in range(b)], self.settings, clock)
        parts.mark("samples_s")
        parts.commit()
        return Result(TIMER_WALLCLOCK, stats, extra={"calls_per_sample": k, "warmup_calls": w.calls})


_ALL_UNSUPPORTED: set = set()


def _params(fn) -> Optional[set]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None


def _raised_in(exc: BaseException, fn) -> bool:
    """True when ``exc`` was raised by ``fn``'s own code (not by something it called)."""
    code = getattr(fn, "__code__", None)
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return code is not None and last is not None and last.tb_frame.f_code is code


@dataclass
class BenchCall:
    """A call of ``do_bench``/``do_bench_cudagraph`` with its arguments by name."""

    kind: str
    fn: Callable[[], Any]
    warmup: Any = None
    rep: Any = None
    grad_to_none: Any = None
    quantiles: Any = None
    return_mode: Optional[str] = "mean"
    extra: dict = field(default_factory=dict)


_TRITON_ORDER = {
    "do_bench": ("warmup", "rep", "grad_to_none", "quantiles", "return_mode"),
    "do_bench_cudagraph": ("rep", "grad_to_none", "quantiles", "return_mode"),
}


def parse_call(kind: str, original, fn, args: tuple, kwargs: dict) -> BenchCall:
    """Name the arguments of a timing call as the original function would bind them."""
    named: dict = {}
    try:
        sig = inspect.signature(original)
        bound = sig.bind(fn, *args, **kwargs)
        bound.apply_defaults()
        named = dict(bound.arguments)
        named.pop(next(iter(sig.parameters)), None)  # the callable itself
        for name, p in sig.parameters.items():
            if p.kind is inspect.Parameter.VAR_KEYWORD and name in named:
                named.update(named.pop(name))
            elif p.kind is inspect.Parameter.VAR_POSITIONAL:
                named.pop(name, None)
    except (TypeError, ValueError):
        order = _TRITON_ORDER.get(kind, _TRITON_ORDER["do_bench"])
        named = dict(zip(order, args))
        named.update(kwargs)
    call = BenchCall(kind, fn)
    for key in ("warmup", "rep", "grad_to_none", "quantiles", "return_mode"):
        if key in named:
            setattr(call, key, named.pop(key))
    call.extra = named
    return call


def run_direct(original, call: BenchCall) -> Result:
    """The direct timer: the suite's own ``do_bench``, asked for all samples
    (``return_mode="all"``) where it supports that, else for the caller's statistic."""
    params = _params(original)
    kw: dict = {}
    for name in ("warmup", "rep", "grad_to_none"):
        value = getattr(call, name)
        if value is not None and (params is None or name in params):
            kw[name] = value
    fn = call.fn
    accepts_mode = params is None or "return_mode" in params
    if accepts_mode and id(original) not in _ALL_UNSUPPORTED:
        try:
            res = original(fn, return_mode="all", **kw)
        except (AssertionError, ValueError, KeyError, TypeError) as exc:
            if not _raised_in(exc, original):
                raise
            _ALL_UNSUPPORTED.add(id(original))
            res = original(fn, return_mode=call.return_mode or "median", **kw)
    elif accepts_mode:
        res = original(fn, return_mode=call.return_mode or "median", **kw)
    else:
        res = original(fn, **kw)
    if isinstance(res, (list, tuple)) and res and all(isinstance(v, (int, float)) for v in res):
        return Result(TIMER_DIRECT, SampleStats([float(v) for v in res], "direct"))
    if isinstance(res, (list, tuple)):
        return Result(TIMER_DIRECT, None, float(res[0]) if res else math.nan)
    return Result(TIMER_DIRECT, None, float(res))


# -- the plugin's state and the replacement functions -------------------------------


def _device_sync(cfg: dict) -> Optional[Callable[[], None]]:
    device_type = (cfg.get("device_type") or "cpu").lower()
    if device_type == "cpu":
        return None
    try:
        import torch

        mod = getattr(torch, device_type, None)
        return getattr(mod, "synchronize", None)
    except Exception:
        return None


class TimingState:
    """Everything the plugin holds between hooks. Lifecycle: :meth:`configure`
    (pytest_configure), :meth:`install` (repeatedly, idempotent),
    :meth:`uninstall` (pytest_unconfigure)."""

    def __init__(self):
        self.cfg: dict = {}
        self.timer: Optional[str] = None
        self.settings = Settings()
        self.originals: dict = {}  # (module name, attr) -> original function
        self.local = threading.local()
        self.fallbacks: list = []
        self.counts: Counter = Counter()
        self.warned: set = set()
        self._sync = None
        self.profiler_off: Optional[str] = None  # why the profiler cannot time this process's kernels
        self.previous: Optional[tuple] = None  # (value, BenchCall, modname) of the last measurement

    # -- configuration
    def configure(self, cfg: dict, environ: Optional[dict] = None) -> None:
        self.cfg = cfg
        self.timer = _config.configured_timer(cfg, environ)
        self.settings = Settings.from_config(cfg, environ)
        caps = cfg.get("capabilities") or {}
        if self.settings.l2_flush and caps.get("l2_flush") is False:
            self.settings = Settings(**{**self.settings.__dict__, "l2_flush": False})
        self._sync = _device_sync(cfg) if self.timer == TIMER_WALLCLOCK else None
        if self.active:  # before the first measurement; a warm worker's later ops set it again
            _host_malloc.apply(self.settings.host_malloc, environ)

    @property
    def active(self) -> bool:
        return self.timer is not None

    def header(self) -> str:
        if not self.active:
            return "opscreen timing: inactive (no timer in the child config)"
        extra = ""
        if self.timer == TIMER_GRAPH:
            extra = " (graph plugin loaded)" if graph_provider() is not None else " (graph plugin NOT loaded: direct timer)"
            extra += "; fallback: " + ("profiler where it sees kernels, else direct" if self._profiler_usable() else "direct")
        elif self.timer == TIMER_PROFILER and profiler_provider() is None:
            extra = " (profiler plugin NOT loaded: direct timer)"
        return f"opscreen timing: timer={self.timer}{extra} {self.settings.describe()}"

    # -- patching
    def _targets(self) -> list:
        targets = []
        if "triton" in sys.modules:
            try:
                importlib.import_module(TRITON_TESTING)
            except Exception:
                pass
        if TRITON_TESTING in sys.modules:
            targets.append((TRITON_TESTING, BENCH_ATTRS))
        if ASCEND_TESTING in sys.modules:
            targets.append((ASCEND_TESTING, ("do_bench_npu",)))
        if MUSA_TESTING in sys.modules:
            targets.append((MUSA_TESTING, BENCH_ATTRS))
        for name in _config.timing_settings(self.cfg).get("patch_modules") or ():
            if name in sys.modules:
                targets.append((name, BENCH_ATTRS))
        return targets

    def install(self) -> list:
        """Replace every timing function that is importable now; returns what was patched."""
        done = []
        if not self.active:
            return done
        for modname, attrs in self._targets():
            module = sys.modules.get(modname)
            for attr in attrs:
                current = getattr(module, attr, None)
                if current is None or not callable(current):
                    continue
                if getattr(current, "_opscreen_original", None) is not None:
                    self.originals.setdefault((modname, attr), current._opscreen_original)
                    continue
                self.originals[(modname, attr)] = current
                kind = "do_bench_cudagraph" if attr == "do_bench_cudagraph" else "do_bench"
                setattr(module, attr, self.replacement(kind, modname, current))
                done.append(f"{modname}.{attr}")
        return done

    def uninstall(self) -> None:
        """Put the originals back and let go of the last measured callable: it holds the
        op's inputs (gigabytes on a device), and a warm worker's next op must not find
        them still allocated (this module can outlive the session that imported it)."""
        self.previous = None
        for (modname, attr), original in list(self.originals.items()):
            module = sys.modules.get(modname)
            current = getattr(module, attr, None) if module else None
            if current is not None and getattr(current, "_opscreen_original", None) is original:
                setattr(module, attr, original)
        self.originals.clear()

    def original_do_bench(self, modname: str, kind: str = "do_bench"):
        """The direct timer for a call that came through ``modname``: that module's
        own ``do_bench`` if it has one, else triton's."""
        for key in ((modname, "do_bench"), (modname, "do_bench_npu"), (TRITON_TESTING, "do_bench")):
            fn = self.originals.get(key)
            if fn is not None:
                return fn
        mod = sys.modules.get(TRITON_TESTING)
        fn = getattr(mod, "do_bench", None) if mod else None
        return getattr(fn, "_opscreen_original", fn)

    def replacement(self, kind: str, modname: str, original):
        state = self

        @functools.wraps(original)
        def timed_bench(fn, *args, **kwargs):
            if not state.active or getattr(state.local, "depth", 0) > 0 or kwargs.get("quantiles") is not None:
                return original(fn, *args, **kwargs)
            call = parse_call(kind, original, fn, args, kwargs)
            if call.quantiles is not None:
                return original(fn, *args, **kwargs)
            state.local.depth = getattr(state.local, "depth", 0) + 1
            began = time.perf_counter()
            try:
                with gc_paused():
                    result = state.measure(call, modname)
                    value = result.output(call.return_mode, state.settings.estimator)
                    state.pair(value, call, modname)
            except Exception as exc:
                _errors.exit_if_fatal(exc)
                raise
            finally:
                state.local.depth -= 1
                _timed.add_timer_time("timer_s", time.perf_counter() - began)
                _inputs.reseed()  # the next case's inputs, whatever the timer's calls drew
                _autotune.checkpoint()  # the case's picks on disk before the suite logs its row
            state.counts[result.timer] += 1
            if result.fallback:
                state.fallbacks.append({**result.fallback, "timer": result.timer})
            return value

        timed_bench._opscreen_original = original
        timed_bench._opscreen_kind = kind
        return timed_bench

    # -- measuring
    def direct(self, call: BenchCall, modname: str) -> Result:
        original = self.original_do_bench(modname, call.kind)
        if original is None:
            self._warn_once("no-direct", "opscreen timing: no do_bench to time directly; using the wall clock")
            return WallclockTimer(self.settings, sync=_device_sync(self.cfg)).measure(make_call(call.fn, call.grad_to_none))
        return run_direct(original, call)

    def measure(self, call: BenchCall, modname: str) -> Result:
        if self.timer == TIMER_WALLCLOCK:
            return WallclockTimer(self.settings, sync=self._sync).measure(make_call(call.fn, call.grad_to_none))
        if self.timer == TIMER_GRAPH:
            provider = graph_provider()
            if provider is not None:
                return provider.measure(make_call(call.fn, call.grad_to_none), self.settings,
                                        lambda: self.fallback(call, modname))
            self._warn_once("no-graph", "opscreen timing: timer=graph but opscreen.child.graph is not loaded; "
                                        "timing directly")
        if self.timer == TIMER_PROFILER:
            if profiler_provider() is None:
                self._warn_once("no-profiler", "opscreen timing: timer=profiler but opscreen.child.profiler is not "
                                               "loaded; timing directly")
            elif self._profiler_usable():
                result = self.profile(call, warm=True)
                if result is not None:
                    return result
        return self.direct(call, modname)

    # -- the profiler: graph fallback, and like with like
    def _profiler_usable(self) -> bool:
        return profiler_provider() is not None and self.profiler_off is None

    def profile(self, call: BenchCall, warm: bool) -> Optional[Result]:
        """The profiler's measurement of ``call``; None (and never again in this
        process) when the profiler cannot see device kernels here."""
        try:
            return profiler_provider().measure(make_call(call.fn, call.grad_to_none), self.settings, warm)
        except ProfilerUnavailable as exc:
            self.profiler_off = str(exc)
            self._warn_once("profiler-off", f"opscreen timing: profiler unavailable ({exc}); timing directly")
            return None
        except Exception as exc:  # the profiler broke, or the op did: the direct timer tells which
            if _errors.classify(exc).fatal:
                raise
            first = str(exc).splitlines()[0] if str(exc) else ""
            self.profiler_off = f"{type(exc).__name__}: {first}"[:300]
            self._warn_once("profiler-off", f"opscreen timing: profiler failed ({self.profiler_off}); timing directly "
                            "from here on (an error of the op itself shows again there)")
            return None

    def fallback(self, call: BenchCall, modname: str) -> Result:
        """A shape the graph timer could not time: by the profiler where it sees the
        device's kernels (and ``profiler_fallback`` is on), else directly."""
        if self.settings.profiler_fallback and self._profiler_usable():
            result = self.profile(call, warm=False)
            if result is not None:
                return result
        return self.direct(call, modname)

    def retime(self, call: BenchCall, modname: str, method: str) -> Optional[TimedFloat]:
        """``call`` timed again by ``method`` (profiler or direct), for a like-with-like row."""
        try:
            result = self.profile(call, warm=False) if method == TIMER_PROFILER else self.direct(call, modname)
        except Exception as exc:  # the row keeps its mixed timers; the measurement it pairs with stands
            _errors.exit_if_fatal(exc)
            print(f"opscreen timing: timing the other side again ({method}) failed: {_config.one_line(exc, 200)}",
                  file=sys.stderr)
            return None
        value = result.output(call.return_mode, self.settings.estimator) if result is not None else None
        return value if isinstance(value, TimedFloat) else None

    def pair(self, value: Any, call: BenchCall, modname: str) -> None:
        """Like with like: when this measurement and the one before (the other side of the
        row, as the suite measures torch then the library per shape) differ in method and
        one of them is the graph, time the graph one again with the other's method and keep
        it as that value's ``alt``. A wrong guess (the previous value was another row's)
        costs one measurement; the report plugin uses ``alt`` only for a row that needs it."""
        prev, self.previous = self.previous, ((value, call, modname) if isinstance(value, TimedFloat) else None)
        if prev is None or self.previous is None:
            return
        pvalue, pcall, pmod = prev
        now, before = timer_method(value.timer), timer_method(pvalue.timer)
        if now == before or TIMER_GRAPH not in (now, before):
            return
        if before == TIMER_GRAPH and pvalue.alt is None:
            pvalue.alt = self.retime(pcall, pmod, now)
        elif now == TIMER_GRAPH and value.alt is None:
            value.alt = self.retime(call, modname, before)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            print(message, file=sys.stderr)

    def summary_lines(self) -> list:
        if not self.active or not (self.counts or self.fallbacks):
            return []
        lines = ["opscreen timing: " + ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))]
        def key(f: dict) -> tuple:
            return f.get("timer") or FALLBACK_PREFIX + f["phase"], f["kind"] or f["class"]

        by = Counter(key(f) for f in self.fallbacks)
        for (timer, kind), n in sorted(by.items()):
            example = next(f["message"] for f in self.fallbacks if key(f) == (timer, kind))
            lines.append(f"opscreen timing: {n} x {timer} ({kind}): {example}")
        return lines


@contextlib.contextmanager
def gc_paused():
    """Python's garbage collector off while a call is measured: a collection inside a
    timed interval is host jitter that the op did not cause. Only the young generations
    are collected just before (what the last measurement left): a full collection costs
    80 ms with torch imported (more with a library and Triton), and one per measurement
    added seconds to every op, while with the collector off none can start inside."""
    was = gc.isenabled()
    gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def freeze_heap() -> None:
    """Move what is alive once the op's tests are collected (the interpreter, torch, the
    library, Triton, the test modules) out of the garbage collector's sight
    (``gc.freeze``): a suite that calls ``gc.collect()`` after every case (FlagGems' does)
    then scans only what the op made since, not the hundreds of thousands of objects
    its imports left (80 ms a collection with torch alone, ~0.2 s with a library and
    Triton: seconds an op). What the op makes is collected as before. The heap stays
    frozen to the end of the process, or, in a warm worker, to its hygiene, which thaws it
    and collects it in full (``opscreen.child.worker.hygiene``) with the op's modules: an
    object that was alive at the freeze and ends up in a garbage cycle waits until then.
    So pytest's own full collections when the session ends (two in pytest 9: its
    unraisable-exception check) scan only what the op made as well; a finalizer of such a
    frozen cycle that raises is then reported by the worker's stderr, not as pytest's
    warning. Not measurement: the collector is off while a call is timed
    (:func:`gc_paused`)."""
    gc.collect()
    gc.freeze()


STATE = TimingState()


# -- pytest hooks -------------------------------------------------------------------


def pytest_configure(config):
    _config.attach_pytest_config(config)
    try:
        STATE.configure(_config.load())
    except _config.ConfigError as exc:
        raise pytest.UsageError(f"opscreen.child.timing: {exc}") from exc
    STATE.install()


def pytest_report_header(config):
    return STATE.header()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    STATE.install()
    if STATE.active:
        freeze_heap()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    STATE.install()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in STATE.summary_lines():
        terminalreporter.write_line(line)


def pytest_unconfigure(config):
    STATE.uninstall()

"""TimedFloat, the value the timing plugin returns, and the graph-provider registry.

A :class:`TimedFloat` is a ``float`` (a latency in ms; the median of the
samples unless the caller asked for another statistic) that also says how it
was measured:

``timer``
    ``graph``, ``graph-fallback:<phase>`` (the graph failed in ``warmup``,
    ``capture`` or ``replay``; timed directly), ``graph-fallback:<phase>+profiler``
    (timed by the profiler instead), ``profiler``, ``direct`` or ``wallclock``.
``samples``
    how many samples the value summarises (None when the timer did not say).
``rsd``
    relative standard deviation of the samples, a fraction (None when unknown).
``calls``
    calls of the measured callable per sample (one graph replay or one timed
    loop; None when the timer did not say).
``host_ms``
    the profiler timer's host-inclusive latency (single calls between two device
    synchronizations, median), beside its device figure; None for other timers.
``ci``
    the bootstrap 95 % interval half-width of the value, relative (a fraction).
``fallback``
    why the graph timer fell back: ``<phase>: <kind>: <the error's line>``.
``graph_ms``
    set by the report plugin when it replaced a graph figure by this side's figure
    from the other side's timer (like with like): the graph figure it replaced.

``alt`` (not a tag) holds the same callable timed by another method, when the timing
plugin measured one for a row whose other side could not be graph-timed.

Arithmetic on it gives plain floats, ``json.dumps`` writes the number,
``copy.deepcopy``/``dataclasses.asdict``/``pickle`` keep the tags.

:func:`add_timer_time` / :func:`timer_time` keep where this process's measurements spent
their wall time (the identity plugin writes it as ``phases.timer``).

The registry lets ``opscreen.child.graph`` announce itself when pytest loads it
(``-p opscreen.child.graph``) without the timing plugin ever importing it: a run
without graph capture never imports the graph machinery.

Standard library only; other plugins import this module. Keep it small and stable.
"""

from __future__ import annotations

import time
from typing import Any, Optional

TIMER_GRAPH = "graph"
TIMER_DIRECT = "direct"
TIMER_WALLCLOCK = "wallclock"
TIMER_PROFILER = "profiler"
FALLBACK_PREFIX = "graph-fallback:"
PROFILER_SUFFIX = "+" + TIMER_PROFILER
FALLBACK_PHASES = ("warmup", "capture", "replay")
TIMER_NAMES = (TIMER_GRAPH, *(FALLBACK_PREFIX + p for p in FALLBACK_PHASES),
               *(FALLBACK_PREFIX + p + PROFILER_SUFFIX for p in FALLBACK_PHASES), TIMER_PROFILER, TIMER_DIRECT,
               TIMER_WALLCLOCK)
# The tags a TimedFloat carries, in the order the record log writes them.
TAG_NAMES = ("timer", "samples", "rsd", "calls", "host_ms", "ci", "fallback", "graph_ms")


def timer_method(timer: Optional[str]) -> Optional[str]:
    """How a value was measured, whatever the tag says about why: ``graph``,
    ``profiler``, ``direct`` or ``wallclock`` (a fallback tag -> the timer that timed it)."""
    if not timer:
        return None
    if timer.startswith(FALLBACK_PREFIX):
        return TIMER_PROFILER if timer.endswith(PROFILER_SUFFIX) else TIMER_DIRECT
    return timer


def fallback_phase(timer: Optional[str]) -> Optional[str]:
    """``capture`` for ``graph-fallback:capture`` or ``graph-fallback:capture+profiler``; else None."""
    if not timer or not timer.startswith(FALLBACK_PREFIX):
        return None
    phase = timer[len(FALLBACK_PREFIX):]
    return phase[: -len(PROFILER_SUFFIX)] if phase.endswith(PROFILER_SUFFIX) else phase


class TimedFloat(float):
    """A latency in ms carrying the :data:`TAG_NAMES` tags. Its number is immutable like a
    float's; ``alt`` may be set after the fact (the timing plugin's like-with-like pairing)."""

    def __new__(cls, value: Any, timer: Optional[str] = None, samples: Optional[int] = None,
                rsd: Optional[float] = None, calls: Optional[int] = None, host_ms: Optional[float] = None,
                ci: Optional[float] = None, fallback: Optional[str] = None, graph_ms: Optional[float] = None):
        self = super().__new__(cls, value)
        self.timer = timer
        self.samples = None if samples is None else int(samples)
        self.rsd = None if rsd is None else float(rsd)
        self.calls = None if calls is None else int(calls)
        self.host_ms = None if host_ms is None else float(host_ms)
        self.ci = None if ci is None else float(ci)
        self.fallback = fallback
        self.graph_ms = None if graph_ms is None else float(graph_ms)
        self.alt = None
        return self

    def __reduce__(self):
        return (type(self), (float(self), *(getattr(self, k) for k in TAG_NAMES)))

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self

    def with_timer(self, timer: str) -> "TimedFloat":
        return TimedFloat(float(self), **{**self.tags(), "timer": timer})

    def replacing(self, graph_ms: float) -> "TimedFloat":
        """This value, recorded as the like-with-like replacement of a graph figure."""
        return TimedFloat(float(self), **{**self.tags(), "graph_ms": graph_ms})

    def tags(self) -> dict:
        return tags_of(self)

    def to_dict(self) -> dict:
        return {"value": float(self), **self.tags()}


def tags_of(value: Any) -> dict:
    """The :data:`TAG_NAMES` of any value (all None for a plain number or None)."""
    return {key: getattr(value, key, None) for key in TAG_NAMES}


# -- graph provider registry ----------------------------------------------------

_graph_provider: Any = None


def register_graph_provider(provider: Any) -> None:
    """Called by ``opscreen.child.graph`` at import. ``provider.measure(call, settings,
    direct)`` returns a TimedFloat (see graph.py)."""
    global _graph_provider
    _graph_provider = provider


def graph_provider() -> Any:
    """The registered graph provider, or None when the graph plugin is not loaded."""
    return _graph_provider


class ProfilerUnavailable(RuntimeError):
    """The profiler cannot time device kernels here (the message says why)."""


# -- profiler provider registry (opscreen.child.profiler, loaded where planned) ---

_profiler_provider: Any = None


def register_profiler_provider(provider: Any) -> None:
    """Called by ``opscreen.child.profiler`` at import. ``provider.measure(call, settings,
    warm)`` returns a Result timed by the kernels' device time, or raises
    ``ProfilerUnavailable``."""
    global _profiler_provider
    _profiler_provider = provider


def profiler_provider() -> Any:
    """The registered profiler provider, or None when the profiler plugin is not loaded."""
    return _profiler_provider


# -- where the timers' time went (phases.timer in run_identity.json and result.json) ----

#: The parts the graph, wallclock and profiler timers report (the first call of each measured
#: callable, where the library compiles, autotunes and loads its kernels; the rest of the
#: warm-up; the graph's capture; the samples; the profiler's host-inclusive latency); the rest
#: of the timers' time (the direct timer, like-with-like retimes, a graph's failed attempt) is
#: ``other_s``.
TIMER_PARTS = ("first_s", "warmup_s", "capture_s", "samples_s", "host_s")
_timer_time: dict = {}


def add_timer_time(part: str, seconds: float) -> None:
    """Add ``seconds`` of wall time to ``part``: ``timer_s`` (one whole measurement, as
    the timing plugin saw it; also counts it) or one of :data:`TIMER_PARTS`."""
    _timer_time[part] = _timer_time.get(part, 0.0) + max(0.0, float(seconds))
    if part == "timer_s":
        _timer_time["measurements"] = _timer_time.get("measurements", 0) + 1


class TimerParts:
    """One measurement's parts, each marked as it ends (:meth:`mark` adds the wall time
    since the last mark, or since this was made, to a part of :data:`TIMER_PARTS`), and
    added to the process's account by :meth:`commit` only: a measurement that fails part
    way leaves its time to ``other_s``."""

    def __init__(self) -> None:
        self._since = time.perf_counter()
        self._parts: list = []

    def mark(self, part: str) -> None:
        now = time.perf_counter()
        self._parts.append((part, now - self._since))
        self._since = now

    def commit(self) -> None:
        for part, seconds in self._parts:
            add_timer_time(part, seconds)


def timer_time() -> dict:
    """``{measurements, timer_s, first_s, warmup_s, capture_s, samples_s, host_s, other_s}`` (seconds, ms
    resolution) for this process so far; {} before its first measurement."""
    if not _timer_time.get("measurements"):
        return {}
    out = {"measurements": int(_timer_time["measurements"]), "timer_s": round(_timer_time["timer_s"], 3)}
    for part in TIMER_PARTS:
        out[part] = round(_timer_time.get(part, 0.0), 3)
    out["other_s"] = round(max(0.0, out["timer_s"] - sum(out[p] for p in TIMER_PARTS)), 3)
    return out

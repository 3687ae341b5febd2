"""TimedFloat, the value the timing plugin returns, and the graph-provider registry.

A :class:`TimedFloat` is a ``float`` (a latency in ms; the median of the
samples unless the caller asked for another statistic) that also says how it
was measured:

``timer``
    ``graph``, ``graph-fallback:warmup``, ``graph-fallback:capture``,
    ``graph-fallback:replay``, ``direct`` or ``wallclock``.
``samples``
    how many samples the value summarises (None when the timer did not say).
``rsd``
    relative standard deviation of the samples, a fraction (None when unknown).
``calls``
    calls of the measured callable per sample (one graph replay or one timed
    loop; None when the timer did not say).

Arithmetic on it gives plain floats, ``json.dumps`` writes the number,
``copy.deepcopy``/``dataclasses.asdict``/``pickle`` keep the tags.

The registry lets ``opscreen.child.graph`` announce itself when pytest loads it
(``-p opscreen.child.graph``) without the timing plugin ever importing it: a run
without graph capture never imports the graph machinery.

Standard library only; other plugins import this module. Keep it small and stable.
"""

from __future__ import annotations

from typing import Any, Optional

TIMER_GRAPH = "graph"
TIMER_DIRECT = "direct"
TIMER_WALLCLOCK = "wallclock"
FALLBACK_PREFIX = "graph-fallback:"
FALLBACK_PHASES = ("warmup", "capture", "replay")
TIMER_NAMES = (TIMER_GRAPH, *(FALLBACK_PREFIX + p for p in FALLBACK_PHASES), TIMER_DIRECT, TIMER_WALLCLOCK)
# The tags a TimedFloat carries, in the order the record log writes them.
TAG_NAMES = ("timer", "samples", "rsd", "calls")


class TimedFloat(float):
    """A latency in ms carrying ``timer``, ``samples``, ``rsd`` and ``calls``. Immutable like float."""

    def __new__(cls, value: Any, timer: Optional[str] = None, samples: Optional[int] = None,
                rsd: Optional[float] = None, calls: Optional[int] = None):
        self = super().__new__(cls, value)
        self.timer = timer
        self.samples = None if samples is None else int(samples)
        self.rsd = None if rsd is None else float(rsd)
        self.calls = None if calls is None else int(calls)
        return self

    def __reduce__(self):
        return (type(self), (float(self), self.timer, self.samples, self.rsd, self.calls))

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self

    def with_timer(self, timer: str) -> "TimedFloat":
        return TimedFloat(float(self), timer, self.samples, self.rsd, self.calls)

    def tags(self) -> dict:
        return tags_of(self)

    def to_dict(self) -> dict:
        return {"value": float(self), **self.tags()}


def tags_of(value: Any) -> dict:
    """``{"timer", "samples", "rsd", "calls"}`` of any value (all None for a plain number or None)."""
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

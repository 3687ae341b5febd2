"""What one process keeps across the pytest sessions a warm worker runs in it.

Every other ``opscreen.child`` module is dropped between a worker's ops (the next op
imports it afresh, as a fresh process would); this one stays, so that what a fresh
process creates once is created once in a worker too:

- the graph timer's side stream, per device: a fresh process draws it from torch's
  stream pool at its first capture; a worker that drew a new one for every op would
  replay op k on the pool's k-th stream (another hardware queue), not on the one a
  fresh process's op replays on.

Standard library only.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

_STREAMS: dict = {}


def side_stream(key: Hashable, make: Callable[[], Any]) -> Any:
    """The process's side stream for ``key`` (device type and index), made on first use."""
    stream = _STREAMS.get(key)
    if stream is None:
        stream = _STREAMS[key] = make()
    return stream


def forget_side_stream(key: Hashable) -> None:
    """After a failed capture: the next capture gets a new stream."""
    _STREAMS.pop(key, None)

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

from typing import Any, Callable

_STREAMS: dict = {}


def side_stream(device_type: str, index: int, make: Callable[[], Any]) -> Any:
    """The process's side stream on device ``index`` of ``device_type``, made on first use."""
    stream = _STREAMS.get((device_type, index))
    if stream is None:
        stream = _STREAMS[(device_type, index)] = make()
    return stream


def forget_side_stream(device_type: str, index: int) -> None:
    """After a failed capture: the next capture gets a new stream."""
    _STREAMS.pop((device_type, index), None)

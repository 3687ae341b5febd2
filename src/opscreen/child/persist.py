"""What one process keeps across the pytest sessions a warm worker runs in it.

Every other ``opscreen.child`` module is dropped between a worker's ops (the next op
imports it afresh, as a fresh process would); this one stays, so that what a fresh
process creates once is created once in a worker too:

- the graph timer's side stream, per device: a fresh process draws it from torch's
  stream pool at its first capture; a worker that drew a new one for every op would
  replay op k on the pool's k-th stream (another hardware queue), not on the one a
  fresh process's op replays on;
- the device's settling (:func:`settle`), right after its side stream is made
  (:func:`settled_side_stream`): once per process and device in a fresh process, and
  once per op in a worker (its hygiene calls :func:`unsettle`), so that every op makes
  the same launches and allocations at the same point of its session as a fresh
  process's op does.

Standard library only (torch comes in as an argument).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

_STREAMS: dict = {}
_SETTLED: set = set()

#: Kernel launches on the default stream that settle a process's device, once its side
#: stream exists, before its first measurement. On an H200 (bench/results/2026-12-01-h200-settle.md)
#: a process whose work has all gone to one stream replays small kernels in a graph about
#: 0.18 us (16 %) faster per kernel than once a second stream has seen work and the
#: default stream has launched anything after that (10 launches suffice; launches before
#: it, or on a stream only made, do nothing), and it stays in that second state for the
#: rest of its life. A suite creates its inputs on the default
#: stream and the graph timer replays on its side stream, so a fresh process flipped in
#: the middle of an op (its first dtype fast, the rest slow) and a warm worker measured
#: its later ops in the second state only. Settled, every process measures every case in
#: the second state, the one any multi-stream process is in.
SETTLE_LAUNCHES = 256


def side_stream(device_type: str, index: int, make: Callable[[], Any]) -> Any:
    """The process's side stream on device ``index`` of ``device_type``, made on first use."""
    stream = _STREAMS.get((device_type, index))
    if stream is None:
        stream = _STREAMS[(device_type, index)] = make()
    return stream


def forget_side_stream(device_type: str, index: int) -> None:
    """After a failed capture: the next capture gets a new stream."""
    _STREAMS.pop((device_type, index), None)


def settle(torch: Any, device_type: str, index: int, stream: Any = None, launches: int = SETTLE_LAUNCHES) -> bool:
    """Once per process and device: a few one-element additions on ``stream`` (the side
    stream: a stream the device has seen work on), then ``launches`` of them on the
    device's default stream, then a synchronize: the sequence that moves an H200 to its
    steady state (:data:`SETTLE_LAUNCHES` says why). True when it ran now; False when it
    had run, or could not (the measurement then goes on as is)."""
    key = (device_type, index)
    if key in _SETTLED or launches <= 0:
        return False
    try:
        dev = getattr(torch, device_type)
        x = torch.zeros(1, device=f"{device_type}:{index}")
        if stream is not None:
            with dev.stream(stream):
                for _ in range(16):
                    x.add_(1)
            stream.synchronize()
        default = getattr(dev, "default_stream", None)  # the default stream, whatever the suite made current
        with dev.stream(default(index)) if default is not None else contextlib.nullcontext():
            for _ in range(launches):
                x.add_(1)
        dev.synchronize()
    except Exception:  # settling is a refinement: never the reason a measurement fails
        return False
    _SETTLED.add(key)
    return True


def unsettle() -> None:
    """Between a worker's ops: the next op settles again at its first measurement, as a
    fresh process's does. Its device stays in the steady state (a process never leaves
    it); what this keeps the same as in a fresh process is the op's own sequence of
    launches and allocations (on an H200 a worker whose canary settled the device and
    ran its graph before an op's session read that op's kernels under 10 us up to 1 %
    apart from a fresh process, row by row: bench/results/2026-12-01-h200-canary.md)."""
    _SETTLED.clear()


def settled(device_type: str, index: int) -> bool:
    return (device_type, index) in _SETTLED


def settled_side_stream(torch: Any, device_type: str, index: int, make: Callable[[], Any]) -> Any:
    """The process's side stream (:func:`side_stream`), with the device settled after it
    was made (:func:`settle`): what the graph timer and the worker's canary replay on.
    ``torch`` None: the stream alone."""
    stream = side_stream(device_type, index, make)
    if torch is not None:
        settle(torch, device_type, index, stream)
    return stream

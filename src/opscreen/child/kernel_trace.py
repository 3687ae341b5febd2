"""Per-call device time from a profiler trace: the pure half of the profiler timer.

The profiler timer (:mod:`opscreen.child.profiler`) runs each measured call inside
a ``torch.profiler.record_function("opscreen.call#<i>")`` range and exports the
session as a Chrome trace (kineto's JSON: the same format on CUDA, ROCm and the
CPU). This module turns that trace into one device time per call, summed over the
device work one call launched, and never imports torch: it is tested on real
traces (CPU ones captured by the tests, recorded CUDA and ROCm ones in
``tests/fixtures/kineto/``).

Attribution of a device event (``kernel``, ``gpu_memcpy``, ``gpu_memset``) to a call:

1. by ``args.correlation`` to the runtime or driver call that launched it
   (``cudaLaunchKernel``, ``cuLaunchKernel`` for Triton, ``hipLaunchKernel``,
   ``hipMemcpyWithStream``, ...), which lies, on the host clock, inside the call's
   range; the launching thread does not matter (autograd launches backward kernels
   from its own threads);
2. else by ``args["External id"]`` to a host op (``cpu_op``, ``user_annotation``)
   inside the range;
3. else, for an event recorded on the host itself (same ``pid`` as the ranges; the
   CPU case), by its own start time inside the range.

What no rule places is counted as ``unattributed`` and left out. Device events of
one call that overlap (several streams) are summed, not merged: the figure is the
kernels' own time, the way tritonbench's ``--latency-measure-mode profiler`` and
Triton's Proton report it, not the wall time of the device.

Standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "runtime", "driver", "hip_runtime", "hip_driver", "privateuse1_runtime",
               "privateuse1_driver")
HOST_OP_CATS = ("cpu_op", "user_annotation")
ANNOTATION_CAT = "user_annotation"
MARKER = "opscreen.call#"


@dataclass(frozen=True)
class CallRange:
    """Call ``index``'s range on the host clock (us), on host process ``pid``."""

    index: int
    start: float
    end: float
    pid: Any = None

    def holds(self, ts: float) -> bool:
        return self.start <= ts <= self.end


@dataclass
class PerCall:
    """The device time of each call (ms, in call order), the device events each
    launched, and the device events no rule could place."""

    ms: list = field(default_factory=list)
    events: list = field(default_factory=list)
    unattributed: int = 0

    @property
    def seen(self) -> int:
        """Device events attributed to some call (0: the profiler saw no device work)."""
        return sum(self.events)


def trace_events(trace: Any) -> list:
    """The event list of a Chrome trace: a ``{"traceEvents": [...]}`` object, a bare list,
    or their JSON text."""
    if isinstance(trace, (str, bytes)):
        trace = json.loads(trace)
    if isinstance(trace, Mapping):
        trace = trace.get("traceEvents") or []
    return [e for e in trace if isinstance(e, Mapping)]


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x else None


def _span(e: Mapping) -> tuple[float, float] | None:
    ts, dur = _num(e.get("ts")), _num(e.get("dur"))
    if ts is None:
        return None
    return ts, ts + max(dur or 0.0, 0.0)


def call_ranges(events: Iterable[Mapping], marker: str = MARKER) -> list[CallRange]:
    """The ranges named ``<marker><i>`` (``user_annotation`` events), one per index, in
    index order; an index named twice spans both."""
    rx = re.compile(re.escape(marker) + r"(\d+)$")
    found: dict[int, CallRange] = {}
    for e in events:
        if e.get("cat") != ANNOTATION_CAT or e.get("ph", "X") != "X":
            continue
        m = rx.match(str(e.get("name") or ""))
        span = _span(e)
        if m is None or span is None:
            continue
        i = int(m.group(1))
        old = found.get(i)
        if old is None:
            found[i] = CallRange(i, span[0], span[1], e.get("pid"))
        else:
            found[i] = CallRange(i, min(old.start, span[0]), max(old.end, span[1]), old.pid)
    return [found[i] for i in sorted(found)]


def _owner(ranges: Sequence[CallRange], ts: float | None) -> int | None:
    if ts is None:
        return None
    for r in ranges:
        if r.holds(ts):
            return r.index
    return None


def _host_maps(events: Sequence[Mapping], ranges: Sequence[CallRange]) -> tuple[dict, dict]:
    """correlation id -> call (launches inside a range) and External id -> call (host ops)."""
    by_corr: dict = {}
    by_ext: dict = {}
    for e in events:
        cat = e.get("cat")
        if cat not in LAUNCH_CATS and cat not in HOST_OP_CATS:
            continue
        owner = _owner(ranges, _num(e.get("ts")))
        if owner is None:
            continue
        args = e.get("args") or {}
        if cat in LAUNCH_CATS and args.get("correlation") is not None:
            by_corr[args["correlation"]] = owner
        elif cat in HOST_OP_CATS and args.get("External id") is not None:
            by_ext.setdefault(args["External id"], owner)
    return by_corr, by_ext


def _attribute(e: Mapping, ranges: Sequence[CallRange], by_corr: dict, by_ext: dict, host_pids: set) -> int | None:
    args = e.get("args") or {}
    corr = args.get("correlation")
    if corr is not None and corr in by_corr:
        return by_corr[corr]
    ext = args.get("External id")
    if ext is not None and ext in by_ext:
        return by_ext[ext]
    if e.get("pid") in host_pids:
        return _owner(ranges, _num(e.get("ts")))
    return None


def per_call(trace: Any, n_calls: int | None = None, marker: str = MARKER,
             work_cats: Sequence[str] = DEVICE_CATS) -> PerCall:
    """Device ms of each call of a profiled session (see the module docstring).

    ``n_calls`` fixes the number of calls (a call whose range is missing reads 0);
    by default the ranges found decide. ``work_cats`` names the categories summed
    (device work by default; the tests sum ``cpu_op`` on a CPU trace).
    """
    events = trace_events(trace)
    ranges = call_ranges(events, marker)
    n = n_calls if n_calls is not None else (max((r.index for r in ranges), default=-1) + 1)
    us = [0.0] * n
    count = [0] * n
    by_corr, by_ext = _host_maps(events, ranges)
    host_pids = {r.pid for r in ranges}
    unattributed = 0
    for e in events:
        if e.get("cat") not in work_cats or e.get("ph", "X") != "X":
            continue
        owner = _attribute(e, ranges, by_corr, by_ext, host_pids)
        if owner is None or not 0 <= owner < n:
            unattributed += 1
            continue
        us[owner] += max(_num(e.get("dur")) or 0.0, 0.0)
        count[owner] += 1
    return PerCall([u / 1000.0 for u in us], count, unattributed)

"""The profiler timer: the kernels' own device time per call, from torch.profiler.

For a callable that cannot be graph-captured (a host sync inside the op, a
host-device copy, an output whose shape depends on the data), the direct timer's
samples carry the op's whole host path: Python, allocation, the sync. Two processes
of such an op disagreed by 25-140 % on an H200 (issue 18). This timer instead takes,
for each call, the durations CUPTI (or roctracer) recorded for the kernels and
copies that call launched, summed, the way tritonbench's ``--latency-measure-mode
profiler`` and Triton's Proton report a kernel: host jitter does not touch them.

One measurement (:func:`measure_profiler`):

1. the first profiler session of the process runs one call to load CUPTI (untimed);
   with ``warm`` false (the graph timer's fallback: the callable is warm already)
   that is all the warm-up; else the callable is first warmed up like the wallclock
   timer's (host time, device synchronized);
2. samples: profiler sessions of ``b`` calls, each call inside
   ``record_function("opscreen.call#<i>")``, the device synchronized at the end;
   the session's Chrome trace gives each call's device time
   (:func:`opscreen.child.kernel_trace.per_call`); adaptive stopping as timing.py,
   with the time cap (``max_time_s``) holding inside a batch too: the first session
   has one call and times what a call costs with its trace, later ones hold what fits
   the time left, and none starts past the cap once two samples exist;
3. the host-inclusive latency: single calls between two device synchronizations
   (host clock), within half the time cap; its median is kept beside the device
   figure (``host_ms``): a sync inside the op is a real cost to its users.

A session that sees no device work at all raises :class:`ProfilerUnavailable`
(no CUPTI, a CPU-only op): the caller times that shape directly instead.

Loaded with ``-p opscreen.child.profiler`` (before the timing plugin) where the
backend declares ``device_profiler`` and the timer is ``graph`` or ``profiler``; at
import it registers :data:`PROVIDER` with ``opscreen.child.timed_value``, where the
timing plugin finds it. torch is imported lazily; the profiler API is injectable
(:class:`TorchProfiler` is the real one), so the bookkeeping is tested on the CPU.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from typing import Any, Callable, Optional

from . import config as _config
from . import kernel_trace
from . import timed_value as _timed
from .timed_value import TIMER_PROFILER, ProfilerUnavailable
from .timing import Result, Settings, adaptive_sample, warm_up


class TorchProfiler:
    """torch.profiler with CPU and device activity: ``unavailable()`` (None or why),
    ``session(call, n)`` (the Chrome trace of n calls, each in its own range) and
    ``synchronize()``. Lifecycle: one per process; ``primed`` once CUPTI is loaded."""

    def __init__(self, device_type: str = "cuda"):
        self.device_type = device_type
        self.primed = False

    def _activity(self):
        from torch.profiler import ProfilerActivity

        return getattr(ProfilerActivity, "CUDA", None)

    def unavailable(self) -> Optional[str]:
        if self.device_type != "cuda":  # torch's kineto sees CUDA and HIP devices as 'cuda'
            return f"torch.profiler does not record {self.device_type} kernels"
        try:
            import torch.profiler as tp
        except Exception as exc:  # pragma: no cover - torch always has it
            return f"torch.profiler cannot be imported: {exc}"
        act = self._activity()
        if act is None or act not in tp.supported_activities():
            return "this torch build's profiler records no device activity (no CUPTI/roctracer)"
        return None

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def session(self, call: Callable[[], Any], n: int) -> dict:
        from torch.profiler import ProfilerActivity, profile, record_function

        activities = list(dict.fromkeys([ProfilerActivity.CPU, self._activity()]))
        with profile(activities=activities, record_shapes=False, with_stack=False) as prof:
            for i in range(n):
                with record_function(f"{kernel_trace.MARKER}{i}"):
                    call()
            self.synchronize()
        fd, path = tempfile.mkstemp(prefix="opscreen-prof-", suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass


def host_latency(call: Callable[[], Any], sync: Callable[[], None], settings: Settings,
                 clock: Callable[[], float] = time.perf_counter) -> Optional[float]:
    """Median ms of single calls, each between two device synchronizations (host clock),
    sampled adaptively within half of ``max_time_s``."""
    half = Settings(**{**settings.__dict__, "max_time_s": settings.max_time_s / 2.0})

    def take(b: int) -> list:
        out = []
        for _ in range(b):
            sync()
            t = clock()
            call()
            sync()
            out.append((clock() - t) * 1e3)
        return out

    return statistics.median(adaptive_sample(take, half, clock).values)


def measure_profiler(call: Callable[[], Any], settings: Settings, prof: Any, warm: bool = True,
                     clock: Callable[[], float] = time.perf_counter) -> Result:
    """Time ``call`` by its kernels' device time (see the module docstring); raises
    :class:`ProfilerUnavailable` when the profiler sees no device work."""
    why = prof.unavailable()
    if why:
        raise ProfilerUnavailable(why)
    sync = prof.synchronize
    warm_calls = 0
    parts = _timed.TimerParts()
    if warm:
        def run_batch(k: int) -> float:
            sync()
            t = clock()
            for _ in range(k):
                call()
            sync()
            return (clock() - t) * 1e3

        warm_calls = warm_up(run_batch, settings, clock, parts).calls
    if not prof.primed:
        prof.session(call, 1)  # loads CUPTI: seconds, once per process
        prof.primed = True
    launched: list = []
    start = clock()
    per_call_s: Optional[float] = None  # what a call costs with its trace, from the last session

    def take(b: int) -> list:
        """``b`` samples, in sessions sized to the time cap. The measurement's first session
        holds one call, which says what a call costs with its trace: the device's time,
        CUPTI's flush, the trace's export and parse. On an H200, `mode` timed out at 300 s
        inside sessions of ten calls of torch's mode. The rest of the batch follows in as
        few sessions as fit the time left, and once two samples exist, none is started that
        the cap has no room for."""
        nonlocal per_call_s
        out: list = []
        while len(out) < b:
            k = 1
            if per_call_s is not None:
                room = (settings.max_time_s - (clock() - start)) / max(per_call_s, 1e-9)
                if out and len(launched) >= 2 and room < 1:
                    break  # adaptive_sample stops at the time cap with what is here
                k = max(1, min(b - len(out), int(room)))
            t = clock()
            pc = kernel_trace.per_call(prof.session(call, k), k)
            per_call_s = (clock() - t) / k
            if pc.seen == 0:
                raise ProfilerUnavailable(f"the profiler saw no device kernels in {k} calls")
            launched.extend(pc.events)
            out.extend(pc.ms)
        return out

    stats = adaptive_sample(take, settings, clock)
    parts.mark("samples_s")  # CUPTI's priming included
    host_ms = host_latency(call, sync, settings, clock)
    parts.mark("host_s")
    parts.commit()
    extra = {"calls_per_sample": 1, "warmup_calls": warm_calls, "host_ms": host_ms,
             "kernels_per_call": statistics.median(launched) if launched else None}
    return Result(TIMER_PROFILER, stats, extra=extra)


class ProfilerProvider:
    """What timing.py calls: ``unavailable()`` and ``measure(call, settings, warm) -> Result``.
    Builds its :class:`TorchProfiler` on first use from the child config's
    ``device_type`` unless one is given (tests)."""

    def __init__(self, prof: Any = None):
        self._prof = prof

    def prof(self) -> Any:
        if self._prof is None:
            self._prof = TorchProfiler(_config.load().get("device_type") or "cuda")
        return self._prof

    def set_api(self, prof: Any) -> None:
        self._prof = prof

    def unavailable(self) -> Optional[str]:
        return self.prof().unavailable()

    def measure(self, call: Callable[[], Any], settings: Settings, warm: bool = True) -> Result:
        return measure_profiler(call, settings, self.prof(), warm)


PROVIDER = ProfilerProvider()
_timed.register_profiler_provider(PROVIDER)


def pytest_report_header(config):
    return ("opscreen profiler: shapes the graph timer cannot capture are timed by their kernels' device time "
            "(torch.profiler), where it sees them")

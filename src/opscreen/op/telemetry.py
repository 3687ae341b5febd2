"""An op's device telemetry: a thread of the harness that reads the device's clocks, power,
temperature and clock-event reasons while the op's child runs, and what ``result.json``
keeps of it (``telemetry``; docs/telemetry.md).

Lifecycle, for a fresh process and for an op in a warm worker alike (:func:`opscreen.op.run._run_child`
wraps the launch): :meth:`Sampler.start` when the child is launched; the thread waits for the
child's identity (``run_identity.json``, written when its pytest session starts) to learn the
device's UUID, opens the vendor's monitor (:mod:`opscreen.backends.devmon`; by index when the
child names no UUID), reads the device's state once, then samples every interval until
:meth:`Sampler.stop`, which the harness calls as soon as the child has exited, timed out or
been killed. :meth:`Sampler.record` keeps the samples inside the child's measurement phase
(its test loop, from the phases the child reported) and reduces them to min / median / max
per quantity and the share of samples each clock-event reason was seen in. Nothing runs in
the child: its timers see no extra work on their thread.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from pathlib import Path

from ..backends.devmon import BAD_REASONS, Unavailable, decode_reasons, no_monitor, open_monitor
from ..settings import telemetry_interval_ms

__all__ = ["Sampler", "QUANTITIES", "reduce_samples", "interval_ms", "trace", "measurement_window"]

#: what a sample holds, as result.json names each quantity
QUANTITIES = ("sm_clock_mhz", "mem_clock_mhz", "power_w", "power_limit_w", "temperature_c")
#: how long the thread waits for the child's identity (the device's UUID) before it gives up
IDENTITY_WAIT_S = 600.0
#: the most points ``result.json`` keeps of an op's trace (the report draws it, small)
TRACE_POINTS = 60


def interval_ms() -> float:
    """The sampling interval from this process's environment (:data:`opscreen.settings.TELEMETRY_MS`)."""
    return telemetry_interval_ms(os.environ)


def _stats(values: list) -> dict | None:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def reduce_samples(samples: list, max_sm_clock: float | None) -> dict:
    """Min / median / max of each quantity, the SM clock of the busy samples (those without
    ``gpu_idle``: the clock between two launches says nothing of the kernels), and each
    clock-event reason seen with its share of the samples whose reasons were read."""
    out: dict = {"samples": len(samples)}
    for q in QUANTITIES:
        out[q] = _stats([getattr(s, q) for s in samples])
    read = [s for s in samples if s.reasons is not None]
    busy = [s.sm_clock_mhz for s in read if "gpu_idle" not in decode_reasons(s.reasons)]
    out["sm_clock_busy_mhz"] = _stats(busy)
    out["busy_samples"] = len(busy) if read else None
    counts: dict[str, int] = {}
    for s in read:
        for name in decode_reasons(s.reasons):
            counts[name] = counts.get(name, 0) + 1
    out["reasons"] = {k: round(v / len(read), 4) for k, v in sorted(counts.items())} if read else None
    out["bad_reasons"] = sorted(k for k in counts if k in BAD_REASONS) if read else None
    out["max_sm_clock_mhz"] = max_sm_clock
    return out


def trace(samples: list, start: float | None = None, points: int = TRACE_POINTS) -> dict | None:
    """The SM clock and power of ``samples`` over time (s from ``start``, else the first sample),
    evenly thinned to at most ``points``; None without samples."""
    if not samples:
        return None
    if len(samples) > points:
        n = len(samples) - 1
        samples = [samples[round(i * n / (points - 1))] for i in range(points)]
    t0 = start if start is not None else samples[0].t
    return {"t_s": [round(s.t - t0, 3) for s in samples], "sm_clock_mhz": [s.sm_clock_mhz for s in samples],
            "power_w": [s.power_w for s in samples]}


def measurement_window(identity: dict | None, spawned_at: float | None) -> tuple[float, float] | None:
    """The child's measurement phase as wall-clock bounds (its test loop: from the harness's
    spawn mark plus start+imports and collection, for ``measurement_s``); None when the child
    did not report its phases (killed, crashed, timed out)."""
    ph = (identity or {}).get("phases") if isinstance(identity, dict) else None
    if not isinstance(ph, dict) or spawned_at is None:
        return None
    parts = [ph.get(k) for k in ("start_imports_s", "collection_s", "measurement_s")]
    if not all(isinstance(v, (int, float)) for v in parts):
        return None
    start = spawned_at + parts[0] + parts[1]
    return start, start + parts[2] + 0.001  # the phases are floored to the millisecond


class Sampler:
    """The telemetry of one child (module docstring). ``backend``: the backend's name;
    ``index``: the device index the harness gave the child; ``identity_path``: where the
    child writes its identity; ``interval_ms``: 0 reads the device's state only."""

    def __init__(self, backend: str, index: int | None, identity_path: str | os.PathLike, interval_ms: float):
        self.backend, self.index = backend, index
        self.identity_path = Path(identity_path)
        self.interval_s = interval_ms / 1000.0
        self.samples: list = []
        self.state: dict | None = None  # the device's state (run_identity.json device_state)
        self.why: str | None = None  # why there is no telemetry
        self.monitor = None
        self.sampling_s = 0.0  # the thread's time inside the library calls
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.spawned_at: float | None = None

    def start(self, spawned_at: float | None = None) -> "Sampler":
        """Start the thread (none where the backend has no monitor: the record says why)."""
        self.spawned_at = spawned_at
        self.why = no_monitor(self.backend)
        if self.why:
            return self
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread (the child is gone); it finishes the call it is in, at most ``timeout``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _device_uuid(self) -> tuple[bool, str | None]:
        """(the child wrote its identity, the UUID it names)."""
        try:
            ident = json.loads(self.identity_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False, None
        uuid = ident.get("device_uuid") if isinstance(ident, dict) else None
        return True, uuid if isinstance(uuid, str) and uuid else None

    def _open(self) -> bool:
        """Wait for the child's identity, then open the device's monitor; False when none. A stop
        still reads the identity once more: a child that wrote it and exited before this thread's
        first look (a fast op on a loaded host) has a device all the same."""
        deadline = time.monotonic() + IDENTITY_WAIT_S
        poll = min(max(self.interval_s, 0.02), 0.2)
        while True:
            stopped = self._stop.is_set()
            written, uuid = self._device_uuid()
            if written:
                try:
                    self.monitor = open_monitor(self.backend, uuid, self.index)
                except Unavailable as exc:
                    self.why = str(exc)
                    return False
                self.state = {**self.monitor.state(), "at": time.time()}
                return True
            if stopped or time.monotonic() > deadline:
                break
            self._stop.wait(poll)
        self.why = "the child never wrote its identity, so its device was never known"
        return False

    def _run(self) -> None:
        try:
            if not self._open() or self.interval_s <= 0:
                return
            while not self._stop.is_set():
                t0 = time.perf_counter()
                self.samples.append(self.monitor.sample())
                spent = time.perf_counter() - t0
                self.sampling_s += spent
                self._stop.wait(max(0.0, self.interval_s - spent))
        except Exception as exc:  # noqa: BLE001 - the telemetry never fails the op
            self.why = f"the telemetry thread stopped: {type(exc).__name__}: {exc}"

    def record(self, identity: dict | None) -> dict:
        """``result.json`` ``telemetry``: the reduced samples of the measurement phase, or
        ``{"source": "unknown" | "off", "why"}``."""
        if self.monitor is None:
            return {"source": "unknown", "why": self.why or "no device monitor was opened"}
        base = {"source": self.monitor.source, "device": {"uuid": (self.state or {}).get("uuid"), "index": self.index,
                                                          "found_by": self.monitor.found_by},
                "interval_ms": round(self.interval_s * 1000.0, 3), "reasons_api": self.monitor.reasons_api}
        if self.interval_s <= 0:
            return {**base, "source": "off", "why": "OPSCREEN_TELEMETRY_MS=0: sampling is off"}
        window = measurement_window(identity, self.spawned_at)
        kept = [s for s in self.samples if window is None or window[0] <= s.t <= window[1]]
        out = {**base, "window": "measurement" if window is not None else "child",
               "window_s": round(window[1] - window[0], 3) if window is not None else None,
               **reduce_samples(kept, self.monitor.max_sm_clock_mhz()),
               "sampling_s": round(self.sampling_s, 6), "samples_all": len(self.samples),
               "trace": trace(kept, window[0] if window is not None else None)}
        if self.why:
            out["why"] = self.why
        return out

"""Device monitors: what the vendor's management library says about one device, read from
the harness's process (never inside the child), for the telemetry of an op
(:mod:`opscreen.op.telemetry`) and the device's state in its identity.

- NVIDIA: NVML through ``pynvml`` (the ``nvidia-ml-py`` package), imported on first use and
  only for the cuda backend.
- AMD: ``amdsmi`` (ROCm's Python package), imported on first use and only for the rocm
  backend; a host without it records why.
- Every other backend (MUSA, Ascend, MLU, the CPU) has no monitor here: :func:`open_monitor`
  says so, and the caller records ``{"source": "unknown", "why": ...}``. Nothing is guessed.

A :class:`Monitor` reads one :class:`Sample` (SM and memory clock, power draw and enforced
limit, temperature, the clock-event reasons as a bit mask) in a handful of library calls,
and the device's :meth:`Monitor.state` (power limits, application and max clocks,
persistence, MIG, ECC and compute mode, whether the clocks are pinned). A quantity the
device or driver does not report is None; one failed call never fails the others.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
import weakref
from dataclasses import dataclass

__all__ = ["REASONS", "BAD_REASONS", "Sample", "Monitor", "NvmlMonitor", "AmdSmiMonitor", "open_monitor",
           "no_monitor", "decode_reasons", "Unavailable"]

#: NVML's clock-event (formerly throttle) reasons: name -> bit (nvml.h,
#: ``nvmlClocksEventReason*``; the same bits as ``nvmlClocksThrottleReason*`` of older drivers)
REASONS = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clocks_setting", 0x100),
)
#: the reasons that slow the clock for power, heat or a hardware signal: a row measured
#: while one of them held was not measured in a fair state (opscreen.results.throttle)
BAD_REASONS = ("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
_KNOWN_BITS = sum(bit for _, bit in REASONS)
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


def decode_reasons(mask: int | None) -> list[str]:
    """The named reasons of a clock-event bit mask (bits NVML does not name here: ``other_0x...``)."""
    if mask is None:
        return []
    names = [name for name, bit in REASONS if mask & bit]
    rest = int(mask) & ~_KNOWN_BITS
    if rest:
        names.append(f"other_{rest:#x}")
    return names


class Unavailable(Exception):
    """No monitor for this device: the message says why (recorded as the telemetry's ``why``)."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading (``t``: ``time.time()``, the clock the child's phase marks use)."""

    t: float
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    power_w: float | None
    power_limit_w: float | None
    temperature_c: float | None
    reasons: int | None  # the clock-event bit mask (NVML); None where unknown


class Monitor:
    """One device of one library (subclasses); ``found_by`` says how it was found (uuid | index)."""

    source = "unknown"
    found_by = "index"
    reasons_api: str | None = None  # which call read the reasons (clocks_event | clocks_throttle)
    # each subclass reads: sample() -> Sample, max_sm_clock_mhz() -> float | None, state() -> dict


def _call(fn, *args):
    """``fn(*args)``, or None when the library raises (not supported, no permission, ...)."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - every library error means "not reported"
        return None


def _text(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


# -- NVML ------------------------------------------------------------------------------

_INIT_LOCK = threading.Lock()
# module -> None (initialised) or why it failed; weak: a test's stand-in module goes with its test
_INITIALISED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _import(name: str):
    """The module ``name`` (a test double in ``sys.modules`` wins), or :class:`Unavailable`."""
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or a library that fails to load
        raise Unavailable(f"{name} is not importable ({type(exc).__name__}: {exc})") from None


def _nvml():
    """pynvml, initialised once per process (NVML's init is process-wide and counted)."""
    nv = _import("pynvml")
    with _INIT_LOCK:
        if nv not in _INITIALISED:
            try:
                nv.nvmlInit()
                _INITIALISED[nv] = None
            except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
                _INITIALISED[nv] = f"NVML did not initialise ({type(exc).__name__}: {exc})"
        why = _INITIALISED[nv]
    if why:
        raise Unavailable(why)
    return nv


def nvml_uuid(uuid: str) -> str:
    """torch's device UUID (bare hex) as NVML names it (``GPU-...``; a MIG instance keeps ``MIG-``)."""
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


class NvmlMonitor(Monitor):
    source = "nvml"

    def __init__(self, uuid: str | None, index: int | None):
        nv = self.nv = _nvml()
        handle = None
        if uuid:
            handle = _call(nv.nvmlDeviceGetHandleByUUID, nvml_uuid(uuid))
            self.found_by = "uuid"
        if handle is None and index is not None:
            handle = _call(nv.nvmlDeviceGetHandleByIndex, int(index))
            self.found_by = "index"
        if handle is None:
            raise Unavailable(f"NVML has no device with UUID {uuid!r} or index {index!r}")
        self.handle = handle
        self._reasons = self._reasons_call()

    def _reasons_call(self):
        """``nvmlDeviceGetCurrentClocksEventReasons``, else ``...ThrottleReasons`` (older drivers and
        bindings); None when neither answers."""
        for api, name in (("clocks_event", "nvmlDeviceGetCurrentClocksEventReasons"),
                          ("clocks_throttle", "nvmlDeviceGetCurrentClocksThrottleReasons")):
            fn = getattr(self.nv, name, None)
            if fn is not None and _call(fn, self.handle) is not None:
                self.reasons_api = api
                return fn
        return None

    def sample(self) -> Sample:
        nv, h = self.nv, self.handle
        power = _call(nv.nvmlDeviceGetPowerUsage, h)
        limit = _call(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        return Sample(
            t=time.time(),
            sm_clock_mhz=_call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            mem_clock_mhz=_call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            power_w=power / 1000.0 if power is not None else None,  # NVML: milliwatts
            power_limit_w=limit / 1000.0 if limit is not None else None,
            temperature_c=_call(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            reasons=_call(self._reasons, h) if self._reasons is not None else None,
        )

    def max_sm_clock_mhz(self) -> float | None:
        return _call(self.nv.nvmlDeviceGetMaxClockInfo, self.handle, self.nv.NVML_CLOCK_SM)

    def _clocks(self, kind) -> dict:
        nv, h = self.nv, self.handle
        clock = getattr(nv, "nvmlDeviceGetClock", None)
        target = _call(clock, h, kind, nv.NVML_CLOCK_ID_APP_CLOCK_TARGET) if clock else None
        default = _call(clock, h, kind, nv.NVML_CLOCK_ID_APP_CLOCK_DEFAULT) if clock else None
        return {"application": target if target is not None else _call(nv.nvmlDeviceGetApplicationsClock, h, kind),
                "application_default": default if default is not None
                else _call(nv.nvmlDeviceGetDefaultApplicationsClock, h, kind),
                "max": _call(nv.nvmlDeviceGetMaxClockInfo, h, kind)}

    def state(self) -> dict:
        """The device's settings that change what it measures (docs/telemetry.md, "Device state")."""
        nv, h = self.nv, self.handle
        mw = {"enforced": _call(nv.nvmlDeviceGetEnforcedPowerLimit, h),
              "default": _call(nv.nvmlDeviceGetPowerManagementDefaultLimit, h)}
        clocks = {"sm": self._clocks(nv.NVML_CLOCK_SM), "mem": self._clocks(nv.NVML_CLOCK_MEM)}
        mig = _call(nv.nvmlDeviceGetMigMode, h)
        ecc = _call(nv.nvmlDeviceGetEccMode, h)
        pm = _call(nv.nvmlDeviceGetPersistenceMode, h)
        cm = _call(nv.nvmlDeviceGetComputeMode, h)
        return {
            "source": "nvml",
            "uuid": _text(_call(nv.nvmlDeviceGetUUID, h)),
            "found_by": self.found_by,
            "power_limit_w": {k: (v / 1000.0 if v is not None else None) for k, v in mw.items()},
            "clocks_mhz": clocks,
            "persistence_mode": None if pm is None else bool(pm),
            "mig_mode": None if not mig else bool(mig[0]),
            "ecc_mode": None if not ecc else bool(ecc[0]),
            "compute_mode": None if cm is None else COMPUTE_MODES.get(int(cm), str(cm)),
            "clocks_locked": clocks_locked(clocks),
        }


def clocks_locked(clocks: dict) -> bool | None:
    """Whether application clocks are set away from their default (``nvidia-smi -ac``), for
    the SM or the memory clock; None when NVML reports neither pair. A lock by
    ``nvidia-smi -lgc`` has no getter in NVML: it shows in the telemetry instead (SM clock
    min = max, reason ``applications_clocks_setting``; docs/telemetry.md)."""
    seen = [(c.get("application"), c.get("application_default")) for c in clocks.values()]
    pairs = [(a, d) for a, d in seen if a is not None and d is not None]
    if not pairs:
        return None
    return any(a != d for a, d in pairs)


# -- amdsmi ----------------------------------------------------------------------------


class AmdSmiMonitor(Monitor):
    """ROCm's amdsmi (6.1 or newer: clocks in MHz, power in W). It reports no clock-event
    reasons in NVML's sense: ``reasons`` stays None, and the op's telemetry says so."""

    source = "amdsmi"

    def __init__(self, uuid: str | None, index: int | None):
        am = self.am = _import("amdsmi")
        with _INIT_LOCK:
            if am not in _INITIALISED:
                try:
                    am.amdsmi_init()
                    _INITIALISED[am] = None
                except Exception as exc:  # noqa: BLE001
                    _INITIALISED[am] = f"amdsmi did not initialise ({type(exc).__name__}: {exc})"
            why = _INITIALISED[am]
        if why:
            raise Unavailable(why)
        handles = _call(am.amdsmi_get_processor_handles) or []
        found = [h for h in handles if uuid and _call(am.amdsmi_get_gpu_device_uuid, h) == uuid]
        if found:
            self.handle, self.found_by = found[0], "uuid"
        elif index is not None and 0 <= int(index) < len(handles):
            self.handle, self.found_by = handles[int(index)], "index"
        else:
            raise Unavailable(f"amdsmi has no device with UUID {uuid!r} or index {index!r}")

    def _clock(self, kind: str, key: str = "clk"):
        info = _call(self.am.amdsmi_get_clock_info, self.handle, getattr(self.am.AmdSmiClkType, kind))
        return info.get(key) if isinstance(info, dict) else None

    def sample(self) -> Sample:
        am, h = self.am, self.handle
        power = _call(am.amdsmi_get_power_info, h)
        power = power if isinstance(power, dict) else {}
        temp = _call(am.amdsmi_get_temp_metric, h, am.AmdSmiTemperatureType.HOTSPOT, am.AmdSmiTemperatureMetric.CURRENT)
        draw = power.get("current_socket_power")
        return Sample(t=time.time(), sm_clock_mhz=self._clock("GFX"), mem_clock_mhz=self._clock("MEM"),
                      power_w=_num(draw if _num(draw) is not None else power.get("average_socket_power")),
                      power_limit_w=_num(power.get("power_limit")), temperature_c=_num(temp), reasons=None)

    def max_sm_clock_mhz(self) -> float | None:
        return _num(self._clock("GFX", "max_clk"))

    def state(self) -> dict:
        power = _call(self.am.amdsmi_get_power_info, self.handle)
        power = power if isinstance(power, dict) else {}
        return {"source": "amdsmi", "found_by": self.found_by,
                "power_limit_w": {"enforced": _num(power.get("power_limit")), "default": None},
                "clocks_mhz": {"sm": {"max": self.max_sm_clock_mhz()}, "mem": {"max": _num(self._clock("MEM", "max_clk"))}},
                "persistence_mode": None, "mig_mode": None, "ecc_mode": None, "compute_mode": None,
                "clocks_locked": None}


def _num(v):
    """A number amdsmi reported (it says ``"N/A"`` where it has none), else None."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


#: backend name -> the monitor of its vendor library
MONITORS = {"cuda": NvmlMonitor, "rocm": AmdSmiMonitor}


def no_monitor(backend: str) -> str | None:
    """Why ``backend`` has no monitor here (None: it has one to try)."""
    if backend in MONITORS:
        return None
    return f"the {backend} backend has no device-telemetry library in opscreen (NVML and amdsmi only)"


def open_monitor(backend: str, uuid: str | None, index: int | None) -> Monitor:
    """The monitor of the device (found by ``uuid``, else ``index``); :class:`Unavailable`
    with the reason when the backend has no library here or it cannot reach the device."""
    why = no_monitor(backend)
    if why:
        raise Unavailable(why)
    return MONITORS[backend](uuid, index)

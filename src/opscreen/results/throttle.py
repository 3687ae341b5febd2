"""Was the device in a fair state while an op measured? The rule that reads an op's
telemetry (``result.json`` ``telemetry``, op/telemetry.py) into the ``throttled`` cell of
its rows (summary.csv), and what ``compare`` says of the device's state (docs/telemetry.md).

An op was measured in a bad state when, inside its measurement phase,

- a sample saw a clock-event reason that slows the clock for power, heat or a hardware
  signal (:data:`BAD_REASONS`: ``sw_power_cap``, ``hw_slowdown``, ``hw_thermal_slowdown``,
  ``hw_power_brake_slowdown``, ``sw_thermal_slowdown``), or
- the median SM clock of its busy samples (those without ``gpu_idle``) sat below
  :data:`CLOCK_THRESHOLD` of the device's maximum SM clock: nvbench's default
  ``--throttle-threshold`` (75 % of the clock rate CUDA reports, the maximum boost clock).

The cell is ``no`` when the telemetry was read and neither held, the reasons with their
share of the samples (``sw_power_cap 12%; sm clock 1410/1980 MHz``) when one did, and empty
(None) where the op has no telemetry (the cpu backend, no NVML, an older run).
"""

from __future__ import annotations

from ..backends.devmon import BAD_REASONS

__all__ = ["CLOCK_THRESHOLD", "BAD_REASONS", "throttled", "combine", "is_throttled", "state_fields", "state_diffs"]

CLOCK_THRESHOLD = 0.75
MEASURED = ("nvml", "amdsmi")
NOT_THROTTLED = "no"


def throttled(tel: dict | None) -> str | None:
    """The ``throttled`` cell of an op's rows from its telemetry block (module docstring)."""
    if not isinstance(tel, dict) or tel.get("source") not in MEASURED or not tel.get("samples"):
        return None
    parts = []
    shares = tel.get("reasons") or {}
    for name in BAD_REASONS:
        if name in shares:
            parts.append(f"{name} {100.0 * float(shares[name]):.0f}%")
    busy = (tel.get("sm_clock_busy_mhz") or {}).get("median")
    top = tel.get("max_sm_clock_mhz")
    if isinstance(busy, (int, float)) and isinstance(top, (int, float)) and top > 0 and busy < CLOCK_THRESHOLD * top:
        parts.append(f"sm clock {busy:.0f}/{top:.0f} MHz")
    if not parts and tel.get("reasons") is None and not isinstance(busy, (int, float)):
        return None  # neither the reasons nor a busy clock were read: nothing to judge by
    return "; ".join(parts) or NOT_THROTTLED


def combine(cells: list[str | None]) -> str | None:
    """One cell for an op measured by several processes (``--repeats``): each process's
    reasons, ``no`` when every process was read and none throttled, None when none was read."""
    known = [c for c in cells if c is not None]
    if not known:
        return None
    bad = [f"repeat {i + 1}: {c}" for i, c in enumerate(cells) if c not in (None, NOT_THROTTLED)]
    return "; ".join(bad) if bad else NOT_THROTTLED


def is_throttled(cell: str | None) -> bool:
    return cell not in (None, "", NOT_THROTTLED)


#: the device settings compare reports when A's and B's differ (the run_identity.json
#: ``device_state`` keys; what changes from sample to sample, such as the current clock, is not here)
STATE_FIELDS = (
    ("power_limit_w", "enforced"), ("power_limit_w", "default"),
    ("clocks_mhz", "sm", "application"), ("clocks_mhz", "sm", "max"),
    ("clocks_mhz", "mem", "application"), ("clocks_mhz", "mem", "max"),
    ("persistence_mode",), ("mig_mode",), ("ecc_mode",), ("compute_mode",), ("clocks_locked",),
)


def state_fields(state: dict | None) -> dict[str, object]:
    """The compared settings of one ``device_state`` ({} where it says unknown)."""
    if not isinstance(state, dict) or state.get("source") not in MEASURED:
        return {}
    out: dict[str, object] = {}
    for path in STATE_FIELDS:
        v: object = state
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None:
            out[".".join(path)] = v
    return out


def state_diffs(states_a: list[dict | None], states_b: list[dict | None]) -> list[tuple[str, list, list]]:
    """The device settings whose values differ between A's ops and B's (each side's distinct
    values, sorted); a setting one side did not read is not compared."""
    def values(states):
        seen: dict[str, set] = {}
        for st in states:
            for k, v in state_fields(st).items():
                seen.setdefault(k, set()).add(v)
        return seen

    va, vb = values(states_a), values(states_b)
    out = []
    for k in (".".join(p) for p in STATE_FIELDS):
        if k in va and k in vb and va[k] != vb[k]:
            out.append((k, sorted(va[k], key=str), sorted(vb[k], key=str)))
    return out

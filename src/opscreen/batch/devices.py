"""Which devices a run uses: ``--devices`` (``opscreen run``) or ``--device`` (``opscreen op``)
checked against what the backend enumerates, or CPU slots."""

from __future__ import annotations

import os
import sys

from ..errors import UsageError
from ..settings import CPU_ALL_SLOTS


def cpu_slots() -> int:
    """CPU slots there are: one per core (a slot beyond the cores is not a lane)."""
    return max(1, os.cpu_count() or 1)


def choose_devices(backend, spec: str | None, python: str | None, flag: str = "--devices") -> list[int]:
    """The device indices to run on, from ``spec`` (``0,1,4-7``, ``all`` or None: all).

    On cpu the indices are slots, 0..cores-1 (``all``: the first
    min(CPU_ALL_SLOTS, cores)). On an accelerator they are checked against what
    ``backend.enumerate`` finds; when it finds nothing, that is an error too,
    unless a source timed out (then explicit indices are used as given, with a
    printed line). ``opscreen op`` checks its ``--device`` here as well."""
    from .scheduling import parse_devices

    wanted = parse_devices(spec, flag)
    if backend.capabilities.slots:
        slots = cpu_slots()
        if wanted is None:
            return list(range(min(CPU_ALL_SLOTS, slots)))
        beyond = [d for d in wanted if d >= slots]
        if beyond:
            raise UsageError(
                f"{flag} {spec}: {backend.name} slots are 0..{slots - 1} on this machine ({slots} cores), "
                f"not {', '.join(map(str, beyond))}"
            )
        return wanted
    en = backend.enumerate(python)
    found = [d.index for d in en.devices]
    if not found:
        notes = "; ".join(en.messages) or "no source listed a device"
        if wanted is not None and any("timed out" in m for m in en.messages):
            sys.stderr.write(f"opscreen: {flag} {spec}: could not confirm the {backend.name} devices ({notes}); "
                             "using them as given\n")
            return wanted
        what = f"{flag} {spec}" if wanted is not None else f"{flag} all"
        raise UsageError(
            f"{what}: backend {backend.name} found no devices ({notes}); "
            f"check 'opscreen devices --backend {backend.name}' or choose another --backend"
        )
    if wanted is None:
        return found
    missing = [d for d in wanted if d not in found]
    if missing:
        raise UsageError(
            f"{flag}: {', '.join(map(str, missing))} not among the {backend.name} devices found "
            f"({', '.join(map(str, found))})"
        )
    return wanted


def recorded_devices(base: dict, resuming: bool) -> str | None:
    if resuming and base.get("devices"):
        return ",".join(str(d) for d in base["devices"])
    return None

"""Placement and selection: the stable hash, ``--shard`` and ``--devices``.

Placement is a stable hash of the op name (blake2b, never Python's salted
``hash()``) modulo the size of the device set, so the same op lands on the same
device of the same device set in every run. Sharding across machines
(``--shard I/N``) uses the same hash function with a different personalisation,
i.e. independent bits: the ops of one shard still spread over all its devices.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from ...errors import UsageError


def stable_hash(name: str, purpose: str = "device") -> int:
    """A 64-bit hash of ``name`` that is the same on every machine and every run.

    ``purpose`` personalises the hash (``device`` for placement, ``shard`` for
    sharding), so placement and sharding use independent bits.
    """
    person = purpose.encode("utf-8")[:16]
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8, person=person).digest()
    return int.from_bytes(digest, "big")


def home_device(op: str, devices: Iterable[int], shift: int = 0) -> int:
    """The device ``op`` is placed on within ``devices`` (order does not matter):
    ``shift`` devices along from its hash's (``--placement-shift``: with 2 or more
    devices and a shift that is not a multiple of their number, every op moves)."""
    devs = sorted(set(devices))
    if not devs:
        raise ValueError("no devices")
    return devs[(stable_hash(op, "device") + shift) % len(devs)]


def parse_shard(spec: str | None) -> tuple[int, int] | None:
    """``"I/N"`` (0 <= I < N) -> (I, N); None passes through."""
    if spec is None or spec == "":
        return None
    try:
        i_s, n_s = spec.split("/")
        i, n = int(i_s), int(n_s)
    except ValueError:
        raise UsageError(f"--shard takes I/N with 0 <= I < N (e.g. 0/4), not '{spec}'") from None
    if n < 1 or not 0 <= i < n:
        raise UsageError(f"--shard takes I/N with 0 <= I < N (e.g. 0/4), not '{spec}'")
    return i, n


def in_shard(op: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    i, n = shard
    return stable_hash(op, "shard") % n == i


def shard_ops(ops: Iterable[str], shard: tuple[int, int] | None) -> list[str]:
    return [op for op in ops if in_shard(op, shard)]


# No machine has more devices (or CPU slots) than this; a larger index is a typo,
# and a range up to it must not build a list of a billion lanes.
MAX_DEVICE_INDEX = 4095


def parse_devices(spec: str | None, flag: str = "--devices") -> list[int] | None:
    """``"0,1,4-7"`` -> [0, 1, 4, 5, 6, 7]; ``"all"``/None -> None (the caller enumerates).

    An empty value is an error, not "all": ``--devices ''`` (an unset shell
    variable, say) must not silently run on every device."""
    if spec is None or spec.strip().lower() == "all":
        return None
    usage = f"{flag} takes a list like 0,1,4-7 or 'all', not '{spec}'"
    if not spec.strip():
        raise UsageError(f"{flag} '': give a list like 0,1,4-7 or 'all'")
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if not part.isascii():  # int() reads other scripts' digits too: '١' ran as device 1
                raise ValueError
            if "-" in part:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if hi < lo or lo < 0:
                    raise ValueError
            else:
                lo = hi = int(part)
                if lo < 0:
                    raise ValueError
        except ValueError:
            raise UsageError(usage) from None
        if hi > MAX_DEVICE_INDEX:
            raise UsageError(f"{flag} {spec}: device index {hi} is beyond {MAX_DEVICE_INDEX}")
        for d in range(lo, hi + 1):
            if d not in out:
                out.append(d)
    if not out:
        raise UsageError(usage)
    return out



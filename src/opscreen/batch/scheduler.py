"""Which op runs on which device: stable-hash placement with work stealing.

Placement is a stable hash of the op name (blake2b, never Python's salted
``hash()``) modulo the size of the device set, so the same op lands on the same
device of the same device set in every run. Sharding across machines
(``--shard I/N``) uses the same hash function with a different personalisation,
i.e. independent bits: the ops of one shard still spread over all its devices.

Hash placement is reproducible but uneven in load (a few ops take minutes), so a
device whose queue empties may steal a queued op from the busiest device
(``steal=True``). Every op's placement (hashed device, device that ran it) is
recorded by the batch runner, so a comparison can still tell which device
measured it.

The policy follows pytest-xdist's scheduling protocol: a small object that knows
nothing about processes, driven by the runner and tested with fake devices.

Lifecycle::

    sched = HashScheduler(ops, steal=True)
    sched.add_device(0); sched.add_device(1)     # the initial device set
    op = sched.next_for(0)                       # first call distributes the ops
    ...
    sched.mark_op_complete(0, op)                # the device is idle again
    running = sched.remove_device(1)             # a bad device: its queue moves
    sched.requeue(op, avoid={1})                 # retry elsewhere
    sched.finished                               # nothing queued, nothing running
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import Iterable

from ..errors import UsageError


def stable_hash(name: str, purpose: str = "device") -> int:
    """A 64-bit hash of ``name`` that is the same on every machine and every run.

    ``purpose`` personalises the hash (``device`` for placement, ``shard`` for
    sharding), so placement and sharding use independent bits.
    """
    person = purpose.encode("utf-8")[:16]
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8, person=person).digest()
    return int.from_bytes(digest, "big")


def home_device(op: str, devices: Iterable[int]) -> int:
    """The device ``op`` is placed on within ``devices`` (order does not matter)."""
    devs = sorted(set(devices))
    if not devs:
        raise ValueError("no devices")
    return devs[stable_hash(op, "device") % len(devs)]


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


class HashScheduler:
    """Per-device queues filled by stable hash; idle devices steal from the busiest.

    Each device runs at most one op at a time. ``next_for`` hands a device its
    next op (its own queue first, then, with ``steal``, the last queued op of the
    device with the longest queue). ``remove_device`` takes a device out (bad
    device, lost worker): its queue is redistributed over the remaining devices by
    the same hash, and the op it was running is returned so the caller can decide
    whether to requeue it.
    """

    def __init__(self, ops: Iterable[str], *, steal: bool = True):
        self.steal = steal
        self._pending: list[str] = list(dict.fromkeys(ops))  # before distribution
        self.queues: dict[int, deque[str]] = {}
        self.running: dict[int, str | None] = {}
        self.home: dict[str, int] = {}  # op -> hashed device at distribution time
        self.completed: set[str] = set()
        self.stolen: dict[str, tuple[int, int]] = {}  # op -> (from, to) while it runs where it was stolen to
        self._distributed = False
        self.removed: list[int] = []
        self.avoid: dict[str, set[int]] = {}  # op -> devices it must not run on again if avoidable

    # -- device set ---------------------------------------------------------
    @property
    def devices(self) -> list[int]:
        return sorted(self.queues)

    def add_device(self, device: int) -> None:
        if device in self.queues:
            raise ValueError(f"device {device} already added")
        self.queues[device] = deque()
        self.running[device] = None

    def remove_device(self, device: int) -> str | None:
        """Take ``device`` out of the set; return the op it was running (or None).

        Its queued ops move to the remaining devices, placed by hash among them.
        The returned op is neither queued nor complete: requeue it or finish it.
        """
        if device not in self.queues:
            raise KeyError(device)
        queue = self.queues.pop(device)
        running = self.running.pop(device)
        self.removed.append(device)
        if self.queues:
            for op in queue:
                self.queues[self._place(op)].append(op)
        else:
            self._pending.extend(queue)
        return running

    def _place(self, op: str) -> int:
        """Hash placement among the current devices, skipping devices ``op`` avoids."""
        avoid = self.avoid.get(op, set())
        devs = [d for d in self.devices if d not in avoid] or self.devices
        return home_device(op, devs)

    # -- ops ---------------------------------------------------------------
    def _distribute(self) -> None:
        if self._distributed or not self.queues:
            return
        devs = self.devices
        for op in self._pending:
            d = home_device(op, devs)
            self.home[op] = d
            self.queues[d].append(op)
        self._pending = []
        self._distributed = True

    def next_for(self, device: int) -> str | None:
        """The next op for idle ``device``, or None when it has nothing to do."""
        self._distribute()
        if device not in self.queues:
            raise KeyError(device)
        if self.running[device] is not None:
            raise RuntimeError(f"device {device} is still running {self.running[device]}")
        q = self.queues[device]
        op: str | None = None
        if q:
            op = q.popleft()
        elif self.steal:
            op = self._steal(device)
        if op is not None:
            self.running[device] = op
        return op

    def _steal(self, device: int) -> str | None:
        """The last queued op of the busiest other device that does not avoid ``device``."""
        order = sorted((d for d in self.devices if d != device), key=lambda d: (-len(self.queues[d]), d))
        for victim in order:
            q = self.queues[victim]
            for i in range(len(q) - 1, -1, -1):
                op = q[i]
                if device in self.avoid.get(op, ()):
                    continue
                del q[i]
                self.stolen[op] = (victim, device)
                return op
        return None

    def mark_op_complete(self, device: int, op: str) -> None:
        if self.running.get(device) != op:
            raise RuntimeError(f"device {device} is not running {op}")
        self.running[device] = None
        self.completed.add(op)

    def release(self, device: int, op: str) -> None:
        """The device stops running ``op`` without completing it (to requeue)."""
        if self.running.get(device) != op:
            raise RuntimeError(f"device {device} is not running {op}")
        self.running[device] = None

    def requeue(self, op: str, avoid: Iterable[int] = ()) -> int | None:
        """Put ``op`` at the front of a queue, preferring a device not in ``avoid``
        (the least loaded such device; idle devices first). Returns the device
        chosen, or None when no device is left (the op waits in the pending list)."""
        self._distribute()
        # placed, not stolen: an op a device stole and then gave up (a device-fatal exit)
        # runs where it is put now, possibly the device it was stolen from
        self.stolen.pop(op, None)
        avoid = set(avoid)
        if avoid:
            self.avoid.setdefault(op, set()).update(avoid)
        avoid = self.avoid.get(op, set())
        devs = [d for d in self.devices if d not in avoid] or self.devices
        if not devs:
            self._pending.insert(0, op)
            return None
        target = min(devs, key=lambda d: (len(self.queues[d]) + (self.running[d] is not None), d))
        self.queues[target].appendleft(op)
        return target

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self.queues.values()) + len(self._pending)

    @property
    def busy(self) -> list[int]:
        return [d for d, op in self.running.items() if op is not None]

    @property
    def finished(self) -> bool:
        return self.queued == 0 and not self.busy

    def queue_of(self, device: int) -> list[str]:
        return list(self.queues.get(device, ()))

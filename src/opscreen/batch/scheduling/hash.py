"""Hash placement: per-device queues filled by stable hash, no stealing.

Each device runs at most one op at a time. ``next_for`` hands a device the next
op of its own queue. ``remove_device`` takes a device out (bad device, lost
worker): its queue is redistributed over the remaining devices by the same hash,
and the op it was running is returned so the caller can decide whether to
requeue it. Implements :class:`~.protocol.Scheduler`; stealing is a policy on
top of it (:mod:`.steal`).
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

from .placement import home_device


class HashScheduler:
    """Per-device queues filled by stable hash (a device only runs its own ops)."""

    steal = False

    def __init__(self, ops: Iterable[str], shift: int = 0):
        self.shift = shift  # --placement-shift: each op that many devices along from its hashed one
        self._pending: list[str] = list(dict.fromkeys(ops))  # before distribution
        self.queues: dict[int, deque[str]] = {}
        self.running: dict[int, str | None] = {}
        self.home: dict[str, int] = {}  # op -> hashed device at distribution time
        self.completed: set[str] = set()
        self.stolen: dict[str, tuple[int, int]] = {}  # op -> (from, to); filled by stealing policies
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
        return home_device(op, devs, self.shift)

    # -- ops ---------------------------------------------------------------
    def _distribute(self) -> None:
        if self._distributed or not self.queues:
            return
        devs = self.devices
        for op in self._pending:
            d = home_device(op, devs, self.shift)
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
        op = q.popleft() if q else self._when_empty(device)
        if op is not None:
            self.running[device] = op
        return op

    def _when_empty(self, device: int) -> str | None:
        """What an idle device with an empty queue runs: nothing (see :mod:`.steal`)."""
        return None

    def mark_op_complete(self, device: int, op: str) -> None:
        if self.running.get(device) != op:
            raise RuntimeError(f"device {device} is not running {op}")
        self.running[device] = None
        self.completed.add(op)

    def op_done(self, op: str, device: int | None = None) -> None:
        """``op`` is done wherever it is (its device may have been removed meanwhile)."""
        if device is not None and self.running.get(device) == op:
            self.mark_op_complete(device, op)
        else:
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

    # -- questions -----------------------------------------------------------
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

    def running_on(self, device: int) -> str | None:
        return self.running.get(device)

    def runnable(self, device: int) -> bool:
        self._distribute()
        return device in self.queues and self.running[device] is None and bool(self.queues[device] or self.steal)

    def home_of(self, op: str) -> int | None:
        return self.home.get(op)

    def stolen_from(self, op: str) -> int | None:
        got = self.stolen.get(op)
        return got[0] if got else None

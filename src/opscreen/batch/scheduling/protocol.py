"""The scheduling protocol: what the batch session asks of a scheduling policy.

After pytest-xdist's ``scheduler/protocol.py``: a policy is a small object that
knows nothing about processes, files or retries. The session drives it with the
calls below (from its main thread only) and never reads a policy's fields, so a
policy can be replaced (hash placement, hash placement with stealing, ...)
without touching the session. Each policy lives in its own module and is tested
with fake devices (tests/test_scheduler.py).

Lifecycle::

    sched.add_device(0); sched.add_device(1)     # the initial device set
    op = sched.next_for(0)                       # the device is idle: its next op
    ...
    sched.mark_op_complete(0, op)                # done; the device is idle again
    sched.release(0, op)                         # gave it up without completing it
    running = sched.remove_device(1)             # a bad device: its queue moves
    sched.requeue(op, avoid={1})                 # retry elsewhere
    sched.finished                               # nothing queued, nothing running
"""

from __future__ import annotations

from typing import Iterable, Protocol, runtime_checkable


@runtime_checkable
class Scheduler(Protocol):
    @property
    def devices(self) -> list[int]:
        """The devices in the set (sorted)."""

    @property
    def finished(self) -> bool:
        """Nothing queued and nothing running."""

    def add_device(self, device: int) -> None: ...

    def remove_device(self, device: int) -> str | None:
        """Take ``device`` out; its queue moves; return the op it was running."""

    def next_for(self, device: int) -> str | None:
        """The next op for idle ``device`` (now running there), or None."""

    def running_on(self, device: int) -> str | None:
        """The op ``device`` runs now, or None when it is idle."""

    def runnable(self, device: int) -> bool:
        """True when ``device`` is idle and :meth:`next_for` may give it an op."""

    def mark_op_complete(self, device: int, op: str) -> None:
        """``op`` finished on ``device`` (which must be running it)."""

    def op_done(self, op: str, device: int | None = None) -> None:
        """``op`` is done: ``device`` is idle again if it was running it."""

    def release(self, device: int, op: str) -> None:
        """``device`` stops running ``op`` without completing it."""

    def requeue(self, op: str, avoid: Iterable[int] = ()) -> int | None:
        """Queue ``op`` again, away from ``avoid`` when possible; the device chosen."""

    def queue_of(self, device: int) -> list[str]: ...

    def home_of(self, op: str) -> int | None:
        """The device ``op`` was placed on first."""

    def stolen_from(self, op: str) -> int | None:
        """The device ``op`` was taken from while it runs elsewhere, else None."""

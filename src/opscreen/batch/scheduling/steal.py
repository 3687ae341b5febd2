"""Hash placement with work stealing.

Hash placement is reproducible but uneven in load (a few ops take minutes), so a
device whose queue empties steals a queued op from the busiest device: the last
queued op of the device with the longest queue, never an op that avoids the
thief (it had a device-fatal exit there). Every op's placement (hashed device,
device that ran it) is recorded by the batch session, so a comparison can still
tell which device measured it.
"""

from __future__ import annotations

from typing import Iterable

from .hash import HashScheduler


class StealingScheduler(HashScheduler):
    """:class:`~.hash.HashScheduler` whose idle devices steal from the busiest."""

    steal = True

    def _when_empty(self, device: int) -> str | None:
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

    def requeue(self, op: str, avoid: Iterable[int] = ()) -> int | None:
        # placed, not stolen: an op a device stole and then gave up (a device-fatal exit)
        # runs where it is put now, possibly the device it was stolen from
        self.stolen.pop(op, None)
        return super().requeue(op, avoid)

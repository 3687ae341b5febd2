"""Which op runs on which device: the protocol (:mod:`.protocol`), one policy per
module (:mod:`.hash`, :mod:`.steal`), and placement/selection helpers
(:mod:`.placement`: the stable hash, ``--shard``, ``--devices``)."""

from __future__ import annotations

from typing import Iterable

from .hash import HashScheduler
from .placement import MAX_DEVICE_INDEX, home_device, in_shard, parse_devices, parse_shard, shard_ops, stable_hash
from .protocol import Scheduler
from .steal import StealingScheduler


def make_scheduler(ops: Iterable[str], *, steal: bool = True, shift: int = 0) -> Scheduler:
    """The policy a run asks for: hash placement (``shift`` devices along), with stealing
    unless ``steal`` is off."""
    return StealingScheduler(ops, shift) if steal else HashScheduler(ops, shift)


__all__ = [
    "MAX_DEVICE_INDEX",
    "HashScheduler",
    "Scheduler",
    "StealingScheduler",
    "home_device",
    "in_shard",
    "make_scheduler",
    "parse_devices",
    "parse_shard",
    "shard_ops",
    "stable_hash",
]

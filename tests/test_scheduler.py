"""The scheduling policy, driven by fake devices (no processes)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

import opscreen

from opscreen.batch.scheduling import (
    HashScheduler,
    Scheduler,
    StealingScheduler,
    home_device,
    make_scheduler,
    parse_devices,
    parse_shard,
    shard_ops,
    stable_hash,
)
from opscreen.errors import UsageError

OPS = [f"op{i:03d}" for i in range(200)]


def drain(sched: HashScheduler, devices, rng=None, hold=None):
    """Run every op to completion with fake devices; return op -> device."""
    ran: dict[str, int] = {}
    rng = rng or random.Random(0)
    live = list(devices)
    while not sched.finished:
        progressed = False
        for d in list(live):
            if sched.running.get(d) is None:
                op = sched.next_for(d)
                if op is not None:
                    progressed = True
        busy = sched.busy
        if not busy:
            assert progressed or sched.finished
            continue
        d = rng.choice(busy)
        op = sched.running[d]
        assert op not in ran, f"{op} ran twice"
        ran[op] = d
        sched.mark_op_complete(d, op)
    return ran


def test_stable_hash_is_stable_across_processes():
    here = [stable_hash(op) for op in OPS[:5]]
    code = "from opscreen.batch.scheduling import stable_hash; print([stable_hash(f'op{i:03d}') for i in range(5)])"
    src = str(Path(opscreen.__file__).resolve().parents[1])  # this checkout's package
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONHASHSEED": "123", "PYTHONPATH": src}, check=True)
    assert out.stdout.strip() == str(here)


def test_placement_same_for_same_device_set_and_order_free():
    a = {op: home_device(op, [0, 1, 2, 3]) for op in OPS}
    b = {op: home_device(op, [3, 1, 0, 2]) for op in OPS}
    assert a == b
    # every device gets a fair share
    counts = {d: sum(1 for v in a.values() if v == d) for d in range(4)}
    assert all(30 <= c <= 70 for c in counts.values()), counts


def test_no_steal_keeps_hash_placement():
    s = HashScheduler(OPS)
    for d in (0, 1, 4):
        s.add_device(d)
    ran = drain(s, [0, 1, 4])
    assert set(ran) == set(OPS)
    assert all(ran[op] == home_device(op, [0, 1, 4]) for op in OPS)
    assert s.stolen == {}


def test_placement_shift_moves_every_op_to_another_device():
    devs = [0, 1, 4]
    base = {op: home_device(op, devs) for op in OPS}
    shifted = {op: home_device(op, devs, 1) for op in OPS}
    assert all(shifted[op] != base[op] for op in OPS)  # --placement-shift 1: every op on another device
    assert {op: home_device(op, devs, 3) for op in OPS} == base  # a whole turn
    assert {home_device(op, [2], 1) for op in OPS} == {2}  # one device: nowhere else to go
    s = make_scheduler(OPS, steal=False, shift=1)
    for d in devs:
        s.add_device(d)
    ran = drain(s, devs)
    assert ran == shifted and s.stolen == {}


def test_idle_device_steals_from_busiest():
    s = StealingScheduler(OPS)
    s.add_device(0)
    s.add_device(1)
    first0 = s.next_for(0)
    # device 1 finishes all its own ops while device 0 is stuck on one long op
    while True:
        op = s.next_for(1)
        if op is None:
            break
        s.mark_op_complete(1, op)
    assert s.queue_of(0) == []  # device 1 stole every queued op of device 0
    assert s.running[0] == first0
    assert all(frm == 0 and to == 1 for frm, to in s.stolen.values())
    s.mark_op_complete(0, first0)
    assert s.finished
    assert len(s.completed) == len(OPS)


def test_steal_takes_from_longest_queue_tail():
    ops = ["a", "b", "c", "d", "e", "f", "g", "h"]
    s = StealingScheduler(ops)
    for d in (0, 1, 2):
        s.add_device(d)
    s.next_for(0)  # distribute
    q = {d: s.queue_of(d) for d in (0, 1, 2)}
    # empty device 2's queue first
    s.queues[2].clear()
    victim = max((0, 1), key=lambda d: (len(q[d]), -d))
    expect = q[victim][-1]
    got = s.next_for(2)
    assert got == expect
    assert s.stolen[got] == (victim, 2)


def test_each_device_runs_one_op_at_a_time():
    s = StealingScheduler(OPS)
    s.add_device(0)
    s.next_for(0)
    with pytest.raises(RuntimeError):
        s.next_for(0)


def test_remove_device_returns_running_op_and_moves_queue():
    s = StealingScheduler(OPS)
    for d in (0, 1, 2):
        s.add_device(d)
    running = s.next_for(1)
    queued_on_1 = s.queue_of(1)
    assert queued_on_1
    got = s.remove_device(1)
    assert got == running
    assert 1 not in s.devices
    # its queue moved to the healthy devices, placed by hash among them
    for op in queued_on_1:
        assert op in s.queue_of(home_device(op, [0, 2]))
    # the running op is neither queued nor complete until the caller decides
    assert running not in s.completed
    assert all(running not in s.queue_of(d) for d in s.devices)
    assert s.requeue(running, avoid={1}) in (0, 2)
    ran = drain(s, [0, 2])
    assert sorted(ran) == sorted(OPS)  # every op once, the interrupted one included


def test_requeue_prefers_another_idle_device():
    s = HashScheduler(["x"] + OPS[:10])
    for d in (0, 1):
        s.add_device(d)
    d0 = home_device("x", [0, 1])
    s.next_for(d0)
    first = s.running[d0]
    s.release(d0, first)
    target = s.requeue(first, avoid={d0})
    assert target == 1 - d0
    assert s.queue_of(target)[0] == first


def test_random_fake_devices_every_op_exactly_once():
    for seed in range(20):
        rng = random.Random(seed)
        ops = [f"k{rng.randrange(10**6)}" for _ in range(rng.randrange(1, 60))]
        devs = rng.sample(range(8), rng.randrange(1, 5))
        s = make_scheduler(ops, steal=bool(seed % 2))
        for d in devs:
            s.add_device(d)
        ran = drain(s, devs, rng)
        assert sorted(ran) == sorted(set(ops))


def test_shard_partitions_and_is_independent_of_placement():
    shards = [shard_ops(OPS, (i, 3)) for i in range(3)]
    assert sorted(sum(shards, [])) == sorted(OPS)
    assert all(set(a).isdisjoint(b) for i, a in enumerate(shards) for b in shards[i + 1 :])
    # within one shard of 2, ops still land on both devices of a 2-device set
    shard0 = shard_ops(OPS, (0, 2))
    placed = {home_device(op, [0, 1]) for op in shard0}
    assert placed == {0, 1}


def test_parse_shard_and_devices():
    assert parse_shard("0/4") == (0, 4)
    assert parse_shard(None) is None
    for bad in ("4/4", "-1/2", "x", "1/0", "1"):
        with pytest.raises(UsageError):
            parse_shard(bad)
    assert parse_devices("0,1,4-7") == [0, 1, 4, 5, 6, 7]
    assert parse_devices("all") is None
    assert parse_devices(None) is None
    assert parse_devices("3,3,1") == [3, 1]
    for bad in ("a", "3-1", "-2", ","):
        with pytest.raises(UsageError):
            parse_devices(bad)


def test_steal_never_takes_back_an_op_that_avoids_the_thief():
    s = StealingScheduler(["x", "y"])
    s.add_device(0)
    s.add_device(1)
    s.next_for(0)  # distribute
    s.queues[0].clear()
    s.queues[1].clear()
    s.queues[0].extend(["x"])
    s.avoid["x"] = {1}
    assert s.next_for(1) is None  # x avoids device 1
    s.queues[0].append("y")
    assert s.next_for(1) == "y"
    # requeue records what to avoid and picks another device
    s.release(1, "y")
    assert s.requeue("y", avoid={1}) == 0
    assert s.avoid["y"] == {1}
    # a removed device's queue is re-placed away from avoided devices when possible
    s2 = HashScheduler([])
    for d in (0, 1, 2):
        s2.add_device(d)
    s2.next_for(0)
    s2.queues[2].extend(["p", "q", "r", "s", "t"])
    for op in "pqrst":
        s2.avoid[op] = {home_device(op, [0, 1])}
    s2.remove_device(2)
    for op in "pqrst":
        assert op not in s2.queue_of(home_device(op, [0, 1]))


def test_an_op_moved_after_it_was_stolen_is_no_longer_stolen():
    # device 1 steals op "b" from device 0, gives it up (a device-fatal exit) and the
    # runner requeues it away from 1: back on device 0 it is not "stolen from dev 0"
    s = StealingScheduler(["a", "b"])
    s.add_device(0)
    s.add_device(1)
    s._distribute()
    s.queues[0].extend(s.queues[1])
    s.queues[1].clear()
    first, last = list(s.queues[0])
    assert s.next_for(0) == first
    assert s.next_for(1) == last and s.stolen[last] == (0, 1)
    s.release(1, last)
    assert s.requeue(last, avoid={1}) == 0
    assert last not in s.stolen
    s.mark_op_complete(0, first)
    assert s.next_for(0) == last and last not in s.stolen
    # stolen again later: recorded anew
    s.release(0, last)
    s.avoid.clear()
    s.queues[0].append(last)
    s.running[0] = "busy"
    assert s.next_for(1) == last and s.stolen[last] == (0, 1)


# -- the protocol: what the batch session may ask, and nothing else ------------------

PROTOCOL_CALLS = ("add_device", "remove_device", "next_for", "running_on", "runnable", "mark_op_complete",
                  "op_done", "release", "requeue", "queue_of", "home_of", "stolen_from")


def drive(sched: Scheduler, devices, rng) -> dict[str, int]:
    """Fake devices through protocol calls only: op -> device that completed it."""
    ran: dict[str, int] = {}
    for d in devices:
        sched.add_device(d)
    while not sched.finished:
        for d in sched.devices:
            if sched.runnable(d):
                sched.next_for(d)
        busy = [d for d in sched.devices if sched.running_on(d) is not None]
        assert busy, "work left but no device can take it"
        d = rng.choice(busy)
        op = sched.running_on(d)
        assert op not in ran
        ran[op] = d
        sched.mark_op_complete(d, op)
    return ran


@pytest.mark.parametrize("policy", [HashScheduler, StealingScheduler])
def test_every_policy_implements_the_protocol(policy):
    s = policy(["a"])
    assert isinstance(s, Scheduler)
    assert all(callable(getattr(s, name)) for name in PROTOCOL_CALLS)
    assert isinstance(make_scheduler([], steal=True), StealingScheduler)
    assert type(make_scheduler([], steal=False)) is HashScheduler


@pytest.mark.parametrize("steal", [False, True])
def test_protocol_runs_every_op_once(steal):
    for seed in range(10):
        rng = random.Random(seed)
        devs = rng.sample(range(6), rng.randrange(1, 4))
        ran = drive(make_scheduler(OPS[:40], steal=steal), devs, rng)
        assert sorted(ran) == OPS[:40]
        if not steal:
            assert all(ran[op] == home_device(op, devs) for op in ran)


def test_protocol_home_stolen_and_runnable():
    s = StealingScheduler(OPS[:20])
    s.add_device(0)
    s.add_device(1)
    first = s.next_for(0)
    assert s.home_of(first) == home_device(first, [0, 1]) and s.stolen_from(first) is None
    while s.queue_of(1):
        s.mark_op_complete(1, s.next_for(1))
    # device 1's queue is empty: stealing keeps it runnable, and it takes from device 0
    assert s.runnable(1) and not s.runnable(0)
    got = s.next_for(1)
    assert s.home_of(got) == 0 and s.stolen_from(got) == 0 and s.running_on(1) == got
    # without stealing, an empty queue is not runnable
    h = HashScheduler(["only"])
    h.add_device(0)
    h.add_device(1)
    d = home_device("only", [0, 1])
    assert h.next_for(1 - d) is None and not h.runnable(1 - d) and h.runnable(d)


def test_protocol_op_done_after_its_device_was_removed():
    s = StealingScheduler(["a", "b", "c"])
    for d in (0, 1):
        s.add_device(d)
    op = s.next_for(0)
    assert s.remove_device(0) == op
    s.op_done(op, 0)  # device 0 is gone: the op is done all the same
    assert op not in [s.running_on(d) for d in s.devices]
    assert op in s.completed  # noqa: the policy's own record, read by this test only
    rest = drive_existing(s, random.Random(1))
    assert sorted(rest + [op]) == ["a", "b", "c"]
    # op_done on the device that runs it frees the device
    h = HashScheduler(["x"])
    h.add_device(0)
    assert h.next_for(0) == "x"
    h.op_done("x", 0)
    assert h.running_on(0) is None and h.finished


def drive_existing(sched: Scheduler, rng) -> list[str]:
    ran: list[str] = []
    while not sched.finished:
        for d in sched.devices:
            if sched.runnable(d):
                sched.next_for(d)
        d = rng.choice([d for d in sched.devices if sched.running_on(d) is not None])
        op = sched.running_on(d)
        ran.append(op)
        sched.mark_op_complete(d, op)
    return ran

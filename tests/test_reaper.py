"""The leftover reaper (opscreen.batch.executor) knows a leftover by its pid and start time.

Between the scan for a killed runner's leftovers and the SIGKILL, a leftover may exit and
its pid go to another process. The reaper kept pids only and so killed that process (and
its process group); it now keeps psutil processes, whose kill checks the start time.
The test makes the race happen: it picks the next pid the kernel hands out
(``/proc/sys/kernel/ns_last_pid``, root only) so that an unrelated process gets the
leftover's pid, and hands the reaper the scan it made before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from opscreen.batch import executor

NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"
# Forks a sleeper into its own session, prints its pid and exits: the sleeper is init's
# child, not the test's (the reaper leaves its own runner's children alone).
DAEMON = """\
import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the launcher's pipes close when it exits
        os.dup2(null, fd)
    time.sleep(60)
    os._exit(0)
print(pid, flush=True)
"""


def daemon(env: dict[str, str], next_pid: int | None = None) -> int:
    """Start a sleeper that is not our child; with ``next_pid``, have the kernel give it that pid."""
    if next_pid is not None:
        with open(NS_LAST_PID, "w") as fh:  # the launcher gets next_pid - 1, its fork next_pid
            fh.write(str(next_pid - 2))
    out = subprocess.run([sys.executable, "-c", DAEMON], env=env, capture_output=True, text=True, timeout=30, check=True)
    return int(out.stdout.split()[0])


def kill_and_wait_gone(pid: int, timeout: float = 10.0) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while psutil.pid_exists(pid) and time.monotonic() < deadline:  # init reaps it
        time.sleep(0.02)
    return not psutil.pid_exists(pid)


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_leftover_whose_pid_went_to_another_process_is_neither_killed_nor_waited_for(tmp_path, monkeypatch):
    if not os.access(NS_LAST_PID, os.W_OK):
        pytest.skip(f"cannot choose the next pid ({NS_LAST_PID} needs root)")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    clean = {k: v for k, v in os.environ.items() if k != executor.MARK_ENV}
    leftover = daemon({**clean, executor.MARK_ENV: str(run_dir)})
    try:
        scan = executor.marked(executor.MARK_ENV, lambda value: executor.same_dir(value, str(run_dir)))
        assert [p.pid for p in scan] == [leftover], "the scan finds the marked sleeper"
    finally:
        gone = kill_and_wait_gone(leftover)
    if not gone:
        pytest.skip("nothing reaps orphans here, so the leftover's pid never comes free")
    time.sleep(0.05)  # a start time after the leftover's (psutil reads it in clock ticks)
    bystander = None
    for _ in range(20):  # another process may take the pid first
        pid = daemon(clean, next_pid=leftover)
        if pid == leftover:
            bystander = pid
            break
        kill_and_wait_gone(pid)
    if bystander is None:
        pytest.skip("another process took the leftover's pid every time")
    try:
        monkeypatch.setattr(executor, "marked", lambda key, value: scan)  # the scan, made before the pid changed hands
        t0 = time.monotonic()
        assert executor.reap_leftovers(str(run_dir), timeout=5.0) == [leftover]
        waited = time.monotonic() - t0
        assert running(bystander), "the reaper killed a process that only took a leftover's pid"
        assert waited < 4.0, f"the reaper waited {waited:.1f} s for a process that was no leftover"
    finally:
        kill_and_wait_gone(bystander)

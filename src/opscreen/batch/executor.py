"""Where the per-op work runs: the executor interface and the local executor.

The batch runner decides *what* runs next (scheduling, retries, dtype fallback,
journal); an :class:`Executor` only runs one unit of work — one op, through the
lane's runner (:mod:`opscreen.op.lane`: a fresh child process, or the lane's warm
worker) — on a lane (a device) and hands the outcome back. A later Ray executor can run the same per-op work
on other machines by implementing the same four calls, without touching the
scheduler, the retry policy or the journal.

Protocol (all calls from the runner's main thread)::

    ex.start(lanes)          # the devices of this machine (or slots)
    ex.submit(job)           # the job's lane must be idle (one op per device)
    done = ex.wait(timeout)  # finished jobs (maybe none), never blocks longer
    ex.stop()                # running jobs end now: run_op kills its process group
                             # and they come back with status "interrupted"
    ex.close()               # after every submitted job came back

:class:`LocalExecutor` runs each lane in its own thread. The work function
(``run_op`` by default) owns the child: its own session and process group,
stdin closed, the group killed on timeout or stop.

This module also holds the leftover reaper: every child of a batch run carries
``OPSCREEN_BATCH_RUN=<run dir>`` in its environment (and so do its
grandchildren), so a runner restarted after a SIGKILL can find and kill what its
predecessor left behind before it clears partial output.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from ..op.scratch import RUN_MARK
from .lanes import LaneRunner, RunnerFactory

MARK_ENV = RUN_MARK  # "OPSCREEN_BATCH_RUN"


@dataclass
class Job:
    """One child process to run: ``work(request, out_dir, stop=...)`` on ``lane``."""

    key: int
    op: str
    lane: int
    request: Any  # opscreen.op.run.OpRequest (anything the work function takes)
    out_dir: Path
    meta: dict = field(default_factory=dict)
    submitted_at: float = 0.0


@dataclass
class Done:
    """A job that came back: the work function's outcome, or the error it raised."""

    job: Job
    outcome: Any = None  # opscreen.op.run.OpOutcome
    error: str | None = None  # "Type: message" when the work function raised
    wall_s: float = 0.0
    exc: BaseException | None = None  # what it raised (an OSError: the run dir cannot be written)


class Executor(Protocol):
    def start(self, lanes: Sequence[int]) -> None: ...

    def submit(self, job: Job) -> None: ...

    def wait(self, timeout: float) -> list[Done]: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


WorkFn = Callable[..., Any]


def default_lanes() -> RunnerFactory:
    """A runner per lane that runs each request as it asks (``request.isolation``:
    a fresh process per op, or the lane's warm worker)."""
    from ..op.lane import lane_factory

    return lane_factory()


class _WorkRunner:
    """A stateless work function as a lane runner."""

    def __init__(self, work: WorkFn):
        self.work = work

    def run(self, request, out_dir: Path, *, stop: threading.Event | None = None, echo=None):
        return self.work(request, out_dir, stop=stop)

    def close(self) -> None:
        pass


class LocalExecutor:
    """One thread per lane; each runs the work function for the jobs of its lane.

    Lifecycle: ``start`` creates the threads, each with its lane runner (``lanes(lane)``,
    default :func:`default_lanes`; a plain ``work`` function instead runs each job as
    given); ``submit`` hands a job to its lane's thread; results come back through one
    queue read by ``wait``; ``stop`` sets the shared stop event (every running op kills
    its child group and returns); ``close`` ends the threads, and each closes its
    runner (a warm worker exits).
    """

    def __init__(self, work: WorkFn | None = None, lanes: RunnerFactory | None = None):
        self.lanes = (lambda lane: _WorkRunner(work)) if work is not None else (lanes or default_lanes())
        self.stop_event = threading.Event()
        self._results: queue.SimpleQueue[Done] = queue.SimpleQueue()
        self._lanes: dict[int, queue.SimpleQueue] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._busy: dict[int, Job | None] = {}
        self._lock = threading.Lock()

    def start(self, lanes: Sequence[int]) -> None:
        for lane in lanes:
            self.add_lane(lane)

    def add_lane(self, lane: int) -> None:
        if lane in self._lanes:
            return
        q: queue.SimpleQueue = queue.SimpleQueue()
        t = threading.Thread(target=self._loop, args=(lane, q), name=f"opscreen-lane-{lane}", daemon=True)
        self._lanes[lane] = q
        self._threads[lane] = t
        self._busy[lane] = None
        t.start()

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._busy.get(job.lane) is not None:
                raise RuntimeError(f"lane {job.lane} is busy with {self._busy[job.lane].op}")
            self._busy[job.lane] = job
        job.submitted_at = time.monotonic()
        self._lanes[job.lane].put(job)

    def busy(self, lane: int) -> Job | None:
        return self._busy.get(lane)

    def _loop(self, lane: int, q: queue.SimpleQueue) -> None:
        runner = self.lanes(lane)
        try:
            self._jobs(lane, q, runner)
        finally:
            runner.close()

    def _jobs(self, lane: int, q: queue.SimpleQueue, runner: LaneRunner) -> None:
        while True:
            job = q.get()
            if job is None:
                return
            t0 = time.monotonic()
            try:
                out = runner.run(job.request, job.out_dir, stop=self.stop_event)
                done = Done(job, out, None, time.monotonic() - t0)
            except BaseException as exc:  # the run survives a broken work function
                tb = traceback.format_exception_only(type(exc), exc)
                done = Done(job, None, (tb[-1].strip() if tb else repr(exc))[:500], time.monotonic() - t0, exc)
            with self._lock:
                self._busy[lane] = None
            self._results.put(done)

    def wait(self, timeout: float) -> list[Done]:
        out: list[Done] = []
        try:
            out.append(self._results.get(timeout=max(timeout, 0.0)) if timeout > 0 else self._results.get_nowait())
        except queue.Empty:
            return out
        while True:
            try:
                out.append(self._results.get_nowait())
            except queue.Empty:
                return out

    def stop(self) -> None:
        self.stop_event.set()

    def close(self) -> None:
        for q in self._lanes.values():
            q.put(None)
        for t in self._threads.values():
            t.join(timeout=30)


# -- leftovers of a killed runner ------------------------------------------------


def _ancestors() -> set[int]:
    pids = {os.getpid()}
    pid = os.getpid()
    for _ in range(64):
        ppid = _parent(pid)
        if ppid is None or ppid <= 1 or ppid in pids:
            break
        pids.add(ppid)
        pid = ppid
    return pids


def _parent(pid: int) -> int | None:
    """``pid``'s parent pid (Linux /proc), None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def marked_pids(key: str, value: str | Callable[[str], bool]) -> list[int]:
    """Pids (other than this process and its ancestors) whose environment holds
    ``key=value`` (or ``key=v`` with ``value(v)`` true when ``value`` is a
    predicate). Linux /proc only; elsewhere an empty list."""
    prefix = f"{key}=".encode()
    match = value if callable(value) else (lambda v, _want=value: v == _want)
    if not os.path.isdir("/proc"):
        return []
    skip = _ancestors()
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in skip:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        for entry in env.split(b"\0"):
            if entry.startswith(prefix) and match(os.fsdecode(entry[len(prefix) :])):
                found.append(pid)
                break
    return found


def same_dir(a: str, b: str) -> bool:
    """True when paths ``a`` and ``b`` name one directory (through symlinks,
    ``..`` or another mount of it)."""
    if a == b or os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def reap_leftovers(run_dir: str, timeout: float = 5.0) -> list[int]:
    """SIGKILL every process a previous runner of ``run_dir`` left behind (its
    children carry ``OPSCREEN_BATCH_RUN=<run dir>``); wait until they are gone.

    The marker is compared by the directory it names, not by its spelling: a
    runner started with ``--out LINK`` and a resume with ``--out REAL`` (or the
    other way round) are the same run dir. This runner's own children (the warm worker
    its preflight left for a lane) are not leftovers."""
    me = os.getpid()
    pids = [p for p in marked_pids(MARK_ENV, lambda value: same_dir(value, run_dir)) if _parent(p) != me]
    own_group = os.getpgrp()
    for pid in pids:
        try:
            pgid = os.getpgid(pid)
            if pgid != own_group:
                os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            break
        time.sleep(0.05)
    return pids


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] != b"Z"
    except (OSError, ValueError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True

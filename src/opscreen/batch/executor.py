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
predecessor left behind before it clears partial output. The processes come from
psutil (their environment, parent and start time), not from walking ``/proc`` by hand:
a leftover is a :class:`psutil.Process`, known by its pid and start time, so a pid
that another process took after the scan is not killed, and the scan works wherever
psutil reads a process's environment (Linux and macOS, not only a Linux ``/proc``).
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

import psutil

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
    """This process and its ancestors (init aside): never leftovers."""
    pids = {os.getpid()}
    proc = psutil.Process()
    try:  # parent() checks that the parent started before its child (a reused pid is no parent)
        while (proc := proc.parent()) is not None and proc.pid > 1 and proc.pid not in pids and len(pids) < 64:
            pids.add(proc.pid)
    except psutil.Error:  # an ancestor exited during the walk: the ones above it are no longer ours
        pass
    return pids


def _parent(proc: psutil.Process) -> int | None:
    """``proc``'s parent pid, None when it cannot be read (gone)."""
    try:
        return proc.ppid()
    except psutil.Error:
        return None


def marked(key: str, value: str | Callable[[str], bool]) -> list[psutil.Process]:
    """Processes (other than this one and its ancestors) whose environment holds
    ``key=value`` (or ``key=v`` with ``value(v)`` true when ``value`` is a predicate).
    A process that exits during the scan, a zombie (its environment is gone) and
    another user's process (not readable) are not in the list."""
    match = value if callable(value) else (lambda v, _want=value: v == _want)
    skip = _ancestors()
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        if proc.pid in skip:
            continue
        try:
            env = proc.environ()
        except psutil.Error:  # NoSuchProcess (ZombieProcess is one), AccessDenied
            continue
        if key in env and match(env[key]):
            found.append(proc)
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
    children carry ``OPSCREEN_BATCH_RUN=<run dir>``) and its process group; wait
    until they are gone.

    The marker is compared by the directory it names, not by its spelling: a
    runner started with ``--out LINK`` and a resume with ``--out REAL`` (or the
    other way round) are the same run dir. This runner's own children (the warm worker
    its preflight left for a lane) are not leftovers. A leftover is known by its pid
    and start time: one that exits after the scan, its pid taken by another process,
    is neither killed nor waited for."""
    me = os.getpid()
    procs = [p for p in marked(MARK_ENV, lambda value: same_dir(value, run_dir)) if _parent(p) != me]
    own_group = os.getpgrp()
    for proc in procs:
        if not proc.is_running():  # gone, or its pid is another process's now
            continue
        try:
            pgid = os.getpgid(proc.pid)
            if pgid != own_group:
                os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.kill()  # checks the start time again
        except psutil.Error:
            pass
    deadline = time.monotonic() + timeout
    while procs and time.monotonic() < deadline:
        if not any(_alive(p) for p in procs):
            break
        time.sleep(0.05)
    return [p.pid for p in procs]


def _alive(proc: psutil.Process) -> bool:
    """True while ``proc`` runs: not gone, its pid not another process's, not a zombie."""
    try:
        return proc.is_running() and proc.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:  # ZombieProcess too
        return False
    except psutil.AccessDenied:
        return True

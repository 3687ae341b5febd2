"""A lane's runner: how one device runs op after op, in fresh processes or in a warm worker.

The batch executor gives every lane (device) one :class:`LaneRunner` and calls
:meth:`LaneRunner.run` for each op of the lane's queue. With ``isolation="op"`` it
is :func:`opscreen.op.run.run_op`: a fresh process per op. With
``isolation="worker"`` the lane keeps one warm worker (:mod:`opscreen.op.worker`)
and runs each op in it, with these guarantees:

- **Isolation where it matters.** An op that does not pass in a worker (it failed,
  crashed, timed out or ended device-fatal) is run again at once in a fresh process,
  whose outcome is the one recorded: a state leak from an earlier op is never blamed
  on it. The worker's log of it is kept as ``worker.log``, and ``result.json``
  ``phases.worker_attempt`` says how it ended. The worker is killed (its whole
  group) and the next op of the lane starts a fresh one. Later attempts of that op
  (retries, dtype fallback) run in fresh processes on every lane.
- **Recycling.** A worker is closed after ``max_ops_per_worker`` ops, when its
  resident memory after an op passes its bound, the device memory still allocated
  after the hygiene passes its bound, or (with the diagnostic canary on) its canary
  kernel reads more than its tolerance over its start's (:data:`opscreen.settings.WORKER_BOUNDS`; all
  overridable in the environment),
  and when an op needs a different environment or interpreter than the worker was
  started with (the key: everything but the per-op variables).
- **Interrupts.** A stopped op is ``interrupted`` as in a fresh process (its worker
  killed), never run again.

A single run with nothing to share (``opscreen op`` without ``--repeats``) runs as
``op``: a worker would only add its protocol to the same imports.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Callable

from ..child.config import ENV_CONFIG, ENV_SPAWNED_AT
from ..child.worker import ENV_DEVICE_TYPE, ENV_KEEP, ENV_PREIMPORT, ENV_SUITE_ROOT
from ..settings import worker_bounds as settings_worker_bounds
from . import scratch
from .request import OpOutcome, OpRequest
from .worker import Worker

#: Variables that differ from op to op: they never force a new worker.
PER_OP_KEYS = (ENV_CONFIG, ENV_SPAWNED_AT, "PYTEST_ADDOPTS", "PYTHONPATH")
WORKER_LOG = "worker.log"
PASSED = ("passed",)


def worker_bounds() -> dict:
    """The recycle bounds from this process's environment (:func:`opscreen.settings.worker_bounds`)."""
    return settings_worker_bounds(os.environ)


class LaneRunner:
    """Runs the ops of one lane (module docstring). Not thread-safe: one per lane thread.

    ``fresh_only`` is shared by every lane of a run: the ops whose worker attempt did
    not pass, which from then on run only in fresh processes."""

    def __init__(self, fresh_only: set[str] | None = None, lock: threading.Lock | None = None):
        self.worker: Worker | None = None
        self.fresh_only = fresh_only if fresh_only is not None else set()
        self._lock = lock or threading.Lock()
        self.no_worker: str | None = None  # why this lane runs fresh processes only (a worker could not start)
        self.ended: dict | None = None  # why the lane's last worker was closed, until the next one starts
        self.bounds = worker_bounds()

    def run(self, req: OpRequest, out_dir: Path, *, stop: threading.Event | None = None,
            echo: Callable[[str], None] | None = None) -> OpOutcome:
        from .run import run_op

        with self._lock:
            fresh = req.op in self.fresh_only
        warm = req.isolation == "worker" and not fresh and not self.no_worker
        return run_op(req, out_dir, stop=stop, echo=echo, once=self.run_in_worker if warm else None)

    def run_in_worker(self, req: OpRequest, out_dir: Path, *, stop: threading.Event | None = None,
                      echo: Callable[[str], None] | None = None) -> OpOutcome:
        """One run of ``req`` in the lane's worker; run again in a fresh process when it did not pass."""
        from .run import child_env, python_shim, run_once

        worker = self._worker_for(req, lambda shim: child_env(req, Path(os.devnull), shim), python_shim)
        outcome = run_once(req, out_dir, stop=stop, echo=echo, launcher=worker)
        if worker.ready is None and outcome.status != "interrupted":
            self.no_worker = f"a warm worker could not start ({outcome.error or outcome.status})"
            if echo is not None:
                echo(f"[opscreen] {self.no_worker}: this lane runs a fresh process per op from now on\n")
        if outcome.status in PASSED:
            self._maybe_recycle(req)
            return outcome
        self._discard("op_failed", f"{req.op} {outcome.status} in it")
        if outcome.status == "interrupted":
            return outcome
        with self._lock:
            self.fresh_only.add(req.op)
        attempt = {"status": outcome.status, "error": outcome.error, "wall_s": round(outcome.duration_s, 3),
                   "log": WORKER_LOG}
        out = Path(out_dir).resolve()
        if (out / "run.log").is_file():
            shutil.move(str(out / "run.log"), str(out / WORKER_LOG))
        if echo is not None:
            echo(f"[opscreen] {req.op}: {outcome.status} in a warm worker; running it again in a fresh process\n")
        aborts = [dict(a, log=WORKER_LOG) if a.get("log") == "run.log" else a for a in outcome.capture_aborts or ()]
        return run_once(req, out_dir, stop=stop, echo=echo, keep=(WORKER_LOG,), worker_attempt=attempt,
                        capture_aborts=aborts or None, earlier_s=outcome.duration_s)

    def _worker_for(self, req: OpRequest, env_for: Callable[[Path], dict], shim_for) -> Worker:
        """The lane's worker for ``req``: the current one when it is alive and shares the
        op's environment (:func:`worker_key`), else the one the preflight left for it, else
        a new one."""
        key = worker_key(req, env_for(Path(os.devnull)))
        if self.worker is not None and (self.worker.key != key or not self.worker.alive()):
            if self.worker.alive():
                self._discard("environment", "the next op needs another environment")
            else:
                self._discard("died", "it died")
        if self.worker is None:
            self.worker = adopt(key) or start_worker(req, env_for, shim_for, key)
            self.worker.replaces, self.ended = self.ended, None
        return self.worker

    def _maybe_recycle(self, req: OpRequest) -> None:
        w = self.worker
        if w is None:
            return
        last = w.last or {}
        why = None
        if w.ops >= int(req.max_ops_per_worker):
            why = "max_ops", f"{w.ops} ops (--max-ops-per-worker)"
        elif (last.get("rss_mb") or 0) > self.bounds["rss_mb"]:
            why = "rss", f"resident memory {last['rss_mb']:.0f} MiB > {self.bounds['rss_mb']:.0f}"
        elif (last.get("device_allocated_mb") or 0) > self.bounds["device_mb"]:
            why = ("device_memory", f"device memory still allocated {last['device_allocated_mb']:.0f} MiB > "
                   f"{self.bounds['device_mb']:.0f}")
        elif last.get("device_error"):
            why = "device_error", f"device check failed: {last['device_error']}"
        elif canary_drift(w.ready or {}, last) > self.bounds["canary_tol"]:
            why = "canary", (f"its canary read {last['canary_us']:.3f} us a kernel, over its start's "
                             f"{w.ready['canary_us']:.3f} us")
        if why:
            self._discard(*why)

    def _discard(self, kind: str, detail: str) -> None:
        """Close the lane's worker; ``kind`` (one of :data:`ENDINGS`) and ``detail`` say why,
        and the next worker's ops record it (``phases.worker.replaces``)."""
        if self.worker is not None:
            self.worker.close(grace=1.0)  # a dead one is only reaped
            self.worker = None
            self.ended = {"why": kind, "detail": detail}

    def close(self) -> None:
        self._discard("lane_end", "the lane ended")


#: Why a lane closed a worker (``phases.worker.replaces.why`` of the next worker's ops):
#: its op count, memory or canary bounds, a failed device check, an op that did not pass
#: in it, another environment for the next op, its death, the lane's end.
ENDINGS = ("max_ops", "rss", "device_memory", "canary", "device_error", "op_failed", "environment", "died", "lane_end")


def canary_drift(ready: dict, last: dict) -> float:
    """How far a worker's canary after an op reads over its reading after the imports
    (a fraction; 0 when either is missing)."""
    start, now = ready.get("canary_us"), last.get("canary_us")
    if not start or not now or start <= 0:
        return 0.0
    return now / start - 1.0


def start_worker(req: OpRequest, env_for: Callable[[Path], dict], shim_for, key: tuple | None = None) -> Worker:
    """A new worker for ``req``'s environment (less the per-op variables), pinned to its
    CPU set; it imports :func:`preimports` while the caller goes on."""
    extra = {ENV_PREIMPORT: ",".join(preimports(req)), ENV_DEVICE_TYPE: req.backend.device_type,
             ENV_SUITE_ROOT: str(req.suite.root), ENV_KEEP: req.suite.library}

    def spawn_env(shim: Path) -> dict:
        env = {k: v for k, v in env_for(shim).items() if k not in PER_OP_KEYS[:-1]}
        return {**env, **extra}

    if key is None:
        key = worker_key(req, env_for(Path(os.devnull)))
    return Worker(req.suite.python, spawn_env, req.suite.root, key, shim_for,
                  cpus=req.cpuset.cpus if req.cpuset else None, tmp_prefix=scratch.prefix("worker", req.env))


def worker_for_request(req: OpRequest) -> Worker:
    """:func:`start_worker` with the environment ``req``'s own child would get."""
    from .run import child_env, python_shim

    return start_worker(req, lambda shim: child_env(req, Path(os.devnull), shim), python_shim)


# Workers that ran the preflight collection of a run (and paid its imports), waiting for the
# first lane runner whose op shares their key; the rest are closed when the run ends.
_PARKED: list[Worker] = []
_PARKED_LOCK = threading.Lock()


def park(worker: Worker) -> None:
    """Keep ``worker`` (alive and idle) for the first lane that needs its key."""
    worker.early = True
    with _PARKED_LOCK:
        _PARKED.append(worker)


def prestart(req: OpRequest) -> None:
    """With ``req.isolation`` "worker": start the warm worker of ``req``'s lane now and
    park it, so that its imports overlap what the run does before the lane's first op
    (the preflight); a lane with nothing to run gets it closed with the run."""
    if req.isolation == "worker":
        park(worker_for_request(req))


def adopt(key: tuple) -> Worker | None:
    """A parked worker with ``key``, still alive, taken out of the park; else None."""
    with _PARKED_LOCK:
        for w in list(_PARKED):
            if w.key == key and w.alive():
                _PARKED.remove(w)
                return w
    return None


def close_parked() -> None:
    """Close the parked workers no lane took (the run ended, or was refused)."""
    with _PARKED_LOCK:
        left = list(_PARKED)
        _PARKED.clear()
    for w in left:
        w.close(grace=1.0)


def worker_key(req: OpRequest, env: dict) -> tuple:
    """What a worker must share with an op to run it: the interpreter, the suite root, the
    CPU set it is pinned to and the environment, less the per-op variables."""
    stable = tuple(sorted((k, v) for k, v in env.items() if k not in PER_OP_KEYS))
    cpus = tuple(req.cpuset.cpus) if req.cpuset and req.cpuset.cpus else None
    return (req.suite.python, str(req.suite.root), cpus, stable)


def preimports(req: OpRequest) -> list[str]:
    """What the worker imports once: torch, the backend's torch extensions and the suite's
    library (one that fails to import is left to the op, which reports it)."""
    return ["torch", *req.backend.torch_modules, req.suite.library]


def lane_factory() -> Callable[[int], LaneRunner]:
    """Lane runners for one run: they share the set of ops that run only fresh."""
    shared: set[str] = set()
    lock = threading.Lock()
    return lambda lane: LaneRunner(shared, lock)


"""The Ray executor: the lanes of a run are the accelerators of every node of a Ray cluster.

``opscreen run --executor ray [--address auto|HOST:PORT]``. Behind the same calls as
:class:`~.executor.LocalExecutor` (``start``/``submit``/``wait``/``stop``/``close``):
the session, the scheduler (hash placement, stealing), the retry and dtype-fallback
machine and the journal are the ones of a local run and stay on the driver (the
machine that runs ``opscreen run``, which holds the run dir).

Lanes. A Ray resource names the accelerators (:func:`resource_for`): ``GPU`` for
CUDA and ROCm, ``NPU`` for Ascend, ``MUSA`` and ``MLU`` (custom resources a node
declares with ``ray start --resources``), and ``opscreen_slot`` for the cpu
backend (so a test cluster can declare fake accelerators). Every unit of it on
every alive node is one lane, numbered 0..N-1 node by node (:func:`plan_lanes`).
Each lane is one actor (:class:`LaneWorker`) pinned to its node, holding one unit
of the resource; it makes its lane runner once (``factory(lane)``,
:mod:`.lanes`) and runs each op it is given with it, with the op's device set to
the lane's device on that node (the id Ray assigned, else the lane's index there).

Files. The node runs the op into a temporary directory of its own and sends the
op's whole directory back (a gzipped tar); the driver clears what a run of the op
owns in the op dir (as :func:`~opscreen.op.run.run_op` does) and unpacks it there.
No filesystem is shared; the suite and its interpreter must be at the same paths
on every node (as for ``--shard`` runs). ``child_config.json`` and ``run.log``
name the node's directory, ``run_identity.json`` the node's host.

Environment. A node's ops get the node's environment plus these variables of the
driver's (through the Ray job's ``runtime_env``): ``PYTHONPATH``, ``OPSCREEN_*``
(the timing knobs: the caliber), ``USE_FLAGTUNE*``, ``TRITON_*``, ``FLAGGEMS_*``,
``GEMS_*`` and the names ``--ray-env`` adds; never a visible-device variable.

Faults. The node kills its op's process group at ``--timeout`` (run_op does);
``stop`` reaches every lane at once (a second thread of each actor sets the lane's
stop event). A lane whose worker dies mid-op (its node lost, its process killed)
comes back as :class:`~.lanes.LaneLost`: the session takes the lane out and runs
the op again on another lane; beside every worker a guard process
(:class:`ChildGuard`) kills the op's process group when the worker dies (a
driver killed with SIGKILL takes its actors with it), so no child outlives it.
A resume runs on the driver as for a local run (the journal is the run dir).

``import ray`` happens here only, and only when this executor is asked for; a
missing Ray is a one-line usage error.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import OpscreenError, UsageError
from .executor import MARK_ENV, Done, Job
from .lanes import LaneLost, RunnerFactory, run_op_runner

#: backend name -> the Ray resource that counts its accelerators (others: the name upper-cased)
RESOURCES = {"cuda": "GPU", "rocm": "GPU", "ascend": "NPU", "musa": "MUSA", "mlu": "MLU", "cpu": "opscreen_slot"}
#: variables of the driver's environment every node's ops get (NAME, or PREFIX*)
ALWAYS_SENT = ("PYTHONPATH", "OPSCREEN_*", "USE_FLAGTUNE*", "TRITON_*", "FLAGGEMS_*", "GEMS_*")
READY_TIMEOUT_S = 300.0  # how long the lanes' workers may take to start (a busy cluster queues them)
SKIPPED = (".pyshim",)  # recreated by every run_op (a link to the node's own opscreen): not sent back


class RemoteError(RuntimeError):
    """The lane runner raised on its node (``Done.exc``): the attempt crashed there."""


@dataclass(frozen=True)
class Lane:
    lane: int  # the run's device number
    node_id: str
    host: str
    index: int  # the lane's place among its node's units of the resource


def resource_for(backend) -> str:
    return RESOURCES.get(backend.name, backend.name.upper())


def import_ray():
    try:
        import ray  # noqa: PLC0415 - only when --executor ray is asked for
    except ImportError as exc:
        raise UsageError(f"--executor ray needs Ray ({exc}): pip install -e '.[ray]' in opscreen's checkout") from None
    return ray


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


def forwarded_env(environ: Mapping[str, str], names: Sequence[str] = ()) -> dict[str, str]:
    """The driver's variables a node's ops get: :data:`ALWAYS_SENT` and ``names``."""
    from ..backends import all_visible_keys

    never = {MARK_ENV, *all_visible_keys()}
    patterns = ALWAYS_SENT + tuple(names)
    return {k: v for k, v in environ.items() if k not in never and _matches(k, patterns)}


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]


def connect(ray, address: str | None, resource: str, local_count: Callable[[], int], env: dict[str, str]) -> str:
    """Join the cluster at ``address`` (None: ``$RAY_ADDRESS``, else start a Ray instance
    here whose resource counts this machine's devices); what to call it in messages."""
    kw: dict[str, Any] = dict(runtime_env={"env_vars": env}, log_to_driver=False, logging_level=logging.ERROR,
                              namespace="opscreen")
    where = address or os.environ.get("RAY_ADDRESS")
    if not where:
        n = local_count()
        kw.update(include_dashboard=False, **({"num_gpus": n} if resource == "GPU" else {"resources": {resource: n}}))
    try:
        ray.init(address=address, **kw)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError ...: one line
        what = f"--address {where}" if where else "--executor ray"
        raise UsageError(f"{what}: cannot start or reach a Ray cluster ({_one_line(exc)}); start one with "
                         "'ray start --head' and give --address auto or HOST:PORT") from None
    return where or "a Ray instance on this machine"


def plan_lanes(nodes: list[dict], resource: str) -> list[Lane]:
    """One lane per unit of ``resource`` on every alive node (``ray.nodes()``), node by node."""
    alive = sorted((n for n in nodes if n.get("Alive")), key=lambda n: (str(n.get("NodeManagerAddress")), n["NodeID"]))
    lanes: list[Lane] = []
    for n in alive:
        host = n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or n["NodeID"][:8]
        for k in range(int(float((n.get("Resources") or {}).get(resource, 0)))):
            lanes.append(Lane(len(lanes), n["NodeID"], host, k))
    return lanes


# -- the node's side ------------------------------------------------------------------

_GUARD = """
import os, signal, sys
groups = set()
for line in sys.stdin:
    line = line.strip()
    if line.startswith("+"):
        groups.add(int(line[1:]))
    elif line == "-":
        groups.clear()
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
"""


class ChildGuard:
    """A process beside a lane's worker, in a session of its own, that SIGKILLs the
    process groups of the lane's running op when the worker dies (its stdin, a pipe
    only the worker holds, closes): an op's child runs in a session of its own and
    would outlive a worker that Ray killed."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-S", "-c", _GUARD], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, text=True)
        self.lock = threading.Lock()

    def _say(self, line: str) -> None:
        with self.lock:
            try:
                self.proc.stdin.write(line + "\n")  # type: ignore[union-attr]
                self.proc.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError):
                pass

    def add(self, pgid: int) -> None:
        self._say(f"+{pgid}")

    def clear(self) -> None:
        self._say("-")

    def close(self) -> None:
        self.clear()
        with self.lock:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class LaneStop(threading.Event):
    """A lane's stop event: set once (the run stops), it ends the running op and every
    later one; each child the op starts is handed to the lane's guard."""

    def __init__(self, guard: ChildGuard) -> None:
        super().__init__()
        self.guard = guard
        self.reason: str | None = None

    def child_started(self, proc) -> None:
        self.guard.add(proc.pid)


def lane_device(resource: str, index: int) -> int:
    """This worker's device on its node: the id Ray assigned it for ``resource``, else ``index``."""
    try:
        import ray

        ids = ray.get_runtime_context().get_accelerator_ids().get(resource) or []
        return int(ids[0]) if ids else index
    except Exception:  # noqa: BLE001 - outside Ray, or an id that is no number
        return index


class LaneWorker:
    """One lane, on the node that holds its accelerator (a Ray actor with two threads:
    ``run`` and, beside it, ``stop``)."""

    def __init__(self, lane: int, resource: str, index: int, factory: RunnerFactory = run_op_runner):
        self.lane = lane
        self.device = lane_device(resource, index)
        self.guard = ChildGuard()
        self.stop_event = LaneStop(self.guard)
        self.runner = factory(lane)

    def ready(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid(), "device": self.device}

    def run(self, request: Any, name: str) -> tuple:
        """Run one op into a directory of this node; ``("done", outcome, tar.gz of the
        op dir)``, or ``("error", one line)`` when the runner raised."""
        work = Path(tempfile.mkdtemp(prefix="opscreen-lane-"))
        try:
            out = work / name
            if dataclasses.is_dataclass(request) and hasattr(request, "device"):
                request = dataclasses.replace(request, device=self.device)
            try:
                outcome = self.runner.run(request, out, stop=self.stop_event)
            except BaseException as exc:  # noqa: BLE001 - the lane goes on
                return ("error", _one_line(exc))
            finally:
                self.guard.clear()
            return ("done", outcome, pack(out))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def stop(self) -> None:
        self.stop_event.set()

    def close(self) -> None:
        try:
            self.runner.close()
        finally:
            self.guard.close()


def pack(folder: Path) -> bytes:
    """``folder``'s files as a gzipped tar (names relative to it; links left out)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tf:
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                rel = path.relative_to(folder)
                if rel.parts[0] in SKIPPED or path.is_symlink():
                    continue
                tf.add(path, arcname=str(rel), recursive=False)
    return buf.getvalue()


def unpack(blob: bytes, dest: Path) -> None:
    """Put an op dir sent by a node into ``dest``: first clear what a run of the op owns
    there (as run_op does; earlier attempts' logs stay), then unpack."""
    from ..op.folder import clear_owned

    dest.mkdir(parents=True, exist_ok=True)
    clear_owned(dest)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tf:
        members = tf.getmembers()
        for m in members:
            if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
                raise tarfile.TarError(f"unexpected member {m.name!r} in an op dir sent back")
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, members=members, filter="data")
        else:  # pragma: no cover - Python without extraction filters (checked above)
            tf.extractall(dest, members=members)


# -- the driver's side ----------------------------------------------------------------


class RayExecutor:
    """The lanes of a Ray cluster behind the :class:`~.executor.Executor` calls.

    Lifecycle: the constructor joins the cluster and plans the lanes
    (:attr:`lanes`); ``start(lanes)`` starts their workers and waits until they run
    (lanes that cannot start are reported and left out: :attr:`failed`); then
    ``submit``/``wait``/``stop``/``close`` as for the local executor."""

    def __init__(self, backend, *, address: str | None = None, env_names: Sequence[str] = (),
                 runner_factory: RunnerFactory = run_op_runner, local_count: Callable[[], int] = lambda: 1,
                 ready_timeout: float = READY_TIMEOUT_S):
        self.ray = import_ray()
        self.resource = resource_for(backend)
        self.factory = runner_factory
        self.ready_timeout = ready_timeout
        self.where = connect(self.ray, address, self.resource, local_count, forwarded_env(os.environ, env_names))
        self.plan = {lane.lane: lane for lane in plan_lanes(self.ray.nodes(), self.resource)}
        if not self.plan:
            self.ray.shutdown()
            raise UsageError(f"the Ray cluster ({self.where}) has no '{self.resource}' resource on any node: start "
                             f"its nodes with their accelerators (ray start --resources '{{\"{self.resource}\": N}}')")
        self.actors: dict[int, Any] = {}
        self.failed: dict[int, str] = {}  # lanes that could not start, or were lost: why
        self.running: dict[Any, Job] = {}  # object ref -> job
        self.busy: dict[int, Job | None] = {}
        self.hosts: dict[int, str] = {}
        self._lost: list[Done] = []
        self._started = False

    @property
    def lanes(self) -> list[int]:
        return sorted(self.plan)

    def describe(self, lanes: Sequence[int]) -> str:
        by_host: dict[str, list[int]] = {}
        for lane in lanes:
            by_host.setdefault(self.hosts.get(lane) or self.plan[lane].host, []).append(lane)
        parts = [f"{host}: {','.join(map(str, ls))}" for host, ls in by_host.items()]
        return f"Ray cluster {self.where}, resource {self.resource}, lanes " + "; ".join(parts)

    def start(self, lanes: Sequence[int]) -> None:
        if self._started:
            return
        self._started = True
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        worker = self.ray.remote(LaneWorker)
        for lane in lanes:
            spec = self.plan[lane]
            opts: dict[str, Any] = dict(num_cpus=0, max_concurrency=2, max_restarts=0,
                                        scheduling_strategy=NodeAffinitySchedulingStrategy(spec.node_id, soft=False))
            opts.update({"num_gpus": 1} if self.resource == "GPU" else {"resources": {self.resource: 1}})
            self.actors[lane] = worker.options(**opts).remote(lane, self.resource, spec.index, self.factory)
            self.busy[lane] = None
        self._await_ready(list(lanes))

    def _await_ready(self, lanes: list[int]) -> None:
        ray = self.ray
        pending = {self.actors[lane].ready.remote(): lane for lane in lanes}
        deadline = time.monotonic() + self.ready_timeout
        while pending and time.monotonic() < deadline:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(1.0, max(deadline - time.monotonic(), 0)))
            for ref in ready:
                lane = pending.pop(ref)
                try:
                    self.hosts[lane] = ray.get(ref)["host"]
                except Exception as exc:  # noqa: BLE001 - the worker could not start
                    self._fail(lane, f"its worker could not start: {_one_line(_cause(exc))}")
        for lane in pending.values():
            self._fail(lane, f"not started within {self.ready_timeout:g} s (is its {self.resource} held by another job?)")
        if lanes and all(lane in self.failed for lane in lanes):
            first = lanes[0]
            raise OpscreenError(f"no Ray lane could start on {self.where}: lane {first}: {self.failed[first]}")

    def _fail(self, lane: int, reason: str) -> None:
        self.failed.setdefault(lane, reason)
        actor = self.actors.get(lane)
        if actor is not None:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def submit(self, job: Job) -> None:
        if self.busy.get(job.lane) is not None:
            raise RuntimeError(f"lane {job.lane} is busy with {self.busy[job.lane].op}")  # type: ignore[union-attr]
        job.submitted_at = time.monotonic()
        if job.lane in self.failed:
            reason = self.failed[job.lane]
            self._lost.append(Done(job, None, f"LaneLost: {reason}", 0.0, LaneLost(reason)))
            return
        self.busy[job.lane] = job
        self.running[self.actors[job.lane].run.remote(job.request, job.out_dir.name)] = job

    def wait(self, timeout: float) -> list[Done]:
        out, self._lost = self._lost, []
        if not self.running:
            if not out and timeout > 0:
                time.sleep(timeout)
            return out
        refs = list(self.running)
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=0 if out else max(timeout, 0))
        if ready:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        return out + [self._collect(ref) for ref in ready]

    def _collect(self, ref) -> Done:
        job = self.running.pop(ref)
        self.busy[job.lane] = None
        wall = time.monotonic() - job.submitted_at
        exceptions = self.ray.exceptions
        try:
            reply = self.ray.get(ref)
        except exceptions.RayTaskError as exc:  # the method itself raised (it catches the runner's errors)
            msg = _one_line(_cause(exc))
            return Done(job, None, msg, wall, RemoteError(msg))
        except exceptions.RayError as exc:  # the worker, its node or the result is gone
            reason = f"{self.hosts.get(job.lane) or self.plan[job.lane].host}: {_one_line(exc)}"
            self._fail(job.lane, reason)
            return Done(job, None, f"LaneLost: {reason}", wall, LaneLost(reason))
        if reply[0] == "error":
            return Done(job, None, reply[1], wall, RemoteError(f"on {self.hosts.get(job.lane, '?')}: {reply[1]}"))
        _, outcome, blob = reply
        try:
            unpack(blob, job.out_dir)
        except OSError as exc:  # the run dir cannot be written: the session stops the run
            return Done(job, None, _one_line(exc), wall, exc)
        except tarfile.TarError as exc:
            return Done(job, None, _one_line(exc), wall, RemoteError(_one_line(exc)))
        if dataclasses.is_dataclass(outcome) and hasattr(outcome, "out_dir"):
            outcome = dataclasses.replace(outcome, out_dir=job.out_dir)
        return Done(job, outcome, None, wall)

    def stop(self) -> None:
        for lane, actor in self.actors.items():
            if lane not in self.failed:
                try:
                    actor.stop.remote()
                except Exception:  # noqa: BLE001 - a lost lane: nothing runs there
                    pass

    def close(self) -> None:
        ray = self.ray
        refs = []
        for lane, actor in self.actors.items():
            if lane not in self.failed:
                try:
                    refs.append(actor.close.remote())
                except Exception:  # noqa: BLE001
                    pass
        try:
            if refs:
                ray.wait(refs, num_returns=len(refs), timeout=15)
        except Exception:  # noqa: BLE001 - closing: what is gone is gone
            pass
        for actor in self.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        ray.shutdown()


def _cause(exc: BaseException) -> BaseException:
    """The exception a Ray error wraps (a task's own), else the error itself."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


__all__ = ["RayExecutor", "LaneWorker", "ChildGuard", "Lane", "RemoteError", "forwarded_env", "plan_lanes",
           "resource_for", "pack", "unpack", "import_ray"]

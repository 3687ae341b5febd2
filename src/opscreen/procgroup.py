"""Short commands that never outlive their deadline, each in its own process group.

Every external command opscreen starts (vendor CLIs, git, torch probes, the suite's
collection, per-op pytest children) is started here: its own session and process
group (``start_new_session=True``) and a closed stdin; on a deadline the whole
group is sent SIGTERM, given a grace period, then SIGKILL. Reading output never
blocks on a grandchild that kept the pipe open: the group is killed first, then
the pipes are drained with a bound.

Foundation (standard library only): every layer may use it. A per-op child whose
output is streamed into a log is :mod:`opscreen.op.process`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Mapping, Sequence


@dataclass
class Captured:
    """Outcome of :func:`run_capture`."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    error: str | None = None  # set when the command could not be started

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.returncode == 0


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` exists (zombies included)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the process group of ``proc``, wait up to ``grace`` s, then SIGKILL.

    Returns once the leader is reaped. Grandchildren that ignore SIGTERM get
    SIGKILL when the grace period ends, even if the leader already exited.
    """
    pgid = proc.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + max(grace, 0.0)
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_alive(pgid):
            break
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass


def set_affinity(pid: int, cpus: Sequence[int] | None) -> bool:
    """Pin process ``pid`` (its main thread, hence every thread and process it starts
    later) to ``cpus``; False when it cannot be (gone, CPUs not allowed, not Linux)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(pid, set(cpus))
        return True
    except OSError:
        return False


def popen_group(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    pass_fds: Sequence[int] = (),
    cpus: Sequence[int] | None = None,
) -> subprocess.Popen:
    """Start ``argv`` in a new session (own process group) with stdin closed
    (``pass_fds``: descriptors the child inherits, a warm worker's control pipe); with
    ``cpus``, pinned to them right after the spawn, while the new interpreter is still
    starting up single-threaded (no ``preexec_fn``: unsafe in a threaded harness)."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=os.fspath(cwd) if cwd is not None else None,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    set_affinity(proc.pid, cpus)
    return proc


def run_capture(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    grace: float = 0.5,
) -> Captured:
    """Run a short command, capture its text output, never exceed ``timeout`` (+grace)."""
    argv = list(argv)
    try:
        proc = popen_group(argv, env=env, cwd=cwd)
    except (OSError, ValueError) as exc:
        return Captured(argv, None, "", "", error=f"{argv[0]}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")
    try:
        out, err = proc.communicate(timeout=timeout)
        return Captured(argv, proc.returncode, _text(out), _text(err))
    except subprocess.TimeoutExpired:
        kill_group(proc, grace)
        try:
            out, err = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - group is dead
            out, err = b"", b""
        return Captured(argv, proc.returncode, _text(out), _text(err), timed_out=True)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")

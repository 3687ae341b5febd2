"""The per-op child: one command whose output is streamed, line by line, into its log.

The child is started in its own process group (:mod:`opscreen.procgroup`); on a
deadline or a stop the whole group is sent SIGTERM, given a grace period, then
SIGKILL. The output is always drained, even when handling it fails (a full disk
under the log): the child is then killed as a group and the failure raised to the
caller (:class:`OutputError`), never left to block on a full pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ..procgroup import group_alive, kill_group, popen_group


@dataclass
class Streamed:
    """Outcome of :func:`run_streaming`."""

    returncode: int | None
    timed_out: bool
    duration_s: float
    interrupted: bool = False


class OutputError(Exception):
    """``on_line`` raised while the child ran (say the log's disk is full): the
    rest of the output was drained unread, the child's group killed. ``cause`` is
    the first exception ``on_line`` raised, ``result`` how the child ended."""

    def __init__(self, cause: BaseException, result: Streamed):
        super().__init__(f"handling the child's output failed: {cause}")
        self.cause = cause
        self.result = result


def run_streaming(
    argv: Sequence[str],
    *,
    on_line: Callable[[str], None],
    timeout: float | None,
    grace: float = 5.0,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    stop: threading.Event | None = None,
    on_start: Callable[[subprocess.Popen], None] | None = None,
    cpus: Sequence[int] | None = None,
) -> Streamed:
    """Run ``argv`` with stdout+stderr merged, feeding each line to ``on_line``.

    The child is killed as a group when ``timeout`` passes or ``stop`` is set. The
    reader thread ends when the pipe closes, which a kill of the group guarantees.
    ``cpus``: the CPU set the child is pinned to (None: where the harness runs).
    When ``on_line`` raises, the reader keeps draining the pipe (a child writing
    into a full pipe would block until the timeout), the group is killed and
    :class:`OutputError` is raised once the child is gone.
    """
    start = time.monotonic()
    proc = popen_group(argv, env=env, cwd=cwd, stderr=subprocess.STDOUT, cpus=cpus)
    if on_start is not None:
        on_start(proc)

    failed: list[BaseException] = []

    def pump() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            if failed:
                continue  # keep draining: the child must never block on a full pipe
            try:
                on_line(raw.decode("utf-8", errors="replace"))
            except BaseException as exc:  # noqa: BLE001 - reported to the caller below
                failed.append(exc)
        proc.stdout.close()

    reader = threading.Thread(target=pump, name=f"pump-{proc.pid}", daemon=True)
    reader.start()
    timed_out = interrupted = False
    deadline = start + timeout if timeout else None
    try:
        while True:
            try:
                proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            if failed:
                kill_group(proc, grace)
                break
            if stop is not None and stop.is_set():
                interrupted = True
                kill_group(proc, grace)
                break
            if deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                kill_group(proc, grace)
                break
    except KeyboardInterrupt:
        # Ctrl-C reaches only the harness (the child has its own session): stop the child.
        interrupted = True
        kill_group(proc, min(grace, 2.0))
    # The leader is gone; make sure no grandchild keeps running (or holds the pipe).
    if group_alive(proc.pid):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    reader.join(timeout=10)
    result = Streamed(proc.returncode, timed_out, time.monotonic() - start, interrupted)
    if failed:
        raise OutputError(failed[0], result) from failed[0]
    return result

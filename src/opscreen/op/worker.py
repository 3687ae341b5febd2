"""The harness's side of a warm worker (``--isolation worker``; the worker itself is
:mod:`opscreen.child.worker`).

A :class:`Worker` is one long-lived child in the suite's interpreter: started in its
own process group like every per-op child, with the lane's environment, a private
``PYTHONPATH`` shim and a control pipe (requests go down the pipe as JSON lines; the
worker's stdout and stderr come back merged, as a fresh child's do). :meth:`launch`
has the signature of :func:`opscreen.op.process.run_streaming`, so
:func:`opscreen.op.run.run_once` runs an op in a worker exactly as in a fresh
process: the same banners, ``run.log``, child config, identity, classification and
``result.json``. What differs is only where the op's pytest session runs.

The op's output is every line the worker prints between the request and the
worker's :data:`~opscreen.child.worker.DONE` line (its startup output and the
:data:`~opscreen.child.worker.READY` line belong to the first op, which pays the
imports). On a timeout or a stop the worker's whole group is killed (SIGTERM, whose
stack dump lands in the op's log, grace, SIGKILL), exactly as for a fresh child; a
worker that dies mid-op (a segfault, a device-fatal exit) ends the op with its exit
status. Either way the worker is gone, and the lane (:mod:`opscreen.op.lane`) starts
a fresh one for the rest of its queue.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..child.worker import DONE, ENV_CONTROL_FD, READY
from ..procgroup import group_alive, kill_group, popen_group
from .process import OutputError, Streamed

BOOT = "from opscreen.child.worker import main; main()"
_EOF = None


class Worker:
    """One warm worker process (module docstring)."""

    isolation = "worker"

    def __init__(self, python: str, env_for: Callable[[Path], Mapping[str, str]], cwd: str | os.PathLike, key: tuple,
                 shim_for: Callable[[Path], Path], cpus: Sequence[int] | None = None, tmp_prefix: str = "opscreen-worker-"):
        self.key = key
        self.tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix))  # scratch.prefix: a resume removes its run's
        self.shim = shim_for(self.tmp)  # outlives every op dir: the plugins are imported again for each op
        env = env_for(self.shim)
        self.ops = 0  # requests sent (the ops'; a preflight collection's is not counted)
        self.preflight = False  # it ran the run's preflight collection (and paid the imports then)
        self.early = False  # started before its lane's first op (with the preflight), then parked
        self.replaces: dict | None = None  # why the lane closed the worker before it (lane.ENDINGS), if any
        self.ready: dict | None = None  # the worker's READY line: pid, imports_s, rss_mb
        self.last: dict | None = None  # its last DONE line: rc, op_s, hygiene_s, rss_mb, device_*_mb
        self._lines: queue.SimpleQueue = queue.SimpleQueue()
        read_fd, write_fd = os.pipe()
        try:
            self.proc = popen_group([python, "-c", BOOT], env={**env, ENV_CONTROL_FD: str(read_fd)}, cwd=cwd,
                                    stderr=subprocess.STDOUT, pass_fds=(read_fd,), cpus=cpus)
        except BaseException:
            os.close(write_fd)
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        finally:
            os.close(read_fd)
        self._ctrl = os.fdopen(write_fd, "w", encoding="utf-8")
        self._reader = threading.Thread(target=self._pump, name=f"worker-{self.proc.pid}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self._lines.put(raw.decode("utf-8", errors="replace"))
        self.proc.stdout.close()
        self._lines.put(_EOF)

    def _send(self, msg: dict) -> bool:
        try:
            self._ctrl.write(json.dumps(msg) + "\n")
            self._ctrl.flush()
            return True
        except (OSError, ValueError):  # the worker is gone: its exit status says why
            return False

    def launch(self, argv: Sequence[str], *, on_line: Callable[[str], None], timeout: float | None, grace: float = 5.0,
               env: Mapping[str, str] | None = None, cwd: str | os.PathLike | None = None,
               stop: threading.Event | None = None, on_start=None, cpus: Sequence[int] | None = None) -> Streamed:
        """Run one op (``argv``: ``python -m pytest ARGS``; the worker runs ``pytest.main(ARGS)``)
        and stream its output to ``on_line``; run_streaming's contract, timeout and stop included
        (``cpus`` is the worker's own: it was pinned when it started, and the key holds the set)."""
        start = time.monotonic()
        self.ops += 1
        if on_start is not None:
            on_start(self.proc)
        self._send({"cmd": "run", "id": self.ops, "args": list(argv[3:]), "env": dict(env or {}),
                    "cwd": os.fspath(cwd or ".")})
        deadline = start + timeout if timeout else None
        failed: list[BaseException] = []
        timed_out = interrupted = False
        try:
            while True:
                try:
                    item = self._lines.get(timeout=0.1)
                except queue.Empty:
                    item = ""
                if item is _EOF:  # the worker died mid-op
                    self.proc.wait()
                    return Streamed(self._exit_status(), False, time.monotonic() - start)
                reply = self._take(item, on_line, failed) if item else None
                if reply is not None:
                    self.last = reply
                    return Streamed(int(reply.get("rc", 1)), False, time.monotonic() - start)
                if failed:
                    break
                if stop is not None and stop.is_set():
                    interrupted = True
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out = True
                    break
        except KeyboardInterrupt:
            interrupted, grace = True, min(grace, 2.0)
        self.kill(grace, on_line if not failed else None)
        result = Streamed(self.proc.returncode, timed_out, time.monotonic() - start, interrupted)
        if failed:
            raise OutputError(failed[0], result) from failed[0]
        return result

    def _exit_status(self) -> int | None:
        """The worker's exit status; None for a clean exit mid-op (no pytest status to report)."""
        rc = self.proc.returncode
        return None if rc == 0 else rc

    def _take(self, text: str, on_line: Callable[[str], None], failed: list) -> dict | None:
        """Route one line: the op's output to ``on_line``, the READY line kept; the
        parsed DONE line returned."""
        for marker in (READY, DONE):
            at = text.find(marker)
            if at < 0:
                continue
            if at > 0:
                self._emit(text[:at] + "\n", on_line, failed)
            try:
                payload = json.loads(text[at + len(marker):])
            except ValueError:
                payload = {}
            if marker == READY:
                self.ready = payload
                return None
            return payload
        self._emit(text, on_line, failed)
        return None

    @staticmethod
    def _emit(text: str, on_line: Callable[[str], None], failed: list) -> None:
        if failed:
            return  # keep draining: the worker must never block on a full pipe
        try:
            on_line(text)
        except BaseException as exc:  # noqa: BLE001 - reported by launch
            failed.append(exc)

    def kill(self, grace: float = 5.0, on_line: Callable[[str], None] | None = None) -> None:
        """Kill the worker's group (SIGTERM, grace, SIGKILL) and drain what it printed
        meanwhile (a timed-out op's stack dump) into ``on_line``."""
        kill_group(self.proc, grace)
        if group_alive(self.proc.pid):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._drain(on_line)
        self._cleanup()

    def _drain(self, on_line: Callable[[str], None] | None, bound: float = 10) -> None:
        deadline = time.monotonic() + bound
        ignored: list = []
        while time.monotonic() < deadline:
            try:
                item = self._lines.get(timeout=0.1)
            except queue.Empty:
                if not self._reader.is_alive():
                    return
                continue
            if item is _EOF:
                return
            if on_line is not None:
                self._take(item, on_line, ignored)

    def close(self, grace: float = 5.0) -> None:
        """Ask an idle worker to exit (it ends on EOF too); kill it when it does not."""
        if self.alive():
            self._send({"cmd": "exit"})
            try:
                self._ctrl.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=max(grace, 1.0))
            except subprocess.TimeoutExpired:
                pass
        self.kill(grace=1.0)

    def _cleanup(self) -> None:
        try:
            self._ctrl.close()
        except OSError:
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def info(self) -> dict:
        """What ``result.json`` phases say of the worker that ran the op."""
        ready = self.ready or {}
        last = self.last or {}
        return {"pid": self.pid, "op_index": self.ops, "imports_s": ready.get("imports_s"),
                "shared_start": self.ops > 1 or self.preflight, "preflight": self.preflight, "early": self.early,
                "rss_mb": last.get("rss_mb"),
                "device_allocated_mb": last.get("device_allocated_mb"), "device_reserved_mb": last.get("device_reserved_mb"),
                "device_used_start_mb": ready.get("device_used_mb"), "device_used_mb": last.get("device_used_mb"),
                "hygiene_s": last.get("hygiene_s"), "canary_start_us": ready.get("canary_us"),
                "canary_us": last.get("canary_us"), "pad_mb": last.get("pad_mb"), "replaces": self.replaces}

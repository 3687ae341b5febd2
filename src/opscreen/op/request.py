"""What ``opscreen op`` (and each attempt of ``opscreen run``) asks of the per-op layer:
a resolved, validated, immutable :class:`OpRequest`; what it gets back
(:class:`OpOutcome`, with one of the exit codes); and the stop event that SIGINT,
SIGTERM and SIGHUP set (:class:`StopRequest`)."""

from __future__ import annotations

import copy
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .. import settings as S
from ..backends import Backend
from ..providers.flaggems import NodeSpec, Suite
from .plan import planned_timer

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT, EXIT_FATAL, EXIT_CRASHED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5, 130


def validated(obj: Any, command: str) -> None:
    """Check the declared settings of a frozen request once (settings' validators), replace
    an "auto" by what it means for ``command`` (``Setting.auto``: the mode recorded and run)
    and fill in its planned timer: the per-op layer trusts them from here on."""
    for s in S.declared(command):
        if s.key_for(command) and hasattr(obj, s.name):
            object.__setattr__(obj, s.name, s.resolved(s.parse(getattr(obj, s.name)), command))
    object.__setattr__(obj, "planned_timer", planned_timer(obj.backend, obj.timer))


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """How ops are measured: the settings one op (:class:`OpRequest`) and a batch
    (:class:`~opscreen.batch.config.BatchConfig`) share, with where each value came
    from and the timer they plan."""

    timer: str = S.default("timer")
    dtypes: list[str] | None = S.default("dtypes")
    shape_mode: str = S.default("shape_mode")
    level: str = S.default("level")
    use_flagtune: str = S.default("use_flagtune")
    use_flagtune_cost_model: str = S.default("use_flagtune_cost_model")
    triton_cache_autotuning: str = S.default("triton_cache_autotuning")  # reuse plain autotune winners
    input_seed: str = S.default("input_seed")  # the generators' seed at each test and measurement, or "off"
    timeout: float | None = S.default("timeout")
    grace: float = S.default("grace")
    extra_args: list[str] = field(default_factory=lambda: S.default("extra_args"))
    repeats: int = S.default("repeats")  # processes per op; >1 merges their medians (op/repeats.py)
    isolation: str = S.default("isolation")  # worker: a warm process per lane (op/lane.py); op: fresh per op
    max_ops_per_worker: int = S.default("max_ops_per_worker")
    cpu_pinning: str = S.default("cpu_pinning")  # auto | off: the lanes' CPU sets (backends/cpusets.py)
    provenance: Mapping[str, str] = field(default_factory=dict, compare=False)  # setting -> where its value came from
    planned_timer: str = field(init=False, default="")  # the timer the children will use (op/plan.py)

    def measure_settings(self) -> dict:
        """These settings as copies (what an op's request takes from a batch)."""
        return {n: copy.copy(getattr(self, n)) for n in S.MEASURE}


@dataclass(frozen=True, kw_only=True)
class OpRequest(Measurement):
    op: str
    target: NodeSpec
    suite: Suite
    backend: Backend
    device: int = S.default("device")
    color: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment for the child
    cpuset: Any = None  # opscreen.backends.cpusets.CpuSet the child is pinned to (None: not pinned)

    def __post_init__(self) -> None:
        validated(self, S.OP)

    def settings(self) -> dict:
        """What a replay needs to run this op again the same way."""
        return {
            "op": self.op,
            "target": self.target.as_dict(),
            "suite_root": str(self.suite.root),
            "python": self.suite.python,
            "backend": self.backend.name,
            "vendor": self.backend.vendor,
            "capabilities": self.backend.capabilities.as_dict(),
            **S.record(S.OP, self),
            **({"provenance": dict(self.provenance)} if self.provenance else {}),
        }


@dataclass
class OpOutcome:
    status: str
    exit_code: int
    child_returncode: int | None
    duration_s: float
    error: str | None
    out_dir: Path
    timer: str = ""
    repeats: dict | None = None  # with --repeats: how many ran and how each ended
    phases: dict | None = None  # where the child's time went (op/run.py op_phases)
    # runs of this op that died inside a graph capture: {test, status, error, wall_s, log}
    capture_aborts: list | None = None
    # the device's clocks, power and clock-event reasons while the child measured (op/telemetry.py)
    telemetry: dict | None = None

    def as_dict(self) -> dict:
        d = {
            "status": self.status,
            "exit_code": self.exit_code,
            "child_returncode": self.child_returncode,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
            "timer": self.timer,
        }
        if self.repeats is not None:
            d["repeats"] = self.repeats
        if self.phases is not None:
            d["phases"] = self.phases
        if self.capture_aborts:
            d["capture_aborts"] = self.capture_aborts
        if self.telemetry is not None:
            d["telemetry"] = self.telemetry
        return d




class StopRequest(threading.Event):
    """A stop event that SIGINT, SIGTERM and SIGHUP set (``opscreen op``): as a context
    manager it installs the handlers and restores the old ones on exit.

    The handler only sets the event and says so on stderr; :func:`run_once` sees it
    (before it starts the child, or while it waits for it), kills the child's process
    group (SIGTERM, ``--grace``, SIGKILL) and writes ``result.json`` with status
    ``interrupted``. A second signal SIGKILLs the group at once. A SIGHUP ignored at
    start (``nohup``) stays ignored; SIGINT does not: a shell starts the background
    jobs of a script with SIGINT ignored, and a harness that ignores it cannot be
    stopped by it while its child (in a session of its own) runs on.
    """

    SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self, who: str = "opscreen op") -> None:
        super().__init__()
        self.who = who
        self.reason: str | None = None  # the name of the first signal
        self._child = None
        self._old: dict = {}

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                sn = getattr(signal, name, None)
                if sn is None:  # pragma: no cover - not POSIX
                    continue
                old = signal.getsignal(sn)
                if name == "SIGHUP" and old == signal.SIG_IGN:
                    continue
                self._old[sn] = old
                signal.signal(sn, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        for sn, old in self._old.items():
            signal.signal(sn, old if old is not None else signal.SIG_DFL)
        self._old.clear()

    def child_started(self, proc) -> None:
        self._child = proc

    def _say(self, text: str) -> None:
        try:  # os.write: a handler may interrupt a buffered write to sys.stderr
            os.write(2, f"{self.who}: {text}\n".encode())
        except OSError:
            pass

    def _on_signal(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if not self.is_set():
            self.reason = name
            self.set()
            self._say(f"{name}: stopping; killing the op's process group (send it again to kill at once)")
            return
        child = self._child
        if child is not None:
            self._say(f"{name} again: killing the op's process group now")
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def op_result(req: OpRequest, outcome: OpOutcome) -> dict:
    """The op's ``result.json`` (without its version: :func:`opscreen.contracts.write` adds it)."""
    return {"op": req.op, "node": req.target.describe(), "device": req.device, "backend": req.backend.name,
            **outcome.as_dict()}

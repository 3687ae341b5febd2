"""The batch session: every chosen op of a suite, one child process at a time per device.

The session only routes events, like pytest-xdist's ``dsession.py``: it takes the
lanes' completions from the executor (:mod:`.executor`, which owns the
processes), asks the state machine what to do next (:mod:`.attempts`), tells the
scheduling policy (:mod:`.scheduling`, through its protocol only) and the
executor, and has the journal (:mod:`.journal`) write every record and the
progress display say it.

Lifecycle of :meth:`BatchRunner.run` (the run directory is locked by the caller):

1. kill what a previous runner of this run dir left behind (a runner killed with
   SIGKILL cannot kill its children; they carry ``OPSCREEN_BATCH_RUN``);
2. scan the journal: ops with a ``.complete`` marker are done and skipped, op
   dirs without one are deleted (partial output of an interrupted op); a marker
   beside a missing or damaged ``result.json`` is dropped first (the op runs
   again, and the run says so);
3. place the remaining ops on devices (:func:`~.scheduling.make_scheduler`) and
   run them through the executor, one :func:`opscreen.op.run.run_op` call (one
   child process group) per attempt;
4. after each attempt decide, in this (main) thread only
   (:class:`~.attempts.AttemptMachine`): done, retry (same device, or another
   one after a device-fatal exit), or the next dtype level; watch device health
   and take a device out after repeated fatal exits;
5. when an op is done, write its ``result.json`` and then its ``.complete``
   marker, rewrite ``ops_status.csv``, update ``run_identity.json``;
6. on SIGINT/SIGTERM/SIGHUP set the stop event: running children are killed as groups,
   their ops stay incomplete (resumable), the run ends with status 130;
7. when the run dir cannot be written (a full disk, say: an OSError from the
   journal, or from an attempt's own files), stop the same way, remove the partial
   op dirs (as a resume would: frees what they held), record the error in
   ``run_identity.json`` when it can be written, and end with one line on stderr
   naming the file and its filesystem, status 1. The completed ops are kept.

Per-op directory of a batch run (``RUN_DIR/ops/<op>/``): run_op's files of the
attempt that produced the result, plus ``attempts/attempt-<n>.log`` (run.log of
every attempt that did not pass) and, after a level-2 dtype fallback,
``dtypes/<dtype>/`` (one run_op dir per dtype tried alone) with the passing
dtypes' ``run.log`` and ``record.log`` merged into the op dir's own
(:func:`opscreen.results.merge.merge_level2`).
"""

from __future__ import annotations

import errno
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import OpscreenError
from ..fsio import is_storage_error, write_error
from ..results.merge import merge_level2
from . import signature as sig
from .config import BatchConfig
from .attempts import FINAL_OK, LEAVE, OP_OK, RUN_ELSEWHERE, RUN_HERE, Attempt, AttemptMachine, DeviceHealth, OpState, left_incomplete
from .executor import MARK_ENV, Done, Job, LocalExecutor, reap_leftovers
from .lanes import LaneLost
from .journal import (
    Journal,
    OpRecord,
    identity_device_name,
    identity_finished,
    op_dirname,
    op_result,
    run_identity,
    status_records,
)
from .progress import PlainProgress, fmt_secs
from .scheduling import Scheduler, make_scheduler

EXIT_OK, EXIT_FAILURES, EXIT_UNRUN, EXIT_INTERRUPTED = 0, 1, 3, 130
LOST_LIMIT = 3  # an op whose lane is lost this many times is recorded as crashed

OpTask = OpState  # the name this module used before the state machine moved out


@dataclass
class BatchSummary:
    total: int
    counts: dict[str, int]
    unrun: list[str]
    bad_devices: dict[int, str]
    interrupted: bool
    exit_code: int
    records: dict[str, OpRecord]


def _op_ok(status: str) -> bool:
    return status in OP_OK or status == "dismissed"


class BatchRunner:
    """Drives one batch run over a locked :class:`~.journal.Journal`.

    ``executor`` defaults to a :class:`~.executor.LocalExecutor` running
    ``run_op``; ``progress`` to plain lines on stdout; ``request_factory(op,
    device, dtypes)`` builds what the executor's work function takes.
    """

    def __init__(
        self,
        cfg: BatchConfig,
        journal: Journal,
        *,
        executor=None,
        progress: PlainProgress | None = None,
        request_factory: Callable[..., Any] | None = None,
        handle_signals: bool = True,
    ):
        self.cfg = cfg
        self.journal = journal
        self.executor = executor or LocalExecutor()
        self.progress = progress or PlainProgress()
        self.request_factory = request_factory or self._request
        self.handle_signals = handle_signals
        self.machine = AttemptMachine(cfg.retries, cfg.dtypes, cfg.op_dtypes)
        self.health = DeviceHealth(cfg.fatal_threshold)
        self.tasks: dict[str, OpState] = {}
        self.inflight: dict[int, Job] = {}
        self.records: dict[str, OpRecord] = {}
        self.lost: dict[str, list[dict]] = {}  # op -> the lanes lost while it ran there (executor ray)
        self.stopping = False
        self.stop_signal: int | None = None
        self.io_error: OSError | None = None  # the run dir could not be written: the run stops
        self.io_message: str | None = None  # said when it happened (the free space then)
        self._keys = 0
        self.identity: dict = {}
        self.sched: Scheduler | None = None
        self._cpu_plan: dict | None = None

    # -- setup ---------------------------------------------------------------
    def _request(self, op: str, device: int, dtypes: list[str] | None):
        from ..op.request import OpRequest

        c = self.cfg
        return OpRequest(
            op=op,
            target=c.targets[op],
            suite=c.suite,
            backend=c.backend,
            device=device,
            **{**c.measure_settings(), "dtypes": list(dtypes) if dtypes else None},
            env={MARK_ENV: str(self.journal.root)},  # lets a restarted runner find leftovers
            cpuset=self._cpusets().get(device),
        )

    def _cpusets(self) -> dict:
        """Each lane's CPU set, planned once per session (backends/cpusets.py)."""
        if self._cpu_plan is None:
            from ..backends.cpusets import plan

            self._cpu_plan = plan(self.cfg.backend, list(self.cfg.devices), self.cfg.cpu_pinning)
        return self._cpu_plan

    def _scan(self) -> tuple[dict[str, OpRecord], dict[str, str]]:
        """Resume: reset the ops to rerun, drop damaged markers, clear partial op dirs,
        write the session's identity. Returns (complete ops, damaged ops)."""
        c, j = self.cfg, self.journal
        try:
            for op in c.rerun:
                j.reset_op(op)
            damaged = j.drop_damaged()
            done = j.scan()
            j.clear_incomplete()
            self.records = dict(done)
            self.identity = run_identity(c, j.read_identity())
            if damaged:
                self.identity["sessions"][-1]["damaged_rerun"] = dict(damaged)
            j.write_identity(self.identity)
            self._write_status()
        except OSError as exc:  # nothing started yet: one line, the run dir as it was
            raise OpscreenError(f"{write_error(exc, j.root)}; nothing was started") from None
        return done, damaged

    def _announce(self, todo: list[str], done: dict, damaged: dict[str, str]) -> None:
        c, j = self.cfg, self.journal
        extra = [o for o in c.dismissed if o not in done]
        total = len(set(c.ops) | set(done)) + len(extra)
        header = (
            f"opscreen run: {len(todo)} op{'s' if len(todo) != 1 else ''} to run on {c.backend.name} devices "
            f"{','.join(map(str, c.devices))}; {len(done)} already complete; {len(c.dismissed)} dismissed; "
            f"run dir {j.root}"
        )
        self.progress.start(total, len(done) + len(extra), list(c.devices), header)
        for op, problem in damaged.items():
            again = "it runs again" if op in todo else "it is no longer complete (not in this run's op list)"
            self.progress.message(f"opscreen run: {op}: {problem}, so its result is lost: {again}")

    # -- the run ---------------------------------------------------------------
    def run(self) -> BatchSummary:
        c = self.cfg
        reap_leftovers(str(self.journal.root))
        done, damaged = self._scan()
        todo = [op for op in c.ops if op not in done]
        _ = getattr(c.suite, "git", None)  # resolve once, before the lane threads
        self.sched = make_scheduler(todo, steal=c.steal, shift=c.placement_shift)
        for d in c.devices:
            self.sched.add_device(d)
        self._announce(todo, done, damaged)
        old_handlers = self._install_signals()
        self.executor.start(list(c.devices))
        try:
            self._loop()
        except OSError as exc:  # a journal write failed: stop (children killed below)
            self._io_failed(exc)
        finally:
            if self.inflight:  # an exception in the loop: never leave children behind
                self.executor.stop()
                self._drain(final=True)
            self.executor.close()
            self._restore_signals(old_handlers)
        return self._finish(todo)

    def _loop(self) -> None:
        sched = self.sched
        assert sched is not None
        while True:
            if not self.stopping:
                self._fill_lanes(sched)
            if not self.inflight:
                if self.stopping or sched.finished or not sched.devices:
                    break
                if not any(sched.runnable(d) for d in sched.devices):
                    # nothing runnable (should not happen): avoid a busy loop
                    break
            for done in self.executor.wait(0.2):
                self._handle(done)
            self.progress.tick()

    def _fill_lanes(self, sched: Scheduler) -> None:
        """Give every idle healthy device its next op."""
        for d in list(sched.devices):
            if d in self.inflight or self.health.is_bad(d) or sched.running_on(d) is not None:
                continue
            op = sched.next_for(d)
            if op is None:
                continue
            task = self.tasks.get(op)
            if task is None:
                task = self.tasks[op] = self.machine.start(op, sched.home_of(op))
            self._submit(task, d)

    def _io_failed(self, exc: OSError, where: Path | None = None) -> None:
        """The run dir cannot be written: stop the run (running children are killed).
        ``where``: the file to name when the error names none (a failed flush)."""
        if self.io_error is None:
            self.io_error = exc
            self.io_message = write_error(exc, where or self.journal.root)
        self.stopping = True
        self.executor.stop()

    def _drain(self, final: bool = False) -> None:
        deadline = time.monotonic() + (self.cfg.grace or 0) + 30
        while self.inflight and time.monotonic() < deadline:
            for done in self.executor.wait(0.2):
                self.inflight.pop(done.job.lane, None)

    # -- signals ---------------------------------------------------------------
    def _install_signals(self):
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return None
        old = {}
        for sn in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            old[sn] = signal.getsignal(sn)
            if sn == signal.SIGHUP and old[sn] == signal.SIG_IGN:
                continue  # started under nohup: a closed terminal must not stop the run
            signal.signal(sn, self._on_signal)
        return old

    def _restore_signals(self, old) -> None:
        if not old:
            return
        for sn, h in old.items():
            try:
                signal.signal(sn, h)
            except (ValueError, TypeError):
                pass

    def _on_signal(self, signum, frame) -> None:
        first = not self.stopping
        self.stopping = True
        self.stop_signal = self.stop_signal or signum
        self.executor.stop()
        if first:
            name = signal.Signals(signum).name
            self.progress.message(
                f"opscreen run: {name}: stopping; killing {len(self.inflight)} running op(s); "
                f"completed ops are kept; resume with: opscreen run --out {self.journal.root}"
            )

    # -- attempts ----------------------------------------------------------------
    def _out_dir(self, task: OpState) -> Path:
        base = self.journal.op_dir(task.op)
        if task.level == 2 and task.l2_current:
            return base / "dtypes" / op_dirname(task.l2_current)
        return base

    def _submit(self, task: OpState, device: int) -> None:
        out = self._out_dir(task)
        out.mkdir(parents=True, exist_ok=True)
        dtypes = task.request_dtypes()
        req = self.request_factory(task.op, device, dtypes)
        self._keys += 1
        job = Job(self._keys, task.op, device, req, out, {"level": task.level, "dtypes": dtypes})
        if device not in task.devices:
            task.devices.append(device)
        self.inflight[device] = job
        self.executor.submit(job)
        n = len(task.attempts) + 1
        detail = f"attempt {n}" + (f", dtype level {task.level}" if task.level else "")
        if task.level == 2:
            detail += f" ({task.l2_current})"
        self.progress.lane_started(device, task.op, detail)

    def _handle(self, done: Done) -> None:
        """An attempt came back: record it, ask the state machine, carry out its answer."""
        lane = done.job.lane
        self.inflight.pop(lane, None)
        task = self.tasks[done.job.op]
        if isinstance(done.exc, LaneLost):
            self._lane_lost(task, lane, str(done.exc))
            return
        att = self._attempt(task, done)
        if att is None:  # stopped by us (or the run dir is unwritable): the op stays incomplete
            self.progress.lane_idle(lane)
            return
        if self.health.record(lane, task.op, att.status, att.error):
            self._device_bad(lane)
        action = self.machine.after(task, att, stopping=self.stopping, device_bad=self.health.is_bad(lane))
        if action.kind == RUN_HERE:
            self._submit(task, lane)
        elif action.kind == RUN_ELSEWHERE:
            self._move(task, lane)
        elif action.kind == LEAVE:
            self._release(task, lane)
        else:
            self._finish_op(task, lane, action.status or "failed", action.error)

    def _attempt(self, task: OpState, done: Done) -> Attempt | None:
        """The :class:`Attempt` ``done`` was, or None when the run itself ended it."""
        job, out = done.job, done.outcome
        if out is None:
            status, exit_code, rc, duration, error, timer = "crashed", 5, None, done.wall_s, f"harness: {done.error}", ""
        else:
            status, exit_code, rc = out.status, out.exit_code, out.child_returncode
            duration, error, timer = float(out.duration_s or 0.0), out.error, getattr(out, "timer", "") or ""
        task.last_outcome = {"status": status, "exit_code": exit_code, "child_returncode": rc, "timer": timer, "out_dir": job.out_dir,
                             "repeats": getattr(out, "repeats", None), "phases": getattr(out, "phases", None),
                             "capture_aborts": getattr(out, "capture_aborts", None),
                             "telemetry": getattr(out, "telemetry", None)}
        if left_incomplete(status, self.io_error is not None):
            return None
        if out is None and is_storage_error(done.exc):
            # the attempt could not write its own files (run.log on a full disk): no op
            # can be recorded any more; the op stays incomplete
            self._io_failed(done.exc, job.out_dir / "run.log")  # type: ignore[arg-type]
            return None
        fail = None if status in FINAL_OK else sig.from_log(job.out_dir / "run.log", status, rc)
        if fail is not None and (error is None or (status == "failed" and fail.kind == "E")):
            # pytest's FAILED summary line (run_op's pick) is cut to the terminal
            # width; the E line of the failure holds the whole message.
            error = fail.error
        n = len(task.attempts) + 1
        return Attempt(
            n=n,
            level=task.level,
            dtypes=job.meta.get("dtypes"),
            device=job.lane,
            status=status,
            exit_code=exit_code,
            child_returncode=rc,
            duration_s=round(duration, 3),
            error=error,
            signature=fail.signature if fail else None,
            dtype_error=bool(fail is not None and fail.dtype_error and status == "failed"),
            log=None if status in FINAL_OK else self.journal.keep_attempt_log(task.op, job.out_dir, n),
        )

    def _release(self, task: OpState, lane: int) -> None:
        sched = self.sched
        if sched is not None and sched.running_on(lane) == task.op:
            sched.release(lane, task.op)
        self.progress.lane_idle(lane)

    def _move(self, task: OpState, lane: int) -> None:
        """Retry ``task`` on another device (after a device-fatal exit)."""
        sched = self.sched
        assert sched is not None
        others = [d for d in sched.devices if d != lane and not self.health.is_bad(d)]
        if not others and lane in sched.devices and not self.health.is_bad(lane):
            self._submit(task, lane)  # the only device: retry in place
            return
        self._release(task, lane)
        if sched.requeue(task.op, avoid={lane}) is None or not sched.devices:
            task.stop_reason = "no healthy device left"

    def _lane_lost(self, task: OpState, lane: int, reason: str) -> None:
        """The lane's worker is gone with the op it ran (its node died, its process was
        killed): nothing of the attempt came back, so no attempt is recorded. The lane
        leaves the run like a bad device, and the op runs again on another lane (after
        :data:`LOST_LIMIT` lost lanes it is recorded as crashed)."""
        if lane not in self.health.bad:
            self.health.bad[lane] = f"lost: {reason}"
            if self.sched is not None and lane in self.sched.devices:
                self._device_bad(lane)  # its queue moves; run_identity.json names it
        lost = self.lost.setdefault(task.op, [])
        lost.append({"lane": lane, "reason": reason})
        if self.stopping:
            self.progress.lane_idle(lane)
            return  # the op stays incomplete: a resume runs it
        if len(lost) >= LOST_LIMIT:
            self._finish_op(task, lane, "crashed", f"its lane was lost {len(lost)} times; last: {reason}")
            return
        sched = self.sched
        assert sched is not None
        self.progress.lane_idle(lane)
        if sched.requeue(task.op, avoid={lane}) is None or not sched.devices:
            task.stop_reason = "no healthy device left"

    # -- devices -----------------------------------------------------------------
    def _device_bad(self, lane: int) -> None:
        sched = self.sched
        assert sched is not None
        reason = self.health.bad.get(lane, "")
        queued = sched.queue_of(lane)
        sched.remove_device(lane)  # the op it ran: the state machine decides (retry elsewhere or finish)
        healthy = [d for d in sched.devices if not self.health.is_bad(d)]
        self.progress.lane_bad(lane, reason)
        where = f"devices {','.join(map(str, healthy))}" if healthy else "no device (none is healthy)"
        self.progress.message(f"opscreen run: device {lane} marked bad: {reason}; its {len(queued)} queued op(s) move to {where}")
        bad = self.identity.setdefault("bad_devices", {})
        bad[str(lane)] = reason
        self.journal.write_identity(self.identity)

    # -- finishing an op -------------------------------------------------------------
    def _finish_op(self, task: OpState, lane: int, status: str, error: str | None) -> None:
        op_dir = self.journal.op_dir(task.op)
        extra = merge_level2(op_dir, task.l2_passed, task.l2_failed, op_dirname) if task.level == 2 else {}
        if task.op in self.lost:
            extra["lanes_lost"] = self.lost[task.op]
        stolen = self.sched.stolen_from(task.op) if self.sched else None
        result = op_result(task, status=status, error=error, backend=self.cfg.backend.name,
                           node=_describe(self.cfg.targets.get(task.op)), stolen_from=stolen, lane=lane, extra=extra)
        rec = self.journal.complete(task.op, result)
        self.records[task.op] = rec
        self._write_status()
        dirs = [op_dir] + [op_dir / "dtypes" / op_dirname(d) for d in task.l2_passed]
        if identity_device_name(self.identity, dirs, self.cfg.dtypes):
            self.journal.write_identity(self.identity)
        if self.sched is not None:
            self.sched.op_done(task.op, lane)
        self.tasks.pop(task.op, None)
        self.progress.lane_idle(lane)
        note = []
        if len(task.attempts) > 1:
            note.append(f"{len(task.attempts)} attempts")
        if task.level:
            note.append(f"dtype level {task.level}" + (f" kept {','.join(task.l2_passed)}" if task.level == 2 else ""))
        if stolen is not None:
            note.append(f"stolen from dev {stolen}")
        if status not in FINAL_OK and rec.error:  # passed_own_dtypes too: which dtypes ran
            note.append(rec.error[:160])
        self.progress.op_finished(task.op, status, result["device"], rec.duration_s, " | ".join(note))

    def _write_status(self, interrupted: dict[str, int] | None = None) -> None:
        c = self.cfg
        planned = list(dict.fromkeys([*(c.all_ops or []), *c.ops]))
        self.journal.write_status(status_records(self.records, c.dismissed, c.backend.name, planned, interrupted))

    def _interrupted(self) -> dict[str, int]:
        """The ops this session started and did not finish because it stopped (op -> attempts)."""
        if not (self.stopping or self.io_error is not None):
            return {}
        return {op: len(t.attempts) for op, t in self.tasks.items() if op not in self.records}

    # -- the end of the run ------------------------------------------------------------
    def _finish(self, todo: list[str]) -> BatchSummary:
        c = self.cfg
        unrun = [op for op in todo if op not in self.records]
        counts = self._counts(unrun)
        state, code = self._end_state(unrun)
        error = self.io_message if self.io_error is not None else None
        identity_finished(self.identity, state, error)
        recorded = True
        try:
            self.journal.write_identity(self.identity)
            self._write_status(self._interrupted())
        except OSError as exc:
            recorded = False
            if self.io_error is None:  # every op ran; only the last writes failed
                self.io_error, state, code = exc, "interrupted", EXIT_FAILURES
                error = write_error(exc, self.journal.root)
        self._report(state, counts, unrun, error, recorded)
        return BatchSummary(len(set(c.ops) | set(self.records)), counts, unrun, dict(self.health.bad), self.stopping, code, dict(self.records))

    def _counts(self, unrun: list[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in set(self.cfg.ops) | set(self.records):
            rec = self.records.get(op)
            if rec is not None:
                counts[rec.status] = counts.get(rec.status, 0) + 1
        for op in self.cfg.dismissed:
            if op not in self.records:
                counts["dismissed"] = counts.get("dismissed", 0) + 1
        if unrun:
            counts["not run"] = len(unrun)
        return counts

    def _end_state(self, unrun: list[str]) -> tuple[str, int]:
        if self.io_error is not None:
            # the partial op dirs of the killed attempts are what a resume deletes
            # first; deleting them now frees their space for the files written next
            self.journal.clear_incomplete()
            return "interrupted", EXIT_FAILURES
        if self.stopping:
            return "interrupted", EXIT_INTERRUPTED
        if unrun:
            return "incomplete", EXIT_UNRUN
        if any(not _op_ok(r.status) for r in self.records.values()):  # the whole run dir
            return "finished", EXIT_FAILURES
        return "finished", EXIT_OK

    def _report(self, state: str, counts: dict[str, int], unrun: list[str], error: str | None, recorded: bool) -> None:
        root = self.journal.root
        parts = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        self.progress.close()
        msg = f"opscreen run: {state}: {parts or 'nothing to do'}; ops_status.csv in {root}"
        if self.health.bad:
            msg += "; bad devices: " + ", ".join(f"{d} ({r})" for d, r in self.health.bad.items())
        if unrun and not self.stopping:
            msg += f"; {len(unrun)} op(s) not run: no healthy device left"
        if self.stopping or unrun:
            msg += f"; resume with: opscreen run --out {root}"
        _say(getattr(self.progress, "stream", None) or sys.stdout, msg)
        if error:
            _say(sys.stderr, (
                f"opscreen run: {error}; stopped: the running ops were killed, {len(self.records)} complete op(s) kept"
                + ("" if recorded else ", run_identity.json not updated")
                + f"; {_fix_hint(self.io_error)}, then resume with: opscreen run --out {root}"
            ))


def _say(stream, line: str) -> None:
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _fix_hint(exc: OSError | None) -> str:
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return "free space"
    if code == errno.EFBIG:
        return "raise the file size limit"
    if code == errno.EROFS:
        return "make the filesystem writable"
    return "fix the filesystem"


def _describe(target) -> str | None:
    if target is None:
        return None
    d = getattr(target, "describe", None)
    return d() if callable(d) else str(target)


__all__ = ["BatchRunner", "BatchSummary", "fmt_secs"]

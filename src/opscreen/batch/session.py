"""The batch runner: every chosen op of a suite, one child process at a time per device.

Lifecycle of :meth:`BatchRunner.run` (the run directory is locked by the caller):

1. kill what a previous runner of this run dir left behind (a runner killed with
   SIGKILL cannot kill its children; they carry ``OPSCREEN_BATCH_RUN``);
2. scan the journal: ops with a ``.complete`` marker are done and skipped, op
   dirs without one are deleted (partial output of an interrupted op); a marker
   beside a missing or damaged ``result.json`` is dropped first (the op runs
   again, and the run says so);
3. place the remaining ops on devices (:class:`~.scheduler.HashScheduler`) and
   run them through the executor, one :func:`opscreen.op.run.run_op` call (one
   child process group) per attempt;
4. after each attempt decide, in this (main) thread only: done, retry (same
   device, or another one after a device-fatal exit), or the next dtype level;
   watch device health and take a device out after repeated fatal exits;
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
dtypes' ``run.log`` and ``record.log`` merged into the op dir's own.
"""

from __future__ import annotations

import errno
import os
import platform
import shutil
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..errors import OpscreenError
from ..fsio import is_storage_error, write_error
from . import signature as sig
from .config import BatchConfig
from .executor import MARK_ENV, Done, Job, LocalExecutor, reap_leftovers
from .journal import Journal, OpRecord, now_iso, read_json
from .progress import PlainProgress, fmt_secs
from .retry import FINAL_OK, Attempt, DeviceHealth, RetryPolicy, level2_candidates
from .scheduler import HashScheduler

EXIT_OK, EXIT_FAILURES, EXIT_UNRUN, EXIT_INTERRUPTED = 0, 1, 3, 130

@dataclass
class OpTask:
    """An op in flight: its dtype level, the attempts of its current step, where it ran."""

    op: str
    home: int | None
    level: int = 0
    step_dtypes: list[str] | None = None
    step: list[Attempt] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    l2_queue: list[str] = field(default_factory=list)
    l2_current: str | None = None
    l2_passed: list[str] = field(default_factory=list)
    l2_failed: dict[str, str] = field(default_factory=dict)
    l2_outcomes: dict[str, Any] = field(default_factory=dict)
    devices: list[int] = field(default_factory=list)
    stop_reason: str | None = None
    last_outcome: Any = None
    started_at: float = field(default_factory=time.monotonic)


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
    return status in FINAL_OK or status == "dismissed"


class BatchRunner:
    """Drives one batch run over a locked :class:`~.journal.Journal`.

    ``executor`` defaults to a :class:`~.executor.LocalExecutor` running
    ``run_op``; ``progress`` to plain lines on stdout.
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
        self.policy = RetryPolicy(cfg.retries)
        self.health = DeviceHealth(cfg.fatal_threshold)
        self.tasks: dict[str, OpTask] = {}
        self.inflight: dict[int, Job] = {}
        self.records: dict[str, OpRecord] = {}
        self.stopping = False
        self.stop_signal: int | None = None
        self.io_error: OSError | None = None  # the run dir could not be written: the run stops
        self.io_message: str | None = None  # said when it happened (the free space then)
        self._keys = 0
        self.identity: dict = {}
        self.sched: HashScheduler | None = None

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
        )

    def _base_identity(self) -> dict:
        c = self.cfg
        prev = self.journal.read_identity() or {}
        git = getattr(c.suite, "git", None) or {}
        from ..child.config import caliber as caliber_block
        from ..op.run import planned_timing

        try:
            timing = planned_timing(c.backend)
        except Exception:  # noqa: BLE001 - the identity must not stop the run
            timing = {}
        caliber = caliber_block(
            {
                "timer": c.planned_timer,
                "use_flagtune": c.use_flagtune,
                "use_flagtune_cost_model": c.use_flagtune_cost_model,
                "shape_mode": c.shape_mode,
                "level": c.level,
                "dtypes": c.dtypes,
                "backend": c.backend.name,
                "vendor": c.backend.vendor,
                "suite_commit": git.get("commit"),
                "timing": timing,
            }
        )
        if (prev.get("caliber") or {}).get("device_name"):
            caliber = prev["caliber"]
        sessions = list(prev.get("sessions") or [])
        sessions.append({"pid": os.getpid(), "started_at": now_iso(), "argv": list(c.argv), "devices": list(c.devices)})
        return {
            "schema": "opscreen.identity/1",
            "kind": "run",
            "caliber": caliber,
            "batch": {
                "devices": list(c.devices),
                "ops": len(c.ops),
                "dismissed": len(c.dismissed),
                "timeout": c.timeout,
                "retries": c.retries,
                "shard": f"{c.shard[0]}/{c.shard[1]}" if c.shard else None,
                "steal": c.steal,
                "fatal_threshold": c.fatal_threshold,
                "replay_of": c.replay_of,
                "argv": list(c.argv),
            },
            "settings": c.settings(),
            "suite": {"root": str(c.suite.root), "name": getattr(c.suite, "name", None), "commit": git.get("commit"), "dirty": git.get("dirty")},
            "host": socket.gethostname(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "opscreen_version": __version__,
            "started_at": prev.get("started_at") or now_iso(),
            "finished_at": None,
            "state": "running",
            "sessions": sessions,
        }

    # -- the run ---------------------------------------------------------------
    def run(self) -> BatchSummary:
        c = self.cfg
        j = self.journal
        reap_leftovers(str(j.root))
        try:
            for op in c.rerun:
                j.reset_op(op)
            damaged = j.drop_damaged()
            done = j.scan()
            j.clear_incomplete()
            self.records = dict(done)
            todo = [op for op in c.ops if op not in done]
            self.identity = self._base_identity()
            if damaged:
                self.identity["sessions"][-1]["damaged_rerun"] = dict(damaged)
            j.write_identity(self.identity)
            self._write_status()
        except OSError as exc:  # nothing started yet: one line, the run dir as it was
            raise OpscreenError(f"{write_error(exc, j.root)}; nothing was started") from None
        _ = getattr(c.suite, "git", None)  # resolve once, before the lane threads

        self.sched = HashScheduler(todo, steal=c.steal)
        for d in c.devices:
            self.sched.add_device(d)
        total = len(set(c.ops) | set(done)) + len([o for o in c.dismissed if o not in done])
        already = len(done) + len([o for o in c.dismissed if o not in done])
        header = (
            f"opscreen run: {len(todo)} ops to run on {c.backend.name} devices "
            f"{','.join(map(str, c.devices))}; {len(done)} already complete; {len(c.dismissed)} dismissed; "
            f"run dir {j.root}"
        )
        self.progress.start(total, already, list(c.devices), header)
        for op, problem in damaged.items():
            again = "it runs again" if op in todo else "it is no longer complete (not in this run's op list)"
            self.progress.message(f"opscreen run: {op}: {problem}, so its result is lost: {again}")
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
                for d in list(sched.devices):
                    if d in self.inflight or self.health.is_bad(d):
                        continue
                    current = sched.running.get(d)
                    if current is not None:
                        continue
                    op = sched.next_for(d)
                    if op is None:
                        continue
                    task = self.tasks.get(op)
                    if task is None:
                        task = OpTask(op, home=sched.home.get(op), step_dtypes=self.cfg.dtypes)
                        self.tasks[op] = task
                    self._submit(task, d)
            if not self.inflight:
                if self.stopping or sched.finished or not sched.devices:
                    break
                if not any(sched.running.get(d) is None and (sched.queue_of(d) or sched.steal) for d in sched.devices):
                    # nothing runnable (should not happen): avoid a busy loop
                    break
            for done in self.executor.wait(0.2):
                self._handle(done)
            self.progress.tick()

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
    def _out_dir(self, task: OpTask) -> Path:
        base = self.journal.op_dir(task.op)
        if task.level == 2 and task.l2_current:
            return base / "dtypes" / _safe(task.l2_current)
        return base

    def _submit(self, task: OpTask, device: int) -> None:
        out = self._out_dir(task)
        out.mkdir(parents=True, exist_ok=True)
        dtypes = [task.l2_current] if task.level == 2 else task.step_dtypes
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
        job = done.job
        lane = job.lane
        self.inflight.pop(lane, None)
        task = self.tasks[job.op]
        out = done.outcome
        if out is None:
            status, exit_code, rc, duration, error, timer = "crashed", 5, None, done.wall_s, f"harness: {done.error}", ""
        else:
            status, exit_code, rc = out.status, out.exit_code, out.child_returncode
            duration, error, timer = float(out.duration_s or 0.0), out.error, getattr(out, "timer", "") or ""
        task.last_outcome = {"status": status, "exit_code": exit_code, "child_returncode": rc, "timer": timer, "out_dir": job.out_dir,
                             "repeats": getattr(out, "repeats", None)}

        if status == "interrupted" or (self.io_error is not None and status not in FINAL_OK):
            # Stopped by us: the op stays incomplete; a resume runs it again.
            self.progress.lane_idle(lane)
            return
        if out is None and is_storage_error(done.exc):
            # the attempt could not write its own files (run.log on a full disk): no op
            # can be recorded any more; the op stays incomplete
            self.progress.lane_idle(lane)
            self._io_failed(done.exc, job.out_dir / "run.log")  # type: ignore[arg-type]
            return

        fail = None if status in FINAL_OK else sig.from_log(job.out_dir / "run.log", status, rc)
        dtype_error = bool(fail is not None and fail.dtype_error and status == "failed")
        if fail is not None and (error is None or (status == "failed" and fail.kind == "E")):
            # pytest's FAILED summary line (run_op's pick) is cut to the terminal
            # width; the E line of the failure holds the whole message.
            error = fail.error
        att = Attempt(
            n=len(task.attempts) + 1,
            level=task.level,
            dtypes=job.meta.get("dtypes"),
            device=lane,
            status=status,
            exit_code=exit_code,
            child_returncode=rc,
            duration_s=round(duration, 3),
            error=error,
            signature=fail.signature if fail else None,
            dtype_error=dtype_error,
        )
        if status not in FINAL_OK:
            att.log = self._keep_attempt_log(task, job.out_dir, att.n)
        task.attempts.append(att)
        task.step.append(att)

        if self.health.record(lane, task.op, status, error):
            self._device_bad(lane)

        if status in FINAL_OK:
            if task.level == 2:
                task.l2_passed.append(task.l2_current)
                task.l2_outcomes[task.l2_current] = status
                self._next_dtype(task, lane)
            else:
                self._finish_op(task, lane, status)
            return
        if dtype_error:
            self._next_level(task, lane, att)
            return
        dec = self.policy.decide(task.step)
        if dec.retry and not self.stopping:
            if dec.other_device or self.health.is_bad(lane):
                self._move(task, lane)
            else:
                self._submit(task, lane)
            return
        task.stop_reason = "interrupted" if self.stopping and dec.retry else dec.reason
        if self.stopping and dec.retry:
            # A retry was due but the run is stopping: leave the op incomplete.
            self._release(task, lane)
            return
        if task.level == 2:
            task.l2_failed[task.l2_current] = error or status
            task.l2_outcomes[task.l2_current] = status
            self._next_dtype(task, lane)
        else:
            self._finish_op(task, lane, status)

    def _keep_attempt_log(self, task: OpTask, out_dir: Path, n: int) -> str | None:
        src = out_dir / "run.log"
        if not src.is_file():
            return None
        dest_dir = self.journal.op_dir(task.op) / "attempts"
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"attempt-{n}.log"
        try:
            shutil.copyfile(src, dest)
        except OSError:
            return None
        return self.journal.rel(dest).split("/", 2)[-1]

    def _release(self, task: OpTask, lane: int) -> None:
        sched = self.sched
        if sched is not None and sched.running.get(lane) == task.op:
            sched.release(lane, task.op)
        self.progress.lane_idle(lane)

    def _move(self, task: OpTask, lane: int) -> None:
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

    def _next_level(self, task: OpTask, lane: int, att: Attempt) -> None:
        if task.level == 2:
            task.l2_failed[task.l2_current] = att.error or "dtype not supported"
            task.l2_outcomes[task.l2_current] = att.status
            self._next_dtype(task, lane)
            return
        if task.level == 0 and self.cfg.dtypes:
            task.level, task.step_dtypes, task.step = 1, None, []
            self._continue(task, lane)
            return
        cands = level2_candidates(self.cfg.dtypes, self.cfg.op_dtypes.get(task.op, []))
        if not cands:
            task.stop_reason = "dtype failure and no dtype list known for the op"
            self._finish_op(task, lane, att.status)
            return
        task.level, task.step, task.l2_queue = 2, [], list(cands)
        self._next_dtype(task, lane)

    def _continue(self, task: OpTask, lane: int) -> None:
        if self.stopping:
            self._release(task, lane)
            return
        if self.health.is_bad(lane):
            self._move(task, lane)
        else:
            self._submit(task, lane)

    def _next_dtype(self, task: OpTask, lane: int) -> None:
        if task.l2_queue:
            task.l2_current = task.l2_queue.pop(0)
            task.step = []
            self._continue(task, lane)
            return
        task.l2_current = None
        status = "passed" if task.l2_passed else (task.attempts[-1].status if task.attempts else "failed")
        self._finish_op(task, lane, status)

    # -- devices -----------------------------------------------------------------
    def _device_bad(self, lane: int) -> None:
        sched = self.sched
        assert sched is not None
        reason = self.health.bad.get(lane, "")
        queued = sched.queue_of(lane)
        running = sched.remove_device(lane)
        if running is not None:
            # keep it "running" nowhere: _handle decides (retry elsewhere or finish)
            pass
        healthy = [d for d in sched.devices if not self.health.is_bad(d)]
        self.progress.lane_bad(lane, reason)
        where = f"devices {','.join(map(str, healthy))}" if healthy else "no device (none is healthy)"
        self.progress.message(f"opscreen run: device {lane} marked bad: {reason}; its {len(queued)} queued op(s) move to {where}")
        bad = self.identity.setdefault("bad_devices", {})
        bad[str(lane)] = reason
        self.journal.write_identity(self.identity)

    # -- finishing an op -------------------------------------------------------------
    def _finish_op(self, task: OpTask, lane: int, status: str) -> None:
        op_dir = self.journal.op_dir(task.op)
        last = task.attempts[-1] if task.attempts else None
        final_out = task.last_outcome or {}
        extra: dict = {}
        if task.level == 2:
            extra = self._merge_level2(task, op_dir)
            status = "passed" if task.l2_passed else status
        error = None
        if status not in FINAL_OK:
            error = last.error if last else None
        elif task.level == 2 and task.l2_failed:
            error = "dtype fallback kept " + ",".join(task.l2_passed) + "; failed " + "; ".join(
                f"{d}: {e}" for d, e in task.l2_failed.items()
            )
        elif task.level == 1:
            error = "dtype fallback: ran the op's own dtypes (requested dtypes failed: " + (
                (task.attempts[0].error or "") if task.attempts else ""
            ) + ")"
        device = last.device if last else lane
        stolen = self.sched.stolen.get(task.op) if self.sched else None
        result = {
            "schema": 1,
            "op": task.op,
            "status": status,
            "exit_code": last.exit_code if last else None,
            "child_returncode": last.child_returncode if last else None,
            "duration_s": round(sum(a.duration_s for a in task.attempts), 3),
            "error": (error[:1000] if error else None),
            "node": _describe(self.cfg.targets.get(task.op)),
            "device": device,
            "backend": self.cfg.backend.name,
            "timer": final_out.get("timer") or "",
            "attempts": len(task.attempts),
            "dtype_level": task.level,
            "home_device": task.home,
            "stolen_from": stolen[0] if stolen else None,
            "devices": list(task.devices),
            "stop_reason": task.stop_reason,
            "attempt_log": [a.as_dict() for a in task.attempts],
            **({"repeats": final_out["repeats"]} if final_out.get("repeats") else {}),
            "finished_at": now_iso(),
            **extra,
        }
        if task.level == 2 and task.l2_passed:
            result["exit_code"] = 0
        rec = self.journal.complete(task.op, result)
        self.records[task.op] = rec
        self._write_status()
        self._note_identity(op_dir, task)
        sched = self.sched
        if sched is not None:
            if sched.running.get(lane) == task.op:
                sched.mark_op_complete(lane, task.op)
            else:
                sched.completed.add(task.op)
        self.tasks.pop(task.op, None)
        self.progress.lane_idle(lane)
        note = []
        if len(task.attempts) > 1:
            note.append(f"{len(task.attempts)} attempts")
        if task.level:
            note.append(f"dtype level {task.level}" + (f" kept {','.join(task.l2_passed)}" if task.level == 2 else ""))
        if stolen:
            note.append(f"stolen from dev {stolen[0]}")
        if status not in FINAL_OK and rec.error:
            note.append(rec.error[:160])
        self.progress.op_finished(task.op, status, device, rec.duration_s, " | ".join(note))

    def _merge_level2(self, task: OpTask, op_dir: Path) -> dict:
        """Merge the passing dtypes' run.log and record.log into the op dir."""
        passed = task.l2_passed
        lines = [
            f"[opscreen] dtype fallback level 2: each dtype alone; passed: {','.join(passed) or 'none'}"
            + (f"; failed: {', '.join(task.l2_failed)}" if task.l2_failed else "")
            + "\n"
        ]
        record: list[str] = []
        first_ok: Path | None = None
        for d in passed:
            sub = op_dir / "dtypes" / _safe(d)
            first_ok = first_ok or sub
            lines.append(f"[opscreen] ===== dtype {d} (from dtypes/{_safe(d)}/run.log) =====\n")
            lines.append(_read(sub / "run.log"))
            rec = _read(sub / "record.log")
            if rec:
                record.append(rec if rec.endswith("\n") else rec + "\n")
        for d, err in task.l2_failed.items():
            lines.append(f"[opscreen] ===== dtype {d}: not kept: {err} (see dtypes/{_safe(d)}/run.log) =====\n")
        if passed:
            # the level-0/1 failure is kept under attempts/; the op dir shows the kept results
            _write(op_dir / "run.log", "".join(lines))
            _write(op_dir / "record.log", "".join(record))
            for name in ("run_identity.json", "child_config.json"):
                if first_ok is not None and (first_ok / name).is_file():
                    shutil.copyfile(first_ok / name, op_dir / name)
        else:
            with open(op_dir / "run.log", "a", encoding="utf-8") as fh:
                fh.write("".join(lines))
        return {"dtypes_passed": list(passed), "dtypes_failed": dict(task.l2_failed)}

    def _note_identity(self, op_dir: Path, task: OpTask) -> None:
        cal = self.identity.get("caliber") or {}
        if cal.get("device_name"):
            return
        candidates = [op_dir] + [op_dir / "dtypes" / _safe(d) for d in task.l2_passed]
        for d in candidates:
            ident = read_json(d / "run_identity.json") or {}
            ocal = ident.get("caliber") or {}
            name = ocal.get("device_name") or ident.get("device_name")
            if name:
                merged = dict(cal)
                merged.update({k: v for k, v in ocal.items() if k != "dtypes"})
                merged["dtypes"] = self.cfg.dtypes  # the run's request; levels may differ per op
                merged["device_name"] = name
                self.identity["caliber"] = merged
                self.journal.write_identity(self.identity)
                return

    def _write_status(self) -> None:
        rows = dict(self.records)
        for op, reason in self.cfg.dismissed.items():
            if op not in rows:
                rows[op] = OpRecord(op, "dismissed", 0, None, None, self.cfg.backend.name, None, "", reason, "")
        self.journal.write_status([rows[k] for k in sorted(rows)])

    def _finish(self, todo: list[str]) -> BatchSummary:
        c = self.cfg
        unrun = [op for op in todo if op not in self.records]
        counts: dict[str, int] = {}
        for op in set(c.ops) | set(self.records):
            rec = self.records.get(op)
            if rec is not None:
                counts[rec.status] = counts.get(rec.status, 0) + 1
        for op in c.dismissed:
            if op not in self.records:
                counts["dismissed"] = counts.get("dismissed", 0) + 1
        if unrun:
            counts["not run"] = len(unrun)
        if self.io_error is not None:
            # the partial op dirs of the killed attempts are what a resume deletes
            # first; deleting them now frees their space for the files below
            self.journal.clear_incomplete()
            state, code = "interrupted", EXIT_FAILURES
        elif self.stopping:
            state, code = "interrupted", EXIT_INTERRUPTED
        elif unrun:
            state, code = "incomplete", EXIT_UNRUN
        elif any(not _op_ok(r.status) for r in self.records.values()):  # the whole run dir
            state, code = "finished", EXIT_FAILURES
        else:
            state, code = "finished", EXIT_OK
        error = self.io_message if self.io_error is not None else None
        self.identity["finished_at"] = now_iso()
        self.identity["state"] = state
        if error:
            self.identity["error"] = error
        if self.identity.get("sessions"):
            self.identity["sessions"][-1].update({"finished_at": now_iso(), "state": state, **({"error": error} if error else {})})
        recorded = True
        try:
            self.journal.write_identity(self.identity)
            self._write_status()
        except OSError as exc:
            recorded = False
            if self.io_error is None:  # every op ran; only the last writes failed
                self.io_error, state, code = exc, "interrupted", EXIT_FAILURES
                error = write_error(exc, self.journal.root)
        parts = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        self.progress.close()
        msg = f"opscreen run: {state}: {parts or 'nothing to do'}; ops_status.csv in {self.journal.root}"
        if self.health.bad:
            msg += "; bad devices: " + ", ".join(f"{d} ({r})" for d, r in self.health.bad.items())
        if unrun and not self.stopping:
            msg += f"; {len(unrun)} op(s) not run: no healthy device left"
        if self.stopping or unrun:
            msg += f"; resume with: opscreen run --out {self.journal.root}"
        stream = getattr(self.progress, "stream", None) or sys.stdout
        try:
            stream.write(msg + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass
        if error:
            line = (
                f"opscreen run: {error}; stopped: the running ops were killed, {len(self.records)} complete op(s) kept"
                + ("" if recorded else ", run_identity.json not updated")
                + f"; {_fix_hint(self.io_error)}, then resume with: opscreen run --out {self.journal.root}"
            )
            try:
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
        return BatchSummary(len(set(c.ops) | set(self.records)), counts, unrun, dict(self.health.bad), self.stopping, code, dict(self.records))


def _fix_hint(exc: OSError | None) -> str:
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return "free space"
    if code == errno.EFBIG:
        return "raise the file size limit"
    if code == errno.EROFS:
        return "make the filesystem writable"
    return "fix the filesystem"


def _safe(name: str) -> str:
    from .journal import op_dirname

    return op_dirname(name)


def _describe(target) -> str | None:
    if target is None:
        return None
    d = getattr(target, "describe", None)
    return d() if callable(d) else str(target)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


__all__ = ["BatchRunner", "BatchSummary", "fmt_secs"]

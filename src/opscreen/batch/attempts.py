"""The attempt, retry and dtype-fallback decisions: a pure state machine.

An op is run as a sequence of *steps*; each step is one request (one dtype
selection) that may take several *attempts* (fresh child processes):

* level 0: the dtypes the run asked for (``--dtypes``; the op's own list when
  none were given);
* level 1: the op's own dtype list (``--dtypes`` dropped), only when level 0
  failed because of a dtype and asked for specific dtypes;
* level 2: one step per candidate dtype, each alone; the passing ones are kept.

Within a step, :class:`RetryPolicy` decides whether a failed attempt is retried:
timeouts and device-fatal exits are possibly transient and retried while
attempts are left; a failure (or crash) whose signature equals the previous
attempt's is deterministic and ends the step; a dtype failure ends the step at
once and moves the op down the ladder.

:class:`AttemptMachine` ties these together: given an op's :class:`OpState` and
the :class:`Attempt` that just ended, :meth:`AttemptMachine.after` updates the
state and returns the next :class:`Action`: run again on this device, on another
device, finish with a status and an error, or leave the op incomplete because the
run is stopping. No processes, no files, no scheduler: the batch session carries
the actions out (tests/test_attempts.py drives it alone).

:class:`DeviceHealth` watches device-fatal exits per device: ``threshold``
fatal exits in a row, from distinct ops, mark a device bad (one op that kills
every device it touches does not condemn a device on its own).
"""

from __future__ import annotations

from ..settings import default

import time
from dataclasses import asdict, dataclass, field
from typing import Any

TRANSIENT = frozenset({"timeout", "device_fatal"})
FINAL_OK = frozenset({"passed", "skipped"})
#: An op's final status when ``--dtypes`` asked for dtypes and the op passed only with its
#: own (level 1, or level 2 with none of the requested ones kept): passed, but not what
#: was asked; a success for the run's exit status, never shown as plain ``passed``.
PASSED_OWN_DTYPES = "passed_own_dtypes"
OP_OK = FINAL_OK | {PASSED_OWN_DTYPES}  # final op statuses that count as measured

RUN_HERE, RUN_ELSEWHERE, FINISH, LEAVE = "run_here", "run_elsewhere", "finish", "leave"


@dataclass
class Attempt:
    """One child process of an op, as the journal records it."""

    n: int  # 1-based, over the whole op
    level: int
    dtypes: list[str] | None
    device: int
    status: str
    exit_code: int | None
    child_returncode: int | None
    duration_s: float
    error: str | None
    signature: str | None
    dtype_error: bool = False
    log: str | None = None  # where this attempt's run.log was kept (relative to the op dir)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    retry: bool
    reason: str
    other_device: bool = False  # prefer another device for the retry


class RetryPolicy:
    """``retries``: extra attempts per step (default 2, so at most 3 children)."""

    def __init__(self, retries: int = default("retries")):
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.retries = retries

    def decide(self, attempts: list[Attempt]) -> Decision:
        """Given the attempts of one step (last one just finished), retry or not."""
        last = attempts[-1]
        if last.status in FINAL_OK:
            return Decision(False, last.status)
        if last.status == "interrupted":
            return Decision(False, "interrupted")
        if last.dtype_error:
            return Decision(False, "dtype failure")
        if len(attempts) > self.retries:
            return Decision(False, f"no retries left ({self.retries})")
        if last.status in TRANSIENT:
            return Decision(True, f"{last.status} may be transient", other_device=last.status == "device_fatal")
        prev = [a for a in attempts[:-1] if a.status not in TRANSIENT]
        if prev and last.signature is not None and prev[-1].signature == last.signature and prev[-1].status == last.status:
            return Decision(False, "deterministic: same failure twice")
        return Decision(True, "retry in a fresh process")


def level2_candidates(requested: list[str] | None, op_dtypes: list[str]) -> list[str]:
    """Dtypes to try one by one: the requested ones first, then the op's own."""
    out: list[str] = []
    for d in list(requested or []) + list(op_dtypes):
        if d not in out:
            out.append(d)
    return out


@dataclass
class DeviceHealth:
    """Marks a device bad after ``threshold`` device-fatal exits in a row from
    distinct ops. Any other outcome on the device resets its streak."""

    threshold: int = default("fatal_threshold")
    streaks: dict[int, list[str]] = field(default_factory=dict)
    bad: dict[int, str] = field(default_factory=dict)  # device -> reason

    def record(self, device: int, op: str, status: str, error: str | None = None) -> bool:
        """Record an attempt's outcome; True when this made the device bad."""
        if device in self.bad:
            return False
        if status != "device_fatal":
            if status != "interrupted":
                self.streaks[device] = []
            return False
        streak = self.streaks.setdefault(device, [])
        if op not in streak:
            streak.append(op)
        if self.threshold > 0 and len(streak) >= self.threshold:
            self.bad[device] = f"{len(streak)} device-fatal exits in a row ({', '.join(streak)})" + (
                f"; last: {error}" if error else ""
            )
            return True
        return False

    def is_bad(self, device: int) -> bool:
        return device in self.bad


@dataclass
class OpState:
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

    def request_dtypes(self) -> list[str] | None:
        """The dtypes the next attempt asks for."""
        return [self.l2_current] if self.level == 2 else self.step_dtypes  # type: ignore[list-item]


@dataclass(frozen=True)
class Action:
    """What to do with an op after an attempt: ``kind`` is RUN_HERE (this device
    again), RUN_ELSEWHERE (another device: a device-fatal exit, or this device is
    bad), FINISH (record ``status``/``error``) or LEAVE (the run is stopping: the
    op stays incomplete, a resume runs it)."""

    kind: str
    status: str | None = None
    error: str | None = None


def left_incomplete(status: str, io_failed: bool) -> bool:
    """An attempt the run itself ended (stopped, or the run dir cannot be written):
    it is not recorded, and the op stays incomplete."""
    return status == "interrupted" or (io_failed and status not in FINAL_OK)


class AttemptMachine:
    """The decisions for every op of a run: ``retries`` per step, the run's
    requested ``dtypes`` (level 0) and each op's own dtypes (level 2)."""

    def __init__(self, retries: int = default("retries"), dtypes: list[str] | None = None, op_dtypes: dict[str, list[str]] | None = None):
        self.policy = RetryPolicy(retries)
        self.dtypes = dtypes
        self.op_dtypes = op_dtypes or {}

    def start(self, op: str, home: int | None = None) -> OpState:
        return OpState(op, home=home, step_dtypes=self.dtypes)

    def after(self, state: OpState, att: Attempt, *, stopping: bool = False, device_bad: bool = False) -> Action:
        """Record ``att`` (the attempt that just ended) and decide what comes next."""
        state.attempts.append(att)
        state.step.append(att)
        if att.status in FINAL_OK:
            if state.level == 2:
                state.l2_passed.append(state.l2_current)  # type: ignore[arg-type]
                state.l2_outcomes[state.l2_current] = att.status  # type: ignore[index]
                return self._next_dtype(state, stopping, device_bad)
            return self._finish(state, att.status)
        if att.dtype_error:
            return self._next_level(state, att, stopping, device_bad)
        dec = self.policy.decide(state.step)
        if dec.retry and not stopping:
            return Action(RUN_ELSEWHERE if dec.other_device or device_bad else RUN_HERE)
        state.stop_reason = "interrupted" if stopping and dec.retry else dec.reason
        if stopping and dec.retry:
            return Action(LEAVE)  # a retry was due but the run is stopping
        if state.level == 2:
            state.l2_failed[state.l2_current] = att.error or att.status  # type: ignore[index]
            state.l2_outcomes[state.l2_current] = att.status  # type: ignore[index]
            return self._next_dtype(state, stopping, device_bad)
        return self._finish(state, att.status)

    # -- the dtype ladder --------------------------------------------------------
    def _next_level(self, state: OpState, att: Attempt, stopping: bool, device_bad: bool) -> Action:
        if state.level == 2:
            state.l2_failed[state.l2_current] = att.error or "dtype not supported"  # type: ignore[index]
            state.l2_outcomes[state.l2_current] = att.status  # type: ignore[index]
            return self._next_dtype(state, stopping, device_bad)
        if state.level == 0 and self.dtypes:
            state.level, state.step_dtypes, state.step = 1, None, []
            return self._go_on(stopping, device_bad)
        cands = level2_candidates(self.dtypes, self.op_dtypes.get(state.op, []))
        if not cands:
            state.stop_reason = "dtype failure and no dtype list known for the op"
            return self._finish(state, att.status)
        state.level, state.step, state.l2_queue = 2, [], list(cands)
        return self._next_dtype(state, stopping, device_bad)

    def _next_dtype(self, state: OpState, stopping: bool, device_bad: bool) -> Action:
        if state.l2_queue:
            state.l2_current = state.l2_queue.pop(0)
            state.step = []
            return self._go_on(stopping, device_bad)
        state.l2_current = None
        status = "passed" if state.l2_passed else (state.attempts[-1].status if state.attempts else "failed")
        return self._finish(state, status)

    @staticmethod
    def _go_on(stopping: bool, device_bad: bool) -> Action:
        """The next step of the same op: on this device unless it is bad."""
        if stopping:
            return Action(LEAVE)
        return Action(RUN_ELSEWHERE if device_bad else RUN_HERE)

    # -- the end -------------------------------------------------------------------
    def _finish(self, state: OpState, status: str) -> Action:
        if state.level == 2:
            status = "passed" if state.l2_passed else status
        error = final_error(state, status)
        if status == "passed" and self.dtypes and (state.level == 1 or (
                state.level == 2 and not any(d in self.dtypes for d in state.l2_passed))):
            status = PASSED_OWN_DTYPES  # the op's own dtypes ran, not the requested ones
        return Action(FINISH, status, error)


def final_error(state: OpState, status: str) -> str | None:
    """The op's error as result.json records it (also for a kept dtype fallback)."""
    last = state.attempts[-1] if state.attempts else None
    if status not in FINAL_OK:
        return last.error if last else None
    if state.level == 2 and state.l2_failed:
        return "dtype fallback kept " + ",".join(state.l2_passed) + "; failed " + "; ".join(
            f"{d}: {e}" for d, e in state.l2_failed.items()
        )
    if state.level == 1:
        first = (state.attempts[0].error or "") if state.attempts else ""
        return "dtype fallback: ran the op's own dtypes (requested dtypes failed: " + first + ")"
    return None

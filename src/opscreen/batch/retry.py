"""Retry decisions, the dtype fallback ladder and device health.

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

:class:`DeviceHealth` watches device-fatal exits per device: ``threshold``
fatal exits in a row, from distinct ops, mark a device bad (one op that kills
every device it touches does not condemn a device on its own).
"""

from __future__ import annotations

from ..settings import canonical_dtype, default

from dataclasses import asdict, dataclass, field

TRANSIENT = frozenset({"timeout", "device_fatal"})
FINAL_OK = frozenset({"passed", "skipped"})

# consts names in FlagGems' benchmark/consts.py -> dtype names.
DTYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "FLOAT_DTYPES": ("float16", "float32", "bfloat16"),
    "INT_DTYPES": ("int16", "int32"),
    "BOOL_DTYPES": ("bool",),
    "COMPLEX_DTYPES": ("complex64",),
}


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


def dtypes_from_expr(expr: str | None) -> list[str]:
    """Dtype names a test's ``dtypes=`` expression mentions.

    Understands the FlagGems constant groups (``consts.FLOAT_DTYPES`` ...),
    ``torch.float16`` style names and bare names, in the order they appear.
    """
    if not expr:
        return []
    import re

    out: list[str] = []
    for tok in re.findall(r"[A-Za-z_][\w.]*", expr):
        last = tok.rsplit(".", 1)[-1]
        names: tuple[str, ...] = ()
        if last in DTYPE_GROUPS:
            names = DTYPE_GROUPS[last]
        elif re.fullmatch(r"(?:float|int|uint|bfloat|complex)\d+|bool|half|double", last):
            names = (canonical_dtype(last) or last,)
        for n in names:
            if n not in out:
                out.append(n)
    return out


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

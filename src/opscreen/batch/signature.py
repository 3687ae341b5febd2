"""Failure signatures: what an attempt died of, with the incidental parts masked.

Two attempts that fail with the same signature failed deterministically, so the
batch runner stops retrying. A signature is the exception type and message of the
pytest failure (the last ``E   SomeError: message`` line, else the ``FAILED`` summary
line, else an ``OPSCREEN-FATAL`` line, a fatal Python error or the last traceback
line), with addresses, hex ids, numbers and temporary paths masked, so that
``illegal address at 0x7f3a...`` and ``... at 0x7f4b...`` compare equal.

The same module classifies dtype failures: FlagGems refuses an unsupported
``--dtypes`` value with ``ValueError: Given dtype(s) 'torch.float64'can't be
supported by this op 'abs'`` (sic), torch with ``"abs_kernel" not implemented for
'Half'``. Such a failure triggers the dtype fallback instead of a retry.

Pure functions over text; no processes, no files except :func:`read_log_tail`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# ``E   ValueError: message`` (pytest's failure lines), also ``E   module.Error: msg``.
_E_LINE = re.compile(r"^E\s+(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Failed))(?::\s*(?P<msg>.*))?$")
# Any ``E   <text>`` line (assert rewriting, continuation lines).
_E_ANY = re.compile(r"^E\s+(?P<text>\S.*)$")
# ``FAILED benchmark/test_abs.py::test_abs - ValueError: message`` (short summary).
_FAILED = re.compile(r"^(?:FAILED|ERROR)\s+(?P<node>\S+)(?:\s+-\s+(?P<rest>.*))?$")
# Traceback's last line outside pytest: ``ValueError: message``.
_TB_LAST = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?::\s*(?P<msg>.*))?$")
_FATAL = re.compile(r"OPSCREEN-FATAL:\s*(?P<rest>.*)$")
_PY_FATAL = re.compile(r"^Fatal Python error:\s*(?P<rest>.*)$")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# Masks, applied in order.
_MASKS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<hex>"),
    (re.compile(r"(?:/tmp|/var/tmp|/dev/shm)/\S+"), "<tmp>"),
    (re.compile(r"\bpid[= ]\d+\b", re.IGNORECASE), "pid N"),
    (re.compile(r"(?<!\w)[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
)

MAX_SIGNATURE = 300

# Dtype failures (the op or the device does not support a dtype).
_DTYPE_PATTERNS: tuple[re.Pattern, ...] = (
    # FlagGems benchmark/conftest.py / base.py (note the missing space before "can't").
    re.compile(r"Given dtype\(s\)\s*(?P<dtypes>.*?)\s*can'?t be supported", re.IGNORECASE),
    # torch: "abs_kernel" not implemented for 'Half'
    re.compile(r"not implemented for '(?P<dtypes>[A-Za-z0-9_]+)'"),
    re.compile(r"\bunsupported (?:data ?type|dtype)s?\b", re.IGNORECASE),
    re.compile(r"\b(?:data ?type|dtype)s?\b[^.;]{0,80}\b(?:is|are) not supported\b", re.IGNORECASE),
    re.compile(r"\bnot supported (?:for|with) (?:data ?type|dtype)", re.IGNORECASE),
    re.compile(r"\bdoes not support (?:the )?(?:data ?type|dtype)", re.IGNORECASE),
)


@dataclass(frozen=True)
class Failure:
    """What an attempt's log says it died of.

    ``kind``: where the line came from (``E``, ``FAILED``, ``fatal``, ``python-fatal``,
    ``traceback`` or ``status``). ``error``: the line as printed (for ops_status.csv),
    ``signature``: the masked form used to compare attempts.
    """

    kind: str
    error: str
    signature: str
    dtype_error: bool = False


def mask(text: str) -> str:
    """Mask the parts of an error message that vary between identical failures."""
    out = text.strip()
    for rx, repl in _MASKS:
        out = rx.sub(repl, out)
    out = out.strip()
    if len(out) > MAX_SIGNATURE:
        out = out[:MAX_SIGNATURE] + "..."
    return out


def is_dtype_error(text: str | None) -> bool:
    """True when ``text`` says a dtype is not supported (by the op or the device)."""
    if not text:
        return False
    return any(rx.search(text) for rx in _DTYPE_PATTERNS)


def _strip(line: str) -> str:
    return _ANSI.sub("", line).rstrip("\r\n")


def extract(text: str, status: str | None = None, returncode: int | None = None) -> Failure | None:
    """The failure an attempt's run.log shows, or None when the log shows none
    and no status is given. ``status`` / ``returncode`` build a fallback signature
    (e.g. a timeout or a signal with nothing in the log)."""
    lines = [_strip(l) for l in text.splitlines()]
    e_typed: str | None = None
    e_type = e_msg = None
    failed_rest: str | None = None
    fatal: str | None = None
    py_fatal: str | None = None
    tb_type = tb_msg = None
    dtype_hit = False
    for line in lines:
        m = _E_LINE.match(line)
        if m:
            e_typed = line
            e_type, e_msg = m.group("type"), (m.group("msg") or "")
            if is_dtype_error(line):
                dtype_hit = True
            continue
        if _E_ANY.match(line):
            if is_dtype_error(line):
                dtype_hit = True
            continue
        m = _FAILED.match(line)
        if m:
            if m.group("rest"):
                failed_rest = m.group("rest").strip()
            if is_dtype_error(line):
                dtype_hit = True
            continue
        m = _FATAL.search(line)
        if m:
            fatal = m.group("rest").strip()
            continue
        m = _PY_FATAL.match(line)
        if m:
            py_fatal = m.group("rest").strip()
            continue
        m = _TB_LAST.match(line)
        if m:
            tb_type, tb_msg = m.group("type"), (m.group("msg") or "")
            if is_dtype_error(line):
                dtype_hit = True
    if fatal is not None:
        # A device-fatal line wins: it is the reason the child ended.
        return Failure("fatal", f"OPSCREEN-FATAL: {fatal}", "fatal: " + mask(fatal), dtype_error=False)
    if e_type is not None:
        return Failure("E", e_typed.lstrip("E").strip(), mask(f"{e_type}: {e_msg}"), dtype_hit)
    if failed_rest is not None:
        return Failure("FAILED", failed_rest, mask(failed_rest), dtype_hit)
    if py_fatal is not None:
        return Failure("python-fatal", f"Fatal Python error: {py_fatal}", "python-fatal: " + mask(py_fatal))
    if tb_type is not None:
        return Failure("traceback", f"{tb_type}: {tb_msg}".rstrip(": "), mask(f"{tb_type}: {tb_msg}"), dtype_hit)
    if status is None:
        return None
    rc = "" if returncode is None else f" (returncode {returncode})"
    return Failure("status", f"{status}{rc}", f"{status}{rc}")


def read_log_tail(path: os.PathLike | str, max_bytes: int = 256 * 1024) -> str:
    """The last ``max_bytes`` of a log (failures are at the end), '' when missing."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as fh:
            if size > max_bytes:
                fh.seek(size - max_bytes)
                fh.readline()  # drop the partial first line
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def from_log(path: os.PathLike | str, status: str | None = None, returncode: int | None = None) -> Failure | None:
    return extract(read_log_tail(path), status, returncode)

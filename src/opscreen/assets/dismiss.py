"""The dismiss list: ops a screening run deliberately does not measure, and why.

A dismissed op is reported with status ``dismissed`` instead of being run, so a
known, explained non-result never looks like a regression and never costs a
timeout. Every entry must say why (``reason``), should point at the proof
(``evidence``: a run log, an issue, a commit) and says when it was decided
(``date``, YYYY-MM-DD), so stale entries can be found and removed.

File format (``ops/dismiss.yaml``), a YAML list::

    - op: sparse_attention
      reason: needs the mthreads baseline operator; skips everywhere else
      evidence: runs/2026-08-21/ops/sparse_attention/run.log
      date: 2026-08-21

An empty file or ``[]`` dismisses nothing. :func:`load_dismiss` raises
:class:`~opscreen.errors.UsageError` with one line naming the first bad entry.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError, bad_yaml, read_input

__all__ = ["DismissEntry", "load_dismiss", "FIELDS"]

FIELDS = ("op", "reason", "evidence", "date")
_DATE_RX = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_OP_RX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class DismissEntry:
    """One dismissed op. ``date`` is ISO ``YYYY-MM-DD``; ``line`` is where it starts in the file."""

    op: str
    reason: str
    evidence: str | None
    date: str
    line: int | None = None

    def as_dict(self) -> dict:
        return {"op": self.op, "reason": self.reason, "evidence": self.evidence, "date": self.date}


def _loader():
    import yaml

    class LineLoader(yaml.SafeLoader):
        """SafeLoader that remembers the line of each mapping (as ``__line__``)."""

    def construct_mapping(loader, node, deep=False):
        mapping = yaml.SafeLoader.construct_mapping(loader, node, deep=deep)
        mapping["__line__"] = node.start_mark.line + 1
        return mapping

    LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    # Dates stay text: a bad one (2026-13-01) must be our one-line error, not a ValueError.
    LineLoader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: loader.construct_scalar(node))
    return LineLoader


def _date(value) -> str | None:
    if isinstance(value, _dt.datetime):
        return None
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, str) and _DATE_RX.match(value.strip()):
        try:
            return _dt.date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            return None
    return None


def load_dismiss(path: Path, known_ops: set[str] | None = None) -> dict[str, DismissEntry]:
    """Read a dismiss file: ``op -> DismissEntry`` in file order.

    Raises :class:`UsageError` (one line, naming the file, line and entry) for an
    entry lacking an op or a non-empty reason, a bad or missing date, an evidence
    that is not text, an unknown field, an op not in ``known_ops`` (when given), or
    an op listed twice.
    """
    import yaml

    path = Path(path)
    text = read_input(path, "dismiss file")
    try:
        data = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: constructors of other scalar types
        raise bad_yaml("dismiss file", path, exc) from None
    if data is None:
        return {}
    if not isinstance(data, list):
        raise UsageError(f"{path}: a dismiss file is a YAML list of {{op, reason, evidence, date}} entries")
    out: dict[str, DismissEntry] = {}
    for i, raw in enumerate(data, 1):
        if not isinstance(raw, dict):
            raise UsageError(f"{path}: entry {i}: not a mapping with op, reason, evidence, date")
        line = raw.pop("__line__", None)
        op = raw.get("op")
        where = f"{path}:{line}" if line else str(path)
        name = f"entry {i}" + (f" (op {op!r})" if isinstance(op, str) and op else "")
        extra = sorted(str(k) for k in raw if k not in FIELDS)
        if extra:
            raise UsageError(f"{where}: {name}: unknown field(s) {', '.join(extra)} (fields: {', '.join(FIELDS)})")
        if not isinstance(op, str) or not op.strip():
            raise UsageError(f"{where}: {name}: 'op' is missing or empty")
        op = op.strip()
        if not _OP_RX.match(op):
            raise UsageError(f"{where}: {name}: {op!r} is not an op (marker) name")
        reason = raw.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError(f"{where}: {name}: 'reason' is missing or empty (say why the op is not measured)")
        evidence = raw.get("evidence")
        if evidence is not None and not isinstance(evidence, str):
            raise UsageError(f"{where}: {name}: 'evidence' must be text (a path, an issue, a commit)")
        if "date" not in raw:
            raise UsageError(f"{where}: {name}: 'date' is missing (YYYY-MM-DD)")
        date = _date(raw.get("date"))
        if date is None:
            raise UsageError(f"{where}: {name}: bad date {raw.get('date')!r} (YYYY-MM-DD)")
        if known_ops is not None and op not in known_ops:
            raise UsageError(f"{where}: {name}: unknown op (no test of the suite carries marker {op!r})")
        if op in out:
            first = out[op].line
            raise UsageError(f"{where}: {name}: duplicate: {op!r} is already dismissed" + (f" at line {first}" if first else ""))
        out[op] = DismissEntry(op, " ".join(reason.split()), evidence.strip() if isinstance(evidence, str) else None, date, line)
    return out

"""``opscreen store add``: a finished screen's summary rows into the store, once.

A run is read as ``opscreen summary`` reads it (its ``summary.json`` when it is there
and not older than the run, else built from the logs in memory: nothing is written into
the run directory), at the summary version this opscreen reads: each row goes in with its
``throttled`` cell (summary 4 on; a summary of an older version reads None there, so the
store keeps NULL: not known). Every run given is read and checked before anything is written, so
a bad one among several leaves the store as it was. Each run then goes in with its
rows in one transaction: a run is in the store whole or not at all.

A run is known by its *run key*, a digest of what tells one screen from another (when
and where it started, its caliber, its suite commit, its shard): importing it again,
from the same folder, a copy, or a concurrent ``store add`` on another machine, adds
nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as _pg
from sqlalchemy.dialects import sqlite as _sqlite

from ..errors import UsageError
from ..fsio import utcnow
from ..results.compare import MUST_MATCH
from ..results.summary import COL, UNFINISHED, Summary, load_or_build
from .db import ROW_COLUMNS, Store, calibers, rows, runs

__all__ = ["Added", "read_runs", "add_runs", "caliber_key", "run_key", "CALIBER_FIELDS", "UNFINISHED"]

#: what a series of history keeps fixed: compare's must-match fields, and the device and backend
CALIBER_FIELDS = (*MUST_MATCH, "device_name", "backend")
_CHUNK = 2000  # rows per INSERT batch


@dataclass
class Added:
    """What ``store add`` did with one run."""

    path: str
    name: str
    rows: int
    added: bool  # False: the run was in the store already
    run_id: int | None = None


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _norm(v):
    """A caliber value as compare's check reads it: "1"/"0" for flags, whole numbers as text."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, float)):
        return str(int(v)) if float(v).is_integer() else str(v)
    return v


def caliber_key(caliber: dict) -> tuple[str, dict]:
    """(digest, the fields kept) of a run's caliber: a series is one caliber's."""
    kept = {f: _norm(caliber.get(f)) for f in CALIBER_FIELDS}
    return hashlib.sha256(_canon(kept).encode()).hexdigest()[:32], kept


def run_key(s: Summary) -> str:
    """The digest that tells this screen from every other (its folder's name and place aside):
    when and where it started, on which devices, its caliber (the fields a series keeps, as
    compare reads them: the same whether the run is read from its logs or its summary.json),
    its suite commit, its shard or the shards merged into it."""
    ident = s.identity or {}
    batch = ident.get("batch") if isinstance(ident.get("batch"), dict) else {}
    suite = ident.get("suite") if isinstance(ident.get("suite"), dict) else {}
    merged = [(m.get("host"), m.get("shard")) for m in ident.get("merged_from") or [] if isinstance(m, dict)]
    fields = {"started_at": ident.get("started_at"), "host": ident.get("host"), "caliber": caliber_key(s.caliber)[0],
              "commit": s.caliber.get("suite_commit") or suite.get("commit"), "devices": batch.get("devices"),
              "shard": batch.get("shard"), "merged_from": merged}
    if not ident.get("started_at"):  # no start recorded: the rows themselves tell it
        fields["rows"] = hashlib.sha256(_canon(s.rows).encode()).hexdigest()
    return hashlib.sha256(_canon(fields).encode()).hexdigest()[:40]


def _check(s: Summary, given: str) -> None:
    """A finished screen of ``opscreen run`` with a caliber; a one-line UsageError otherwise."""
    if s.kind != "run":
        raise UsageError(f"{given} is an op directory: store add takes the run directories of opscreen run "
                         "(or their summary.json)")
    if not s.caliber:
        raise UsageError(f"{given} has no caliber (its run_identity.json is missing): it cannot join a series; "
                         "store the --out directory of opscreen run")
    state = (s.identity or {}).get("state")
    unfinished = [o.op for o in s.ops if o.status in UNFINISHED]
    if unfinished or state == "running":
        what = f"{len(unfinished)} ops not finished ({', '.join(unfinished[:3])}{', ...' if len(unfinished) > 3 else ''})" \
            if unfinished else "its run_identity.json says it is still running"
        raise UsageError(f"{given} is not a finished screen: {what}; finish it (opscreen run --resume) and add it "
                         "again")
    damaged = [o.op for o in s.ops if o.status == "damaged"]
    if damaged:
        raise UsageError(f"{given}: {len(damaged)} ops' records cannot be read ({', '.join(damaged[:3])}); "
                         f"see opscreen summary {given}")


def read_runs(paths: Iterable[str]) -> list[tuple[str, Summary]]:
    """Every run's summary, checked; the first bad one stops all (nothing is written yet)."""
    out = []
    for p in paths:
        if not Path(p).exists():
            raise UsageError(f"{p} does not exist: give the --out directory of opscreen run (or its summary.json)")
        s, _built = load_or_build(p)
        _check(s, str(p))
        out.append((str(p), s))
    return out


def _insert_ignore(conn, table: sa.Table, values: dict, key: str):
    """INSERT ... ON CONFLICT (key) DO NOTHING, in the connection's dialect."""
    ins = (_pg.insert if conn.dialect.name == "postgresql" else _sqlite.insert)(table)
    return conn.execute(ins.values(**values).on_conflict_do_nothing(index_elements=[key]).returning(table.c.id))


def _caliber_id(conn, caliber: dict) -> int:
    key, kept = caliber_key(caliber)
    got = _insert_ignore(conn, calibers, {"key": key, "caliber": _canon(kept)}, "key").scalar_one_or_none()
    if got is not None:
        return got
    return conn.execute(sa.select(calibers.c.id).where(calibers.c.key == key)).scalar_one()


def _row_values(run_id: int, r: list) -> dict:
    d = {c: r[COL[c]] for c in ROW_COLUMNS}
    d["variant"] = d["variant"] or ""
    d["truncated"] = bool(d["truncated"])
    for c in ("device", "test"):  # text columns a summary may hold as numbers
        if d[c] is not None and not isinstance(d[c], str):
            d[c] = str(d[c])
    # summary 4 on: the op's throttle verdict (reasons, or "no"); empty or None (an older
    # summary, no telemetry) is kept as NULL: not known
    d["throttled"] = str(d["throttled"]) if d["throttled"] not in (None, "") else None
    d["run_id"] = run_id
    return d


def _run_values(s: Summary, path: str, cal_id: int) -> dict:
    ident = s.identity or {}
    suite = ident.get("suite") if isinstance(ident.get("suite"), dict) else {}
    return {
        "run_key": run_key(s), "name": s.name, "started_at": ident.get("started_at"),
        "suite_commit": s.caliber.get("suite_commit") or suite.get("commit"),
        "suite_dirty": suite.get("dirty") if isinstance(suite.get("dirty"), bool) else None,
        "device_name": s.caliber.get("device_name"), "backend": s.caliber.get("backend"), "host": ident.get("host"),
        "caliber_id": cal_id, "identity": _canon(ident), "opscreen_version": ident.get("opscreen_version"),
        "source": str(Path(path).resolve()), "row_count": len(s.rows), "imported_at": utcnow(),
    }


def add_one(store: Store, path: str, s: Summary) -> Added:
    """One run and its rows in one transaction; nothing when its run key is in the store."""
    with store.write() as conn:
        cal_id = _caliber_id(conn, s.caliber)
        run_id = _insert_ignore(conn, runs, _run_values(s, path, cal_id), "run_key").scalar_one_or_none()
        if run_id is None:
            return Added(path=path, name=s.name, rows=len(s.rows), added=False)
        for i in range(0, len(s.rows), _CHUNK):
            conn.execute(sa.insert(rows), [_row_values(run_id, r) for r in s.rows[i:i + _CHUNK]])
    return Added(path=path, name=s.name, rows=len(s.rows), added=True, run_id=run_id)


def add_runs(store: Store, paths: Iterable[str]) -> list[Added]:
    """Read and check every run, then import each (see the module's docstring)."""
    return [add_one(store, p, s) for p, s in read_runs(paths)]

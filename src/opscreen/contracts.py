"""The files opscreen writes for others to read, each with its version: one place
that writes them and reads them back (docs/contracts.md lists them).

===================  =====================  =========  ==========================================
contract             file                   field      version (as written)
===================  =====================  =========  ==========================================
child_config         child_config.json      schema     "opscreen.child_config/2"
result               result.json            schema     "opscreen.result/2"
run_identity         run_identity.json      schema     "opscreen.identity/1" (kinds op, run)
summary              summary.json           schema     "opscreen.summary/5"
floors               floors.json            schema     "opscreen.floors/2" (opscreen calibrate)
peaks                peaks.json             schema     "opscreen.peaks/1" (opscreen devices --peaks)
===================  =====================  =========  ==========================================

The results store (:data:`STORE`, ``opscreen store``) is a database, not a file: its
version is the ``schema`` row of its ``meta`` table, in the same form
(``"opscreen.store/2"``); :mod:`opscreen.store.db` reads it with :func:`version_of` and
runs its migrations (SQL, so they live there, not here) in place.

One convention: the key ``schema`` holds ``"opscreen.<name>/<N>"``, the contract's name
and its version. Files written before it held a bare number (``"schema": 1`` in
child_config.json and result.json, ``"version": 2`` in summary.json, the contract's
``legacy_fields``); they are still read, as that version.

Reading a file checks its version:

- newer than this opscreen knows: :class:`NewerVersion`, one line ("... was written
  by a newer opscreen (schema N); upgrade opscreen"); the command line prints it
  and exits 2;
- older: migrated in memory, one ``update_to_N`` step after another (the file on
  disk is left as it is); the result holds the current tag under ``schema``;
- missing field: the contract's first version (every file written so far has it,
  but hand-made files and old test data may not);
- damaged (unreadable, not JSON, not an object, a version that is no version):
  :class:`Damaged`, or None from :func:`read` -- each caller keeps what it did
  with a damaged file before.

The JSON Schema (draft 2020-12) of each contract's current version ships beside it
(``opscreen/schemas/<name>.schema.json``; the tests validate real outputs
against them). This module imports only the standard library and :mod:`opscreen.fsio`
(itself standard library only): the child process imports it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from .fsio import atomic_write_json

__all__ = [
    "Contract", "ContractError", "NewerVersion", "Damaged",
    "CHILD_CONFIG", "RESULT", "RUN_IDENTITY", "SUMMARY", "FLOORS", "PEAKS", "CONTRACTS", "STORE",
    "version_of", "upgrade", "stamp", "load", "read", "write", "noise_pct",
]


class ContractError(Exception):
    """A contract file this opscreen cannot use (printed as one line)."""

    exit_code = 2


class NewerVersion(ContractError):
    """The file says a version newer than this opscreen knows."""


class Damaged(ContractError):
    """The file is missing, unreadable, not a JSON object, or its version is no version."""


@dataclass(frozen=True)
class Contract:
    name: str  # the contract, as docs/contracts.md names it
    filename: str
    field: str  # the key that holds the version
    version: int  # the version this opscreen writes
    prefix: str = ""  # "opscreen.identity/": the version is written as prefix + number
    label: str = "schema"  # how a message names the version
    migrations: dict[int, Callable[[dict], dict]] = field(default_factory=dict, compare=False)  # N -> update_to_N
    # keys that held the version before ``field`` did ("version": summary 1 and 2); read, never written
    legacy_fields: tuple[str, ...] = ()

    def tag(self, version: int | None = None) -> int | str:
        """The version as written in the file."""
        v = self.version if version is None else version
        return f"{self.prefix}{v}" if self.prefix else v

    def versions(self) -> list[int]:
        """Every version this opscreen reads (1 to :attr:`version`)."""
        return list(range(1, self.version + 1))

    def schema_file(self) -> str:
        """The JSON Schema of the current version, relative to ``opscreen/schemas/``."""
        return f"{self.name}.schema.json"


# -- migrations: update_to_N turns version N-1 into version N, in memory -------------


def summary_update_to_2(obj: dict) -> dict:
    """summary 1 -> 2: version 1's ``test`` column held the variant (it named no test);
    version 2 calls that ``variant`` and adds ``test`` (the test function), empty here."""
    cols = obj.get("columns")
    if isinstance(cols, list):
        cols = list(cols)
        rows = [list(r) for r in obj.get("rows") or []]
        if "variant" not in cols and "test" in cols:
            cols[cols.index("test")] = "variant"
        if "test" in cols:
            ti = cols.index("test")
            for r in rows:
                if ti < len(r):
                    r[ti] = ""
        else:
            cols.append("test")
            rows = [r + [""] for r in rows]
        obj = {**obj, "columns": cols, "rows": rows}
    return {**obj, "version": 2}


def retag_update_to_2(obj: dict) -> dict:
    """child_config and result 1 -> 2: only the version's form changed (``"schema": 1`` became
    ``"schema": "opscreen.<name>/2"``, the convention of every contract); the fields are the same."""
    return dict(obj)


#: summary 3 renamed these columns and gave them in percent (version 2: fractions)
_NOISE_RENAMED = {"torch_rsd": "torch_noise_pct", "lib_rsd": "lib_noise_pct"}
#: columns summary 3 added: the median's interval of each side, then the run the row is of
_ADDED_3 = ("torch_ci_ms", "lib_ci_ms", "run", "run_started_at", "suite_commit")
#: summary 3's columns, in order (opscreen.results.summary.COLUMNS while summary is at 3; a
#: migration to 3 gives these, whatever a later version's are)
SUMMARY_3_COLUMNS = (
    "op", "test", "variant", "dtype", "shape", "status",
    "torch_ms", "lib_ms", "speedup", "tflops", "torch_gbps", "lib_gbps",
    "torch_timer", "lib_timer", "torch_samples", "lib_samples", "torch_noise_pct", "lib_noise_pct",
    "torch_ci_ms", "lib_ci_ms",
    "op_status", "backend", "device", "device_name", "truncated", "source",
    "repeats", "torch_spread", "lib_spread", "speedup_spread",
    "torch_host_ms", "lib_host_ms", "torch_fallback", "lib_fallback",
    "run", "run_started_at", "suite_commit",
)  # fmt: skip


def summary_update_to_3(obj: dict) -> dict:
    """summary 2 -> 3: the version moves from ``"version": 2`` to ``"schema":
    "opscreen.summary/3"`` (``kind`` goes: the tag names the contract); the noise columns
    ``torch_rsd``/``lib_rsd`` (fractions) become ``torch_noise_pct``/``lib_noise_pct``
    (percent); the median's interval (``torch_ci_ms``, ``lib_ci_ms``) was not kept, so it
    is empty; every row gets its run (``run``: the summary's name, ``run_started_at``:
    its identity's ``started_at``, ``suite_commit``: its caliber's)."""
    obj = {k: v for k, v in obj.items() if k not in ("version", "kind")}
    cols = obj.get("columns")
    if isinstance(cols, list):
        cols = [_NOISE_RENAMED.get(c, c) for c in cols]
        rows = [list(r) for r in obj.get("rows") or []]
        for c in _NOISE_RENAMED.values():
            if c in cols:
                i = cols.index(c)
                for r in rows:
                    if i < len(r) and isinstance(r[i], (int, float)) and not isinstance(r[i], bool):
                        r[i] = noise_pct(r[i])
        ident = obj.get("identity") if isinstance(obj.get("identity"), dict) else {}
        cal = obj.get("caliber") if isinstance(obj.get("caliber"), dict) else ident.get("caliber") or {}
        fill = {"run": obj.get("name"), "run_started_at": ident.get("started_at"),
                "suite_commit": cal.get("suite_commit") if isinstance(cal, dict) else None}
        for c in _ADDED_3:
            if c not in cols:
                cols.append(c)
                rows = [r + [fill.get(c)] for r in rows]
        if set(SUMMARY_3_COLUMNS) <= set(cols):  # in version 3's order (a column it lacks: left as it is)
            order = [cols.index(c) for c in SUMMARY_3_COLUMNS]
            cols, rows = list(SUMMARY_3_COLUMNS), [[r[i] if i < len(r) else None for i in order] for r in rows]
        obj = {**obj, "columns": cols, "rows": rows}
    return {"schema": "opscreen.summary/3", **obj}


#: summary 4's columns: version 3's and ``throttled``, whether the op's device throttled while it
#: measured (opscreen.results.throttle; empty where the op has no telemetry)
SUMMARY_4_COLUMNS = SUMMARY_3_COLUMNS + ("throttled",)
#: what version 4 added to each op of ``ops``: its telemetry and its device's state (None: not recorded)
_OP_FIELDS_4 = ("telemetry", "device_state", "throttled")


def summary_update_to_4(obj: dict) -> dict:
    """summary 3 -> 4: every row gets ``throttled`` and every op ``telemetry``, ``device_state``
    and ``throttled``, all empty (None): version 3 did not record the device's telemetry."""
    cols = obj.get("columns")
    if isinstance(cols, list) and "throttled" not in cols:
        obj = {**obj, "columns": [*cols, "throttled"], "rows": [[*r, None] for r in obj.get("rows") or []]}
    ops = obj.get("ops")
    if isinstance(ops, list):
        obj = {**obj, "ops": [{**{k: None for k in _OP_FIELDS_4}, **o} if isinstance(o, dict) else o for o in ops]}
    return dict(obj)


#: summary 5's columns: version 4's and the row's distance from the device's peak: which peak
#: (``bandwidth`` for a GB/s row, ``flops <dtype>`` for a TFLOPS row), then each side's percent
#: of the achievable (measured) peak and of the spec peak (docs/peaks.md; empty where the row has
#: no GB/s or TFLOPS, or no peak is known)
PEAK_COLUMNS = ("peak_basis", "torch_pct_peak", "lib_pct_peak", "torch_pct_spec", "lib_pct_spec")
SUMMARY_5_COLUMNS = SUMMARY_4_COLUMNS + PEAK_COLUMNS


def summary_update_to_5(obj: dict) -> dict:
    """summary 4 -> 5: every row gets the %-of-peak columns and the summary ``peaks``, all empty
    (None): version 4 held no peak (a newer ``opscreen summary RUN_DIR`` fills them in)."""
    cols = obj.get("columns")
    if isinstance(cols, list) and "peak_basis" not in cols:
        pad = [None] * len(PEAK_COLUMNS)
        obj = {**obj, "columns": [*cols, *PEAK_COLUMNS], "rows": [[*r, *pad] for r in obj.get("rows") or []]}
    return {**obj, "peaks": obj.get("peaks")}


def floors_update_to_2(obj: dict) -> dict:
    """floors 1 -> 2: version 2 adds the ``worker`` history (two warm-worker screens), which
    version 1 pooled into ``rerun``. A version 1 table keeps its cells as they are: its ``rerun``
    cells judge fresh reruns as before, and compare judges worker reruns by its ``cross`` cells
    (it has no ``worker`` ones) and says so."""
    return dict(obj)


def noise_pct(fraction: float | None) -> float | None:
    """A relative standard deviation (a fraction, as the timers record it) as the noise
    every file for analysts gives: percent, rounded to 1e-6 (what the fraction's float
    holds beyond that is the conversion's own error)."""
    return None if fraction is None else round(100.0 * fraction, 6)


CHILD_CONFIG = Contract("child_config", "child_config.json", "schema", 2, prefix="opscreen.child_config/",
                        migrations={2: retag_update_to_2})
RESULT = Contract("result", "result.json", "schema", 2, prefix="opscreen.result/",
                  migrations={2: retag_update_to_2})
RUN_IDENTITY = Contract("run_identity", "run_identity.json", "schema", 1, prefix="opscreen.identity/")
SUMMARY = Contract("summary", "summary.json", "schema", 5, prefix="opscreen.summary/",
                   migrations={2: summary_update_to_2, 3: summary_update_to_3, 4: summary_update_to_4,
                               5: summary_update_to_5},
                   legacy_fields=("version",))
FLOORS = Contract("floors", "floors.json", "schema", 2, prefix="opscreen.floors/",
                  migrations={2: floors_update_to_2})
#: a device's spec and measured peaks (opscreen devices --peaks; opscreen.backends.peaks)
PEAKS = Contract("peaks", "peaks.json", "schema", 1, prefix="opscreen.peaks/")
CONTRACTS = (CHILD_CONFIG, RESULT, RUN_IDENTITY, SUMMARY, FLOORS, PEAKS)
#: the results store's database (the ``schema`` row of its ``meta`` table; not a file, so not
#: in :data:`CONTRACTS`); its migrations are SQL: opscreen.store.db.MIGRATIONS
STORE = Contract("store", "meta table of the store database", "schema", 2, prefix="opscreen.store/",
                 label="store schema")


def _field_of(contract: Contract, obj: dict) -> str | None:
    """The key of ``obj`` that holds its version: the contract's field, else a legacy one."""
    for f in (contract.field, *contract.legacy_fields):
        if f in obj:
            return f
    return None


def version_of(contract: Contract, obj: dict) -> int | None:
    """The version ``obj`` says (the first version when it says none); None when the
    field holds something that is no version of this contract. A bare number is the
    form before the ``"opscreen.<name>/<N>"`` tags (``"schema": 1``, ``"version": 2``)."""
    f = _field_of(contract, obj)
    if f is None:
        return 1
    raw = obj[f]
    if contract.prefix and isinstance(raw, str):
        if not raw.startswith(contract.prefix):
            return None
        raw = raw[len(contract.prefix):]
        if not raw.isdigit():
            return None
        raw = int(raw)
    if type(raw) is not int or raw < 1:
        return None
    return raw


def upgrade(contract: Contract, obj: Any, where: Any = None) -> dict:
    """``obj`` (parsed from ``where``) at this opscreen's version: checked, and migrated
    when older. Raises :class:`NewerVersion` or :class:`Damaged`."""
    where = where if where is not None else contract.filename
    if not isinstance(obj, dict):
        raise Damaged(f"{where} is not a JSON object")
    v = version_of(contract, obj)
    if v is None:
        raise Damaged(f"{where} has {contract.label} {obj.get(_field_of(contract, obj) or contract.field)!r}, "
                      f"this opscreen reads {contract.label} 1 to {contract.version}")
    if v > contract.version:
        raise NewerVersion(f"{where} was written by a newer opscreen ({contract.label} {v}, this one reads up to "
                           f"{contract.version}); upgrade opscreen")
    while v < contract.version:
        v += 1
        step = contract.migrations.get(v)
        obj = step(obj) if step is not None else dict(obj)
        obj[contract.field] = contract.tag(v)
    f = _field_of(contract, obj)
    if f is not None and (f != contract.field or obj[f] != contract.tag()):
        obj = stamp(contract, obj)  # the current version in the current form (a bare number read as it)
    return obj


def stamp(contract: Contract, obj: dict) -> dict:
    """``obj`` with the current version first (replacing any it had, in any form)."""
    drop = (contract.field, *contract.legacy_fields)
    return {contract.field: contract.tag(), **{k: v for k, v in obj.items() if k not in drop}}


def load(contract: Contract, path: os.PathLike | str) -> dict:
    """The file's object at the current version; :class:`Damaged` when it is missing
    or cannot be read, :class:`NewerVersion` when it is newer."""
    try:
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except OSError as exc:
        raise Damaged(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise Damaged(f"{path} is not valid JSON ({exc})") from None
    return upgrade(contract, obj, path)


def read(contract: Contract, path: os.PathLike | str) -> dict | None:
    """Like :func:`load`, but None for a missing or damaged file (a newer version
    still raises :class:`NewerVersion`)."""
    try:
        return load(contract, path)
    except NewerVersion:
        raise
    except Damaged:
        return None


def write(contract: Contract, path: os.PathLike | str, obj: dict, *, fsync: bool = True) -> dict:
    """Write ``obj`` stamped with the current version (atomically, see
    :mod:`opscreen.fsio`); returns what was written."""
    out = stamp(contract, obj)
    atomic_write_json(path, out, fsync=fsync)
    return out

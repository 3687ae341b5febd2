"""The files opscreen writes for others to read, each with its version: one place
that writes them and reads them back (docs/contracts.md lists them).

===================  =====================  =========  =====================================
contract             file                   field      version (as written)
===================  =====================  =========  =====================================
child_config         child_config.json      schema     1
result               result.json            schema     1
run_identity         run_identity.json      schema     "opscreen.identity/1" (kinds op, run)
summary              summary.json           version    2
floors               floors.json            schema     "opscreen.floors/1" (opscreen calibrate)
===================  =====================  =========  =====================================

Reading a file checks its version:

- newer than this opscreen knows: :class:`NewerVersion`, one line ("... was written
  by a newer opscreen (schema N); upgrade opscreen"); the command line prints it
  and exits 2;
- older: migrated in memory, one ``update_to_N`` step after another (the file on
  disk is left as it is);
- missing field: the contract's first version (every file written so far has it,
  but hand-made files and old test data may not);
- damaged (unreadable, not JSON, not an object, a version that is no version):
  :class:`Damaged`, or None from :func:`read` -- each caller keeps what it did
  with a damaged file before.

This module imports only the standard library and :mod:`opscreen.fsio` (itself
standard library only): the child process imports it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from .fsio import atomic_write_json

__all__ = [
    "Contract", "ContractError", "NewerVersion", "Damaged",
    "CHILD_CONFIG", "RESULT", "RUN_IDENTITY", "SUMMARY", "FLOORS", "CONTRACTS",
    "version_of", "upgrade", "stamp", "load", "read", "write",
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

    def tag(self, version: int | None = None) -> int | str:
        """The version as written in the file."""
        v = self.version if version is None else version
        return f"{self.prefix}{v}" if self.prefix else v

    def versions(self) -> list[int]:
        """Every version this opscreen reads (1 to :attr:`version`)."""
        return list(range(1, self.version + 1))


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


CHILD_CONFIG = Contract("child_config", "child_config.json", "schema", 1)
RESULT = Contract("result", "result.json", "schema", 1)
RUN_IDENTITY = Contract("run_identity", "run_identity.json", "schema", 1, prefix="opscreen.identity/")
SUMMARY = Contract("summary", "summary.json", "version", 2, label="summary version",
                   migrations={2: summary_update_to_2})
FLOORS = Contract("floors", "floors.json", "schema", 1, prefix="opscreen.floors/")
CONTRACTS = (CHILD_CONFIG, RESULT, RUN_IDENTITY, SUMMARY, FLOORS)


def version_of(contract: Contract, obj: dict) -> int | None:
    """The version ``obj`` says (the first version when it says none); None when the
    field holds something that is no version of this contract."""
    if contract.field not in obj:
        return 1
    raw = obj[contract.field]
    if contract.prefix:
        if not isinstance(raw, str) or not raw.startswith(contract.prefix):
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
        raise Damaged(f"{where} has {contract.label} {obj.get(contract.field)!r}, "
                      f"this opscreen reads {contract.label} 1 to {contract.version}")
    if v > contract.version:
        raise NewerVersion(f"{where} was written by a newer opscreen ({contract.label} {v}, this one reads up to "
                           f"{contract.version}); upgrade opscreen")
    while v < contract.version:
        v += 1
        step = contract.migrations.get(v)
        obj = step(obj) if step is not None else dict(obj)
        obj[contract.field] = contract.tag(v)
    return obj


def stamp(contract: Contract, obj: dict) -> dict:
    """``obj`` with the current version first (replacing any it had)."""
    return {contract.field: contract.tag(), **{k: v for k, v in obj.items() if k != contract.field}}


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

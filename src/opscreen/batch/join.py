"""Joining run dirs into one (``opscreen merge A B ... --out M``): the shards of one
screen (``opscreen run --shard I/N`` on several machines, a Slurm job array) become
one run dir that ``summary``, ``compare`` and ``report`` read like any other, and
that ``opscreen run --out M`` resumes like any other (it runs the ops no shard
completed).

Checks, before anything is written (each a one-line usage error):

- every input is a batch run dir that no live runner holds (its ``.lock``);
- the inputs were measured one way: the caliber settings they recorded
  (:func:`opscreen.settings.recorded_clashes`) and their identities' ``caliber``
  blocks (timer, tuning modes, shape mode, level, dtypes, backend, vendor, suite
  commit, timing knobs and method, repeats, and the device name where both know it)
  are equal;
- no op belongs to two inputs (listed in their settings, complete or dismissed);
- ``--out`` does not exist yet.

Then the complete op dirs are copied into a temporary directory beside ``--out``
(ops without a ``.complete`` marker are left out: a resume of the merged dir runs
them), ``ops_status.csv`` and ``run_identity.json`` are written there, and the
directory is renamed to ``--out`` last: a merge that fails leaves nothing.

The merged ``run_identity.json`` is the first input's, with the ops, dismissed ops
and sessions of all of them, no shard, ``merged_from`` (each input's path, shard,
host, state, complete ops and bad devices) and state ``finished`` when every input
finished and every op is complete, else ``incomplete``.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .. import contracts
from .. import settings as S
from ..errors import UsageError, check_path, check_writable_dir
from ..fsio import fsync_dir, utcnow
from .journal import IDENTITY, Journal, OpRecord, status_records

#: caliber block fields that may be unknown in one input (no op of it reported one)
UNKNOWN_OK = ("device_name",)


@dataclass
class Part:
    """One input run dir."""

    root: Path
    identity: dict
    done: dict[str, OpRecord] = field(default_factory=dict)  # complete ops

    @property
    def settings(self) -> dict:
        return self.identity.get("settings") or {}

    @property
    def ops(self) -> set[str]:
        """Every op this run dir holds: listed in its settings, complete or dismissed."""
        return set(self.settings.get("ops") or []) | set(self.done) | set(self.settings.get("dismissed") or {})


@dataclass
class Merged:
    out: Path
    records: dict[str, OpRecord]
    incomplete: dict[Path, int]  # input -> its listed ops without a result
    state: str


def read_part(path: Path) -> Part:
    from .resume import load_settings

    check_path(path, "merge")
    root = path.expanduser().resolve()
    if not root.is_dir():
        raise UsageError(f"{path}: no such run dir")
    ident = load_settings(root, "input")
    holder = _held_by(root)
    if holder is not None:
        raise UsageError(f"{root} is in use by a running opscreen run{f' (pid {holder})' if holder else ''}; "
                         "merge it when that run has ended")
    return Part(root, ident, Journal(root).scan())


def _held_by(root: Path) -> str | None:
    """The pid (or '') of the runner holding ``root``'s lock, None when none does."""
    import errno
    import fcntl

    try:
        fd = os.open(root / ".lock", os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return os.pread(fd, 64, 0).decode(errors="replace").strip()
        return None
    finally:
        os.close(fd)
    return None


def caliber_clashes(a: Part, b: Part) -> list[str]:
    """How ``b`` was measured differently from ``a``."""
    clash = S.recorded_clashes(a.settings, b.settings)
    for key in ("backend", "vendor"):
        if a.settings.get(key) != b.settings.get(key):
            clash.append(f"{key} {a.settings.get(key)!r} vs {b.settings.get(key)!r}")
    ca, cb = a.identity.get("caliber") or {}, b.identity.get("caliber") or {}
    for key in sorted(set(ca) | set(cb)):
        va, vb = ca.get(key), cb.get(key)
        if key in UNKNOWN_OK and (va is None or vb is None):
            continue
        line = f"{key} {va!r} vs {vb!r}"
        if va != vb and line not in clash and not any(c.startswith(f"{key} ") for c in clash):
            clash.append(line)
    return clash


def check_parts(parts: list[Part]) -> None:
    """Refuse inputs given twice, measured differently, or sharing an op."""
    seen: dict[Path, int] = {}
    for i, p in enumerate(parts):
        if p.root in seen:
            raise UsageError(f"{p.root} is given twice; give each run dir once")
        seen[p.root] = i
    first = parts[0]
    for p in parts[1:]:
        clash = caliber_clashes(first, p)
        if clash:
            raise UsageError(f"{p.root} was measured differently from {first.root} ({'; '.join(clash)}): "
                             "merge only the shards of one screen")
    owner: dict[str, Part] = {}
    for p in parts:
        dup = sorted(op for op in p.ops if op in owner)
        if dup:
            other = owner[dup[0]]
            more = f" (and {len(dup) - 1} more)" if len(dup) > 1 else ""
            raise UsageError(f"op {dup[0]}{more} is in both {other.root} and {p.root}: each op must come from one "
                             "run dir (merge the shards of one --shard I/N split)")
        owner.update({op: p for op in p.ops})


def merged_identity(parts: list[Part], complete: bool) -> dict:
    """The merged run's ``run_identity.json`` (see the module's docstring)."""
    ident = copy.deepcopy(parts[0].identity)
    ident.pop("bad_devices", None)
    ident.pop("error", None)
    ops: list[str] = []
    dismissed: dict[str, str] = {}
    for p in parts:
        ops += [op for op in p.settings.get("ops") or [] if op not in ops]
        dismissed.update(p.settings.get("dismissed") or {})
    settings = dict(ident.get("settings") or {}, ops=ops, dismissed=dismissed, shard=None)
    ident["settings"] = settings
    ident["batch"] = dict(ident.get("batch") or {}, ops=len(ops), dismissed=len(dismissed), shard=None)
    cal = next((p.identity.get("caliber") for p in parts if (p.identity.get("caliber") or {}).get("device_name")), None)
    if cal:
        ident["caliber"] = copy.deepcopy(cal)
    ident["sessions"] = [dict(s, run_dir=str(p.root)) for p in parts for s in p.identity.get("sessions") or []]
    ident["merged_from"] = [{
        "path": str(p.root), "shard": p.settings.get("shard"), "host": p.identity.get("host"),
        "state": p.identity.get("state"), "complete_ops": len(p.done), "bad_devices": p.identity.get("bad_devices") or {},
    } for p in parts]
    ident["merged_at"] = utcnow()
    ident["merge_argv"] = list(sys.argv)
    starts = [p.identity.get("started_at") for p in parts if p.identity.get("started_at")]
    ends = [p.identity.get("finished_at") for p in parts if p.identity.get("finished_at")]
    ident["started_at"] = min(starts) if starts else None
    ident["finished_at"] = max(ends) if ends and complete else None
    ident["state"] = "finished" if complete else "incomplete"
    return ident


def join_runs(inputs: list[Path], out: Path) -> Merged:
    """Merge ``inputs`` into the new run dir ``out`` (nothing is written when a check fails)."""
    if not inputs:
        raise UsageError("give the run dirs to merge")
    check_path(out, "--out")
    out = out.expanduser().absolute()
    if out.exists() or out.is_symlink():
        raise UsageError(f"--out {out} exists: merge into a new directory")
    check_writable_dir(out, "--out")  # a read-only place: one line, exit 2, before the inputs are read
    parts = [read_part(p) for p in inputs]
    check_parts(parts)
    real = out.resolve()
    for p in parts:
        root = Path(p.root).resolve()
        if real == root or root in real.parents:
            raise UsageError(f"--out {out} lies inside the input run dir {p.root}: a run there would delete it "
                             "(or mix it with the run's own files); merge into a directory outside the inputs")
    incomplete = {p.root: len(set(p.settings.get("ops") or []) - set(p.done)) for p in parts}
    incomplete = {k: v for k, v in incomplete.items() if v}
    complete = not incomplete and all(p.identity.get("state") == "finished" for p in parts)
    tmp = out.parent / f".{out.name}.merge-{os.getpid()}.tmp"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        records = _write(parts, tmp, merged_identity(parts, complete))
        os.rename(tmp, out)
        fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Merged(out, records, incomplete, "finished" if complete else "incomplete")


def _write(parts: list[Part], tmp: Path, identity: dict) -> dict[str, OpRecord]:
    """The merged run dir in ``tmp``: the complete op dirs, ops_status.csv, run_identity.json."""
    journal = Journal(tmp)
    journal.ops_root.mkdir(parents=True)
    for p in parts:
        for op in p.done:
            name = Journal(p.root).op_dir(op).name
            shutil.copytree(p.root / "ops" / name, journal.ops_root / name, symlinks=True)
    records = journal.scan()
    settings = identity["settings"]
    journal.write_status(status_records(records, settings.get("dismissed") or {}, settings.get("backend") or ""))
    contracts.write(contracts.RUN_IDENTITY, tmp / IDENTITY, identity)
    fsync_dir(tmp)
    return records

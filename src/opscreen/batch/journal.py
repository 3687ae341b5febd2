"""The run directory as a journal: what is done survives any kill.

Layout (see docs/contracts.md)::

    RUN_DIR/.lock                 flock held by the live runner (one runner per run dir)
    RUN_DIR/run_identity.json     kind "run": caliber + batch settings
    RUN_DIR/ops_status.csv        one row per op of the run (finished, dismissed, interrupted or
                                  not_run), rewritten atomically
    RUN_DIR/ops/<op>/...          per-op outputs (run_op's files, attempts/, dtypes/)
    RUN_DIR/ops/<op>/.complete    written atomically, last: the op is done

The op directories are the source of truth: an op is done exactly when its
``.complete`` marker exists, and its row is rebuilt from its ``result.json``. A
marker beside a ``result.json`` that is missing or damaged (truncated, say) marks
no result: :meth:`Journal.drop_damaged` removes such markers before a resume, so
the op is cleared and run again.
``ops_status.csv`` is a view, rewritten (temp file, fsync, ``os.replace``) after
every op. Resuming scans the markers, deletes every op directory without one
(partial output of an interrupted op), and runs only the ops left.

Lifecycle::

    j = Journal(run_dir); j.lock()            # UsageError when another runner holds it
    damaged = j.drop_damaged()                # op -> why its result.json is unusable
    done = j.scan()                           # op -> OpRecord of complete ops
    j.clear_incomplete()                      # partial op dirs removed
    ... per op: j.op_dir(op) ... j.complete(record, result)   # result.json then .complete
    j.write_status(rows)
    j.unlock()
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterable

from .. import contracts
from .. import fsio as _fsio
from ..errors import UsageError
from ..fsio import atomic_write_text  # noqa: F401  (re-exported)
from ..fsio import fsync_dir  # noqa: F401  (re-exported)
from ..fsio import utcnow

COMPLETE = ".complete"
LOCK = ".lock"
STATUS_CSV = "ops_status.csv"
IDENTITY = "run_identity.json"
RESULT = "result.json"
STATUS_COLUMNS = ("op", "status", "attempts", "dtype_level", "duration_s", "backend", "device", "timer", "error", "path")

_SAFE = re.compile(r"[A-Za-z0-9_.-]+")


def op_dirname(op: str) -> str:
    """The op's directory name: the op itself when it is a safe file name,
    else a sanitised form with a short stable hash (never ``.``/``..``)."""
    if _SAFE.fullmatch(op) and op not in (".", ".."):
        return op
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", op).strip(".") or "op"
    digest = hashlib.blake2b(op.encode("utf-8"), digest_size=4).hexdigest()
    return f"{safe[:80]}-{digest}"


def read_json(path: os.PathLike | str) -> dict | None:
    obj = _fsio.read_json(path)
    return obj if isinstance(obj, dict) else None


def json_problem(path: os.PathLike | str, need: tuple[str, ...] = ()) -> str | None:
    """Why the JSON object in ``path`` cannot be used (``missing``, ``empty``, ``not
    valid JSON (...)``, ``not a JSON object``, ``no "status"``), or None when it can."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if not data.strip():
        return "empty" if not data else "blank"
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not valid JSON ({exc}; {len(data)} bytes)"
    if not isinstance(obj, dict):
        return "not a JSON object"
    for key in need:
        if not isinstance(obj.get(key), str) or not obj.get(key):
            return f'no "{key}"'
    return None


def run_dir_holding(path: os.PathLike | str) -> Path | None:
    """The run dir of ``opscreen run`` that ``path`` is, or whose ``ops/`` it lies in
    (a run dir: its ``.lock``, its ``ops_status.csv`` or a ``run_identity.json`` of
    kind ``run``); None when it is neither. What a command that is not the runner
    must not write into: the journal owns every file there."""
    p = Path(path).expanduser().absolute()
    for d in (p, *p.parents):
        if d != p and p.relative_to(d).parts[0] != "ops":
            continue
        try:
            if (d / LOCK).is_file() or (d / STATUS_CSV).is_file():
                return d
        except OSError:
            continue
        ident = read_json(d / IDENTITY)
        if ident is not None and ident.get("kind") == "run":
            return d
    return None


def result_problem(path: os.PathLike | str) -> str | None:
    """Why an op's ``result.json`` is no result (:func:`json_problem`, or a ``schema``
    that is no version: ``contracts.read`` would give nothing); None when it is one."""
    problem = json_problem(path, ("status",))
    if problem is None:
        obj = read_json(path) or {}
        if contracts.version_of(contracts.RESULT, obj) is None:
            problem = f"has {contracts.RESULT.label} {obj.get(contracts.RESULT.field)!r}, which is no version"
    return problem


@dataclass
class OpRecord:
    """One row of ops_status.csv."""

    op: str
    status: str
    attempts: int = 0
    dtype_level: int | None = None
    duration_s: float | None = None
    backend: str = ""
    device: int | None = None
    timer: str = ""
    error: str | None = None
    path: str = ""

    def row(self) -> list[str]:
        def fmt(v):
            if v is None:
                return ""
            if isinstance(v, float):
                return f"{v:.3f}"
            return str(v)

        return [fmt(getattr(self, c)) for c in STATUS_COLUMNS]

    @classmethod
    def from_result(cls, result: dict, path: str) -> "OpRecord":
        known = {f.name for f in fields(cls)}
        kw = {k: result.get(k) for k in known if k in result}
        kw["op"] = str(result.get("op"))
        kw["status"] = str(result.get("status"))
        kw["path"] = path
        kw["attempts"] = int(result.get("attempts") or 0)
        for k in ("backend", "timer"):
            kw[k] = kw.get(k) or ""
        return cls(**kw)


def format_status_csv(records: Iterable[OpRecord]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(STATUS_COLUMNS)
    for r in records:
        w.writerow(r.row())
    return buf.getvalue()


def read_status_csv(path: os.PathLike | str) -> list[dict]:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError:
        return []


class Journal:
    """One run directory. Only the runner's main thread writes through it."""

    def __init__(self, root: os.PathLike | str):
        # A run dir is identified by its real path: the leftover marker of its
        # children, the lock and every message name the same directory whether it
        # was reached through a symlink or not.
        self.root = Path(root).expanduser().resolve()
        self.ops_root = self.root / "ops"
        self._lock_fd: int | None = None
        self._undo: tuple[list[Path], bytes | None] = ([], None)

    # -- locking -----------------------------------------------------------
    def lock(self) -> None:
        """Hold the run dir's lock (released by the kernel on any exit, SIGKILL included).
        What it creates (the run dir, ``.lock``) and what ``.lock`` held are noted, so that
        ``unlock(undo=True)`` leaves the place as it was found."""
        import fcntl

        created, d = [], self.root
        while not os.path.lexists(d) and d.parent != d:
            created.append(d)
            d = d.parent
        self.root.mkdir(parents=True, exist_ok=True)
        had_lock = os.path.lexists(self.root / LOCK)
        fd = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ""
            try:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            except OSError:
                pass
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise UsageError(
                    f"{self.root} is in use by another opscreen run" + (f" (pid {holder})" if holder else "")
                ) from None
            raise
        before = os.pread(fd, 4096, 0) if had_lock else None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        self._undo = (created, before)

    def unlock(self, undo: bool = False) -> None:
        """Release the lock; with ``undo`` (a run refused before it started) first put back
        what ``.lock`` held and remove what :meth:`lock` created (left alone once not empty)."""
        if self._lock_fd is None:
            return
        created, before = self._undo
        if undo:
            try:
                if before is None:
                    (self.root / LOCK).unlink(missing_ok=True)
                else:
                    os.ftruncate(self._lock_fd, 0)
                    os.pwrite(self._lock_fd, before, 0)
            except OSError:
                pass
        os.close(self._lock_fd)
        self._lock_fd = None
        for d in created if undo else ():
            try:
                d.rmdir()
            except OSError:
                break

    # -- op directories ------------------------------------------------------
    def op_dir(self, op: str) -> Path:
        return self.ops_root / op_dirname(op)

    def rel(self, path: Path) -> str:
        try:
            return str(Path(path).relative_to(self.root))
        except ValueError:
            return str(path)

    def is_complete(self, op: str) -> bool:
        return (self.op_dir(op) / COMPLETE).exists()

    def scan(self) -> dict[str, OpRecord]:
        """op -> record of every op whose ``.complete`` marker exists beside a usable
        ``result.json`` (:meth:`drop_damaged` first: a marker without one is no result)."""
        done: dict[str, OpRecord] = {}
        if not self.ops_root.is_dir():
            return done
        for d in sorted(self.ops_root.iterdir()):
            marker = d / COMPLETE
            if not marker.is_file() or result_problem(d / RESULT) is not None:
                continue
            mark = read_json(marker) or {}
            result = contracts.read(contracts.RESULT, d / RESULT) or {}  # a newer one raises
            op = mark.get("op") or result.get("op") or d.name
            result.setdefault("op", op)
            done[op] = OpRecord.from_result(result, self.rel(d))
        return done

    def drop_damaged(self) -> dict[str, str]:
        """Remove the ``.complete`` marker of every op whose ``result.json`` is missing
        or damaged (the marker is written after it, so only outside harm does that):
        the op dir is then incomplete, cleared and run again. Returns op -> problem."""
        dropped: dict[str, str] = {}
        if not self.ops_root.is_dir():
            return dropped
        for d in sorted(self.ops_root.iterdir()):
            marker = d / COMPLETE
            if not marker.is_file():
                continue
            problem = result_problem(d / RESULT)
            if problem is None:
                continue
            op = (read_json(marker) or {}).get("op") or d.name
            marker.unlink()
            fsync_dir(d)
            dropped[str(op)] = f"{RESULT} {problem}"
        return dropped

    def identity_problem(self) -> str | None:
        """Why ``run_identity.json`` cannot be read when it exists, else None."""
        problem = json_problem(self.root / IDENTITY)
        return None if problem == "missing" else problem

    def incomplete_dirs(self) -> list[Path]:
        if not self.ops_root.is_dir():
            return []
        return [d for d in sorted(self.ops_root.iterdir()) if d.is_dir() and not (d / COMPLETE).exists()]

    def clear_incomplete(self) -> list[Path]:
        """Delete the op dirs without a marker (and stray temp files); return them."""
        gone = self.incomplete_dirs()
        for d in gone:
            shutil.rmtree(d, ignore_errors=True)
        if self.root.is_dir():
            for tmp in self.root.glob(".*.tmp"):
                try:
                    tmp.unlink()
                except OSError:
                    pass
        return gone

    def reset_op(self, op: str) -> Path:
        """Remove an op's dir entirely (replay of a complete op); return the fresh dir."""
        d = self.op_dir(op)
        marker = d / COMPLETE
        if marker.exists():
            marker.unlink()  # first: a kill from here on leaves an incomplete dir
            fsync_dir(d)
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def complete(self, op: str, result: dict) -> OpRecord:
        """Write the op's final result.json, then its ``.complete`` marker (last)."""
        d = self.op_dir(op)
        d.mkdir(parents=True, exist_ok=True)
        contracts.write(contracts.RESULT, d / RESULT, result)
        _fsio.atomic_write_json(d / COMPLETE, {"op": op, "status": result.get("status"), "finished_at": utcnow()}, fsync=True)
        return OpRecord.from_result(result, self.rel(d))

    def keep_attempt_log(self, op: str, out_dir: Path, n: int) -> str | None:
        """Copy a failed attempt's run.log to ``attempts/attempt-<n>.log`` of the op
        dir; its path relative to the op dir, or None when there is none."""
        src = out_dir / "run.log"
        if not src.is_file():
            return None
        dest_dir = self.op_dir(op) / "attempts"
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / f"attempt-{n}.log"
        try:
            shutil.copyfile(src, dest)
        except OSError:
            return None
        return self.rel(dest).split("/", 2)[-1]

    # -- run level files -----------------------------------------------------
    def write_status(self, records: Iterable[OpRecord]) -> None:
        atomic_write_text(self.root / STATUS_CSV, format_status_csv(records), fsync=True)

    def read_identity(self) -> dict | None:
        return contracts.read(contracts.RUN_IDENTITY, self.root / IDENTITY)

    def write_identity(self, identity: dict) -> None:
        contracts.write(contracts.RUN_IDENTITY, self.root / IDENTITY, identity)


def record_dict(r: OpRecord) -> dict:
    return asdict(r)


# -- the records of a batch run, assembled in one place each ---------------------------


def op_result(state, *, status: str, error: str | None, backend: str, node: str | None,
              stolen_from: int | None, lane: int, extra: dict | None = None) -> dict:
    """result.json of a finished op, from its attempts (an
    :class:`~.attempts.OpState`): the one place its fields are assembled."""
    last = state.attempts[-1] if state.attempts else None
    final_out = state.last_outcome or {}
    result = {  # contracts.write stamps the version
        "op": state.op,
        "status": status,
        "exit_code": last.exit_code if last else None,
        "child_returncode": last.child_returncode if last else None,
        "duration_s": round(sum(a.duration_s for a in state.attempts), 3),
        "error": (error[:1000] if error else None),
        "node": node,
        "device": last.device if last else lane,
        "backend": backend,
        "timer": final_out.get("timer") or "",
        "attempts": len(state.attempts),
        "dtype_level": state.level,
        "home_device": state.home,
        "stolen_from": stolen_from,
        "devices": list(state.devices),
        "stop_reason": state.stop_reason,
        "attempt_log": [a.as_dict() for a in state.attempts],
        **({"repeats": final_out["repeats"]} if final_out.get("repeats") else {}),
        **({"phases": final_out["phases"]} if final_out.get("phases") else {}),
        **({"capture_aborts": final_out["capture_aborts"]} if final_out.get("capture_aborts") else {}),
        **({"telemetry": final_out["telemetry"]} if final_out.get("telemetry") else {}),
        "finished_at": utcnow(),
        **(extra or {}),
    }
    if state.level == 2 and state.l2_passed:
        result["exit_code"] = 0
    return result


NOT_RUN = "not_run"  # an op of the run that has not run (yet, or in a run that stopped)
INTERRUPTED = "interrupted"  # an op the run stopped while it ran (a resume runs it again)
UNFINISHED = (NOT_RUN, INTERRUPTED)  # rows without a result: never a .complete marker


def status_records(records: dict[str, OpRecord], dismissed: dict[str, str], backend: str,
                   planned: Iterable[str] = (), interrupted: dict[str, int] | None = None) -> list[OpRecord]:
    """The rows of ops_status.csv, by name: the finished ops, the dismissed ones, and every
    other op of the run (``planned``): ``interrupted`` (op -> attempts made) when the run
    stopped while it ran, else ``not_run``; so the file describes the whole screen."""
    rows = dict(records)
    for op, reason in dismissed.items():
        if op not in rows:
            rows[op] = OpRecord(op, "dismissed", 0, None, None, backend, None, "", reason, "")
    interrupted = interrupted or {}
    for op in planned:
        if op not in rows:
            if op in interrupted:
                rows[op] = OpRecord(op, INTERRUPTED, interrupted[op], None, None, backend, None, "",
                                    "the run stopped while it ran; a resume runs it again", "")
            else:
                rows[op] = OpRecord(op, NOT_RUN, 0, None, None, backend, None, "", None, "")
    return [rows[k] for k in sorted(rows)]


def run_identity(cfg, prev: dict | None) -> dict:
    """run_identity.json of a batch session (``cfg``: a BatchConfig) starting over
    ``prev`` (the identity a previous session left, if any)."""
    import platform
    import socket
    import sys

    from .. import __version__

    c = cfg
    prev = prev or {}
    git = getattr(c.suite, "git", None) or {}
    caliber = _planned_caliber(c, git)
    if (prev.get("caliber") or {}).get("device_name"):
        caliber = prev["caliber"]
    sessions = list(prev.get("sessions") or [])
    sessions.append({"pid": os.getpid(), "started_at": utcnow(), "argv": list(c.argv), "devices": list(c.devices)})
    return {  # contracts.write stamps the version
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
        "started_at": prev.get("started_at") or utcnow(),
        "finished_at": None,
        "state": "running",
        "sessions": sessions,
    }


def _planned_caliber(c, git: dict) -> dict:
    from ..child.config import caliber as caliber_block
    from ..op.run import planned_timing

    try:
        timing = planned_timing(c.backend)
    except Exception:  # noqa: BLE001 - the identity must not stop the run
        timing = {}
    return caliber_block(
        {
            "timer": c.planned_timer,
            "use_flagtune": c.use_flagtune,
            "use_flagtune_cost_model": c.use_flagtune_cost_model,
            "triton_cache_autotuning": c.triton_cache_autotuning,
            "input_seed": c.input_seed,
            "shape_mode": c.shape_mode,
            "level": c.level,
            "dtypes": c.dtypes,
            "backend": c.backend.name,
            "vendor": c.backend.vendor,
            "suite_commit": git.get("commit"),
            "timing": timing,
            "isolation": c.isolation,
        }
    )


#: caliber fields the run's request decides, not its first op (identity_device_name)
RUN_DECIDES = ("dtypes", "isolation")


def identity_device_name(identity: dict, dirs: list[Path], dtypes: list[str] | None) -> bool:
    """Complete the run's caliber with the device name the first op measured (the
    first of ``dirs`` whose run_identity.json names it); True when it changed. What the
    run's request decides stays the run's: its dtypes (levels may differ per op) and its
    isolation (an op that did not pass in a warm worker ran again in a fresh process)."""
    cal = identity.get("caliber") or {}
    if cal.get("device_name"):
        return False
    for d in dirs:
        ident = contracts.read(contracts.RUN_IDENTITY, d / IDENTITY) or {}
        ocal = ident.get("caliber") or {}
        name = ocal.get("device_name") or ident.get("device_name")
        if name:
            merged = dict(cal)
            merged.update({k: v for k, v in ocal.items() if k not in RUN_DECIDES})
            merged["dtypes"] = dtypes
            merged["device_name"] = name
            identity["caliber"] = merged
            return True
    return False


def identity_finished(identity: dict, state: str, error: str | None) -> None:
    """Mark the run (and its last session) as ended in ``state``."""
    identity["finished_at"] = utcnow()
    identity["state"] = state
    if error:
        identity["error"] = error
    if identity.get("sessions"):
        identity["sessions"][-1].update({"finished_at": utcnow(), "state": state, **({"error": error} if error else {})})

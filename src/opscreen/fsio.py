"""Writing files so that a reader, or a crash, sees the old content or the new.

Every file opscreen writes for others to read (identities, results, status,
summaries, inventories, merged shape files, caches) goes through
:func:`atomic_write_text`: a temp file in the same folder, an optional fsync,
then ``os.replace``. A destination that exists and is not a regular file (a
terminal, a FIFO, ``/dev/null`` or ``/dev/stdout`` given as ``--out``) is written
through instead: replacing it would turn a device node into a plain file.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def utcnow() -> str:
    """Now, as every file and banner of opscreen writes it: ISO 8601 UTC, to the second
    (``2026-11-30T17:32:14+00:00``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(path: os.PathLike | str) -> None:
    """Make a rename in ``path`` durable (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _special(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def atomic_write_text(path: os.PathLike | str, text: str, *, fsync: bool = False) -> Path:
    """Replace ``path`` with ``text`` atomically (see the module docstring)."""
    path = Path(path)
    if _special(path):
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a failed write or flush names no file by itself
        raise
    if fsync:
        fsync_dir(path.parent)
    return path


def atomic_write_json(path: os.PathLike | str, obj: Any, *, fsync: bool = False, indent: int | None = 2) -> Path:
    sep = None if indent is not None else (",", ":")
    body = json.dumps(obj, indent=indent, separators=sep, sort_keys=False, default=str)
    return atomic_write_text(path, body + "\n", fsync=fsync)


def read_json(path: os.PathLike | str) -> Any:
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


# -- write errors the user must fix (full disk, quota, read-only) -----------------------

STORAGE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EIO") if hasattr(errno, name)
)


def is_storage_error(exc: BaseException | None) -> bool:
    """True for an OSError that says the storage cannot take the write (full disk,
    quota, file size limit, read-only or failing filesystem)."""
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


def mount_point(path: os.PathLike | str) -> str:
    """The mount point of the filesystem that holds ``path`` (or would hold it)."""
    p = os.path.realpath(os.fspath(path))
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    return p


def _fstype(mount: str) -> str:
    kind = ""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3 and parts[1].replace("\\040", " ") == mount:
                    kind = parts[2]  # the last entry mounted there is the one in use
    except OSError:
        pass
    return kind


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def describe_filesystem(path: os.PathLike | str) -> str:
    """``filesystem /mnt (tmpfs): 0 B free of 300.0 KiB`` for the filesystem of ``path``."""
    mount = mount_point(path)
    kind = _fstype(mount)
    text = f"filesystem {mount}" + (f" ({kind})" if kind else "")
    try:
        st = os.statvfs(mount)
        text += f": {_size(st.f_bavail * st.f_frsize)} free of {_size(st.f_blocks * st.f_frsize)}"
    except OSError:
        pass
    return text


def write_error(exc: OSError, where: os.PathLike | str) -> str:
    """One line for a write that failed: the file (or ``where`` when the error names
    none), the reason and the filesystem, e.g. ``cannot write /mnt/run/ops/abs/run.log:
    No space left on device (filesystem /mnt (tmpfs): 0 B free of 300.0 KiB)``."""
    target = exc.filename if exc.filename else where
    reason = exc.strerror or str(exc)
    return f"cannot write {target}: {reason} ({describe_filesystem(target)})"

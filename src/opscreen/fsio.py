"""Writing files so that a reader, or a crash, sees the old content or the new.

Every file opscreen writes for others to read (identities, results, status,
summaries, inventories, merged shape files, caches) goes through
:func:`atomic_write_text`: a temp file in the same folder, an optional fsync,
then ``os.replace``. A destination that exists and is not a regular file (a
terminal, a FIFO, ``/dev/null`` or ``/dev/stdout`` given as ``--out``) is written
through instead: replacing it would turn a device node into a plain file.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


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
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
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

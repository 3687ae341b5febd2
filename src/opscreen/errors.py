"""Errors the command line turns into one-line messages, and the checks of
user-named paths and values that produce them."""

from __future__ import annotations

import errno
import os
from pathlib import Path


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""

    exit_code = 2


class OpscreenError(Exception):
    """A failure that is not the user's input: printed as one line, exit status 1."""

    exit_code = 1


def shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for a one-line message; a longer one is cut to ``limit``
    characters and its length said (a 5000-character name stays one short line)."""
    text = str(text)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def read_input(path: str | os.PathLike, what: str) -> str:
    """The text of an input file the user named; a :class:`UsageError`
    (``cannot read <what> <path>: <reason>``) when it cannot be read or is not
    UTF-8 text."""
    p = Path(path).expanduser()
    try:
        return p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what} {_path(path)}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start : exc.start + 1].hex() if isinstance(exc.object, bytes) else "?"
        raise UsageError(
            f"cannot read {what} {_path(path)}: not UTF-8 text (byte 0x{bad} at offset {exc.start})"
        ) from None


def check_given(value: str | None, flag: str, hint: str) -> str | None:
    """An option that was given must not be empty (``--out ''`` is no silent default):
    None passes through; an empty or blank value is a :class:`UsageError`."""
    if value is not None and not str(value).strip():
        raise UsageError(f"{flag} '': {hint}")
    return value


def check_path(value: str | os.PathLike | None, flag: str) -> Path | None:
    """A user-named path the system can look up: None passes through; a name that
    is too long, a loop of links or a folder that cannot be searched is a one-line
    :class:`UsageError` here rather than a traceback later. A path that does not
    exist is fine (the caller decides)."""
    if value is None:
        return None
    p = Path(value).expanduser()
    try:
        os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise UsageError(f"{flag} {_path(value)}: {exc.strerror or exc}") from None
    except ValueError as exc:  # an embedded NUL byte
        raise UsageError(f"{flag} {shown(str(value))}: {exc}") from None
    return p


def check_writable_dir(path: str | os.PathLike, flag: str) -> Path:
    """``path`` (absolute) can be the output directory: an existing directory, or a
    place where one can be made, on a file system that takes writes. Nothing is
    created; a :class:`UsageError` names what is in the way."""
    p = Path(path).expanduser().absolute()
    check_path(p, flag)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {_path(p)} exists and is not a directory")
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{flag} {_path(p)}: {_path(probe)} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        try:
            st = os.statvfs(probe)
            readonly = bool(st.f_flag & os.ST_RDONLY)
        except OSError:
            readonly = False
        why = os.strerror(errno.EROFS) if readonly else "no permission to write there"
        raise UsageError(f"{flag} {_path(p)}: cannot write in {_path(probe)} ({why}); choose another {flag}")
    return p


def check_out_file(value: str | os.PathLike, flag: str, example: str = "NAME") -> Path:
    """``value`` (given) can be the output file: not empty, not a directory, in a folder
    that exists or can be made on a file system that takes writes. Nothing is created;
    a :class:`UsageError` names what is in the way."""
    check_given(str(value), flag, "give the file to write")
    p = Path(value).expanduser().absolute()
    check_path(p, flag)
    if p.is_dir():
        raise UsageError(f"{flag} {_path(value)} is a directory: give the file to write (e.g. {_path(p / example)})")
    check_writable_dir(p.parent, flag)
    return p


def os_error(exc: OSError, flag: str, path: str | os.PathLike) -> UsageError:
    """The one-line :class:`UsageError` for an output path the system refused."""
    return UsageError(f"{flag} {_path(path)}: {exc.strerror or exc}; choose another {flag}")


def _path(path: str | os.PathLike) -> str:
    text = os.fspath(path)
    return text if len(text) <= 160 else f"{text[:160]}... ({len(text)} characters)"


def bad_yaml(what: str, path: str | os.PathLike, exc: Exception) -> UsageError:
    """The one-line :class:`UsageError` for an input file that is not valid YAML:
    ``<what> <path>:<line>: not valid YAML: <problem>`` (the line where the parser
    knows it)."""
    mark = getattr(exc, "problem_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return UsageError(f"{what} {path}{where}: not valid YAML: {problem}")

"""Errors the command line turns into one-line messages."""

from __future__ import annotations

import os
from pathlib import Path


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""

    exit_code = 2


class OpscreenError(Exception):
    """A failure that is not the user's input: printed as one line, exit status 1."""

    exit_code = 1


def read_input(path: str | os.PathLike, what: str) -> str:
    """The text of an input file the user named; a :class:`UsageError`
    (``cannot read <what> <path>: <reason>``) when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def bad_yaml(what: str, path: str | os.PathLike, exc: Exception) -> UsageError:
    """The one-line :class:`UsageError` for an input file that is not valid YAML:
    ``<what> <path>:<line>: not valid YAML: <problem>`` (the line where the parser
    knows it)."""
    mark = getattr(exc, "problem_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return UsageError(f"{what} {path}{where}: not valid YAML: {problem}")

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

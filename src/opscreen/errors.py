"""Errors the command line turns into one-line messages."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""

    exit_code = 2


class OpscreenError(Exception):
    """A failure that is not the user's input: printed as one line, exit status 1."""

    exit_code = 1

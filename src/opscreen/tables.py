"""Tables for the terminal, drawn by ``rich``.

On a terminal a table takes the terminal's width (rich wraps the cells that do not
fit, folding long words rather than cutting them) and colour unless ``NO_COLOR`` is
set. Anywhere else (a pipe, a file, a test) it is plain text: no colour, no escape
codes, no trailing blanks, and never wrapped or truncated, however long a cell is.
Every cell is literal text: a shape such as ``[[64, 64]]`` is never read as markup.
"""

from __future__ import annotations

import io
import shutil
import sys
from typing import Iterable, Sequence, TextIO

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

# Wide enough that no table or line of opscreen's is ever wrapped off a terminal.
PLAIN_WIDTH = 100_000


def table(*columns: str, indent: int = 2) -> "Block":
    """A table whose columns are ``columns``; a name ending in ``>`` is right-aligned
    (the ``>`` is not shown)."""
    t = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold", show_edge=False)
    for c in columns:
        right = c.endswith(">")
        t.add_column(Text(c[:-1] if right else c), justify="right" if right else "left", overflow="fold")
    return Block(t, indent)


class Block:
    """A table plus its indent; rows are added with :meth:`row`."""

    def __init__(self, t: Table, indent: int) -> None:
        self.table = t
        self.indent = indent

    def row(self, *cells: object) -> "Block":
        self.table.add_row(*(Text("" if c is None else str(c)) for c in cells))
        return self

    def __len__(self) -> int:
        return self.table.row_count

    def __rich__(self):
        return Padding(self.table, (0, 0, 0, self.indent), expand=False) if self.indent else self.table


def _is_tty(file: TextIO) -> bool:
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):
        return False


def console(file: TextIO | None = None, *, like: TextIO | None = None) -> Console:
    """A console that writes to ``file`` (default stdout) and draws as ``like``
    (default ``file``) would be drawn: a terminal's width and colour, else plain text."""
    file = sys.stdout if file is None else file
    like = file if like is None else like
    if _is_tty(like):
        width = shutil.get_terminal_size().columns
        # colour unless NO_COLOR is set (rich reads it)
        return Console(file=file, force_terminal=True, width=width, highlight=False, emoji=False)
    return Console(file=file, force_terminal=False, color_system=None, width=PLAIN_WIDTH, highlight=False,
                   emoji=False, soft_wrap=False)


def _item(x):
    return Text(x) if isinstance(x, str) else x


def to_text(items: Iterable, *, like: TextIO | None = None) -> str:
    """Text of ``items`` (strings are lines, the rest rich renderables such as a
    :func:`table`) as they would be drawn on ``like`` (default: stdout now)."""
    like = sys.stdout if like is None else like
    buf = io.StringIO()
    con = console(buf, like=like)
    for x in items:
        con.print(_item(x), soft_wrap=isinstance(x, str))
    text = buf.getvalue()
    if not _is_tty(like):
        text = "\n".join(line.rstrip() for line in text.splitlines())
    return text.rstrip("\n")


def emit(items: Sequence, file: TextIO | None = None) -> None:
    """Write ``items`` (as :func:`to_text`) to ``file`` (default stdout), then a newline."""
    file = sys.stdout if file is None else file
    text = to_text(items, like=file)
    file.write(text + "\n" if text else "")

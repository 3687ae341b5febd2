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

from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

# Wide enough that no table or line of opscreen's is ever wrapped off a terminal.
PLAIN_WIDTH = 100_000


def first(items: Iterable[object], n: int, sep: str = ", ") -> str:
    """The first ``n`` of ``items`` joined by ``sep``, then how many more: ``a, b, and 3 more``.

    The one phrasing of every capped list that opscreen prints on a line."""
    items = [str(i) for i in items]
    return sep.join(items[:n]) + (f"{sep}and {len(items) - n} more" if len(items) > n else "")


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


def _joinable(like: TextIO) -> bool:
    """Whether :class:`Grid` and :func:`grid_text` may join lines themselves for ``like``:
    anywhere but a terminal (a test turns it off to compare with rich's drawing)."""
    return not _is_tty(like)


class Grid:
    """A table's columns and rows, drawn at the end by :meth:`drawn`: as :func:`table` draws it,
    through rich on a terminal; as the same lines, joined here, anywhere else. rich takes 1 ms
    a row: 0.5 s for the runs table of ``opscreen history`` on a store of 500 screens, half of
    the command (bench/results/2026-12-03-store-scale.md)."""

    def __init__(self, *columns: str) -> None:
        self.columns = columns
        self.rows: list[tuple[str, ...]] = []

    def row(self, *cells: object) -> "Grid":
        self.rows.append(tuple("" if c is None else str(c) for c in cells))
        return self

    def drawn(self, like) -> list:
        """rich's table (one item), or its lines in plain text (a pipe, a file) when every cell is
        one a plain join draws as rich does: printable, one column a character, no blank at its ends."""
        heads = [c[:-1] if c.endswith(">") else c for c in self.columns]
        cells = [heads, *self.rows]
        widths = [max(len(r[j]) for r in cells) for j in range(len(heads))]
        if not _joinable(like) or sum(widths) + 2 * len(widths) > PLAIN_WIDTH or not all(map(_plain, self.rows)):
            t = table(*self.columns)
            for r in self.rows:
                t.row(*r)
            return [t]
        right = [c.endswith(">") for c in self.columns]
        return ["  " + "  ".join(x.rjust(w) if r else x.ljust(w) for x, w, r in zip(row, widths, right)).rstrip()
                for row in cells]


def _plain(cells: tuple[str, ...]) -> bool:
    return all(c.isprintable() and c == c.strip() and cell_len(c) == len(c) for c in cells)


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


def grid_text(items: Iterable, *, like: TextIO | None = None) -> str:
    """:func:`to_text` of ``items`` where some are :class:`Grid`: off a terminal, when every
    line is printable text, the lines joined here (what to_text makes of them: rich prints
    each as it is, with no control code to strip and no tab to expand), without rich's
    50 us a line; else to_text."""
    like = sys.stdout if like is None else like
    out = [y for x in items for y in (x.drawn(like) if isinstance(x, Grid) else [x])]
    if _joinable(like) and all(isinstance(y, str) and y.isprintable() for y in out):
        return "\n".join(line.rstrip() for line in "\n".join(out).splitlines()).rstrip("\n")
    return to_text(out, like=like)

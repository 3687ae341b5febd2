"""Small file helpers shared by the results tools."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence

__all__ = ["write_atomic", "read_json", "csv_text", "fmt_num"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read_json(path: str | Path) -> Any:
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def fmt_num(v: Any) -> str:
    """CSV cell: '' for None, full-precision repr for floats, text otherwise."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Any]], bool_columns: Sequence[int] = ()) -> str:
    """CSV text: None -> '', floats in full precision (repr), bools as true/false.

    ``bool_columns`` names the indexes that may hold bools (the fast path leaves
    every other cell to the csv module, which writes None as '' and floats by repr).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    if bool_columns:
        for r in rows:
            r = list(r)
            for i in bool_columns:
                v = r[i]
                if isinstance(v, bool):
                    r[i] = "true" if v else "false"
            w.writerow(r)
    else:
        w.writerows([fmt_num(v) for v in r] for r in rows)
    return buf.getvalue()

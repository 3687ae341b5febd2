"""Small file helpers shared by the results tools."""

from __future__ import annotations

import csv
import io
from typing import Any, Iterable, Sequence

__all__ = ["csv_text", "fmt_num"]


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

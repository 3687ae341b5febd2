"""Dtype names of the fallback ladder: what a test's ``dtypes=`` expression mentions.

The retry and dtype-fallback decisions moved to :mod:`.attempts` (a pure state
machine); their names are re-exported here for older imports.
"""

from __future__ import annotations

from ..settings import canonical_dtype
from .attempts import (  # noqa: F401  (re-exported)
    FINAL_OK,
    TRANSIENT,
    Attempt,
    Decision,
    DeviceHealth,
    RetryPolicy,
    level2_candidates,
)

# consts names in FlagGems' benchmark/consts.py -> dtype names.
DTYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "FLOAT_DTYPES": ("float16", "float32", "bfloat16"),
    "INT_DTYPES": ("int16", "int32"),
    "BOOL_DTYPES": ("bool",),
    "COMPLEX_DTYPES": ("complex64",),
}


def dtypes_from_expr(expr: str | None) -> list[str]:
    """Dtype names a test's ``dtypes=`` expression mentions.

    Understands the FlagGems constant groups (``consts.FLOAT_DTYPES`` ...),
    ``torch.float16`` style names and bare names, in the order they appear.
    """
    if not expr:
        return []
    import re

    out: list[str] = []
    for tok in re.findall(r"[A-Za-z_][\w.]*", expr):
        last = tok.rsplit(".", 1)[-1]
        names: tuple[str, ...] = ()
        if last in DTYPE_GROUPS:
            names = DTYPE_GROUPS[last]
        elif re.fullmatch(r"(?:float|int|uint|bfloat|complex)\d+|bool|half|double", last):
            names = (canonical_dtype(last) or last,)
        for n in names:
            if n not in out:
                out.append(n)
    return out

"""What an op folder holds that a run of the op owns and rewrites.

A run (one process or a ``--repeats`` series) first clears what an earlier run of
the same op left there: the files it writes again, the batch runner's
``.complete`` marker and an earlier ``repeats/`` series. Standard library only.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..results.records import REPEAT_DIR

OWNED_FILES = ("run.log", "record.log", "result.json", "run_identity.json", "child_config.json", "shapes.merged.yaml",
               "worker.log")


def clear_owned(out_dir: Path, keep: tuple[str, ...] = ()) -> None:
    """Remove what an earlier run left in ``out_dir`` that this one writes again:
    the owned files (but ``keep``), the batch marker, and an earlier ``--repeats`` series."""
    for name in OWNED_FILES + (".complete",):
        if name in keep:
            continue
        p = out_dir / name
        if p.is_file() or p.is_symlink():
            p.unlink()
    if (out_dir / REPEAT_DIR).is_dir():
        shutil.rmtree(out_dir / REPEAT_DIR, ignore_errors=True)

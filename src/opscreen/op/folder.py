"""What an op folder holds that a run of the op owns and rewrites.

A run (one process or a ``--repeats`` series) first clears what an earlier run of
the same op left there: the files it writes again, the batch runner's
``.complete`` marker and an earlier ``repeats/`` series. What outlives the runs of
the op: ``no_capture.json``, the tests whose graph capture killed a process (the
child's capture mark left behind; child/graph.py), which later runs time without
capture. Standard library only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..child.config import CAPTURING_MARK
from ..fsio import atomic_write_json
from ..results.records import REPEAT_DIR

OWNED_FILES = ("run.log", "record.log", "result.json", "run_identity.json", "child_config.json", "shapes.merged.yaml",
               "worker.log")
NO_CAPTURE = "no_capture.json"  # tests whose capture killed a process: kept across runs
ABORT_LOG = "capture-abort-{n}.log"  # run.log of the n-th run that died inside a capture


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


def no_capture(out_dir: Path) -> list[str]:
    """The tests a run of this op must time without graph capture ([] when none, or unreadable)."""
    try:
        tests = json.loads((Path(out_dir) / NO_CAPTURE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [t for t in tests if isinstance(t, str)] if isinstance(tests, list) else []


def take_capture_mark(out_dir: Path, record: bool) -> str | None:
    """The test a process was capturing when it died (the child's mark left in ``out_dir``),
    removed; with ``record``, added to ``no_capture.json`` and returned. A mark found
    without knowing how its process ended (``record`` False: a run interrupted, a runner
    killed before it saw the end) is only removed."""
    mark = Path(out_dir) / CAPTURING_MARK
    try:
        test = mark.read_text(encoding="utf-8").strip() or "?"
    except OSError:
        return None
    mark.unlink(missing_ok=True)
    if not record:
        return None
    tests = no_capture(out_dir)
    if test not in tests:
        atomic_write_json(Path(out_dir) / NO_CAPTURE, tests + [test])
    return test

"""The temporary folders of a run's children, named after their run dir.

A warm worker's folder (its ``PYTHONPATH`` shim, ``opscreen-worker-*``) and a
preflight's (its collection's ``run.log``, ``opscreen-preflight-*``) are removed by
the harness when they end, but a runner killed with SIGKILL removes nothing. So the
children of a batch run (their request's environment holds ``OPSCREEN_BATCH_RUN``)
name their folders ``opscreen-<kind>-run<tag>-*``, ``<tag>`` a short hash of the run
dir's real path, and the next runner of that run dir, once it holds the lock and
has killed what its predecessor left running, removes them: its own run's, never
another run's, nor those of an ``opscreen op`` (named without a tag). Standard
library only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

RUN_MARK = "OPSCREEN_BATCH_RUN"  # the run dir of a batch run's children (and grandchildren)
KINDS = ("worker", "preflight")


def run_tag(run_dir: str | os.PathLike) -> str:
    """A short stable name for the run dir (its real path, hashed)."""
    return hashlib.blake2b(os.path.realpath(run_dir).encode("utf-8", "surrogateescape"), digest_size=6).hexdigest()


def prefix(kind: str, env: Mapping[str, str] | None) -> str:
    """The name a temporary folder of ``kind`` starts with, for a child with ``env``."""
    run = (env or {}).get(RUN_MARK)
    return f"opscreen-{kind}-run{run_tag(run)}-" if run else f"opscreen-{kind}-"


def remove_leftovers(run_dir: str | os.PathLike) -> list[Path]:
    """Remove the temporary folders the children of ``run_dir`` left behind (call it with
    the run dir locked and its leftover processes killed, before this runner starts any);
    returns them."""
    tag = run_tag(run_dir)
    gone = []
    for kind in KINDS:
        for p in sorted(Path(tempfile.gettempdir()).glob(f"opscreen-{kind}-run{tag}-*")):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
                gone.append(p)
    return gone

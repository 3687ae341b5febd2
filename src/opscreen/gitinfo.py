"""Which revision of a suite was run: one answer for the provider, the runner and
the inventory.

A suite root that is the top level of its own git work tree gives its ``HEAD``
and a dirty flag (untracked files ignored: a benchmark run leaves logs behind).
A folder inside some other repository (a copy of the suite kept in an ignored
folder of this project, say) is *not* that repository's commit. A suite that is
no checkout at all (an archive, a vendor's drop) can have its commit declared in
``OPSCREEN_SUITE_COMMIT``; it is then recorded with ``commit_source: declared``,
never as if git had said it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping, Optional

from .errors import UsageError
from .procgroup import run_capture

ENV_DECLARED = "OPSCREEN_SUITE_COMMIT"
_SHA = re.compile(r"^[0-9a-f]{7,40}$")


class DeclaredCommitError(UsageError):
    """OPSCREEN_SUITE_COMMIT is set but is no commit id."""


def declared_commit(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """``OPSCREEN_SUITE_COMMIT`` when set (7 to 40 hex digits), else None."""
    value = (os.environ if environ is None else environ).get(ENV_DECLARED, "").strip().lower()
    if not value:
        return None
    if not _SHA.match(value):
        raise DeclaredCommitError(
            f"{ENV_DECLARED}={value!r} is not a commit id (7 to 40 hex digits); set it to the suite's commit or unset it")
    return value


def suite_revision(root: Path, timeout: float = 10.0, environ: Optional[Mapping[str, str]] = None) -> dict:
    """``{"commit", "dirty", "commit_source"}`` of the suite at ``root``.

    ``commit_source`` is ``"git"`` (root is its own checkout), ``"declared"``
    (``OPSCREEN_SUITE_COMMIT``, used only when root is not a checkout) or None.
    """
    root = Path(root).resolve()
    top = run_capture(["git", "-C", str(root), "rev-parse", "--show-toplevel"], timeout=timeout)
    if top.ok and top.stdout.strip() and Path(top.stdout.strip()).resolve() == root:
        head = run_capture(["git", "-C", str(root), "rev-parse", "HEAD"], timeout=timeout)
        if head.ok and head.stdout.strip():
            status = run_capture(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                 timeout=2 * timeout)
            dirty = bool(status.stdout.strip()) if status.ok else None
            return {"commit": head.stdout.strip().splitlines()[0], "dirty": dirty, "commit_source": "git"}
    declared = declared_commit(environ)
    if declared:
        return {"commit": declared, "dirty": None, "commit_source": "declared"}
    return {"commit": None, "dirty": None, "commit_source": None}


def require_checkout(repo: Path, timeout: float = 30.0) -> Path:
    """``repo`` when it is a git checkout, else a one-line UsageError (``--repo``)."""
    repo = Path(repo)
    if not run_capture(["git", "-C", str(repo), "rev-parse", "--git-dir"], timeout=timeout).ok:
        raise UsageError(f"--repo {repo}: not a git checkout (give the suite's own clone, whose history holds the "
                         "runs' suite commits)")
    return repo


def commit_times(repo: Path, commits: list[str], timeout: float = 30.0) -> dict[str, int]:
    """The committer time (Unix seconds) of each of ``commits`` (full or abbreviated ids) that the
    git checkout at ``repo`` knows; the others are left out. One ``git log --no-walk`` for all:
    ``--ignore-missing`` skips the unknown ones instead of failing on them. A ``repo`` that is no
    checkout is a one-line UsageError."""
    repo = require_checkout(repo, timeout)
    wanted = [c for c in commits if c and _SHA.match(c.lower())]
    if not wanted:
        return {}
    out = run_capture(["git", "-C", str(repo), "log", "--no-walk=unsorted", "--ignore-missing", "--format=%H %ct",
                       *wanted], timeout=timeout)
    if not out.ok:
        raise UsageError(f"--repo {repo}: git log failed: {(out.stderr or out.error or '').strip().splitlines()[-1:]}")
    full = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
    times = {}
    for c in wanted:
        hit = [t for h, t in full.items() if h.startswith(c.lower())]
        if hit:
            times[c] = int(hit[0])
    return times

"""What ``opscreen run --changed-since C~1`` selects for real commits of a library's checkout.

    .venv/bin/python bench/changed_since_real.py ~/FlagGems COMMIT...

For each COMMIT: the checkout is moved to it (``git checkout --detach``; it must be
clean), the selection of ``opscreen.providers.changes.select(suite, "COMMIT~1")`` is
made (what ``--changed-since`` runs before any screen), and its report lines are printed
with the commit's subject and the files its diff touches, then the time it took. The
checkout is put back where it was at the end. Nothing is screened: no GPU is needed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from opscreen.providers import changes
from opscreen.providers.flaggems import Suite


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


def one(root: Path, commit: str) -> None:
    git(root, "checkout", "-q", "--detach", commit)
    print(f"## {git(root, 'log', '-1', '--format=%h %s', commit)}")
    for path in git(root, "diff", "--name-only", f"{commit}~1", commit).splitlines():
        print(f"    diff: {path}")
    t0 = time.monotonic()
    sel = changes.select(Suite.locate(str(root)), f"{commit}~1")
    for line in changes.report_lines(sel):
        print(f"  {line}")
    if not sel.ops:
        print(f"  (none selected) {changes.nothing_selected(sel)}")
    print(f"  took {time.monotonic() - t0:.1f} s; {len(sel.unmatched)} of {sel.total} ops have no registered function found\n",
          flush=True)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root = Path(argv[0]).expanduser().resolve()
    if git(root, "status", "--porcelain", "--untracked-files=no"):
        print(f"{root} has uncommitted changes: commit or stash them first", file=sys.stderr)
        return 2
    start = git(root, "rev-parse", "--abbrev-ref", "HEAD")
    start = git(root, "rev-parse", "HEAD") if start == "HEAD" else start
    try:
        for commit in argv[1:]:
            one(root, commit)
    finally:
        git(root, "checkout", "-q", start)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

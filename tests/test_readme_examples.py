"""Every command example in the ```bash blocks of README.md and of the docs pages that hold
the moved command reference (:data:`PAGES`) that needs no GPU runs, and exits as documented.

Each example line runs in ``bash`` in a fresh temporary folder (so whatever it writes,
``runs/...`` included, lands there and never in the checkout), with ``opscreen`` on
``PATH`` standing for ``python -m opscreen`` of this worktree's ``src``. The inputs an
example names are provided there: ``runs/base`` and ``runs/new``, ``runs/h200`` and
``runs/h200-new`` are synthetic run dirs of one caliber (``tests/synth.py``; the README's
FlagGems recipe reads its GPU runs under those names), ``bench/`` is the repository's.

An example is expected to exit 0 unless its comment documents another status
(``# ... exit 1``). Examples that need more than this machine has are skipped by
the rules in :data:`NEEDS_MORE`, each with its reason (shown by ``-ra``); examples
broken by a bug that another item of issue 14 fixes are strict xfails
(:data:`KNOWN_BROKEN`), so they fail here as soon as the fix lands and the entry must go.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SRC, leaky

README = ROOT / "README.md"
#: The pages whose ```bash examples run here: the README, and the docs pages that the
#: README's command reference moved to.
PAGES = [README, ROOT / "docs" / "usage.md", ROOT / "docs" / "install.md"]
#: The synthetic run dirs every example finds in its folder.
SYNTH_RUNS = ("base", "new", "h200", "h200-new")

#: (regex on the command, reason): examples this test does not run.
NEEDS_MORE = [
    (r"--backend\s+(cuda|rocm|musa|ascend|mlu)\b", "needs an accelerator"),
    (r"FlagGems", "needs a FlagGems checkout"),
    (r"^opscreen run\b.*\bruns/h200\b", "screens or resumes a GPU run (runs/h200...)"),
    (r"~/gems\b|\bpip install\b", "sets up a Python environment (installs packages from PyPI)"),
    (r"^bash scripts/demo\.sh\b", "creates .venv in the checkout: .ci/run runs it on a clean checkout"),
    (r"^bash scripts/test\.sh\b", "runs this test suite"),
    (r"^ray start\b", "starts a node of a Ray cluster"),
    (r"--executor\s+ray\b", "needs a Ray cluster"),
    (r"^sbatch\b|runs/screen\b", "needs a Slurm cluster (a job array and its run dirs)"),
    (r"runs/cal-topup\b", "needs the GPU screens of the calibrate --sample 0 example before it"),
]

#: (regex on the command, reason): examples that fail today because of a bug another
#: item of issue 14 fixes (strict: an example that starts to pass fails this test).
KNOWN_BROKEN: list[tuple[str, str]] = []

#: At least this many examples must really run (the rules above cannot skip them all).
MIN_RUN = 8
#: ... and at least this many of the README's own.
MIN_RUN_README = 4

_FENCE = re.compile(r"^```bash\s*\n(.*?)^```", re.M | re.S)
_COMMENT = re.compile(r"\s#\s?(.*)$")
_EXIT = re.compile(r"\bexits?\s+(\d+)\b")


def readme_examples(page: Path = README) -> list[tuple[str, int]]:
    """(command line, expected exit status) of every example in a ```bash block of ``page``."""
    out = []
    for block in _FENCE.findall(page.read_text()):
        pending = ""
        for raw in block.splitlines():
            line = pending + raw.strip()
            if line.endswith("\\"):  # a continued line
                pending = line[:-1] + " "
                continue
            pending = ""
            if not line or line.startswith("#"):
                continue
            m = _COMMENT.search(line)
            comment = m.group(1) if m else ""
            code = _EXIT.search(comment)
            out.append((line, int(code.group(1)) if code else 0))
    return out


def _command(line: str) -> str:
    m = _COMMENT.search(line)
    return line[: m.start()].strip() if m else line


def _rule(rules, line: str):
    return next((why for rx, why in rules if re.search(rx, _command(line))), None)


def all_examples() -> list[tuple[Path, str, int]]:
    """(page, command line, expected exit status) of every example of :data:`PAGES`."""
    return [(page, line, code) for page in PAGES for line, code in readme_examples(page)]


def _params():
    params = []
    for page, line, code in all_examples():
        marks = []
        if (why := _rule(NEEDS_MORE, line)) is not None:
            marks.append(pytest.mark.skip(reason=f"{why}: {_command(line)}"))
        elif (why := _rule(KNOWN_BROKEN, line)) is not None:
            marks.append(pytest.mark.xfail(reason=why, strict=True))
        where = "" if page == README else f"{page.name}: "
        params.append(pytest.param(line, code, marks=marks, id=(where + _command(line))[:80]))
    return params


def test_examples_are_found_and_most_run():
    examples = [(page, line) for page, line, _ in all_examples()]
    assert len(examples) >= 15, examples
    runnable = [line for _, line in examples if _rule(NEEDS_MORE, line) is None]
    assert len(runnable) >= MIN_RUN, f"only {len(runnable)} examples run: {runnable}"
    in_readme = [line for page, line in examples if page == README and _rule(NEEDS_MORE, line) is None]
    assert len(in_readme) >= MIN_RUN_README, f"only {len(in_readme)} README examples run: {in_readme}"
    # every rule still matches an example (a stale rule would hide a new one)
    for rx, why in NEEDS_MORE + KNOWN_BROKEN:
        assert any(re.search(rx, _command(line)) for _, line in examples), f"rule {rx!r} ({why}) matches no example"


@pytest.fixture
def workdir(tmp_path):
    """A folder holding what the examples read, and a `opscreen` command."""
    from synth import make_run

    work = tmp_path / "work"
    work.mkdir()
    (work / "bench").symlink_to(ROOT / "bench")
    for name in SYNTH_RUNS:
        make_run(work / "runs" / name, n_ops=4, seed=7, fail_rate=0, timeout_rate=0, fatal_rate=0)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "opscreen"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m opscreen "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not leaky(k)}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(SRC),
        OPSCREEN_CACHE_DIR=str(tmp_path / "cache"),
    )
    return work, env


@pytest.mark.timeout(900)  # the sample suite on two CPU lanes takes minutes on a loaded machine
@pytest.mark.parametrize("line,expected", _params())
def test_readme_example(line, expected, workdir):
    work, env = workdir
    res = subprocess.run(
        ["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL
    )
    assert res.returncode == expected, (
        f"README example exited {res.returncode}, expected {expected}: {line}\n"
        f"--- stdout (end)\n{res.stdout[-4000:]}\n--- stderr (end)\n{res.stderr[-4000:]}"
    )

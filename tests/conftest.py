from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def run_cli(*args, env=None, cwd=None, timeout=300, input=None):
    """Run the real ``opscreen`` CLI in a subprocess (python -m opscreen)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(SRC) + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
    for k in ("OP", "OP_FILE", "TEST_NODE", "DTYPES", "USE_FLAGTUNE", "SHAPE_MODE", "ZL_BACKEND", "REPLAY_FROM", "FLAGGEMS_ROOT"):
        full_env.pop(k, None)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "opscreen", *map(str, args)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def cli():
    return run_cli

# Fixture suites have their own benchmark/ packages and conftests: never collect them here.
collect_ignore = ["fixtures"]

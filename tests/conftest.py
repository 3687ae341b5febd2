from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

#: Variables that steer opscreen or its child (flags win over them, but a test that
#: leaves a flag out would take the shell's value): never inherited by the tests.
LEAKY_PREFIXES = ("OPSCREEN_", "USE_FLAGTUNE")
LEAKY_NAMES = ("OP", "OP_FILE", "TEST_NODE", "DTYPES", "SHAPE_MODE", "REPLAY_FROM", "ZL_BACKEND", "FLAGGEMS_ROOT")
#: Set once the top-level session has scrubbed; a pytest that a test starts (with an
#: environment the test chose) keeps what it was given.
SCRUBBED = "_OPSCREEN_TESTS_ENV_SCRUBBED"
#: What the session sets itself after the scrub (not the shell's): an empty floors dir of its own.
SESSION_SET = ("OPSCREEN_FLOORS_DIR", "OPSCREEN_PEAKS_DIR")


def leaky(name: str) -> bool:
    return name in LEAKY_NAMES or name.startswith(LEAKY_PREFIXES)


def pytest_configure(config):
    """Tests run in a clean environment: drop what the shell set (before any test module is imported)."""
    if os.environ.get(SCRUBBED):
        return
    dropped = sorted(k for k in os.environ if leaky(k))
    for k in dropped:
        del os.environ[k]
    os.environ[SCRUBBED] = ",".join(dropped) or "-"
    # the user's own floors tables (opscreen calibrate) neither decide a test's verdicts nor
    # receive a test's tables: an empty folder of this session's
    import tempfile

    os.environ["OPSCREEN_FLOORS_DIR"] = tempfile.mkdtemp(prefix="opscreen-tests-floors-")
    # nor the user's peaks files (opscreen devices --peaks) a summary's %-of-peak cells
    os.environ["OPSCREEN_PEAKS_DIR"] = tempfile.mkdtemp(prefix="opscreen-tests-peaks-")


def pytest_report_header(config):
    dropped = os.environ.get(SCRUBBED, "-")
    return f"environment scrubbed of: {dropped.replace(',', ' ') if dropped != '-' else '(nothing set)'}"


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

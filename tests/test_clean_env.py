"""The tests run in a clean environment: nothing of the shell's opscreen settings leaks in."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import LEAKY_NAMES, ROOT, SCRUBBED, SESSION_SET, leaky

SHELL_SETTINGS = {
    "OPSCREEN_TIMER": "graph",
    "OPSCREEN_MAX_TIME": "0.001",
    "OPSCREEN_CURATED_SHAPES": "/nonexistent.yaml",
    "USE_FLAGTUNE": "1",
    "USE_FLAGTUNE_COST_MODEL": "1",
    "OPSCREEN_FLOORS_DIR": "/a/users/own/tables",
    **{name: "x" for name in LEAKY_NAMES},
}


def test_environment_is_clean():
    """Also the probe that the child session below runs."""
    assert not sorted(k for k in os.environ if leaky(k) and k not in SESSION_SET)
    assert os.environ.get(SCRUBBED)
    assert os.path.isdir(os.environ["OPSCREEN_FLOORS_DIR"]) and not os.listdir(os.environ["OPSCREEN_FLOORS_DIR"])


def test_a_shell_setting_does_not_reach_the_tests(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != SCRUBBED and k not in SESSION_SET}  # a fresh shell
    env.update(SHELL_SETTINGS)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"{ROOT / 'tests' / 'test_clean_env.py'}::test_environment_is_clean"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout + res.stderr
    assert "environment scrubbed of: DTYPES FLAGGEMS_ROOT OP OPSCREEN_CURATED_SHAPES" in res.stdout, res.stdout

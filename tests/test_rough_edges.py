"""Issue 34: rough edges and reliability findings, each with a test that fails without its fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import SRC


def cli_into_closed_pipe(*args, cwd=None, env=None, timeout=120):
    """The real CLI with stdout a pipe whose reader is gone (``opscreen ... | true``):
    every write to it fails with EPIPE, deterministically."""
    r, w = os.pipe()
    os.close(r)
    full_env = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    try:
        return subprocess.run([sys.executable, "-m", "opscreen", *map(str, args)], stdout=w,
                              stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    finally:
        os.close(w)


# -- item 1: a closed pipe is a quiet exit ------------------------------------------------------


@pytest.mark.parametrize("args", [["backends", "--json"], ["backends"], ["devices", "--json"], ["shapes", "check"]],
                         ids=["backends-json", "backends", "devices-json", "shapes-check"])
def test_output_into_a_closed_pipe_exits_quietly(args, tmp_path):
    res = cli_into_closed_pipe(*args, cwd=tmp_path)
    assert res.returncode == 141, res.stderr  # 128 + SIGPIPE, as the shell reports for `yes | head -1`
    assert res.stderr == ""

"""``--input-seed``: every process draws the same inputs (``opscreen.child.inputs``).

A small suite in FlagGems' layout, run with real CPU torch through ``opscreen run``:
each op draws its "inputs" from torch's and Python's generators, times an op that
itself draws random numbers (a varying number of times: the wall-clock timer adapts
its sample count to the noise) through the suite's ``do_bench``, which opscreen's
timing plugin replaces, then draws the next case's inputs. The ops print what they
drew into their ``run.log``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from test_op_e2e import CONFTEST  # noqa: E402 - the options opscreen passes a FlagGems-layout suite

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

BASE = '''
import time


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3
'''

TESTS = '''
import json
import random

import pytest
import torch

from . import base


def draws(op):
    first = torch.rand(3).tolist()
    py = random.random()
    base.do_bench(lambda: torch.rand(4096).sum())  # an op that draws, as dropout does
    second = torch.rand(3).tolist()  # the next case's inputs
    print("DRAWS " + json.dumps({"op": op, "first": first, "random": py, "second": second}))


@pytest.mark.draw_a
def test_draw_a():
    torch.rand(7)  # this op draws more before its first case than draw_b does
    draws("draw_a")


@pytest.mark.draw_b
def test_draw_b():
    draws("draw_b")
'''


@pytest.fixture
def suite(tmp_path):
    root = tmp_path / "suite"
    (root / "benchmark").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    draw_a\n    draw_b\n")
    (root / "benchmark" / "__init__.py").write_text("")
    (root / "benchmark" / "conftest.py").write_text(CONFTEST)
    (root / "benchmark" / "base.py").write_text(BASE)
    (root / "benchmark" / "test_draw.py").write_text(TESTS)
    return root


def screen(suite: Path, out: Path, *args: str) -> dict:
    """Run ``draw_a,draw_b`` and return what each op drew: op -> its DRAWS line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCREEN_")}
    env.update({"PYTHONPATH": str(SRC), "PYTHONDONTWRITEBYTECODE": "1",
                "OPSCREEN_CACHE_DIR": str(out.parent / "cache")})
    res = subprocess.run([sys.executable, "-m", "opscreen", "run", "--suite", str(suite), "--backend", "cpu",
                          "--ops", "draw_a,draw_b", "--devices", "0", "--no-steal", "--out", str(out), "--plain",
                          "--timeout", "120", *args],
                         env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    got = {}
    for op in ("draw_a", "draw_b"):
        log = (out / "ops" / op / "run.log")
        lines = [ln for ln in log.read_text().splitlines() if "DRAWS {" in ln] if log.exists() else []
        assert len(lines) == 1, (op, res.stdout[-2000:], res.stderr[-2000:])
        got[op] = json.loads(lines[0].split("DRAWS ", 1)[1])
    return got


def test_every_process_draws_the_same_inputs(suite, tmp_path):
    a = screen(suite, tmp_path / "a", "--isolation", "op")
    b = screen(suite, tmp_path / "b", "--isolation", "op")
    w = screen(suite, tmp_path / "w", "--isolation", "worker")
    ident = json.loads((tmp_path / "w" / "ops" / "draw_b" / "run_identity.json").read_text())
    assert ident["isolation"] == "worker" and ident["input_seed"] == "0" and ident["caliber"]["input_seed"] == "0"
    # two fresh processes, and a warm worker's second op, draw what a fresh process draws
    assert a == b == w
    # the seed is set before every test: an op that drew more before its first case
    # does not move what the next op draws, and both start from one state
    assert a["draw_a"]["first"] != a["draw_b"]["first"]  # draw_a drew 7 numbers first
    # after the measurement the generators start again from the seed: what the timed op
    # drew (a number of calls the timer chose) does not reach the next case
    assert a["draw_b"]["second"] == a["draw_b"]["first"] == a["draw_a"]["second"]


def test_input_seed_off_leaves_the_suites_randomness(suite, tmp_path):
    a = screen(suite, tmp_path / "a", "--input-seed", "off")
    b = screen(suite, tmp_path / "b", "--input-seed", "off")
    assert a["draw_b"]["first"] != b["draw_b"]["first"]
    assert a["draw_b"]["second"] != a["draw_b"]["first"]
    s = screen(suite, tmp_path / "s", "--input-seed", "7")
    t = screen(suite, tmp_path / "t", "--input-seed", "0")
    assert s["draw_b"]["first"] != t["draw_b"]["first"]
    ident = json.loads((tmp_path / "a" / "run_identity.json").read_text())
    assert ident["settings"]["input_seed"] == "off" and ident["caliber"]["input_seed"] == "off"


@pytest.mark.parametrize("value", ["-1", "4294967296", "seven", "1.5"])
def test_a_bad_input_seed_is_refused_before_anything_is_written(suite, tmp_path, value):
    out = tmp_path / "bad"
    res = subprocess.run([sys.executable, "-m", "opscreen", "run", "--suite", str(suite), "--backend", "cpu",
                          "--ops", "draw_a", "--out", str(out), "--plain", "--input-seed", value],
                         env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "--input-seed" in err[0] and "off" in err[0], err
    assert not out.exists()

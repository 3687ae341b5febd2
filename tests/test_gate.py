"""The pull-request gate of docs/ci/opscreen-gate.yml, run on the CPU.

The workflow's own ``run:`` steps (parsed from the YAML, the GitHub expressions put in)
run in a workspace laid out as the job's: ``suite/`` is a git repository made from a copy
of the bundled sample suite with one commit on top, ``opscreen/`` is this checkout and
``.opscreen/bin`` holds this test's ``opscreen``. Only the runs' arguments differ from the
job's (``OPSCREEN_RUN_ARGS``: the CPU, one lane) and, for the noise of a shared 2-core
host, ``FAIL_ON_PCT``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, SRC

WORKFLOW = ROOT / "docs" / "ci" / "opscreen-gate.yml"
SAMPLE = SRC / "opscreen" / "sample_suite"
RELU = "    return torch.clamp_min(x, 0)\n"
SLOW_RELU = "    for _ in range(40):\n        y = torch.clamp_min(x, 0)\n    return y\n"


def git(root: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()


def workflow_steps() -> tuple[dict, list[dict]]:
    flow = yaml.safe_load(WORKFLOW.read_text())
    return flow.get("env", {}), flow["jobs"]["gate"]["steps"]


def gate_step() -> str:
    """The step that screens and compares: the only one that runs opscreen."""
    _, steps = workflow_steps()
    runs = [s["run"] for s in steps if "run" in s and "opscreen-gate.sh" in s["run"]]
    assert len(runs) == 1, steps
    return runs[0]


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    suite = ws / "suite"
    shutil.copytree(SAMPLE, suite, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "result_*.log"))
    git(suite, "init", "-q", "-b", "main")
    git(suite, "add", "-A")
    git(suite, "commit", "-q", "-m", "base")
    (ws / "opscreen").symlink_to(ROOT)
    bin_dir = ws / ".opscreen" / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "opscreen"
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={SRC} exec {sys.executable} -m opscreen \"$@\"\n")
    exe.chmod(0o755)
    return ws


def head_commit(ws: Path, edits: dict[str, tuple[str, str]]) -> str:
    """A pull request's head: ``edits`` (path -> (old, new)) on top of the base; the base's sha."""
    suite = ws / "suite"
    base = git(suite, "rev-parse", "HEAD")
    git(suite, "checkout", "-q", "-b", "pr")
    for rel, (old, new) in edits.items():
        p = suite / rel
        text = p.read_text()
        assert old in text, (rel, old)
        p.write_text(text.replace(old, new))
    git(suite, "commit", "-q", "-am", "the pull request")
    return base


def run_gate(ws: Path, base: str, fail_on: str, **extra: str) -> subprocess.CompletedProcess:
    env_block, _ = workflow_steps()
    script = gate_step().replace("${{ github.event.pull_request.base.sha }}", base)
    assert "${{" not in script, script
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPSCREEN_")}
    env.update({k: str(v) for k, v in env_block.items()})
    env.update({"FAIL_ON_PCT": fail_on, "OPSCREEN_RUN_ARGS": "--backend cpu --devices 0",
                "OPSCREEN_CACHE_DIR": str(ws / "cache"), "OPSCREEN_FLOORS_DIR": os.environ.get("OPSCREEN_FLOORS_DIR", "")})
    env.update(extra)
    return subprocess.run(["bash", "-e", "-c", script], cwd=ws, env=env, capture_output=True, text=True, timeout=600)


def selected_ops(ws: Path, name: str = "ops.txt") -> list[str]:
    return [line for line in (ws / "gate" / name).read_text().splitlines() if line and not line.startswith("#")]


def test_the_workflow_runs_the_gate_script_on_the_base_sha():
    step = gate_step()
    assert "opscreen/scripts/opscreen-gate.sh" in step and "github.event.pull_request.base.sha" in step
    assert "$FAIL_ON_PCT" in step and "-- $OPSCREEN_RUN_ARGS" in step
    assert (ROOT / "scripts" / "opscreen-gate.sh").is_file()
    _, steps = workflow_steps()
    checkout = next(s for s in steps if s.get("with", {}).get("path") == "suite")
    assert checkout["with"]["fetch-depth"] == 0  # --changed-since needs the base in the head's history


def test_a_pull_request_that_slows_one_op_fails_the_gate(workspace):
    base = head_commit(workspace, {"src/minigems/__init__.py": (RELU, SLOW_RELU)})
    r = run_gate(workspace, base, "50")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert selected_ops(workspace) == ["relu"] and selected_ops(workspace, "base-ops.txt") == ["relu"]
    assert "src/minigems/__init__.py (names _relu): relu" in r.stderr
    assert "FAIL" in r.stdout and (workspace / "gate" / "compare.csv").is_file()
    assert not (workspace / "gate" / "head-resolve").exists()  # a called regression needs no resolve round
    for side in ("head", "base"):
        status = (workspace / "gate" / side / "ops_status.csv").read_text().splitlines()
        assert len(status) == 2 and status[1].startswith("relu,"), status


def test_a_pull_request_that_touches_no_op_passes_without_a_screen(workspace):
    base = head_commit(workspace, {"benchmark/test_abs.py": ("import pytest", "import pytest  # the abs benchmarks")})
    r = run_gate(workspace, base, "5")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "nothing to gate" in r.stderr and "only comments or layout" in r.stderr
    assert selected_ops(workspace) == []
    assert not (workspace / "gate" / "head").exists() and not (workspace / "gate" / "base").exists()


def test_an_op_the_pull_request_adds_is_screened_on_the_head_only(workspace):
    new_test = (SAMPLE / "benchmark" / "test_relu.py").read_text().replace("mark.relu", "mark.relu_twice")
    suite = workspace / "suite"
    base = git(suite, "rev-parse", "HEAD")
    git(suite, "checkout", "-q", "-b", "pr")
    (suite / "benchmark" / "test_relu_twice.py").write_text(new_test.replace("def test_relu", "def test_relu_twice"))
    git(suite, "add", "-A")
    git(suite, "commit", "-q", "-m", "relu_twice")
    r = run_gate(workspace, base, "50")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert selected_ops(workspace) == ["relu_twice"]
    assert "1 ops are new in the head (no base to compare): relu_twice" in r.stderr
    assert "every selected op is new in the head" in r.stderr


def test_rows_left_unresolved_are_screened_again_in_more_processes(workspace):
    """A change that keeps relu's speed: on a shared CPU its rows come out unresolved, so the
    gate runs relu again in RESOLVE_REPEATS fresh processes on both sides and that comparison
    (a test over processes) decides; the workflow turns the round on."""
    env_block, _ = workflow_steps()
    assert int(env_block["RESOLVE_REPEATS"]) >= 2
    base = head_commit(workspace, {"src/minigems/__init__.py": (RELU, "    y = torch.clamp_min(x, 0)\n    return y\n")})
    r = run_gate(workspace, base, "50", RESOLVE_REPEATS="2")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    gate = workspace / "gate"
    assert selected_ops(workspace) == ["relu"] and selected_ops(workspace, "unresolved.txt") == ["relu"]
    assert "== resolve: the ops with unresolved rows again, 2 fresh processes each" in r.stdout
    for side in ("base", "head"):
        ident = yaml.safe_load((gate / f"{side}-resolve" / "run_identity.json").read_text())
        assert ident["caliber"]["repeats"] == 2 and ident["caliber"]["isolation"] == "op", ident["caliber"]
    text = (gate / "compare-resolve.csv").read_text()
    assert text.count("\nrelu,") == text.count("\n") - 1 > 0  # relu's rows only
    assert "basis" in text.splitlines()[0] and ",repeats," in text  # judged over processes
    bad = run_gate(workspace, base, "50", RESOLVE_REPEATS="two")
    assert bad.returncode == 2 and "RESOLVE_REPEATS=two" in bad.stderr

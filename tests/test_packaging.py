"""Packaging: what a wheel ships, and an installed (non-editable) opscreen outside a checkout.

The wheel is built from a copy of the tree (nothing is written into the checkout) with
this interpreter's setuptools (``--no-build-isolation``: no download) and installed
with ``pip install --target`` into a temporary folder; the commands then run with that
folder alone on ``PYTHONPATH`` from a folder outside any checkout, so neither this
worktree's ``src`` nor a ``ops/`` folder can be found by walking up from the package.
"""

from __future__ import annotations

import email
import fnmatch
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import opscreen

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "src" / "opscreen"
DATA = PKG / "assets" / "data"
DEFAULT_ASSETS = {"shapes.yaml", "shapes.sample.yaml", "dismiss.yaml", "flaggems-inventory.yaml"}
# Not part of the package: bytecode, caches, and the result logs the sample suite writes.
NOT_SHIPPED = ("__pycache__", "*.pyc", ".pytest_cache", "result*.log", "*.egg-info")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_files() -> set[str]:
    """Every file of src/opscreen that belongs in a wheel, relative to src/."""
    out = set()
    for p in PKG.rglob("*"):
        rel = p.relative_to(ROOT / "src")
        if p.is_file() and not any(fnmatch.fnmatch(part, pat) for part in rel.parts for pat in NOT_SHIPPED):
            out.add(rel.as_posix())
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("wheel")
    tree = base / "tree"
    (tree / "src").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(PKG, tree / "src" / "opscreen", ignore=shutil.ignore_patterns(*NOT_SHIPPED))
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(base / "dist"), str(tree)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = (base / "dist").glob("opscreen-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The wheel installed with pip into a folder of its own (no dependencies: this venv has them)."""
    site = tmp_path_factory.mktemp("site")
    res = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    return site


def _opscreen(site: Path, cwd: Path, *args, env=None):
    full = dict(os.environ, PYTHONPATH=str(site), OPSCREEN_CACHE_DIR=str(cwd / ".cache"), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "opscreen", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, env=full, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip


# --------------------------------------------------------------------------- metadata


def test_one_version_spdx_license():
    project = _pyproject()["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "opscreen.__version__"}
    assert project["license"] == "Apache-2.0"  # an SPDX expression, not the deprecated table
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    req = _pyproject()["build-system"]["requires"]
    assert req == ["setuptools>=77"], "an SPDX license string needs setuptools >= 77"


def test_package_data_patterns_each_name_files():
    """No pattern that names nothing (the old ``data/*``), and every default asset is covered."""
    patterns = _pyproject()["tool"]["setuptools"]["package-data"]["opscreen"]
    for pat in patterns:
        assert [p for p in PKG.glob(pat) if p.is_file()], f"package-data pattern {pat!r} names no file"
    assert {p.name for p in DATA.iterdir()} == DEFAULT_ASSETS | {"floors"}
    assert sorted(p.name for p in (DATA / "floors").iterdir()) == ["nvidia-h100-80gb-hbm3.json", "nvidia-h200.json"]  # the floors tables shipped
    assert (ROOT / "ops").is_symlink() and (ROOT / "ops").resolve() == DATA, "ops/ is a link to the shipped assets, one copy"


def test_wheel_ships_the_package_whole(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(zf.read(f"{dist_info}/METADATA"))
    missing = _package_files() - names
    assert not missing, sorted(missing)
    assert "opscreen/py.typed" in names
    assert {f"opscreen/assets/data/{n}" for n in DEFAULT_ASSETS} <= names
    assert {"opscreen/assets/data/floors/nvidia-h200.json", "opscreen/assets/data/floors/nvidia-h100-80gb-hbm3.json"} <= names
    from opscreen.contracts import CONTRACTS

    assert {f"opscreen/schemas/{c.schema_file()}" for c in CONTRACTS} <= names  # the contracts' JSON Schemas
    assert f"{dist_info}/licenses/LICENSE" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert meta["Version"] == opscreen.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    extras = meta.get_all("Provides-Extra")
    assert {"suite", "test"} <= set(extras)
    suite_reqs = [r for r in meta.get_all("Requires-Dist") if "extra == \"suite\"" in r]
    assert any(r.startswith("numpy") for r in suite_reqs), suite_reqs  # torch warns at import without it
    assert any(r.startswith("pytest") for r in suite_reqs), suite_reqs


# --------------------------------------------------------------------------- installed, outside a checkout


def test_installed_finds_its_default_assets(installed, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    probe = subprocess.run(
        [sys.executable, "-c", "import opscreen; print(opscreen.__file__)"],
        capture_output=True, text=True, cwd=work, env=dict(os.environ, PYTHONPATH=str(installed)),
    )  # fmt: skip
    assert Path(probe.stdout.strip()).parent == installed / "opscreen", probe.stdout + probe.stderr
    data = installed / "opscreen" / "assets" / "data"

    res = _opscreen(installed, work, "shapes", "check", "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"shape file: {data / 'shapes.sample.yaml'}" in res.stdout

    res = _opscreen(installed, work, "shapes", "check", "-q", "--suite", installed / "opscreen" / "sample_suite")
    assert res.returncode == 0, res.stdout + res.stderr

    res = _opscreen(installed, work, "dismiss", "check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith(f"{data / 'dismiss.yaml'}: 0 dismissed op(s)")

    res = _opscreen(installed, work, "op", "abs", "--shape-mode", "curated", "--out", work / "abs")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    assert f"# curated: {data / 'shapes.sample.yaml'}" in (work / "abs" / "shapes.merged.yaml").read_text()


def test_installed_run_applies_the_default_dismiss_list(installed, tmp_path):
    """The shipped dismiss list applies outside a checkout; when it is missing, run says so."""
    data = installed / "opscreen" / "assets" / "data"
    shipped = (data / "dismiss.yaml").read_text()
    work = tmp_path / "work"
    work.mkdir()
    try:
        (data / "dismiss.yaml").write_text("- op: abs\n  reason: kept out for this test\n  date: 2026-01-01\n")
        res = _opscreen(installed, work, "run", "--backend", "cpu", "--devices", "0", "--plain", "--ops", "abs", "--out", work / "r1")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr
        assert "abs,dismissed," in (work / "r1" / "ops_status.csv").read_text()
        assert "no default dismiss list" not in res.stdout + res.stderr

        (data / "dismiss.yaml").unlink()
        res = _opscreen(installed, work, "run", "--backend", "cpu", "--devices", "0", "--plain", "--ops", "abs", "--out", work / "r2")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr
        assert f"opscreen: no default dismiss list ({data / 'dismiss.yaml'} is missing): no op dismissed" in res.stderr
        assert "abs,passed," in (work / "r2" / "ops_status.csv").read_text()

        res = _opscreen(installed, work, "dismiss", "check")
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "is missing from this installation" in res.stderr, res.stderr
    finally:
        (data / "dismiss.yaml").write_text(shipped)


# --------------------------------------------------------------------------- scripts/_venv.sh


def _venv_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of scripts/ and pyproject.toml whose .venv/bin/python logs its arguments.

    The interpreter is a stand-in (creating a real venv with torch takes minutes; .ci/run
    does that on a clean checkout): what is under test is which pip commands the script runs.
    """
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "scripts", tree / "scripts")
    shutil.copy2(ROOT / "pyproject.toml", tree / "pyproject.toml")
    py = tree / ".venv" / "bin" / "python"
    py.parent.mkdir(parents=True)
    log = tmp_path / "python.log"
    py.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexit 0\n')
    py.chmod(0o755)
    return tree, log


def _source_venv(tree: Path, env=None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPSCREEN_")}
    return subprocess.run(
        ["bash", "-c", 'source scripts/_venv.sh && echo "PATH=$PATH"'],
        cwd=tree, capture_output=True, text=True, timeout=60, env={**clean, **(env or {})},
    )  # fmt: skip


def test_venv_one_install_with_suite_extras_and_pinned_torch(tmp_path):
    """demo.sh and test.sh share .venv: one pip command installs the extras the sample
    suite needs (pytest, numpy) with torch pinned in the same command; sourcing the
    script again (the other script, a second demo) installs nothing."""
    tree, log = _venv_tree(tmp_path)
    res = _source_venv(tree)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"PATH={tree}/.venv/bin:" in res.stdout
    installs = [line for line in log.read_text().splitlines() if line.startswith("-m pip install")]
    assert len(installs) == 1, installs
    words = installs[0].split()
    assert "torch==2.13.0" in words and "-e" in words and ".[suite,test]" in words, installs
    assert not any(w == "torch" or w.startswith("torch") and "==" not in w for w in words), "torch unpinned"
    # the import check runs after the install, with the suite's modules
    checks = [line for line in log.read_text().splitlines() if line.startswith("-c ")]
    assert checks and all(m in checks[-1] for m in ("pytest", "numpy", "torch", "opscreen")), checks

    log.write_text("")
    for _ in range(2):  # test.sh then demo.sh (they source the same script)
        res = _source_venv(tree)
        assert res.returncode == 0, res.stdout + res.stderr
    assert log.read_text() == "", "reinstalled although nothing changed"

    with open(tree / "pyproject.toml", "a") as fh:  # a changed dependency list installs again
        fh.write("\n# changed\n")
    res = _source_venv(tree)
    assert res.returncode == 0 and log.read_text().count("-m pip install") == 1, log.read_text()

    log.write_text("")  # another torch pin installs again
    res = _source_venv(tree, env={"OPSCREEN_TORCH_SPEC": "torch==2.12.0"})
    assert res.returncode == 0 and "torch==2.12.0" in log.read_text(), log.read_text()


def test_venv_failed_install_stops_and_leaves_no_stamp(tmp_path):
    tree, log = _venv_tree(tmp_path)
    py = tree / ".venv" / "bin" / "python"
    py.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\ncase "$1" in -c) exit 1 ;; esac\nexit 0\n')
    res = _source_venv(tree)
    assert res.returncode == 1 and "into .venv failed" in res.stderr, res.stdout + res.stderr
    assert not (tree / ".venv" / ".opscreen-installed").exists()
    res = _source_venv(tree)
    assert res.returncode == 1 and log.read_text().count("-m pip install") == 2  # tried again, not stamped

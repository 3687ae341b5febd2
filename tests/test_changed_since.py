"""``opscreen run --changed-since REV``: the op selection on a synthetic git history.

A tiny library in FlagGems' layout (``src/flag_gems`` with a ``_FULL_CONFIG`` registry,
``ops/`` re-exported by an aggregator ``ops/__init__.py``, a shared ``utils`` module, a
vendor override under ``runtime/backend/_vendor``, a tuning YAML) and a ``benchmark/``
directory, then one commit per kind of change, each checked against the ops it must
select. Nothing of it is imported: the selection reads git and parses source.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from opscreen.errors import UsageError
from opscreen.providers import changes
from opscreen.providers.flaggems import Suite

FILES = {
    "src/flag_gems/__init__.py": '''
from flag_gems import runtime
from flag_gems.ops import *  # noqa: F403

_FULL_CONFIG = (
    ("abs", abs),
    ("relu", relu),
    ("add.Tensor", add),
    ("add.Scalar", add_scalar),
    ("mul.Tensor", mul),
)


def use_gems():
    return len(_FULL_CONFIG)


def unused_helper():
    return 1
''',
    "src/flag_gems/ops/__init__.py": '''
from flag_gems.ops.abs import abs
from flag_gems.ops.add import add, add_scalar
from flag_gems.ops.mul import mul
from flag_gems.ops.relu import relu

__all__ = ["abs", "add", "add_scalar", "mul", "relu"]
''',
    "src/flag_gems/ops/abs.py": "def abs(x):\n    return x if x >= 0 else -x\n",
    "src/flag_gems/ops/relu.py": '''
from flag_gems.utils import launch


def relu(x):
    return launch(max, x, 0)
''',
    "src/flag_gems/ops/add.py": '''
from flag_gems import runtime
from flag_gems.utils import launch

CONFIG = runtime.get_tuned_config("add")


def add(a, b):
    return launch(lambda u, v: u + v, a, b) if CONFIG else a + b


def add_scalar(a, b):
    return a + b
''',
    "src/flag_gems/ops/mul.py": "def mul(a, b):\n    return a * b\n",
    "src/flag_gems/utils/__init__.py": "from flag_gems.utils.shared import launch\n",
    "src/flag_gems/utils/shared.py": "def launch(f, *args):\n    return f(*args)\n",
    "src/flag_gems/runtime/__init__.py": "def get_tuned_config(name):\n    return {}\n",
    "src/flag_gems/runtime/backend/_vendor/__init__.py": "",
    "src/flag_gems/runtime/backend/_vendor/ops/__init__.py": "import os\n\nif os.environ.get('VENDOR_OPS', '1') == '1':\n    from .relu import relu\n",
    "src/flag_gems/runtime/backend/_vendor/ops/relu.py": "def relu(x):\n    return x * (x > 0)\n",
    "src/flag_gems/runtime/backend/_vendor/tune_configs.yaml": "add:\n  - BLOCK: 128\nmul:\n  - BLOCK: 64\n",
    "benchmark/__init__.py": "",
    "benchmark/conftest.py": "def pytest_configure(config):\n    pass\n",
    "benchmark/base.py": '''
import flag_gems


class Bench:
    def __init__(self, op_name, torch_op):
        self.op_name, self.torch_op = op_name, torch_op

    def run(self):
        with flag_gems.use_gems():
            return self.torch_op
''',
    "benchmark/test_abs.py": '''
import pytest
import torch

from . import base


@pytest.mark.abs
def test_abs():
    base.Bench(op_name="abs", torch_op=torch.abs).run()
''',
    "benchmark/test_relu.py": '''
import pytest
import torch

from . import base


@pytest.mark.relu
def test_relu():
    base.Bench(op_name="relu", torch_op=torch.relu).run()
''',
    "benchmark/test_add.py": '''
import pytest
import torch

from . import base


@pytest.mark.add
def test_add():
    base.Bench(op_name="add", torch_op=torch.add).run()


@pytest.mark.add_scalar
def test_add_scalar():
    base.Bench(op_name="add_scalar", torch_op=lambda a, b: a.add(b)).run()
''',
    "benchmark/test_mul.py": '''
import pytest

from . import base


@pytest.mark.mul
def test_mul():
    base.Bench(op_name="mul", torch_op=lambda a, b: a * b).run()
''',
    "README.md": "a tiny library\n",
}


def git(root: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()


def commit(root: Path, message: str, edits: dict[str, str]) -> str:
    for rel, text in edits.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


@pytest.fixture
def lib(tmp_path, monkeypatch):
    monkeypatch.setenv("OPSCREEN_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "lib"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "init", FILES)
    return root


def selected(root: Path, rev: str = "HEAD~1") -> changes.Selection:
    return changes.select(Suite.locate(str(root)), rev)


def edit(root: Path, rel: str, old: str, new: str) -> dict[str, str]:
    text = (root / rel).read_text()
    assert old in text, (rel, old)
    return {rel: text.replace(old, new)}


def test_a_change_to_one_op_selects_that_op(lib):
    commit(lib, "abs: faster", edit(lib, "src/flag_gems/ops/abs.py", "x if x >= 0 else -x", "max(x, -x)"))
    sel = selected(lib)
    assert sel.ops == ["abs"]
    assert sel.why == {"abs": ["src/flag_gems/ops/abs.py"]}
    lines = changes.report_lines(sel)
    assert any("src/flag_gems/ops/abs.py (names abs): abs" in line for line in lines), lines
    assert lines[-1] == "selected 1 of 5 ops: abs"


def test_a_change_to_shared_code_selects_every_op_that_imports_it_and_says_so(lib):
    commit(lib, "launch: checks", edit(lib, "src/flag_gems/utils/shared.py", "return f(*args)", "return f(*args) if args else None"))
    sel = selected(lib)
    # add and relu call launch; add_scalar's test calls a.add (the add.* registrations: add); abs and mul do not
    assert sel.ops == ["add", "add_scalar", "relu"]
    lines = changes.report_lines(sel)
    shared = [line for line in lines if line.strip().startswith("shared code:")]
    assert len(shared) == 1 and "src/flag_gems/utils/shared.py" in shared[0] and "3 of 5 ops" in shared[0], lines


def test_module_level_code_of_a_shared_module_selects_its_importers_whole(lib):
    text = (lib / "src/flag_gems/utils/shared.py").read_text()
    commit(lib, "shared: a side effect", {"src/flag_gems/utils/shared.py": "print('loaded')\n" + text})
    assert selected(lib).ops == ["add", "add_scalar", "relu"]


def test_a_change_to_a_benchmark_test_selects_the_ops_of_that_test_only(lib):
    commit(lib, "bench add: a comment", edit(lib, "benchmark/test_add.py", "def test_add():", "def test_add():  # add.Tensor"))
    sel = selected(lib)
    assert sel.ops == []  # only a comment: the same tree
    assert any("only comments or layout" in line for line in changes.report_lines(sel))
    commit(lib, "bench add", edit(lib, "benchmark/test_add.py", "torch_op=torch.add)", "torch_op=lambda a, b: torch.add(a, b))"))
    assert selected(lib).ops == ["add"]


def test_the_benchmark_base_and_conftest_are_every_ops(lib):
    commit(lib, "base", edit(lib, "benchmark/base.py", "return self.torch_op", "return self.torch_op, self.op_name"))
    assert selected(lib).ops == ["abs", "add", "add_scalar", "mul", "relu"]
    commit(lib, "conftest", edit(lib, "benchmark/conftest.py", "pass", "config.x = 1"))
    sel = selected(lib)
    assert len(sel.ops) == 5 and any("read by every op's screen" in line for line in changes.report_lines(sel))


def test_a_registration_change_selects_the_ops_of_that_aten_name(lib):
    commit(lib, "register add.Scalar to add", edit(lib, "src/flag_gems/__init__.py", '("add.Scalar", add_scalar)', '("add.Scalar", add)'))
    sel = selected(lib)
    assert sel.ops == ["add", "add_scalar"]  # torch.add's test reaches every add.* entry
    assert any("registrations add.Scalar" in line for line in changes.report_lines(sel))


def test_a_root_function_no_op_uses_selects_nothing_and_says_so(lib):
    commit(lib, "helper", edit(lib, "src/flag_gems/__init__.py", "return 1", "return 2"))
    sel = selected(lib)
    assert sel.ops == []
    assert any("no op depends on what changed" in line for line in changes.report_lines(sel))
    commit(lib, "use_gems", edit(lib, "src/flag_gems/__init__.py", "return len(_FULL_CONFIG)", "return 0"))
    assert len(selected(lib).ops) == 5  # every benchmark runs under use_gems (benchmark/base.py)


def test_a_vendor_override_and_a_tuning_key_select_their_ops(lib):
    commit(lib, "vendor relu", edit(lib, "src/flag_gems/runtime/backend/_vendor/ops/relu.py", "x * (x > 0)", "x.clamp(0)"))
    assert selected(lib).ops == ["relu"]
    commit(lib, "tune add", edit(lib, "src/flag_gems/runtime/backend/_vendor/tune_configs.yaml", "BLOCK: 128", "BLOCK: 256"))
    sel = selected(lib)
    assert sel.ops == ["add", "add_scalar"]  # the key add is read by ops/add.py's CONFIG, which add uses
    assert any("config keys add" in line for line in changes.report_lines(sel))


def test_a_change_outside_the_library_selects_nothing(lib):
    commit(lib, "docs", {"README.md": "a tiny library, documented\n", "docs/x.md": "x\n"})
    sel = selected(lib)
    assert sel.ops == []
    assert any("2 files outside the library" in line for line in changes.report_lines(sel))
    assert "nothing to screen" in changes.nothing_selected(sel) and "--ops" in changes.nothing_selected(sel)


def test_a_range_of_commits_joins_their_changes(lib):
    first = git(lib, "rev-parse", "HEAD")
    commit(lib, "abs", edit(lib, "src/flag_gems/ops/abs.py", "x if x >= 0 else -x", "max(x, -x)"))
    commit(lib, "mul", edit(lib, "src/flag_gems/ops/mul.py", "a * b", "b * a"))
    assert selected(lib, first).ops == ["abs", "mul"]
    assert selected(lib, "HEAD").ops == []


def test_a_bad_rev_or_no_checkout_is_one_usage_error(lib, tmp_path):
    with pytest.raises(UsageError, match="no such commit"):
        selected(lib, "no-such-branch")
    with pytest.raises(UsageError, match="give a commit"):
        selected(lib, "--all")
    copy = tmp_path / "copy"
    shutil.copytree(lib, copy, ignore=shutil.ignore_patterns(".git"))
    with pytest.raises(UsageError, match="not a git checkout"):
        selected(copy, "HEAD")


def test_the_cli_refuses_a_bad_rev_and_writes_nothing(lib, tmp_path, cli):
    out = tmp_path / "run"
    r = cli("run", "--suite", lib, "--changed-since", "nope", "--out", out, "--backend", "cpu",
            "--write-ops", tmp_path / "ops.txt", env={"OPSCREEN_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "no such commit" in r.stderr
    assert not out.exists() and not (tmp_path / "ops.txt").exists()


def test_the_cli_with_nothing_changed_exits_0_and_says_what_to_do(lib, tmp_path, cli):
    commit(lib, "docs", {"README.md": "more\n"})
    out = tmp_path / "run"
    r = cli("run", "--suite", lib, "--changed-since", "HEAD~1", "--out", out, "--backend", "cpu",
            "--write-ops", tmp_path / "ops.txt", env={"OPSCREEN_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert "nothing to screen" in r.stderr and "--ops" in r.stderr
    assert not out.exists()
    assert [line for line in (tmp_path / "ops.txt").read_text().splitlines() if not line.startswith("#")] == []


def test_an_import_added_to_a_vendor_block_selects_only_its_op(lib):
    init = "src/flag_gems/runtime/backend/_vendor/ops/__init__.py"
    commit(lib, "vendor mul", {"src/flag_gems/runtime/backend/_vendor/ops/mul.py": "def mul(a, b):\n    return b * a\n"}
           | edit(lib, init, "    from .relu import relu\n", "    from .relu import relu\n    from .mul import mul\n"))
    sel = selected(lib)
    assert sel.ops == ["mul"]  # relu's line in the same if-block did not change
    assert any(f"{init} (names mul): mul" in line for line in changes.report_lines(sel)), changes.report_lines(sel)

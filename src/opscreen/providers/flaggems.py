"""The FlagGems provider: where the suite is, and which pytest node runs an op.

The op unit is the pytest *marker*, not the file: ``abs_`` lives in
``test_abs.py``, ``where_self`` in ``test_where.py``, and a marker may appear in
several files (``mm`` in ``test_mm.py`` and ``test_blas_perf_parallel.py``).
Resolution, for a name OP:

1. ``TEST_NODE`` given: passed through to pytest as given (validated to stay
   inside the suite).
2. ``OP_FILE`` + ``OP``: ``<file> -m OP``.
3. OP is a marker: the file ``benchmark/test_OP.py`` if it carries the marker,
   else every file that does.
4. OP is a file stem but no marker (``where``, ``unique``): that file, with every
   marker it carries (``-m "where_self or where_self_out"``).
5. Otherwise a one-line error with the nearest known names.

Op names and node ids never reach a shell (argv lists only) and never become a
path outside the output directory (:func:`safe_dir_name`).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..settings import BY_NAME as SETTINGS
from ..errors import UsageError, check_path, shown

SUITE_ENV = SETTINGS["suite"].env  # FLAGGEMS_ROOT: declared once, in opscreen.settings
SAMPLE_SUITE = Path(__file__).resolve().parent.parent / "sample_suite"
BENCH_DIR = "benchmark"

_MARKER_RX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SAFE_RX = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_PY_KEYWORDS = {"and", "or", "not", "True", "False", "None"}
# An op name becomes a file name (benchmark/test_<op>.py, the op's output dir):
# far below the 255-byte limit of one path component, and far above any real marker.
MAX_OP_NAME = 128


def safe_dir_name(name: str) -> str:
    """A directory name for ``name`` that cannot escape its parent."""
    if _SAFE_RX.match(name) and name not in (".", "..") and ".." not in name and len(name) <= 120:
        return name
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).replace("..", "_").strip("._-")
    return cleaned[:120] or "op"


def check_op_name(name: str, what: str = "op") -> str:
    if not name or not _MARKER_RX.match(name) or name in _PY_KEYWORDS:
        raise UsageError(
            f"bad {what} name {shown(name)}: an op is a pytest marker (letters, digits, underscores; "
            "not starting with a digit)"
        )
    if len(name) > MAX_OP_NAME:
        raise UsageError(f"bad {what} name {shown(name, 40)}: an op is a pytest marker of at most {MAX_OP_NAME} characters")
    return name


@dataclass(frozen=True)
class NodeSpec:
    """What pytest is asked to run for one op. ``argv`` goes straight to pytest."""

    op: str
    argv: tuple[str, ...]
    files: tuple[str, ...] = ()
    marker_expr: str | None = None
    node_id: str | None = None
    how: str = "marker"  # marker | op_file | test_node | file_stem

    def describe(self) -> str:
        return " ".join(self.argv)

    def as_dict(self) -> dict:
        return {
            "op": self.op,
            "argv": list(self.argv),
            "files": list(self.files),
            "marker_expr": self.marker_expr,
            "node_id": self.node_id,
            "how": self.how,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "NodeSpec":
        return cls(
            op=d["op"],
            argv=tuple(d["argv"]),
            files=tuple(d.get("files", ())),
            marker_expr=d.get("marker_expr"),
            node_id=d.get("node_id"),
            how=d.get("how", "marker"),
        )


@dataclass
class Suite:
    """A benchmark suite checkout in FlagGems' layout. Lifecycle: built once per
    command from ``--suite``/``FLAGGEMS_ROOT``/the bundled sample suite; the
    marker index is scanned lazily (and cached on disk by the scanner)."""

    root: Path
    python: str = field(default_factory=lambda: sys.executable)
    source: str = "sample"  # --suite | FLAGGEMS_ROOT | sample

    @classmethod
    def locate(cls, flag: str | None = None, env: dict | None = None, python: str | None = None) -> "Suite":
        env = os.environ if env is None else env
        if flag:
            root, source = Path(flag), "--suite"
        elif env.get(SUITE_ENV):
            root, source = Path(env[SUITE_ENV]), SUITE_ENV
        else:
            root, source = SAMPLE_SUITE, "sample"
        check_path(root, source)
        root = root.expanduser().resolve()
        if not (root / BENCH_DIR).is_dir():
            raise UsageError(
                f"suite root {root} has no {BENCH_DIR}/ folder (from {source}); "
                "point --suite or FLAGGEMS_ROOT at a FlagGems checkout"
            )
        python = python or sys.executable
        if os.sep in python and not os.path.isabs(os.path.expanduser(python)):
            # the children start in the suite root: a relative interpreter path would
            # name another file there
            python = os.path.abspath(python)
        return cls(root=root, python=os.path.expanduser(python), source=source)

    @property
    def name(self) -> str:
        return "sample" if self.root == SAMPLE_SUITE.resolve() else self.root.name

    @property
    def library(self) -> str:
        return "minigems" if self.name == "sample" else "flag_gems"

    @cached_property
    def git(self) -> dict:
        """``{"commit", "dirty", "commit_source"}`` of the suite (see opscreen.gitinfo)."""
        from ..gitinfo import suite_revision

        return suite_revision(self.root)

    @cached_property
    def files(self):
        from .markers import scan_suite

        return scan_suite(self.root)

    @cached_property
    def index(self) -> dict[str, list[tuple[str, str]]]:
        from .markers import op_index

        return op_index(self.files)

    def ops(self) -> list[str]:
        return sorted(self.index)

    def file_markers(self, rel: str) -> list[str]:
        for f in self.files:
            if f.path == rel:
                return sorted({m for t in f.tests for m in t.markers})
        return []

    # -- resolution ---------------------------------------------------------
    def resolve(self, op: str | None = None, op_file: str | None = None, test_node: str | None = None) -> NodeSpec:
        if test_node:
            node = self._check_node(test_node)
            label = op or node.split("::")[-1].split("[")[0]
            return NodeSpec(op=safe_dir_name(label), argv=(node,), files=(node.split("::")[0],), node_id=node, how="test_node")
        if not op:
            raise UsageError("no op given: pass OP (argument or $OP), or --test-node/$TEST_NODE")
        check_op_name(op)
        if op_file:
            rel = self._check_file(op_file)
            return NodeSpec(op=op, argv=(rel, "-m", op), files=(rel,), marker_expr=op, how="op_file")
        stem_file = f"{BENCH_DIR}/test_{op}.py"
        hits = self.index.get(op)
        if hits:
            files = sorted({f for f, _ in hits})
            if stem_file in files:
                files = [stem_file]
            return NodeSpec(op=op, argv=(*files, "-m", op), files=tuple(files), marker_expr=op, how="marker")
        if (self.root / stem_file).is_file():
            markers = self.file_markers(stem_file)
            if markers:
                expr = " or ".join(markers)
                return NodeSpec(op=op, argv=(stem_file, "-m", expr), files=(stem_file,), marker_expr=expr, how="file_stem")
        near = difflib.get_close_matches(op, self.ops(), n=5, cutoff=0.6)
        hint = f"; nearest: {', '.join(near)}" if near else ""
        raise UsageError(f"unknown op '{op}' in suite {self.root}{hint}")

    def _check_file(self, op_file: str) -> str:
        p = Path(op_file)
        if p.is_absolute():
            try:
                p = p.resolve().relative_to(self.root)
            except ValueError:
                raise UsageError(f"OP_FILE {op_file} is outside the suite {self.root}") from None
        if len(p.parts) == 1:
            p = Path(BENCH_DIR) / p
        if ".." in p.parts or not p.name.endswith(".py"):
            raise UsageError(f"bad OP_FILE {shown(op_file)}: give a benchmark file such as test_abs.py")
        check_path(self.root / p, "OP_FILE")
        if not (self.root / p).is_file():
            raise UsageError(f"OP_FILE {op_file} not found under {self.root / BENCH_DIR}")
        return p.as_posix()

    def _check_node(self, node: str) -> str:
        if any(c in node for c in "\n\r\0") or node.startswith("-"):
            raise UsageError(f"bad TEST_NODE {node!r}")
        path, sep, rest = node.partition("::")
        rel = self._check_file(path)
        return rel + (sep + rest if sep else "")

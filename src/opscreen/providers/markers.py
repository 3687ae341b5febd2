"""Static scan of a suite's benchmark files: test functions and their op markers.

The unit opscreen schedules is the op *marker* (``pytest benchmark/test_div.py -m
div_out``), not the file. This module finds, without importing anything of the
suite (no torch, no device), which test functions each ``benchmark/test_*.py``
file defines and which non-builtin pytest marks each one carries, the way pytest
would attach them:

* decorators ``@pytest.mark.x``, ``@pytest.mark.x(...)``, ``@mark.x`` (after
  ``from pytest import mark``), stacked in any number, and marks bound to a
  module-level name (``abs_mark = pytest.mark.abs`` then ``@abs_mark``);
* ``pytestmark = pytest.mark.x`` or a list/tuple of marks at module level, and
  ``pytestmark`` / decorators on ``Test*`` classes for their ``test*`` methods;
* ``pytest.param(..., marks=pytest.mark.x)`` (or a list of marks) inside a
  ``parametrize`` argvalues list, also when that list is a module-level name.

Builtin marks (:data:`BUILTIN_MARKS`: parametrize, skip, skipif, xfail,
usefixtures, filterwarnings, timeout, ...) are not op markers. The markers of a
test are listed in pytest's ``iter_markers`` order (the decorator closest to the
``def`` first, then parameter marks, then the class's, then the module's),
duplicates removed, so ``markers[0]`` is what FlagGems' conftest takes as the
op id of a non-parametrized test.

For each test it also records, where statically visible, the benchmark class its
body constructs (source text of the callee, e.g. ``base.UnaryPointwiseBenchmark``)
and the ``dtypes=`` keyword of that constructor as source text (normalised by
``ast.unparse``, e.g. ``consts.FLOAT_DTYPES``).

:func:`scan_suite` caches per-file results as JSON keyed by (path, mtime_ns, size)
and the scanner version, so a warm scan of ~700 files only stats them.

What it cannot see (collection can): tests generated at import time, marks added
by hooks (``pytest_collection_modifyitems``), marks computed by expressions other
than the ones above, and definitions skipped at run time by ``if`` branches (both
branches are scanned).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..settings import checked_cache_root

__all__ = [
    "BUILTIN_MARKS",
    "TestInfo",
    "FileInfo",
    "scan_file",
    "scan_source",
    "scan_suite",
    "suite_files",
    "op_index",
    "default_cache_dir",
    "class_bases",
]

#: Bumped whenever the scan's output for the same source can change (invalidates caches).
SCAN_VERSION = 4

#: Marks that select or configure tests rather than name an op: exactly FlagGems'
#: ``BUILTIN_MARKS`` (benchmark/conftest.py), which are pytest's own plus
#: pytest-timeout's. Plugin marks such as ``repeat`` or ``order`` are deliberately
#: NOT here: FlagGems has an op called ``repeat``.
BUILTIN_MARKS = frozenset(
    {
        "parametrize",
        "skip",
        "skipif",
        "xfail",
        "usefixtures",
        "filterwarnings",
        "timeout",
        "tryfirst",
        "trylast",
    }
)

_MAX_RESOLVE_DEPTH = 8


@dataclass(frozen=True)
class TestInfo:
    """One test function (``name``; ``Class::method`` for methods) and its op markers."""

    __test__ = False  # not a pytest test class

    name: str
    markers: tuple[str, ...]
    lineno: int
    bench_class: str | None
    dtypes_expr: str | None


@dataclass(frozen=True)
class FileInfo:
    """The scan of one file; ``path`` is relative to the suite root (posix form)."""

    path: str
    tests: tuple[TestInfo, ...]
    error: str | None

    @property
    def markers(self) -> tuple[str, ...]:
        """Distinct op markers of the file, in first-seen order."""
        return tuple(dict.fromkeys(m for t in self.tests for m in t.markers))


# --------------------------------------------------------------------------- scanning


class _Module:
    """Name bindings of one module that the mark resolution needs."""

    def __init__(self, tree: ast.Module):
        self.pytest_names: set[str] = set()  # names bound to the pytest module
        self.mark_names: set[str] = set()  # names bound to pytest.mark
        self.param_names: set[str] = set()  # names bound to pytest.param
        self.assigns: dict[str, ast.expr] = {}  # module-level NAME = expr (last wins)
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in _walk_module_level(tree.body):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "pytest":
                        self.pytest_names.add(a.asname or "pytest")
            elif isinstance(node, ast.ImportFrom) and node.module in ("pytest", "_pytest.mark"):
                for a in node.names:
                    if a.name == "mark":
                        self.mark_names.add(a.asname or "mark")
                    elif a.name == "param":
                        self.param_names.add(a.asname or "param")
            elif isinstance(node, ast.Assign):
                for tgt in node.targets:
                    if isinstance(tgt, ast.Name):
                        self.assigns[tgt.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assigns[node.target.id] = node.value
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                prev = self.assigns.get(node.target.id)
                if prev is not None and isinstance(node.op, ast.Add):
                    self.assigns[node.target.id] = ast.BinOp(left=prev, op=ast.Add(), right=node.value)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
        if not self.pytest_names and not self.mark_names:
            # A file that never imports pytest cannot carry marks, except through
            # a conftest-provided name; keep the usual spelling working anyway.
            self.pytest_names.add("pytest")

    # -- marks

    def mark_name(self, node: ast.expr) -> str | None:
        """``pytest.mark.NAME`` / ``mark.NAME`` / ``getattr(pytest.mark, "NAME")`` -> NAME."""
        if isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "mark" and isinstance(base.value, ast.Name):
                if base.value.id in self.pytest_names:
                    return node.attr
            if isinstance(base, ast.Name) and base.id in self.mark_names:
                return node.attr
            return None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and self._is_mark_namespace(node.args[0])
        ):
            return node.args[1].value
        return None

    def _is_mark_namespace(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.mark_names
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "mark"
            and isinstance(node.value, ast.Name)
            and node.value.id in self.pytest_names
        )

    def marks(self, node: ast.expr | None, depth: int = 0) -> list[tuple[str, ast.expr]]:
        """Marks an expression stands for: ``[(name, mark_node)]`` in list order.

        ``mark_node`` is the full mark expression (a Call when the mark has
        arguments), used to look into ``parametrize`` argvalues.
        """
        if node is None or depth > _MAX_RESOLVE_DEPTH:
            return []
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[tuple[str, ast.expr]] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    out.extend(self.marks(elt.value, depth + 1))
                else:
                    out.extend(self.marks(elt, depth + 1))
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.marks(node.left, depth + 1) + self.marks(node.right, depth + 1)
        if isinstance(node, ast.Name):
            value = self.assigns.get(node.id)
            return self.marks(value, depth + 1) if value is not None else []
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            seq = self.assigns.get(node.value.id) if isinstance(node.value, ast.Name) else node.value
            if isinstance(seq, (ast.List, ast.Tuple)) and -len(seq.elts) <= node.slice.value < len(seq.elts):
                return self.marks(seq.elts[node.slice.value], depth + 1)
            return []
        name = self.mark_name(node)
        if name is not None:
            return [(name, node)]
        if isinstance(node, ast.Call):
            func = node.func
            name = self.mark_name(func)
            if name is not None:  # pytest.mark.x(...) or getattr(pytest.mark, "x")
                return [(name, node)]
            if isinstance(func, ast.Attribute) and func.attr == "with_args":
                inner = self.marks(func.value, depth + 1)
                return [(n, node) for n, _ in inner]
            if isinstance(func, ast.Name):  # a mark bound to a name, then called
                inner = self.marks(func, depth + 1)
                if len(inner) == 1:
                    return [(inner[0][0], node)]
        return []

    def param_marks(self, mark_node: ast.expr, depth: int = 0) -> list[str]:
        """Marks of ``pytest.param(..., marks=...)`` entries of a parametrize mark."""
        if not isinstance(mark_node, ast.Call) or depth > _MAX_RESOLVE_DEPTH:
            return []
        argvalues: ast.expr | None = mark_node.args[1] if len(mark_node.args) >= 2 else None
        for kw in mark_node.keywords:
            if kw.arg == "argvalues":
                argvalues = kw.value
        out: list[str] = []
        for value in self._iter_values(argvalues, depth):
            if self._is_param(value):
                for kw in value.keywords:
                    if kw.arg == "marks":
                        out.extend(n for n, _ in self.marks(kw.value, depth + 1))
        return out

    def _iter_values(self, node: ast.expr | None, depth: int) -> Iterable[ast.expr]:
        if node is None or depth > _MAX_RESOLVE_DEPTH:
            return
        if isinstance(node, ast.Name):
            value = self.assigns.get(node.id)
            yield from self._iter_values(value, depth + 1)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    yield from self._iter_values(elt.value, depth + 1)
                else:
                    yield elt
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            yield from self._iter_values(node.left, depth + 1)
            yield from self._iter_values(node.right, depth + 1)
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            yield node.elt

    def _is_param(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Call):
            return False
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "param" and isinstance(f.value, ast.Name):
            return f.value.id in self.pytest_names
        return isinstance(f, ast.Name) and f.id in self.param_names

    def param_values_at(self, mark_node: ast.expr, argname: str) -> list[ast.expr] | None:
        """Values a parametrize mark gives ``argname`` (None when not statically known)."""
        if not isinstance(mark_node, ast.Call) or not mark_node.args:
            return None
        names_node = mark_node.args[0]
        if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
            names = [n.strip() for n in names_node.value.split(",") if n.strip()]
        elif isinstance(names_node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in names_node.elts
        ):
            names = [e.value for e in names_node.elts]  # type: ignore[attr-defined]
        else:
            return None
        if argname not in names:
            return None
        idx = names.index(argname)
        argvalues = mark_node.args[1] if len(mark_node.args) >= 2 else None
        for kw in mark_node.keywords:
            if kw.arg == "argvalues":
                argvalues = kw.value
        out: list[ast.expr] = []
        for value in self._iter_values(argvalues, 0):
            if self._is_param(value):
                args = value.args  # type: ignore[attr-defined]
            elif len(names) == 1:
                args = [value]
            elif isinstance(value, (ast.Tuple, ast.List)):
                args = value.elts
            else:
                return None
            if idx >= len(args) or isinstance(args[idx], ast.Starred):
                return None
            out.append(args[idx])
        return out

    def is_benchmark_class(self, name: str, depth: int = 0) -> bool:
        """A module-local class deriving (transitively) from a ``*Benchmark`` class."""
        cls = self.classes.get(name)
        if cls is None or depth > _MAX_RESOLVE_DEPTH:
            return False
        for b in cls.bases:
            text = _dotted(b)
            if text is None:
                continue
            last = text.rsplit(".", 1)[-1]
            if last.endswith("Benchmark") or self.is_benchmark_class(text, depth + 1):
                return True
        return False


def _walk_module_level(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements, looking into if/try/with blocks (all branches)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _walk_module_level(node.body)
            yield from _walk_module_level(node.orelse)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            yield from _walk_module_level(node.body)  # type: ignore[attr-defined]
            for h in node.handlers:  # type: ignore[attr-defined]
                yield from _walk_module_level(h.body)
            yield from _walk_module_level(node.orelse)  # type: ignore[attr-defined]
            yield from _walk_module_level(node.finalbody)  # type: ignore[attr-defined]
        elif isinstance(node, ast.With):
            yield from _walk_module_level(node.body)


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _op_marks(marks: list[tuple[str, ast.expr]], mod: _Module) -> list[str]:
    """Op markers of a list of marks, plus the marks of their parametrize params."""
    out: list[str] = []
    for name, node in marks:
        if name == "parametrize":
            out.extend(m for m in mod.param_marks(node) if m not in BUILTIN_MARKS)
        elif name not in BUILTIN_MARKS:
            out.append(name)
    return out


def _decorator_marks(decorators: list[ast.expr], mod: _Module) -> list[tuple[str, ast.expr]]:
    """Marks of a decorator list in pytest's order (closest to the ``def`` first)."""
    out: list[tuple[str, ast.expr]] = []
    for dec in reversed(decorators):
        out.extend(mod.marks(dec))
    return out


def _class_pytestmark(cls: ast.ClassDef, mod: _Module) -> list[tuple[str, ast.expr]]:
    out: list[tuple[str, ast.expr]] = []
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            out = mod.marks(node.value)
    return out


def _is_test_class(cls: ast.ClassDef) -> bool:
    if not cls.name.startswith("Test"):
        return False
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("__init__", "__new__"):
            return False  # pytest refuses to collect classes with a constructor
        if isinstance(node, ast.Assign) and _assigns_false(node, "__test__"):
            return False
    return True


def _assigns_false(node: ast.Assign, name: str) -> bool:
    return (
        any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        and isinstance(node.value, ast.Constant)
        and node.value.value is False
    )


def _bench_call(
    func: ast.FunctionDef | ast.AsyncFunctionDef, mod: _Module, depth: int = 0
) -> tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The benchmark constructor call of a test body and the function holding it.

    A call whose callee ends in ``Benchmark`` (or is a module class deriving from
    one) wins; else a call with ``op_name=`` and ``torch_op=``/``dtypes=``; else the
    same search in module-level helper functions the body calls (two levels).
    """
    by_kw: ast.Call | None = None
    helpers: list[str] = []
    for node in ast.walk(func):
        if not isinstance(node, ast.Call):
            continue
        text = _dotted(node.func)
        if text is not None:
            last = text.rsplit(".", 1)[-1]
            if last.endswith("Benchmark") or (text in mod.classes and mod.is_benchmark_class(text)):
                return node, func
            if text in mod.functions and text != func.name:
                helpers.append(text)
        if by_kw is None:
            kws = {kw.arg for kw in node.keywords}
            if "op_name" in kws and ("torch_op" in kws or "dtypes" in kws):
                by_kw = node
    if by_kw is not None:
        return by_kw, func
    if depth < 2:
        for name in dict.fromkeys(helpers):
            found = _bench_call(mod.functions[name], mod, depth + 1)
            if found is not None:
                return found
    return None


def _unparse(node: ast.expr) -> str:
    return " ".join(ast.unparse(node).split())


def _bench_details(
    func: ast.FunctionDef | ast.AsyncFunctionDef, marks: list[tuple[str, ast.expr]], mod: _Module
) -> tuple[str | None, str | None]:
    found = _bench_call(func, mod)
    if found is None:
        return None, None
    call, holder = found
    bench_class = _dotted(call.func)
    params = {a.arg for a in holder.args.args + holder.args.kwonlyargs + holder.args.posonlyargs}
    if bench_class is not None and bench_class in params and holder is func:
        # The class is a parametrize argument: resolve it when every value agrees.
        bench_class = None
        for name, node in marks:
            if name != "parametrize":
                continue
            values = mod.param_values_at(node, _dotted(call.func) or "")
            if values:
                texts = {_dotted(v) for v in values}
                if len(texts) == 1 and None not in texts:
                    bench_class = texts.pop()
                break
    dtypes_expr = None
    for kw in call.keywords:
        if kw.arg == "dtypes":
            value = kw.value
            if isinstance(value, ast.Name) and value.id not in params:
                local = _single_local_assign(holder, value.id)
                if local is not None:
                    value = local
            dtypes_expr = _unparse(value)
    return bench_class, dtypes_expr


def _single_local_assign(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.expr | None:
    found: list[ast.expr] = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    found.append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) and node.target.id == name:
            return None
    return found[0] if len(found) == 1 else None


def _test_info(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    qualname: str,
    outer_marks: list[tuple[str, ast.expr]],
    mod: _Module,
) -> TestInfo:
    own = _decorator_marks(func.decorator_list, mod)
    markers = _op_marks(own + outer_marks, mod)
    bench_class, dtypes_expr = _bench_details(func, own + outer_marks, mod)
    return TestInfo(
        name=qualname,
        markers=tuple(dict.fromkeys(markers)),
        lineno=func.lineno,
        bench_class=bench_class,
        dtypes_expr=dtypes_expr,
    )


def _collect_class(cls: ast.ClassDef, prefix: str, outer: list[tuple[str, ast.expr]], mod: _Module) -> dict[str, TestInfo]:
    # pytest: the class body's ``pytestmark`` first, then decorators (closest first).
    marks = _class_pytestmark(cls, mod) + _decorator_marks(cls.decorator_list, mod) + outer
    qual = f"{prefix}{cls.name}"
    found: dict[str, TestInfo] = {}
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found[f"{qual}::{node.name}"] = _test_info(node, f"{qual}::{node.name}", marks, mod)
        elif isinstance(node, ast.ClassDef) and _is_test_class(node):
            found.update(_collect_class(node, f"{qual}::", marks, mod))
    return found


def scan_source(source: str | bytes, path: str = "<source>") -> FileInfo:
    """Scan one module's source text (see the module docstring)."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        return FileInfo(path, (), f"SyntaxError: {exc.msg} (line {exc.lineno})")
    except (ValueError, UnicodeDecodeError) as exc:  # null bytes, bad encoding
        return FileInfo(path, (), f"{type(exc).__name__}: {exc}")
    mod = _Module(tree)
    module_marks: list[tuple[str, ast.expr]] = []
    for node in _walk_module_level(tree.body):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            module_marks = mod.marks(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "pytestmark":
            module_marks = module_marks + mod.marks(node.value)
    found: dict[str, TestInfo] = {}
    for node in _walk_module_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found.pop(node.name, None)  # a later def replaces an earlier one, as at import
            found[node.name] = _test_info(node, node.name, module_marks, mod)
        elif isinstance(node, ast.ClassDef) and _is_test_class(node):
            for key, info in _collect_class(node, "", module_marks, mod).items():
                found.pop(key, None)
                found[key] = info
    tests = tuple(sorted(found.values(), key=lambda t: (t.lineno, t.name)))
    return FileInfo(path, tests, None)


def _relpath(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def scan_file(path: Path, root: Path) -> FileInfo:
    """Scan ``path``; the result's ``path`` is relative to the suite ``root``."""
    path, root = Path(path), Path(root)
    rel = _relpath(path, root)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return FileInfo(rel, (), f"{type(exc).__name__}: {exc.strerror or exc}")
    return scan_source(data, rel)


class_bases_cache: dict[tuple[str, int, int], dict[str, list[str]]] = {}


def class_bases(path: Path) -> dict[str, list[str]]:
    """Module-level classes of ``path`` and their base classes as source text.

    Used to rebuild a benchmark's MRO names (for shape-file class keys) without
    importing the suite: ``{"NormBenchmark": ["base.GenericBenchmark"], ...}``.
    """
    path = Path(path)
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key in class_bases_cache:
            return class_bases_cache[key]
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return {}
    out: dict[str, list[str]] = {}
    for node in _walk_module_level(tree.body):
        if isinstance(node, ast.ClassDef):
            out[node.name] = [t for t in (_dotted(b) for b in node.bases) if t]
    class_bases_cache[key] = out
    return out


# --------------------------------------------------------------------------- suite + cache


def suite_files(root: Path) -> list[Path]:
    """The benchmark files of a suite: ``<root>/benchmark/test_*.py``, sorted."""
    bench = Path(root) / "benchmark"
    try:
        with os.scandir(bench) as it:
            names = [e.name for e in it if e.name.startswith("test_") and e.name.endswith(".py") and e.is_file()]
    except OSError:
        return []
    return [bench / n for n in sorted(names)]


def default_cache_dir() -> Path:
    return Path(checked_cache_root(os.environ))  # $OPSCREEN_CACHE_DIR naming a file: one line


def _cache_path(cache_dir: Path, root: Path) -> Path:
    digest = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:16]
    return cache_dir / f"markers-{digest}.json"


def _to_json(info: FileInfo) -> dict:
    return {
        "path": info.path,
        "error": info.error,
        "tests": [[t.name, list(t.markers), t.lineno, t.bench_class, t.dtypes_expr] for t in info.tests],
    }


def _from_json(d: dict) -> FileInfo:
    return FileInfo(
        path=d["path"],
        error=d["error"],
        tests=tuple(TestInfo(n, tuple(m), ln, bc, de) for n, m, ln, bc, de in d["tests"]),
    )


def _load_cache(path: Path, root: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != SCAN_VERSION or data.get("root") != str(root.resolve()):
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}


def _save_cache(path: Path, root: Path, files: dict) -> None:
    from ..fsio import atomic_write_json

    try:
        atomic_write_json(path, {"version": SCAN_VERSION, "root": str(root.resolve()), "files": files}, indent=None)
    except OSError:
        pass  # a cache that cannot be written only costs time


def scan_suite(root: Path, *, cache_dir: Path | None = None) -> list[FileInfo]:
    """Scan every ``benchmark/test_*.py`` of the suite at ``root``, sorted by path.

    Results are cached in ``cache_dir`` (default :func:`default_cache_dir`) per
    file, keyed by (relative path, mtime_ns, size) and :data:`SCAN_VERSION`.
    """
    root = Path(root)
    cache_file = _cache_path(Path(cache_dir) if cache_dir is not None else default_cache_dir(), root)
    cached = _load_cache(cache_file, root)
    fresh: dict[str, dict] = {}
    out: list[FileInfo] = []
    dirty = False
    for path in suite_files(root):
        rel = path.relative_to(root).as_posix()
        try:
            st = path.stat()
        except OSError:
            continue
        key = [st.st_mtime_ns, st.st_size]
        entry = cached.get(rel)
        info: FileInfo | None = None
        if entry is not None and entry.get("key") == key:
            try:
                info = _from_json(entry["info"])
            except (KeyError, TypeError, ValueError):
                info = None
        if info is None:
            try:
                info = scan_source(path.read_bytes(), rel)
            except OSError as exc:
                info = FileInfo(rel, (), f"{type(exc).__name__}: {exc.strerror or exc}")
            entry = {"key": key, "info": _to_json(info)}
            dirty = True
        fresh[rel] = entry
        out.append(info)
    if dirty or set(fresh) != set(cached):
        _save_cache(cache_file, root, fresh)
    out.sort(key=lambda f: f.path)
    return out


def op_index(files: list[FileInfo]) -> dict[str, list[tuple[str, str]]]:
    """``marker -> [(file path, test name), ...]``, markers and lists sorted."""
    index: dict[str, set[tuple[str, str]]] = {}
    for f in files:
        for t in f.tests:
            for m in t.markers:
                index.setdefault(m, set()).add((f.path, t.name))
    return {m: sorted(index[m]) for m in sorted(index)}

"""The layering of docs/architecture.md, no import cycle, no function over 80 lines,
and no torch in the harness.

The layers are declared once, in docs/architecture.md's table (rows from the top
layer down, modules by prefix); this test reads that table. Imports are found with
``ast`` at any depth (module level, inside functions, relative ones), so an import
hidden in a function still counts as an edge of the graph.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "opscreen"
DOC = ROOT / "docs" / "architecture.md"
MAX_LINES = 80
CHILD = "opscreen.child"

# Temporary allow-lists, for files that helpers A (settings), B (contracts) and
# C (batch) of issue 15 rewrite in parallel. Each entry names its owner; every entry
# is removed when that owner's step lands (a stale entry fails
# test_allow_lists_hold_only_live_entries).
LONG_FUNCTIONS_ALLOWED = {
    # (file under src/opscreen, qualified function name): owner
}
EDGES_ALLOWED = {
    # (importer, imported): owner and what lands to remove it
}


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    local: bool  # inside a function or class body, not at module level

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst} (line {self.line}{', in a function' if self.local else ''})"


def module_files() -> dict[str, Path]:
    """Dotted name -> file, for every module of src/opscreen but the sample suite."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(SRC).with_suffix("")
        if "sample_suite" in rel.parts:
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = module_files()
TREES = {m: ast.parse(p.read_text(encoding="utf-8"), str(p)) for m, p in MODULES.items()}


def _resolve(name: str) -> str | None:
    """The module of opscreen that ``name`` (a module or a name in one) is."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _module_level(tree: ast.Module) -> set[int]:
    """ids of the import nodes that run when the module is imported (not in a def or class)."""
    found: set[int] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.add(id(child))
            visit(child)

    visit(tree)
    return found


def imports_of(mod: str) -> list[tuple[str, int, bool]]:
    """(absolute module name imported, line, module level?) for every import in ``mod``."""
    tree = TREES[mod]
    top = _module_level(tree)
    package = mod if MODULES[mod].name == "__init__.py" else mod.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` mod
            for a in node.names:
                sub = f"{name}.{a.name}"
                out.append((sub if sub in MODULES else name, node.lineno, id(node) in top))
    return out


def edges() -> list[Edge]:
    out = set()
    for mod in MODULES:
        for name, line, top in imports_of(mod):
            dst = _resolve(name) if name == "opscreen" or name.startswith("opscreen.") else None
            if dst is not None and dst != mod:
                out.add(Edge(mod, dst, line, not top))
    return sorted(out, key=lambda e: (e.src, e.dst, e.line))


EDGES = edges()


def layer_table() -> tuple[list[tuple[str, list[str]]], list[str], list[str]]:
    """(layers top-down as (name, module prefixes), what the child may import beyond
    itself, the modules copied into the suite's interpreter) from docs/architecture.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and cells[0] not in ("layer", "---"):
            layers.append((cells[0], re.findall(r"`([\w.]+)`", cells[1])))
    child_may = re.search(r"stdlib-only foundation modules:(.*?)\.\n", section, re.S)
    copied = re.search(r"importing nothing of\s+opscreen:(.*?)\.\n", section, re.S)
    assert layers and child_may and copied, "docs/architecture.md: the Layers table or its two notes are missing"
    return layers, re.findall(r"`([\w.]+)`", child_may.group(1)), re.findall(r"`([\w.]+)`", copied.group(1))


LAYERS, CHILD_MAY_IMPORT, SUITE_SIDE = layer_table()


def layer_of(mod: str) -> tuple[int, str] | None:
    """(rank, layer name) of the row whose longest prefix names ``mod``; rank 0 is the top."""
    best = None
    for rank, (name, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            # a package names all its modules; the top package, ``opscreen``, only its __init__
            if (mod == p or (p != "opscreen" and mod.startswith(p + "."))) and (best is None or len(p) > best[0]):
                best = (len(p), rank, name)
    return (best[1], best[2]) if best else None


def _report(title: str, items) -> str:
    return title + "\n  " + "\n  ".join(str(i) for i in items)


# --------------------------------------------------------------------------- layering


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if layer_of(m) is None]
    assert not missing, _report("modules that no row of docs/architecture.md's Layers table names:", missing)


def test_no_import_from_a_lower_layer_to_a_higher_one():
    bad = []
    for e in EDGES:
        if (e.src, e.dst) in EDGES_ALLOWED or (e.src.startswith(CHILD) and e.dst in CHILD_MAY_IMPORT):
            continue
        (rs, ls), (rd, ld) = layer_of(e.src), layer_of(e.dst)
        if rd < rs:
            bad.append(f"{e}: {ls} may not import {ld} (docs/architecture.md)")
    assert not bad, _report("imports from a lower layer to a higher one:", bad)


def test_the_child_imports_only_itself_and_stdlib_only_foundation():
    allowed = lambda m: m == CHILD or m.startswith(CHILD + ".") or m in CHILD_MAY_IMPORT  # noqa: E731
    bad = [f"{e}: the child may import only {CHILD}.* and {', '.join(CHILD_MAY_IMPORT)}"
           for e in EDGES if (allowed(e.src) and e.src != "opscreen") and not allowed(e.dst)]
    bad += [f"{e}: the package's __init__ stays stdlib-only (the child imports it)"
            for e in EDGES if e.src == "opscreen"]
    assert not bad, _report("the child (and what it may import) reaches the harness:", bad)


def test_suite_side_plugins_import_nothing_of_opscreen():
    bad = [str(e) for e in EDGES if e.src in SUITE_SIDE]
    missing = [m for m in SUITE_SIDE if m not in MODULES]
    assert not missing, _report("docs/architecture.md names suite-side plugins that do not exist:", missing)
    assert not bad, _report("plugins copied into the suite's interpreter import opscreen:", bad)


# --------------------------------------------------------------------------- cycles


def cycles(edge_pairs: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edge_pairs):
        graph.setdefault(a, []).append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, []):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_cycles_finds_a_cycle_through_a_function_local_import():
    assert cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert cycles({("a", "b"), ("b", "c")}) == []


def test_no_import_cycle():
    pairs = {(e.src, e.dst) for e in EDGES if (e.src, e.dst) not in EDGES_ALLOWED}
    found = []
    for comp in cycles(pairs):
        inside = [str(e) for e in EDGES if e.src in comp and e.dst in comp and (e.src, e.dst) not in EDGES_ALLOWED]
        found.append(" <-> ".join(comp) + ":\n    " + "\n    ".join(inside))
    assert not found, _report("import cycles (function-local imports count):", found)


# --------------------------------------------------------------------------- function length


def long_functions() -> list[tuple[str, str, int, int]]:
    """(file under src/opscreen, qualified name, def line, lines) of every function over MAX_LINES."""
    out = []
    for mod, path in MODULES.items():
        rel = path.relative_to(PKG).as_posix()

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = prefix + child.name
                    if not isinstance(child, ast.ClassDef):
                        n = child.end_lineno - child.lineno + 1
                        if n > MAX_LINES:
                            out.append((rel, name, child.lineno, n))
                    visit(child, name + ".")
                else:
                    visit(child, prefix)

        visit(TREES[mod], "")
    return sorted(out)


def test_no_function_over_80_lines():
    bad = [f"src/opscreen/{f}:{line} {name}: {n} lines" for f, name, line, n in long_functions()
           if (f, name) not in LONG_FUNCTIONS_ALLOWED]
    assert not bad, _report(f"functions over {MAX_LINES} lines (def line to last line); split them:", bad)


# --------------------------------------------------------------------------- torch


def test_torch_is_imported_only_inside_child_functions():
    bad = []
    for mod in MODULES:
        for name, line, top in imports_of(mod):
            if name != "torch" and not name.startswith("torch."):
                continue
            in_child = mod == CHILD or mod.startswith(CHILD + ".")
            if not in_child:
                bad.append(f"{mod} line {line}: imports {name} (only {CHILD} and the sample suite may)")
            elif top:
                bad.append(f"{mod} line {line}: imports {name} at module level (the harness imports {CHILD})")
    assert not bad, _report("torch outside the child's functions:", bad)


def test_importing_every_harness_module_never_imports_torch(tmp_path):
    """A torch that refuses to be imported stands first on sys.path; every module
    the harness process can load is imported in a fresh interpreter."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('opscreen test: the harness imported torch')\n")
    harness = [m for m in MODULES if m != "opscreen.__main__" and m not in SUITE_SIDE
               and not (m == CHILD or m.startswith(CHILD + "."))]
    code = textwrap.dedent(f"""
        import importlib, sys
        failed = []
        for m in {harness!r}:
            try:
                importlib.import_module(m)
            except ImportError as exc:
                failed.append(f"{{m}}: {{exc}}")
        assert "torch" not in sys.modules or not hasattr(sys.modules["torch"], "__version__"), "torch loaded"
        print("\\n".join(failed))
        sys.exit(1 if failed else 0)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(SRC)]))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, _report("importing these harness modules imported torch:", res.stdout.splitlines() + [res.stderr[-2000:]])


# --------------------------------------------------------------------------- allow-lists


def test_allow_lists_hold_only_live_entries():
    """An entry whose function is short again, or whose import is gone, is removed."""
    long = {(f, name) for f, name, _, _ in long_functions()}
    pairs = {(e.src, e.dst) for e in EDGES}
    stale = [f"{k} ({v})" for k, v in LONG_FUNCTIONS_ALLOWED.items() if k not in long]
    stale += [f"{k} ({v})" for k, v in EDGES_ALLOWED.items() if k not in pairs]
    assert not stale, _report("allow-list entries that no longer apply; remove them from tests/test_architecture.py:", stale)


def test_the_graph_sees_imports_inside_functions_and_relative_ones():
    """The reader is not blind: ``from .records import`` at module level and
    ``from .inventory import`` inside a function are both edges, with their kind."""
    kinds = {(e.src, e.dst): e.local for e in EDGES}
    assert kinds[("opscreen.results.summary", "opscreen.results.records")] is False
    assert kinds[("opscreen.assets.shape_files", "opscreen.assets.inventory")] is True

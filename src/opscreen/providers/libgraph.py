"""The static picture of a library and its benchmark files that ``opscreen run
--changed-since`` needs: which names each module binds, what each binding refers
to, and what each module imports inside the suite. Built with :mod:`ast` from
source text; nothing of the suite is imported or executed.

Terms:

- A *module* is one ``.py`` file of the library package (``src/flag_gems``) or of
  ``benchmark/``, named by its path relative to the suite root.
- A *binding* is a top-level name and the statements that bind it (``def``,
  ``class``, assignment, import; the branches of a top-level ``if``/``try`` too).
- An *aggregator* is a module whose top level only imports and re-exports
  (``src/flag_gems/ops/__init__.py``): depending on it means depending on the
  bindings one uses, not on every module it imports.
- The *root* is the library's top-level ``__init__.py`` (``flag_gems``): the
  registry of ops. Every module imports it implicitly, so an import of it is
  followed by name (``flag_gems.use_gems``), never as the whole module.

:func:`closure` answers what an op depends on: symbol by symbol inside the modules
an op starts from (its benchmark test, the function registered for it), module by
module for everything those import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

#: The names of a root module's op registry: FlagGems' ``_FULL_CONFIG`` (a tuple of
#: ``(aten name, function)`` pairs), the sample suite's ``OPS`` (a dict of op name -> function).
REGISTRY_NAMES = ("_FULL_CONFIG", "OPS")


@dataclass(frozen=True, eq=False)
class Stmt:
    """One top-level statement: the names it binds, what it refers to, its tree."""

    names: tuple[str, ...]
    node: ast.stmt
    bare: frozenset  # names loaded other than as ``name.attr``
    attrs: frozenset  # (name, attr, ...) for every ``name.attr...`` chain loaded
    literals: frozenset  # the keys asked of tuning configs (``get_tuned_config("mm")``), YAML file names

    @property
    def dump(self) -> str:
        """The statement as a tree, without positions: equal for code that differs only in
        comments and layout."""
        return ast.dump(self.node)


@dataclass(frozen=True)
class ImportRef:
    """What an import binds: a module (``attr`` None) or a name of a module."""

    module: str  # dotted
    attr: str | None


@dataclass
class Module:
    path: str
    dotted: str
    is_pkg: bool
    stmts: list = field(default_factory=list)
    binders: dict = field(default_factory=dict)  # name -> [Stmt]
    imports: dict = field(default_factory=dict)  # bound name -> ImportRef
    stars: list = field(default_factory=list)  # dotted modules of ``from X import *``
    aggregator: bool = False
    error: str | None = None


def dotted_name(path: str, src_roots: tuple[str, ...]) -> tuple[str, bool]:
    """``src/flag_gems/ops/abs.py`` -> (``flag_gems.ops.abs``, False); a package's
    ``__init__.py`` -> (its package, True)."""
    rel = path
    for root in src_roots:
        if root and path.startswith(root.rstrip("/") + "/"):
            rel = path[len(root.rstrip("/")) + 1:]
            break
    parts = rel[:-3].split("/")
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


def bound_names(node: ast.stmt) -> list[str]:
    """The top-level names ``node`` binds (branches of if/try/with included)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name.split(".")[0]) for a in node.names if a.name != "*"]
    targets: list = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or type(node).__name__ == "TryStar":
        out: list[str] = []
        for part in ("body", "orelse", "finalbody"):
            for child in getattr(node, part, []) or []:
                out += bound_names(child)
        for handler in getattr(node, "handlers", []) or []:
            for child in handler.body:
                out += bound_names(child)
        return out
    names = []
    for t in targets:
        names += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


def _chain(n: ast.Attribute) -> tuple[str, ...] | None:
    parts = [n.attr]
    cur = n.value
    while isinstance(cur, ast.Attribute):
        parts.insert(0, cur.attr)
        cur = cur.value
    return (cur.id, *parts) if isinstance(cur, ast.Name) else None


def _stmt(node: ast.stmt, mod: Module | None = None) -> Stmt:
    """The Stmt of ``node``, in one walk; the imports under it go into ``mod``."""
    bare, attrs, literals, inner, names_seen = set(), set(), set(), set(), []
    for n in ast.walk(node):
        kind = type(n)
        if kind is ast.Attribute:
            inner.add(id(n.value))
            names_seen.append(n)
        elif kind is ast.Name:
            names_seen.append(n)
        elif kind is ast.Constant and isinstance(n.value, str) and n.value.endswith((".yaml", ".yml")):
            literals.add(n.value.rsplit("/", 1)[-1])  # a config file's name
        elif kind is ast.Call and n.args and type(n.args[0]) is ast.Constant and isinstance(n.args[0].value, str):
            func = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if "config" in func.lower():  # get_tuned_config("mm"), get_heuristic_config("softmax_inner")
                literals.add(n.args[0].value)
        elif mod is not None and kind in (ast.Import, ast.ImportFrom):
            _import(mod, n)
    for n in names_seen:
        if id(n) in inner:
            continue
        if type(n) is ast.Name:
            bare.add(n.id)
        else:
            chain = _chain(n)
            if chain is not None:
                attrs.add(chain)
    names = tuple(dict.fromkeys(bound_names(node)))
    return Stmt(names, node, frozenset(bare), frozenset(attrs), frozenset(literals))


def _is_reexport(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True  # a docstring
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return set(bound_names(node)) <= {"__all__"}
    if isinstance(node, (ast.If, ast.Try)) or type(node).__name__ == "TryStar":
        kids = list(getattr(node, "body", [])) + list(getattr(node, "orelse", [])) + list(getattr(node, "finalbody", []))
        for h in getattr(node, "handlers", []) or []:
            kids += h.body
        return all(_is_reexport(k) or isinstance(k, ast.Pass) for k in kids)
    return False


def _absolute(mod: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = mod.dotted.split(".")
    base = parts if mod.is_pkg else parts[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def _import(mod: Module, n: ast.AST) -> None:
    """Record one import (at any depth: an import inside a function still runs when that
    function does)."""
    if isinstance(n, ast.Import):
        for a in n.names:
            if a.asname:
                mod.imports.setdefault(a.asname, ImportRef(a.name, None))
            else:
                mod.imports.setdefault(a.name.split(".")[0], ImportRef(a.name.split(".")[0], None))
                mod.imports.setdefault("\0" + a.name, ImportRef(a.name, None))  # the submodule itself
        return
    base = _absolute(mod, n)
    for a in n.names:
        if a.name == "*":
            mod.stars.append(base)
        else:
            mod.imports.setdefault(a.asname or a.name, ImportRef(base, a.name))


def parse_module(path: str, text: str, src_roots: tuple[str, ...]) -> Module:
    dotted, is_pkg = dotted_name(path, src_roots)
    mod = Module(path, dotted, is_pkg)
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as exc:
        mod.error = f"{type(exc).__name__}: {exc}"
        return mod
    for node in tree.body:
        st = _stmt(node, mod)
        mod.stmts.append(st)
        for name in st.names:
            mod.binders.setdefault(name, []).append(st)
    mod.aggregator = bool(tree.body) and all(_is_reexport(n) for n in tree.body)
    return mod


def registry_entries(text: str) -> dict[str, str] | None:
    """``aten name -> function source`` of a root module's registry (``_FULL_CONFIG``),
    or None when the module has none (or does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in REGISTRY_NAMES for t in node.targets):
            pairs = [(e.elts[0], e.elts[1]) for e in getattr(node.value, "elts", [])
                     if isinstance(e, ast.Tuple) and len(e.elts) >= 2]
            if isinstance(node.value, ast.Dict):
                pairs = [(k, v) for k, v in zip(node.value.keys, node.value.values) if k is not None]
            out: dict[str, str] = {}
            for key, fn in pairs:
                if isinstance(key, ast.Constant):
                    out[str(key.value)] = out.get(str(key.value), "") + ast.unparse(fn)
            return out
    return None


@dataclass
class Deps:
    """What one op depends on: modules as a whole, and names of modules."""

    modules: set = field(default_factory=set)  # paths
    symbols: dict = field(default_factory=dict)  # path -> set of names


class Graph:
    """Every module of the library and the benchmark directory, by path and by dotted name."""

    def __init__(self, modules: list[Module], root: str | None):
        self.by_path = {m.path: m for m in modules}
        self.by_dotted = {m.dotted: m for m in modules}
        self.root = root  # the root module's dotted name

    def _target(self, ref: ImportRef) -> tuple[Module | None, str | None]:
        """The module an import names, and the name taken from it (None: the module itself)."""
        if ref.attr is not None and f"{ref.module}.{ref.attr}" in self.by_dotted:
            return self.by_dotted[f"{ref.module}.{ref.attr}"], None
        return self.by_dotted.get(ref.module), ref.attr

    def defining(self, path: str, name: str, depth: int = 0) -> str | None:
        """The path of the module that defines ``name`` as seen from module ``path``
        (through re-exports and star imports), None when it is not in the suite."""
        mod = self.by_path.get(path)
        if mod is None or depth > 20:
            return None
        if any(not isinstance(st.node, (ast.Import, ast.ImportFrom)) for st in mod.binders.get(name, [])):
            return path
        ref = mod.imports.get(name)
        if ref is not None:
            target, taken = self._target(ref)
            if target is None:
                return None
            return target.path if taken is None else self.defining(target.path, taken, depth + 1)
        for star in mod.stars:
            target = self.by_dotted.get(star)
            found = self.defining(target.path, name, depth + 1) if target is not None else None
            if found:
                return found
        return None

    def closure(self, roots: list[tuple[str, str]]) -> Deps:
        """The dependencies of the symbols ``roots`` (``(path, name)``), followed name by name
        inside their modules, the root and aggregators, and module by module elsewhere."""
        deps = Deps()
        todo = [(p, n, True) for p, n in roots if p in self.by_path]
        seen: set = set()
        mod_todo: list[str] = []
        while todo or mod_todo:
            while todo:
                path, name, precise = todo.pop()
                if (path, name, precise) in seen:
                    continue
                seen.add((path, name, precise))
                self._visit_symbol(self.by_path[path], name, precise, deps, todo, mod_todo)
            while mod_todo and not todo:
                self._visit_module(mod_todo.pop(), deps, todo, mod_todo)
        return deps

    def _visit_symbol(self, mod: Module, name: str, precise: bool, deps: Deps, todo: list, mod_todo: list) -> None:
        is_root = mod.dotted == self.root
        if not (precise or is_root or mod.aggregator):
            mod_todo.append(mod.path)
            return
        deps.symbols.setdefault(mod.path, set()).add(name)
        if name in REGISTRY_NAMES and is_root:
            return  # the registry names every op: its entries are compared one by one
        for st in mod.binders.get(name, []):
            for ref in st.bare:
                if ref in mod.binders or ref in mod.imports:
                    todo.append((mod.path, ref, precise))
            for chain in st.attrs:
                self._attr_ref(mod, chain, precise, deps, todo, mod_todo)
        ref = mod.imports.get(name)
        if ref is not None:
            self._follow(ref, precise, todo, mod_todo)
        elif name not in mod.binders:
            for star in mod.stars:
                target = self.by_dotted.get(star)
                if target is not None and (name in target.binders or name in target.imports or target.stars):
                    todo.append((target.path, name, precise))

    def _attr_ref(self, mod: Module, chain: tuple, precise: bool, deps: Deps, todo: list, mod_todo: list) -> None:
        """``base.a.b`` where ``base`` is an imported module of the suite: the module or
        name the chain ends at."""
        base = chain[0]
        ref = mod.imports.get(base)
        if ref is None:
            if base in mod.binders:
                todo.append((mod.path, base, precise))
            return
        deps.symbols.setdefault(mod.path, set()).add(base)  # the import statement itself
        target, taken = self._target(ref)
        if target is None:
            return
        if taken is not None:  # ``from M import x`` then ``x.attr``: x itself
            self._follow(ref, precise, todo, mod_todo)
            return
        self._walk_chain(target, chain[1:], precise, todo, mod_todo)

    def _walk_chain(self, target: Module, attrs: tuple, precise: bool, todo: list, mod_todo: list) -> None:
        for i, attr in enumerate(attrs):
            sub = self.by_dotted.get(f"{target.dotted}.{attr}")
            if sub is None:
                if precise or target.dotted == self.root or target.aggregator:
                    todo.append((target.path, attr, precise))
                else:
                    mod_todo.append(target.path)
                return
            target = sub
        if target.dotted != self.root:
            mod_todo.append(target.path)

    def _follow(self, ref: ImportRef, precise: bool, todo: list, mod_todo: list) -> None:
        target, taken = self._target(ref)
        if target is None:
            return
        if taken is None:
            if target.dotted != self.root:
                mod_todo.append(target.path)
        elif precise or target.dotted == self.root or target.aggregator:
            todo.append((target.path, taken, precise))
        else:
            mod_todo.append(target.path)

    def _visit_module(self, path: str, deps: Deps, todo: list, mod_todo: list) -> None:
        if path in deps.modules:
            return
        deps.modules.add(path)
        mod = self.by_path[path]
        for bound, ref in mod.imports.items():
            target, taken = self._target(ref)
            if target is None:
                continue
            if target.dotted == self.root and taken is None:
                for st in mod.stmts:  # ``flag_gems.X``: the names used, not the whole registry
                    for chain in st.attrs:
                        if chain[0] == bound:
                            self._walk_chain(target, chain[1:], False, todo, mod_todo)
            else:
                self._follow(ref, False, todo, mod_todo)
        for star in mod.stars:
            target = self.by_dotted.get(star)
            if target is not None and target.dotted != self.root:
                mod_todo.append(target.path)

"""``opscreen run --changed-since REV``: the ops whose implementation or benchmark
changed between REV and the suite checkout's ``HEAD``.

Both trees are read from git (``git cat-file --batch``), never imported. What an
op depends on (:mod:`opscreen.providers.libgraph`):

- its benchmark tests (the test functions carrying its marker, name by name) and
  every benchmark module they import (``base.py``, ``consts.py``: whole modules);
  ``benchmark/conftest.py``, the suite's ``conftest.py``/``pytest.ini`` and the
  benchmark directory's data files (``core_shapes.yaml``) are every op's;
- the functions registered for it: its aten names in the root module's
  ``_FULL_CONFIG`` (matched to the marker, the test's ``op_name`` and the torch
  calls of its test), and the library functions its test calls by name
  (``flag_gems.fused_add_rms_norm``, ``minigems.relu``); each one name by name in
  the module that defines it, with the names it uses there;
- the same function names exported by a vendor package
  (``runtime/backend/_<vendor>/``, which ``SpecOpRegistrar`` swaps in);
- every library module those import, whole, transitively.

A change is compared per top-level binding: an edit inside ``def relu`` changes
the name ``relu``; a module-level statement that binds nothing changes the whole
module. A changed entry of ``_FULL_CONFIG`` selects the ops of that aten name. A
changed key of a tuning YAML (``tune_configs.yaml``) changes the statements that
name that key as a string.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError, shown
from ..tables import first
from .libgraph import REGISTRY_NAMES, Deps, Graph, bound_names, parse_module, registry_entries

BENCH_DIR = "benchmark"
#: Files every op's screen reads (pytest's configuration), besides benchmark/conftest.py.
EVERY_OP_FILES = ("conftest.py", "pytest.ini", "setup.cfg", "tox.ini")
#: Where a library keeps its vendors' overrides of registered functions (FlagGems).
VENDOR_DIR = "runtime/backend"
GIT_TIMEOUT = 120.0
LIST_LIMIT = 12


class NothingSelected(Exception):
    """No op depends on what changed: the run has nothing to screen (exit 0)."""


# -- git -------------------------------------------------------------------------------


def _git(root: Path, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(root), *args], input=data, capture_output=True, timeout=GIT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--changed-since: git {args[0]} in {root} failed: {exc}") from None


def resolve_rev(root: Path, rev: str) -> tuple[str, str]:
    """(REV's commit, HEAD's commit) of the checkout at ``root``; a one-line
    UsageError when ``root`` is not the top of a git checkout or REV names no commit."""
    if not rev.strip() or rev.startswith("-") or any(c in rev for c in "\0\n\r"):
        raise UsageError(f"--changed-since {shown(rev)}: give a commit, branch or tag of the suite's checkout")
    top = _git(root, "rev-parse", "--show-toplevel")
    if top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != root.resolve():
        raise UsageError(f"--changed-since: the suite {root} is not a git checkout (its own top level); "
                         "it needs its history to see what changed")
    out = []
    for name in (rev, "HEAD"):
        r = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}")
        if r.returncode != 0 or not r.stdout.strip():
            raise UsageError(f"--changed-since {shown(rev)}: no such commit in the suite's checkout {root}")
        out.append(r.stdout.decode().strip())
    return out[0], out[1]


def changed_files(root: Path, base: str, head: str) -> list[str]:
    r = _git(root, "diff", "--no-renames", "--name-only", "-z", base, head, "--")
    if r.returncode != 0:
        raise UsageError(f"--changed-since: git diff failed in {root}: {r.stderr.decode(errors='replace').strip()[:200]}")
    return [p for p in r.stdout.decode("utf-8", errors="replace").split("\0") if p]


def tree_files(root: Path, commit: str, dirs: list[str]) -> list[str]:
    r = _git(root, "ls-tree", "-r", "-z", "--name-only", commit, "--", *dirs)
    return [p for p in r.stdout.decode("utf-8", errors="replace").split("\0") if p] if r.returncode == 0 else []


def read_blobs(root: Path, commit: str, paths: list[str]) -> dict[str, str]:
    """path -> text at ``commit`` (paths missing there are left out), in one git process."""
    if not paths:
        return {}
    data = "".join(f"{commit}:{p}\n" for p in paths).encode()
    r = _git(root, "cat-file", "--batch", data=data)
    out, buf, pos = {}, r.stdout, 0
    for p in paths:
        nl = buf.find(b"\n", pos)
        if nl < 0:
            break
        head = buf[pos:nl].split()
        pos = nl + 1
        if len(head) < 3 or head[1] != b"blob":
            continue
        size = int(head[2])
        out[p] = buf[pos:pos + size].decode("utf-8", errors="replace")
        pos += size + 1
    return out


# -- what each op depends on -----------------------------------------------------------


def library_dir(root: Path, library: str, files: list[str]) -> str:
    """The library package's folder: ``src/<library>`` (or ``<library>``), else the one
    package under ``src/`` (a copy of the sample suite holds ``src/minigems``)."""
    for cand in (f"src/{library}", library):
        if f"{cand}/__init__.py" in files:
            return cand
    others = sorted({p.rsplit("/", 1)[0] for p in files if p.count("/") == 2 and p.startswith("src/")
                     and p.endswith("/__init__.py")})
    if len(others) == 1:
        return others[0]
    raise UsageError(f"--changed-since: the suite {root} has no package {library}/ (src/{library}/__init__.py) "
                     "at HEAD: nothing to map its changes to")


def _candidates(fn) -> set[str]:
    """Op names a benchmark test function's body points to: its ``op_name=``, the torch
    functions and aten overloads it calls, and the tensor methods its lambdas call."""
    import ast

    out: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.keyword) and n.arg == "op_name" and isinstance(n.value, ast.Constant):
            out.add(str(n.value.value))
        elif isinstance(n, ast.Attribute):
            chain, cur = [n.attr], n.value
            while isinstance(cur, ast.Attribute):
                chain.insert(0, cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id == "torch" and chain:
                out.add(_torch_name(chain))
        elif isinstance(n, ast.Lambda):
            out.update(c.func.attr for c in ast.walk(n.body)
                       if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute))
    return {c for c in out if c}


def _torch_name(chain: list[str]) -> str:
    if "aten" in chain and chain.index("aten") + 1 < len(chain):
        return chain[chain.index("aten") + 1]
    if chain[0] in ("special", "linalg", "fft") and len(chain) > 1:
        return f"{chain[0]}_{chain[1]}"
    if chain[0] in ("nn", "Tensor", "ops") and len(chain) > 1:
        return chain[-1] if chain[0] == "nn" else chain[1]
    return chain[0]


class Registry:
    """The root module's ``_FULL_CONFIG``: aten name -> function, matched to op names."""

    def __init__(self, entries: dict[str, str] | None):
        self.entries = entries or {}
        self.exact: dict[str, set[str]] = {}
        self.bases: dict[str, set[str]] = {}
        for key in self.entries:
            base = key.split(".")[0].lstrip("_").lower()
            self.bases.setdefault(base, set()).add(key)
            for form in (base, key.replace(".", "_").lstrip("_").lower()):
                self.exact.setdefault(form, set()).add(key)

    def keys_for(self, names: set[str], loose: set[str]) -> set[str]:
        """The aten names that ``names`` (exactly) and ``loose`` (exactly, else by their
        longest registered prefix: ``fmod_scalar_`` -> ``fmod``) stand for."""
        keys: set[str] = set()
        for name in names | loose:
            plain = name.removeprefix("underscore_").lstrip("_").lower()
            for form in {plain, name.lstrip("_").lower(), f"native_{plain}"}:  # batch_norm -> native_batch_norm
                keys |= self.exact.get(form, set())
        for name in loose:
            form = name.removeprefix("underscore_").lstrip("_").lower()
            if form in self.exact:
                continue
            parts = form.split("_")
            for i in range(len(parts) - 1, 0, -1):
                if "_".join(parts[:i]) in self.bases:
                    keys |= self.bases["_".join(parts[:i])]
                    break
        return keys


@dataclass
class OpDeps:
    deps: Deps
    keys: set = field(default_factory=set)  # registry entries (aten names)
    functions: set = field(default_factory=set)  # registered function names
    own: set = field(default_factory=set)  # its benchmark files and the modules defining its functions


class SuiteIndex:
    """The library and benchmark modules of a suite at one commit, and what each op depends on."""

    def __init__(self, root: Path, library: str, commit: str):
        self.root, self.commit = root, commit
        listed = tree_files(root, commit, ["src", library, BENCH_DIR])
        self.libdir = library_dir(root, library, listed)
        library = self.libdir.rsplit("/", 1)[-1]
        self.files = listed = [p for p in listed if p.startswith((self.libdir + "/", BENCH_DIR + "/"))]
        texts = read_blobs(root, commit, [p for p in listed if p.endswith(".py")])
        roots = (self.libdir.rsplit("/", 1)[0] if "/" in self.libdir else "",)
        self.modules = [parse_module(p, t, roots) for p, t in texts.items()]
        root_path = f"{self.libdir}/__init__.py"
        self.root_path = root_path
        self.graph = Graph(self.modules, library)
        self.registry = Registry(registry_entries(texts.get(root_path, "")))
        self.by_function: dict[str, set[str]] = {}
        for key, fn in self.registry.entries.items():
            self.by_function.setdefault(fn, set()).add(key)
        self.vendor_exports = self._vendor_exports()
        self.texts = texts

    def _vendor_exports(self) -> dict[str, list[str]]:
        """function name -> the vendor packages' ``__init__.py`` that export it."""
        prefix = f"{self.libdir}/{VENDOR_DIR}/_"
        out: dict[str, list[str]] = {}
        for m in self.modules:
            if m.path.startswith(prefix) and m.is_pkg:
                vendor = ".".join(m.dotted.split(".")[:4])  # flag_gems.runtime.backend._<vendor>
                for name, ref in m.imports.items():
                    if not name.startswith("\0") and ref.module.startswith(vendor):
                        out.setdefault(name, []).append(m.path)
        return out

    def op_deps(self, op: str, spec, tests_by_file: dict) -> OpDeps:
        """What ``op`` (its NodeSpec ``spec``) depends on."""
        import ast

        roots: list[tuple[str, str]] = []
        loose, names = {op}, set()
        for rel in spec.files:
            roots.append((rel, "pytestmark"))
            tree = _parse(self.texts.get(rel, ""))
            for test in tests_by_file.get(rel, ()):
                if spec.marker_expr and op not in test.markers and spec.how != "file_stem":
                    continue
                top = test.name.split("::")[0]
                roots.append((rel, top))
                for node in (tree.body if tree else []):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == top:
                        strings = _op_name_strings(node)
                        loose |= strings
                        names |= _candidates(node) - strings
        keys = self.registry.keys_for(names, loose)
        functions = {self.registry.entries[k] for k in keys}
        roots += [(self.root_path, fn) for fn in functions]
        deps = self.graph.closure(roots)
        # a vendor's export of a name the op reaches in the root (flag_gems.sparse_attn_triton too)
        vendor = [(p, n) for n in sorted(deps.symbols.get(self.root_path, ())) for p in self.vendor_exports.get(n, [])]
        if vendor:
            more = self.graph.closure(vendor)
            deps.modules |= more.modules
            for path, got in more.symbols.items():
                deps.symbols.setdefault(path, set()).update(got)
            roots += vendor
        deps.modules.update(self.every_op_paths())
        lib = [(p, n) for p, n in roots if not p.startswith(f"{BENCH_DIR}/")]
        own = set(spec.files) | {p for p, _ in lib} | {d for p, n in lib if (d := self.graph.defining(p, n))}
        return OpDeps(deps, keys, functions, own)

    def every_op_paths(self) -> list[str]:
        return [f"{BENCH_DIR}/conftest.py", *EVERY_OP_FILES] + [
            p for p in self.files if p.startswith(f"{BENCH_DIR}/") and not p.endswith(".py")]


def _parse(text: str):
    import ast

    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _op_name_strings(node) -> set[str]:
    import ast

    return {str(n.value.value) for n in ast.walk(node)
            if isinstance(n, ast.keyword) and n.arg == "op_name" and isinstance(n.value, ast.Constant)}


# -- what changed ----------------------------------------------------------------------


@dataclass
class Change:
    """One changed file: the names it changed (``whole``: the module as a whole)."""

    path: str
    kind: str  # module | registry | config | every | unmapped | outside | removed
    names: set = field(default_factory=set)
    whole: bool = False
    keys: set = field(default_factory=set)  # registry entries or config keys
    note: str = ""


def module_change(path: str, old: str | None, new: str | None) -> Change:
    """The top-level names whose statements differ between ``old`` and ``new``."""
    if new is None:
        return Change(path, "removed", whole=True, note="removed")
    if old is None:
        return Change(path, "module", whole=True, note="added")
    a, b = parse_module(path, old, ("",)), parse_module(path, new, ("",))
    if a.error or b.error:
        return Change(path, "module", whole=True, note="does not parse")
    da, db = _name_dumps(a), _name_dumps(b)
    names = {n for n in set(da) | set(db) if da.get(n) != db.get(n)}

    def loose(m):  # module-level statements that bind nothing (docstrings aside)
        return sorted(s.dump for s in m.stmts if not s.names and not s.dump.startswith("Expr(value=Constant(value="))

    whole = loose(a) != loose(b)
    return Change(path, "module", names=names, whole=whole, note="module-level code" if whole else "")


def _name_dumps(mod) -> dict[str, list[str]]:
    """name -> what binds it, statement by statement; an import inside a top-level ``if`` or
    ``try`` counts by its own line (with the condition), not by the whole block."""
    import ast

    out: dict[str, list[str]] = {}

    def walk(node, context: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            where = f"{getattr(node, 'module', '')}:{getattr(node, 'level', 0)}"
            for a in node.names:
                out.setdefault(a.asname or a.name.split(".")[0], []).append(f"{context}|{where}|{a.name}|{a.asname}")
        elif isinstance(node, (ast.If, ast.Try)) or type(node).__name__ == "TryStar":
            inner = context + "|" + (ast.dump(node.test) if isinstance(node, ast.If) else type(node).__name__)
            kids = [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            kids += [k for h in getattr(node, "handlers", []) for k in h.body]
            for kid in kids:
                walk(kid, inner)
        else:
            text = context + "|" + ast.dump(node)
            for name in dict.fromkeys(bound_names(node)):
                out.setdefault(name, []).append(text)

    for st in mod.stmts:
        walk(st.node, "")
    return out


def registry_change(change: Change, old: str | None, new: str | None) -> Change:
    """The root module: its registry compared entry by entry, its other names as any module's."""
    before, after = registry_entries(old or "") or {}, registry_entries(new or "") or {}
    change.keys = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    change.names -= set(REGISTRY_NAMES)
    change.kind = "registry"
    return change


def config_change(path: str, old: str | None, new: str | None, index: SuiteIndex) -> Change:
    """A tuning YAML of the library: its changed top-level keys, and the statements that name them."""
    import yaml

    try:
        before, after = (yaml.safe_load(t) if t else {} for t in (old, new))
    except yaml.YAMLError:
        before = after = None
    if not isinstance(before, dict) or not isinstance(after, dict):
        return Change(path, "unmapped", note="not a YAML mapping")
    keys = {str(k) for k in set(before) | set(after)
            if json.dumps(before.get(k), sort_keys=True, default=str) != json.dumps(after.get(k), sort_keys=True, default=str)}
    return Change(path, "config", keys=keys)


def classify(index: SuiteIndex, paths: list[str], base: str) -> list[Change]:
    """One Change per changed path, from the texts at ``base`` and at the index's commit."""
    lib, bench = index.libdir + "/", f"{BENCH_DIR}/"
    py = [p for p in paths if p.endswith(".py") and p.startswith((lib, bench))]
    cfg = [p for p in paths if p.endswith((".yaml", ".yml")) and p.startswith(lib)]
    old = read_blobs(index.root, base, py + cfg)
    new = {**index.texts, **read_blobs(index.root, index.commit, cfg)}
    every = set(index.every_op_paths())
    out = []
    for p in paths:
        if p in every:
            out.append(Change(p, "every", whole=True))
        elif p in py:
            c = module_change(p, old.get(p), new.get(p))
            out.append(registry_change(c, old.get(p), new.get(p)) if p == index.root_path else c)
        elif p in cfg:
            out.append(config_change(p, old.get(p), new.get(p), index))
        elif p.startswith(lib):
            out.append(Change(p, "unmapped", note="not Python: its effect on ops is not traced"))
        else:
            out.append(Change(p, "outside"))
    return out


def targets(change: Change, index: SuiteIndex) -> dict[str, set | None]:
    """path -> the names of it that changed (None: the whole module)."""
    if change.kind in ("module", "registry"):
        if change.whole:
            return {change.path: None}
        return {change.path: set(change.names)} if change.names else {}
    if change.kind == "every":
        return {change.path: None}
    if change.kind == "config":  # the statements that ask for a changed key, else the file by name
        return _naming(index, set(change.keys)) or _naming(index, {change.path.rsplit("/", 1)[-1]})
    return {}


def _naming(index: SuiteIndex, wanted: set[str]) -> dict[str, set | None]:
    """path -> the names of its statements whose calls pass one of ``wanted`` (None: a statement that binds nothing)."""
    out: dict[str, set | None] = {}
    loader = f"{index.libdir}/runtime/"  # the runtime's own modules load every key: they ask for none
    for m in index.modules:
        if m.path.startswith(loader) and "/" not in m.path[len(loader):]:
            continue
        for st in m.stmts:
            if st.literals & wanted:
                if not st.names:
                    out[m.path] = None
                elif out.get(m.path, set()) is not None:
                    out.setdefault(m.path, set()).update(st.names)
    return out


def _hits(tg: dict[str, set | None], deps: Deps) -> bool:
    """Whether ``deps`` meets the changed ``tg`` (a whole module it imports, or a name it uses)."""
    for path, names in tg.items():
        if path in deps.modules:
            return True
        mine = deps.symbols.get(path)
        if mine is not None and (names is None or names & mine):
            return True
    return False


@dataclass
class Selection:
    """The ops ``--changed-since`` selected, why, and what it says about the rest."""

    base: str
    head: str
    rev: str
    ops: list = field(default_factory=list)
    why: dict = field(default_factory=dict)  # op -> [changed path]
    changes: list = field(default_factory=list)
    per_file: dict = field(default_factory=dict)  # path -> [op]
    shared: dict = field(default_factory=dict)  # path -> number of ops it reaches as an import
    total: int = 0
    unmatched: list = field(default_factory=list)  # ops without a registered function found
    dirty: bool = False

    @property
    def source(self) -> str:
        return f"--changed-since {self.rev} ({self.base[:12]}..{self.head[:12]})"


def select(suite, rev: str, ops: list[str] | None = None) -> Selection:
    """The ops of ``suite`` (all, or ``ops``) that the changes between ``rev`` and HEAD touch."""
    base, head = resolve_rev(suite.root, rev)
    sel = Selection(base, head, rev)
    sel.dirty = bool((suite.git or {}).get("dirty"))
    paths = changed_files(suite.root, base, head)
    index = SuiteIndex(suite.root, suite.library, head)
    sel.changes = classify(index, paths, base)
    tgs = [(c, targets(c, index)) for c in sel.changes]
    tests_by_file = {f.path: f.tests for f in suite.files}
    all_ops = suite.ops() if ops is None else ops
    sel.total = len(all_ops)
    for op in all_ops:
        od = index.op_deps(op, suite.resolve(op), tests_by_file)
        if not od.functions:
            sel.unmatched.append(op)
        for c, tg in tgs:
            hit = _hits(tg, od.deps)
            if not hit and c.kind == "registry" and c.keys & od.keys:
                hit = True
            if hit:
                sel.why.setdefault(op, []).append(c.path)
                sel.per_file.setdefault(c.path, []).append(op)
                agg = index.graph.by_path.get(c.path)
                if c.kind == "module" and c.path not in od.own and not (agg is not None and agg.aggregator):
                    sel.shared[c.path] = sel.shared.get(c.path, 0) + 1
    sel.ops = [op for op in all_ops if op in sel.why]
    return sel


def _names(items, limit: int = LIST_LIMIT) -> str:
    return first(items, limit)


def _what(c: Change) -> str:
    if c.kind == "registry":
        parts = [f"registrations {_names(sorted(c.keys), 6)}"] if c.keys else []
        parts += [f"names {_names(sorted(c.names), 6)}"] if c.names else []
        return "; ".join(parts + ([c.note] if c.whole else [])) or "only comments or layout"
    if c.kind == "module":
        if c.whole:
            return c.note or "module-level code"
        return f"names {_names(sorted(c.names), 6)}" if c.names else "only comments or layout"
    if c.kind == "config":
        return f"config keys {_names(sorted(c.keys), 6)}" if c.keys else "no key's value"
    return {"every": "read by every op's screen", "removed": "removed"}.get(c.kind, c.note)


def report_lines(sel: Selection) -> list[str]:
    """What ``--changed-since`` selected and why: a line per changed file that matters,
    one for shared code, one for the rest, one for the ops."""
    lines = [f"--changed-since {sel.rev}: {len(sel.changes)} files changed between {sel.base[:12]} and HEAD {sel.head[:12]}"]
    if sel.dirty:
        lines.append("the suite's checkout has uncommitted changes: --changed-since compares commits (REV..HEAD) and does not see them")
    outside = [c.path for c in sel.changes if c.kind == "outside"]
    for c in sel.changes:
        if c.kind == "outside":
            continue
        hit = sel.per_file.get(c.path, [])
        if sel.shared.get(c.path):
            scope = "every op" if len(hit) == sel.total else f"{len(hit)} of {sel.total} ops"
            lines.append(f"  shared code: {c.path} ({_what(c)}) is imported, directly or through other modules, "
                         f"by {scope}: all of them selected")
        elif hit:
            lines.append(f"  {c.path} ({_what(c)}): {_names(hit)}")
        elif c.kind == "unmapped":
            lines.append(f"  {c.path}: {c.note}; give the ops it concerns with --ops if it matters")
        else:
            lines.append(f"  {c.path} ({_what(c)}): no op depends on what changed")
    if outside:
        lines.append(f"  {len(outside)} files outside the library and {BENCH_DIR}/ (such as {_names(outside, 3)}): no op")
    if sel.ops:
        lines.append(f"selected {len(sel.ops)} of {sel.total} ops: {_names(sel.ops, 40)}")
    return lines


def nothing_selected(sel: Selection) -> str:
    return (f"--changed-since {sel.rev}: no op's implementation or benchmark changed between {sel.base[:12]} and "
            f"HEAD {sel.head[:12]}, so there is nothing to screen (the lines above say what changed). "
            "To screen ops anyway, name them with --ops or --ops-file, or leave --changed-since out for every op.")

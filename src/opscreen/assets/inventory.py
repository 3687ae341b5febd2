"""The op inventory: which ops (markers) a suite has, and how sure we are.

Lifecycle: :func:`build_inventory` takes one or more suite checkouts, scans each
with :mod:`opscreen.providers.markers` (AST, no imports), then, unless told not
to, verifies the scan by collecting every benchmark file in the suite's own
interpreter (``python -m pytest --collect-only -q -p <plugin> benchmark/test_x.py``
from the suite root, a few files at a time, each process killed as a group on its
timeout). The result is an :class:`Inventory`, written by :func:`dump_inventory`
as YAML (or JSON) in a stable order, and read back by :func:`load_inventory`.

Every op says ``verified_by: collect`` only when collection saw its marker on
every test the scan found for it, in every checkout that has it; otherwise
``verified_by: scan``. Every difference between the two views is one
``disagreements`` entry of one line.

The harness process never imports the suite (nor torch): collection runs in a
subprocess through :func:`opscreen.procgroup.run_capture`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ..errors import UsageError, read_input
from ..gitinfo import suite_revision
from ..procgroup import run_capture
from ..providers.markers import BUILTIN_MARKS, FileInfo, op_index, scan_suite, suite_files

SCHEMA = "opscreen.inventory/1"
PLUGIN_MODULE = "_opscreen_inventory_plugin"
STUB_MODULE = "_opscreen_inventory_stub"
ITEM_PREFIX = "OPSCREEN-ITEM "
ERROR_PREFIX = "OPSCREEN-COLLECT-ERROR "

__all__ = [
    "SCHEMA",
    "Checkout",
    "FileCollection",
    "Disagreement",
    "Inventory",
    "resolve_suite_root",
    "default_suite_root",
    "collect_files",
    "build_inventory",
    "inventory_dict",
    "dump_inventory",
    "load_inventory",
    "load_inventory_data",
]


# --------------------------------------------------------------------------- records


@dataclass
class Checkout:
    """One suite checkout: where, which commit, and its scan."""

    name: str
    root: Path
    commit: str | None
    dirty: bool | None
    python: str
    files: list[FileInfo] = field(default_factory=list)
    commit_source: str | None = None  # "git", "declared" (OPSCREEN_SUITE_COMMIT) or None


@dataclass
class FileCollection:
    """What ``pytest --collect-only`` said about one file.

    ``status``: ``ok`` (collected, possibly zero items), ``error`` (the file or
    the run failed; ``error`` holds one line), ``timeout``, or ``skipped`` (not
    attempted because the whole suite failed to collect; ``error`` says why).
    ``tests`` maps a test's qualified name (``Class::method`` or ``function``)
    to its non-builtin marks in ``iter_markers`` order, merged over its items.
    """

    path: str
    status: str
    error: str | None = None
    tests: dict[str, list[str]] = field(default_factory=dict)
    items: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True)
class Disagreement:
    """One line of difference between the scan and collection (or a failure)."""

    checkout: str
    kind: str
    file: str
    detail: str
    test: str | None = None
    op: str | None = None

    def as_dict(self) -> dict:
        d = {"checkout": self.checkout, "kind": self.kind, "file": self.file}
        if self.test is not None:
            d["test"] = self.test
        if self.op is not None:
            d["op"] = self.op
        d["detail"] = self.detail
        return d


#: Disagreement kinds, in the order they are listed.
KINDS = (
    "suite-error",  # collection could not start (conftest import, no pytest): all files
    "scan-error",  # the scan could not parse the file
    "collect-error",  # the file failed to collect
    "collect-timeout",  # collecting the file ran past --timeout
    "test-not-collected",  # the scan saw a test that collection did not
    "test-not-scanned",  # collection found a test the scan did not
    "marker-not-collected",  # the scan saw an op marker on a test, collection did not
    "marker-not-scanned",  # collection saw an op marker the scan did not
)


@dataclass
class Inventory:
    checkouts: list[Checkout]
    collect: bool
    collections: dict[str, dict[str, FileCollection]]  # checkout name -> path -> result
    disagreements: list[Disagreement]
    generated_at: str
    opscreen_version: str
    timeout_s: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    stubs: list[str] = field(default_factory=list)  # modules replaced by stand-ins during collection
    batch: int = 1


# --------------------------------------------------------------------------- suite roots


def default_suite_root() -> Path:
    """The bundled sample suite (``opscreen/sample_suite``)."""
    try:
        from ..providers import flaggems  # type: ignore[attr-defined]

        for attr in ("sample_suite_root", "default_suite_root"):
            fn = getattr(flaggems, attr, None)
            if callable(fn):
                return Path(fn())
        for attr in ("SAMPLE_SUITE_ROOT", "SAMPLE_SUITE"):
            value = getattr(flaggems, attr, None)
            if value:
                return Path(value)
    except Exception:  # noqa: BLE001 - the provider is optional here
        pass
    import opscreen

    return Path(opscreen.__file__).resolve().parent / "sample_suite"


def resolve_suite_root(path: str | os.PathLike) -> Path:
    """A suite root holds ``benchmark/test_*.py``; its ``benchmark/`` dir is accepted too."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageError(f"suite path does not exist: {p}")
    p = p.resolve()
    if (p / "benchmark").is_dir():
        return p
    if p.name == "benchmark" and p.is_dir():
        return p.parent
    raise UsageError(f"not a suite root (no benchmark/ directory): {p}")


def _checkout_names(roots: Sequence[Path]) -> list[str]:
    names: list[str] = []
    for r in roots:
        base = r.name or str(r)
        name, n = base, 2
        while name in names:
            name, n = f"{base}#{n}", n + 1
        names.append(name)
    return names


# --------------------------------------------------------------------------- collection


def _plugin_dir() -> tempfile.TemporaryDirectory:
    tmp = tempfile.TemporaryDirectory(prefix="opscreen-inventory-")
    shutil.copyfile(Path(__file__).with_name("collect_plugin.py"), Path(tmp.name) / f"{PLUGIN_MODULE}.py")
    shutil.copyfile(Path(__file__).with_name("stub_plugin.py"), Path(tmp.name) / f"{STUB_MODULE}.py")
    return tmp


def _child_env(plugin_dir: str, extra: Mapping[str, str] | None, stubs: Sequence[str] = ()) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra or {})
    if stubs:
        env["OPSCREEN_STUB_MODULES"] = ",".join(stubs)
    else:
        env.pop("OPSCREEN_STUB_MODULES", None)
    env["PYTHONPATH"] = plugin_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave the checkout as it was
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _reason(text: str) -> str:
    """One line saying why a pytest run failed, from its combined output."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    conftest = next((ln.strip() for ln in lines if "while loading conftest" in ln), None)
    e_lines = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    if e_lines:
        msg = e_lines[-1]
    else:
        errs = [ln.strip() for ln in lines if "Error" in ln or "error" in ln]
        msg = errs[-1] if errs else (lines[-1].strip() if lines else "no output")
    if conftest:
        where = conftest.split("'")[1] if conftest.count("'") >= 2 else "conftest"
        msg = f"conftest {Path(where).name}: {msg}"
    return " ".join(msg.split())[:400]


def _parse_output(paths: Sequence[str], out: str) -> tuple[dict[str, FileCollection], bool]:
    """Per-file results from the plugin's lines; the bool says whether any were seen."""
    results = {p: FileCollection(p, "ok") for p in paths}
    seen = False
    for line in out.splitlines():
        if line.startswith(ITEM_PREFIX):
            seen = True
            try:
                item = json.loads(line[len(ITEM_PREFIX) :])
            except ValueError:
                continue
            nodeid = str(item.get("nodeid") or "")
            fpath = str(item.get("file") or nodeid.split("::", 1)[0]).replace(os.sep, "/")
            res = results.get(fpath) or results.get(nodeid.split("::", 1)[0])
            if res is None:
                continue
            qual = "::".join(x for x in (item.get("cls"), item.get("function")) if x)
            marks = res.tests.setdefault(qual, [])
            for m in item.get("marks") or []:
                if m not in BUILTIN_MARKS and m not in marks:
                    marks.append(m)
            res.items += 1
        elif line.startswith(ERROR_PREFIX):
            seen = True
            try:
                err = json.loads(line[len(ERROR_PREFIX) :])
            except ValueError:
                continue
            nodeid = str(err.get("nodeid") or "")
            fpath = nodeid.split("::", 1)[0]
            detail = " ".join(str(err.get("error") or "collection failed").split())[:400]
            targets = [results[fpath]] if fpath in results else ([] if fpath else list(results.values()))
            for res in targets:
                if res.status == "ok":
                    res.status, res.error = "error", detail
    return results, seen


def _collect_batch(
    root: Path, python: str, paths: Sequence[str], *, timeout: float, env: Mapping[str, str]
) -> tuple[dict[str, FileCollection], str | None]:
    """Collect ``paths`` in one pytest process. Returns the results and, when pytest
    never reached collection (no plugin output), the one-line reason."""
    stub = ["-p", STUB_MODULE] if env.get("OPSCREEN_STUB_MODULES") else []
    argv = [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *stub, "-p", PLUGIN_MODULE, *paths]
    start = time.monotonic()
    cap = run_capture(argv, timeout=timeout, env=env, cwd=root, grace=2.0)
    took = time.monotonic() - start
    out = cap.stdout + ("\n" if cap.stdout and not cap.stdout.endswith("\n") else "") + cap.stderr
    if cap.error is not None:
        res = {p: FileCollection(p, "error", cap.error, duration_s=took) for p in paths}
        return res, cap.error
    results, seen = _parse_output(paths, out)
    for r in results.values():
        r.duration_s = round(took / max(len(paths), 1), 3)
    if cap.timed_out:
        for r in results.values():
            if r.status == "ok":
                r.status, r.error = "timeout", f"collection timed out after {timeout:g} s"
                r.tests, r.items = {}, 0
        return results, None
    if not seen:
        if cap.returncode == 5:  # pytest: nothing collected, no error
            return results, None
        reason = _reason(out) if out.strip() else f"pytest exited {cap.returncode} with no output"
        for r in results.values():
            r.status, r.error = "error", reason
        return results, reason
    return results, None


def collect_files(
    root: Path,
    python: str,
    paths: Sequence[str],
    *,
    jobs: int = 2,
    timeout: float = 120.0,
    batch: int = 1,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    stubs: Sequence[str] = (),
) -> tuple[dict[str, FileCollection], str | None]:
    """Collect each file of ``paths`` (relative to ``root``) with ``python -m pytest``.

    ``batch`` files share one process (1, the default, is one process per file:
    what a per-op run does, and what attributes a hang to its file). The first
    batch runs alone: when it fails before collection starts (a conftest that does
    not import, no pytest in that interpreter), the rest is not attempted and every
    file is ``skipped`` with that reason, returned as the second value.
    """
    paths = list(paths)
    results: dict[str, FileCollection] = {}
    if not paths:
        return results, None
    batch = max(1, int(batch))
    batches = [paths[i : i + batch] for i in range(0, len(paths), batch)]
    with _plugin_dir() as pdir:
        child_env = _child_env(pdir, env, stubs)

        def one(chunk: Sequence[str]) -> tuple[dict[str, FileCollection], str | None]:
            res, fatal = _collect_batch(root, python, chunk, timeout=timeout * len(chunk), env=child_env)
            if len(chunk) > 1 and any(r.status == "timeout" for r in res.values()):
                # A hang in one file must not cost the others their result.
                for p in chunk:
                    res.update(_collect_batch(root, python, [p], timeout=timeout, env=child_env)[0])
            if progress is not None:
                for p in chunk:
                    progress(f"{p}: {res[p].status}" + (f" ({res[p].error})" if res[p].error else ""))
            return res, fatal

        first, fatal = one(batches[0])
        results.update(first)
        if fatal is not None:
            for chunk in batches[1:]:
                for p in chunk:
                    results[p] = FileCollection(p, "skipped", f"not attempted: {fatal}")
            return results, fatal
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for res, _ in pool.map(one, batches[1:]):
                results.update(res)
    return results, None


# --------------------------------------------------------------------------- building


def _compare(checkout: Checkout, coll: dict[str, FileCollection]) -> tuple[list[Disagreement], dict[str, bool]]:
    """Disagreements of one checkout, and per op whether collection confirmed it."""
    out: list[Disagreement] = []
    confirmed: dict[str, bool] = {}
    name = checkout.name
    for f in checkout.files:
        c = coll.get(f.path)
        if f.error:
            out.append(Disagreement(name, "scan-error", f.path, f.error))
        if c is None or c.status == "skipped":
            for t in f.tests:
                for m in t.markers:
                    confirmed[m] = False
            continue
        if c.status in ("error", "timeout"):
            kind = "collect-error" if c.status == "error" else "collect-timeout"
            out.append(Disagreement(name, kind, f.path, c.error or c.status))
            for t in f.tests:
                for m in t.markers:
                    confirmed[m] = False
            continue
        scanned = {t.name: t for t in f.tests}
        for t in f.tests:
            got = c.tests.get(t.name)
            if got is None:
                out.append(Disagreement(name, "test-not-collected", f.path, "the scan saw this test, collection did not", test=t.name))
                for m in t.markers:
                    confirmed[m] = False
                continue
            for m in t.markers:
                if m in got:
                    confirmed.setdefault(m, True)
                else:
                    confirmed[m] = False
                    out.append(
                        Disagreement(name, "marker-not-collected", f.path, f"marker {m} seen by the scan, not by collection", test=t.name, op=m)
                    )
            for m in got:
                if m not in t.markers:
                    confirmed.setdefault(m, True)
                    out.append(
                        Disagreement(name, "marker-not-scanned", f.path, f"marker {m} seen by collection, not by the scan", test=t.name, op=m)
                    )
        for qual, marks in sorted(c.tests.items()):
            if qual not in scanned:
                detail = "collection found this test, the scan did not" + (f" (markers: {', '.join(marks)})" if marks else "")
                out.append(Disagreement(name, "test-not-scanned", f.path, detail, test=qual))
                for m in marks:
                    confirmed.setdefault(m, True)
    return out, confirmed


def build_inventory(
    roots: Sequence[str | os.PathLike],
    *,
    python: str | None = None,
    collect: bool = True,
    jobs: int = 2,
    timeout: float = 120.0,
    batch: int = 1,
    env: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    stubs: Sequence[str] = (),
    stage: Callable[[str, int | None], None] | None = None,
) -> Inventory:
    """Scan (and unless ``collect`` is false, collect) each suite checkout; ``stage(text,
    files)`` hears where it is (the files to collect with a collection's start), and
    ``progress`` one line per collected file."""
    stage = stage or (lambda text, files: None)
    from .. import __version__

    resolved = [resolve_suite_root(r) for r in roots]
    seen: set[Path] = set()
    for r in resolved:
        if r in seen:
            raise UsageError(f"suite given twice: {r}")
        seen.add(r)
    py = python or sys.executable
    checkouts: list[Checkout] = []
    collections: dict[str, dict[str, FileCollection]] = {}
    disagreements: list[Disagreement] = []
    seconds: dict[str, float] = {}
    for name, root in zip(_checkout_names(resolved), resolved):
        rev = suite_revision(root)  # a bad OPSCREEN_SUITE_COMMIT is a UsageError
        t0 = time.monotonic()
        stage(f"scanning {root}", None)
        files = scan_suite(root, cache_dir=cache_dir)
        seconds[f"{name}.scan"] = round(time.monotonic() - t0, 3)
        co = Checkout(name, root, rev["commit"], rev["dirty"], py, files, rev["commit_source"])
        checkouts.append(co)
        if not files:
            raise UsageError(f"no benchmark/test_*.py files under {root}")
        if collect:
            t0 = time.monotonic()
            paths = [p.relative_to(root).as_posix() for p in suite_files(root)]
            stage(f"collecting {len(paths)} files of {name} ({jobs} at a time, {timeout:g} s each at most)", len(paths))
            coll, fatal = collect_files(
                root, py, paths, jobs=jobs, timeout=timeout, batch=batch, env=env, progress=progress, stubs=stubs
            )
            seconds[f"{name}.collect"] = round(time.monotonic() - t0, 3)
            collections[name] = coll
            if fatal is not None:
                disagreements.append(Disagreement(name, "suite-error", "benchmark", f"no file could be collected: {fatal}"))
            found, _ = _compare(co, coll)
            if fatal is not None:  # the suite-error line already says it, once
                found = [d for d in found if not (d.kind == "collect-error" and fatal in d.detail)]
            disagreements.extend(found)
    order = {k: i for i, k in enumerate(KINDS)}
    disagreements.sort(key=lambda d: (d.checkout, d.file, order.get(d.kind, 99), d.test or "", d.op or "", d.detail))
    return Inventory(
        checkouts=checkouts,
        collect=collect,
        collections=collections,
        disagreements=disagreements,
        generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        opscreen_version=__version__,
        timeout_s=timeout if collect else None,
        seconds=seconds,
        stubs=sorted(set(stubs)) if collect else [],
        batch=batch,
    )


def _one_or_list(values: Iterable[str | None]) -> str | list[str] | None:
    distinct = sorted({v for v in values if v})
    if not distinct:
        return None
    return distinct[0] if len(distinct) == 1 else distinct


def inventory_dict(inv: Inventory, portable: bool = False) -> dict:
    """The inventory as plain data, in the order it is written."""
    per_op, confirmed_all = _tests_per_op(inv)
    names = [co.name for co in inv.checkouts]
    ops = {op: _op_entry(inv, per_op[op], confirmed_all[op], names) for op in sorted(per_op)}
    checkouts = [_checkout_entry(inv, co, portable) for co in inv.checkouts]
    return {
        "schema": SCHEMA,
        "generated_by": f"opscreen {inv.opscreen_version}",
        "generated_at": inv.generated_at,
        "checkouts": checkouts,
        "summary": _summary_entry(inv, ops),
        "ops": ops,
        "disagreements": [_Flow.dict(d.as_dict()) for d in inv.disagreements],
    }


def _tests_per_op(inv: Inventory) -> tuple[dict[str, dict], dict[str, dict[str, bool]]]:
    """Per op: the tests of each checkout that carry its marker (the scan's, then those
    only collection saw), and per checkout whether collection confirmed the op."""
    per_op: dict[str, dict] = {}
    confirmed_all: dict[str, dict[str, bool]] = {}
    for co in inv.checkouts:
        coll = inv.collections.get(co.name)
        confirmed = _compare(co, coll)[1] if coll is not None else {}
        tests_by_name = {(f.path, t.name): t for f in co.files for t in f.tests}
        for op, pairs in op_index(co.files).items():
            entry = per_op.setdefault(op, {"checkouts": {}, "tests": {}})
            entry["checkouts"][co.name] = [f"{p}::{t}" for p, t in pairs]
            for p, t in pairs:
                entry["tests"][f"{p}::{t}"] = tests_by_name[(p, t)]
            confirmed_all.setdefault(op, {})[co.name] = confirmed.get(op, False) if coll is not None else False
        if coll is not None:  # ops only collection saw
            for path, c in coll.items():
                for qual, marks in c.tests.items():
                    for m in marks:
                        if m not in per_op or co.name not in per_op[m]["checkouts"]:
                            entry = per_op.setdefault(m, {"checkouts": {}, "tests": {}})
                            entry["checkouts"].setdefault(co.name, []).append(f"{path}::{qual}")
                            confirmed_all.setdefault(m, {})[co.name] = True
    return per_op, confirmed_all


def _op_entry(inv: Inventory, entry: dict, confirmed: dict[str, bool], names: list[str]) -> dict:
    """One op's record: who vouches for it, its checkouts, files, tests, bench class, dtypes."""
    have = [n for n in names if n in entry["checkouts"]]
    all_tests = sorted({t for n in have for t in entry["checkouts"][n]})
    infos = list(entry["tests"].values())
    d: dict = {
        "verified_by": "collect" if inv.collect and all(confirmed.get(n) for n in have) else "scan",
        "checkouts": _Flow(have),
        "files": sorted({t.split("::", 1)[0] for t in all_tests}),
        "tests": all_tests,
    }
    if len(have) > 1 and any(sorted(entry["checkouts"][n]) != all_tests for n in have):
        d["tests_by_checkout"] = {n: sorted(entry["checkouts"][n]) for n in have}
    bench = _one_or_list(t.bench_class for t in infos)
    dtypes = _one_or_list(t.dtypes_expr for t in infos)
    if bench is not None:
        d["bench_class"] = bench
    if dtypes is not None:
        d["dtypes"] = dtypes
    return d


def _checkout_entry(inv: Inventory, co: Checkout, portable: bool) -> dict:
    """One checkout's record: where and what it is, what the scan found, how collection went."""
    stems = [f.path for f in co.files if f.path.rsplit("/", 1)[-1][len("test_") : -len(".py")] not in f.markers]
    unmarked = [f"{f.path}::{t.name}" for f in co.files for t in f.tests if not t.markers]
    entry: dict = {
        "name": co.name,
        # portable: no machine paths in an inventory kept as data (the folder's and the
        # interpreter's names only)
        "path": co.root.name if portable else str(co.root),
        "commit": co.commit,
        "dirty": co.dirty,
        "commit_source": co.commit_source,
        "python": os.path.basename(co.python) if portable else co.python,
        "files": len(co.files),
        "tests": sum(len(f.tests) for f in co.files),
        "ops": len(op_index(co.files)),
        "files_without_tests": [f.path for f in co.files if not f.tests],
        "files_whose_stem_is_not_a_marker": stems,
        "tests_without_op_marker": unmarked,
    }
    coll = inv.collections.get(co.name)
    entry["collection"] = {"mode": "off"} if coll is None else _collection_entry(inv, co, coll)
    return entry


def _collection_entry(inv: Inventory, co: Checkout, coll: dict) -> dict:
    """How collection of one checkout went: its mode, time and per-status file counts."""
    counts: dict[str, int] = {}
    for c in coll.values():
        counts[c.status] = counts.get(c.status, 0) + 1
    mode = "pytest --collect-only, " + (f"{inv.batch} files per process" if inv.batch > 1 else "per file")
    if inv.stubs:
        mode += ", with stand-ins for " + ", ".join(inv.stubs)
    return {
        "mode": mode,
        "timeout_s": inv.timeout_s,
        "seconds": inv.seconds.get(f"{co.name}.collect"),
        "files_ok": counts.get("ok", 0),
        "files_error": counts.get("error", 0),
        "files_timeout": counts.get("timeout", 0),
        "files_skipped": counts.get("skipped", 0),
        "items": sum(c.items for c in coll.values()),
    }


def _summary_entry(inv: Inventory, ops: dict[str, dict]) -> dict:
    n_collect = sum(1 for d in ops.values() if d["verified_by"] == "collect")
    return {
        "ops": len(ops),
        "verified_by_collect": n_collect,
        "verified_by_scan": len(ops) - n_collect,
        "disagreements": len(inv.disagreements),
        "note": (
            "verified_by: collect = pytest collection saw the marker on every test the scan found, "
            "in every checkout; scan = the AST scan alone vouches for it"
            + ("" if inv.collect else " (collection was not run)")
            + (
                f"; collection imported stand-ins for {', '.join(inv.stubs)}, not the real library"
                if inv.stubs
                else ""
            )
        ),
    }


# --------------------------------------------------------------------------- writing / reading


class _Flow(list):
    """A list written in YAML flow style (``[a, b]``): one line, diff-friendly."""

    @staticmethod
    def dict(d: dict) -> "_FlowDict":
        return _FlowDict(d)


class _FlowDict(dict):
    """A mapping written in YAML flow style (one line)."""


def _yaml_dumper():
    import yaml

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class Dumper(base):  # type: ignore[misc, valid-type]
        pass

    Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", list(v), flow_style=True))
    Dumper.add_representer(
        _FlowDict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", dict(v).items(), flow_style=True)
    )
    return Dumper


def dumps_inventory(data: dict, fmt: str = "yaml") -> str:
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    import yaml

    header = "# opscreen inventory: ops (pytest markers) of a benchmark suite. Generated; do not edit by hand.\n"
    return header + yaml.dump(data, Dumper=_yaml_dumper(), sort_keys=False, default_flow_style=False, width=4096, allow_unicode=True)


def dump_inventory(inv: Inventory | dict, out: str | os.PathLike | None) -> str:
    """Write the inventory to ``out`` (YAML; JSON when it ends with ``.json``) or return it."""
    data = inventory_dict(inv) if isinstance(inv, Inventory) else inv
    fmt = "json" if out is not None and str(out).endswith(".json") else "yaml"
    text = dumps_inventory(data, fmt)
    if out is not None:
        from ..fsio import atomic_write_text

        atomic_write_text(out, text)
    return text


def load_inventory_data(path: str | os.PathLike) -> dict:
    """Read an inventory file (YAML or JSON); :class:`UsageError` when it is not one."""
    p = Path(path)
    text = read_input(p, "inventory")
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - yaml and json raise different types
        raise UsageError(f"inventory {p} is not valid YAML/JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("ops"), dict):
        raise UsageError(f"{p} is not an opscreen inventory (schema {SCHEMA!r} expected)")
    return data


def load_inventory(
    path: str | os.PathLike, *, checkout: str | None = None, verified_only: bool = False
) -> list[str]:
    """Op names of an inventory, sorted (for ``opscreen run --inventory``).

    ``checkout`` keeps the ops of that checkout only; ``verified_only`` keeps the
    ops verified by collection.
    """
    data = load_inventory_data(path)
    ops = []
    for name, entry in data["ops"].items():
        entry = entry or {}
        if checkout is not None and checkout not in (entry.get("checkouts") or []):
            continue
        if verified_only and entry.get("verified_by") != "collect":
            continue
        ops.append(str(name))
    return sorted(ops)


def ops_files(path: str | os.PathLike) -> dict[str, list[str]]:
    """``op -> [file, ...]`` of an inventory file (the node targets a runner needs)."""
    data = load_inventory_data(path)
    return {str(k): list((v or {}).get("files") or []) for k, v in sorted(data["ops"].items())}

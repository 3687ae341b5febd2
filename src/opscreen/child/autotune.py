"""Which config each autotuned kernel chose in this process (the op identity's ``autotune``).

A plain ``@triton.autotune`` benchmarks its configs in every process that calls a kernel
with a new key and keeps the fastest; when two configs are within the benchmark's noise
of each other, the winner flips from process to process, and with it the kernel's
latency (an H200 read ``batch_norm`` at about 4.8 us in one process and 12 us in the
next). ``compare`` must not call such a row slower: it needs to know that A and B ran
different configs. This module records them, at no cost inside the measured calls:

* :func:`start` (the identity plugin, before the op's tests run) patches ``run`` of
  ``triton.runtime.autotuner.Autotuner`` and of every subclass that defines its own
  (FlagGems' ``LibTuner`` and its policies) with a wrapper that notes which tuner ran;
  a note is one set insertion per call, and graph replays make none. It also forgets
  what the process's earlier ops used (a warm worker's tuners outlive an op).
* :func:`picks` (the identity plugin, at session finish, and at each :func:`checkpoint` where
  the op ran a tuner: after each measured case and each test) reads, for each tuner this op
  ran, its winners: every ``key -> config`` of a dict cache (Triton's own), else the
  last config it chose (``LibTuner`` keeps its winners in a database that later
  processes share, so its picks do not flip between processes of one setup).

Nothing here imports Triton: where no module has imported it (a CPU run, a suite
without Triton), there is nothing to record and :func:`picks` says so. The record
format is in docs/contracts.md ("The op identity", ``autotune``).
"""

from __future__ import annotations

import sys

AUTOTUNER_MODULE = "triton.runtime.autotuner"
_USED: dict[int, object] = {}  # id(tuner) -> tuner, for the tuners the op ran
_PATCHED_ATTR = "__opscreen_autotune_wrapped__"
_SAVE: list = []  # the identity plugin's writer of the record (on_change), called by checkpoint()
MAX_KEYS = 64  # winners per kernel kept in the record (a kernel tuned for many shapes)


def _base_class():
    mod = sys.modules.get(AUTOTUNER_MODULE)
    return getattr(mod, "Autotuner", None) if mod is not None else None


def _subclasses(cls) -> list:
    out, todo, seen = [], [cls], set()
    while todo:
        c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        try:
            todo.extend(c.__subclasses__())
        except TypeError:
            pass
    return out


def _wrap(run):
    def run_noting_tuner(self, *args, **kwargs):
        _USED[id(self)] = self
        return run(self, *args, **kwargs)

    setattr(run_noting_tuner, _PATCHED_ATTR, _USED)  # the registry it notes into: this module's
    run_noting_tuner.__wrapped__ = run
    run_noting_tuner.__name__ = getattr(run, "__name__", "run")
    return run_noting_tuner


def start() -> int:
    """Forget the tuners earlier ops ran (a warm worker's tuners outlive an op) and
    :func:`patch`; the number of classes patched now."""
    _USED.clear()
    return patch()


def patch() -> int:
    """Patch ``run`` of the autotuner classes defined so far that are not patched yet (the
    identity plugin calls it before the op's tests and before each test: a suite may import
    Triton late); the number patched now. A ``run`` an earlier copy of this module patched is
    patched again: a warm worker drops ``opscreen.child.*`` after each op and imports it
    afresh (child/worker.py), while Triton's classes, and the wrappers on them, stay; the old
    wrapper would note the op's tuners in the old copy's registry, which :func:`picks` of the
    new copy never reads (until 2026-12-07, a worker's ops after the first to import Triton
    recorded no pick)."""
    base = _base_class()
    if base is None:
        return 0
    n = 0
    for cls in _subclasses(base):
        run = cls.__dict__.get("run")
        if run is None or not callable(run):
            continue
        mark = getattr(run, _PATCHED_ATTR, None)
        if mark is _USED:
            continue
        if mark is not None:  # patched by an earlier copy of this module (a warm worker
            run = run.__wrapped__  # re-imports it for each op): its notes would go to that copy
        try:
            cls.run = _wrap(run)
        except (TypeError, AttributeError):
            continue
        n += 1
    return n


def on_change(save) -> None:
    """Register ``save()`` (the identity plugin's, at its session start), which writes the
    record when it changed; :func:`checkpoint` calls it."""
    _SAVE[:] = [save]


def checkpoint() -> None:
    """After each measured case (the timing plugin) and each test (the identity plugin): have
    the record written if the op ran a tuner. A suite logs a case's row as soon as it is
    measured (FlagGems: one record line per dtype), so an op killed halfway through a test
    still has the picks of every row it logged."""
    if _USED and _SAVE:
        try:
            _SAVE[0]()
        except Exception:  # a record not saved now is saved at the session's end; never fail a case for it
            pass


def kernel_name(tuner) -> str:
    """``module.function`` of the kernel a tuner tunes (its ``base_fn``, else down its ``fn`` chain)."""
    fn = getattr(tuner, "base_fn", None)
    depth = 0
    cur = tuner
    while fn is None and depth < 8:
        cur = getattr(cur, "fn", None)
        if cur is None:
            break
        if callable(cur) and hasattr(cur, "__code__"):
            fn = cur
        depth += 1
    fn = fn if fn is not None else tuner
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    mod = getattr(fn, "__module__", None)
    return f"{mod}.{name}" if mod else str(name)


def _config_text(cfg) -> str:
    return " ".join(str(cfg).split())


def _winners(tuner) -> tuple[dict, str]:
    """(key -> config text, where they came from): ``cache`` of a dict cache, else ``last``."""
    cache = getattr(tuner, "cache", None)
    if isinstance(cache, dict) and cache:
        items = sorted(((repr(k), _config_text(v)) for k, v in cache.items()))[:MAX_KEYS]
        return dict(items), "cache"
    best = getattr(tuner, "best_config", None)
    if best is not None:
        return {"(last)": _config_text(best)}, "last"
    return {}, "none"


def picks() -> dict:
    """The op's record: ``{"source", "kernels": {name: {"picks": {key: config}, "from": ...,
    "configs": N}}}``; ``source`` None where Triton's autotuner was never imported."""
    kernels: dict[str, dict] = {}
    for tuner in list(_USED.values()):
        try:
            winners, origin = _winners(tuner)
            n_cfg = len(getattr(tuner, "configs", ()) or ())
        except Exception as exc:  # a tuner we cannot read is recorded as such, never fatal
            winners, origin, n_cfg = {}, f"unreadable: {type(exc).__name__}", 0
        if n_cfg <= 1 and origin != "cache":
            continue  # one config: nothing was chosen
        name = kernel_name(tuner)
        entry = kernels.setdefault(name, {"picks": {}, "from": origin, "configs": n_cfg})
        entry["picks"].update(winners)
    source = AUTOTUNER_MODULE if _base_class() is not None else None
    return {"source": source, "kernels": dict(sorted(kernels.items()))}


def differing(a: dict | None, b: dict | None) -> list[dict]:
    """The (kernel, key) winners two records hold with different configs:
    ``[{"kernel", "key", "a", "b"}]``, sorted; keys only one record has are not compared."""
    ka = ((a or {}).get("kernels") or {}) if isinstance(a, dict) else {}
    kb = ((b or {}).get("kernels") or {}) if isinstance(b, dict) else {}
    out = []
    for name in sorted(ka.keys() & kb.keys()):
        pa = (ka[name] or {}).get("picks") or {}
        pb = (kb[name] or {}).get("picks") or {}
        for key in sorted(pa.keys() & pb.keys()):
            if pa[key] != pb[key]:
                out.append({"kernel": name, "key": key, "a": pa[key], "b": pb[key]})
    return out

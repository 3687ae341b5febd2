"""A warm worker: one long-lived process per lane that runs op after op.

Started by the harness (``opscreen.op.worker``) in the suite's own interpreter, in
the suite root, with the lane's environment. It imports torch, the backend's torch
extension and the suite's library once, then reads requests from the control pipe
(the fd named by ``OPSCREEN_WORKER_FD``; one JSON object per line) and runs each op
as a **fresh pytest session** in this process: ``pytest.main(args)`` with the op's
own environment (its child config, its ``PYTEST_ADDOPTS``) and working directory.

Why a fresh session per op rather than pytest-xdist's model (``remote.py`` collects
the whole test set once, then runs the items the controller sends): an op of the
screen is a pytest invocation of its own (its file, its ``-m`` marker, its suite
options and the opscreen plugins configured for it, which read the op's config at
``pytest_configure``); one collection for every op would have to collect the whole
suite up front (minutes on FlagGems) and share one config, one record log and one
set of plugin states between ops. A fresh session per op keeps every op's files and
settings exactly as in a fresh process; what the worker saves is the interpreter
start and the imports of torch and the library, which are most of an op's cost.

Between ops (:func:`hygiene`) the worker makes the next op see what a fresh process
would: it synchronises the device and frees its cached memory, re-seeds torch (its
seed at start), Python's and NumPy's generators, restores torch's default dtype and
grad mode, removes logging handlers the op added, restores ``sys.path`` and the
signal handlers, drops the modules the op imported from the suite's test tree (its
conftest and benchmark modules, so their globals start fresh) and every
``opscreen.child`` plugin module but :mod:`opscreen.child.persist` (also from their
package's attributes: a dropped module that something still holds keeps its globals,
and with them the op's last timed callable and its inputs, alive), makes the finished
session's assertion-rewriting hook let go of its session (a pytest plugin first
imported inside it keeps the hook as its loader), and collects garbage (the timing
plugin froze what was alive after collection, and left it frozen:
``opscreen.child.timing.freeze_heap``; the hygiene thaws it first), and lets the next
op settle the device again at its first measurement
(:func:`opscreen.child.persist.unsettle`). It then reports its memory so that the
harness can recycle it.

The heap an op starts from (the imports, then what the hygiene left alive) is frozen
(:func:`freeze_base`): the timing plugin's collection once the op's tests are collected
then scans only what the op's session made, as in a fresh process, not the imports'
hundreds of thousands of objects again (a full collection: 0.1 s with torch and pytest,
about twice that with a library and Triton, once an op). Everything alive once the op is
collected stays frozen while it is measured and until its session has ended; the hygiene
thaws it all and collects it in full. What the hygiene then freezes must be only what a
fresh process would hold: nothing of the op may still be referenced at its collection,
not even by a local variable of the hygiene (the last module of its loop over
``sys.modules`` was the op's test module, kept alive, frozen, through the next op, until
the fault suite's ``leak`` ops caught it), so each step that touches the op's objects is
a function of its own.

The canary (:func:`canary_us`: a fixed graph of tiny kernels, read after the imports and
after each op) is a diagnostic, off unless ``OPSCREEN_WORKER_CANARY=1``: its own
allocations and launches before an op's session move where that op's small kernels
read (on an H200, up to 1 % row by row on kernels under 10 us, the same on every op of
the worker; without it a worker reads what a fresh process reads:
bench/results/2026-12-01-h200-canary.md).

Output: the op's stdout and stderr go to the worker's own (a pipe the harness reads
into the op's ``run.log``); after each op the worker prints one :data:`DONE` line
with the pytest exit status and its memory, and once at start a :data:`READY` line
with what its imports cost. A device-fatal error, a crash or a hang ends or kills the
whole worker; the harness then runs that op again in a fresh process.

Standard library only at import (torch and pytest are imported in :func:`main`).
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import os
import random
import signal
import statistics
import sys
import time
import traceback

ENV_CONTROL_FD = "OPSCREEN_WORKER_FD"
ENV_PREIMPORT = "OPSCREEN_WORKER_PREIMPORT"  # comma-separated modules imported once at start
ENV_DEVICE_TYPE = "OPSCREEN_WORKER_DEVICE_TYPE"
ENV_SUITE_ROOT = "OPSCREEN_WORKER_SUITE_ROOT"
ENV_KEEP = "OPSCREEN_WORKER_KEEP"  # comma-separated top-level packages under the suite root that stay imported
# seconds the worker waits after an op's hygiene, the device idle (a diagnostic: a fresh
# process leaves the device idle for its start and imports before each op; see README)
ENV_REST = "OPSCREEN_WORKER_REST_S"
# "1": the worker takes its canary after its imports and after each op (a diagnostic, off by
# default: the canary's own work on the device moves what the next op's small kernels read)
ENV_CANARY = "OPSCREEN_WORKER_CANARY"
# "MAX_MB" or "MAX_MB:SEED": before each op the worker allocates a pad of a seeded random size
# below MAX_MB MiB on its device and holds it through the op (a diagnostic, off by default:
# Stabilizer's idea, whether a moved placement makes a worker's rows spread as fresh
# processes' do; docs/workers.md)
ENV_PAD = "OPSCREEN_WORKER_PAD"
READY = "\x1eOPSCREEN-WORKER-READY "
DONE = "\x1eOPSCREEN-WORKER-DONE "
PLUGIN_PREFIX = "opscreen.child."
KEPT_PLUGIN_MODULES = (__name__, "opscreen.child.persist")  # what the process keeps across ops (persist.py)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _announce(prefix: str, payload: dict) -> None:
    _flush()
    os.write(1, (prefix + json.dumps(payload) + "\n").encode())


def preimport(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """Import ``names`` in order; a module that fails is left to the op (which reports
    it as a fresh process would), and its first error line is returned."""
    done: list[str] = []
    errors: dict[str, str] = {}
    for name in names:
        try:
            importlib.import_module(name)
            done.append(name)
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a library's import too
            text = str(exc).splitlines()[0] if str(exc) else ""
            errors[name] = f"{type(exc).__name__}: {text}"[:300]
    return done, errors


class Baseline:
    """What a fresh process looks like, taken once after the imports."""

    def __init__(self, suite_root: str, keep: list[str], device_type: str):
        self.modules = set(sys.modules)
        self.path = list(sys.path)
        self.suite_root = os.path.realpath(suite_root) + os.sep if suite_root else None
        self.keep = set(keep)
        self.device_type = device_type
        self.handlers = {name: list(lg.handlers) for name, lg in _loggers()}
        self.signals = _signal_handlers()
        self.torch: dict = {}
        torch = sys.modules.get("torch")
        try:
            if torch is not None:
                self.torch = {"seed": torch.initial_seed(), "dtype": torch.get_default_dtype(),
                              "grad": torch.is_grad_enabled()}
        except Exception:  # not a torch this worker knows how to reset: leave it be
            self.torch = {}


def _signal_handlers() -> dict:
    out = {}
    for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None), getattr(signal, "SIGUSR1", None),
                getattr(signal, "SIGUSR2", None), getattr(signal, "SIGALRM", None)):
        if sig is not None:
            try:
                out[sig] = signal.getsignal(sig)
            except (ValueError, OSError):
                pass
    return out


def _loggers():
    yield "", logging.getLogger()
    for name, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger):
            yield name, lg


def _suite_module(base: Baseline, name: str, mod) -> bool:
    """A module the op imported from the suite's tree (its conftest and test modules),
    not from the library the worker keeps."""
    if name.startswith(PLUGIN_PREFIX) and name not in KEPT_PLUGIN_MODULES:
        return True
    if name in base.modules or base.suite_root is None:
        return False
    path = getattr(mod, "__file__", None)
    if not path or name.split(".")[0] in base.keep:
        return False
    return os.path.realpath(path).startswith(base.suite_root)


def _unbind(name: str, mod) -> None:
    """Drop the attribute by which a kept parent package still holds a dropped module
    (``opscreen.child.timing`` on ``opscreen.child``): else the module, its globals and
    whatever they hold (the op's last timed callable and its inputs) live on."""
    parent, _, leaf = name.rpartition(".")
    pkg = sys.modules.get(parent) if parent else None
    if pkg is not None and getattr(pkg, leaf, None) is mod:
        try:
            delattr(pkg, leaf)
        except AttributeError:
            pass


def freeze_base() -> None:
    """Collect, then freeze what is alive (``gc.freeze``): the heap the next op starts
    from, out of the collector's sight until the hygiene after it (module docstring)."""
    gc.collect()
    gc.freeze()


def _drop_what_the_op_added(base: Baseline) -> None:
    """The op's logging handlers, suite modules, ``sys.path`` entries and signal handlers.
    A function of its own: its loop variables (the last module, the last handler) die
    with it, before the hygiene collects; a local of the hygiene's frame would keep the
    op's test module, and what its globals hold, alive past the collection."""
    for name, lg in _loggers():
        for h in [h for h in lg.handlers if h not in base.handlers.get(name, ())]:
            lg.removeHandler(h)
            try:
                h.close()
            except Exception:
                pass
    for name, mod in list(sys.modules.items()):
        if _suite_module(base, name, mod):
            del sys.modules[name]
            _unbind(name, mod)
    sys.path[:] = base.path
    for sig, handler in base.signals.items():  # an op's handlers (and the modules they hold) go with it
        if handler is not None and signal.getsignal(sig) is not handler:
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError, TypeError):
                pass


def hygiene(base: Baseline) -> dict:
    """Make the next op see what a fresh process would (module docstring); return the
    worker's memory after it."""
    t0 = time.monotonic()
    gc.unfreeze()  # what the op's session froze (timing.freeze_heap) and the heap it started from
    _drop_what_the_op_added(base)
    _release_rewrite_hooks()
    from opscreen.child import persist

    persist.unsettle()
    memory = _reset_torch(base)
    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed()
        except Exception:
            pass
    if not base.torch:  # _reset_torch collected already
        gc.collect()
    gc.freeze()  # the heap the next op starts from (module docstring)
    return {"hygiene_s": round(time.monotonic() - t0, 3), "rss_mb": rss_mb(), **memory}


def _release_rewrite_hooks() -> None:
    """A module first imported inside an op's pytest session and kept (a pytest plugin
    loaded from its entry point, such as pytest_timeout) keeps that session's
    assertion-rewriting hook as its loader, and the hook holds the session's config:
    its session, its items and the op's test module would then live as long as the
    worker. The finished session's hook lets go of both (it only needs them to import,
    and it is off ``sys.meta_path`` once its session ends)."""
    rewrite = sys.modules.get("_pytest.assertion.rewrite")
    hook_type = getattr(rewrite, "AssertionRewritingHook", None)
    if hook_type is None:
        return
    for mod in list(sys.modules.values()):
        spec = getattr(mod, "__spec__", None)
        for loader in (getattr(mod, "__loader__", None), getattr(spec, "loader", None)):
            if isinstance(loader, hook_type) and loader not in sys.meta_path:
                for attr in ("config", "session"):
                    if getattr(loader, attr, None) is not None:
                        setattr(loader, attr, None)


def _reset_torch(base: Baseline) -> dict:
    torch = sys.modules.get("torch")
    if torch is None or not base.torch:
        return {}
    out: dict = {}
    try:
        torch.set_grad_enabled(base.torch["grad"])
        torch.set_default_dtype(base.torch["dtype"])
        torch.manual_seed(base.torch["seed"])
    except Exception as exc:
        out["reset_error"] = f"{type(exc).__name__}: {exc}"[:200]
    gc.collect()  # the op's tensors, before the device's cache is emptied
    mod = getattr(torch, base.device_type, None) if base.device_type and base.device_type != "cpu" else None
    if mod is not None:
        try:
            if mod.is_available():
                mod.synchronize()
                clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None) if base.device_type == "cuda" else None
                if clear is not None:  # cuBLAS keeps its workspaces in the caching allocator: let them go too
                    clear()
                mod.empty_cache()
                if hasattr(mod, "memory_allocated"):
                    out["device_allocated_mb"] = round(mod.memory_allocated() / 2**20, 1)
                if hasattr(mod, "memory_reserved"):
                    out["device_reserved_mb"] = round(mod.memory_reserved() / 2**20, 1)
                used = device_used_mb(base.device_type, torch)
                if used is not None:
                    out["device_used_mb"] = used
        except Exception as exc:  # a broken context: the harness recycles the worker
            out["device_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
    return out


def device_used_mb(device_type: str, torch=None) -> float | None:
    """What the device has in use, total less free, in MiB: the context, the code of every
    kernel loaded so far, the allocator's reserve and anything else on it. Only where this
    process has a context already (asking never makes one, which would put work on the
    device before an op's session); None elsewhere."""
    torch = torch if torch is not None else sys.modules.get("torch")
    mod = getattr(torch, device_type, None) if torch is not None and device_type not in ("", "cpu") else None
    initialized = getattr(mod, "is_initialized", None)
    try:
        if initialized is None or not initialized() or not hasattr(mod, "mem_get_info"):
            return None
        free, total = mod.mem_get_info()
        return round((total - free) / 2**20, 1)
    except Exception:  # noqa: BLE001 - a broken context shows in the hygiene's device check
        return None


def rss_mb() -> float | None:
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        try:
            import resource

            return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        except Exception:
            return None


CANARY_NODES = 200  # one-element additions in the canary's graph
CANARY_REPLAYS = 15


def canary_us(device_type: str, torch=None) -> float | None:
    """The worker's canary, a diagnostic (:func:`canary_enabled`): :func:`graph_kernel_us`
    on the process's side stream (the one the graph timer replays on: persist.py), each
    timed replay behind an untimed one (as the graph timer's samples: the host's
    submission is never timed). The device is settled first, as before any measurement
    (:func:`opscreen.child.persist.settled_side_stream`). When enabled, taken once after
    the imports and after every op's hygiene; the harness replaces a worker whose canary
    rose (opscreen.op.lane). None without a CUDA/HIP device, or when it cannot be taken."""
    torch = torch if torch is not None else sys.modules.get("torch")
    if torch is None or device_type != "cuda":
        return None
    try:
        cuda = torch.cuda
        if not cuda.is_available():
            return None
        from opscreen.child import persist

        us = graph_kernel_us(torch, persist.settled_side_stream(torch, device_type, cuda.current_device(), cuda.Stream))
        cuda.empty_cache()
        return us
    except Exception:  # a canary that cannot be taken says nothing; the op's own errors show in the op
        return None


def graph_kernel_us(torch, stream, lead: str = "replay") -> float:
    """Device time per kernel (us) of a CUDA graph of :data:`CANARY_NODES` one-element
    additions replayed on ``stream``: the median of :data:`CANARY_REPLAYS` replays, each
    between two device events, after one untimed replay. ``lead`` is what precedes each
    timed replay: ``replay`` (an untimed one: device time only), ``sleep`` (a ~1 ms
    ``torch.cuda._sleep``: device time only) or ``none`` (a timed replay right after the
    host's sync, so its submission is timed too; bench/device/canary_probe.py)."""
    cuda = torch.cuda
    x = torch.zeros(1, device="cuda")
    graph = cuda.CUDAGraph()
    with cuda.stream(stream):
        x.add_(1)  # warm: the kernel loaded before the capture
    stream.synchronize()
    with cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
        for _ in range(CANARY_NODES):
            x.add_(1)
    times = []
    with cuda.stream(stream):
        graph.replay()
        for _ in range(CANARY_REPLAYS):
            if lead == "replay":
                graph.replay()  # the device busy while the timed replay is submitted
            elif lead == "sleep":
                cuda._sleep(2_000_000)
            begin, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            begin.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end))
    graph.reset()
    return round(statistics.median(times) * 1e3 / CANARY_NODES, 4)


def canary_enabled(environ) -> bool:
    """True when :data:`ENV_CANARY` is ``1`` (the diagnostic that takes the canary)."""
    return environ.get(ENV_CANARY, "").strip() == "1"


def pad_spec(environ) -> tuple[float, int] | None:
    """:data:`ENV_PAD` as (max MiB, seed), or None when it is unset, zero or not of that form."""
    mb, _, seed = environ.get(ENV_PAD, "").strip().partition(":")
    try:
        top, base = float(mb), int(seed or 0)
    except ValueError:
        return None
    return (top, base) if top > 0 else None


def pad_mb(spec: tuple[float, int], key: str) -> float:
    """The pad's size for the op ``key``: uniform below the maximum, from the seed and the key alone
    (the same screen draws the same pads; another seed draws others)."""
    return round(random.Random(f"{spec[1]}:{key}").uniform(0.0, spec[0]), 1)


def pad_key(args) -> str:
    """What names the op in its pytest args (its test ids and markers), without the paths and
    options that name this run's folder: the same op draws the same pad in every run dir."""
    return " ".join(str(a) for a in args if not os.path.isabs(str(a)) and "=" not in str(a))


def allocate_pad(device_type: str, spec: tuple[float, int] | None, key: str):
    """(the pad tensor, its MiB) held on the device, or (None, None) without a pad, a device or torch."""
    if spec is None or device_type in ("", "cpu"):
        return None, None
    mb = pad_mb(spec, key)
    try:
        import torch

        return torch.empty(max(1, int(mb * 2**20)), dtype=torch.uint8, device=device_type), mb
    except Exception:  # noqa: BLE001 - no pad is the diagnostic's failure, never the op's
        return None, None


def _rest_s(text: str) -> float:
    try:
        return max(0.0, float(text)) if text else 0.0
    except ValueError:
        return 0.0


def run_one(msg: dict) -> int:
    """One op: its environment and working directory, then a fresh pytest session."""
    os.environ.clear()
    os.environ.update({k: v for k, v in msg["env"].items() if v is not None})
    os.chdir(msg["cwd"])
    args = [str(a) for a in msg["args"]]
    sys.argv = ["pytest", *args]
    import pytest

    try:
        return int(pytest.main(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the op's failure, not the worker's
        traceback.print_exc()
        return 3
    finally:
        _flush()


def main() -> None:
    t0 = time.time()
    fd = int(os.environ[ENV_CONTROL_FD])
    names = [n for n in os.environ.get(ENV_PREIMPORT, "").split(",") if n]
    done, errors = preimport(names)
    rest = _rest_s(os.environ.get(ENV_REST, ""))
    base = Baseline(os.environ.get(ENV_SUITE_ROOT, ""), [n for n in os.environ.get(ENV_KEEP, "").split(",") if n],
                    os.environ.get(ENV_DEVICE_TYPE, "cpu"))
    canary_on = canary_enabled(os.environ)
    pad = pad_spec(os.environ)
    freeze_base()

    def canary() -> float | None:
        return canary_us(base.device_type) if canary_on else None

    _announce(READY, {"pid": os.getpid(), "imports_s": round(time.time() - t0, 3), "imported": done,
                      "import_errors": errors, "rss_mb": rss_mb(), "canary_us": canary(),
                      "device_used_mb": device_used_mb(base.device_type)})
    with os.fdopen(fd, "r", encoding="utf-8") as ctrl:
        for line in ctrl:
            msg = json.loads(line)
            if msg.get("cmd") != "run":
                break
            held, held_mb = allocate_pad(base.device_type, pad, pad_key(msg.get("args") or []))
            started = time.time()
            rc = run_one(msg)
            ran = time.time() - started
            del held  # before the hygiene empties the device's cache
            after = hygiene(base)
            if held_mb is not None:
                after["pad_mb"] = held_mb
            after["canary_us"] = canary()
            if rest:
                time.sleep(rest)
                after["rest_s"] = rest
            _announce(DONE, {"id": msg.get("id"), "rc": rc, "op_s": round(ran, 3), **after})
    # asked to exit, or the harness is gone: no finalizers (a second of torch teardown) to wait for
    _flush()
    os._exit(0)


if __name__ == "__main__":
    main()

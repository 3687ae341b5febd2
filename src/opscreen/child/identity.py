"""Child plugin: ``run_identity.json``, exactly how this op was measured.

Written at session start (so a child that dies mid-run still leaves it) and
completed at session finish. Two runs whose calibers differ are told apart from
these files alone: the ``caliber`` block holds what must match for a comparison
(timer, autotune mode, shape mode, level, dtypes) and what may differ (backend,
device model, suite commit).
"""

from __future__ import annotations

import math
import os
import platform
import re
import socket
import sys
import time
import pytest

from .. import contracts
from ..fsio import utcnow as _now
from ..procgroup import run_capture
from . import autotune as _autotune
from . import config as _config
from . import host_malloc as _host_malloc
from . import timed_value as _timed

SCHEMA = contracts.RUN_IDENTITY.tag()
_IDENT: dict = {}
_MARKS: dict[str, float] = {}  # phase boundaries, time.time(): configured, collected, measured
PHASES = ("start_imports_s", "collection_s", "measurement_s", "teardown_s")

# Recorded from the child's environment, with the visible-device keys the harness
# names in the config (``visible_env_keys``, from the backend registry).
ENV_KEYS = (
    "GEMS_VENDOR",
    "USE_FLAGTUNE",
    "USE_FLAGTUNE_COST_MODEL",
    "FLAGGEMS_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "TRITON_CACHE_AUTOTUNING",
)


def tuning_caches(environ=None) -> dict:
    """What autotuning results a run could reuse from earlier processes, as found when
    this plugin is imported (before the suite's conftest imports the library):
    FlagGems' tuned-config databases (``$FLAGGEMS_CACHE_DIR`` or ``~/.flaggems``,
    ``*.db``, name -> bytes) and whether Triton caches ``@triton.autotune`` winners
    (``TRITON_CACHE_AUTOTUNING``). Two runs of the same caliber can differ in this:
    a warm database pins the library's configs, an empty one makes it autotune."""
    env = os.environ if environ is None else environ
    root = env.get("FLAGGEMS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".flaggems")
    dbs = {}
    try:
        for name in sorted(os.listdir(root)):
            if name.endswith(".db"):
                try:
                    dbs[name] = os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
    except OSError:
        pass
    return {
        "flaggems_cache_dir": root,
        "flaggems_tuned_db_bytes": dbs,
        "triton_cache_autotuning": env.get("TRITON_CACHE_AUTOTUNING", "") not in ("", "0"),
    }


_CACHES_AT_START = tuning_caches()


def _dist_version(name: str):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def _module_version(name: str):
    mod = sys.modules.get(name)
    v = getattr(mod, "__version__", None) if mod is not None else None
    return str(v) if v is not None else _dist_version(name.replace("_", "-")) or _dist_version(name)


def cli_timeout() -> float:
    """Seconds a vendor CLI may take here: the harness's ``OPSCREEN_CLI_TIMEOUT``
    (inherited; backends/base.py reads it for the device listing), default 5."""
    try:
        return max(0.1, float(os.environ.get("OPSCREEN_CLI_TIMEOUT", "5")))
    except ValueError:
        return 5.0


def _cli_output(argv, timeout=None):
    """The stdout of a vendor CLI that exited 0, else None. It runs in its own process
    group, killed as a group at the timeout: a hung CLI costs its timeout and leaves
    no grandchild behind."""
    res = run_capture(argv, timeout=cli_timeout() if timeout is None else timeout)
    return res.stdout if res.ok else None


def _cli_line(argv, timeout=None):
    lines = [ln.strip() for ln in (_cli_output(argv, timeout) or "").splitlines() if ln.strip()]
    return lines[0] if lines else None


def smi_selector() -> str:
    """The ``nvidia-smi -i`` argument for the device this process uses: its UUID when
    torch gave one (nvidia-smi's index order need not be CUDA's), else the first
    visible device."""
    from .device import PROBE

    uuid = PROBE.get("uuid")
    if uuid:
        return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    return os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"


# What may make two runs of one caliber differ on the same kind of GPU: clocks,
# temperature, power and the active clock-limiting reasons (a bit mask).
GPU_STATE_FIELDS = ("clocks.sm", "clocks.max.sm", "clocks.mem", "temperature.gpu", "power.draw", "pstate",
                    "clocks_throttle_reasons.active")


def gpu_state(cfg: dict, with_driver: bool = False):
    """Clocks, temperature and power of the device now (CUDA only; None elsewhere or
    when nvidia-smi cannot say); ``with_driver`` adds ``driver_version`` to the same
    nvidia-smi call."""
    if cfg.get("backend") != "cuda":
        return None
    fields = (["driver_version"] if with_driver else []) + list(GPU_STATE_FIELDS)
    for _ in range(2):
        line = _cli_line(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
                          "-i", smi_selector()])
        if line:
            values = [v.strip() for v in line.split(",")]
            if len(values) == len(fields):
                state = dict(zip(fields, values))
                state["at"] = _now()
                return state
        fields = fields[:-1]  # drivers that no longer know the throttle-reason field
    return None


def driver_version(cfg: dict):
    backend = cfg.get("backend")
    if backend == "cuda":
        return _cli_line(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", smi_selector()])
    if backend == "rocm":  # "Driver version: 6.8.5" between rocm-smi's banners
        m = re.search(r"^Driver version:\s*(\S+)", _cli_output(["rocm-smi", "--showdriverversion"]) or "", re.M)
        return m.group(1) if m else None
    return None


def build(cfg: dict) -> dict:
    from .device import PROBE

    runtime = PROBE.get("runtime") or {}
    runtime_version = runtime.get("hip") or runtime.get(cfg.get("device_type")) or runtime.get("cuda")
    start = gpu_state(cfg, with_driver=True)  # one nvidia-smi call for the state and the driver
    driver = start.pop("driver_version", None) if start else driver_version(cfg)
    ident = {
        "schema": SCHEMA,
        "kind": "op",
        "child_reported": True,
        "caliber": _config.caliber(cfg, PROBE.get("device_name")),
        "op": cfg.get("op"),
        "node": cfg.get("node"),
        "backend": cfg.get("backend"),
        "vendor": cfg.get("vendor"),
        "device_type": cfg.get("device_type"),
        "device_index": cfg.get("device"),
        "device_name": PROBE.get("device_name"),
        "device_uuid": PROBE.get("uuid"),
        "device_count": PROBE.get("device_count"),
        "compute_capability": PROBE.get("compute_capability"),
        "l2_cache_size": PROBE.get("l2_cache_size"),
        "driver_version": driver,
        "runtime_version": runtime_version,
        "torch_version": PROBE.get("torch_version") or _module_version("torch"),
        "torch_extensions": PROBE.get("extensions"),
        "triton_version": _dist_version("triton"),
        "library": cfg.get("library"),
        "library_version": None,
        "suite": {
            "root": cfg.get("suite_root"),
            "name": cfg.get("suite_name"),
            "commit": cfg.get("suite_commit"),
            "dirty": cfg.get("suite_dirty"),
            "commit_source": cfg.get("suite_commit_source"),
        },
        "timer_planned": cfg.get("timer"),
        "dtypes": cfg.get("dtypes"),
        "shape_mode": cfg.get("shape_mode"),
        "shape_file": cfg.get("shape_file"),
        "level": cfg.get("level"),
        "use_flagtune": cfg.get("use_flagtune"),
        "use_flagtune_cost_model": cfg.get("use_flagtune_cost_model"),
        "triton_cache_autotuning": cfg.get("triton_cache_autotuning"),
        "input_seed": cfg.get("input_seed"),
        "tuning_caches_at_start": dict(_CACHES_AT_START),
        "kernel_caches": kernel_caches_seen(cfg),
        "cpu_affinity": cpu_affinity(cfg),
        "gpu_state": {"start": start, "end": None},
        "host": socket.gethostname(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "opscreen_version": cfg.get("opscreen_version"),
        "started_at": cfg.get("started_at"),
        "finished_at": None,
        "env": {k: os.environ[k] for k in (*ENV_KEYS, *(cfg.get("visible_env_keys") or ())) if k in os.environ},
        "argv": cfg.get("argv"),
    }
    return ident


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _cpu_count(cpulist: str) -> int:
    n = 0
    for part in filter(None, (p.strip() for p in cpulist.split(","))):
        a, _, b = part.partition("-")
        n += int(b) - int(a) + 1 if b else 1
    return n


def cpu_affinity(cfg: dict, status_path: str = "/proc/self/status") -> dict:
    """The CPUs this process may run on, as the kernel says (``Cpus_allowed_list``, else
    ``os.sched_getaffinity``), its thread caps, and the plan the harness made
    (``child_config.json`` ``cpuset``: pinning, cpus, numa_node)."""
    seen, source = None, None
    try:
        with open(status_path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Cpus_allowed_list:"):
                    seen, source = line.split(":", 1)[1].strip(), "proc"
                    break
    except OSError:
        pass
    if seen is None and hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        seen, source = ",".join(map(str, cpus)), "sched_getaffinity"
    torch = sys.modules.get("torch")
    try:
        torch_threads = int(torch.get_num_threads()) if torch is not None else None
    except Exception:
        torch_threads = None
    return {
        "cpus": seen,
        "count": _cpu_count(seen) if seen else None,
        "source": source,
        "planned": cfg.get("cpuset"),
        "threads": {k: os.environ[k] for k in THREAD_VARS if k in os.environ},
        "torch_threads": torch_threads,
    }


def kernel_caches_seen(cfg: dict) -> dict | None:
    """The kernel caches the harness chose (``child_config.json``: dir and whether it came
    from the user or the default), each with the folder this process's environment names."""
    planned = cfg.get("kernel_caches")
    if not isinstance(planned, dict):
        return None
    return {name: {**c, "seen": os.environ.get(c.get("env") or "")} for name, c in planned.items() if isinstance(c, dict)}


def write(ident: dict, path: str) -> None:
    contracts.write(contracts.RUN_IDENTITY, path, ident, fsync=False)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    cfg = _config.load()
    if not cfg or not cfg.get("identity_path"):
        return
    _IDENT.clear()
    _IDENT.update(build(cfg))
    _IDENT["library_version"] = _module_version(cfg.get("library") or "flag_gems")
    write(_IDENT, cfg["identity_path"])
    path = cfg["identity_path"]
    _autotune.on_change(lambda: save_picks(path))


def save_picks(path: str) -> None:
    """Write the identity when the op's autotune picks changed since the last write: an op
    killed before its session finished (a timeout, Ctrl-C, a screen's budget) keeps the picks
    of the rows its record log holds (:func:`opscreen.child.autotune.checkpoint`). Without them
    ``compare`` could not tell those rows' config from the other side's and called a flipped
    pick slower (an H100 screen cut by its call's time limit on 2026-12-07:
    ``cross_entropy_loss``, 3 rows). ``path``: the identity's, from the configuration the session
    started with (called after each measured case, so it does not read that file again)."""
    if not _IDENT:
        return
    rec = _autotune.picks()
    if rec.get("kernels") and rec != _IDENT.get("autotune"):
        _IDENT["autotune"] = rec
        write(_IDENT, path)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    cfg = _config.load()
    if not cfg or not _IDENT:
        return
    _IDENT["finished_at"] = _now()
    if isinstance(_IDENT.get("gpu_state"), dict):
        _IDENT["gpu_state"]["end"] = gpu_state(cfg)
    _IDENT["pytest_exitstatus"] = int(exitstatus)
    _IDENT["autotune"] = _autotune.picks()
    _IDENT["library_version"] = _IDENT.get("library_version") or _module_version(cfg.get("library") or "flag_gems")
    write(_IDENT, cfg["identity_path"])


# -- where the time went: the phases of this process ------------------------------------


def phases(marks: dict[str, float], spawned_at: float | None, end: float) -> dict:
    """Seconds per phase, contiguous: start+imports (the harness's spawn to pytest's
    configure), collection (configure to the end of collection: session start, the
    device probe and this identity included), measurement (the test loop) and teardown
    (the end of the loop to pytest's unconfigure). A phase whose bounds are unknown is None."""
    bounds = [spawned_at, marks.get("configured"), marks.get("collected"), marks.get("measured"), end]
    out: dict = {}
    for name, a, b in zip(PHASES, bounds, bounds[1:]):
        out[name] = max(0.0, math.floor((b - a) * 1000) / 1000) if a is not None and b is not None else None  # ms, down
    return out


def _spawned_at():
    try:
        return float(os.environ.get(_config.ENV_SPAWNED_AT, ""))
    except ValueError:
        return None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _MARKS.clear()
    _MARKS["configured"] = time.time()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    _MARKS["collected"] = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    _MARKS.setdefault("collected", time.time())
    _autotune.start()  # the suite's modules are imported: note which autotuners the op's tests run
    yield
    _MARKS["measured"] = time.time()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _autotune.patch()  # autotuner classes a suite defined after its collection


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location):
    _autotune.checkpoint()  # a suite that times without the timing plugin logs its rows per test


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    cfg = _config.load()
    if not cfg or not _IDENT or not cfg.get("identity_path"):
        return
    _IDENT["phases"] = phases(_MARKS, _spawned_at(), time.time())
    _IDENT["host_malloc"] = _host_malloc.applied() or None  # what the timing plugin did to the allocator
    spent = _timed.timer_time()
    if spent:  # of the measurement phase: what opscreen's timers took (the rest is the suite's own code)
        _IDENT["phases"]["timer"] = spent
    write(_IDENT, cfg["identity_path"])

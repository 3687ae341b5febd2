"""Run one op of a suite in its own process: the unit every screen is made of.

Lifecycle of :func:`run_op`: clear the files it owns in ``out_dir``; write
``child_config.json``; start ``python -m pytest <node> --level ... --record log
-s -p <plan>`` in the suite root, in a new process group with stdin closed and
an environment built from the backend (visible devices, vendor) and the tuning
knobs; stream its output into ``run.log`` (ANSI codes stripped) and to ``echo``;
on timeout or stop, kill the whole group (SIGTERM, grace, SIGKILL); then
complete ``run_identity.json`` and write ``result.json``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import signal
import socket
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable

from .. import __version__
from ..backends import Backend, all_visible_keys
from ..backends.cpusets import thread_env
from ..child.config import ENV_CONFIG, ENV_SPAWNED_AT, EXIT_DEVICE_FATAL, FATAL_PREFIX, TIMING_CHOICES, TIMING_DEFAULTS, TIMING_ENV, caliber, coerce_timing
from ..errors import UsageError
from ..settings import BY_NAME as SETTINGS, SHAPE_MODES, kernel_caches
from .. import contracts
from ..fsio import utcnow
from .plan import plugin_plan, pytest_args
from .request import op_result
from .request import EXIT_CRASHED, EXIT_FAILED, EXIT_FATAL, EXIT_INTERRUPTED, EXIT_PASSED, EXIT_TIMEOUT, OpOutcome, OpRequest
from .process import OutputError, run_streaming
from .folder import ABORT_LOG, clear_owned, no_capture, take_capture_mark
from .repeats import run_repeated
from .telemetry import Sampler, interval_ms as telemetry_interval

# Keys the harness sets for a child; never inherited from the caller's environment.
VENDOR_KEYS = ("GEMS_VENDOR", "FLAGGEMS_VENDOR", "GEMS_BACKEND")

# On the host CPU a measurement is cheap to repeat but noisy: cap each case short, stop
# once its median is pinned to 0.5 % (rare slow samples keep the rsd rule from ever
# stopping), and hold the allocator's give-back steady (opscreen.child.host_malloc).
CPU_TIMING = {"max_time_s": 0.1, "min_samples": 5, "target_ci": 0.005, "host_malloc": "steady"}


_ANSI_RX = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_ansi(text: str) -> str:
    return _ANSI_RX.sub("", text)


class _NotStarted(Exception):
    """Stopped before the child was started."""


def _stopped(stop: threading.Event | None) -> bool:
    return stop is not None and stop.is_set()


def _interrupted(stop: threading.Event | None) -> str:
    reason = getattr(stop, "reason", None)
    return f"interrupted by {reason}" if reason else "interrupted"


def _shape_path(suite_root: Path, mode: str, name: str) -> Path | None:
    """The shape file ``mode`` names (None for upstream); UsageError when there is none."""
    if mode == "upstream":
        return None
    from ..assets.shape_files import curated_shape_source

    if mode not in SHAPE_MODES and not Path(mode).expanduser().is_file():
        raise UsageError(f"{name} {mode!r}: use upstream, curated, or the path of a shape file")
    src = curated_shape_source(suite_root) if mode == "curated" else Path(mode).expanduser().resolve()
    if not src.is_file():
        raise UsageError(f"shape file {src} not found (SHAPE_MODE is upstream, curated, or a path)")
    return src


def shape_source(suite_root: Path, mode: str, name: str = "--shape-mode") -> Path | None:
    """The shape file ``mode`` names (None for upstream), after reading it and the
    suite's core shape file: a missing or malformed one is a one-line UsageError here,
    before anything is written, not a crash in every op."""
    src = _shape_path(suite_root, mode, name)
    if src is None:
        return None
    from ..assets.shape_files import CORE_SHAPES, load_shape_file

    load_shape_file(src)
    core = Path(suite_root) / CORE_SHAPES
    if core.is_file():
        load_shape_file(core, what="suite shape file")
    return src


def shape_file_for(req: OpRequest, out_dir: Path) -> Path | None:
    """None for upstream shapes; else a shape file merged with the suite's class keys
    (``run_op`` has read both files already; the merge reads them once more)."""
    src = _shape_path(req.suite.root, req.shape_mode, "--shape-mode")
    if src is None:
        return None
    from ..assets.shape_files import write_merged_shape_file

    return write_merged_shape_file(req.suite.root, src, out_dir / "shapes.merged.yaml")


def child_env(req: OpRequest, config_path: Path, shim: Path) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in req.backend.visible_devices_env([req.device], all_visible_keys()).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    for key in VENDOR_KEYS:
        env.pop(key, None)
    env["GEMS_VENDOR"] = req.backend.vendor
    for name in ("use_flagtune", "use_flagtune_cost_model", "triton_cache_autotuning"):  # set, never inherited
        env[SETTINGS[name].env] = getattr(req, name)
    env[ENV_CONFIG] = str(config_path)
    env["PYTHONUNBUFFERED"] = "1"
    # pytest cuts its summary lines to the terminal width; a pipe has none.
    env.setdefault("COLUMNS", "240")
    if req.backend.capabilities.slots:
        # Parallel CPU slots share the host: one intra-op thread each, unless asked.
        env.setdefault("OMP_NUM_THREADS", "1")
    env.update(thread_env(req.cpuset.cpus if req.cpuset else None, env))  # pinned: thread pools capped to the set
    env.update(req.env)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for cache in child_kernel_caches(env).values():  # the user's own dir wins; else the persistent default
        env[cache["env"]] = cache["dir"]
    if req.color:
        env["OPSCREEN_COLOR"] = "1"
    else:
        env.pop("OPSCREEN_COLOR", None)
    env["PYTHONPATH"] = os.pathsep.join([str(shim)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def child_kernel_caches(environ) -> dict[str, dict[str, str]]:
    """The Triton and FlagGems caches a child uses (settings.KERNEL_CACHES), the default
    folders created (a folder that cannot be made is left to the library)."""
    caches = kernel_caches(environ)
    for cache in caches.values():
        if cache["source"] == "default":
            try:
                os.makedirs(cache["dir"], exist_ok=True)
            except OSError:
                pass
    return caches


def python_shim(out_dir: Path) -> Path:
    """A folder holding only a link to the ``opscreen`` package, for the child's
    PYTHONPATH: the child can import ``opscreen.child`` without seeing the rest of
    the harness's site-packages (another torch, say)."""
    shim = out_dir / ".pyshim"
    link = shim / "opscreen"
    pkg = Path(__file__).resolve().parent.parent  # the opscreen package (this file is op/run.py)
    shim.mkdir(parents=True, exist_ok=True)
    if not (link.is_symlink() and Path(os.readlink(link)) == pkg):
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():  # an op dir copied without its links: the copy of the package goes
            shutil.rmtree(link)
        link.symlink_to(pkg, target_is_directory=True)
    return shim


def build_argv(req: OpRequest, shape_file: Path | None, timer: str) -> tuple[list[str], list[str]]:
    """The child's command line and the options that travel in ``PYTEST_ADDOPTS``.

    FlagGems names its record log after the command line (``result_<args>.log``),
    so plugins, dtypes and the shape-file path go through ``PYTEST_ADDOPTS``, which
    pytest reads but does not count among the invocation args: a long run-dir path
    once pushed that name past the 255-byte file-name limit and every op failed.

    Every suite option with a value is one word, ``--name=value``: the suite's
    options are unknown to pytest when it picks its rootdir, so the value of a
    two-word ``--shape_file PATH`` counted as a path to test. With the output dir
    inside a checkout, the rootdir became the checkout and its ``pyproject.toml``
    replaced the suite's ``pytest.ini``: every op failed to import the library.
    """
    argv = [req.suite.python, "-m", "pytest", *req.target.argv, _opt("--level", req.level), _opt("--record", "log"), "-s"]
    argv += list(req.extra_args)
    addopts: list[str] = []
    for d in req.dtypes or []:
        addopts.append(_opt("--dtypes", d))
    if shape_file is not None:
        addopts.append(_opt("--shape_file", str(shape_file)))
    addopts += ["-p", "no:cacheprovider"]
    addopts += pytest_args(plugin_plan(req.backend, timer))
    return argv, addopts


def _opt(name: str, value: str) -> str:
    """``--name=value``: one argv word, never read by pytest as a path of its own."""
    return f"{name}={value}"


_ERR_PATTERNS = [
    re.compile(r"^" + re.escape(FATAL_PREFIX) + r".*"),
    re.compile(r"^E\s+((?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt|Failed|Exit)\b.*)"),
    re.compile(r"^FAILED \S+ - (.+)"),
    re.compile(r"^ERROR:? (\S+.*)"),
    re.compile(r"^(Fatal Python error: .+)"),
]


def last_error_line(lines) -> str | None:
    """The most telling error line: a fatal line, else the last ``E   XxxError: ...``
    line of a traceback, else pytest's (truncated) FAILED/ERROR summary."""
    found: list[str | None] = [None] * len(_ERR_PATTERNS)
    for line in lines:
        s = line.rstrip()
        for i, rx in enumerate(_ERR_PATTERNS):
            m = rx.match(s)
            if m:
                found[i] = (m.group(1) if m.groups() else m.group(0)).strip()
                break
    for hit in found:
        if hit:
            return hit[:500]
    return None


# not anchored: the dump may continue a line pytest left open ("benchmark/test_x.py Current thread ...")
_THREAD_HEAD = re.compile(r"(?:Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):")
_FRAME = re.compile(r'^\s+File "([^"]+)", line (\d+) in (\S+)')


def where_stuck(lines, suite_root: str | Path | None = None) -> str | None:
    """Where a timed-out child was, from the stack dump it printed on SIGTERM
    (child/device.py): the innermost frame of the main thread, and the innermost
    frame inside the suite when that is a different one. None without a dump."""
    blocks: list[list[tuple[str, str, str]]] = []
    current: list | None = None
    for line in lines:
        if _THREAD_HEAD.search(line):
            current = []
            blocks.append(current)
            continue
        m = _FRAME.match(line)
        if m and current is not None:
            current.append(m.groups())
        elif current is not None and line.strip():
            current = None
    blocks = [b for b in blocks if b]
    if not blocks:
        return None
    # the main thread's outermost frame is not threading's bootstrap
    main = next((b for b in reversed(blocks) if not b[-1][0].endswith("threading.py")), blocks[-1])

    def fmt(frame):
        path, line, func = frame
        return f"{func} ({'/'.join(Path(path).parts[-2:])}:{line})"

    def stdlib(path: str) -> bool:  # ast.py, threading.py, <frozen runpy>: not telling
        return path.startswith("<") or ("/lib/python" in path and "-packages/" not in path)

    innermost = next((f for f in main if not stdlib(f[0])), main[0])
    where = fmt(innermost)
    root = str(suite_root) if suite_root else None
    if root:
        inside = next((f for f in main if f[0].startswith(root)), None)
        if inside is not None and inside != innermost:
            where += f", from {fmt(inside)}"
    return where


def classify(rc: int | None, timed_out: bool, interrupted: bool, tail) -> tuple[str, int, str | None]:
    err = last_error_line(tail)
    if interrupted:
        return "interrupted", EXIT_INTERRUPTED, "interrupted"
    if timed_out:
        return "timeout", EXIT_TIMEOUT, err
    if rc == 0:
        return "passed", EXIT_PASSED, None
    if rc == EXIT_DEVICE_FATAL:
        return "device_fatal", EXIT_FATAL, err or "device-fatal error"
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return "crashed", EXIT_CRASHED, f"child killed by {name}" + (f" after: {err}" if err else "")
    if rc == 5:
        return "failed", EXIT_FAILED, err or "no test selected (pytest exit 5)"
    if rc in (1, 2, 3, 4):
        return "failed", EXIT_FAILED, err or f"pytest exited with status {rc}"
    return "crashed", EXIT_CRASHED, err or f"child exited with status {rc}"


def run_op(
    req: OpRequest,
    out_dir: Path,
    *,
    stop: threading.Event | None = None,
    echo: Callable[[str], None] | None = None,
    once: Callable[..., OpOutcome] | None = None,
) -> OpOutcome:
    """Run one op: one child, or ``req.repeats`` of them merged (repeats.py). ``once`` runs
    each child (default :func:`run_once`, a fresh process; a lane's warm worker: op/lane.py)."""
    planned_timing(req.backend)
    shape_source(req.suite.root, req.shape_mode)
    out_dir = Path(out_dir).resolve()
    if _stopped(stop):  # stopped before anything ran: an earlier result stays as it was
        return OpOutcome("interrupted", EXIT_INTERRUPTED, None, 0.0, _interrupted(stop), out_dir, "")
    once = once or run_once
    if int(req.repeats) > 1:
        return run_repeated(req, out_dir, once, stop=stop, echo=echo)
    outcome = once(req, out_dir, stop=stop, echo=echo)
    # A process that died inside a graph capture (the child's mark said which test) runs
    # again in a fresh process that times that test without capture; once per test.
    while outcome.capture_aborts and outcome.status not in ("passed", "interrupted") and not _stopped(stop):
        aborts = [dict(a) for a in outcome.capture_aborts]
        last = aborts[-1]
        if last.get("log") != "run.log" or any(a["test"] == last["test"] for a in aborts[:-1]):
            break
        last["log"] = ABORT_LOG.format(n=len(aborts))
        if (out_dir / "run.log").is_file():
            shutil.move(str(out_dir / "run.log"), str(out_dir / last["log"]))
        if echo is not None:
            echo(f"[opscreen] {req.op}: {outcome.status} inside the graph capture of {last['test']}; running it again "
                 "in a fresh process, that test without capture\n")
        keep = tuple(a["log"] for a in aborts if a.get("log"))
        outcome = run_once(req, out_dir, stop=stop, echo=echo, keep=keep, capture_aborts=aborts,
                           earlier_s=outcome.duration_s)
    return outcome


class FreshProcess:
    """Where ``run_once`` runs an op by default: a fresh child process (``--isolation op``).
    A warm worker (op/worker.py) offers the same three members."""

    isolation = "op"
    shim = None  # the op's own PYTHONPATH shim (python_shim)

    @staticmethod
    def launch(argv, **kw):
        return run_streaming(argv, **kw)

    @staticmethod
    def info() -> dict:
        return {}


FRESH = FreshProcess()


def run_once(
    req: OpRequest,
    out_dir: Path,
    *,
    stop: threading.Event | None = None,
    echo: Callable[[str], None] | None = None,
    launcher=FRESH,
    keep: tuple[str, ...] = (),
    worker_attempt: dict | None = None,
    capture_aborts: list | None = None,
    earlier_s: float = 0.0,
) -> OpOutcome:
    """One child for ``req`` writing its files into ``out_dir``: the child config, then
    run.log as the child runs, then the identity and result.json. ``launcher`` runs the
    child: a fresh process, or a warm worker (op/lane.py); ``keep`` names files of the
    op dir that this run must not clear, ``worker_attempt`` how the op ended in a worker
    before this fresh run (recorded in ``phases``), ``capture_aborts`` the earlier runs of
    the op that died inside a graph capture (recorded in ``result.json``; the child config's
    ``no_capture`` lists every test of ``no_capture.json``), ``earlier_s`` the wall of those
    earlier runs (the op's ``duration_s`` counts them: the op took that long)."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    take_capture_mark(out_dir, record=False)  # left by a run whose end was not seen (a killed runner)
    clear_owned(out_dir, keep=keep)
    shape_file = shape_file_for(req, out_dir)
    config_path = out_dir / "child_config.json"
    shim = launcher.shim or python_shim(out_dir)
    argv, addopts = build_argv(req, shape_file, req.planned_timer)
    config = child_config(req, out_dir, shape_file, argv, addopts)
    config["isolation"] = launcher.isolation
    skip = no_capture(out_dir)
    if skip:
        config["no_capture"] = skip
    config = contracts.write(contracts.CHILD_CONFIG, config_path, config)
    env = child_env(req, config_path, shim)
    env["PYTEST_ADDOPTS"] = " ".join(filter(None, [shlex.join(addopts), os.environ.get("PYTEST_ADDOPTS", "")]))
    sampler = Sampler(req.backend.name, req.device, config["identity_path"], telemetry_interval())
    outcome = _run_child(req, out_dir, argv, addopts, env, stop, echo, launcher, sampler)
    aborts = list(capture_aborts or [])
    test = take_capture_mark(out_dir, record=outcome.status not in ("passed", "interrupted"))
    if test is not None:
        aborts.append({"test": test, "status": outcome.status, "error": outcome.error,
                       "wall_s": round(outcome.duration_s, 3), "log": "run.log"})
        outcome = dataclasses.replace(outcome, error=f"{outcome.error or outcome.status} (inside the graph capture of {test})")
    ident = finish_identity(config, outcome, device_state(sampler))
    phases = op_phases(ident, outcome, launcher.isolation, launcher.info())
    if worker_attempt:
        phases["worker_attempt"] = worker_attempt
    outcome = dataclasses.replace(outcome, phases=phases, capture_aborts=aborts or None,
                                  duration_s=outcome.duration_s + max(0.0, earlier_s), telemetry=sampler.record(ident))
    contracts.write(contracts.RESULT, out_dir / "result.json", op_result(req, outcome))
    return outcome


PHASE_KEYS = ("start_imports_s", "collection_s", "measurement_s", "teardown_s")


def op_phases(ident: dict, outcome: OpOutcome, isolation: str = "op", worker: dict | None = None) -> dict:
    """Where this op's time went (``result.json`` ``phases``): the child's own phases
    (child/identity.py; None each when the child did not report them) and the harness's
    wall for the child (``child_wall_s``, from its start to its exit and the end of its output).
    In a warm worker (``mode: worker``) the start and imports were paid once by the worker:
    ``worker`` says which worker, its import time and whether this op shared it."""
    reported = ident.get("phases") if isinstance(ident.get("phases"), dict) else {}
    out: dict = {"mode": "worker" if isolation == "worker" else "process"}
    if worker:
        out["worker"] = worker
    for key in PHASE_KEYS:
        v = reported.get(key)
        out[key] = float(v) if isinstance(v, (int, float)) and v >= 0 else None
    timer = reported.get("timer")
    if isinstance(timer, dict):  # what opscreen's timers took of the measurement (child/timed_value.py)
        out["timer"] = {k: v for k, v in timer.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out["child_wall_s"] = round(outcome.duration_s, 3)
    return out


def child_config(req: OpRequest, out_dir: Path, shape_file: Path | None, argv: list[str], addopts: list[str]) -> dict:
    """What the child plugins read (``child_config.json``; docs/contracts.md)."""
    caps = req.backend.capabilities
    return {
        "op": req.op,
        "marker": req.target.marker_expr,
        "node": req.target.describe(),
        "target": req.target.as_dict(),
        "suite_root": str(req.suite.root),
        "suite_name": req.suite.name,
        "suite_commit": req.suite.git["commit"],
        "suite_dirty": req.suite.git["dirty"],
        "suite_commit_source": req.suite.git.get("commit_source"),
        "library": req.suite.library,
        "backend": req.backend.name,
        "vendor": req.backend.vendor,
        "device_type": req.backend.device_type,
        "device": req.device,
        "device_ordinal": req.device if caps.slots else 0,
        "torch_modules": list(req.backend.torch_modules),
        "visible_env_keys": list(all_visible_keys()),
        "capabilities": caps.as_dict(),
        "timer": req.planned_timer,
        "timer_requested": req.timer,
        "timing": planned_timing(req.backend),
        "repeats": int(req.repeats),
        "level": req.level,
        "dtypes": req.dtypes,
        "shape_mode": req.shape_mode,
        "shape_file": str(shape_file) if shape_file else None,
        "use_flagtune": req.use_flagtune,
        "use_flagtune_cost_model": req.use_flagtune_cost_model,
        "triton_cache_autotuning": req.triton_cache_autotuning,
        "input_seed": req.input_seed,
        "out_dir": str(out_dir),
        "identity_path": str(out_dir / "run_identity.json"),
        "record_log_path": str(out_dir / "record.log"),
        "opscreen_version": __version__,
        "host": socket.gethostname(),
        "started_at": utcnow(),
        "argv": argv,
        "pytest_addopts": addopts,
        "settings": req.settings(),
        "kernel_caches": kernel_caches({**os.environ, **req.env}),
        "cpuset": req.cpuset.as_dict() if req.cpuset else {"pinning": req.cpu_pinning, "cpus": None},
    }


def _run_child(req: OpRequest, out_dir: Path, argv: list[str], addopts: list[str], env: dict[str, str],
               stop: threading.Event | None, echo: Callable[[str], None] | None, launcher=FRESH,
               sampler: Sampler | None = None) -> OpOutcome:
    """Start the child, stream its output into run.log (between the banners) and
    ``echo``, and classify how it ended. ``sampler`` (op/telemetry.py) samples the device
    from the child's launch until it has exited, timed out or been killed."""
    timer = req.planned_timer
    tail: deque[str] = deque(maxlen=400)
    log_lock = threading.Lock()
    heard = {"last": None, "dump": False}  # when the child last printed, before any stack dump of its own
    with open(out_dir / "run.log", "w", encoding="utf-8") as log:

        def emit(line: str, raw: str | None = None) -> None:
            clean = strip_ansi(line)
            with log_lock:
                log.write(clean)
                log.flush()
            tail.append(clean)
            if raw is not None:  # the child's own line (not a banner)
                if _THREAD_HEAD.search(clean):
                    heard["dump"] = True
                elif not heard["dump"]:
                    heard["last"] = time.time()
            if echo is not None:
                echo(raw if raw is not None else clean)

        for line in banner_start(req, timer, out_dir, argv, addopts, launcher.isolation):
            emit(line + "\n")
        try:
            if _stopped(stop):
                raise _NotStarted
            spawned = time.time()
            env = {**env, ENV_SPAWNED_AT: f"{spawned:.6f}"}  # where the child's phases begin
            if sampler is not None:
                sampler.start(spawned)
            try:
                res = launcher.launch(argv, on_line=lambda raw: emit(raw, raw), timeout=req.timeout, grace=req.grace,
                                      env=env, cwd=req.suite.root, stop=stop,
                                      on_start=getattr(stop, "child_started", None),
                                      cpus=req.cpuset.cpus if req.cpuset else None)
            finally:  # the child is gone (exited, timed out, killed): so is its telemetry
                if sampler is not None:
                    sampler.stop()
        except OutputError as exc:  # run.log cannot be written (full disk): the child was killed
            raise exc.cause from None
        except _NotStarted:  # stopped before the child started
            outcome = OpOutcome("interrupted", EXIT_INTERRUPTED, None, 0.0, _interrupted(stop), out_dir, timer)
        except OSError as exc:  # the child could not even start
            msg = f"could not start {argv[0]}: {exc}"
            emit(f"[opscreen] {msg}\n")
            outcome = OpOutcome("crashed", EXIT_CRASHED, None, 0.0, msg, out_dir, timer)
        else:
            quiet = (spawned + req.timeout - heard["last"]) if req.timeout and heard["last"] else None
            outcome = _outcome(req, res, list(tail), stop, out_dir, quiet)
        for line in banner_end(outcome):
            emit(line + "\n")
    return outcome


def _outcome(req: OpRequest, res, tail: list[str], stop: threading.Event | None, out_dir: Path,
             quiet_s: float | None = None) -> OpOutcome:
    """How a child that ran ended: status, exit code and the error worth a line. ``quiet_s``:
    how long before the timeout the child last printed (a hang prints nothing for most of its
    time; a slow op, such as one compiling on a cold cache, printed a row moments before)."""
    status, code, err = classify(res.returncode, res.timed_out, res.interrupted, tail)
    if res.interrupted:
        err = _interrupted(stop)
    if res.timed_out:
        where = where_stuck(tail, req.suite.root)
        err = (f"timed out after {req.timeout:g} s" + (f" in {where}" if where else "")
               + (f"; its last output {_seconds(max(0.0, quiet_s))} before the kill" if quiet_s is not None else "")
               + (f"; last error: {err}" if err else ""))
    return OpOutcome(status, code, res.returncode, res.duration_s, err, out_dir, req.planned_timer)


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def planned_timing(backend: Backend) -> dict:
    """The timing overrides a child gets: the CPU-slot caps, then the environment's. The
    harness's telemetry interval is read with them, so that a bad one is one line before
    anything runs."""
    telemetry_interval()
    return {**(CPU_TIMING if backend.capabilities.slots else {}), **timing_overrides()}


def timing_overrides() -> dict:
    """Timing knobs set in the environment (``OPSCREEN_*``, the child's own table),
    recorded in the child config and the identity; a bad value is a usage error here
    rather than a warning in every child."""
    out = {}
    for env_key, name in TIMING_ENV.items():
        raw = os.environ.get(env_key)
        if not raw:
            continue
        default = TIMING_DEFAULTS[name]
        try:
            out[name] = int(raw) if type(default) is int else coerce_timing(default, raw, name)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{env_key}={raw!r} is not valid: {exc}" if name in TIMING_CHOICES
                             else f"{env_key}={raw!r} is not a valid {type(default).__name__}") from None
    return out


def banner_start(req: OpRequest, timer: str, out_dir: Path, argv: list[str], addopts: list[str],
                 isolation: str = "op") -> list[str]:
    timeout = f"{req.timeout:g} s" if req.timeout else "none"
    dtypes = ",".join(req.dtypes) if req.dtypes else "suite default"
    return [
        f"[opscreen] op {req.op} | node {req.target.describe()} | suite {req.suite.root}",
        f"[opscreen] backend {req.backend.name} (vendor {req.backend.vendor}) device {req.device} | timer {timer}"
        f" | dtypes {dtypes} | shapes {req.shape_mode} | level {req.level}"
        f" | USE_FLAGTUNE={req.use_flagtune} | timeout {timeout} | isolation {isolation}",
        f"[opscreen] out {out_dir} | started {utcnow()}",
        "[opscreen] argv " + shlex.join(argv),
        "[opscreen] PYTEST_ADDOPTS " + shlex.join(addopts),
    ]


def banner_end(o: OpOutcome) -> list[str]:
    tail = f" | {o.error}" if o.error and o.status != "passed" else ""
    return [f"[opscreen] result {o.status} (exit {o.exit_code}, child {o.child_returncode}) in {o.duration_s:.1f} s{tail}"]


def device_state(sampler: Sampler) -> dict:
    """The device's state for the identity (``device_state``): what its monitor read when
    the child had named its device, else ``{"source": "unknown", "why"}``."""
    if sampler.state is not None:
        return sampler.state
    return {"source": "unknown", "why": sampler.why or "no device monitor was opened"}


def finish_identity(config: dict, outcome: OpOutcome, state: dict | None = None) -> dict:
    path = Path(config["identity_path"])
    ident = contracts.read(contracts.RUN_IDENTITY, path)  # None: missing or damaged
    if ident is None:
        ident = identity_from_config(config)
    if state is not None:  # read by the harness (op/telemetry.py), never by the child
        ident["device_state"] = state
    ident["finished_at"] = utcnow()
    if config.get("device_type") == "cpu":  # the child names the architecture (x86_64): the model instead
        from ..backends.cpuinfo import cpu_name

        ident["device_name"] = cpu_name()
        ident["caliber"] = {**(ident.get("caliber") or {}), "device_name": ident["device_name"]}
    ident["peaks"] = identity_peaks(ident)
    ident["isolation"] = config.get("isolation", "op")  # which mode produced the numbers
    ident["outcome"] = outcome.status
    ident["duration_s"] = round(outcome.duration_s, 3)
    contracts.write(contracts.RUN_IDENTITY, path, ident)
    return ident


def identity_peaks(ident: dict) -> dict:
    """The peaks of the op's device (``opscreen devices --peaks``; docs/peaks.md) as its identity
    records them: the peaks file found by the device's UUID, else its model, or
    ``{source: unknown, why}`` where none was measured. The run carries them, so a summary made
    on another machine still has them."""
    from ..backends import peaks as P

    uuid = ident.get("device_uuid") or (ident.get("device_state") or {}).get("uuid")
    found = P.find(uuid, ident.get("device_name"))
    if found is None:
        return {"source": "unknown", "why": f"no peaks file of this device in {P.peaks_dir()}: "
                                            "`opscreen devices --peaks` measures one"}
    return {"source": "peaks_file", **{k: found.get(k) for k in ("found_by", "device", "measured_at", "achievable",
                                                                   "spec", "of_spec")}}


def identity_from_config(config: dict) -> dict:
    """The identity the harness can vouch for when the child never wrote one."""
    return {
        "kind": "op",
        "child_reported": False,
        "caliber": caliber(config),
        "op": config["op"],
        "node": config["node"],
        "device_index": config["device"],
        "suite": {"root": config["suite_root"], "name": config["suite_name"], "commit": config.get("suite_commit"), "dirty": config.get("suite_dirty"),
                  "commit_source": config.get("suite_commit_source")},
        "host": config["host"],
        "opscreen_version": config["opscreen_version"],
        "started_at": config["started_at"],
        "kernel_caches": config.get("kernel_caches"),
    }

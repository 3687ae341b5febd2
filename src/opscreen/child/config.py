"""The child's configuration and the device-fatal exit, shared by every child plugin.

The harness writes ``<out>/child_config.json`` and names it in the environment
variable ``OPSCREEN_CHILD_CONFIG`` (schema in docs/contracts.md). :func:`load`
returns it as a dict, or an empty dict when the variable is unset, so a plugin
loaded outside opscreen does nothing harmful.

The exit constants are imported by the harness as well, so both sides agree on
the numbers. Standard library only: this module runs inside the suite's own
interpreter. Keep it small and stable; other plugins import it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, NoReturn

from .. import contracts

ENV_CONFIG = "OPSCREEN_CHILD_CONFIG"
# The wall time (time.time()) at which the harness started this process: where its phases begin.
ENV_SPAWNED_AT = "OPSCREEN_SPAWNED_AT"
SCHEMA = contracts.CHILD_CONFIG.version

EXIT_DEVICE_FATAL = 86

# A process that dies inside a graph capture (a library's C assert, e.g. MAGMA asking for
# memory while the stream captures) cannot report it. The graph timer writes the test it
# captures into this file of the op dir before each capture and removes it after; the
# harness reads one left behind and lists the test under the child config's
# ``no_capture`` key of the op's next attempt, which times that test without capture.
CAPTURING_MARK = ".capturing"
FATAL_PREFIX = "OPSCREEN-FATAL:"

TIMERS = ("graph", "profiler", "direct", "wallclock")

# Defaults of the ``timing`` dict (docs/contracts.md); the harness normally fills it.
# Keys after ``l2_flush`` are optional refinements documented in docs/timing.md.
TIMING_DEFAULTS: dict[str, Any] = {
    "target_rsd": 0.005,
    "target_ci": 0.0,
    "min_samples": 10,
    "max_samples": 1000,
    "max_time_s": 2.0,
    "warmup_calls": 3,
    "warmup_ms": 25.0,
    "l2_flush": False,
    "sample_ms": 1.0,
    "max_calls_per_sample": 1024,
    "max_warmup_s": 30.0,
    "l2_flush_min_ms": 0.0,
    "rest_ratio": 1.0,
    "capture_error_mode": "thread_local",
    "estimator": "median",
    "profiler_fallback": True,
    "host_malloc": "system",
    "patch_modules": ["benchmark.base"],
}
# Knobs whose value is one of a few words.
TIMING_CHOICES: dict[str, tuple[str, ...]] = {
    "capture_error_mode": ("global", "thread_local", "relaxed"),
    "estimator": ("median", "trimmed_mean", "mean", "min"),  # opscreen.child.estimator.ESTIMATORS
    "host_malloc": ("system", "steady"),  # opscreen.child.host_malloc.MODES
}

# Environment overrides of the timing dict: OPSCREEN_<NAME> -> key (type from the default).
TIMING_ENV = {
    "OPSCREEN_TARGET_RSD": "target_rsd",
    "OPSCREEN_TARGET_CI": "target_ci",
    "OPSCREEN_MIN_SAMPLES": "min_samples",
    "OPSCREEN_MAX_SAMPLES": "max_samples",
    "OPSCREEN_MAX_TIME": "max_time_s",
    "OPSCREEN_WARMUP_CALLS": "warmup_calls",
    "OPSCREEN_WARMUP_MS": "warmup_ms",
    "OPSCREEN_L2_FLUSH": "l2_flush",
    "OPSCREEN_SAMPLE_MS": "sample_ms",
    "OPSCREEN_MAX_CALLS_PER_SAMPLE": "max_calls_per_sample",
    "OPSCREEN_MAX_WARMUP_S": "max_warmup_s",
    "OPSCREEN_L2_FLUSH_MIN_MS": "l2_flush_min_ms",
    "OPSCREEN_REST_RATIO": "rest_ratio",
    "OPSCREEN_CAPTURE_ERROR_MODE": "capture_error_mode",
    "OPSCREEN_ESTIMATOR": "estimator",
    "OPSCREEN_PROFILER_FALLBACK": "profiler_fallback",
    "OPSCREEN_HOST_MALLOC": "host_malloc",
}
ENV_TIMER = "OPSCREEN_TIMER"


class ConfigError(RuntimeError):
    """The file named by OPSCREEN_CHILD_CONFIG is missing or not a JSON object."""


_cache: dict[str, tuple[float, dict]] = {}


def load(path: str | None = None) -> dict:
    """The child configuration as a dict (a fresh copy on every call).

    ``path`` defaults to ``$OPSCREEN_CHILD_CONFIG``; unset or empty gives ``{}``.
    A named file that cannot be read or is not a JSON object raises
    :class:`ConfigError`: a run the harness configured must not silently run
    with different settings. So does a file written by a newer opscreen; an older
    one is migrated (``opscreen.contracts``).
    """
    path = path if path is not None else os.environ.get(ENV_CONFIG, "")
    if not path:
        return {}
    try:
        mtime = os.stat(path).st_mtime
        hit = _cache.get(path)
        if hit is None or hit[0] != mtime:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            if not isinstance(data, dict):
                raise ConfigError(f"{ENV_CONFIG}={path}: expected a JSON object, got {type(data).__name__}")
            data = contracts.upgrade(contracts.CHILD_CONFIG, data, path)
            _cache[path] = (mtime, data)
            hit = _cache[path]
    except ConfigError:
        raise
    except contracts.ContractError as exc:
        raise ConfigError(f"{ENV_CONFIG}={path}: {exc}") from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{ENV_CONFIG}={path}: cannot read the child config: {exc}") from exc
    return json.loads(json.dumps(hit[1]))


# How the graph timer measures, as a number that changes when a default changes what
# a measurement means: 1 = samples back to back (identities without the field), 2 = the
# device idles between samples (``rest_ratio``; docs/timing.md), 3 = and the device is
# settled before the first measurement (opscreen.child.persist.SETTLE_LAUNCHES: small
# kernels read up to 0.18 us a kernel slower than a method-2 run's first dtype). None in
# the caliber of the other timers, whose method has not changed.
TIMING_METHOD = 3


def caliber(settings: dict, device_name: Any = None) -> dict:
    """The ``caliber`` block of an identity: what two runs must share to be compared
    (timer, tuning modes, shape mode, level, isolation) and what may be their axis (backend,
    device, suite commit). ``settings`` is a child config or a batch's settings;
    every identity (op, harness fallback, run) builds the block here."""
    return {
        "timer": settings.get("timer"),
        "use_flagtune": settings.get("use_flagtune"),
        "use_flagtune_cost_model": settings.get("use_flagtune_cost_model"),
        # whether plain @triton.autotune winners were reused from earlier processes (docs/timing.md)
        "triton_cache_autotuning": settings.get("triton_cache_autotuning") or "0",
        "shape_mode": settings.get("shape_mode"),
        # the generators' seed at each test and measurement (opscreen.child.inputs); "off" before it existed
        "input_seed": settings.get("input_seed") or "off",
        "level": settings.get("level"),
        "dtypes": settings.get("dtypes"),
        "backend": settings.get("backend"),
        "vendor": settings.get("vendor"),
        "device_name": device_name,
        "suite_commit": settings.get("suite_commit"),
        "timing": settings.get("timing") or {},
        "timing_method": TIMING_METHOD if settings.get("timer") == "graph" else None,
        "repeats": int(settings.get("repeats") or 1),
        # which process measured: a fresh one per op, or a warm worker (README "Warm workers")
        "isolation": settings.get("isolation") or "op",
        # how the host side was kept quiet, and what a row reports of its samples (docs/timing.md)
        "cpu_pinning": settings.get("cpu_pinning") or (settings.get("cpuset") or {}).get("pinning"),
        "estimator": (settings.get("timing") or {}).get("estimator") or TIMING_DEFAULTS["estimator"],
    }


def coerce_timing(default: Any, raw: Any, key: str | None = None) -> Any:
    """``raw`` (from JSON or the environment) as the type of ``default``; a knob named in
    :data:`TIMING_CHOICES` (``key``) must be one of its words (ValueError otherwise)."""
    if key in TIMING_CHOICES:
        value = str(raw).strip()
        if value not in TIMING_CHOICES[key]:
            raise ValueError(f"{key} must be one of {', '.join(TIMING_CHOICES[key])}")
        return value
    if isinstance(default, bool):
        if isinstance(raw, str):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        return bool(raw)
    if isinstance(default, int):
        return int(float(raw))
    if isinstance(default, float):
        return float(raw)
    if isinstance(default, list):
        if isinstance(raw, str):
            return [p for p in (s.strip() for s in raw.split(",")) if p]
        return list(raw)
    return raw


def timing_settings(cfg: dict | None = None, environ: dict | None = None) -> dict:
    """The effective timing knobs: defaults, then ``cfg["timing"]``, then env overrides.

    Values of the wrong type in the config or environment are ignored with a
    warning on stderr rather than aborting the run.
    """
    cfg = load() if cfg is None else cfg
    environ = os.environ if environ is None else environ
    out = dict(TIMING_DEFAULTS)
    layers = [("config", (cfg.get("timing") or {}))]
    layers.append(("env", {key: environ[name] for name, key in TIMING_ENV.items() if environ.get(name, "") != ""}))
    for where, layer in layers:
        for key, raw in layer.items():
            if key not in TIMING_DEFAULTS:
                out[key] = raw  # unknown keys pass through for forward compatibility
                continue
            if raw is None:
                continue
            try:
                out[key] = coerce_timing(TIMING_DEFAULTS[key], raw, key)
            except (TypeError, ValueError):
                what = "|".join(TIMING_CHOICES[key]) if key in TIMING_CHOICES else type(TIMING_DEFAULTS[key]).__name__
                print(f"opscreen: ignoring timing {key}={raw!r} from {where}: not a {what}", file=sys.stderr)
    return out


def configured_timer(cfg: dict | None = None, environ: dict | None = None) -> str | None:
    """``$OPSCREEN_TIMER`` if set, else the config's ``timer`` (the harness planned it once:
    opscreen.op.plan.planned_timer, OpRequest.planned_timer); None when neither names one."""
    cfg = load() if cfg is None else cfg
    environ = os.environ if environ is None else environ
    timer = (environ.get(ENV_TIMER) or cfg.get("timer") or "").strip().lower()
    if not timer:
        return None
    if timer not in TIMERS:
        raise ConfigError(f"unknown timer {timer!r}; the child knows {', '.join(TIMERS)}")
    return timer


# -- device-fatal exit ---------------------------------------------------------

_pytest_config = None


def _dup_stdout():
    try:
        return os.dup(1)
    except OSError:
        return None


# The process's stdout as it was when this module was imported: plugins named with
# ``-p`` are imported before pytest starts capturing, so this is the real pipe to
# the harness even when a fatal error strikes under capture (not inheritable).
_STDOUT_FD = _dup_stdout()


def attach_pytest_config(pytest_config) -> None:
    """Remember the running pytest config so :func:`fatal_exit` can lift output capture.

    Called from the plugins' ``pytest_configure``. Without it, a fatal line
    printed inside a test would land in pytest's capture buffer and be lost by
    ``os._exit``.
    """
    global _pytest_config
    _pytest_config = pytest_config


def one_line(message: object, limit: int = 600) -> str:
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fatal_line(kind: str, message: object) -> str:
    kind = "-".join(str(kind).split()) or "device-fatal"
    return f"{FATAL_PREFIX} {kind}: {one_line(message)}"


def _release_capture() -> None:
    """Stop pytest's output capture and write out what it held (best effort)."""
    cfg = _pytest_config
    if cfg is None:
        return
    try:
        capman = cfg.pluginmanager.getplugin("capturemanager")
        if capman is None:
            return
        try:
            out, err = capman.read_global_capture()
        except Exception:
            out, err = "", ""
        capman.suspend_global_capture(in_=True)
        if out:
            sys.stdout.write(out)
        if err:
            sys.stderr.write(err)
    except Exception:
        pass


def fatal_exit(kind: str, message: object, code: int = EXIT_DEVICE_FATAL) -> NoReturn:
    """End the process at once after printing one ``OPSCREEN-FATAL: <kind>: <message>`` line.

    For device-fatal errors (illegal memory access, device-side assert, ...)
    that leave the device context unusable: the batch runner sees exit status
    86 and restarts the op in a fresh process. Output that pytest captured so
    far is written out first (when :func:`attach_pytest_config` was called) so
    run.log keeps the context; the line itself goes to the stdout this module
    saw at import, so it reaches the harness even under capture. ``os._exit``
    skips atexit handlers and finalizers, which would touch the broken context.
    """
    line = fatal_line(kind, message)
    _release_capture()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    data = (line + "\n").encode("utf-8", "replace")
    targets = [1]
    if _STDOUT_FD is not None:
        targets = [_STDOUT_FD]
        if not _same_file(_STDOUT_FD, 1):
            targets.append(1)  # fd 1 was redirected since import: write there too
    for fd in targets:
        try:
            os.write(fd, data)
        except OSError:
            pass
    os._exit(code)


def _same_file(fd_a: int, fd_b: int) -> bool:
    try:
        a, b = os.fstat(fd_a), os.fstat(fd_b)
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    except OSError:
        return False

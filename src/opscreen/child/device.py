"""Child plugin: device setup, before the suite imports its library.

Loaded first (``-p opscreen.child.device``). In ``pytest_load_initial_conftests``
(which runs before the suite's conftest imports flag_gems) it sets GEMS_VENDOR
from the backend, imports the suite environment's torch (and the vendor's torch
extension), checks that torch is the right build for the backend and that the
device is visible, and ends the process with the device-fatal status and a clear
message when it is not. Because GEMS_VENDOR is set, flag_gems never runs its
own untimed probe of every vendor's CLI. What it learns (device name, runtime
version) is kept in :data:`PROBE` for the identity plugin.
"""

from __future__ import annotations

import importlib
import os

import pytest

from . import config as _config

PROBE: dict = {}
_DONE = False
_TERM_DUMP = None  # keeps the duplicated stderr of the SIGTERM stack dump open


def dump_stacks_on_sigterm() -> bool:
    """On SIGTERM (the harness's timeout), print every thread's Python stack to the
    original stderr, then die of SIGTERM as before: a timed-out op's run.log says
    where it was (compiling, autotuning, a hung kernel, the suite's own loop).
    The stream is a duplicate of fd 2 taken now, so pytest's output capture cannot
    swallow it. False where faulthandler cannot do this (no SIGTERM, no register)."""
    global _TERM_DUMP
    if _TERM_DUMP is not None:
        return True
    import faulthandler
    import signal

    if not hasattr(faulthandler, "register") or not hasattr(signal, "SIGTERM"):
        return False
    try:
        stream = os.fdopen(os.dup(2), "w")
        faulthandler.register(signal.SIGTERM, file=stream, all_threads=True, chain=True)
    except (OSError, ValueError, RuntimeError):
        return False
    _TERM_DUMP = stream
    return True


def _setup() -> None:
    global _DONE
    if _DONE:
        return
    _DONE = True
    cfg = _config.load()
    if not cfg:
        return
    dump_stacks_on_sigterm()
    vendor = cfg.get("vendor")
    if vendor:
        os.environ["GEMS_VENDOR"] = vendor
    PROBE.update(probe(cfg))
    if PROBE.get("error"):
        _config.fatal_exit("device-unavailable", PROBE["error"])


def probe(cfg: dict) -> dict:
    """Import torch and check the configured device; never raises."""
    dtype = cfg.get("device_type", "cpu")
    ordinal = int(cfg.get("device_ordinal", 0) or 0)
    out: dict = {"device_type": dtype, "device_ordinal": ordinal}
    if dtype == "cpu":
        # Nothing to check on the host, and no reason to import torch for it.
        import platform

        out["device_name"] = platform.processor() or platform.machine()
        out["device_count"] = os.cpu_count()
        return out
    try:
        import torch
    except Exception as exc:  # the suite's Python has no torch
        out["error"] = f"cannot import torch in {os.sys.executable}: {exc}"
        return out
    out["torch_version"] = torch.__version__
    out["runtime"] = {"cuda": getattr(torch.version, "cuda", None), "hip": getattr(torch.version, "hip", None)}
    if not import_extensions(cfg, out):
        return out
    # torch_musa sets torch.version.musa; a vendor that sets nothing leaves None
    out["runtime"].setdefault(dtype, getattr(torch.version, dtype, None))
    backend = cfg.get("backend")
    if backend == "cuda" and out["runtime"]["hip"]:
        out["error"] = f"backend cuda but torch {torch.__version__} is a ROCm build: use --backend rocm"
        return out
    if backend == "rocm" and not out["runtime"]["hip"]:
        out["error"] = f"backend rocm but torch {torch.__version__} is not a ROCm build (torch.version.hip is None)"
        return out
    mod = getattr(torch, dtype, None)
    try:
        available = bool(mod is not None and mod.is_available())
        count = int(mod.device_count()) if available else 0
    except Exception as exc:
        out["error"] = f"torch.{dtype} failed to initialise: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        return out
    visible = {k: os.environ[k] for k in cfg.get("visible_env_keys") or () if k in os.environ}
    if count <= ordinal:
        out["error"] = (
            f"no visible {dtype} device {ordinal} (torch sees {count}; visible-devices env {visible or 'unset'}); "
            f"check the device index and 'opscreen devices --backend {backend}'"
        )
        return out
    out["device_count"] = count
    try:
        out["device_name"] = mod.get_device_name(ordinal)
        if hasattr(mod, "set_device"):
            mod.set_device(ordinal)
        props = mod.get_device_properties(ordinal)
        out["l2_cache_size"] = getattr(props, "L2_cache_size", None)
        out["multi_processor_count"] = getattr(props, "multi_processor_count", None)
        out["total_memory"] = getattr(props, "total_memory", None)
        uuid = str(getattr(props, "uuid", "") or "")
        out["uuid"] = uuid or None
        cap = getattr(props, "major", None), getattr(props, "minor", None)
        out["compute_capability"] = f"{cap[0]}.{cap[1]}" if cap[0] is not None else None
    except Exception as exc:
        out["error"] = f"device {ordinal} of torch.{dtype} is not usable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return out


def import_extensions(cfg: dict, out: dict) -> bool:
    """Import the backend's torch extensions (``torch_modules``), recording each one's
    version in ``out["extensions"]``; False (with ``out["error"]``) when one fails."""
    out["extensions"] = {}
    for mod in cfg.get("torch_modules") or []:
        try:
            module = importlib.import_module(mod)
        except Exception as exc:
            out["error"] = f"backend {cfg.get('backend')} needs the torch extension '{mod}', which failed to import: {exc}"
            return False
        version = getattr(module, "__version__", None)
        out["extensions"][mod] = str(version) if version is not None else None
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    _setup()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _setup()

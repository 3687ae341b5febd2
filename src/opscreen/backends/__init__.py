"""The backend registry: the one place that knows which accelerator a run targets.

Selection order: ``--backend NAME``, else ``ZL_BACKEND``, else auto-detection in
:data:`DETECT_ORDER` (device nodes, then each vendor CLI with a timeout), else
``cpu``. Names and aliases are case-insensitive; an alias may carry a vendor
variant (``hygon`` -> rocm with GEMS_VENDOR=hygon).

Capability flags can be overridden (``--cap graph_capture=on`` or
``OPSCREEN_CAPS=graph_capture=on,l2_flush=off``) where the hardware can do more
than the default declares.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, fields

from ..settings import BY_NAME as SETTINGS
from ..errors import UsageError
from .base import Backend, Capabilities, Device, Enumeration

# One module per backend; adding a backend means adding a module and its name here.
MODULES = ("cuda", "rocm", "musa", "ascend", "mlu", "cpu")
DETECT_ORDER = ("cuda", "rocm", "musa", "ascend", "mlu")

# Visible-device keys that no backend sets but that must never leak into a child.
EXTRA_VISIBLE_KEYS = ("ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "MACA_VISIBLE_DEVICES")

BACKENDS: dict[str, Backend] = {}
for _mod in MODULES:
    _b = importlib.import_module(f"{__name__}.{_mod}").BACKEND
    BACKENDS[_b.name] = _b


def all_visible_keys() -> tuple[str, ...]:
    keys: list[str] = []
    for b in BACKENDS.values():
        keys.extend(k for k in b.visible_env if k not in keys)
    keys.extend(k for k in EXTRA_VISIBLE_KEYS if k not in keys)
    return tuple(keys)


def names_and_aliases() -> str:
    parts = []
    for b in BACKENDS.values():
        parts.append(f"{b.name} ({', '.join(sorted(b.aliases))})" if b.aliases else b.name)
    return "; ".join(parts)


@dataclass(frozen=True)
class Selection:
    backend: Backend
    source: str  # "--backend", "ZL_BACKEND", "auto", "default"
    requested: str | None = None  # the name as given

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def vendor(self) -> str:
        return self.backend.vendor


def resolve(name: str) -> Backend:
    """Canonical backend for a name or alias (with its vendor variant applied)."""
    key = name.strip().lower()
    if key in BACKENDS:
        return BACKENDS[key]
    for b in BACKENDS.values():
        if key in b.aliases:
            return b.with_vendor(b.aliases[key])
    raise UsageError(f"unknown backend '{name}'; valid names (aliases): {names_and_aliases()}")


def detect() -> tuple[Backend, str]:
    for name in DETECT_ORDER:
        b = BACKENDS[name]
        if b.present():
            if name == "rocm" and _hygon_present():
                return b.with_vendor("hygon"), "auto"
            return b, "auto"
    return BACKENDS["cpu"], "default"


def _hygon_present() -> bool:
    import shutil

    return shutil.which("hy-smi") is not None


BACKEND_ENV = SETTINGS["backend"].env  # ZL_BACKEND: declared once, in opscreen.settings
CAPS_ENV = SETTINGS["cap"].env  # OPSCREEN_CAPS


def select(flag: str | None = None, env: dict | None = None, caps: list[str] | None = None) -> Selection:
    env = os.environ if env is None else env
    if flag:
        sel = Selection(resolve(flag), "--backend", flag)
    elif env.get(BACKEND_ENV):
        sel = Selection(resolve(env[BACKEND_ENV]), BACKEND_ENV, env[BACKEND_ENV])
    else:
        b, how = detect()
        sel = Selection(b, how)
    overrides = parse_cap_overrides(env.get(CAPS_ENV, ""), origin=CAPS_ENV)
    for spec in caps or []:
        overrides.update(parse_cap_overrides(spec, origin="--cap"))
    if overrides:
        sel = Selection(sel.backend.with_capabilities(**overrides), sel.source, sel.requested)
    return sel


_BOOL = {"1": True, "on": True, "true": True, "yes": True, "0": False, "off": False, "false": False, "no": False}


def parse_cap_overrides(spec: str, origin: str) -> dict:
    known = {f.name: f.type for f in fields(Capabilities)}
    out: dict = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in known or key == "graph_api":
            raise UsageError(
                f"{origin}: bad capability override '{item}'; use KEY=on|off with KEY one of "
                + ", ".join(k for k in known if k != "graph_api")
            )
        if value.strip().lower() not in _BOOL:
            raise UsageError(f"{origin}: capability '{key}' takes on|off, not '{value}'")
        out[key] = _BOOL[value.strip().lower()]
    return out


__all__ = [
    "BACKENDS",
    "Backend",
    "Capabilities",
    "Device",
    "Enumeration",
    "Selection",
    "all_visible_keys",
    "detect",
    "resolve",
    "select",
]

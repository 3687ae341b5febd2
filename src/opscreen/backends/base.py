"""What a backend declares, and the device-enumeration machinery they share.

A :class:`Backend` is a frozen description: names, torch device type, the
FlagGems vendor it implies, visible-device environment keys, device sources and
capability flags. Nothing outside ``opscreen.backends`` names a vendor; it asks a
``Backend`` instead.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from ..procgroup import run_capture
from ..settings import enumeration_timeout


@dataclass(frozen=True)
class Capabilities:
    """What the harness may plan for a backend.

    graph_capture: per-callable graph capture and replay timing is available.
    graph_api: dotted path of the torch graph class the graph timer uses.
    device_events: device-side events time kernels (False: host clock only).
    l2_flush: the timer may flush the L2 cache between samples.
    cuda_workarounds: CUDA-only workaround plugins are planned (NVIDIA only).
    slots: device indices are parallel slots on the host, not accelerators.
    device_profiler: torch.profiler records the device's kernels (CUPTI, roctracer):
        the profiler timer can time what graph capture cannot.
    """

    graph_capture: bool = False
    graph_api: str | None = None
    device_events: bool = True
    l2_flush: bool = False
    cuda_workarounds: bool = False
    slots: bool = False
    device_profiler: bool = False

    def as_dict(self) -> dict:
        return {
            "graph_capture": self.graph_capture,
            "graph_api": self.graph_api,
            "device_events": self.device_events,
            "l2_flush": self.l2_flush,
            "cuda_workarounds": self.cuda_workarounds,
            "slots": self.slots,
            "device_profiler": self.device_profiler,
        }


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    source: str  # "cli:<tool>" or "torch"
    extra: dict = field(default_factory=dict)


@dataclass
class Enumeration:
    """Devices found, by source, plus one message per source that failed."""

    devices: list[Device]
    messages: list[str]
    sources_tried: list[str]


@dataclass(frozen=True)
class CliSource:
    """A vendor CLI that lists devices: argv and a parser of its stdout."""

    argv: tuple[str, ...]
    parse: Callable[[str], list[tuple[int, str]]]

    @property
    def tool(self) -> str:
        return self.argv[0]


def cli_timeout() -> float:
    return enumeration_timeout("cli", os.environ)  # $OPSCREEN_CLI_TIMEOUT, checked


def probe_timeout() -> float:
    return enumeration_timeout("probe", os.environ)  # $OPSCREEN_PROBE_TIMEOUT, checked


@dataclass(frozen=True)
class Backend:
    """One accelerator family. Lifecycle: declared once at import, never mutated
    (``with_vendor``/``with_capabilities`` return copies)."""

    name: str
    description: str
    device_type: str
    vendor: str
    # alias -> vendor variant implied by that alias (None: the default vendor)
    aliases: dict[str, str | None]
    visible_env: tuple[str, ...]
    capabilities: Capabilities
    cli_sources: tuple[CliSource, ...] = ()
    torch_modules: tuple[str, ...] = ()  # extension modules to import before probing
    device_nodes: tuple[str, ...] = ()  # glob patterns whose presence hints at hardware
    # True: the torch probe needs a ROCm/HIP build of torch; False: it must not be one
    # (both expose torch 'cuda' devices, and one must not list the other's); None: either.
    torch_hip: bool | None = None

    def device_label(self) -> str:
        """How messages name this backend's devices: the backend's own name, with the
        torch device type beside it where they differ (rocm's devices are torch 'cuda')."""
        if self.device_type == self.name:
            return self.name
        return f"{self.name} (torch device type '{self.device_type}')"

    def with_vendor(self, vendor: str | None) -> "Backend":
        return self if not vendor or vendor == self.vendor else replace(self, vendor=vendor)

    def with_capabilities(self, **overrides) -> "Backend":
        return replace(self, capabilities=replace(self.capabilities, **overrides))

    # -- environment -------------------------------------------------------
    def visible_devices_env(self, devices: Sequence[int], all_keys: Sequence[str]) -> dict[str, str | None]:
        """Environment changes for a child that may see exactly ``devices``.

        Returns key -> value to set, or key -> None to remove. Every other
        backend's visible-device key is removed so none leaks into the child.
        """
        value = ",".join(str(int(d)) for d in devices)
        env: dict[str, str | None] = {k: None for k in all_keys}
        if not self.capabilities.slots:
            for key in self.visible_env:
                env[key] = value
        return env

    # -- enumeration -------------------------------------------------------
    def enumerate_cli(self) -> Enumeration:
        messages: list[str] = []
        tried: list[str] = []
        for src in self.cli_sources:
            tried.append(f"cli:{src.tool}")
            if shutil.which(src.tool) is None:
                messages.append(f"cli:{src.tool}: not found on PATH")
                continue
            res = run_capture(src.argv, timeout=cli_timeout())
            if res.timed_out:
                messages.append(f"cli:{src.tool}: timed out after {cli_timeout():g} s")
                continue
            if res.error:
                messages.append(f"cli:{src.tool}: could not run ({res.error})")
                continue
            if res.returncode != 0:
                last = (res.stderr.strip() or res.stdout.strip()).splitlines()
                tail = f": {last[-1][:160]}" if last else ""
                messages.append(f"cli:{src.tool}: exited with status {res.returncode}{tail}")
                continue
            found = src.parse(res.stdout)
            if not found:
                messages.append(f"cli:{src.tool}: listed no devices")
                continue
            return Enumeration([Device(i, n, f"cli:{src.tool}") for i, n in found], messages, tried)
        return Enumeration([], messages, tried)

    def enumerate_torch(self, python: str | None = None) -> Enumeration:
        python = python or sys.executable
        script = _TORCH_PROBE % {
            "modules": json.dumps(list(self.torch_modules)),
            "dtype": self.device_type,
            "hip": repr(self.torch_hip),
            "name": self.name,
        }
        src = "torch"
        env = dict(os.environ)
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        res = run_capture([python, "-c", script], timeout=probe_timeout(), env=env)
        if res.timed_out:
            return Enumeration([], [f"torch: probe timed out after {probe_timeout():g} s ({python})"], [src])
        if res.error:
            return Enumeration([], [f"torch: could not run {python} ({res.error})"], [src])
        payload = _last_json(res.stdout)
        if res.returncode != 0 or payload is None:
            last = (res.stderr.strip() or res.stdout.strip()).splitlines()
            tail = last[-1][:200] if last else f"exit status {res.returncode}"
            return Enumeration([], [f"torch: probe failed: {tail}"], [src])
        if payload.get("error"):
            return Enumeration([], [f"torch: {payload['error']}"], [src])
        names = payload.get("names", [])
        if self.device_type == "cpu":  # the model, not the architecture platform.processor() gives
            from .cpuinfo import cpu_name

            names = [cpu_name() for _ in names]
        devs = [Device(i, n, src, {"torch": payload.get("torch")}) for i, n in enumerate(names)]
        msgs = [] if devs else [f"torch: torch {payload.get('torch')} sees no {self.device_label()} device"]
        return Enumeration(devs, msgs, [src])

    def enumerate(self, python: str | None = None) -> Enumeration:
        """CLI first (fast, no device context), then the torch probe.

        Both are tried; a device listed by either is reported with the sources
        that saw it. Every failing source leaves one message, none hangs.
        """
        cli = self.enumerate_cli()
        tor = self.enumerate_torch(python)
        merged: dict[int, Device] = {}
        for d in cli.devices + tor.devices:
            if d.index in merged:
                old = merged[d.index]
                merged[d.index] = Device(old.index, old.name, f"{old.source}+{d.source}", old.extra)
            else:
                merged[d.index] = d
        return Enumeration(
            [merged[i] for i in sorted(merged)],
            cli.messages + tor.messages,
            cli.sources_tried + tor.sources_tried,
        )

    def present(self) -> bool:
        """Cheap hardware hint for auto-detection: a device node, else a CLI listing."""
        import glob

        if any(glob.glob(pattern) for pattern in self.device_nodes):
            return True
        return bool(self.enumerate_cli().devices) if self.cli_sources else False

    def describe(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "aliases": {a: v for a, v in sorted(self.aliases.items())},
            "device_type": self.device_type,
            "vendor": self.vendor,
            "visible_env": list(self.visible_env),
            "cli": [" ".join(s.argv) for s in self.cli_sources],
            "capabilities": self.capabilities.as_dict(),
        }


def _last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


_TORCH_PROBE = r"""
import json, importlib
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    for m in %(modules)s:
        importlib.import_module(m)
    dtype = "%(dtype)s"
    want_hip = %(hip)s
    hip = getattr(getattr(torch, "version", None), "hip", None)
    if want_hip is True and not hip:
        out["error"] = "torch %%s is not a ROCm/HIP build; its '%%s' devices are not %(name)s devices" %% (torch.__version__, dtype)
    elif want_hip is False and hip:
        out["error"] = "torch %%s is a ROCm/HIP build (HIP %%s); its '%%s' devices are not %(name)s devices (use --backend rocm)" %% (torch.__version__, hip, dtype)
    elif dtype == "cpu":
        import os, platform
        out["names"] = [platform.processor() or platform.machine() or "cpu"]
    else:
        mod = getattr(torch, dtype, None)
        if mod is None or not mod.is_available():
            out["names"] = []
        else:
            out["names"] = [mod.get_device_name(i) for i in range(mod.device_count())]
except Exception as exc:
    out["error"] = "%%s: %%s" %% (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
print(json.dumps(out))
"""


def parse_indexed_lines(pattern: str) -> Callable[[str], list[tuple[int, str]]]:
    """Parser for CLIs that print one device per line, e.g. ``GPU 0: NAME (UUID: ...)``."""
    import re

    rx = re.compile(pattern)

    def parse(text: str) -> list[tuple[int, str]]:
        found = []
        for line in text.splitlines():
            m = rx.search(line)
            if m:
                found.append((int(m.group("index")), m.group("name").strip()))
        return found

    return parse

"""The host CPU's model name: the ``device_name`` of the cpu backend's devices.

``platform.processor()`` is the architecture on Linux (``x86_64``), so every x86 host
was one device name and two CPU models compared as the same device. The name comes
from ``/proc/cpuinfo`` (``model name`` on x86, ``Model``/``Hardware``/``cpu model`` on
other architectures), then ``lscpu`` (which names ARM cores, ``Neoverse-V2``, where
the kernel lists only part numbers), then ``platform.processor()``/``machine()``.
Standard library only, on purpose: py-cpuinfo (9.0.0) reads the same sources
(``/proc/cpuinfo``, ``lscpu``) among others (CPUID, dmesg, sysctl, ...) and gave this
host the same name, but its ``get_cpu_info()`` runs the whole probe in a new Python
process and took 1.18-1.20 s a call on a 2-core AMD EPYC host, against 0.6-0.7 ms here
(three runs each). The name is read once per harness process (``opscreen devices``,
``run``, each op's identity), so every command would pay that second for no other name.
"""

from __future__ import annotations

import functools
import platform
import re
import shutil
import subprocess

#: /proc/cpuinfo keys that name the model, in the order they are trusted
CPUINFO_KEYS = ("model name", "cpu model", "cpu", "model", "hardware", "processor")


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def name_from_cpuinfo(text: str) -> str | None:
    """The model in ``/proc/cpuinfo``'s text (None when it names none: a number is no name)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = _clean(key).lower(), _clean(value)
        if sep and key in CPUINFO_KEYS and key not in found and value and not value.isdigit():
            found[key] = value
    return next((found[k] for k in CPUINFO_KEYS if k in found), None)


def name_from_lscpu(text: str) -> str | None:
    """``Model name:`` of ``lscpu``'s output (the first: the first socket's cores)."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and _clean(key).lower() == "model name" and _clean(value) and _clean(value) != "-":
            return _clean(value)
    return None


def _lscpu() -> str:
    if shutil.which("lscpu") is None:
        return ""
    try:
        res = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL,
                             env={"LC_ALL": "C", "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
    except (OSError, subprocess.SubprocessError):
        return ""
    return res.stdout if res.returncode == 0 else ""


@functools.lru_cache(maxsize=1)
def cpu_name() -> str:
    """This host's CPU model (see the module docstring); never raises."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            name = name_from_cpuinfo(fh.read())
    except OSError:
        name = None
    return name or name_from_lscpu(_lscpu()) or platform.processor() or platform.machine() or "cpu"

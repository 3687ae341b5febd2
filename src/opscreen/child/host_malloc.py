"""The host allocator's give-back, held steady while the host CPU is what gets measured.

glibc's ``malloc`` serves a block of 128 KiB or more with ``mmap`` until the first such
block is freed, then raises that threshold to the freed size, and gives the top of its
heap back to the kernel whenever more than twice the threshold lies free there. A torch
CPU op that makes temporaries of a few hundred KiB (``0.5 * x * (1 + erf(x / sqrt 2))``
on 262144 floats: four 1 MiB tensors a call) then pays fresh page faults on every call
in some processes and none in others, depending on where its heap's top happened to
land: on the sample suite, `gelu`'s library side read 0.6 ms a call in one fresh process
and 2.7 ms in the next, 120 minor faults a call against none (docs/timing.md, "The host
side"). A warm worker's heap has long settled, so it read the fast state every time.

``steady`` fixes both thresholds (``mallopt``: blocks up to :data:`MMAP_THRESHOLD` come
from the heap, and the heap is never trimmed), so that every process reaches the
fault-free state after its first calls, as a long-lived one does. ``system`` leaves the
allocator as the C library set it. The cost of ``steady``: the heap keeps what it grew to
(the process's resident memory stays at its peak, which the next case reuses; a warm
worker's resident-memory recycle bound still applies).

Only glibc has these knobs; elsewhere :func:`apply` reports that it changed nothing.
Standard library only.
"""

from __future__ import annotations

import ctypes
import os
from typing import Optional

MODES = ("system", "steady")
M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit hosts)
TRIM_THRESHOLD = 2 ** 31 - 1  # an int: in effect, never trim
ENV_KEYS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_APPLIED: dict = {}


def _libc():
    try:  # the process's own symbols, libc's among them: no ldconfig subprocess (find_library's)
        lib = ctypes.CDLL(None)
        fn = lib.mallopt
    except (OSError, AttributeError):
        return None
    try:
        gnu = lib.gnu_get_libc_version
        gnu.restype = ctypes.c_char_p
        version = gnu().decode()
    except AttributeError:  # not glibc: mallopt may exist and do nothing
        return None
    fn.argtypes, fn.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return fn, version


def apply(mode: str, environ: Optional[dict] = None) -> dict:
    """Put the allocator in ``mode`` (one of :data:`MODES`) and return what was done:
    ``{"mode", "applied", "libc", "why"}`` (also kept for :func:`applied`). The
    ``MALLOC_*`` variables of the environment, when set, win: the user chose."""
    env = os.environ if environ is None else environ
    out: dict = {"mode": mode, "applied": False, "libc": None, "why": None}
    user = {k: env[k] for k in ENV_KEYS if k in env}
    if mode != "steady":
        out["why"] = "system: the allocator as the C library set it"
    elif user:
        out["why"] = f"the environment sets {', '.join(f'{k}={v}' for k, v in sorted(user.items()))}"
    else:
        lib = _libc()
        if lib is None:
            out["why"] = "not glibc: no mallopt thresholds to hold"
        else:
            fn, out["libc"] = lib
            ok = fn(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and fn(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
            out["applied"] = ok
            out["why"] = (f"mmap threshold {MMAP_THRESHOLD >> 20} MiB, no trimming" if ok
                          else "mallopt refused the thresholds")
    if user:
        out["env"] = user
    _APPLIED.clear()
    _APPLIED.update(out)
    return dict(out)


def applied() -> dict:
    """What the last :func:`apply` of this process did ({} when none ran)."""
    return dict(_APPLIED)

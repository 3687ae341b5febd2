"""A diagnostic pytest plugin for fresh op processes: does the device's memory history move
small kernels? (issue 16; bench/results/2026-12-01-h200-canary.md)

A warm worker's later ops read a few ops' small kernels (mse_loss's library side, 3-9 %
a row) apart from a fresh process, while two fresh processes on one machine agree. One
explanation is placement: earlier ops moved where the driver puts the next op's memory.
This plugin gives a fresh process such a history before its first test, once collection
is done (the suite's imports made), from ``OPSCREEN_DIAG_HOLD``:

- ``hold:MB``: allocate MB MiB (in whole 64 MiB pieces, at least one) on the current CUDA device and keep it for the session;
- ``churn:MB``: allocate MB MiB in 64 MiB pieces, free them and empty the allocator's
  cache, as a worker's hygiene leaves an earlier op's memory.

Loaded with ``PYTEST_ADDOPTS="-p hold_plugin"`` and this folder on ``PYTHONPATH``
(bench/device/h200_checks.sh, wkcause modes ``ophold`` and ``opchurn``). It prints one
line saying what it did.
"""

from __future__ import annotations

import os
import sys

_KEPT: list = []


def plan(text: str) -> tuple[str, int] | None:
    """``hold:256`` -> ("hold", 256); None for anything else (the plugin then does nothing)."""
    kind, _, mb = text.strip().partition(":")
    if kind not in ("hold", "churn") or not mb.isdigit() or int(mb) <= 0:
        return None
    return kind, int(mb)


def pytest_collection_finish(session) -> None:
    what = plan(os.environ.get("OPSCREEN_DIAG_HOLD", ""))
    torch = sys.modules.get("torch")
    if what is None or torch is None or not torch.cuda.is_available():
        return
    kind, mb = what
    pieces = max(1, mb // 64)  # whole 64 MiB pieces
    blocks = [torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda") for _ in range(pieces)]
    torch.cuda.synchronize()
    if kind == "hold":
        _KEPT.extend(blocks)
    else:
        del blocks
        torch.cuda.empty_cache()
    print(f"hold_plugin: {kind} {64 * pieces} MiB before the first test", flush=True)

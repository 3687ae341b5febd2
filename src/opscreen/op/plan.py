"""The plugin plan: which pytest plugins (``-p module``) a per-op child loads.

Derived from the backend's capabilities and the requested timer only, so that a
run on a backend without graph capture never imports the graph machinery and a
non-CUDA run leaves CUDA-only workarounds out instead of watching them fail.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backends import Backend
from ..errors import UsageError
from ..settings import check_timer, default

DEVICE = "opscreen.child.device"
IDENTITY = "opscreen.child.identity"
REPORT = "opscreen.child.report"
GRAPH = "opscreen.child.graph"
PROFILER = "opscreen.child.profiler"
TIMING = "opscreen.child.timing"
CUDA_GUARD = "opscreen.child.cuda_guard"
INPUTS = "opscreen.child.inputs"


@dataclass(frozen=True)
class Plugin:
    module: str
    why: str


def planned_timer(backend: Backend, requested: str = default("timer")) -> str:
    """The timer a run will use: ``auto`` picks graph where capture is possible,
    wallclock on the host CPU, the suite's own do_bench ("direct") elsewhere."""
    check_timer(requested)
    if requested == "graph" and not backend.capabilities.graph_capture:
        raise UsageError(
            f"--timer graph needs graph capture, which backend '{backend.name}' does not declare; "
            "use --timer direct, or --cap graph_capture=on if the hardware supports it"
        )
    if requested == "profiler" and not backend.capabilities.device_profiler:
        raise UsageError(
            f"--timer profiler needs a profiler that records device kernels, which backend '{backend.name}' does not "
            "declare; use --timer direct, or --cap device_profiler=on if torch.profiler records its kernels"
        )
    if requested != "auto":
        return requested
    if backend.capabilities.graph_capture:
        return "graph"
    if backend.device_type == "cpu":
        return "wallclock"
    return "direct"


def plugin_plan(backend: Backend, timer: str = default("timer")) -> list[Plugin]:
    timer = planned_timer(backend, timer)
    plan = [
        Plugin(DEVICE, "sets the vendor and checks the device before the suite imports its library"),
        Plugin(IDENTITY, "writes run_identity.json"),
        Plugin(REPORT, "folded result tables with timer tags; record log in the output dir"),
        Plugin(INPUTS, "seeds the random generators before each test and after each measurement (input_seed)"),
    ]
    if timer == "graph":
        plan.append(Plugin(GRAPH, f"graph capture and replay ({backend.capabilities.graph_api})"))
    if timer in ("graph", "profiler") and backend.capabilities.device_profiler:
        plan.append(Plugin(PROFILER, "kernels' device time from torch.profiler (the graph timer's fallback)"))
    plan.append(Plugin(TIMING, f"replaces the suite's timing call; timer={timer}"))
    if backend.capabilities.cuda_workarounds:
        plan.append(Plugin(CUDA_GUARD, "CUDA only: turns sticky device errors into a fatal exit"))
    return plan


def pytest_args(plan: list[Plugin]) -> list[str]:
    args: list[str] = []
    for p in plan:
        args += ["-p", p.module]
    return args

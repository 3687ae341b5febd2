from __future__ import annotations

import pytest

from opscreen.backends import resolve, select
from opscreen.errors import UsageError
from opscreen.op.plan import (CUDA_GUARD, DEVICE, GRAPH, IDENTITY, INPUTS, PROFILER, REPORT, TIMING, planned_timer,
                              plugin_plan, pytest_args)


def modules(name, timer="auto", caps=None):
    b = select(name, env={}, caps=caps).backend
    return [p.module for p in plugin_plan(b, timer)]


def test_cuda_plan_has_graph_profiler_and_cuda_guard():
    assert modules("nvidia") == [DEVICE, IDENTITY, REPORT, INPUTS, GRAPH, PROFILER, TIMING, CUDA_GUARD]


def test_profiler_timer_is_planned_where_the_backend_declares_a_device_profiler():
    assert modules("cuda", timer="profiler") == [DEVICE, IDENTITY, REPORT, INPUTS, PROFILER, TIMING, CUDA_GUARD]
    assert PROFILER in modules("rocm", timer="profiler") and GRAPH not in modules("rocm", timer="profiler")
    assert PROFILER not in modules("rocm") and PROFILER not in modules("cuda", timer="direct")
    with pytest.raises(UsageError, match="device_profiler"):
        planned_timer(resolve("musa"), "profiler")
    assert PROFILER in modules("musa", timer="profiler", caps=["device_profiler=on"])


@pytest.mark.parametrize("name", ["rocm", "hygon", "musa", "ascend", "mlu", "cpu"])
def test_non_cuda_plans_leave_graph_and_cuda_workarounds_out(name):
    mods = modules(name)
    assert mods[:4] == [DEVICE, IDENTITY, REPORT, INPUTS]
    assert GRAPH not in mods and CUDA_GUARD not in mods and TIMING in mods


def test_graph_capability_override_plans_graph_without_cuda_guard():
    mods = modules("musa", caps=["graph_capture=on"])
    assert GRAPH in mods and CUDA_GUARD not in mods


def test_direct_timer_on_cuda_leaves_graph_out():
    assert GRAPH not in modules("cuda", timer="direct")


def test_planned_timers():
    assert planned_timer(resolve("cuda")) == "graph"
    assert planned_timer(resolve("musa")) == "direct"
    assert planned_timer(resolve("cpu")) == "wallclock"
    with pytest.raises(UsageError):
        planned_timer(resolve("cpu"), "graph")
    with pytest.raises(UsageError):
        planned_timer(resolve("cpu"), "fastest")


def test_pytest_args_are_p_pairs():
    args = pytest_args(plugin_plan(resolve("cpu")))
    assert args[0::2] == ["-p"] * (len(args) // 2)


def test_plan_command(cli):
    res = cli("plan", env={"ZL_BACKEND": "mthreads"})
    assert res.returncode == 0 and "backend musa" in res.stdout and GRAPH not in res.stdout
    res = cli("plan", "--backend", "nvidia")
    assert res.returncode == 0 and GRAPH in res.stdout
    res = cli("plan", "--backend", "nosuch")
    assert res.returncode == 2 and res.stdout == "" and len(res.stderr.strip().splitlines()) == 1


def test_version(cli):
    res = cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("opscreen ")

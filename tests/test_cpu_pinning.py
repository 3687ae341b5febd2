"""CPU sets per lane: the plan (pure, and from a sysfs tree of a test's own), the thread
caps, and real children of ``opscreen run`` / ``opscreen op`` pinned where the plan says
(each child reads its own ``Cpus_allowed_list`` into its identity)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opscreen.backends import resolve
from opscreen.backends import cpusets as C
from opscreen.procgroup import popen_group

ROOT = Path(__file__).resolve().parent.parent
FAULTS = ROOT / "tests" / "fixtures" / "suites" / "faults"
HOST_CPUS = sorted(os.sched_getaffinity(0))


def test_cpulist_round_trip():
    assert C.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert C.format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert C.normalize_bus_id("00000000:AF:00.0") == "0000:af:00.0"


def test_lanes_of_one_node_split_it_into_disjoint_chunks():
    nodes = {0: list(range(0, 8)), 1: list(range(8, 16))}
    sets = C.plan_sets([0, 1, 2, 3], range(16), {0: 0, 1: 0, 2: 1, 3: 1}, nodes)
    assert [sets[i].cpus for i in range(4)] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15)]
    assert {sets[i].node for i in range(4)} == {0, 1} and sets[0].how == "numa"


def test_unknown_nodes_share_what_no_known_node_claimed_and_only_allowed_cpus_count():
    nodes = {0: list(range(0, 8)), 1: list(range(8, 16))}
    sets = C.plan_sets([0, 1, 2], [1, 2, 3, 9, 10, 11, 12], {0: 0, 1: None, 2: None}, nodes)
    assert sets[0].cpus == (1, 2, 3) and sets[0].node == 0
    assert sets[1].cpus == (9, 10) and sets[2].cpus == (11, 12) and sets[1].how == "host"


def test_fewer_cpus_than_lanes_share_round_robin():
    sets = C.plan_sets([0, 1, 2], [5, 6], {}, {})
    assert [sets[i].cpus for i in range(3)] == [(5,), (6,), (5,)]


def fake_sysfs(root: Path) -> Path:
    for node, cpus in ((0, "0-3"), (1, "4-7")):
        d = root / "devices" / "system" / "node" / f"node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
    for bus, node in (("0000:18:00.0", 0), ("0000:af:00.0", 1), ("0000:cc:00.0", -1)):
        d = root / "bus" / "pci" / "devices" / bus
        d.mkdir(parents=True)
        (d / "numa_node").write_text(f"{node}\n")
    return root


def test_plan_reads_each_gpus_numa_node_from_sysfs(tmp_path):
    sysfs = fake_sysfs(tmp_path)
    buses = {0: "00000000:18:00.0", 1: "00000000:AF:00.0", 2: "00000000:CC:00.0", 3: "00000000:18:00.0"}
    sets = C.plan(resolve("cuda"), [0, 1, 2, 3], "auto", sysfs=str(sysfs), available=range(8), bus_ids=buses)
    assert sets[0].cpus == (0, 1) and sets[3].cpus == (2, 3) and sets[0].node == 0  # GPUs 0 and 3 share node 0
    assert sets[1].cpus == (4, 5, 6, 7) and sets[1].node == 1
    assert sets[2].node is None and sets[2].cpus == (0, 1, 2, 3, 4, 5, 6, 7)  # numa_node -1: all it can share
    assert C.plan(resolve("cuda"), [0], "off", sysfs=str(sysfs), available=range(8), bus_ids=buses) == {}


def test_cpu_slots_split_the_host_cores(tmp_path):
    sets = C.plan(resolve("cpu"), [0, 1], "auto", sysfs=str(fake_sysfs(tmp_path)), available=range(8))
    assert sets[0].cpus == (0, 1, 2, 3) and sets[1].cpus == (4, 5, 6, 7) and sets[0].how == "host"


def test_thread_caps_follow_the_set_unless_set():
    assert C.thread_env((0, 1, 2), {}) == {k: "3" for k in C.THREAD_VARS}
    assert C.thread_env((0, 1, 2), {"OMP_NUM_THREADS": "1"}) == {"MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    assert C.thread_env(None, {}) == {}


def test_a_started_process_runs_on_its_set():
    cpus = HOST_CPUS[-1:]
    proc = popen_group([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"], cpus=cpus)
    out, _ = proc.communicate(timeout=60)
    assert json.loads(out) == cpus


# -- real children of a batch ---------------------------------------------------------------


def _run(tmp_path: Path, *args) -> Path:
    suite = tmp_path / "suite"
    shutil.copytree(FAULTS, suite, ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSCREEN_", "FAULTS_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(FAULTS / "stub_torch")]),
               FAULTS_STATE_DIR=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "opscreen", "run", "--suite", str(suite), "--backend", "cpu", "--out",
                          str(out), "--plain", "--ops", "ok_a,ok_b,ok_c", *args], env=env, capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def _children(out: Path) -> dict:
    seen = {}
    for op in ("ok_a", "ok_b", "ok_c"):
        ident = json.loads((out / "ops" / op / "run_identity.json").read_text())
        cfg = json.loads((out / "ops" / op / "child_config.json").read_text())
        seen[op] = (int(ident["device_index"]), ident["cpu_affinity"], cfg["cpuset"], ident["caliber"])
    return seen


@pytest.mark.skipif(len(HOST_CPUS) < 2, reason="two lanes need two CPUs to be disjoint")
@pytest.mark.parametrize("isolation", ["op", "worker"])
def test_two_lanes_children_run_on_disjoint_sets(tmp_path, isolation):
    """Each lane's children, fresh processes or its warm worker, run on the lane's set."""
    out = _run(tmp_path, "--devices", "0,1", "--isolation", isolation)
    modes = {json.loads((out / "ops" / op / "result.json").read_text())["phases"]["mode"] for op in ("ok_a", "ok_b", "ok_c")}
    assert modes == {"worker" if isolation == "worker" else "process"}
    seen = _children(out)
    plan = C.plan(resolve("cpu"), [0, 1], "auto")
    by_lane: dict = {}
    for op, (lane, affinity, planned, caliber) in seen.items():
        assert affinity["source"] == "proc" and planned["cpus"] == C.format_cpulist(plan[lane].cpus)
        assert C.parse_cpulist(affinity["cpus"]) == list(plan[lane].cpus)  # what the kernel says this child got
        assert affinity["threads"]["OMP_NUM_THREADS"] == "1"  # CPU slots: one intra-op thread each
        assert caliber["cpu_pinning"] == "auto" and caliber["estimator"] == "median"
        by_lane.setdefault(lane, set()).update(C.parse_cpulist(affinity["cpus"]))
    assert set(by_lane) == {0, 1} and not (by_lane[0] & by_lane[1])


def test_pinning_off_leaves_children_where_the_harness_runs(tmp_path):
    seen = _children(_run(tmp_path, "--devices", "0", "--cpu-pinning", "off"))
    for op, (lane, affinity, planned, caliber) in seen.items():
        assert C.parse_cpulist(affinity["cpus"]) == HOST_CPUS and planned == {"pinning": "off", "cpus": None}
        assert caliber["cpu_pinning"] == "off"


def test_bad_pinning_value_is_one_line_exit_2(cli, tmp_path):
    res = cli("op", "abs", "--backend", "cpu", "--cpu-pinning", "sometimes", "--out", tmp_path / "o")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
    res = cli("op", "abs", "--backend", "cpu", "--out", tmp_path / "o", env={"OPSCREEN_CPU_PINNING": "maybe"})
    assert res.returncode == 2 and "'maybe': use one of auto, off" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()

"""Every non-CUDA backend end to end, without its hardware.

tests/fixtures/vendors simulates each vendor on the CPU (its README says how): a fake
torch extension (torch_musa, torch_npu, torch_mlu; for ROCm a patch that makes the CPU
build of torch look like a ROCm build) with two devices that compute on the CPU, and
fake vendor CLIs (mthreads-gmi, npu-smi, rocm-smi and amd-smi, cnmon) that print what
the real ones print and can be told to hang. The real ``opscreen`` CLI runs the
bundled sample suite through them in real child processes; the fake extensions log
what each child saw when they were imported and when it exited.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from opscreen.backends import BACKENDS, DETECT_ORDER, all_visible_keys, resolve

from conftest import SRC

FIX = Path(__file__).resolve().parent / "fixtures" / "vendors"


@dataclass(frozen=True)
class Vendor:
    backend: str
    vendor: str  # GEMS_VENDOR
    device_type: str  # torch's
    visible: str  # the visible-devices key the child must get
    module: str  # what the fake logs as: the extension, or fake_rocm
    clis: tuple[str, ...]  # the fake CLIs, in the order the backend asks them
    cli_name: str  # the device name the CLI listing gives
    torch_name: str  # the device name torch gives


VENDORS = {
    "musa": Vendor("musa", "mthreads", "musa", "MUSA_VISIBLE_DEVICES", "torch_musa", ("mthreads-gmi",),
                   "MTT S4000", "MTT S4000"),
    "ascend": Vendor("ascend", "ascend", "npu", "ASCEND_RT_VISIBLE_DEVICES", "torch_npu", ("npu-smi",),
                     "Ascend 910B3", "Ascend910B3"),
    "rocm": Vendor("rocm", "amd", "cuda", "HIP_VISIBLE_DEVICES", "fake_rocm", ("rocm-smi", "amd-smi"),
                   "AMD Instinct MI300X", "AMD Instinct MI300X"),
    "mlu": Vendor("mlu", "cambricon", "mlu", "MLU_VISIBLE_DEVICES", "torch_mlu", ("cnmon",),
                  "MLU370-X8", "MLU370-X8"),
}
ALL = sorted(VENDORS)


def vendor_env(v: Vendor, tmp_path: Path, **extra) -> dict:
    """The environment that makes this machine look like a ``v`` machine with two devices."""
    env = {
        "PATH": f"{FIX / v.backend / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(SRC), str(FIX / "common"), str(FIX / v.backend / "site")]),
        "FAKE_VENDOR_LOG": str(tmp_path / "vendor.log"),
        "FAKE_VENDOR_DEVICES": "2",
        "OPSCREEN_CACHE_DIR": str(tmp_path / "cache"),
    }
    env.update({k: str(val) for k, val in extra.items()})
    return env


def vendor_log(tmp_path: Path) -> list[dict]:
    path = tmp_path / "vendor.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def child_records(tmp_path: Path, test_file: str) -> tuple[list[dict], list[dict]]:
    """The fake's import and exit records of the measuring children (the pytest runs of
    ``test_file``; not the harness's torch probe nor its collection preflight)."""
    recs = vendor_log(tmp_path)
    pids = {r["pid"] for r in recs if r["event"] == "import" and any(test_file in a for a in r["argv"])}
    return ([r for r in recs if r["pid"] in pids and r["event"] == "import"],
            [r for r in recs if r["pid"] in pids and r["event"] == "exit"])


def record_rows(op_dir: Path) -> list[dict]:
    rows = []
    for line in (op_dir / "record.log").read_text().splitlines():
        if line.startswith("[INFO] {"):
            rows += json.loads(line[len("[INFO] "):])["result"]
    return rows


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


def hung_pids(pidfile: Path) -> list[int]:
    """Pids the hanging fake CLIs wrote (the tool and the grandchild holding its output)."""
    return [int(p) for line in pidfile.read_text().splitlines() for p in line.split()[1:]]


@pytest.fixture(autouse=True)
def _reap_hung_clis(tmp_path):
    """A test that fails must not leave a hanging fake CLI behind."""
    yield
    pidfile = tmp_path / "hung.pids"
    if pidfile.exists():
        for pid in hung_pids(pidfile):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def check_child(op_dir: Path, v: Vendor, device: int) -> dict:
    """One op's files say it ran on fake device ``device`` of ``v``: the right visible key
    (and no other), the direct timer in the identity, result.json and every result row,
    and no CUDA-only plugin in the child's command line."""
    ident = json.loads((op_dir / "run_identity.json").read_text())
    assert ident["child_reported"] is True and ident["outcome"] == "passed", ident
    assert (ident["backend"], ident["vendor"], ident["device_type"]) == (v.backend, v.vendor, v.device_type)
    assert ident["device_index"] == device and ident["device_count"] == 1
    assert ident["device_name"] == v.torch_name
    assert ident["device_uuid"] == f"fake-{v.device_type}-{device}"  # the physical device the child got
    visible = {k: val for k, val in ident["env"].items() if k in all_visible_keys()}
    assert visible == {v.visible: str(device)}, ident["env"]
    assert ident["env"]["GEMS_VENDOR"] == v.vendor
    assert ident["timer_planned"] == "direct" and ident["caliber"]["timer"] == "direct"
    assert json.loads((op_dir / "result.json").read_text())["timer"] == "direct"
    rows = record_rows(op_dir)
    assert rows and {r["timer"] for r in rows} == {r["timer_base"] for r in rows} == {"direct"}, rows[:2]
    config = json.loads((op_dir / "child_config.json").read_text())
    plugins = [config["pytest_addopts"][i + 1] for i, a in enumerate(config["pytest_addopts"]) if a == "-p"]
    assert "opscreen.child.cuda_guard" not in plugins and "opscreen.child.graph" not in plugins, plugins
    assert "opscreen.child.timing" in plugins and plugins[0] == "no:cacheprovider"
    assert "cuda_guard" not in (op_dir / "run.log").read_text()
    return ident


def check_library_saw_the_vendor(tmp_path: Path, v: Vendor, test_file: str, devices: set[str]) -> None:
    """In every measuring child the vendor extension was imported before the library, with
    GEMS_VENDOR already set and one visible device; the library (minigems) then chose the
    vendor and its device type, and the suite's timer synchronized the fake device."""
    imports, exits = child_records(tmp_path, test_file)
    assert imports and len(imports) == len(exits), vendor_log(tmp_path)
    for rec in imports:
        assert rec["module"] == v.module and rec["GEMS_VENDOR"] == v.vendor, rec
        assert rec["library_imported"] == [], rec
        assert set(rec["visible"]) == {v.visible} and rec["device_count"] == 1, rec
    assert {rec["visible"][v.visible] for rec in imports} == devices
    for rec in exits:
        assert rec["library"] == {"vendor_name": v.vendor, "device": v.device_type}, rec
        assert rec["stats"]["synchronize"] > 0, rec


# ---------------------------------------------------------------------------- devices


@pytest.mark.parametrize("name", ALL)
def test_devices_lists_the_fake_devices_from_the_cli_and_torch(name, cli, tmp_path):
    v = VENDORS[name]
    res = cli("devices", "--backend", name, "--json", env=vendor_env(v, tmp_path), timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["backend"] == name and out["vendor"] == v.vendor
    # the CLI's name, its UUID left out (mthreads-gmi and cnmon print one after the name)
    assert [(d["index"], d["name"], d["source"]) for d in out["devices"]] == [
        (i, v.cli_name, f"cli:{v.clis[0]}+torch") for i in (0, 1)], out
    assert out["messages"] == []


@pytest.mark.parametrize("name", ALL)
def test_devices_auto_detects_the_vendor_from_its_cli(name, cli, tmp_path):
    earlier = [b for b in DETECT_ORDER[: DETECT_ORDER.index(name)] if BACKENDS[b].present()]
    if earlier:
        pytest.skip(f"this machine has {earlier[0]} hardware, which auto-detection picks first")
    v = VENDORS[name]
    tools = tmp_path / "tools"  # only what the fake CLIs need: no other vendor's CLI
    tools.mkdir()
    for tool in ("sh", "dirname", "tr", "sleep"):
        os.symlink(shutil.which(tool), tools / tool)
    env = vendor_env(v, tmp_path, PATH=os.pathsep.join([str(FIX / name / "bin"), str(tools), os.path.dirname(sys.executable)]))
    res = cli("devices", "--json", env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["backend"], out["selected_by"]) == (name, "auto"), out
    assert len(out["devices"]) == 2


@pytest.mark.parametrize("name", ALL)
def test_a_hanging_vendor_cli_costs_no_more_than_its_timeout(name, cli, tmp_path):
    # The first CLI the backend asks hangs (holding its output open in a grandchild);
    # --python names no interpreter, so the torch probe fails at once and the wall time
    # is the harness's start plus the CLI's timeout. The bound is a correctness bound:
    # far below the 120 s the CLI would hang.
    v = VENDORS[name]
    pidfile = tmp_path / "hung.pids"
    env = vendor_env(v, tmp_path, FAKE_SMI_HANG=v.clis[0], FAKE_SMI_HANG_S=120, FAKE_SMI_PIDFILE=pidfile,
                     OPSCREEN_CLI_TIMEOUT=2)
    t0 = time.monotonic()
    res = cli("devices", "--backend", name, "--json", "--python", tmp_path / "no-python", env=env, timeout=300)
    wall = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert f"cli:{v.clis[0]}: timed out after 2 s" in out["messages"], out
    assert wall < 2 + 20, wall
    assert hung_pids(pidfile) and not [p for p in hung_pids(pidfile) if pid_alive(p)], "the hung CLI outlived its timeout"
    if len(v.clis) > 1:  # rocm: amd-smi answers where rocm-smi hung
        assert [(d["index"], d["source"]) for d in out["devices"]] == [(0, "cli:amd-smi"), (1, "cli:amd-smi")]
    else:
        assert out["devices"] == []


# ---------------------------------------------------------------------------- plan


@pytest.mark.parametrize("name", ALL)
def test_plan_uses_the_direct_timer_and_no_cuda_only_plugin(name, cli):
    res = cli("plan", "--backend", name, "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["timer"] == "direct" and plan["vendor"] == VENDORS[name].vendor
    assert plan["plugins"] == ["opscreen.child.device", "opscreen.child.identity", "opscreen.child.report",
                               "opscreen.child.inputs", "opscreen.child.timing"]


def test_mlu_names_torch_mlus_graph_class():
    # torch_mlu has torch.mlu.MLUGraph (torch_mlu/mlu/graphs.py): with graph capture
    # switched on, the graph timer must not fall back to torch.cuda.CUDAGraph.
    assert resolve("mlu").capabilities.graph_api == "torch.mlu.MLUGraph"


# ---------------------------------------------------------------------------- op and run


@pytest.mark.parametrize("name", ALL)
def test_op_runs_the_sample_suite_on_a_fake_device(name, cli, tmp_path):
    v = VENDORS[name]
    out = tmp_path / "op"
    res = cli("op", "add", "--backend", name, "--device", "1", "--dtypes", "float32", "--out", out,
              env=vendor_env(v, tmp_path), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    ident = check_child(out, v, 1)
    if name == "rocm":  # no extension: a ROCm build of torch, and rocm-smi for the driver
        assert ident["torch_extensions"] == {}
        assert ident["runtime_version"] == "6.2.41133-fake"  # torch.version.hip
        # rocm-smi --showdriverversion prints banners around "Driver version: X"
        assert ident["driver_version"] == "6.8.5-fake"
    else:
        assert list(ident["torch_extensions"]) == [v.module] and ident["torch_extensions"][v.module].endswith("+fake")
    if name == "musa":
        assert ident["runtime_version"] == "4.0.0-fake"  # torch.version.musa, set by torch_musa
    check_library_saw_the_vendor(tmp_path, v, "benchmark/test_add.py", {"1"})


@pytest.mark.parametrize("name", ALL)
def test_run_screens_ops_on_two_fake_devices(name, cli, tmp_path):
    v = VENDORS[name]
    run_dir = tmp_path / "run"
    res = cli("run", "--backend", name, "--devices", "0,1", "--ops", "abs,add", "--dtypes", "float32",
              "--out", run_dir, env=vendor_env(v, tmp_path), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    lines = (run_dir / "ops_status.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    assert {(r["op"], r["status"], r["backend"], r["timer"]) for r in rows} == {
        ("abs", "passed", name, "direct"), ("add", "passed", name, "direct")}
    for r in rows:
        check_child(run_dir / "ops" / r["op"], v, int(r["device"]))
    run_ident = json.loads((run_dir / "run_identity.json").read_text())
    assert run_ident["caliber"]["timer"] == "direct" and run_ident["caliber"]["backend"] == name
    for test_file, op in (("benchmark/test_abs.py", "abs"), ("benchmark/test_add.py", "add")):
        device = next(r["device"] for r in rows if r["op"] == op)
        check_library_saw_the_vendor(tmp_path, v, test_file, {device})


def test_the_identity_kills_a_hung_vendor_cli_with_its_group(tmp_path, monkeypatch):
    # The identity plugin asks rocm-smi for the driver version inside the child (and,
    # in a warm worker, a child outlives many ops): a hung rocm-smi is killed with the
    # grandchild that holds its output, at OPSCREEN_CLI_TIMEOUT.
    from opscreen.child import identity

    pidfile = tmp_path / "hung.pids"
    for key, value in vendor_env(VENDORS["rocm"], tmp_path, FAKE_SMI_HANG="rocm-smi", FAKE_SMI_HANG_S=120,
                                 FAKE_SMI_PIDFILE=pidfile, OPSCREEN_CLI_TIMEOUT=1).items():
        monkeypatch.setenv(key, value)
    t0 = time.monotonic()
    assert identity.driver_version({"backend": "rocm"}) is None
    assert time.monotonic() - t0 < 1 + 10  # the timeout, not the 120 s hang
    assert hung_pids(pidfile) and not [p for p in hung_pids(pidfile) if pid_alive(p)]


def test_a_hanging_rocm_smi_in_the_child_costs_it_no_more_than_the_timeout(cli, tmp_path):
    # End to end: the op passes without a driver version, and the child's collection
    # phase (session start, device probe, identity) is bound by OPSCREEN_CLI_TIMEOUT
    # (1 s), not by a fixed 5 s nor by the hang.
    v = VENDORS["rocm"]
    pidfile = tmp_path / "hung.pids"
    out = tmp_path / "op"
    env = vendor_env(v, tmp_path, FAKE_SMI_HANG="rocm-smi", FAKE_SMI_HANG_S=120, FAKE_SMI_PIDFILE=pidfile,
                     OPSCREEN_CLI_TIMEOUT=1)
    res = cli("op", "abs", "--backend", "rocm", "--dtypes", "float32", "--out", out, env=env, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    ident = check_child(out, v, 0)
    assert ident["driver_version"] is None
    assert ident["phases"]["collection_s"] < 1 + 3.5, ident["phases"]
    calls = [line.split()[0] for line in pidfile.read_text().splitlines()]
    assert len(calls) >= 2, calls  # the harness's device listing and the child's driver query
    assert not [p for p in hung_pids(pidfile) if pid_alive(p)], "a hung rocm-smi outlived its timeout"


# ---------------------------------------------------------------------------- vendor Triton timers


def test_the_direct_timer_replaces_moore_threads_triton_do_bench(monkeypatch):
    # FlagGems' benchmark calls triton.musa_testing.do_bench, not triton.testing's, when
    # its device is musa (benchmark/performance_utils.py): the timing plugin must replace
    # that one too, or a MUSA screen records untagged numbers from an unpatched timer.
    import types

    from opscreen.child import timing

    seen = []

    def musa_do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        seen.append(return_mode)
        fn()
        return [0.25, 0.5, 0.75] if return_mode == "all" else 0.5

    triton = types.ModuleType("triton")
    musa_testing = types.ModuleType("triton.musa_testing")
    musa_testing.do_bench = musa_do_bench
    triton.musa_testing = musa_testing
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.musa_testing", musa_testing)
    monkeypatch.delitem(sys.modules, "triton.testing", raising=False)
    state = timing.TimingState()
    state.configure({"timer": "direct", "device_type": "musa", "timing": {"patch_modules": []}}, environ={})
    try:
        assert "triton.musa_testing.do_bench" in state.install()
        out = triton.musa_testing.do_bench(lambda: None, warmup=1, rep=1, return_mode="median")
        assert (out.timer, float(out), out.samples) == ("direct", 0.5, 3) and seen == ["all"]
    finally:
        state.uninstall()
    assert musa_testing.do_bench is musa_do_bench

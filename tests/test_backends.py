from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from opscreen import backends
from opscreen.backends import BACKENDS, all_visible_keys, resolve, select
from opscreen.backends.ascend import parse_npu_smi_info
from opscreen.backends.rocm import parse_amd_smi_list, parse_rocm_smi
from opscreen.errors import UsageError

ALIASES = {
    "cuda": ("cuda", "nvidia"),
    "nvidia": ("cuda", "nvidia"),
    "NVIDIA": ("cuda", "nvidia"),
    "rocm": ("rocm", "amd"),
    "amd": ("rocm", "amd"),
    "hip": ("rocm", "amd"),
    "hygon": ("rocm", "hygon"),
    "DCU": ("rocm", "hygon"),
    "musa": ("musa", "mthreads"),
    "mthreads": ("musa", "mthreads"),
    "moore": ("musa", "mthreads"),
    "mt": ("musa", "mthreads"),
    "ascend": ("ascend", "ascend"),
    "npu": ("ascend", "ascend"),
    "Huawei": ("ascend", "ascend"),
    "cpu": ("cpu", "cpu"),
    "host": ("cpu", "cpu"),
    "cambricon": ("mlu", "cambricon"),
}


@pytest.mark.parametrize("name,expected", sorted(ALIASES.items()))
def test_alias_resolves_to_backend_and_vendor(name, expected):
    b = resolve(name)
    assert (b.name, b.vendor) == expected


def test_registry_has_required_backends_and_device_types():
    want = {"cuda": "cuda", "rocm": "cuda", "musa": "musa", "ascend": "npu", "cpu": "cpu"}
    for name, dtype in want.items():
        assert BACKENDS[name].device_type == dtype


def test_unknown_backend_is_one_line_naming_valid_names():
    with pytest.raises(UsageError) as ei:
        resolve("nosuch")
    msg = str(ei.value)
    assert "\n" not in msg
    for name in ("cuda", "rocm", "musa", "ascend", "cpu", "hygon", "mthreads"):
        assert name in msg


def test_flag_wins_over_zl_backend():
    sel = select("cuda", env={"ZL_BACKEND": "musa"})
    assert sel.name == "cuda" and sel.source == "--backend"
    sel = select(None, env={"ZL_BACKEND": "mthreads"})
    assert sel.name == "musa" and sel.source == "ZL_BACKEND"


def test_auto_detection_falls_back_to_cpu_without_hardware(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no vendor CLI
    for b in BACKENDS.values():
        monkeypatch.setattr(type(b), "device_nodes", property(lambda self: ()), raising=False)
    sel = select(None, env={})
    assert sel.name == "cpu" and sel.source == "default"


def test_visible_devices_env_cuda_sets_exactly_and_clears_others():
    env = resolve("cuda").visible_devices_env([2, 5], all_visible_keys())
    assert env["CUDA_VISIBLE_DEVICES"] == "2,5"
    others = {k: v for k, v in env.items() if k != "CUDA_VISIBLE_DEVICES"}
    assert others and all(v is None for v in others.values())
    assert {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "MUSA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"} <= set(others)


@pytest.mark.parametrize(
    "name,key",
    [("rocm", "HIP_VISIBLE_DEVICES"), ("hygon", "HIP_VISIBLE_DEVICES"), ("musa", "MUSA_VISIBLE_DEVICES"), ("ascend", "ASCEND_RT_VISIBLE_DEVICES"), ("mlu", "MLU_VISIBLE_DEVICES")],
)
def test_visible_devices_env_per_backend(name, key):
    env = resolve(name).visible_devices_env([2, 5], all_visible_keys())
    assert {k: v for k, v in env.items() if v is not None} == {key: "2,5"}
    assert env["CUDA_VISIBLE_DEVICES"] is None  # ROCm honours it too: it must not leak


def test_cpu_sets_no_visible_key_and_clears_all():
    env = resolve("cpu").visible_devices_env([0, 1], all_visible_keys())
    assert all(v is None for v in env.values())


def test_capabilities_and_overrides():
    assert resolve("cuda").capabilities.graph_capture is True
    for name in ("rocm", "musa", "ascend", "cpu"):
        assert resolve(name).capabilities.graph_capture is False
    sel = select("musa", env={}, caps=["graph_capture=on"])
    assert sel.backend.capabilities.graph_capture is True
    sel = select("cuda", env={"OPSCREEN_CAPS": "graph_capture=off"})
    assert sel.backend.capabilities.graph_capture is False
    with pytest.raises(UsageError):
        select("cuda", env={}, caps=["warp_drive=on"])
    with pytest.raises(UsageError):
        select("cuda", env={}, caps=["graph_capture=maybe"])


def _fake_cli(dirpath: Path, name: str, body: str) -> None:
    p = dirpath / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


NVSMI = """GPU 0: NVIDIA H200 (UUID: GPU-5c3e7b1a-1f0e-2f7e-9b61-1f0a4f7e9a01)
GPU 1: NVIDIA H200 (UUID: GPU-9a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d)"""


def test_enumerate_cli_real_nvidia_smi_output(tmp_path, monkeypatch):
    _fake_cli(tmp_path, "nvidia-smi", f"cat <<'EOF'\n{NVSMI}\nEOF")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    en = resolve("cuda").enumerate_cli()
    assert [(d.index, d.name, d.source) for d in en.devices] == [(0, "NVIDIA H200", "cli:nvidia-smi"), (1, "NVIDIA H200", "cli:nvidia-smi")]


def test_enumerate_cli_failing_tool_gives_one_line(tmp_path, monkeypatch):
    _fake_cli(tmp_path, "nvidia-smi", "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2; exit 9")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    en = resolve("cuda").enumerate_cli()
    assert en.devices == []
    assert len(en.messages) == 1 and "status 9" in en.messages[0] and "could not communicate" in en.messages[0]


def test_enumerate_cli_missing_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    en = resolve("ascend").enumerate_cli()
    assert en.devices == [] and en.messages == ["cli:npu-smi: not found on PATH"]


def test_enumerate_cli_hanging_tool_returns_within_timeout(tmp_path, monkeypatch):
    # The fake CLI hangs in a grandchild that keeps the pipe open, the nasty case.
    _fake_cli(tmp_path, "nvidia-smi", "sleep 60 & sleep 60")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("OPSCREEN_CLI_TIMEOUT", "1.5")
    t0 = time.monotonic()
    en = resolve("cuda").enumerate_cli()
    elapsed = time.monotonic() - t0
    assert elapsed < 1.5 + 1.0, elapsed
    assert en.devices == [] and "timed out" in en.messages[0] and "nvidia-smi" in en.messages[0]


def test_devices_command_with_hanging_cli(tmp_path, cli):
    _fake_cli(tmp_path, "nvidia-smi", "sleep 60")
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}", "OPSCREEN_CLI_TIMEOUT": "1"}
    t0 = time.monotonic()
    res = cli("devices", "--backend", "cuda", "--json", env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert any("nvidia-smi: timed out" in m for m in out["messages"])
    assert time.monotonic() - t0 < 60


def test_rocm_and_ascend_parsers():
    rocm = "============ Product Info ============\nGPU[0]\t\t: Card series: \t\tAMD Instinct MI300X OAM\nGPU[0]\t\t: Card model: \t\t0x74a1\nGPU[1]\t\t: Card series: \t\tAMD Instinct MI300X OAM\n"
    assert parse_rocm_smi(rocm) == [(0, "AMD Instinct MI300X OAM"), (1, "AMD Instinct MI300X OAM")]
    assert parse_amd_smi_list("GPU: 0\n    BDF: 0000:05:00.0\nGPU: 1\n    BDF: 0000:26:00.0\n") == [(0, "AMD GPU"), (1, "AMD GPU")]
    npu = (
        "+------------------------------------------------------------------------------------------------+\n"
        "| npu-smi 23.0.rc2                 Version: 23.0.rc2                                             |\n"
        "+---------------------------+---------------+----------------------------------------------------+\n"
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
        "+===========================+===============+====================================================+\n"
        "| 0     910B3               | OK            | 93.2        40                0    / 0             |\n"
        "| 0                         | 0000:C1:00.0  | 0           0    / 0          3161 / 65536         |\n"
        "+===========================+===============+====================================================+\n"
        "| 1     910B3               | OK            | 90.1        41                0    / 0             |\n"
    )
    assert parse_npu_smi_info(npu) == [(0, "Ascend 910B3"), (1, "Ascend 910B3")]


def test_backends_json_lists_everything(cli):
    res = cli("backends", "--json")
    assert res.returncode == 0
    data = json.loads(res.stdout)
    by = {b["name"]: b for b in data["backends"]}
    assert {"cuda", "rocm", "musa", "ascend", "cpu"} <= set(by)
    assert by["cuda"]["visible_env"] == ["CUDA_VISIBLE_DEVICES"]
    assert by["rocm"]["aliases"]["hygon"] == "hygon"
    assert by["cuda"]["capabilities"]["graph_capture"] is True
    assert data["detect_order"][-1] == "cpu"


@pytest.mark.parametrize("asked", ["rocm", "hygon", "cuda", "musa", "ascend", "mlu"])
def test_devices_messages_name_the_backend_asked_for(tmp_path, cli, asked):
    # No vendor CLI on PATH, and this interpreter's torch sees no accelerator:
    # every message must name the backend asked for, never another one.
    name = resolve(asked).name
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.path.dirname(sys.executable)}"}
    res = cli("devices", "--backend", asked, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"no {name} devices found" in res.stdout, res.stdout
    others = {b for b in ("cuda", "rocm", "musa", "ascend", "mlu") if b != name}
    for line in res.stdout.splitlines():
        assert not any(f"no {o} device" in line for o in others), line
    torch_notes = [m for m in res.stderr.splitlines() if "note: torch:" in m and "sees no" in m]
    for note in torch_notes:
        assert f"sees no {name} " in note, note


def _stub_torch(dirpath: Path, hip: str | None) -> Path:
    """A stand-in torch whose 'cuda' module sees two devices, built for CUDA or HIP."""
    pkg = dirpath / "stub" / "torch"
    pkg.mkdir(parents=True)
    pkg.joinpath("__init__.py").write_text(
        "__version__ = '9.9.9+stub'\n"
        f"class version:\n    hip = {hip!r}\n    cuda = {None if hip else '12.6'!r}\n"
        "class cuda:\n"
        "    is_available = staticmethod(lambda: True)\n"
        "    device_count = staticmethod(lambda: 2)\n"
        f"    get_device_name = staticmethod(lambda i: {'AMD Instinct MI300X' if hip else 'NVIDIA H200'!r})\n"
    )
    return pkg.parent


@pytest.mark.parametrize("asked,hip,listed", [
    ("rocm", None, False), ("hygon", None, False), ("cuda", "6.2.41133", False),
    ("rocm", "6.2.41133", True), ("cuda", None, True),
])
def test_torch_probe_lists_only_devices_of_the_backend_asked_for(tmp_path, cli, asked, hip, listed):
    # rocm and cuda torch builds both expose 'cuda' devices: --backend rocm on an
    # NVIDIA machine must not list the H200s as rocm devices, nor the reverse.
    stub = _stub_torch(tmp_path, hip)
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.path.dirname(sys.executable)}",
           "PYTHONPATH": f"{Path(backends.__file__).parents[2]}{os.pathsep}{stub}"}
    res = cli("devices", "--backend", asked, "--json", env=env)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert bool(out["devices"]) is listed, out
    if not listed:
        name = resolve(asked).name
        assert any(m.startswith("torch: torch 9.9.9+stub is") and f"not {name} devices" in m for m in out["messages"]), out
